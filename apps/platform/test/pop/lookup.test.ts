import { expect } from 'vitest';
import type { Db, DbClient } from '../../src/db/pool.js';
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
  around: (client: DbClient, run: () => Promise<unknown>) => Promise<unknown>,
): Db {
  return {
    connect: async () => {
      const client = await db.connect();
      return new Proxy(client, {
        get(target, prop) {
          if (prop === 'query') {
            return (...args: unknown[]) => {
              const run = () => (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
              const config = args[0] as { name?: string };
              return config?.name === 'pop-devices-for-telemetry' ? around(target, run) : run();
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
  const settings: string[] = [];
  const counting = lookupQueriesOf(db, async (client, run) => {
    queries += 1;
    const result = await run();
    // The lookup runs read-only on its generic plan (BEGIN_READ_ONLY_GENERIC_PLANS).
    const { rows } = await client.query(
      "SELECT current_setting('plan_cache_mode') AS mode, current_setting('transaction_read_only') AS ro",
    );
    settings.push(`${rows[0].mode} ${rows[0].ro}`);
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
  expect(settings).toEqual(['force_generic_plan on']);
  // Outside the lookup's transaction the connection plans as configured.
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
