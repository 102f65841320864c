import { expect } from 'vitest';
import { judgeRecords } from '../../src/pop/judge.js';
import { ensureRecordPartition, storeBatchStreaming } from '../../src/pop/store.js';
import {
  answerOf,
  batchCount,
  cmsBody,
  cmsPlay,
  countedPlays,
  postCms,
  registerSource,
  sha256,
  T0,
} from './helpers.js';
import { APPROVAL, popWorld } from './world.js';

/*
 * A CMS batch is judged a part at a time (2 000 records) and each part copied while the next is judged
 * (storeBatchStreaming): the answer, the rows and the counts must be those of judging the batch as a whole.
 */
const test = popWorld({ approvals: [{ number: APPROVAL }] });
const playerKey = (sourceId: string, external: string) => `cms:${sourceId}:${external}`;

test('duplicates and refusals across parts: indexes, answer, rows and counts as for the whole batch', async ({
  db,
  servers,
  operator,
  platform,
}) => {
  const source = await registerSource(platform, operator, {
    a: operator.structures[0]!,
    b: operator.structures[1]!,
  });
  const records: unknown[] = [];
  for (let i = 0; i < 4_500; i += 1) {
    const end = new Date(T0.getTime() - 60_000 - i * 1_000);
    records.push(cmsPlay(i % 2 ? 'a' : 'b', Math.floor(i / 2) + 1, { play_id: `p${i}` }, end));
  }
  // In the second part, player a's number 10 again (taken in the first part): a duplicate.
  records[2_500] = cmsPlay('a', 10, { play_id: 'again' });
  // In the third part, a refusal and an unknown player.
  records[4_001] = { ...(records[4_001] as object), duration_ms: 10 };
  records[4_003] = cmsPlay('nobody', 1, { play_id: 'nobody' });
  const answer = answerOf(await postCms(servers, source, cmsBody(source, 0, records)));
  expect(answer.items).toEqual([
    { index: 2_500, status: 'duplicate' },
    { index: 4_001, status: 'refused', reason: 'too_short' },
    { index: 4_003, status: 'refused', reason: 'player_unknown' },
  ]);
  expect(answer).toMatchObject({ received: 4_500, accepted: 4_497, duplicates: 1, refused: 2 });
  expect(
    (await countedPlays(db, playerKey(source.id, 'a'))) + (await countedPlays(db, playerKey(source.id, 'b'))),
  ).toBe(4_497);
  const { rows } = await db.query(
    `SELECT count(*)::int AS n, min(record_index) AS first, max(record_index) AS last,
            count(DISTINCT batch_id)::int AS batches, count(DISTINCT (player_key, seq))::int AS distinct_plays
       FROM pop_records WHERE player_key LIKE $1`,
    [`cms:${source.id}:%`],
  );
  expect(rows[0]).toEqual({ n: 4_497, first: 0, last: 4_499, batches: 1, distinct_plays: 4_497 });
  const { rows: batches } = await db.query('SELECT id FROM pop_batches WHERE owner = $1', [
    `source:${source.id}`,
  ]);
  const { rows: recordBatch } = await db.query(
    'SELECT DISTINCT batch_id FROM pop_records WHERE player_key = $1',
    [playerKey(source.id, 'a')],
  );
  expect(recordBatch).toEqual([{ batch_id: batches[0].id }]);
});

test('a failure while judging a later part: the COPY is abandoned, nothing is stored, the pool is fine', async ({
  db,
  operator,
  platform,
}) => {
  const source = await registerSource(platform, operator, { a: operator.structures[0]! });
  const player = {
    key: playerKey(source.id, 'a'),
    structureId: operator.structures[0]!.id,
    structureCode: 'x',
  };
  const records = Array.from({ length: 5_000 }, (_, i) => cmsPlay('a', i + 1));
  const judgeContext = {
    channel: 'cms' as const,
    receivedAt: T0,
    attested: true,
    playerOf: () => player,
    approval: () => undefined,
  };
  const body = cmsBody(source, 0, records);
  await ensureRecordPartition(db, '2026-11-20', new Set());
  const { rows } = await db.query<{ id: number }>(
    "SELECT nextval(pg_get_serial_sequence('pop_batches', 'id'))::int AS id",
  );
  const store = (judge: (from: number, to: number) => ReturnType<typeof judgeRecords>) =>
    storeBatchStreaming(db, {
      batchId: rows[0]!.id,
      batch: {
        owner: `source:${source.id}`,
        batchSeq: 0,
        channel: 'cms',
        body,
        bodySha256: sha256(body),
        receivedAt: T0,
        receiveDay: '2026-11-20',
        recordCount: records.length,
        attested: true,
      },
      records: records.length,
      judge,
      now: () => T0,
      readMarks: new Map(),
      buckets: [],
      legacy: false,
      answerOf: (settled) => ({
        batch_seq: 0,
        received: settled.received,
        accepted: settled.accepted,
        duplicates: settled.duplicates,
        refused: settled.refused,
        flagged: settled.flagged,
        duplicate: false,
        items: settled.items,
      }),
    });
  await expect(
    store((from, to) => {
      if (from >= 2_000) throw new Error('judge failed');
      return judgeRecords(records, judgeContext, from, to);
    }),
  ).rejects.toThrow('judge failed');
  expect(await batchCount(db, `source:${source.id}`)).toBe(0);
  const { rows: copied } = await db.query('SELECT count(*)::int AS n FROM pop_records WHERE batch_id = $1', [
    rows[0]!.id,
  ]);
  expect(copied[0].n).toBe(0);
  // The same batch, judged to the end this time, on the same pool.
  const stored = await store((from, to) => judgeRecords(records, judgeContext, from, to));
  expect(stored.result).toEqual({ kind: 'stored', id: rows[0]!.id });
  expect(stored.answer).toMatchObject({ received: 5_000, accepted: 5_000 });
  expect(await countedPlays(db, player.key)).toBe(5_000);
});
