import type { Database } from 'better-sqlite3';
import { rfc3339 } from '../log/records.js';
import { chainHead, keepChainHead } from '../shipping/batch-store.js';
import { inTransaction, prepared } from '../log/statements.js';

/**
 * Retention of the play log (README "Retention and disk space"). What may go, and what never does:
 *
 * - A batch the platform answered goes, with its records, once its answer is older than `acknowledgedBefore`: the
 *   platform holds those records (counted, recognised as duplicates, or refused for good) and will never ask for them.
 * - A batch given up goes then too: one cut again (`recut`: its records are in later batches) or a probe (no
 *   records); only its bytes go.
 * - A record set aside (the platform could not take it while it took others) and its one-record batch go once set
 *   aside before `setAsideBefore` (default 180 days: twice the platform's 90-day too_old horizon, after which it can
 *   never be counted; until then `agent status` and `hardware-sim check` show it to a technician).
 * - Never: a record not yet cut into a batch, a batch still to be answered (whatever its age, its sends or its
 *   terminal alert), and anything numbering depends on: `seq` and `batch_seq` come from `counters`, never from the
 *   rows, and the next batch's `prev_sha256` (the body hash of the newest answered batch) is kept in agent_state
 *   (keepChainHead) before that batch goes.
 * - play_id: the scheduler makes each one with randomUUID() when the play starts and a record is logged once, at the
 *   end of its play, so a removed record's play_id is never logged again (UNIQUE on records.play_id only guards the
 *   rows kept). The platform's own horizon (plays more than 90 days old are too_old) needs nothing from the player.
 *
 * - Age is judged by the stamps the shipper wrote (`answered_at`, `abandoned_at`) on the agent's clock, which can be
 *   wrong and set back: a batch answered while the clock ran a year ahead would otherwise wait that year before its
 *   keep even began, and a small disk fill meanwhile. Once the clock is synced (it agrees with the platform's), a
 *   stamp beyond it is known wrong and is moved back to the time it is seen ({@link Retention.settleFutureStamps}):
 *   the answer came before that, so it is kept its whole time and never longer than that time from now.
 *
 * Work is done in small transactions ({@link PRUNE_CHUNK_RECORDS}), each a few milliseconds, so the scheduler logs
 * plays between them; freed pages go back to the file system a few at a time (incremental vacuum).
 */

/** Records removed in one transaction at most (a batch is never split: one larger batch may go alone). */
export const PRUNE_CHUNK_RECORDS = 2000;
/** Pages given back to the file system in one step (PRAGMA incremental_vacuum): 1 MiB of 4 KiB pages. */
export const VACUUM_STEP_PAGES = 256;
/**
 * The one VACUUM that turns an older file's auto_vacuum to INCREMENTAL copies the live data twice and blocks the
 * agent's one thread while it does: it runs only when the live data is at most this (a few seconds on flash).
 */
export const VACUUM_ONCE_MAX_LIVE_BYTES = 128 * 1024 * 1024;

export interface RetentionPolicy {
  /** Answered batches (and batches cut again, and probes) older than this go. */
  acknowledgedBefore: Date;
  /** Records set aside before this go, with their batch. */
  setAsideBefore: Date;
}

export interface PruneChunk {
  batches: number;
  records: number;
  /** More is due now: call again (after letting other work run). */
  more: boolean;
}

interface Candidate {
  batch_seq: number;
  event_count: number;
  answered: number;
  body_sha256: string;
}

/** The SQLite side of retention: each call is one short transaction. */
export class Retention {
  constructor(private readonly db: Database) {}

  /** Removes up to {@link PRUNE_CHUNK_RECORDS} records' worth of batches due to go, in one transaction. */
  pruneChunk(policy: RetentionPolicy, maxRecords = PRUNE_CHUNK_RECORDS): PruneChunk {
    return inTransaction(this.db, () => {
      const acknowledged = rfc3339(policy.acknowledgedBefore);
      const setAside = rfc3339(policy.setAsideBefore);
      const limit = 200;
      const answered = prepared<[string, number], Candidate>(
        this.db,
        `SELECT batch_seq, event_count, 1 AS answered, body_sha256 FROM batches
            WHERE answer IS NOT NULL AND answered_at < ? ORDER BY answered_at LIMIT ?`,
      ).all(acknowledged, limit);
      const abandoned = prepared<[string, string, number], Candidate>(
        this.db,
        `SELECT batch_seq, event_count, 0 AS answered, body_sha256 FROM batches
            WHERE abandoned_at IS NOT NULL AND answer IS NULL
              AND abandoned_at < (CASE abandon_reason WHEN 'set_aside' THEN ? ELSE ? END)
            ORDER BY abandoned_at LIMIT ?`,
      ).all(setAside, acknowledged, limit);
      const candidates = [...answered, ...abandoned].sort((a, b) => a.batch_seq - b.batch_seq);
      const leftOver = answered.length === limit || abandoned.length === limit;
      const chosen: Candidate[] = [];
      let records = 0;
      for (const candidate of candidates) {
        // Only the records that point at the batch go (a batch cut again points at none: they moved on).
        if (chosen.length > 0 && records + candidate.event_count > maxRecords) break;
        chosen.push(candidate);
        records += candidate.event_count;
      }
      if (chosen.length === 0) return { batches: 0, records: 0, more: false };

      // The next batch's prev_sha256 names the newest answered batch: if it goes, its hash stays.
      const newest = prepared<[], { batch_seq: number; body_sha256: string }>(
        this.db,
        'SELECT batch_seq, body_sha256 FROM batches WHERE answer IS NOT NULL ORDER BY batch_seq DESC LIMIT 1',
      ).get();
      if (newest && chosen.some((c) => c.batch_seq === newest.batch_seq)) {
        const kept = chainHead(this.db);
        if (!kept || kept.batchSeq < newest.batch_seq) {
          keepChainHead(this.db, { batchSeq: newest.batch_seq, bodySha256: newest.body_sha256 });
        }
      }

      // Both statements name the batch's state again: whatever a bug upstream did, a record of a batch still to be
      // answered, or not yet cut into one, cannot go.
      const deleteRecords = prepared<[number, number]>(
        this.db,
        `DELETE FROM records WHERE batch_seq = ?
            AND EXISTS (SELECT 1 FROM batches b WHERE b.batch_seq = ? AND (b.answer IS NOT NULL OR b.abandoned_at IS NOT NULL))`,
      );
      const deleteBatch = prepared<[number]>(
        this.db,
        'DELETE FROM batches WHERE batch_seq = ? AND (answer IS NOT NULL OR abandoned_at IS NOT NULL)',
      );
      let removed = 0;
      for (const candidate of chosen) {
        removed += deleteRecords.run(candidate.batch_seq, candidate.batch_seq).changes;
        deleteBatch.run(candidate.batch_seq);
      }
      return {
        batches: chosen.length,
        records: removed,
        more: leftOver || candidates.length > chosen.length,
      };
    });
  }

  /**
   * Moves back to `now` up to `maxBatches` stamps beyond it of batches answered or given up, in one transaction: the
   * time they were written the clock ran ahead (the board's, or the platform's it followed), and it has been set back
   * since. Call it only with a clock that agrees with the platform's (CorrectedClock.synced): a clock running behind
   * would make correct stamps look ahead, and moving them back to it would shorten their keep, a record set aside's
   * too. Only the stamps change: no row goes, whatever its state; a batch still to be answered has neither stamp.
   * Returns how many stamps moved, the latest of them as it was, and whether more are due.
   */
  settleFutureStamps(
    now: Date,
    maxBatches = PRUNE_CHUNK_RECORDS,
  ): { batches: number; latest: string | null; more: boolean } {
    return inTransaction(this.db, () => {
      const at = rfc3339(now);
      const latest = prepared<[string, string], { latest: string | null }>(
        this.db,
        `SELECT max(stamp) AS latest FROM (
           SELECT max(answered_at) AS stamp FROM batches WHERE answer IS NOT NULL AND answered_at > ?
           UNION ALL
           SELECT max(abandoned_at) FROM batches WHERE abandoned_at IS NOT NULL AND abandoned_at > ?)`,
      ).get(at, at)?.latest;
      if (!latest) return { batches: 0, latest: null, more: false };
      const answered = prepared<[string, string, number]>(
        this.db,
        `UPDATE batches SET answered_at = ? WHERE batch_seq IN (
           SELECT batch_seq FROM batches WHERE answer IS NOT NULL AND answered_at > ? LIMIT ?)`,
      ).run(at, at, maxBatches).changes;
      const abandoned = prepared<[string, string, number]>(
        this.db,
        `UPDATE batches SET abandoned_at = ? WHERE batch_seq IN (
           SELECT batch_seq FROM batches WHERE abandoned_at IS NOT NULL AND abandoned_at > ? LIMIT ?)`,
      ).run(at, at, maxBatches).changes;
      return {
        batches: answered + abandoned,
        latest,
        more: answered === maxBatches || abandoned === maxBatches,
      };
    });
  }

  /** Pages on the free list: what an incremental vacuum can give back. */
  freePages(): number {
    return this.db.pragma('freelist_count', { simple: true }) as number;
  }

  /** Gives back up to `pages` free pages to the file system (one short write); how many were. */
  vacuumStep(pages = VACUUM_STEP_PAGES): number {
    if (this.autoVacuum() !== 'incremental') return 0;
    const before = this.freePages();
    this.db.pragma(`incremental_vacuum(${Math.max(1, Math.floor(pages))})`);
    return before - this.freePages();
  }

  /** Copies the WAL into the file as far as readers allow (never waits for them); the WAL is then cut back. */
  checkpoint(): void {
    this.db.pragma('wal_checkpoint(PASSIVE)');
  }

  autoVacuum(): 'none' | 'full' | 'incremental' {
    const mode = this.db.pragma('auto_vacuum', { simple: true }) as number;
    return mode === 2 ? 'incremental' : mode === 1 ? 'full' : 'none';
  }

  /** Bytes of the pages in use (what a VACUUM copies). */
  liveBytes(): number {
    const pageSize = this.db.pragma('page_size', { simple: true }) as number;
    const pages = this.db.pragma('page_count', { simple: true }) as number;
    return (pages - this.freePages()) * pageSize;
  }

  /**
   * Turns the file's auto_vacuum to INCREMENTAL by the one VACUUM it needs (a file made before migration 5). VACUUM
   * cannot run in a transaction, so not in the migration's; it is itself atomic (a power cut leaves the file as it
   * was before or after) and rewrites pages only, never a row's content. Returns whether the file is incremental now.
   */
  vacuumOnce(): boolean {
    if (this.autoVacuum() === 'incremental') return true;
    this.db.pragma('auto_vacuum = INCREMENTAL');
    this.db.exec('VACUUM');
    return this.autoVacuum() === 'incremental';
  }

  /** The oldest record the platform has not answered yet: not cut into a batch, or in a batch still to be answered. */
  oldestUnacknowledged(): { seq: number; loggedAt: string } | null {
    const row = prepared<[], { seq: number; logged_at: string }>(
      this.db,
      `SELECT seq, logged_at FROM records WHERE seq = (
           SELECT min(s) FROM (
             SELECT min(seq) AS s FROM records WHERE batch_seq IS NULL
             UNION ALL
             SELECT min(first_seq) FROM batches
              WHERE answer IS NULL AND abandoned_at IS NULL AND kind = 'records'))`,
    ).get();
    return row ? { seq: row.seq, loggedAt: row.logged_at } : null;
  }

  /** Rows the file holds now. */
  kept(): { records: number; batches: number } {
    const row = prepared<[], { records: number; batches: number }>(
      this.db,
      'SELECT (SELECT count(*) FROM records) AS records, (SELECT count(*) FROM batches) AS batches',
    ).get()!;
    return { records: row.records, batches: row.batches };
  }
}
