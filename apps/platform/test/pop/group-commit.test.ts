import { describe, expect } from 'vitest';
import type { Db } from '../../src/db/pool.js';
import { readMarks } from '../../src/pop/batch-context.js';
import { type GroupEntry, GroupCommitter } from '../../src/pop/group-commit.js';
import { popEvents } from '../../src/pop/index.js';
import { judgeRecords, settle } from '../../src/pop/judge.js';
import { agentBuckets } from '../../src/pop/rate-limits.js';
import {
  agentBody,
  answerOf,
  batchCount,
  countedPlays,
  play,
  postTelemetry,
  sendBatch,
  sha256,
  T0,
  type TestDevice,
} from './helpers.js';
import { APPROVAL, popWorld } from './world.js';

/*
 * Group commit of agent batches (src/pop/group-commit.ts): batches that arrive while a group is being written go
 * together in one transaction, and every per-batch guarantee of the one-batch statement still holds.
 */
const test = popWorld({ approvals: [{ number: APPROVAL, structures: [0] }] });
const owner = (device: { id: string }) => `device:${device.id}`;

/** What the agent route hands to the committer, for `events` judged against `marks` (default: as stored). */
async function entryFor(
  db: Db,
  device: TestDevice,
  batchSeq: number,
  events: unknown[],
  options: { marks?: Map<string, number>; legacy?: boolean; structureId?: string } = {},
): Promise<GroupEntry> {
  const key = owner(device);
  const marks = options.marks ?? (await readMarks(db, [key]));
  const player = {
    key,
    structureId: options.structureId ?? device.structure.id,
    structureCode: device.structure.code,
  };
  const verdicts = judgeRecords(events, {
    channel: 'agent',
    receivedAt: T0,
    attested: false,
    playerOf: () => player,
    approval: () => undefined,
  });
  const settled = settle(verdicts, marks);
  const body = agentBody(device, batchSeq, events);
  return {
    batch: {
      owner: key,
      batchSeq,
      channel: options.legacy ? 'legacy' : 'agent',
      body,
      bodySha256: sha256(body),
      receivedAt: T0,
      receiveDay: '2026-11-20',
      recordCount: events.length,
      answer: {
        batch_seq: batchSeq,
        received: settled.received,
        accepted: settled.accepted,
        duplicates: settled.duplicates,
        refused: settled.refused,
        flagged: settled.flagged,
        duplicate: false,
        items: settled.items,
      },
      attested: false,
    },
    settled,
    readMarks: marks,
    buckets: agentBuckets(device.id),
    legacy: options.legacy ?? false,
    now: () => T0,
  };
}

const plays = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => play(from + i));

/** A committer that writes one group at a time: entries given in one turn of the event loop are one group. */
const oneAtATime = (db: Db) =>
  new GroupCommitter(db, { concurrency: 1, maxBatches: 256, maxRecords: 20_000, maxBodyBytes: 16_000_000 });

describe('group commit of agent batches', () => {
  test('many devices at once over HTTP: grouped, and every answer, body, count and mark is right', async ({
    world,
    db,
    servers,
    ctx,
  }) => {
    const devices = await Promise.all(Array.from({ length: 40 }, () => world.newDevice()));
    const committer = ctx.caches.pop.committer;
    const before = { ...committer.stats };
    const bodies = devices.map((device, d) => agentBody(device, 0, plays(1, 5 + (d % 7))));
    const answers = (
      await Promise.all(devices.map((device, d) => postTelemetry(servers, device, bodies[d]!)))
    ).map(answerOf);
    const after = committer.stats;
    // 40 batches in fewer transactions than batches: at least one group held more than one of them.
    expect(after.batches - before.batches).toBe(40);
    expect(after.groups - before.groups).toBeLessThan(40);
    expect(after.largestGroup).toBeGreaterThan(1);
    for (const [d, device] of devices.entries()) {
      expect(answers[d]).toMatchObject({ accepted: 5 + (d % 7), duplicates: 0, duplicate: false, items: [] });
      expect(await countedPlays(db, owner(device))).toBe(5 + (d % 7));
      const { rows } = await db.query(
        'SELECT b.body, p.high_water_seq FROM pop_batches b JOIN pop_players p ON p.player_key = b.owner WHERE b.owner = $1',
        [owner(device)],
      );
      expect(Buffer.compare(rows[0].body, bodies[d]!)).toBe(0);
      expect(rows[0].high_water_seq).toBe(5 + (d % 7));
      const { rows: records } = await db.query(
        'SELECT count(*)::int AS n FROM pop_records WHERE player_key = $1',
        [owner(device)],
      );
      expect(records[0].n).toBe(5 + (d % 7));
    }
  });

  test('one group, four outcomes: stored, taken (batch_seq already stored), rate-limited, legacy after pop', async ({
    world,
    db,
    servers,
  }) => {
    const [fresh, stored, limited, legacy] = await Promise.all([
      world.newDevice(),
      world.newDevice(),
      world.newDevice(),
      world.newDevice(),
    ]);
    answerOf(await sendBatch(servers, stored!, 0, plays(1, 2)));
    answerOf(await sendBatch(servers, legacy!, 0, plays(1, 2)));
    // The device's burst of 3 is spent (one batch every 10 s beyond it).
    await db.query('INSERT INTO pop_rate_buckets (bucket_key, tokens, updated_at) VALUES ($1, 0, $2)', [
      `agent:${limited!.id}`,
      T0,
    ]);
    const entries = [
      await entryFor(db, fresh!, 0, plays(1, 3)),
      await entryFor(db, stored!, 0, plays(1, 4), { marks: new Map() }),
      await entryFor(db, limited!, 0, plays(1, 3)),
      await entryFor(db, legacy!, 1, plays(3, 4), { legacy: true }),
    ];
    const committer = oneAtATime(db);
    const results = await Promise.all(entries.map((entry) => committer.store(entry)));
    expect(committer.stats).toMatchObject({ groups: 1, batches: 4, largestGroup: 4, fallbacks: 0 });
    expect(results[0]).toMatchObject({ kind: 'stored' });
    expect(results[1]).toEqual({ kind: 'taken' });
    expect(results[2]!.kind).toBe('rate_limited');
    // An empty bucket refilled at one token per 10 s: the next batch in 10 s.
    expect((results[2] as { wait: number }).wait).toBeCloseTo(10, 6);
    expect(results[3]).toEqual({ kind: 'taken' });
    // Only the fresh batch was written; the others left their batches, counts and marks as they were.
    expect(await countedPlays(db, owner(fresh!))).toBe(3);
    expect(await countedPlays(db, owner(stored!))).toBe(2);
    expect(await batchCount(db, owner(stored!))).toBe(1);
    expect(await countedPlays(db, owner(limited!))).toBe(0);
    expect(await batchCount(db, owner(limited!))).toBe(0);
    expect(await countedPlays(db, owner(legacy!))).toBe(2);
    expect((await readMarks(db, [owner(legacy!)])).get(owner(legacy!))).toBe(2);
    const { rows } = await db.query('SELECT tokens FROM pop_rate_buckets WHERE bucket_key = $1', [
      `agent:${limited!.id}`,
    ]);
    expect(rows[0].tokens).toBe(0);
  });

  test('a mark moved since it was read: the group is rolled back and each batch stored on its own', async ({
    world,
    db,
    servers,
  }) => {
    const [moved, other] = await Promise.all([world.newDevice(), world.newDevice()]);
    answerOf(await sendBatch(servers, moved!, 0, plays(1, 2)));
    const entries = [
      // Judged as if the mark were still 0.
      await entryFor(db, moved!, 1, plays(1, 3), { marks: new Map([[owner(moved!), 0]]) }),
      await entryFor(db, other!, 0, plays(1, 3)),
    ];
    const committer = oneAtATime(db);
    const results = await Promise.all(entries.map((entry) => committer.store(entry)));
    expect(committer.stats).toMatchObject({ groups: 0, fallbacks: 1 });
    expect(results).toEqual([{ kind: 'marks_moved' }, { kind: 'stored', id: expect.any(Number) }]);
    expect(await countedPlays(db, owner(moved!))).toBe(2);
    expect(await batchCount(db, owner(moved!))).toBe(1);
    expect(await countedPlays(db, owner(other!))).toBe(3);
  });

  test('a batch the database refuses fails alone: the rest of its group is stored', async ({ world, db }) => {
    const [bad, good1, good2] = await Promise.all([world.newDevice(), world.newDevice(), world.newDevice()]);
    const entries = [
      await entryFor(db, good1!, 0, plays(1, 2)),
      // A structure id the database cannot take (never produced by the reading query): its statement fails.
      await entryFor(db, bad!, 0, plays(1, 2), { structureId: 'not-a-uuid' }),
      await entryFor(db, good2!, 0, plays(1, 4)),
    ];
    const committer = oneAtATime(db);
    const settledResults = await Promise.allSettled(entries.map((entry) => committer.store(entry)));
    expect(committer.stats.fallbacks).toBe(1);
    expect(settledResults.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await countedPlays(db, owner(good1!))).toBe(2);
    expect(await countedPlays(db, owner(good2!))).toBe(4);
    expect(await batchCount(db, owner(bad!))).toBe(0);
    expect((await readMarks(db, [owner(bad!)])).get(owner(bad!))).toBe(0);
  });

  test('two batches of one device at once go in successive groups; over HTTP both are counted, once', async ({
    world,
    db,
    servers,
    device,
  }) => {
    const committer = oneAtATime(db);
    const [first, second] = await Promise.all([
      entryFor(db, device, 0, plays(1, 3), { marks: new Map() }),
      entryFor(db, device, 1, plays(4, 6), { marks: new Map() }),
    ]);
    const results = await Promise.all([committer.store(first!), committer.store(second!)]);
    // The second was judged before the first was stored (marks 0): it must be judged again, not stored.
    expect(results).toEqual([{ kind: 'stored', id: expect.any(Number) }, { kind: 'marks_moved' }]);
    expect(committer.stats.groups).toBe(1);
    expect(committer.stats.fallbacks).toBe(1);

    const other = await world.newDevice();
    const answers = (
      await Promise.all([
        sendBatch(servers, other, 0, plays(1, 3)),
        sendBatch(servers, other, 1, plays(4, 6)),
        sendBatch(servers, other, 2, plays(5, 9)),
      ])
    ).map(answerOf);
    const accepted = answers.reduce((n, a) => n + a.accepted, 0);
    expect(await countedPlays(db, owner(other))).toBe(accepted);
    // Whatever the order, seq 1..9 each counted at most once; 9 is the mark.
    expect(accepted).toBeLessThanOrEqual(9);
    expect((await readMarks(db, [owner(other)])).get(owner(other))).toBe(9);
    const { rows } = await db.query(
      'SELECT seq FROM pop_records WHERE player_key = $1 GROUP BY seq HAVING count(*) > 1',
      [owner(other)],
    );
    expect(rows).toEqual([]);
  });

  test('records written by the group read back as sent: events, escapes, offsets, flags, src, detail', async ({
    db,
    servers,
    device,
  }) => {
    const at = '2026-11-20T10:58:00.125+05:00';
    const src = { channel: 'rtb', seller_id: 'sel\\ler\t"x"\n', deal_id: 'd.1:x' };
    const events = [
      play(1, { approval_number: 'A\tB\\C\nD\r', detail: { src } }),
      play(2, { approval_number: 'А-кириллица-№1', screen: { power: 'off' }, play_id: undefined }),
      play(3, {
        start: '2026-11-20T10:59:00+05:00',
        end: '2026-11-20T10:59:30.5+05:00',
        duration_ms: 30_500,
      }),
      { kind: 'reject', seq: 4, at, code: 'HASH_MISMATCH', detail: { file: 'ad\t.mp4', n: [1, 2] } },
      play(5, { slot: 'gov', approval_number: undefined, duration_ms: 2 ** 40 }),
    ];
    const answer = answerOf(await sendBatch(servers, device, 0, events));
    // The slot play's duration_ms is far from its 15 s between start and end: timing_mismatch.
    expect(answer).toMatchObject({ received: 5, accepted: 5, flagged: 3 });
    const { rows } = await db.query(
      `SELECT record_index, kind, seq, approval_number, slot, media_sha256, start_at, end_at, duration_ms, at, flags,
              screen_power, code, play_id, src, detail, attested, day::text AS day, receive_day::text AS receive_day,
              structure_id
         FROM pop_records WHERE player_key = $1 ORDER BY record_index`,
      [owner(device)],
    );
    expect(rows.map((r) => r.approval_number)).toEqual([
      'A\tB\\C\nD\r',
      'А-кириллица-№1',
      'A-2026-000001',
      null,
      null,
    ]);
    expect(rows[0].src).toEqual(src);
    expect(rows[0].flags).toEqual(['approval_unknown']);
    expect(rows[1].flags).toEqual(['approval_unknown', 'screen_off']);
    expect(rows[1].play_id).toBeNull();
    expect(rows[1].screen_power).toBe('off');
    expect(rows[2].flags).toEqual([]);
    expect(rows[2].start_at.toISOString()).toBe('2026-11-20T05:59:00.000Z');
    expect(rows[2].end_at.toISOString()).toBe('2026-11-20T05:59:30.500Z');
    expect(rows[2].play_id).toBe('p3');
    expect(rows[3]).toMatchObject({
      kind: 'reject',
      seq: 4,
      code: 'HASH_MISMATCH',
      detail: { file: 'ad\t.mp4', n: [1, 2] },
    });
    expect(rows[3].at.toISOString()).toBe('2026-11-20T05:58:00.125Z');
    expect(rows[3].start_at).toBeNull();
    expect(rows[4]).toMatchObject({ slot: 'gov', duration_ms: 2 ** 40, seq: 5, flags: ['timing_mismatch'] });
    for (const row of rows) {
      expect(row).toMatchObject({
        attested: false,
        day: '2026-11-20',
        receive_day: '2026-11-20',
        structure_id: device.structure.id,
      });
    }
    expect(rows[0].media_sha256).toBe('a'.repeat(64));
    expect((await popEvents(db, owner(device))).map((e) => e.at)).toEqual(['2026-11-20T05:58:00.125Z']);
  });
});
