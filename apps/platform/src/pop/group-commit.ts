import { boolArray, dateArray, int4Array, int8Array, textArray, uuidArray } from '../db/binary-arrays.js';
import { copyFrom } from '../db/copy.js';
import { type PipelineStatement, pipelined } from '../db/pipeline.js';
import { type Db, SET_GENERIC_PLANS } from '../db/pool.js';
import type { Bucket } from './rate-limits.js';
import {
  COPY_RECORDS_SQL,
  compareCountKeys,
  type NewBatch,
  newestStartOf,
  OPEN_RECEIVE_DAYS,
  recordsCopyData,
  type StoreResult,
  storeBatch,
} from './store.js';
import type { Settled } from './judge.js';

/*
 * Group commit of agent-channel batches (docs/decisions.md "Proof of play: ingestion at speed").
 *
 * A device sends small batches (the benchmark: 50 events), and storing one costs a transaction of its own: a
 * statement with its planning and locks, then a WAL flush (fsync) before the answer may leave. Batches that
 * arrive while a group is being written wait in a queue and are written together by the next group: one
 * statement for the rate tokens, the batches, the high-water marks and the counts of all of them, one COPY of
 * their records, one COMMIT (one fsync). Under light load a group holds one batch and nothing waits; under heavy
 * load groups grow by themselves, with no timer.
 *
 * Every guarantee of the one-batch statement (storeBatch) holds per batch:
 *  - an answer leaves only after the COMMIT of its group returned;
 *  - (owner, batch_seq) is taken once: ON CONFLICT DO NOTHING, per batch; a batch that finds its pair taken is
 *    answered as a repeat by the caller;
 *  - rate tokens: taken per batch; a batch refused by them stores nothing;
 *  - high-water marks move by compare-and-set, in key order; if any mark of the group moved since it was read,
 *    the statement aborts and ...
 *  - ... on ANY error of the group (a moved mark, a receive day sealed while the group was on its way, a deadlock
 *    with another instance, a lost connection), the group is rolled back and each of its batches is stored on its
 *    own by storeBatch, so one batch never fails another.
 */

/** A batch ready to be written: what storeBatch takes. */
export interface GroupEntry {
  batch: NewBatch;
  settled: Settled;
  readMarks: ReadonlyMap<string, number>;
  buckets: readonly Bucket[];
  legacy: boolean;
  now: () => Date;
}

export interface GroupCommitOptions {
  /** Groups written at the same time (each on its own connection). */
  concurrency: number;
  /** Upper bounds of one group. */
  maxBatches: number;
  maxRecords: number;
  maxBodyBytes: number;
}

export const GROUP_COMMIT_DEFAULTS: GroupCommitOptions = {
  concurrency: 2,
  maxBatches: 256,
  maxRecords: 20_000,
  maxBodyBytes: 16_000_000,
};

interface Pending {
  entry: GroupEntry;
  resolve: (result: StoreResult) => void;
  reject: (error: unknown) => void;
}

/** The rate bucket an entry draws from, when it is the one kind of bucket a group statement takes. */
function singleBucket(entry: GroupEntry): Bucket | null {
  const bucket = entry.buckets.length === 1 ? entry.buckets[0]! : null;
  return bucket &&
    bucket.windowMinutes === undefined &&
    bucket.capacity >= bucket.cost &&
    bucket.perSecond > 0
    ? bucket
    : null;
}

const sameRates = (a: Bucket, b: Bucket) =>
  a.capacity === b.capacity && a.perSecond === b.perSecond && a.cost === b.cost;

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export class GroupCommitter {
  private readonly queue: Pending[] = [];
  private running = 0;
  /** Owners of the batches in groups being written: a second batch of one waits for the next group. */
  private readonly busyOwners = new Set<string>();
  private scheduled = false;
  /** Figures for tests and the benchmark. */
  readonly stats = { groups: 0, batches: 0, largestGroup: 0, fallbacks: 0 };

  constructor(
    private readonly db: Db,
    private readonly options: GroupCommitOptions = GROUP_COMMIT_DEFAULTS,
    /** Told why a group was rolled back (its batches are then stored one by one). */
    private readonly onFallback?: (error: unknown) => void,
  ) {}

  /** Stores `entry` with the next group; resolves once its group committed (or it was stored on its own). */
  store(entry: GroupEntry): Promise<StoreResult> {
    if (singleBucket(entry) === null) return storeBatch(this.db, entry);
    return new Promise<StoreResult>((resolve, reject) => {
      this.queue.push({ entry, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.running >= this.options.concurrency) return;
    this.scheduled = true;
    // Batches whose requests were read in the same turn of the event loop join the group.
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.running < this.options.concurrency && this.queue.length > 0) {
      const group = this.takeGroup();
      if (group.length === 0) return;
      this.running += 1;
      for (const p of group) this.busyOwners.add(p.entry.batch.owner);
      void this.write(group).finally(() => {
        for (const p of group) this.busyOwners.delete(p.entry.batch.owner);
        this.running -= 1;
        if (this.queue.length > 0) this.schedule();
      });
    }
  }

  /** The next group: queue order, one batch per owner, the rates of the first, within the bounds. */
  private takeGroup(): Pending[] {
    const group: Pending[] = [];
    const owners = new Set<string>();
    const rest: Pending[] = [];
    let records = 0;
    let bytes = 0;
    let rates: Bucket | null = null;
    for (const p of this.queue) {
      const { batch, settled } = p.entry;
      const bucket = singleBucket(p.entry)!;
      const fits =
        group.length < this.options.maxBatches &&
        (group.length === 0 ||
          (records + settled.rows.length <= this.options.maxRecords &&
            bytes + batch.body.length <= this.options.maxBodyBytes));
      if (
        fits &&
        !owners.has(batch.owner) &&
        !this.busyOwners.has(batch.owner) &&
        (rates === null || sameRates(rates, bucket))
      ) {
        group.push(p);
        owners.add(batch.owner);
        records += settled.rows.length;
        bytes += batch.body.length;
        rates ??= bucket;
      } else {
        rest.push(p);
      }
    }
    this.queue.length = 0;
    this.queue.push(...rest);
    return group;
  }

  private async write(group: Pending[]): Promise<void> {
    let results: StoreResult[] | null = null;
    try {
      results = await this.writeGroup(group.map((p) => p.entry));
    } catch (error) {
      this.onFallback?.(error);
      // Whatever failed, nothing of the group was committed (or, after a lost COMMIT, all of it was): each batch
      // is stored on its own, where a moved mark, a taken batch_seq or a refusal is answered for that batch only.
      this.stats.fallbacks += 1;
    }
    if (results) {
      this.stats.groups += 1;
      this.stats.batches += group.length;
      this.stats.largestGroup = Math.max(this.stats.largestGroup, group.length);
      for (const [i, p] of group.entries()) p.resolve(results[i]!);
      return;
    }
    await Promise.all(
      group.map((p) =>
        storeBatch(this.db, p.entry).then(
          (result) => p.resolve(result),
          (error: unknown) => p.reject(error),
        ),
      ),
    );
  }

  /**
   * One transaction for the group, in two round trips; the results in the order of `entries`. Throws on any error
   * (rolled back).
   */
  private async writeGroup(entries: readonly GroupEntry[]): Promise<StoreResult[]> {
    const client = await this.db.connect();
    let broken = false;
    try {
      try {
        // First round trip: BEGIN with its plan setting, the receive days' shared locks (migration 064: the first
        // thing every storing transaction does), and the group statement, in one write (src/db/pipeline.ts).
        const days = [...new Set(entries.map((e) => e.batch.receiveDay))];
        const [, , open, group] = await pipelined(client, [
          { text: 'BEGIN' },
          { text: SET_GENERIC_PLANS },
          { ...OPEN_RECEIVE_DAYS, values: [dateArray(days)] },
          groupStatement(entries),
        ]);
        // A receive day sealed while the group was on its way: its batches go under the next day, which storeBatch
        // does for each (stampedInto). The sealed-day trigger has refused the group statement already; either way
        // nothing of this transaction is kept.
        if (open!.rows.some((row) => row.wanted_day !== row.open_day)) {
          throw Object.assign(new Error('a receive day of the group was sealed meanwhile'), {
            code: 'PSEAL',
          });
        }
        const results = groupResults(group!.rows, entries.length);
        const stored: Parameters<typeof recordsCopyData>[0][number][] = [];
        results.forEach((result, i) => {
          const { batch, settled } = entries[i]!;
          if (result.kind === 'stored' && settled.rows.length > 0) {
            stored.push({ batchId: result.id, batch, settled });
          }
        });
        // Second round trip: the COPY and the COMMIT (which runs only if the COPY succeeded).
        if (stored.length > 0) {
          await copyFrom(client, COPY_RECORDS_SQL, [recordsCopyData(stored)], { commit: true });
        } else {
          await client.query('COMMIT');
        }
        return results;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        throw error;
      }
    } catch (error) {
      broken = true;
      throw error;
    } finally {
      client.release(broken);
    }
  }
}

/**
 * The group statement: rate tokens (one bucket per batch, same rates for all), the batches, the high-water marks
 * (compare-and-set; any mismatch aborts the statement) and the counts. The batch facts, marks and play sets travel
 * as JSON (one parameter each), the counts as binary arrays (one per column), the bodies as one bytea cut by offsets.
 */
function groupStatement(entries: readonly GroupEntry[]): PipelineStatement {
  const rates = singleBucket(entries[0]!)!;
  const bodies: Buffer[] = [];
  let offset = 0;
  const batches = entries.map((entry, n) => {
    const { batch, settled } = entry;
    bodies.push(batch.body);
    const row = {
      n,
      owner: batch.owner,
      batch_seq: batch.batchSeq,
      channel: batch.channel,
      body_offset: offset,
      body_length: batch.body.length,
      body_sha256: batch.bodySha256,
      received_at: batch.receivedAt.toISOString(),
      receive_day: batch.receiveDay,
      record_count: batch.recordCount,
      newest_record_at:
        settled.newestRecordAt === null ? null : new Date(settled.newestRecordAt).toISOString(),
      answer: batch.answer,
      legacy: entry.legacy,
      bucket_key: singleBucket(entry)!.key,
    };
    offset += batch.body.length;
    return row;
  });
  const marks: { n: number; player_key: string; expected: number; seq: number; newest: string | null }[] = [];
  const counts: { n: number; count: Settled['counts'][number]; attested: boolean }[] = [];
  const playSets: { n: number; k: string; h: number; i: string[] }[] = [];
  entries.forEach((entry, n) => {
    for (const [key, seq] of entry.settled.highWater) {
      marks.push({
        n,
        player_key: key,
        expected: entry.readMarks.get(key) ?? 0,
        seq,
        newest: newestStartOf(entry.settled, key),
      });
    }
    for (const count of entry.settled.counts) counts.push({ n, count, attested: entry.batch.attested });
    for (const set of entry.settled.playSets)
      playSets.push({ n, k: set.playerKey, h: set.hour, i: set.playIds });
  });
  // Rows are locked in one order by every writer (storeBatch too), so groups of two instances meeting on the same
  // rows wait for each other instead of deadlocking.
  marks.sort((a, b) => byText(a.player_key, b.player_key));
  counts.sort((a, b) => compareCountKeys(a.count, b.count));
  return {
    name: 'pop-store-group',
    text: GROUP_SQL,
    values: [
      JSON.stringify(batches),
      bodies.length === 1 ? bodies[0]! : Buffer.concat(bodies, offset),
      rates.capacity,
      rates.perSecond,
      rates.cost,
      JSON.stringify(marks),
      JSON.stringify(playSets),
      // The count rows (about one per approval a batch played: the most rows of the statement) as binary arrays,
      // one per column: PostgreSQL reads them without parsing (src/db/binary-arrays.ts).
      int4Array(counts.map((c) => c.n)),
      textArray(counts.map((c) => c.count.playerKey)),
      uuidArray(counts.map((c) => c.count.structureId)),
      dateArray(counts.map((c) => c.count.day)),
      textArray(counts.map((c) => c.count.approvalNumber)),
      textArray(counts.map((c) => c.count.slot)),
      boolArray(counts.map((c) => c.attested)),
      int8Array(counts.map((c) => c.count.plays)),
      int8Array(counts.map((c) => c.count.flagged)),
    ],
  };
}

/** The group statement's rows (text: src/db/pipeline.ts) as results, in the order of its batches. */
function groupResults(rows: readonly Record<string, string | null>[], batches: number): StoreResult[] {
  const results: StoreResult[] = new Array(batches);
  for (const row of rows) {
    const id = row['id'] ?? null;
    results[Number(row['n'])] =
      row['granted'] !== 't'
        ? // The snapshot may show tokens another instance has just taken: never answer "retry in 0 s".
          { kind: 'rate_limited', wait: Math.max(Number(row['wait'] ?? 0), 0.001) }
        : id === null
          ? { kind: 'taken' }
          : { kind: 'stored', id: Number(id) };
  }
  // (A loop, not `some`: it skips the holes of a sparse array.)
  let answered = 0;
  for (let i = 0; i < batches; i += 1) if (results[i] !== undefined) answered += 1;
  if (rows.length !== batches || answered !== batches) {
    throw new Error(`the group statement answered ${rows.length} rows for ${batches} batches`);
  }
  return results;
}

// $1 batches (JSON), $2 bodies, $3-$5 the bucket's capacity, refill per second and cost, $6 marks, $7 play sets
// (migration 065), $8-$16 the counts' columns (binary arrays: batch number, player, structure, day, approval, slot,
// attested, plays, flagged).
// The token bucket is the arithmetic of pop_take_tokens (020_pop.sql), set-based: a bucket row refused is locked
// but left unchanged; the wait of a refused batch is read from the statement's snapshot, by a lookup of that bucket
// alone (a join of the buckets was planned as a scan of all of them for every group).
const GROUP_SQL = `
WITH input AS (
  SELECT * FROM json_to_recordset($1::json) AS i(
    n int, owner text, batch_seq bigint, channel text, body_offset int, body_length int, body_sha256 text,
    received_at timestamptz, receive_day date, record_count int, newest_record_at timestamptz, answer jsonb,
    legacy boolean, bucket_key text)
), granted AS (
  INSERT INTO pop_rate_buckets AS b (bucket_key, tokens, updated_at)
  SELECT i.bucket_key, $3::float8 - $5::float8, i.received_at FROM input i ORDER BY i.bucket_key COLLATE "C"
  ON CONFLICT (bucket_key) DO UPDATE
     SET tokens = least($3::float8, b.tokens + $4::float8
                        * greatest(0, extract(epoch FROM (EXCLUDED.updated_at - b.updated_at)))) - $5::float8,
         updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
   WHERE least($3::float8, b.tokens + $4::float8
               * greatest(0, extract(epoch FROM (EXCLUDED.updated_at - b.updated_at)))) + 1e-9 >= $5::float8
  RETURNING b.bucket_key
), stored AS (
  INSERT INTO pop_batches (owner, batch_seq, channel, body, body_sha256, received_at, receive_day, record_count,
                           newest_record_at, answer)
  SELECT i.owner, i.batch_seq, i.channel, substring($2::bytea FROM i.body_offset + 1 FOR i.body_length),
         i.body_sha256, i.received_at, i.receive_day, i.record_count, i.newest_record_at, i.answer
    FROM input i JOIN granted g ON g.bucket_key = i.bucket_key
   WHERE NOT (i.legacy AND EXISTS (SELECT 1 FROM pop_batches x WHERE x.owner = i.owner AND x.channel IN ('agent', 'cert')
                                   OFFSET 0))
   ORDER BY i.owner COLLATE "C", i.batch_seq
  ON CONFLICT (owner, batch_seq) DO NOTHING
  RETURNING id, owner, batch_seq
), batch AS (
  SELECT i.n, s.id FROM stored s JOIN input i ON i.owner = s.owner AND i.batch_seq = s.batch_seq
), mark_input AS (
  SELECT m.* FROM ROWS FROM (json_to_recordset($6::json)
                             AS (n int, player_key text, expected bigint, seq bigint, newest timestamptz))
                  WITH ORDINALITY AS m(n, player_key, expected, seq, newest, o)
   WHERE m.n IN (SELECT n FROM batch)
), marks AS (
  INSERT INTO pop_players (player_key, high_water_seq, previous_seq, newest_play_start)
  SELECT m.player_key, m.seq, m.expected, m.newest FROM mark_input m ORDER BY m.o
  ON CONFLICT (player_key) DO UPDATE
     SET high_water_seq = EXCLUDED.high_water_seq, previous_seq = pop_players.high_water_seq,
         newest_play_start = greatest(pop_players.newest_play_start, EXCLUDED.newest_play_start)
   WHERE pop_players.high_water_seq = EXCLUDED.previous_seq
  RETURNING 1
), play_sets AS (
  INSERT INTO pop_play_sets (player_key, start_hour, batch_id, play_keys)
  SELECT p.k, p.h, b.id, ARRAY(SELECT hashtextextended(x, 0) FROM json_array_elements_text(p.i) AS x)
    FROM json_to_recordset($7::json) AS p(n int, k text, h integer, i json) JOIN batch b ON b.n = p.n
), counted AS (
  INSERT INTO play_counts (player_key, structure_id, day, approval_number, slot, attested, plays, flagged)
  SELECT c.player_key, c.structure_id, c.day, c.approval_number, c.slot, c.attested, c.plays, c.flagged
    FROM unnest($8::int4[], $9::text[], $10::uuid[], $11::date[], $12::text[], $13::text[], $14::bool[],
                $15::int8[], $16::int8[])
         WITH ORDINALITY AS c(n, player_key, structure_id, day, approval_number, slot, attested, plays, flagged, o)
   WHERE c.n IN (SELECT n FROM batch)
   ORDER BY c.o
  ON CONFLICT (player_key, day, structure_id, approval_number, slot, attested)
  DO UPDATE SET plays = play_counts.plays + EXCLUDED.plays, flagged = play_counts.flagged + EXCLUDED.flagged
)
SELECT i.n, b.id, g.bucket_key IS NOT NULL AS granted,
       CASE WHEN g.bucket_key IS NULL THEN
         coalesce((SELECT ($5::float8 - least($3::float8, r.tokens + $4::float8
                                               * greatest(0, extract(epoch FROM (i.received_at - r.updated_at)))))
                          / $4::float8
                     FROM pop_rate_buckets r WHERE r.bucket_key = i.bucket_key),
                  ($5::float8 - $3::float8) / $4::float8)
       ELSE 0 END AS wait,
       pop_check_marks((SELECT count(*) FROM mark_input)::int, (SELECT count(*) FROM marks)::int) AS marks_ok
  FROM input i
  LEFT JOIN batch b ON b.n = i.n
  LEFT JOIN granted g ON g.bucket_key = i.bucket_key`;
