import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { addDays, almatyDate, almatyDayEnd, almatyDayStart } from '@ooh/protocol';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { loadAuthority } from '../../src/authority/index.js';
import type { Db } from '../../src/db/pool.js';
import { runSealScheduler } from '../../src/seals/index.js';
import { type PublicSource, verifySeal } from '../../src/verifier/index.js';
import {
  agentBody,
  cmsBody,
  cmsPlay,
  createOperator,
  insertDevice,
  type PopCluster,
  type PopInstance,
  play,
  postCms,
  postTelemetry,
  registerSource,
  startPopCluster,
  type TestDevice,
  type TestSource,
} from '../pop/helpers.js';
import { apiCall } from '../support/platform.js';
import { createTestDatabase } from '../support/database.js';

/*
 * Issue "Trust under attack", item 1: every stored batch belongs to exactly one seal, whichever instance stores it
 * and however late its transaction commits; a seal, once published, covers every batch stored for its day.
 * Each scenario here stored a batch under a day already sealed before migration 064.
 */

const DAY = '2026-11-20';
const NEXT = addDays(DAY, 1);
const MIDNIGHT = almatyDayEnd(DAY);
const at = (offsetMs: number) => new Date(MIDNIGHT.getTime() + offsetMs);

interface World {
  cluster: PopCluster;
  dataDir: string;
  device: TestDevice;
  /** More devices, for the property test. */
  devices: TestDevice[];
  source: TestSource;
  /** Next batch_seq and record seq of the device and of the CMS player. */
  next: { deviceBatch: number; deviceSeq: number; sourceBatch: number; sourceSeq: number };
}

let w: World;

beforeEach(async () => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-seal-invariant-'));
  const cluster = await startPopCluster({ instances: 3, now: at(-60_000), dataDir });
  const operator = await createOperator(cluster.platform, 2);
  const device = await insertDevice(cluster.db, operator.structures[0]!, at(-3_600_000));
  const devices: TestDevice[] = [];
  for (let i = 0; i < 6; i += 1) {
    devices.push(await insertDevice(cluster.db, operator.structures[0]!, at(-3_600_000)));
  }
  const source = await registerSource(cluster.platform, operator, { 'screen-1': operator.structures[1]! });
  w = {
    cluster,
    dataDir,
    device,
    devices,
    source,
    next: { deviceBatch: 1, deviceSeq: 1, sourceBatch: 0, sourceSeq: 1 },
  };
});
afterEach(async () => {
  await w?.cluster.close();
  if (w) await rm(w.dataDir, { recursive: true, force: true });
});

/** An agent batch of two plays, signed, from `instance` at its clock. */
function sendAgent(instance: PopInstance): Promise<LightMyRequestResponse> {
  const now = instance.clock.now();
  const seq = w.next.deviceSeq;
  w.next.deviceSeq += 2;
  const end = new Date(now.getTime() - 30_000);
  const body = agentBody(w.device, w.next.deviceBatch++, [play(seq, {}, end), play(seq + 1, {}, end)], {
    ts: now,
  });
  return postTelemetry(instance.servers, w.device, body);
}

/** A CMS batch of three plays from `instance`. */
function sendCms(instance: PopInstance): Promise<LightMyRequestResponse> {
  const end = new Date(instance.clock.now().getTime() - 30_000);
  const seq = w.next.sourceSeq;
  w.next.sourceSeq += 3;
  const body = cmsBody(w.source, w.next.sourceBatch++, [
    cmsPlay('screen-1', seq, {}, end),
    cmsPlay('screen-1', seq + 1, {}, end),
    cmsPlay('screen-1', seq + 2, {}, end),
  ]);
  return postCms(instance.servers, w.source, body);
}

function accepted(res: LightMyRequestResponse): void {
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json<{ duplicate: boolean; refused: number }>()).toMatchObject({ duplicate: false, refused: 0 });
}

function sealThrough(instance: PopInstance, day: string): Promise<LightMyRequestResponse> {
  return apiCall(instance.servers.api, w.cluster.adminKey, 'POST', `/api/v1/console/seals/${day}`);
}

interface SealBody {
  day: string;
  batch_count: number;
  record_count: number;
}

/** What the database holds for a receive day, counted the way a seal counts it. */
async function stored(db: Db, day: string): Promise<{ batch_count: number; record_count: number }> {
  const { rows } = await db.query<{ batch_count: number; record_count: number }>(
    `SELECT count(*)::int AS batch_count, coalesce(sum(record_count), 0)::int AS record_count
       FROM pop_batches WHERE receive_day = $1`,
    [day],
  );
  return rows[0]!;
}

/** The public seal of `day`, checked by the verifier against the day's batch export; gives the leaves' owners. */
async function verifiedDay(instance: PopInstance, day: string): Promise<{ owner: string; seq: number }[]> {
  const exported = await apiCall(
    instance.servers.api,
    w.cluster.adminKey,
    'GET',
    `/api/v1/console/seals/${day}/batches`,
  );
  expect(exported.statusCode, exported.body).toBe(200);
  const source: PublicSource = {
    origin: 'inject',
    get: async (url) => {
      const res = await instance.servers.verify.inject({ method: 'GET', url });
      return { status: res.statusCode, body: res.rawPayload };
    },
  };
  const report = await verifySeal({
    day,
    source,
    rootPem: (await loadAuthority(instance.ctx)).rootPem,
    batchesNdjson: exported.body,
  });
  expect(report.checks.filter((c) => c.state === 'failed')).toEqual([]);
  return exported.body
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { owner: string; seq: number })
    .map(({ owner, seq }) => ({ owner, seq }));
}

/**
 * Waits until at least `n` lock requests are waiting in this test's database (a held-up writer or sealer). The
 * run's other test files have databases on the same server: their waiters, counted too, let a scenario go on before
 * its own requests were held (the seal then made before a batch reached its store: a rare failure of the full run).
 */
async function waitersAtLeast(db: Db, n: number, locktype?: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { rows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks
        WHERE NOT granted AND ($1::text IS NULL OR locktype = $1)
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [locktype ?? null],
    );
    if (rows[0]!.n >= n) return;
    if (Date.now() > deadline) throw new Error(`fewer than ${n} lock waiters after 20 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Holds `lockSql` in a transaction of its own until release() is called. */
async function holdLock(db: Db, lockSql: string): Promise<{ release(): Promise<void> }> {
  const client = await db.connect();
  await client.query('BEGIN');
  await client.query(lockSql);
  return {
    release: async () => {
      await client.query('COMMIT');
      client.release();
    },
  };
}

const deviceOwner = () => `device:${w.device.id}`;
const sourceOwner = () => `source:${w.source.id}`;

describe('a batch whose transaction is held up past midnight', () => {
  test('held before it reached the store: the seal made meanwhile does not wait, and the batch goes to the next day', async () => {
    const [a, b] = w.cluster.instances as [PopInstance, PopInstance];
    w.cluster.setNow(at(-1000));
    accepted(await sendAgent(a));
    accepted(await sendCms(a));

    // The issue's reproduction: a lock on cms_installations (and here on devices too) holds the batches' reading
    // queries after their receive time was taken, at 23:59:59 Almaty.
    const lock = await holdLock(
      w.cluster.db,
      'LOCK TABLE cms_installations, devices IN ACCESS EXCLUSIVE MODE',
    );
    const late = [sendCms(a), sendAgent(a)];
    await waitersAtLeast(w.cluster.db, 2);

    // Past midnight the day is sealed through the console, while the two batches are on their way.
    w.cluster.setNow(at(5_000));
    const sealed = await sealThrough(b, DAY);
    expect(sealed.statusCode, sealed.body).toBe(201);
    expect(sealed.json<{ body: SealBody }>().body).toMatchObject({
      day: DAY,
      batch_count: 2,
      record_count: 5,
    });

    await lock.release();
    for (const res of await Promise.all(late)) accepted(res);

    // The seal covers exactly what is stored under its day; the late batches are the next day's, received when
    // they were stored.
    expect(await stored(w.cluster.db, DAY)).toEqual({ batch_count: 2, record_count: 5 });
    const { rows } = await w.cluster.db.query<{ receive_day: string; received_at: Date }>(
      `SELECT to_char(receive_day, 'YYYY-MM-DD') AS receive_day, received_at FROM pop_batches
        WHERE (owner, batch_seq) IN (($1, 1), ($2, 2)) ORDER BY owner`,
      [sourceOwner(), deviceOwner()],
    );
    expect(rows).toEqual([
      { receive_day: NEXT, received_at: at(5_000) },
      { receive_day: NEXT, received_at: at(5_000) },
    ]);
    // Their records and counts went with them.
    const records = await w.cluster.db.query<{ receive_day: string; n: number }>(
      `SELECT to_char(receive_day, 'YYYY-MM-DD') AS receive_day, count(*)::int AS n FROM pop_records
        GROUP BY receive_day ORDER BY receive_day`,
    );
    expect(records.rows).toEqual([
      { receive_day: DAY, n: 5 },
      { receive_day: NEXT, n: 5 },
    ]);

    w.cluster.setNow(at(24 * 3_600_000 + 60_000));
    const nextSeal = await sealThrough(a, NEXT);
    expect(nextSeal.json<{ body: SealBody }>().body).toMatchObject({ batch_count: 2, record_count: 5 });
    expect(await verifiedDay(a, DAY)).toEqual([
      { owner: deviceOwner(), seq: 1 },
      { owner: sourceOwner(), seq: 0 },
    ]);
    expect(await verifiedDay(b, NEXT)).toEqual(
      expect.arrayContaining([
        { owner: deviceOwner(), seq: 2 },
        { owner: sourceOwner(), seq: 1 },
      ]),
    );
  });

  test('held inside its store transaction: the seal waits for it and covers it', async () => {
    const [a, b] = w.cluster.instances as [PopInstance, PopInstance];
    w.cluster.setNow(at(-1000));
    accepted(await sendAgent(a));

    // The writers take the day's lock, then wait on play_counts (their counts) past midnight.
    const lock = await holdLock(w.cluster.db, 'LOCK TABLE play_counts IN EXCLUSIVE MODE');
    const held = [sendAgent(a), sendCms(b)];
    await waitersAtLeast(w.cluster.db, 2);
    w.cluster.setNow(at(5_000));
    // The seal asked for meanwhile waits for them (an advisory lock request joins the waiters) ...
    const sealing = sealThrough(b, DAY);
    await waitersAtLeast(w.cluster.db, 1, 'advisory');
    await lock.release();
    for (const res of await Promise.all(held)) accepted(res);
    const sealed = await sealing;
    expect(sealed.statusCode, sealed.body).toBe(201);
    // ... and covers them: they are stored under the day, as they were received.
    expect(sealed.json<{ body: SealBody }>().body).toMatchObject({ batch_count: 3, record_count: 7 });
    expect(await stored(w.cluster.db, DAY)).toEqual({ batch_count: 3, record_count: 7 });
    expect(await stored(w.cluster.db, NEXT)).toEqual({ batch_count: 0, record_count: 0 });
    expect(await verifiedDay(a, DAY)).toHaveLength(3);
  });
});

describe('two instances whose clocks are apart', () => {
  test('the scheduler of one seals the day; the other, 50 s behind, stores its batches under the next day', async () => {
    const [a, b] = w.cluster.instances as [PopInstance, PopInstance];
    w.cluster.setNow(at(-10_000));
    accepted(await sendAgent(b));

    a.clock.set(at(40_000));
    b.clock.set(at(-10_000));
    const run = await runSealScheduler(a.ctx);
    expect(run.seals.map((s) => s.day)).toEqual([DAY]);

    // Instance b still believes it is 23:59:50 on the sealed day.
    accepted(await sendAgent(b));
    accepted(await sendCms(b));
    expect(await stored(w.cluster.db, DAY)).toEqual({ batch_count: 1, record_count: 2 });
    const { rows } = await w.cluster.db.query<{ receive_day: string; received_at: Date }>(
      `SELECT to_char(receive_day, 'YYYY-MM-DD') AS receive_day, received_at FROM pop_batches
        WHERE receive_day = $1 ORDER BY id`,
      [NEXT],
    );
    // Received, for the seal, at the first instant of the day it is counted in (its own clock is still before it).
    expect(rows).toEqual([
      { receive_day: NEXT, received_at: almatyDayStart(NEXT) },
      { receive_day: NEXT, received_at: almatyDayStart(NEXT) },
    ]);

    w.cluster.setNow(at(24 * 3_600_000 + 40_000));
    const second = await runSealScheduler(b.ctx);
    expect(second.seals.map((s) => s.day)).toEqual([NEXT]);
    expect(await verifiedDay(b, DAY)).toEqual([{ owner: deviceOwner(), seq: 1 }]);
    expect(await verifiedDay(a, NEXT)).toEqual([
      { owner: deviceOwner(), seq: 2 },
      { owner: sourceOwner(), seq: 0 },
    ]);
    expect(almatyDate(rows[0]!.received_at)).toBe(NEXT);
  });
});

describe('an instance whose clock runs days behind the first seal', () => {
  test('stores its batches under the day after the newest seal, which will be sealed, never under a day that will not', async () => {
    const [a, b] = w.cluster.instances as [PopInstance, PopInstance];
    w.cluster.setNow(at(-10_000));
    accepted(await sendAgent(a));
    a.clock.set(at(40_000));
    expect((await runSealScheduler(a.ctx)).seals.map((s) => s.day)).toEqual([DAY]);
    // b's clock stands three days before the first seal (a dead RTC, NTP not yet synced): a day never sealed.
    const behind = addDays(DAY, -3);
    b.clock.set(new Date(almatyDayStart(behind).getTime() + 12 * 3_600_000));
    accepted(await sendAgent(b));
    accepted(await sendCms(b));
    const { rows } = await w.cluster.db.query<{ receive_day: string; received_at: Date }>(
      `SELECT to_char(receive_day, 'YYYY-MM-DD') AS receive_day, received_at FROM pop_batches ORDER BY id`,
    );
    expect(rows).toEqual([
      { receive_day: DAY, received_at: at(-10_000) },
      { receive_day: NEXT, received_at: almatyDayStart(NEXT) },
      { receive_day: NEXT, received_at: almatyDayStart(NEXT) },
    ]);
    // No path stores a batch under a day before the newest seal.
    await expect(
      w.cluster.db.query(
        `INSERT INTO pop_batches (owner, batch_seq, channel, body, body_sha256, received_at, receive_day,
                                  record_count, answer)
         VALUES ($1, 99, 'agent', '\\x7b7d', $2, $3, $4, 0, '{}')`,
        [deviceOwner(), 'f'.repeat(64), almatyDayStart(behind), behind],
      ),
    ).rejects.toMatchObject({ code: 'PSEAL' });
    // The next day's seal covers both.
    w.cluster.setNow(at(24 * 3_600_000 + 40_000));
    expect((await runSealScheduler(a.ctx)).seals.map((s) => s.day)).toEqual([NEXT]);
    expect(await verifiedDay(a, NEXT)).toEqual([
      { owner: deviceOwner(), seq: 2 },
      { owner: sourceOwner(), seq: 0 },
    ]);
    const { rows: unsealed } = await w.cluster.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pop_batches b WHERE NOT EXISTS (SELECT 1 FROM stats_seals s WHERE s.day = b.receive_day)`,
    );
    expect(unsealed[0]!.n).toBe(0);
  });
});

describe('an instance whose clock runs days behind while the first seal is made', () => {
  test('the first seal waits for its batch, and the chain starts early enough to cover it', async () => {
    const [a, b] = w.cluster.instances as [PopInstance, PopInstance];
    a.clock.set(at(-1000));
    accepted(await sendAgent(a));
    // No seal exists yet. b's clock stands three days back; its batch waits inside its store transaction (on
    // play_counts) when the first seal is asked for.
    const behind = addDays(DAY, -3);
    b.clock.set(new Date(almatyDayStart(behind).getTime() + 12 * 3_600_000));
    const lock = await holdLock(w.cluster.db, 'LOCK TABLE play_counts IN EXCLUSIVE MODE');
    const held = sendCms(b);
    let sealing: Promise<LightMyRequestResponse>;
    try {
      await waitersAtLeast(w.cluster.db, 1);
      a.clock.set(at(5_000));
      sealing = sealThrough(a, DAY);
      // The first seal waits for it (before: it sealed DAY at once, its chain starting there, and the batch stored
      // under three days before was in no seal).
      await waitersAtLeast(w.cluster.db, 2);
    } finally {
      await lock.release();
    }
    accepted(await held);
    const sealed = await sealing;
    expect(sealed.statusCode, sealed.body).toBe(201);
    const { rows: seals } = await w.cluster.db.query<{ day: string }>(
      `SELECT to_char(day, 'YYYY-MM-DD') AS day FROM stats_seals ORDER BY day`,
    );
    expect(seals.map((r) => r.day)).toEqual([behind, addDays(DAY, -2), addDays(DAY, -1), DAY]);
    expect(await verifiedDay(a, behind)).toEqual([{ owner: sourceOwner(), seq: 0 }]);
    expect(await verifiedDay(a, DAY)).toEqual([{ owner: deviceOwner(), seq: 1 }]);
    const { rows: unsealed } = await w.cluster.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pop_batches b WHERE NOT EXISTS (SELECT 1 FROM stats_seals s WHERE s.day = b.receive_day)`,
    );
    expect(unsealed[0]!.n).toBe(0);
  });
});

describe('migration 064 on a database that already holds a sealed day', () => {
  test('the rows of a sealed day can no longer be added to, changed or removed; other days can', async () => {
    const t = await createTestDatabase({ upTo: 63 });
    try {
      const db = t.db;
      const insert = (day: string, seq: number) =>
        db.query<{ id: number }>(
          `INSERT INTO pop_batches (owner, batch_seq, channel, body, body_sha256, received_at, receive_day,
                                    record_count, answer)
           VALUES ('device:00000000-0000-4000-8000-000000000001', $1, 'agent', '\\x7b7d', $2, $3, $4, 0, '{}')
           RETURNING id`,
          [seq, 'f'.repeat(64), almatyDayStart(day), day],
        );
      const sealedBatch = (await insert(DAY, 1)).rows[0]!.id;
      const open = (await insert(NEXT, 2)).rows[0]!.id;
      const { rows: leaves } = await db.query<{ id: number }>(
        `INSERT INTO ledger_leaves (recorded_at, day, kind, manifest_sha256, signed_at)
         VALUES ($1, $2, 'stats_seal', $3, $1) RETURNING id`,
        [at(1000), NEXT, 'e'.repeat(64)],
      );
      await db.query(
        `INSERT INTO stats_seals (day, signed_at, body, body_sha256, signature, ledger_leaf_id)
         VALUES ($1, $2, '\\x7b7d', $3, '\\x00', $4)`,
        [DAY, at(1000), 'd'.repeat(64), leaves[0]!.id],
      );

      const { migrate } = await import('../../src/db/migrate.js');
      await migrate(db);

      // The seeded rows are untouched.
      expect((await db.query('SELECT count(*)::int AS n FROM pop_batches')).rows[0]).toEqual({ n: 2 });
      await expect(insert(DAY, 3)).rejects.toMatchObject({ code: 'PSEAL' });
      await expect(
        db.query('UPDATE pop_batches SET body = $2 WHERE id = $1', [sealedBatch, Buffer.from('[]')]),
      ).rejects.toMatchObject({ code: 'PSEAL' });
      await expect(
        db.query('UPDATE pop_batches SET receive_day = $2 WHERE id = $1', [open, DAY]),
      ).rejects.toMatchObject({ code: 'PSEAL' });
      await expect(db.query('DELETE FROM pop_batches WHERE id = $1', [sealedBatch])).rejects.toMatchObject({
        code: 'PSEAL',
      });
      // What the seal does not cover may change; an open day takes batches.
      await db.query(`UPDATE pop_batches SET answer = '{"x":1}' WHERE id = $1`, [sealedBatch]);
      await insert(NEXT, 3);
      // The writers' function gives the next open day for a sealed one, and the day itself otherwise.
      const client = await db.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query<{ wanted_day: string; open_day: string }>(
          `SELECT to_char(wanted_day, 'YYYY-MM-DD') AS wanted_day, to_char(open_day, 'YYYY-MM-DD') AS open_day
             FROM pop_open_receive_days(ARRAY[$2, $1, $1]::date[])`,
          [DAY, NEXT],
        );
        expect(rows).toEqual([
          { wanted_day: DAY, open_day: NEXT },
          { wanted_day: NEXT, open_day: NEXT },
        ]);
        await client.query('COMMIT');
        // Under REPEATABLE READ it would miss a seal committed while it waited: it refuses to run.
        await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        await expect(
          client.query('SELECT * FROM pop_open_receive_days(ARRAY[$1]::date[])', [DAY]),
        ).rejects.toMatchObject({ code: 'P0001' });
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
    } finally {
      await t.drop();
    }
  });
});

describe('property: batches across midnight from several instances while days are sealed', () => {
  interface Send {
    instance: number;
    kind: 'agent' | 'cms';
    device: number;
    /** Sent before midnight, together with the sealing just after it, or after the seal. */
    phase: 'before' | 'during' | 'after';
  }
  const scenario = fc.record({
    // Each instance's clock, behind the true time by up to 45 s (the scheduler's grace is 30 s).
    offsets: fc.tuple(
      fc.integer({ min: -45_000, max: 0 }),
      fc.integer({ min: -45_000, max: 0 }),
      fc.integer({ min: -45_000, max: 0 }),
    ),
    sends: fc.array(
      fc.record({
        instance: fc.integer({ min: 0, max: 2 }),
        kind: fc.constantFrom<'agent' | 'cms'>('agent', 'cms'),
        device: fc.integer({ min: 0, max: 5 }),
        phase: fc.constantFrom<Send['phase']>('before', 'during', 'during', 'after'),
      }),
      { minLength: 4, maxLength: 16 },
    ),
    sealer: fc.record({
      instance: fc.integer({ min: 0, max: 2 }),
      how: fc.constantFrom<'console' | 'scheduler'>('console', 'scheduler'),
    }),
  });

  test('every stored batch is in exactly one seal, and every seal verifies against the stored batches', async () => {
    const instances = w.cluster.instances;
    const next = w.devices.map(() => ({ batch: 1, seq: 1 }));
    const stored200: string[] = [];
    let day = DAY;
    const setTrueTime = (instant: Date, offsets: readonly number[]) => {
      for (const [i, instance] of instances.entries()) {
        instance.clock.set(new Date(instant.getTime() + offsets[i]!));
      }
    };
    const send = async (s: Send): Promise<void> => {
      const instance = instances[s.instance]!;
      const now = instance.clock.now();
      const end = new Date(now.getTime() - 30_000);
      let res: LightMyRequestResponse;
      let owner: string;
      let batchSeq: number;
      if (s.kind === 'agent') {
        const device = w.devices[s.device]!;
        const n = next[s.device]!;
        batchSeq = n.batch++;
        const seq = n.seq;
        n.seq += 2;
        owner = `device:${device.id}`;
        res = await postTelemetry(
          instance.servers,
          device,
          agentBody(device, batchSeq, [play(seq, {}, end), play(seq + 1, {}, end)], { ts: now }),
        );
      } else {
        batchSeq = w.next.sourceBatch++;
        const seq = w.next.sourceSeq;
        w.next.sourceSeq += 1;
        owner = sourceOwner();
        res = await postCms(
          instance.servers,
          w.source,
          cmsBody(w.source, batchSeq, [cmsPlay('screen-1', seq, {}, end)]),
        );
      }
      // A device's burst is 3 batches: more from one device in one run are refused, and store nothing.
      if (res.statusCode === 429) return;
      accepted(res);
      stored200.push(`${owner}#${batchSeq}`);
    };

    // The platform's first day: the seal chain starts there, whatever the first run sends.
    setTrueTime(new Date(almatyDayEnd(DAY).getTime() - 60_000), [0, 0, 0]);
    await runSealScheduler(instances[0]!.ctx);
    await fc.assert(
      fc.asyncProperty(scenario, async ({ offsets, sends, sealer }) => {
        // Each run (shrinking runs too) has a day of its own.
        const midnight = almatyDayEnd(day);
        const thisDay = day;
        day = addDays(day, 1);
        const phase = (p: Send['phase']) => sends.filter((s) => s.phase === p).map(send);
        setTrueTime(new Date(midnight.getTime() - 2_000), offsets);
        await Promise.all(phase('before'));
        // 40 s past midnight: the day is sealed while batches of both days are on their way.
        setTrueTime(new Date(midnight.getTime() + 40_000), offsets);
        const sealing =
          sealer.how === 'console'
            ? sealThrough(instances[sealer.instance]!, thisDay).then((res) => {
                // An instance whose clock is still before midnight refuses: the day has not ended for it.
                expect([201, 409]).toContain(res.statusCode);
              })
            : runSealScheduler(instances[sealer.instance]!.ctx);
        await Promise.all([...phase('during'), sealing]);
        setTrueTime(new Date(midnight.getTime() + 3_600_000), offsets);
        await Promise.all(phase('after'));
        // The day is sealed by now whoever did it (a console call with every clock past midnight).
        const res = await sealThrough(instances[0]!, thisDay);
        expect([200, 201], res.body).toContain(res.statusCode);
        // The seal covers exactly what is stored under its day.
        const body = res.json<{ body: SealBody }>().body;
        expect(await stored(w.cluster.db, thisDay)).toEqual({
          batch_count: body.batch_count,
          record_count: body.record_count,
        });
      }),
      { numRuns: Number(process.env['SEAL_PROPERTY_RUNS'] ?? 8), seed: 2026_11_24 },
    );

    // The last day too (batches of the last run moved past its day), then every seal is recomputed from the exported
    // batches: each batch in exactly one.
    setTrueTime(new Date(almatyDayEnd(day).getTime() + 60_000), [0, 0, 0]);
    expect((await sealThrough(instances[1]!, day)).statusCode).toBe(201);
    const leaves: string[] = [];
    for (let d = DAY; d <= day; d = addDays(d, 1)) {
      for (const leaf of await verifiedDay(instances[0]!, d)) leaves.push(`${leaf.owner}#${leaf.seq}`);
    }
    const { rows } = await w.cluster.db.query<{ k: string }>(
      "SELECT owner || '#' || batch_seq AS k FROM pop_batches",
    );
    expect(new Set(leaves).size).toBe(leaves.length);
    expect([...leaves].sort()).toEqual(rows.map((r) => r.k).sort());
    expect(leaves).toEqual(expect.arrayContaining(stored200));
    expect(stored200.length).toBeGreaterThan(20);
    // The runs did meet the race: some batches arrived for a day sealed meanwhile and were moved to the next.
    const moved = await w.cluster.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pop_batches
        WHERE received_at = (receive_day::timestamp AT TIME ZONE 'Asia/Almaty')`,
    );
    expect(moved.rows[0]!.n).toBeGreaterThan(0);
  }, 300_000);
});
