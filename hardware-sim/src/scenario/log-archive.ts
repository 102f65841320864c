import { existsSync } from 'node:fs';
import { almatyDate } from '@ooh/protocol';
import BetterSqlite3 from 'better-sqlite3';
import type { AgentLogSummary, LoggedPlay } from '../truth/agent-log.js';

/**
 * What the players logged, kept beyond the agent's retention (apps/agent/README.md "Retention and disk space"): the
 * agent removes batches the platform answered once old enough (a day under disk pressure), so a run longer than
 * that reconciles against this archive and the log's remainder, not the log alone.
 *
 * Each read takes the plays of the batches answered since the last read (a batch's records and answer are final once
 * answered, and the agent has one batch in flight, so answered batches come in batch_seq order), from the SQLite file
 * opened read-only (safe beside the running agent, as `readAgentLog`). Reads must come more often than retention
 * removes: the scenario runner reads every few virtual hours.
 */
export class LogArchive {
  private readonly players = new Map<string, { lastBatchSeq: number; plays: Map<string, LoggedPlay> }>();

  /** Reads the plays of batches answered since the last read, for each player. */
  take(players: { id: string; databaseFile: string }[]): void {
    for (const player of players) {
      let entry = this.players.get(player.id);
      if (!entry) {
        entry = { lastBatchSeq: 0, plays: new Map() };
        this.players.set(player.id, entry);
      }
      if (!existsSync(player.databaseFile)) continue;
      const read = answeredPlaysSince(player.databaseFile, entry.lastBatchSeq);
      for (const play of read.plays) entry.plays.set(play.playId, play);
      entry.lastBatchSeq = read.lastBatchSeq;
    }
  }

  /** Plays archived for a player. */
  count(id: string): number {
    return this.players.get(id)?.plays.size ?? 0;
  }

  /** The log as it is now, with the answered plays retention removed put back (by play_id). */
  merged(id: string, current: AgentLogSummary): AgentLogSummary {
    const archived = this.players.get(id)?.plays;
    if (!archived || archived.size === 0) return current;
    const plays = new Map(archived);
    for (const play of current.plays) plays.set(play.playId, play);
    return { ...current, plays: [...plays.values()].sort((a, b) => a.seq - b.seq) };
  }
}

interface AnswerLike {
  duplicate: boolean;
  items: { index: number; status: 'duplicate' | 'refused' | 'flagged'; reason?: string; flags?: string[] }[];
}

/** The plays of the batches answered after `afterBatchSeq`, judged by their answers (as readAgentLog judges them). */
export function answeredPlaysSince(
  databaseFile: string,
  afterBatchSeq: number,
): { plays: LoggedPlay[]; lastBatchSeq: number } {
  const db = new BetterSqlite3(databaseFile, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const plays: LoggedPlay[] = [];
    let lastBatchSeq = afterBatchSeq;
    // One read transaction: the batches and their records as of one instant.
    db.transaction(() => {
      const batches = db
        .prepare<[number], { batch_seq: number; answer: string }>(
          'SELECT batch_seq, answer FROM batches WHERE answer IS NOT NULL AND batch_seq > ? ORDER BY batch_seq',
        )
        .all(afterBatchSeq);
      const recordsOf = db.prepare<[number], { seq: number; kind: string; event: string }>(
        'SELECT seq, kind, event FROM records WHERE batch_seq = ? ORDER BY seq',
      );
      for (const batch of batches) {
        lastBatchSeq = batch.batch_seq;
        const answer = JSON.parse(batch.answer) as AnswerLike;
        const records = recordsOf.all(batch.batch_seq);
        const judged = new Map(answer.items.map((item) => [item.index, item]));
        records.forEach((row, index) => {
          if (row.kind !== 'play') return;
          const event = JSON.parse(row.event) as Record<string, unknown>;
          const item = judged.get(index);
          const start = String(event['start']);
          plays.push({
            seq: row.seq,
            playId: String(event['play_id']),
            approvalNumber: typeof event['approval_number'] === 'string' ? event['approval_number'] : null,
            slot: typeof event['slot'] === 'string' ? event['slot'] : null,
            start,
            day: almatyDate(new Date(start)),
            durationMs: Number(event['duration_ms']),
            interrupted: (event['detail'] as { interrupted?: unknown } | undefined)?.interrupted === true,
            batchSeq: batch.batch_seq,
            acknowledged: true,
            status: item?.status ?? 'accepted',
            ...(item?.reason !== undefined ? { reason: item.reason } : {}),
            ...(item?.flags !== undefined ? { flags: item.flags } : {}),
            resent: answer.duplicate,
          });
        });
      }
    })();
    return { plays, lastBatchSeq };
  } finally {
    db.close();
  }
}
