import { PLAY_ID_PATTERN, SHA256_HEX_PATTERN } from '@ooh/protocol';
import type { Database, Statement } from 'better-sqlite3';
import { AgentError } from '../errors.js';
import {
  type LoggedRecord,
  type PlayInput,
  rfc3339,
  type StatusInput,
  type WirePlayRecord,
  type WireStatusRecord,
} from './records.js';
import { inTransaction, prepared } from './statements.js';

/** Details are facts, not payloads: bound them so one record can never push a batch over 1 MB. */
const DETAIL_MAX_BYTES = 4096;

const playIdPattern = new RegExp(PLAY_ID_PATTERN);
const sha256Pattern = new RegExp(SHA256_HEX_PATTERN);

export interface QueueStats {
  /** Highest seq handed out so far (0 before the first record). */
  lastSeq: number;
  /** Records not yet acknowledged by the platform (unbatched + in unanswered batches). */
  queueDepth: number;
  /** Records not yet cut into a batch. */
  unbatched: number;
  /** Unbatched records whose times wait for the clock to be synced (see {@link ClockStamp}). */
  unsettled: number;
}

/**
 * Where a record stands in time when its clock was not synced with the platform: the agent run whose steady
 * clock measured it, the steady instant, and the clock's reading then. With these, once the clock is synced in
 * the same run, the record's true time is known: sync time - (steady now - steady then).
 */
export interface ClockStamp {
  run: string;
  steadyMs: number;
  clockMs: number;
}

/** Gives the stamp of the moment, or null while the clock is synced (times are then right as they are). */
export type ClockStamper = () => ClockStamp | null;

/** Corrections within this are left alone (a Date header has one-second resolution). */
const SETTLE_TOLERANCE_MS = 1000;

/**
 * The play log: every record gets the next `seq` in the same SQLite transaction that stores it
 * (DESIGN.md §9), so a number is never reused after a crash and a stored record always has one.
 */
export class PlayLog {
  private readonly nextSeq: Statement<[], { value: number }>;
  private readonly insertRecord: Statement<
    [number, string, string | null, string, string, string | null, number | null, number | null]
  >;
  private readonly findReject: Statement<[string, string], { seq: number }>;
  private readonly insertReject: Statement<[string, string, number]>;

  /**
   * `stamp` marks records logged while the clock is not synced, so that their times can be settled later
   * ({@link settleTimes}); without it every record is taken as rightly timed.
   */
  constructor(
    private readonly db: Database,
    private readonly stamp: ClockStamper = () => null,
  ) {
    this.nextSeq = db.prepare<[], { value: number }>(
      "UPDATE counters SET value = value + 1 WHERE name = 'record_seq' RETURNING value",
    );
    this.insertRecord = db.prepare(
      `INSERT INTO records (seq, kind, play_id, event, logged_at, clock_run, clock_steady_ms, clock_read_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.findReject = db.prepare<[string, string], { seq: number }>(
      'SELECT seq FROM rejects_logged WHERE file_key = ? AND code = ?',
    );
    this.insertReject = db.prepare('INSERT INTO rejects_logged (file_key, code, seq) VALUES (?, ?, ?)');
  }

  /** Logs a play the display reported as really started and ended. */
  appendPlay(input: PlayInput, loggedAt: Date = input.end): LoggedRecord {
    validatePlay(input);
    return inTransaction(this.db, () => {
      const seq = this.takeSeq();
      // spec record table order; approval_number or slot, never both.
      const record: WirePlayRecord = {
        kind: 'play',
        seq,
        play_id: input.playId,
        ...(input.approvalNumber !== undefined ? { approval_number: input.approvalNumber } : {}),
        ...(input.slot !== undefined ? { slot: input.slot } : {}),
        media_sha256: input.mediaSha256,
        start: rfc3339(input.start),
        end: rfc3339(input.end),
        duration_ms: input.end.getTime() - input.start.getTime(),
        structure: input.structure,
        screen: { power: input.screenPower },
        ...(input.detail !== undefined ? { detail: boundedDetail(input.detail) } : {}),
      };
      const json = JSON.stringify(record);
      try {
        this.insertRecord.run(seq, 'play', input.playId, json, rfc3339(loggedAt), ...this.stampColumns());
      } catch (cause) {
        if (isUniqueViolation(cause)) {
          throw new AgentError('record_invalid', `play_id ${input.playId} was already logged`, { cause });
        }
        throw cause;
      }
      return { seq, record, json };
    });
  }

  /** Logs a reject, mode_change or tamper record. */
  appendStatus(input: StatusInput, loggedAt: Date = input.at): LoggedRecord {
    return inTransaction(this.db, () => this.appendStatusInTransaction(input, loggedAt));
  }

  /**
   * Logs a reject for `fileKey` (path + content) only if none with this code was logged for it before:
   * a refused file produces one reject, not one per scan or restart. Returns null when already logged.
   */
  appendRejectOnce(fileKey: string, input: StatusInput & { kind: 'reject' }): LoggedRecord | null {
    const code = input.code ?? '';
    return inTransaction(this.db, () => {
      if (this.findReject.get(fileKey, code)) return null;
      const logged = this.appendStatusInTransaction(input, input.at);
      this.insertReject.run(fileKey, code, logged.seq);
      return logged;
    });
  }

  /** Runs `work` in one transaction: the appends inside commit together (bulk imports, tests). */
  inTransaction<T>(work: () => T): T {
    return inTransaction(this.db, work);
  }

  stats(): QueueStats {
    const row = prepared<[], { last_seq: number; unbatched: number; in_flight: number; unsettled: number }>(
      this.db,
      `SELECT (SELECT value FROM counters WHERE name = 'record_seq') AS last_seq,
                (SELECT count(*) FROM records WHERE batch_seq IS NULL) AS unbatched,
                (SELECT coalesce(sum(event_count), 0) FROM batches
                  WHERE answer IS NULL AND abandoned_at IS NULL AND kind = 'records') AS in_flight,
                (SELECT count(*) FROM records WHERE clock_run IS NOT NULL AND batch_seq IS NULL) AS unsettled`,
    ).get()!;
    return {
      lastSeq: row.last_seq,
      unbatched: row.unbatched,
      queueDepth: row.unbatched + row.in_flight,
      unsettled: row.unsettled,
    };
  }

  /** Unbatched records whose times wait for the clock: of the run `run`, and of earlier runs. */
  unsettled(run: string): { thisRun: number; otherRuns: number } {
    const rows = prepared<[string], { mine: number; n: number }>(
      this.db,
      `SELECT clock_run = ? AS mine, count(*) AS n FROM records
          WHERE clock_run IS NOT NULL AND batch_seq IS NULL GROUP BY 1`,
    ).all(run);
    return {
      thisRun: rows.find((row) => row.mine === 1)?.n ?? 0,
      otherRuns: rows.find((row) => row.mine === 0)?.n ?? 0,
    };
  }

  /**
   * Settles the times of unbatched records logged while the clock was not synced, in one transaction.
   * `trueMs(steadyMs)` gives the true instant of a steady instant of run `run` (null: not known). A record of
   * that run whose reading was off by a second or more has its `start`, `end` and `at` moved by the error, and
   * says so in `detail.clock_corrected_ms`; a record of another run (its steady clock is gone with it) keeps
   * the times it has. Records already cut into a batch are never touched: their bytes are fixed.
   */
  settleTimes(
    run: string,
    trueMs: ((steadyMs: number) => number) | null,
  ): { corrected: number; unchanged: number; asStamped: number } {
    const result = { corrected: 0, unchanged: 0, asStamped: 0 };
    inTransaction(this.db, () => {
      const rows = prepared<
        [],
        { seq: number; event: string; clock_run: string; clock_steady_ms: number; clock_read_ms: number }
      >(
        this.db,
        `SELECT seq, event, clock_run, clock_steady_ms, clock_read_ms FROM records
            WHERE clock_run IS NOT NULL AND batch_seq IS NULL ORDER BY seq`,
      ).all();
      const rewrite = prepared<[string, number]>(
        this.db,
        'UPDATE records SET event = ? WHERE seq = ? AND batch_seq IS NULL',
      );
      const clear = prepared<[number]>(
        this.db,
        `UPDATE records SET clock_run = NULL, clock_steady_ms = NULL, clock_read_ms = NULL
          WHERE seq = ? AND batch_seq IS NULL`,
      );
      for (const row of rows) {
        if (row.clock_run !== run || trueMs === null) {
          result.asStamped++;
        } else {
          const errorMs = Math.round(trueMs(row.clock_steady_ms) - row.clock_read_ms);
          if (Math.abs(errorMs) >= SETTLE_TOLERANCE_MS) {
            rewrite.run(shiftedRecord(row.event, errorMs), row.seq);
            result.corrected++;
          } else {
            result.unchanged++;
          }
        }
        clear.run(row.seq);
      }
    });
    return result;
  }

  /** Records in seq order from `afterSeq` (exclusive), for inspection and tests. */
  records(afterSeq = 0, limit = 1000): LoggedRecord[] {
    return prepared<[number, number], { seq: number; event: string }>(
      this.db,
      'SELECT seq, event FROM records WHERE seq > ? ORDER BY seq LIMIT ?',
    )
      .all(afterSeq, limit)
      .map((row) => ({ seq: row.seq, json: row.event, record: JSON.parse(row.event) }));
  }

  private appendStatusInTransaction(input: StatusInput, loggedAt: Date): LoggedRecord {
    const seq = this.takeSeq();
    const record: WireStatusRecord = {
      kind: input.kind,
      seq,
      at: rfc3339(input.at),
      ...(input.code !== undefined ? { code: input.code } : {}),
      ...(input.detail !== undefined ? { detail: boundedDetail(input.detail) } : {}),
    };
    const json = JSON.stringify(record);
    this.insertRecord.run(seq, input.kind, null, json, rfc3339(loggedAt), ...this.stampColumns());
    return { seq, record, json };
  }

  private stampColumns(): [string | null, number | null, number | null] {
    const stamp = this.stamp();
    return stamp ? [stamp.run, stamp.steadyMs, Math.round(stamp.clockMs)] : [null, null, null];
  }

  private takeSeq(): number {
    const row = this.nextSeq.get();
    if (!row) throw new AgentError('database_invalid', 'record_seq counter missing');
    return row.value;
  }
}

function validatePlay(input: PlayInput): void {
  const problems: string[] = [];
  if (!playIdPattern.test(input.playId)) problems.push('play_id');
  if (!sha256Pattern.test(input.mediaSha256)) problems.push('media_sha256');
  // spec: "approval_number ... required on a play unless slot is set"; a slot play carries no approval.
  if ((input.approvalNumber === undefined) === (input.slot === undefined))
    problems.push('approval_number/slot');
  if (!Number.isFinite(input.start.getTime()) || !Number.isFinite(input.end.getTime())) problems.push('time');
  // spec: "start is not after it"
  else if (input.start.getTime() > input.end.getTime()) problems.push('end_before_start');
  if (input.structure.length === 0) problems.push('structure');
  if (problems.length > 0) {
    throw new AgentError('record_invalid', `play record invalid: ${problems.join(', ')}`);
  }
}

/** The record text with its instants moved by `shiftMs` and the move noted in `detail.clock_corrected_ms`. */
function shiftedRecord(json: string, shiftMs: number): string {
  const { detail, ...record } = JSON.parse(json) as Record<string, unknown>;
  for (const key of ['start', 'end', 'at']) {
    const value = record[key];
    if (typeof value === 'string') record[key] = rfc3339(new Date(Date.parse(value) + shiftMs));
  }
  const known = typeof detail === 'object' && detail !== null ? detail : {};
  // detail is the last key of every record (records.ts), so the key order of the wire text is kept.
  return JSON.stringify({ ...record, detail: { ...known, clock_corrected_ms: shiftMs } });
}

function boundedDetail(detail: Record<string, unknown>): Record<string, unknown> {
  const text = JSON.stringify(detail);
  if (Buffer.byteLength(text) <= DETAIL_MAX_BYTES) return detail;
  return { truncated: true, excerpt: text.slice(0, DETAIL_MAX_BYTES / 2) };
}

function isUniqueViolation(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    'code' in error &&
    (error as { code: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE'
  );
}

/**
 * Settles the unsettled records of run `run` by the clock as it reads now: a steady instant's time is the clock's
 * reading now minus the steady time passed since (see {@link PlayLog.settleTimes}). Synced, that is the true time.
 * Not synced but plausible, it is the best there is: the same as the records carry unless the board clock was set
 * since they were logged (a board in 1970 set right by NTP), and then better.
 */
export function settleTimesByClock(
  log: PlayLog,
  run: string,
  clock: { now(): Date; monotonicMs(): number },
): { corrected: number; unchanged: number; asStamped: number } {
  const nowMs = clock.now().getTime();
  const steadyNowMs = clock.monotonicMs();
  return log.settleTimes(run, (steadyMs) => nowMs - (steadyNowMs - steadyMs));
}
