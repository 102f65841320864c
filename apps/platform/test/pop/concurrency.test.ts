import { randomBytes } from 'node:crypto';
import { describe, expect } from 'vitest';
import {
  agentBody,
  answerOf,
  batchCount,
  cmsBody,
  cmsPlay,
  countedPlays,
  insertDevice,
  play,
  postCms,
  postTelemetry,
  problemOf,
  registerSource,
  sendBatch,
  T0,
  sha256,
} from './helpers.js';
import { judgeRecords, settle } from '../../src/pop/judge.js';
import { readMarks } from '../../src/pop/batch-context.js';
import { ensureRecordPartition, storeBatch } from '../../src/pop/store.js';
import { popWorld } from './world.js';

/*
 * Two platform instances (own servers, own pools, own caches) on one database, as DESIGN.md section 2 requires:
 * "Several platform processes may run against one database: nothing may depend on being the only instance".
 */
const test = popWorld({ instances: 2 })
  .extend('a', { scope: 'file' }, ({ world }) => world.instances[0]!.servers)
  .extend('b', { scope: 'file' }, ({ world }) => world.instances[1]!.servers);

describe('two instances, one database', () => {
  test('the same agent batch racing on both instances is stored and counted once', async ({
    db,
    operator,
    a,
    b,
  }) => {
    for (let round = 0; round < 15; round += 1) {
      const device = await insertDevice(db, operator.structures[0]!);
      const body = agentBody(
        device,
        0,
        Array.from({ length: 50 }, (_, i) => play(i + 1)),
      );
      const answers = (
        await Promise.all([postTelemetry(a, device, body), postTelemetry(b, device, body)])
      ).map(answerOf);
      expect(answers.map((x) => x.duplicate).sort()).toEqual([false, true]);
      expect(answers[0]).toEqual({ ...answers[1], duplicate: answers[0]!.duplicate });
      expect(await countedPlays(db, `device:${device.id}`)).toBe(50);
      expect(await batchCount(db, `device:${device.id}`)).toBe(1);
    }
  });

  test('the same CMS batch racing on both instances is counted once', async ({
    db,
    operator,
    platform,
    setNow,
    a,
    b,
  }) => {
    const source = await registerSource(platform, operator, {
      s1: operator.structures[0]!,
      s2: operator.structures[1]!,
    });
    for (let round = 0; round < 8; round += 1) {
      // A second per round: the installation's burst of 10 is not what this test is about.
      setNow(new Date(T0.getTime() + round * 1000));
      const records = Array.from({ length: 200 }, (_, i) =>
        cmsPlay(i % 2 ? 's1' : 's2', round * 100 + Math.floor(i / 2) + 1, {
          play_id: randomBytes(12).toString('base64url'),
        }),
      );
      const body = cmsBody(source, round, records);
      const answers = (
        await Promise.all([postCms(a, source, body, { gzip: true }), postCms(b, source, body)])
      ).map(answerOf);
      expect(answers.map((x) => x.duplicate).sort()).toEqual([false, true]);
    }
    setNow(T0);
    expect(await countedPlays(db, `cms:${source.id}:s1`)).toBe(800);
    expect(await countedPlays(db, `cms:${source.id}:s2`)).toBe(800);
  });

  test('one batch_seq, two bodies racing: one is taken, the other is 409 batch_conflict', async ({
    device,
    a,
    b,
  }) => {
    const [x, y] = await Promise.all([
      sendBatch(a, device, 0, [play(1)]),
      sendBatch(b, device, 0, [play(1), play(2)]),
    ]);
    expect([x.statusCode, y.statusCode].sort()).toEqual([200, 409]);
    const conflict = x.statusCode === 409 ? x : y;
    problemOf(conflict, 409, 'batch_conflict');
  });

  test('overlapping seq ranges of one player racing: every number counted once', async ({
    db,
    operator,
    platform,
    a,
    b,
  }) => {
    const source = await registerSource(platform, operator, { p: operator.structures[0]! });
    const range = (from: number, to: number) =>
      Array.from({ length: to - from + 1 }, (_, i) => cmsPlay('p', from + i));
    const answers = (
      await Promise.all([
        postCms(a, source, cmsBody(source, 0, range(1, 60))),
        postCms(b, source, cmsBody(source, 1, range(30, 90))),
        postCms(a, source, cmsBody(source, 2, range(80, 100))),
      ])
    ).map(answerOf);
    const accepted = answers.reduce((sum, x) => sum + x.accepted, 0);
    const counted = await countedPlays(db, `cms:${source.id}:p`);
    expect(counted).toBe(accepted);
    // However the three were ordered, no number is counted twice and the highest is counted.
    expect(counted).toBeLessThanOrEqual(100);
    const { rows } = await db.query(
      'SELECT seq, count(*)::int AS n FROM pop_records WHERE player_key = $1 GROUP BY seq HAVING count(*) > 1',
      [`cms:${source.id}:p`],
    );
    expect(rows).toEqual([]);
  });

  test("rate limits are shared: a device's burst of 3 counts across instances", async ({
    device,
    setNow,
    a,
    b,
  }) => {
    const at = new Date(T0.getTime() + 3 * 24 * 3600_000);
    setNow(at);
    answerOf(await sendBatch(a, device, 0, [play(1, {}, at)], { ts: at }));
    answerOf(await sendBatch(b, device, 1, [play(2, {}, at)], { ts: at }));
    answerOf(await sendBatch(a, device, 2, [play(3, {}, at)], { ts: at }));
    problemOf(await sendBatch(b, device, 3, [play(4, {}, at)], { ts: at }), 429, 'rate_limited');
  });

  test('a high-water mark moved after it was read: the store statement writes nothing and says so', async ({
    db,
    operator,
    device,
    a,
  }) => {
    const key = `device:${device.id}`;
    answerOf(await sendBatch(a, device, 0, [play(1), play(2)]));
    // Judged as if the mark were still 0 (read before the batch above was stored).
    const stale = new Map([[key, 0]]);
    const verdicts = judgeRecords([play(1), play(2), play(3)], {
      channel: 'agent',
      receivedAt: T0,
      attested: false,
      playerOf: () => ({
        key,
        structureId: operator.structures[0]!.id,
        structureCode: operator.structures[0]!.code,
      }),
      approval: () => undefined,
    });
    const settled = settle(verdicts, stale);
    expect(settled.accepted).toBe(3);
    const body = Buffer.from('{}');
    const result = await storeBatch(db, {
      batch: {
        owner: key,
        batchSeq: 1,
        channel: 'agent',
        body,
        bodySha256: sha256(body),
        receivedAt: T0,
        receiveDay: '2026-11-20',
        recordCount: 3,
        answer: {
          batch_seq: 1,
          received: 3,
          accepted: 3,
          duplicates: 0,
          refused: 0,
          flagged: 0,
          duplicate: false,
          items: [],
        },
        attested: false,
      },
      settled,
      readMarks: stale,
      buckets: [],
      legacy: false,
      now: () => T0,
    });
    expect(result).toEqual({ kind: 'marks_moved' });
    expect(await batchCount(db, key)).toBe(1);
    expect(await countedPlays(db, key)).toBe(2);
    // Judged again on the marks as they are, the same batch goes through (only seq 3 is new).
    const fresh = await readMarks(db, [key]);
    expect(fresh.get(key)).toBe(2);
    const again = settle(verdicts, fresh);
    const stored = await storeBatch(db, {
      batch: {
        owner: key,
        batchSeq: 1,
        channel: 'agent',
        body,
        bodySha256: sha256(body),
        receivedAt: T0,
        receiveDay: '2026-11-20',
        recordCount: 3,
        answer: {
          batch_seq: 1,
          received: 3,
          accepted: 1,
          duplicates: 2,
          refused: 0,
          flagged: 0,
          duplicate: false,
          items: [],
        },
        attested: false,
      },
      settled: again,
      readMarks: fresh,
      buckets: [],
      legacy: false,
      now: () => T0,
    });
    expect(stored.kind).toBe('stored');
    expect(await countedPlays(db, key)).toBe(3);
  });

  test('a revocation seen by one instance is enforced by the other at once', async ({ db, device, b }) => {
    answerOf(await sendBatch(b, device, 0, [play(1)]));
    await db.query('UPDATE devices SET revoked_at = $2 WHERE id = $1', [device.id, T0]);
    problemOf(await sendBatch(b, device, 1, [play(2)]), 401, 'device_unauthorized');
  });
});

/** An agent batch of `plays` judged for the device `key` against `marks`, as the store takes it. */
function agentStoreArgs(args: {
  key: string;
  structure: { id: string; code: string };
  plays: ReturnType<typeof play>[];
  marks: Map<string, number>;
  buckets: Parameters<typeof storeBatch>[1]['buckets'];
  body: string;
}): Parameters<typeof storeBatch>[1] {
  const verdicts = judgeRecords(args.plays, {
    channel: 'agent',
    receivedAt: T0,
    attested: false,
    playerOf: () => ({ key: args.key, structureId: args.structure.id, structureCode: args.structure.code }),
    approval: () => undefined,
  });
  const settled = settle(verdicts, args.marks);
  const body = Buffer.from(args.body);
  return {
    batch: {
      owner: args.key,
      batchSeq: 0,
      channel: 'agent',
      body,
      bodySha256: sha256(body),
      receivedAt: T0,
      receiveDay: '2026-11-20',
      recordCount: args.plays.length,
      answer: {
        batch_seq: 0,
        received: args.plays.length,
        accepted: args.plays.length,
        duplicates: 0,
        refused: 0,
        flagged: 0,
        duplicate: false,
        items: [],
      },
      attested: false,
    },
    settled,
    readMarks: args.marks,
    buckets: args.buckets,
    legacy: false,
    now: () => T0,
  };
}

/** Waits until a store is waiting for a rate bucket's lock (its pop_take_limits), at most 5 s. */
async function storeWaitsForTokens(db: Parameters<typeof storeBatch>[0]): Promise<boolean> {
  for (let i = 0; i < 200; i += 1) {
    const { rows } = await db.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%pop_take_limits%'`,
    );
    if (rows[0].n > 0) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return false;
}

/** A device's agent rate bucket, stored with `tokens` left (capacity 3, one token every 10 s). */
async function agentBucket(db: Parameters<typeof storeBatch>[0], deviceId: string, tokens: number) {
  const bucket = { key: `agent:${deviceId}`, capacity: 3, perSecond: 0.1, cost: 1 };
  await db.query('INSERT INTO pop_rate_buckets (bucket_key, tokens, updated_at) VALUES ($1, $2, $3)', [
    bucket.key,
    tokens,
    T0,
  ]);
  return bucket;
}

/** Another instance's transaction that has set `bucket`'s tokens and holds its row lock, not yet committed. */
async function holdingBucket(db: Parameters<typeof storeBatch>[0], bucketKey: string, tokens: number) {
  const other = await db.connect();
  await other.query('BEGIN');
  await other.query('UPDATE pop_rate_buckets SET tokens = $2 WHERE bucket_key = $1', [bucketKey, tokens]);
  return other;
}

describe('rate tokens taken last', () => {
  test('tokens another instance takes meanwhile: the batch looked fine, yet it is refused and nothing stored', async ({
    db,
    operator,
    device,
  }) => {
    const key = `device:${device.id}`;
    const bucket = await agentBucket(db, device.id, 1);
    // Another instance takes the last token and has not committed yet.
    const other = await holdingBucket(db, bucket.key, 0);
    try {
      const storing = storeBatch(
        db,
        agentStoreArgs({
          key,
          structure: operator.structures[0]!,
          plays: [play(1), play(2)],
          marks: new Map(),
          buckets: [bucket],
          body: '{"b":1}',
        }),
      );
      // The store reads a token (the other's update is not committed), writes, and waits for the bucket's lock.
      expect(await storeWaitsForTokens(db)).toBe(true);
      await other.query('COMMIT');
      expect(await storing).toEqual({ kind: 'rate_limited', wait: expect.closeTo(10, 6) });
    } finally {
      other.release();
    }
    expect(await batchCount(db, key)).toBe(0);
    expect(await countedPlays(db, key)).toBe(0);
    expect((await readMarks(db, [key])).get(key)).toBe(0);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM pop_records WHERE player_key = $1', [
      key,
    ]);
    expect(rows[0].n).toBe(0);
  });

  test('a deadlock with a group locking the bucket first is judged again, never a 500', async ({
    db,
    operator,
    device,
  }) => {
    // The group statement locks a device's bucket, then its mark; storeBatch (a failed group's batches, one by one)
    // locks the mark, then the bucket. Another instance holding the bucket and then asking for the mark is a cycle:
    // PostgreSQL aborts the store, which waited first, and the caller reads the marks and stores again.
    const key = `device:${device.id}`;
    const bucket = await agentBucket(db, device.id, 3);
    await ensureRecordPartition(db, '2026-11-20', new Set());
    // The device's mark row exists (a device that has sent before), so the store's compare-and-set locks it.
    await db.query('INSERT INTO pop_players (player_key, high_water_seq, previous_seq) VALUES ($1, 1, 0)', [
      key,
    ]);
    const other = await holdingBucket(db, bucket.key, 2);
    try {
      const storing = storeBatch(
        db,
        agentStoreArgs({
          key,
          structure: operator.structures[0]!,
          plays: [play(2), play(3)],
          marks: new Map([[key, 1]]),
          buckets: [bucket],
          body: '{"d":1}',
        }),
      );
      expect(await storeWaitsForTokens(db)).toBe(true);
      // The other instance now wants the mark the store holds: the cycle.
      const marking = other.query(
        'UPDATE pop_players SET high_water_seq = high_water_seq WHERE player_key = $1',
        [key],
      );
      const outcome = await Promise.race([
        storing,
        new Promise((resolve) => setTimeout(() => resolve('no deadlock within 20 s'), 20_000)),
      ]);
      expect(outcome).toEqual({ kind: 'marks_moved' });
      await marking;
    } finally {
      await other.query('ROLLBACK').catch(() => {});
      other.release();
    }
    expect(await batchCount(db, key)).toBe(0);
    expect(await countedPlays(db, key)).toBe(0);
  });
});
