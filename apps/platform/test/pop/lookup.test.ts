import { expect } from 'vitest';
import type { Db, DbClient } from '../../src/db/pool.js';
import { KEPT_STRUCTURES_PER_APPROVAL } from '../../src/pop/approval-cache.js';
import { DeviceLookupBatcher } from '../../src/pop/lookup.js';
import { answerOf, insertDevice, type Operator, play, rotateDeviceKey, sendBatch, T0 } from './helpers.js';
import { popWorld } from './world.js';

/*
 * The agent channels' reading query answers the lookups of several batches at once (src/pop/lookup.ts): each
 * lookup still gets exactly its own device, keys, stored batch and mark, and the approvals it names.
 */
const test = popWorld({
  approvals: [
    { number: 'A-LOOKUP-0', structures: [0] },
    { number: 'A-LOOKUP-BOTH', revokedAt: new Date(T0.getTime() - 3600_000) },
  ],
});

/**
 * `db` whose clients hand the lookup query (the named statement of findDevicesForTelemetry) to `around`, which runs it
 * (`run`) or not; every other statement (BEGIN, COMMIT, ROLLBACK) goes through as it is.
 */
function lookupQueriesOf(
  db: Db,
  around: (client: DbClient, run: () => Promise<unknown>, config: { values?: unknown[] }) => Promise<unknown>,
): Db {
  return {
    connect: async () => {
      const client = await db.connect();
      return new Proxy(client, {
        get(target, prop) {
          if (prop === 'query') {
            return (...args: unknown[]) => {
              const run = () => (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
              const config = args[0] as { name?: string; values?: unknown[] };
              return config?.name === 'pop-devices-for-telemetry' ? around(target, run, config) : run();
            };
          }
          const value = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    },
  } as unknown as Db;
}

test('lookups asked together are answered by one query, each with its own facts', async ({
  db,
  servers,
  operator,
}) => {
  const [s0, s1] = operator.structures as [Operator['structures'][0], Operator['structures'][0]];
  const plain = await insertDevice(db, s0);
  const revoked = await insertDevice(db, s1);
  await db.query('UPDATE devices SET revoked_at = $2 WHERE id = $1', [revoked.id, T0]);
  const stored = await insertDevice(db, s1);
  const storedAnswer = answerOf(await sendBatch(servers, stored, 0, [play(1), play(2)]));
  const renewed = await insertDevice(db, s0);
  // The first key stays accepted until T0 + 1 min; a lookup after that sees the new key only.
  await rotateDeviceKey(db, renewed, new Date(T0.getTime() + 1000), new Date(T0.getTime() + 60_000));

  let queries = 0;
  const transactions: boolean[] = [];
  const counting = lookupQueriesOf(db, async (client, run) => {
    queries += 1;
    const result = await run();
    // One statement, no transaction around it (one round trip): the connection is idle again at once.
    const { rows } = await client.query('SELECT now() = statement_timestamp() AS own');
    transactions.push(rows[0].own);
    return result;
  });
  const batcher = new DeviceLookupBatcher(counting, { concurrency: 1, maxLookups: 256 });
  const later = new Date(T0.getTime() + 120_000);
  const found = await Promise.all([
    batcher.find({ deviceId: plain.id, batchSeq: 0, now: T0, approvalNumbers: ['A-LOOKUP-0'] }),
    batcher.find({ deviceId: revoked.id, batchSeq: 0, now: T0, approvalNumbers: [] }),
    batcher.find({
      deviceId: stored.id,
      batchSeq: 0,
      now: T0,
      approvalNumbers: ['A-LOOKUP-BOTH', 'A-NONE'],
    }),
    batcher.find({ deviceId: stored.id, batchSeq: 1, now: T0, approvalNumbers: [] }),
    batcher.find({ deviceId: renewed.id, batchSeq: 0, now: T0, approvalNumbers: [] }),
    batcher.find({ deviceId: renewed.id, batchSeq: 0, now: later, approvalNumbers: [] }),
    batcher.find({
      deviceId: '00000000-0000-4000-8000-000000000000',
      batchSeq: 0,
      now: T0,
      approvalNumbers: [],
    }),
  ]);
  expect(queries).toBe(1);
  expect(transactions).toEqual([true]);
  // The query runs on its generic plan inside the function (migration 081), read-only; the connection itself plans
  // as configured.
  const { rows: fn } = await db.query(
    "SELECT proconfig, provolatile FROM pg_proc WHERE proname = 'pop_devices_for_telemetry'",
  );
  expect(fn).toEqual([{ proconfig: ['plan_cache_mode=force_generic_plan'], provolatile: 's' }]);
  expect((await db.query("SELECT current_setting('plan_cache_mode') AS mode")).rows[0].mode).toBe('auto');
  const [p, r, sBatch0, sBatch1, renewedNow, renewedLater, unknown] = found;
  expect(p).toMatchObject({
    id: plain.id,
    structureId: s0.id,
    revokedAt: null,
    highWaterSeq: 0,
    existing: null,
  });
  expect(p!.keys).toHaveLength(1);
  expect(r!.revokedAt).toEqual(T0);
  expect(sBatch0).toMatchObject({ id: stored.id, structureId: s1.id, highWaterSeq: 2, hadPopBatch: true });
  expect(sBatch0!.existing).toEqual({
    bodySha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    answer: storedAnswer,
  });
  expect(sBatch1!.existing).toBeNull();
  expect(renewedNow!.keys).toHaveLength(2);
  expect(renewedLater!.keys).toHaveLength(1);
  expect(renewedLater!.keys[0]).toBe(renewedNow!.keys[0]);
  expect(unknown).toBeNull();

  // The approvals named by any of the lookups, with the coverage of the structures of theirs.
  const approvals = p!.approvals;
  expect([...approvals.keys()].sort()).toEqual(['A-LOOKUP-0', 'A-LOOKUP-BOTH']);
  expect([...approvals.get('A-LOOKUP-0')!.structureIds]).toEqual([s0.id]);
  expect([...approvals.get('A-LOOKUP-BOTH')!.structureIds].sort()).toEqual([s0.id, s1.id].sort());
  expect(approvals.get('A-LOOKUP-BOTH')!.revokedAt).toEqual(new Date(T0.getTime() - 3600_000));
});

test('a failed query fails the lookups it held, not the next ones', async ({ db, device }) => {
  let fail = true;
  const flaky = lookupQueriesOf(db, (_client, run) => {
    if (fail) {
      fail = false;
      return Promise.reject(new Error('connection lost'));
    }
    return run();
  });
  const batcher = new DeviceLookupBatcher(flaky, { concurrency: 1, maxLookups: 256 });
  const first = batcher.find({ deviceId: device.id, batchSeq: 0, now: T0, approvalNumbers: [] });
  await expect(first).rejects.toThrow('connection lost');
  expect(
    await batcher.find({ deviceId: device.id, batchSeq: 0, now: T0, approvalNumbers: [] }),
  ).toMatchObject({
    id: device.id,
  });
});

/** A batcher whose lookup queries are seen, with the approvals each asked for in full ($5). */
function watchedBatcher(db: Db): { batcher: DeviceLookupBatcher; inFull: string[][] } {
  const inFull: string[][] = [];
  const watched = lookupQueriesOf(db, (_client, run, config) => {
    inFull.push([...(config.values![4] as string[])].sort());
    return run();
  });
  return { batcher: new DeviceLookupBatcher(watched, { concurrency: 1, maxLookups: 256 }), inFull };
}

test('approvals are kept between lookups and used only at the version the lookup reads', async ({
  db,
  operator,
}) => {
  const [s0, s1] = operator.structures as [Operator['structures'][0], Operator['structures'][0]];
  const device = await insertDevice(db, s0);
  const { batcher, inFull } = watchedBatcher(db);
  const look = async (numbers: string[]) =>
    (await batcher.find({ deviceId: device.id, batchSeq: 0, now: T0, approvalNumbers: numbers }))!.approvals;

  // First read in full, then from what was kept: the query reads only the versions.
  expect([...(await look(['A-LOOKUP-0', 'A-NONE'])).keys()]).toEqual(['A-LOOKUP-0']);
  const kept = await look(['A-LOOKUP-0']);
  expect(inFull).toEqual([['A-LOOKUP-0', 'A-NONE'], []]);
  expect(kept.get('A-LOOKUP-0')).toMatchObject({ revokedAt: null, structureIds: new Set([s0.id]) });
  expect(batcher.approvals.size).toBe(1);

  // Revoked by SQL (another process, an operator): the next lookup sees it, by a second query in full.
  const revokedAt = new Date(T0.getTime() - 60_000);
  await db.query("UPDATE approvals SET revoked_at = $1 WHERE number = 'A-LOOKUP-0'", [revokedAt]);
  inFull.length = 0;
  expect((await look(['A-LOOKUP-0'])).get('A-LOOKUP-0')!.revokedAt).toEqual(revokedAt);
  expect(inFull).toEqual([[], ['A-LOOKUP-0']]);
  inFull.length = 0;
  expect((await look(['A-LOOKUP-0'])).get('A-LOOKUP-0')!.revokedAt).toEqual(revokedAt);
  expect(inFull).toEqual([[]]);

  // The structures it covers change: a structure added, then removed.
  await db.query(
    "INSERT INTO approval_structures (approval_id, structure_id) SELECT id, $1 FROM approvals WHERE number = 'A-LOOKUP-0'",
    [s1.id],
  );
  expect((await look(['A-LOOKUP-0'])).get('A-LOOKUP-0')!.structureIds).toEqual(new Set([s0.id, s1.id]));
  await db.query(
    "DELETE FROM approval_structures WHERE structure_id = $1 AND approval_id = (SELECT id FROM approvals WHERE number = 'A-LOOKUP-0')",
    [s0.id],
  );
  expect((await look(['A-LOOKUP-0'])).get('A-LOOKUP-0')!.structureIds).toEqual(new Set([s1.id]));
});

test('an approval deleted is forgotten; one too wide to keep is read for the batch structures only', async ({
  db,
  operator,
}) => {
  const [s0] = operator.structures as [Operator['structures'][0]];
  const device = await insertDevice(db, s0);
  const { batcher, inFull } = watchedBatcher(db);
  const look = async (numbers: string[]) =>
    (await batcher.find({ deviceId: device.id, batchSeq: 0, now: T0, approvalNumbers: numbers }))!.approvals;
  expect((await look(['A-LOOKUP-0'])).size).toBe(1);
  // The approval row goes and its approval_structures rows with it (ON DELETE CASCADE): the cascade's trigger
  // touches no row that is gone.
  await db.query("DELETE FROM approvals WHERE number = 'A-LOOKUP-0'");
  expect((await look(['A-LOOKUP-0'])).size).toBe(0);
  expect(batcher.approvals.size).toBe(0);

  // A national approval: more structures than are kept (KEPT_STRUCTURES_PER_APPROVAL). Kept while it was narrow;
  // once wide it is read cut to the lookup's structures, and what was kept goes.
  expect((await look(['A-LOOKUP-BOTH'])).size).toBe(1);
  expect(batcher.approvals.size).toBe(1);
  await db.query(
    `INSERT INTO structures (organisation_id, code, district, format, created_at)
     SELECT organisation_id, 'WIDE-' || i, district, format, created_at FROM structures, generate_series(1, $2) i
      WHERE id = $1`,
    [s0.id, KEPT_STRUCTURES_PER_APPROVAL],
  );
  await db.query(
    `INSERT INTO approval_structures (approval_id, structure_id)
     SELECT a.id, s.id FROM approvals a, structures s WHERE a.number = 'A-LOOKUP-BOTH'
     ON CONFLICT DO NOTHING`,
  );
  inFull.length = 0;
  for (let i = 0; i < 2; i++) {
    expect([...(await look(['A-LOOKUP-BOTH'])).get('A-LOOKUP-BOTH')!.structureIds]).toEqual([s0.id]);
  }
  // The first lookup found its kept version moved and read it again; the second read it in full at once.
  expect(inFull).toEqual([[], ['A-LOOKUP-BOTH'], ['A-LOOKUP-BOTH']]);
  expect(batcher.approvals.size).toBe(0);
});
