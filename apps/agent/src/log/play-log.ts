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
}

/**
 * The play log: every record gets the next `seq` in the same SQLite transaction that stores it
 * (DESIGN.md §9), so a number is never reused after a crash and a stored record always has one.
 */
export class PlayLog {
  private readonly nextSeq: Statement<[], { value: number }>;
  private readonly insertRecord: Statement<[number, string, string | null, string, string]>;
  private readonly findReject: Statement<[string, string], { seq: number }>;
  private readonly insertReject: Statement<[string, string, number]>;

  constructor(private readonly db: Database) {
    this.nextSeq = db.prepare<[], { value: number }>(
      "UPDATE counters SET value = value + 1 WHERE name = 'record_seq' RETURNING value",
    );
    this.insertRecord = db.prepare(
      'INSERT INTO records (seq, kind, play_id, event, logged_at) VALUES (?, ?, ?, ?, ?)',
    );
    this.findReject = db.prepare<[string, string], { seq: number }>(
      'SELECT seq FROM rejects_logged WHERE file_key = ? AND code = ?',
    );
    this.insertReject = db.prepare('INSERT INTO rejects_logged (file_key, code, seq) VALUES (?, ?, ?)');
  }

  /** Logs a play the display reported as really started and ended. */
  appendPlay(input: PlayInput, loggedAt: Date = input.end): LoggedRecord {
    validatePlay(input);
    return this.db.transaction(() => {
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
        this.insertRecord.run(seq, 'play', input.playId, json, rfc3339(loggedAt));
      } catch (cause) {
        if (isUniqueViolation(cause)) {
          throw new AgentError('record_invalid', `play_id ${input.playId} was already logged`, { cause });
        }
        throw cause;
      }
      return { seq, record, json };
    })();
  }

  /** Logs a reject, mode_change or tamper record. */
  appendStatus(input: StatusInput, loggedAt: Date = input.at): LoggedRecord {
    return this.db.transaction(() => this.appendStatusInTransaction(input, loggedAt))();
  }

  /**
   * Logs a reject for `fileKey` (path + content) only if none with this code was logged for it before:
   * a refused file produces one reject, not one per scan or restart. Returns null when already logged.
   */
  appendRejectOnce(fileKey: string, input: StatusInput & { kind: 'reject' }): LoggedRecord | null {
    const code = input.code ?? '';
    return this.db.transaction(() => {
      if (this.findReject.get(fileKey, code)) return null;
      const logged = this.appendStatusInTransaction(input, input.at);
      this.insertReject.run(fileKey, code, logged.seq);
      return logged;
    })();
  }

  /** Runs `work` in one transaction: the appends inside commit together (bulk imports, tests). */
  inTransaction<T>(work: () => T): T {
    return this.db.transaction(work)();
  }

  stats(): QueueStats {
    const row = this.db
      .prepare<[], { last_seq: number; unbatched: number; in_flight: number }>(
        `SELECT (SELECT value FROM counters WHERE name = 'record_seq') AS last_seq,
                (SELECT count(*) FROM records WHERE batch_seq IS NULL) AS unbatched,
                (SELECT coalesce(sum(event_count), 0) FROM batches WHERE answer IS NULL) AS in_flight`,
      )
      .get()!;
    return { lastSeq: row.last_seq, unbatched: row.unbatched, queueDepth: row.unbatched + row.in_flight };
  }

  /** Records in seq order from `afterSeq` (exclusive), for inspection and tests. */
  records(afterSeq = 0, limit = 1000): LoggedRecord[] {
    return this.db
      .prepare<[number, number], { seq: number; event: string }>(
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
    this.insertRecord.run(seq, input.kind, null, json, rfc3339(loggedAt));
    return { seq, record, json };
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
