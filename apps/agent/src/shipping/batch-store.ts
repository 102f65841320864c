import { AgentState } from '../log/agent-state.js';
import { sha256Hex } from '@ooh/crypto';
import { LIMITS } from '@ooh/protocol';
import type { Database } from 'better-sqlite3';
import { AgentError } from '../errors.js';
import { rfc3339 } from '../log/records.js';
import { type BatchHeader, batchBodyParts, batchOverheadBytes, buildBatchBody } from './batch-body.js';
import { inTransaction, prepared } from '../log/statements.js';

export interface StoredBatch {
  batchSeq: number;
  firstSeq: number;
  lastSeq: number;
  eventCount: number;
  prevSha256: string;
  sentAt: string;
  ts: string;
  body: Buffer;
  bodySha256: string;
  attempts: number;
  terminalCode: string | null;
  /** Failed sends of these bytes (no answer, or an answer other than 200), of which `serverErrors` answered 5xx. */
  failures: number;
  serverErrors: number;
  firstFailedAt: string | null;
  lastFailedAt: string | null;
  /** What the last failed send got: `http 500 internal_error`, `network: ...`. */
  lastFailure: string | null;
}

/** A record the platform could not take while it took others (see Shipper): kept, reported, never sent again. */
export interface SetAsideRecord {
  seq: number;
  kind: string;
  /** When the record was logged, and when it was set aside (RFC 3339). */
  loggedAt: string;
  setAsideAt: string;
  reason: string;
}

interface BatchRow {
  batch_seq: number;
  first_seq: number;
  last_seq: number;
  event_count: number;
  prev_sha256: string;
  sent_at: string;
  ts: string;
  body: Buffer;
  body_sha256: string;
  attempts: number;
  terminal_code: string | null;
  failures: number;
  server_errors: number;
  first_failed_at: string | null;
  last_failed_at: string | null;
  last_failure: string | null;
}

/**
 * Earlier signings kept per batch (refreshTs). Only a send whose answer was lost can still be committing, and each
 * re-sign follows an answered send, so the newest few are the ones that matter.
 */
const MAX_EARLIER_SIGNINGS = 8;

/** A batch of records still to be answered: neither answered nor given up, nor a probe. */
const PENDING = "answer IS NULL AND abandoned_at IS NULL AND kind = 'records'";

export interface CutOptions {
  deviceId: string;
  now: Date;
  /** spec Limits: "at most 1000 events". */
  maxEvents?: number;
  /** spec Limits: "agent telemetry body at most 1 MB". */
  maxBytes?: number;
}

/**
 * Batches cut from unsent records (DESIGN.md §9): the exact bytes are stored with `batch_seq` and
 * `prev_sha256`, and one batch at a time is in flight, so batches go out in order and each names the
 * body the platform actually accepted before it.
 */
export class BatchStore {
  constructor(private readonly db: Database) {}

  /** The oldest batch of records without a stored answer that was not given up, if any. */
  pending(): StoredBatch | null {
    const row = prepared<[], BatchRow>(
      this.db,
      `SELECT * FROM batches WHERE ${PENDING} ORDER BY batch_seq LIMIT 1`,
    ).get();
    return row ? toBatch(row) : null;
  }

  /**
   * Runs `work` in one transaction (nested in one already open: a savepoint). The shipper writes what belongs together
   * at once (the cut and its first attempt; the answer and the state it moves): one commit, one sync, instead of one
   * per statement.
   */
  inTransaction<T>(work: () => T): T {
    return inTransaction(this.db, work);
  }

  /** The pending batch, or a new one cut from unsent records; null when there is nothing to send. */
  pendingOrCut(options: CutOptions): StoredBatch | null {
    return inTransaction(this.db, () => this.pending() ?? this.cutInTransaction(options));
  }

  /**
   * Re-signs a batch that got 401 stale_request: the same events under the same batch_seq with a fresh ts
   * (DESIGN.md §5: "nothing was stored, so nothing conflicts"). The new bytes replace the old ones.
   */
  refreshTs(batchSeq: number, deviceId: string, ts: Date): StoredBatch {
    return inTransaction(this.db, () => {
      const row = prepared<[number], BatchRow>(
        this.db,
        `SELECT * FROM batches WHERE batch_seq = ? AND ${PENDING}`,
      ).get(batchSeq);
      if (!row) throw new AgentError('batch_invalid', `batch ${batchSeq} is not pending`);
      const body = this.bodyFromRecords(
        { deviceId, ts, batchSeq, prevSha256: row.prev_sha256, sentAt: new Date(row.sent_at) },
        'batch_seq = ?',
        batchSeq,
      );
      // The bytes replaced are kept: a send of them may still be committing at the platform (earlierSignings).
      prepared(
        this.db,
        `INSERT INTO batch_versions (batch_seq, replaced_at, ts, body, body_sha256) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (batch_seq, body_sha256) DO NOTHING`,
      ).run(batchSeq, rfc3339(ts), row.ts, row.body, row.body_sha256);
      prepared(
        this.db,
        `DELETE FROM batch_versions WHERE batch_seq = ? AND rowid NOT IN
           (SELECT rowid FROM batch_versions WHERE batch_seq = ? ORDER BY rowid DESC LIMIT ?)`,
      ).run(batchSeq, batchSeq, MAX_EARLIER_SIGNINGS);
      prepared(this.db, 'UPDATE batches SET body = ?, body_sha256 = ?, ts = ? WHERE batch_seq = ?').run(
        body,
        sha256Hex(body),
        rfc3339(ts),
        batchSeq,
      );
      return toBatch(
        prepared<[number], BatchRow>(this.db, 'SELECT * FROM batches WHERE batch_seq = ?').get(batchSeq)!,
      );
    });
  }

  /**
   * The bytes a pending batch carried before it was re-signed (refreshTs), newest first: the batch as each earlier
   * signing sent it. A send of one of them whose answer was lost may have been stored by the platform after a later
   * send was answered stale_request; the re-signed bytes then get 409 batch_conflict, and sending the stored ones
   * again reads the platform's answer (DESIGN.md §5: idempotency is judged before freshness).
   */
  earlierSignings(batchSeq: number): StoredBatch[] {
    const batch = this.get(batchSeq);
    if (!batch) return [];
    return prepared<[number], { ts: string; body: Buffer; body_sha256: string }>(
      this.db,
      'SELECT ts, body, body_sha256 FROM batch_versions WHERE batch_seq = ? ORDER BY rowid DESC',
    )
      .all(batchSeq)
      .filter((row) => row.body_sha256 !== batch.bodySha256)
      .map((row) => ({ ...batch, ts: row.ts, body: row.body, bodySha256: row.body_sha256 }));
  }

  /**
   * The platform holds this earlier signing of a pending batch (it answered it 200): its bytes become the batch's
   * again, so that the answer stored next is the answer to them and the next batch's prev_sha256 names the body the
   * platform took. The bytes replaced are kept among the earlier signings.
   */
  restoreSigning(batchSeq: number, signing: Pick<StoredBatch, 'ts' | 'body' | 'bodySha256'>, at: Date): void {
    inTransaction(this.db, () => {
      const row = prepared<[number], BatchRow>(
        this.db,
        `SELECT * FROM batches WHERE batch_seq = ? AND ${PENDING}`,
      ).get(batchSeq);
      if (!row) throw new AgentError('batch_invalid', `batch ${batchSeq} is not pending`);
      if (row.body_sha256 === signing.bodySha256) return;
      prepared(
        this.db,
        `INSERT INTO batch_versions (batch_seq, replaced_at, ts, body, body_sha256) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (batch_seq, body_sha256) DO NOTHING`,
      ).run(batchSeq, rfc3339(at), row.ts, row.body, row.body_sha256);
      prepared(this.db, 'UPDATE batches SET body = ?, body_sha256 = ?, ts = ? WHERE batch_seq = ?').run(
        signing.body,
        signing.bodySha256,
        signing.ts,
        batchSeq,
      );
    });
  }

  noteAttempt(batchSeq: number, channel: string): void {
    prepared(this.db, 'UPDATE batches SET attempts = attempts + 1, channel = ? WHERE batch_seq = ?').run(
      channel,
      batchSeq,
    );
  }

  /**
   * Stores the platform's answer; this is the moment the batch's records count as sent (records are marked
   * sent only after the answer is stored).
   */
  storeAnswer(batchSeq: number, answerJson: string, at: Date): void {
    const result = prepared(
      this.db,
      `UPDATE batches SET answer = ?, answered_at = ?, terminal_code = NULL
          WHERE batch_seq = ? AND answer IS NULL AND abandoned_at IS NULL`,
    ).run(answerJson, rfc3339(at), batchSeq);
    if (result.changes !== 1) throw new AgentError('batch_invalid', `batch ${batchSeq} is not pending`);
    this.forgetEarlierSignings(batchSeq);
  }

  /** Answered or given up: no earlier signing of the batch is ever sent again. */
  private forgetEarlierSignings(batchSeq: number): void {
    prepared(this.db, 'DELETE FROM batch_versions WHERE batch_seq = ?').run(batchSeq);
  }

  markTerminal(batchSeq: number, code: string): void {
    prepared(this.db, 'UPDATE batches SET terminal_code = ? WHERE batch_seq = ?').run(code, batchSeq);
  }

  /** A send of the batch failed: no answer, or an answer other than 200 (`serverError`: a 5xx). */
  noteFailure(batchSeq: number, failure: { at: Date; serverError: boolean; what: string }): StoredBatch {
    const at = rfc3339(failure.at);
    prepared(
      this.db,
      `UPDATE batches SET failures = failures + 1, server_errors = server_errors + ?,
                first_failed_at = coalesce(first_failed_at, ?), last_failed_at = ?, last_failure = ?
          WHERE batch_seq = ?`,
    ).run(failure.serverError ? 1 : 0, at, at, failure.what.slice(0, 300), batchSeq);
    return this.get(batchSeq)!;
  }

  /**
   * Gives a batch up so that its records are cut again, in smaller batches under new numbers: its records go back
   * to the unbatched, where they come first (they are the oldest). Its batch_seq is never used again; its bytes
   * stay. Safe even if the platform stored it and the answer was lost: its records are then at or below the
   * player's high-water mark and are answered as duplicates, not counted again.
   */
  abandonForRecut(batchSeq: number, at: Date): void {
    inTransaction(this.db, () => {
      this.abandon(batchSeq, at, 'recut');
      prepared(this.db, 'UPDATE records SET batch_seq = NULL WHERE batch_seq = ?').run(batchSeq);
    });
  }

  /** Sets aside the one record of a batch the platform cannot take (the batch is given up with it). */
  setAside(batchSeq: number, at: Date, reason: string): void {
    inTransaction(this.db, () => {
      const batch = this.get(batchSeq);
      if (!batch || batch.eventCount !== 1) {
        throw new AgentError('batch_invalid', `batch ${batchSeq} does not hold exactly one record`);
      }
      this.abandon(batchSeq, at, 'set_aside');
      prepared(this.db, 'UPDATE records SET set_aside_at = ?, set_aside_reason = ? WHERE batch_seq = ?').run(
        rfc3339(at),
        reason.slice(0, 300),
        batchSeq,
      );
    });
  }

  /**
   * A batch of no records under a new batch_seq: whether the platform takes a batch from this device at all, with
   * nothing counted and no record's seq moved. Never pending: answered (storeAnswer) or given up (abandonProbe).
   */
  cutProbe(deviceId: string, now: Date): StoredBatch {
    return inTransaction(this.db, () => {
      const batchSeq = this.takeBatchSeq();
      const header = { deviceId, ts: now, batchSeq, prevSha256: this.previousSha256(), sentAt: now };
      const body = buildBatchBody(header, []);
      this.insertBatch(header, { firstSeq: 0, lastSeq: 0, count: 0, body, kind: 'probe', cutAt: now });
      return this.get(batchSeq)!;
    });
  }

  abandonProbe(batchSeq: number, at: Date): void {
    this.abandon(batchSeq, at, 'probe');
  }

  /** Records set aside, newest first (at most `limit`), and how many there are. */
  setAsideRecords(limit = 5): { count: number; newest: SetAsideRecord[] } {
    const count = prepared<[], { n: number }>(
      this.db,
      'SELECT count(*) AS n FROM records WHERE set_aside_at IS NOT NULL',
    ).get()!.n;
    const newest = prepared<
      [number],
      {
        seq: number;
        kind: string;
        logged_at: string;
        set_aside_at: string;
        set_aside_reason: string | null;
      }
    >(
      this.db,
      `SELECT seq, kind, logged_at, set_aside_at, set_aside_reason FROM records
          WHERE set_aside_at IS NOT NULL ORDER BY seq DESC LIMIT ?`,
    )
      .all(limit)
      .map((row) => ({
        seq: row.seq,
        kind: row.kind,
        loggedAt: row.logged_at,
        setAsideAt: row.set_aside_at,
        reason: row.set_aside_reason ?? '',
      }));
    return { count, newest };
  }

  private abandon(batchSeq: number, at: Date, reason: 'recut' | 'set_aside' | 'probe'): void {
    const result = prepared(
      this.db,
      'UPDATE batches SET abandoned_at = ?, abandon_reason = ? WHERE batch_seq = ? AND answer IS NULL AND abandoned_at IS NULL',
    ).run(rfc3339(at), reason, batchSeq);
    if (result.changes !== 1) throw new AgentError('batch_invalid', `batch ${batchSeq} is not pending`);
    this.forgetEarlierSignings(batchSeq);
  }

  lastAnswered(): { batchSeq: number; answeredAt: string; answer: string } | null {
    const row = prepared<[], { batch_seq: number; answered_at: string; answer: string }>(
      this.db,
      "SELECT batch_seq, answered_at, answer FROM batches WHERE answer IS NOT NULL AND kind = 'records' ORDER BY batch_seq DESC LIMIT 1",
    ).get();
    return row ? { batchSeq: row.batch_seq, answeredAt: row.answered_at, answer: row.answer } : null;
  }

  get(batchSeq: number): StoredBatch | null {
    const row = prepared<[number], BatchRow>(this.db, 'SELECT * FROM batches WHERE batch_seq = ?').get(
      batchSeq,
    );
    return row ? toBatch(row) : null;
  }

  /**
   * The body built by SQLite from the stored JSON texts of the matching records, in seq order: the exact
   * bytes {@link buildBatchBody} would make, without a large JS string.
   */
  private bodyFromRecords(
    header: BatchHeader,
    where: 'batch_seq = ?' | 'batch_seq IS NULL AND seq BETWEEN ? AND ?',
    ...params: number[]
  ): Buffer {
    const { prefix, suffix } = batchBodyParts(header);
    const row = prepared<(string | number)[], { body: Buffer }>(
      this.db,
      `SELECT CAST(? || coalesce(group_concat(event, ',' ORDER BY seq), '') || ? AS BLOB) AS body
           FROM records WHERE ${where}`,
    ).get(prefix, suffix, ...params);
    return row!.body;
  }

  private takeBatchSeq(): number {
    return prepared<[], { value: number }>(
      this.db,
      "UPDATE counters SET value = value + 1 WHERE name = 'batch_seq' RETURNING value",
    ).get()!.value;
  }

  /**
   * spec prev_sha256: "hex SHA-256 of the previous batch body; empty for the first": the body of the newest batch
   * the platform took (answered). A batch given up may never have reached it. Retention may have removed that batch
   * (a player with nothing to send for weeks): it leaves its number and hash in agent_state (CHAIN_HEAD_KEY) first.
   */
  private previousSha256(): string {
    const row = prepared<[], { batch_seq: number; body_sha256: string }>(
      this.db,
      'SELECT batch_seq, body_sha256 FROM batches WHERE answer IS NOT NULL ORDER BY batch_seq DESC LIMIT 1',
    ).get();
    const head = chainHead(this.db);
    if (head && (!row || head.batchSeq > row.batch_seq)) return head.bodySha256;
    return row?.body_sha256 ?? '';
  }

  private insertBatch(
    header: BatchHeader,
    batch: {
      firstSeq: number;
      lastSeq: number;
      count: number;
      body: Buffer;
      kind: 'records' | 'probe';
      cutAt: Date;
    },
  ): void {
    prepared(
      this.db,
      `INSERT INTO batches (batch_seq, first_seq, last_seq, event_count, prev_sha256, sent_at, ts, body,
                              body_sha256, cut_at, kind)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      header.batchSeq,
      batch.firstSeq,
      batch.lastSeq,
      batch.count,
      header.prevSha256,
      rfc3339(header.sentAt),
      rfc3339(header.ts),
      batch.body,
      sha256Hex(batch.body),
      rfc3339(batch.cutAt),
      batch.kind,
    );
  }

  private cutInTransaction(options: CutOptions): StoredBatch | null {
    const maxEvents = options.maxEvents ?? LIMITS.telemetryEventsMax;
    const maxBytes = options.maxBytes ?? LIMITS.telemetryBodyMaxBytes;
    // Sizes only: the event texts themselves never become JS strings here (see buildBatchBody).
    const queued = prepared<[number], { seq: number; bytes: number; unsettled: number }>(
      this.db,
      `SELECT seq, length(CAST(event AS BLOB)) AS bytes, clock_run IS NOT NULL AS unsettled
           FROM records WHERE batch_seq IS NULL ORDER BY seq LIMIT ?`,
    ).all(maxEvents);
    // A record whose times still wait for the clock (PlayLog.settleTimes) is not cut, nor anything after it:
    // once cut, its bytes are final. The shipper settles them first.
    const firstUnsettled = queued.findIndex((row) => row.unsettled === 1);
    const rows = firstUnsettled < 0 ? queued : queued.slice(0, firstUnsettled);
    if (rows.length === 0) return null;

    const batchSeq = this.takeBatchSeq();
    const header = {
      deviceId: options.deviceId,
      ts: options.now,
      batchSeq,
      prevSha256: this.previousSha256(),
      sentAt: options.now,
    };

    // Fit under the byte limit: keep the longest prefix whose body stays within maxBytes.
    let size = batchOverheadBytes(header);
    let count = 0;
    for (const row of rows) {
      const add = row.bytes + (count > 0 ? 1 : 0);
      if (size + add > maxBytes) break;
      size += add;
      count++;
    }
    if (count === 0) throw new AgentError('batch_invalid', `record ${rows[0]!.seq} does not fit in a batch`);
    const firstSeq = rows[0]!.seq;
    const lastSeq = rows[count - 1]!.seq;
    const body = this.bodyFromRecords(header, 'batch_seq IS NULL AND seq BETWEEN ? AND ?', firstSeq, lastSeq);
    this.insertBatch(header, { firstSeq, lastSeq, count, body, kind: 'records', cutAt: options.now });
    prepared(this.db, 'UPDATE records SET batch_seq = ? WHERE batch_seq IS NULL AND seq BETWEEN ? AND ?').run(
      batchSeq,
      firstSeq,
      lastSeq,
    );
    return toBatch(
      prepared<[number], BatchRow>(this.db, 'SELECT * FROM batches WHERE batch_seq = ?').get(batchSeq)!,
    );
  }
}

/**
 * agent_state key: `{batch_seq, body_sha256}` of the newest answered batch retention removed, which the next batch's
 * prev_sha256 still names when no newer answered batch is left (storage/retention.ts).
 */
export const CHAIN_HEAD_KEY = 'shipping.chain_head';

export interface ChainHead {
  batchSeq: number;
  bodySha256: string;
}

export function chainHead(db: Database): ChainHead | null {
  const value = new AgentState(db).get<{ batch_seq: number; body_sha256: string }>(CHAIN_HEAD_KEY);
  return value ? { batchSeq: value.batch_seq, bodySha256: value.body_sha256 } : null;
}

/** Keeps the hash of the newest answered batch before its row goes (retention), so prev_sha256 still chains. */
export function keepChainHead(db: Database, head: ChainHead): void {
  new AgentState(db).set(CHAIN_HEAD_KEY, { batch_seq: head.batchSeq, body_sha256: head.bodySha256 });
}

function toBatch(row: BatchRow): StoredBatch {
  return {
    batchSeq: row.batch_seq,
    firstSeq: row.first_seq,
    lastSeq: row.last_seq,
    eventCount: row.event_count,
    prevSha256: row.prev_sha256,
    sentAt: row.sent_at,
    ts: row.ts,
    body: row.body,
    bodySha256: row.body_sha256,
    attempts: row.attempts,
    terminalCode: row.terminal_code,
    failures: row.failures,
    serverErrors: row.server_errors,
    firstFailedAt: row.first_failed_at,
    lastFailedAt: row.last_failed_at,
    lastFailure: row.last_failure,
  };
}
