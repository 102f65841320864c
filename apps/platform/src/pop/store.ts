import { almatyDayStart, type PopAnswer } from '@ooh/protocol';
import { dateArray, int8Array, textArray, uuidArray } from '../db/binary-arrays.js';
import { BinaryCopyWriter, CopyStream, copyFrom } from '../db/copy.js';
import type { Db, DbClient } from '../db/pool.js';
import {
  type CountedPlayIds,
  type CountKey,
  type RecordRow,
  type Settled,
  Settler,
  type Verdict,
} from './judge.js';
import { type Bucket, rateLook, windowMinutesOf } from './rate-limits.js';

// Writing a judged batch: the receive day's lock, the batch row, counts, marks, play sets, records and rate tokens in
// one transaction (one batch, or a group: group-commit.ts).

/**
 * Creates the month partition of pop_records that holds `receiveDay` unless `known` (the platform's
 * ctx.caches.pop.partitions) says it exists.
 */
export async function ensureRecordPartition(db: Db, receiveDay: string, known: Set<string>): Promise<void> {
  const month = receiveDay.slice(0, 7);
  if (known.has(month)) return;
  for (let attempt = 0; ; attempt += 1) {
    try {
      await db.query('SELECT pop_records_partition($1::date)', [receiveDay]);
      break;
    } catch (error) {
      // Instances on other databases' catalogues can still race; the second try finds the table.
      if (attempt >= 2 || (error as { code?: string }).code !== '42P07') throw error;
    }
  }
  known.add(month);
}

export interface NewBatch {
  owner: string;
  batchSeq: number;
  channel: 'agent' | 'cert' | 'cms' | 'legacy';
  /** The exact bytes signed (decompressed on the CMS channel). */
  body: Buffer;
  /**
   * The gzip bytes the body came in, when they are smaller: stored instead of `body`, which gunzip restores from
   * them on every read (migration 062).
   */
  gzipped?: Buffer;
  bodySha256: string;
  receivedAt: Date;
  receiveDay: string;
  recordCount: number;
  answer: PopAnswer;
  attested: boolean;
}

export type StoreResult =
  | { kind: 'stored'; id: number }
  /** The rate limits refused it: nothing stored; seconds to wait. */
  | { kind: 'rate_limited'; wait: number }
  /** (owner, batch_seq) was taken meanwhile by another instance. */
  | { kind: 'taken' }
  /** A high-water mark moved since it was read: nothing stored; read the marks again and judge again. */
  | { kind: 'marks_moved' };

/** The statement of openReceiveDays ($1: the days, date[]), also pipelined by the group commit. */
export const OPEN_RECEIVE_DAYS = {
  name: 'pop-open-receive-days',
  text: `SELECT to_char(wanted_day, 'YYYY-MM-DD') AS wanted_day, to_char(open_day, 'YYYY-MM-DD') AS open_day
             FROM pop_open_receive_days($1::date[])`,
};

/**
 * The first thing every transaction that stores batches does (migration 064): takes the receive days' locks shared
 * and gives, for each day asked, the day its batches are stored under: the day itself, or the next day without a
 * seal when the seal of the day was made meanwhile (the spec: "a day is sealed once, after it is over, so a batch
 * that arrives late belongs to the day it arrived"). The sealing of a day waits for these locks, so a batch stored
 * under a day is always covered by that day's seal.
 */
export async function openReceiveDays(
  client: DbClient,
  days: readonly string[],
): Promise<Map<string, string>> {
  const { rows } = await client.query<{ wanted_day: string; open_day: string }>({
    ...OPEN_RECEIVE_DAYS,
    values: [days],
  });
  return new Map(rows.map((r) => [r.wanted_day, r.open_day]));
}

/**
 * The batch as stored under `openDay`: unchanged when that is its receive day; otherwise (its day was sealed while it
 * was on its way) received when it is stored, and at the earliest at the start of that day, so that its leaf's
 * receive time lies on the day it is sealed in (a verifier checks that).
 */
export function stampedInto<B extends Pick<NewBatch, 'receivedAt' | 'receiveDay'>>(
  batch: B,
  openDay: string,
  now: Date,
): B {
  if (openDay === batch.receiveDay) return batch;
  const start = almatyDayStart(openDay);
  return { ...batch, receiveDay: openDay, receivedAt: now.getTime() > start.getTime() ? now : start };
}

/** The newest counted play start of `key` in a settled batch, as a JSON time (null: none had a start). */
export function newestStartOf(settled: Settled, key: string): string | null {
  const ms = settled.newestPlayStarts.get(key);
  return ms === undefined ? null : new Date(ms).toISOString();
}

export const RECORD_COLUMNS =
  'receive_day, batch_id, record_index, player_key, structure_id, kind, seq, day, approval_number, slot, ' +
  'media_sha256, start_at, end_at, duration_ms, at, attested, flags, screen_power, code, play_id, src, detail';
const RECORD_FIELDS = 22;

/** The COPY statement of the taken records (recordsCopyData). */
export const COPY_RECORDS_SQL = `COPY pop_records (${RECORD_COLUMNS}) FROM STDIN (FORMAT binary)`;

interface StoreArgs {
  batch: NewBatch;
  settled: Settled;
  /** The marks the judgement read (0 for a player without a row). */
  readMarks: ReadonlyMap<string, number>;
  buckets: readonly Bucket[];
  /** A legacy batch is stored only while the owner has no service.pop/1 batch (checked again here). */
  legacy: boolean;
  /** The platform clock: the receive time of a batch moved past a day sealed meanwhile (stampedInto). */
  now: () => Date;
}

const byKey = (a: Bucket, b: Bucket) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/**
 * In an open transaction: the statement that stores the batch row, the counts and the moved marks (STORE_SQL),
 * given `id` or a new number; 'stored' when all of it was written.
 */
async function runStoreStatement(client: DbClient, args: StoreArgs, id: number | null): Promise<StoreResult> {
  const { batch, settled } = args;
  const buckets = [...args.buckets].sort(byKey);
  const moved = [...settled.highWater.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const counts = [...settled.counts].sort((a, b) => compareCountKeys(a, b));
  const {
    rows: [row],
  } = await client.query<{ wait: number; id: number | null }>({
    name: 'pop-store-batch',
    text: STORE_SQL,
    values: [
      batch.owner,
      batch.batchSeq,
      batch.channel,
      batch.gzipped ?? batch.body,
      batch.bodySha256,
      batch.receivedAt,
      batch.receiveDay,
      batch.recordCount,
      batch.answer,
      batch.attested,
      args.legacy,
      buckets.map((b) => b.key),
      buckets.map((b) => b.capacity),
      buckets.map((b) => b.perSecond),
      buckets.map((b) => b.cost),
      // Marks as JSON (one parameter).
      JSON.stringify(
        moved.map(([key, seq]) => ({
          k: key,
          e: args.readMarks.get(key) ?? 0,
          s: seq,
          t: newestStartOf(settled, key),
        })),
      ),
      id,
      batch.gzipped ? 'gzip' : 'identity',
      batch.gzipped ? batch.body.length : null,
      settled.newestRecordAt === null ? null : new Date(settled.newestRecordAt),
      settled.playSets.map((set) => set.playerKey),
      `{${settled.playSets.map((set) => set.hour).join(',')}}`,
      // play_ids are A-Za-z0-9_- only (playCandidates, the record schema): ',' and ';' cannot occur in them.
      settled.playSets
        .map((set) => set.playIds.join(','))
        .join(';'),
      // The count rows (hundreds in a CMS batch) as binary arrays, one per column: PostgreSQL reads them without
      // parsing (src/db/binary-arrays.ts).
      textArray(counts.map((c) => c.playerKey)),
      uuidArray(counts.map((c) => c.structureId)),
      dateArray(counts.map((c) => c.day)),
      textArray(counts.map((c) => c.approvalNumber)),
      textArray(counts.map((c) => c.slot)),
      int8Array(counts.map((c) => c.plays)),
      int8Array(counts.map((c) => c.flagged)),
      buckets.map(windowMinutesOf),
    ],
  });
  return row!.wait > 0
    ? { kind: 'rate_limited', wait: row!.wait }
    : row!.id === null
      ? { kind: 'taken' }
      : { kind: 'stored', id: row!.id };
}

/**
 * In an open transaction, last before COMMIT: takes the batch's rate tokens and its share of its windows, all or
 * nothing (pop_take_limits, migration 082). Their rows (the organisation's window is shared by all its
 * installations) stay locked until the COMMIT that follows at once; when not all were granted the caller rolls back.
 */
async function takeTokens(client: DbClient, buckets: readonly Bucket[], at: Date): Promise<number> {
  const sorted = [...buckets].sort(byKey);
  const tokens = sorted.filter((b) => b.windowMinutes === undefined);
  const windows = sorted.filter((b) => b.windowMinutes !== undefined);
  const {
    rows: [taken],
  } = await client.query<{ wait: number }>({
    name: 'pop-take-limits',
    text: `SELECT pop_take_limits($1::text[], $2::float8[], $3::float8[], $4::float8[],
                                  $5::text[], $6::int4[], $7::float8[], $8::float8[], $9) AS wait`,
    values: [
      tokens.map((b) => b.key),
      tokens.map((b) => b.capacity),
      tokens.map((b) => b.perSecond),
      tokens.map((b) => b.cost),
      windows.map((b) => b.key),
      windows.map(windowMinutesOf),
      windows.map((b) => b.capacity),
      windows.map((b) => b.cost),
      at,
    ],
  });
  return taken!.wait;
}

/** Takes `bucket`'s cost now, on its own (autocommit): 0 when granted, else the seconds to wait. */
export async function takeCallToken(db: Db, bucket: Bucket, at: Date): Promise<number> {
  const { rows } = await db.query<{ wait: number }>({
    name: 'pop-take-call-token',
    text: 'SELECT pop_take_tokens($1::text[], $2::float8[], $3::float8[], $4::float8[], $5) AS wait',
    values: [[bucket.key], [bucket.capacity], [bucket.perSecond], [bucket.cost], at],
  });
  return rows[0]!.wait;
}

/**
 * SQLSTATE deadlock_detected. A group of agent batches locks a device's rate bucket before its mark and counts (the
 * group statement), while storeBatch, which stores each batch of a failed group on its own, takes the tokens last:
 * two instances storing batches of one device that way can wait for each other, and PostgreSQL then aborts one.
 */
const DEADLOCK_DETECTED = '40P01';

/**
 * Runs `work` in a transaction on its own client; a moved mark (PHWM1) is the result marks_moved, and so is a
 * deadlock: the transaction was rolled back whole, so the caller reads the marks and stores again (at most
 * MAX_ROUNDS times, then 503), where it used to answer 500.
 */
async function inTransaction(db: Db, work: (client: DbClient) => Promise<StoreResult>): Promise<StoreResult> {
  const client = await db.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    try {
      const result = await work(client);
      await client.query(result.kind === 'stored' ? 'COMMIT' : 'ROLLBACK');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      const code = (error as { code?: string }).code;
      if (code === 'PHWM1' || code === DEADLOCK_DETECTED) return { kind: 'marks_moved' };
      throw error;
    }
  } catch (error) {
    broken = true;
    throw error;
  } finally {
    client.release(broken);
  }
}

/**
 * Stores a batch, its taken records, the counts and the moved high-water marks atomically, after taking its rate
 * tokens, or nothing at all. The marks are compared and set in the same statement (each row locked in key order):
 * if another instance moved one after it was read, the statement aborts and the caller judges again, so a mark
 * is exact across instances without holding locks while judging. The records follow by COPY, then the tokens are
 * taken (a look at them at the statement's start refuses a batch over the limit before it costs more).
 */
export function storeBatch(db: Db, args: StoreArgs): Promise<StoreResult> {
  return inTransaction(db, async (client) => {
    const open = await openReceiveDays(client, [args.batch.receiveDay]);
    const batch = stampedInto(args.batch, open.get(args.batch.receiveDay)!, args.now());
    const result = await runStoreStatement(client, { ...args, batch }, null);
    if (result.kind !== 'stored') return result;
    if (args.settled.rows.length > 0) {
      await copyFrom(client, COPY_RECORDS_SQL, [
        recordsCopyData([{ batchId: result.id, batch, settled: args.settled }]),
      ]);
    }
    const wait = await takeTokens(client, args.buckets, args.batch.receivedAt);
    // Spent since the look (another batch took them): nothing is stored.
    return wait > 0 ? { kind: 'rate_limited', wait } : result;
  });
}

/**
 * Records judged a part at a time while the previous part is being copied (storeBatchStreaming). A part (about
 * 150 kB of COPY data) fits in the embedded PostgreSQL's Unix socket buffer (about 200 kB by default), so it
 * leaves for the server at once while the next part is judged; parts of 2 000 records waited in the process for
 * the judging to yield, and the server sat idle (measured: 96 000 against 113 000 records/s, one sender).
 */
const STREAM_PART = 500;

/**
 * storeBatch for a large batch whose number was taken beforehand (`batchId`): its records are judged a part at a
 * time and each part is sent to a COPY at once, so PostgreSQL writes the first parts while the platform judges
 * the next; the batch row, marks and counts follow when all are judged, then the tokens, in one transaction as
 * in storeBatch. The marks are those the judgement reads (`readMarks`); gives the settled batch and its answer.
 */
export async function storeBatchStreaming(
  db: Db,
  args: {
    batchId: number;
    batch: Omit<NewBatch, 'answer'>;
    records: number;
    judge: (from: number, to: number) => Verdict[];
    readMarks: ReadonlyMap<string, number>;
    countedPlayIds?: CountedPlayIds;
    buckets: readonly Bucket[];
    legacy: boolean;
    answerOf: (settled: Settled) => PopAnswer;
    now: () => Date;
  },
): Promise<{ result: StoreResult; settled: Settled; answer: PopAnswer }> {
  const settler = new Settler(args.readMarks, args.countedPlayIds);
  let settled: Settled | null = null;
  let answer: PopAnswer | null = null;
  const result = await inTransaction(db, async (client) => {
    let stamped: Omit<NewBatch, 'answer'> | null = null;
    // The records are copied before the batch row: the day they go under is settled first. The receive-day
    // statement and the COPY go out together, and the first part is judged while the server answers them (the
    // judgement reads the receipt as it came, not the day the rows go under; one sender waits one round trip less).
    const opening = openReceiveDays(client, [args.batch.receiveDay]);
    opening.catch(() => {}); // awaited below, after the first part is judged
    const copy = new CopyStream(COPY_RECORDS_SQL);
    copy.start(client);
    try {
      const out = new BinaryCopyWriter(STREAM_PART * 320);
      for (let from = 0; from < args.records; from += STREAM_PART) {
        const rows = settler.add(args.judge(from, Math.min(args.records, from + STREAM_PART)));
        stamped ??= stampedInto(args.batch, (await opening).get(args.batch.receiveDay)!, args.now());
        writeRecordRows(out, args.batchId, stamped, rows);
        copy.push(out.drain(STREAM_PART * 320));
        // The socket takes the part, and other requests get their turn, while the server copies it.
        await new Promise((resolve) => setImmediate(resolve));
      }
      stamped ??= stampedInto(args.batch, (await opening).get(args.batch.receiveDay)!, args.now());
      copy.push(out.finish());
      copy.end();
    } catch (error) {
      copy.fail('the batch could not be judged');
      await copy.done.catch(() => {});
      throw error;
    }
    await copy.done;
    const batch = stamped;
    settled = settler.finish();
    answer = args.answerOf(settled);
    const stored = await runStoreStatement(
      client,
      {
        batch: { ...batch, answer },
        settled,
        readMarks: args.readMarks,
        buckets: args.buckets,
        legacy: args.legacy,
        now: args.now,
      },
      args.batchId,
    );
    if (stored.kind !== 'stored') return stored;
    const wait = await takeTokens(client, args.buckets, args.batch.receivedAt);
    return wait > 0 ? { kind: 'rate_limited', wait } : stored;
  });
  // The judgement of the records not reached (an error before the end) is not needed: the caller judges again.
  settled ??= settler.finish();
  answer ??= args.answerOf(settled);
  return { result, settled, answer };
}

/** The one order in which count rows are locked by every writer (no deadlock between instances). */
export function compareCountKeys(a: CountKey, b: CountKey): number {
  return a.sortKey < b.sortKey ? -1 : a.sortKey > b.sortKey ? 1 : 0;
}

/**
 * The taken records of stored batches as one COPY stream in binary format (pop_records' columns, in
 * RECORD_COLUMNS order). Binary: the server reads dates, instants and ids without parsing text.
 */
export function recordsCopyData(
  batches: readonly { batchId: number; batch: Pick<NewBatch, 'receiveDay' | 'attested'>; settled: Settled }[],
): Buffer {
  let rows = 0;
  for (const b of batches) rows += b.settled.rows.length;
  const out = new BinaryCopyWriter(rows * 320 + 64);
  for (const { batchId, batch, settled } of batches) writeRecordRows(out, batchId, batch, settled.rows);
  return out.finish();
}

function writeRecordRows(
  out: BinaryCopyWriter,
  batchId: number,
  batch: Pick<NewBatch, 'receiveDay' | 'attested'>,
  rows: readonly RecordRow[],
): void {
  for (const r of rows) {
    out.row(RECORD_FIELDS);
    out.date(batch.receiveDay);
    out.int64(batchId);
    out.int32(r.index);
    out.text(r.playerKey);
    out.uuid(r.structureId);
    out.text(r.kind);
    r.seq === null ? out.null() : out.int64(r.seq);
    out.date(r.day);
    r.approvalNumber === null ? out.null() : out.text(r.approvalNumber);
    r.slot === null ? out.null() : out.text(r.slot);
    r.mediaSha256 === null ? out.null() : out.text(r.mediaSha256);
    r.startAt === null ? out.null() : out.timestamp(r.startAt);
    r.endAt === null ? out.null() : out.timestamp(r.endAt);
    r.durationMs === null ? out.null() : out.int64(r.durationMs);
    r.at === null ? out.null() : out.timestamp(r.at);
    out.bool(batch.attested);
    out.textArray(r.flags);
    r.screenPower === null ? out.null() : out.text(r.screenPower);
    r.code === null ? out.null() : out.text(r.code);
    r.playId === null ? out.null() : out.text(r.playId);
    r.src === null ? out.null() : out.text(r.src);
    r.detail === null ? out.null() : out.text(r.detail);
  }
}

// One statement: a look at the rate tokens (without taking them: a batch over the limit costs no more than this
// statement), the batch, the counts and the marks (compare-and-set, in key order); then the records by COPY and
// the tokens taken (pop_take_limits), all in one transaction. Nothing is written when the tokens are short or
// (owner, batch_seq) is taken.
const STORE_SQL = `
WITH rate AS (
  SELECT ${rateLook('$12', '$13', '$14', '$15', '$31', '$6')} AS wait
), batch AS (
  INSERT INTO pop_batches (id, owner, batch_seq, channel, body, body_sha256, received_at, receive_day, record_count,
                           answer, body_encoding, body_size, newest_record_at)
  SELECT coalesce($17::bigint, nextval(pg_get_serial_sequence('pop_batches', 'id'))), $1, $2, $3, $4, $5, $6, $7, $8, $9,
         $18, $19, $20
   WHERE (SELECT wait FROM rate) = 0
     AND NOT ($11 AND EXISTS (SELECT 1 FROM pop_batches x WHERE x.owner = $1 AND x.channel IN ('agent', 'cert')))
  ON CONFLICT (owner, batch_seq) DO NOTHING
  RETURNING id
), marks AS (
  INSERT INTO pop_players (player_key, high_water_seq, previous_seq, newest_play_start)
  SELECT m.k, m.s, m.e, m.t
    FROM batch, ROWS FROM (json_to_recordset($16::json) AS (k text, e bigint, s bigint, t timestamptz))
                WITH ORDINALITY AS m(k, e, s, t, n)
   ORDER BY m.n
  ON CONFLICT (player_key) DO UPDATE
     SET high_water_seq = EXCLUDED.high_water_seq, previous_seq = pop_players.high_water_seq,
         newest_play_start = greatest(pop_players.newest_play_start, EXCLUDED.newest_play_start)
   WHERE pop_players.high_water_seq = EXCLUDED.previous_seq
  RETURNING 1
), play_sets AS (
  -- The sets as split text ($23: sets split by ';', play_ids by ','), which PostgreSQL reads in about half the
  -- time of the same in JSON; with no set, an empty string is no row.
  INSERT INTO pop_play_sets (player_key, start_hour, batch_id, play_keys)
  SELECT ($21::text[])[p.n], ($22::int[])[p.n], batch.id,
         ARRAY(SELECT hashtextextended(x, 0) FROM string_to_table(p.i, ',') AS x)
    FROM batch, string_to_table(nullif($23::text, ''), ';') WITH ORDINALITY AS p(i, n)
), counted AS (
  INSERT INTO play_counts (player_key, structure_id, day, approval_number, slot, attested, plays, flagged)
  SELECT c.k, c.t, c.d, c.a, c.l, $10, c.p, c.f
    FROM batch, unnest($24::text[], $25::uuid[], $26::date[], $27::text[], $28::text[], $29::int8[], $30::int8[])
                WITH ORDINALITY AS c(k, t, d, a, l, p, f, n)
   ORDER BY c.n
  ON CONFLICT (player_key, day, structure_id, approval_number, slot, attested)
  DO UPDATE SET plays = play_counts.plays + EXCLUDED.plays, flagged = play_counts.flagged + EXCLUDED.flagged
)
SELECT (SELECT wait FROM rate) AS wait,
       (SELECT id FROM batch) AS id,
       pop_check_marks(CASE WHEN EXISTS (SELECT 1 FROM batch) THEN json_array_length($16::json) ELSE 0 END,
                       (SELECT count(*) FROM marks)::int) AS marks_ok`;
