import { sha256Hex } from '@ooh/crypto';
import { LIMITS } from '@ooh/protocol';
import type { Database } from 'better-sqlite3';
import { AgentError } from '../errors.js';
import { rfc3339 } from '../log/records.js';
import { type BatchHeader, batchBodyParts, batchOverheadBytes } from './batch-body.js';

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
}

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

  /** The oldest batch without a stored answer, if any. */
  pending(): StoredBatch | null {
    const row = this.db
      .prepare<[], BatchRow>('SELECT * FROM batches WHERE answer IS NULL ORDER BY batch_seq LIMIT 1')
      .get();
    return row ? toBatch(row) : null;
  }

  /** The pending batch, or a new one cut from unsent records; null when there is nothing to send. */
  pendingOrCut(options: CutOptions): StoredBatch | null {
    return this.db.transaction(() => this.pending() ?? this.cutInTransaction(options))();
  }

  /**
   * Re-signs a batch that got 401 stale_request: the same events under the same batch_seq with a fresh ts
   * (DESIGN.md §5: "nothing was stored, so nothing conflicts"). The new bytes replace the old ones.
   */
  refreshTs(batchSeq: number, deviceId: string, ts: Date): StoredBatch {
    return this.db.transaction(() => {
      const row = this.db
        .prepare<[number], BatchRow>('SELECT * FROM batches WHERE batch_seq = ? AND answer IS NULL')
        .get(batchSeq);
      if (!row) throw new AgentError('batch_invalid', `batch ${batchSeq} is not pending`);
      const body = this.bodyFromRecords(
        { deviceId, ts, batchSeq, prevSha256: row.prev_sha256, sentAt: new Date(row.sent_at) },
        'batch_seq = ?',
        batchSeq,
      );
      this.db
        .prepare('UPDATE batches SET body = ?, body_sha256 = ?, ts = ? WHERE batch_seq = ?')
        .run(body, sha256Hex(body), rfc3339(ts), batchSeq);
      return toBatch(
        this.db.prepare<[number], BatchRow>('SELECT * FROM batches WHERE batch_seq = ?').get(batchSeq)!,
      );
    })();
  }

  noteAttempt(batchSeq: number, channel: string): void {
    this.db
      .prepare('UPDATE batches SET attempts = attempts + 1, channel = ? WHERE batch_seq = ?')
      .run(channel, batchSeq);
  }

  /**
   * Stores the platform's answer; this is the moment the batch's records count as sent (records are marked
   * sent only after the answer is stored).
   */
  storeAnswer(batchSeq: number, answerJson: string, at: Date): void {
    const result = this.db
      .prepare(
        'UPDATE batches SET answer = ?, answered_at = ?, terminal_code = NULL WHERE batch_seq = ? AND answer IS NULL',
      )
      .run(answerJson, rfc3339(at), batchSeq);
    if (result.changes !== 1) throw new AgentError('batch_invalid', `batch ${batchSeq} is not pending`);
  }

  markTerminal(batchSeq: number, code: string): void {
    this.db.prepare('UPDATE batches SET terminal_code = ? WHERE batch_seq = ?').run(code, batchSeq);
  }

  lastAnswered(): { batchSeq: number; answeredAt: string; answer: string } | null {
    const row = this.db
      .prepare<[], { batch_seq: number; answered_at: string; answer: string }>(
        'SELECT batch_seq, answered_at, answer FROM batches WHERE answer IS NOT NULL ORDER BY batch_seq DESC LIMIT 1',
      )
      .get();
    return row ? { batchSeq: row.batch_seq, answeredAt: row.answered_at, answer: row.answer } : null;
  }

  get(batchSeq: number): StoredBatch | null {
    const row = this.db
      .prepare<[number], BatchRow>('SELECT * FROM batches WHERE batch_seq = ?')
      .get(batchSeq);
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
    const row = this.db
      .prepare<(string | number)[], { body: Buffer }>(
        `SELECT CAST(? || coalesce(group_concat(event, ',' ORDER BY seq), '') || ? AS BLOB) AS body
           FROM records WHERE ${where}`,
      )
      .get(prefix, suffix, ...params);
    return row!.body;
  }

  private cutInTransaction(options: CutOptions): StoredBatch | null {
    const maxEvents = options.maxEvents ?? LIMITS.telemetryEventsMax;
    const maxBytes = options.maxBytes ?? LIMITS.telemetryBodyMaxBytes;
    // Sizes only: the event texts themselves never become JS strings here (see buildBatchBody).
    const queued = this.db
      .prepare<[number], { seq: number; bytes: number; unsettled: number }>(
        `SELECT seq, length(CAST(event AS BLOB)) AS bytes, clock_run IS NOT NULL AS unsettled
           FROM records WHERE batch_seq IS NULL ORDER BY seq LIMIT ?`,
      )
      .all(maxEvents);
    // A record whose times still wait for the clock (PlayLog.settleTimes) is not cut, nor anything after it:
    // once cut, its bytes are final. The shipper settles them first.
    const firstUnsettled = queued.findIndex((row) => row.unsettled === 1);
    const rows = firstUnsettled < 0 ? queued : queued.slice(0, firstUnsettled);
    if (rows.length === 0) return null;

    const previous = this.db
      .prepare<[], { batch_seq: number; body_sha256: string }>(
        'SELECT batch_seq, body_sha256 FROM batches ORDER BY batch_seq DESC LIMIT 1',
      )
      .get();
    const batchSeq = this.db
      .prepare<[], { value: number }>(
        "UPDATE counters SET value = value + 1 WHERE name = 'batch_seq' RETURNING value",
      )
      .get()!.value;
    const header = {
      deviceId: options.deviceId,
      ts: options.now,
      batchSeq,
      prevSha256: previous?.body_sha256 ?? '',
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
    const bodySha256 = sha256Hex(body);
    this.db
      .prepare(
        `INSERT INTO batches (batch_seq, first_seq, last_seq, event_count, prev_sha256, sent_at, ts, body,
                              body_sha256, cut_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        batchSeq,
        firstSeq,
        lastSeq,
        count,
        header.prevSha256,
        rfc3339(header.sentAt),
        rfc3339(header.ts),
        body,
        bodySha256,
        rfc3339(options.now),
      );
    this.db
      .prepare('UPDATE records SET batch_seq = ? WHERE batch_seq IS NULL AND seq BETWEEN ? AND ?')
      .run(batchSeq, firstSeq, lastSeq);
    return toBatch(
      this.db.prepare<[number], BatchRow>('SELECT * FROM batches WHERE batch_seq = ?').get(batchSeq)!,
    );
  }
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
  };
}
