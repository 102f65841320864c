import { existsSync } from 'node:fs';
import { almatyDate } from '@ooh/protocol';
import BetterSqlite3 from 'better-sqlite3';

/**
 * What a player's own log says (its SQLite file, opened read-only: safe beside a running agent, which writes in
 * WAL mode): the plays it logged, the rejects, and the platform's answers to its batches. The agent's schema is
 * additive only (apps/agent/src/log/migrations.ts), so these columns stay.
 */

export interface LoggedPlay {
  seq: number;
  playId: string;
  approvalNumber: string | null;
  slot: string | null;
  start: string;
  /** Asia/Almaty day of the start: the day the platform counts the play on. */
  day: string;
  durationMs: number;
  interrupted: boolean;
  batchSeq: number | null;
  /** The platform answered the batch holding it (the agent stored the answer). */
  acknowledged: boolean;
  /** How the answer judged it; null while unacknowledged. */
  status: 'accepted' | 'flagged' | 'refused' | 'duplicate' | null;
  reason?: string;
  flags?: string[];
  /** Its batch was answered `duplicate: true`: a resend the platform recognised (its first answer was lost). */
  resent: boolean;
}

export interface LoggedReject {
  seq: number;
  code: string | null;
  at: string | null;
  file: string | null;
  approvalNumber: string | null;
}

export interface AnsweredRecord {
  seq: number;
  playId: string | null;
  status: 'duplicate' | 'refused' | 'flagged';
  reason?: string;
  flags?: string[];
}

export interface AgentLogSummary {
  lastSeq: number;
  /** Records not yet acknowledged by the platform. */
  queueDepth: number;
  plays: LoggedPlay[];
  rejects: LoggedReject[];
  modeChanges: number;
  tampers: number;
  batches: {
    cut: number;
    answered: number;
    /** Batches the platform answered with duplicate true (a resend after a lost answer). */
    duplicateAnswers: number;
    received: number;
    accepted: number;
    duplicates: number;
    refused: number;
    flagged: number;
    attempts: number;
    terminal: string[];
  };
  /** Records the answers did not plainly accept, resolved to their seq. */
  answered: AnsweredRecord[];
  state: Record<string, unknown>;
}

interface RecordRow {
  seq: number;
  kind: string;
  play_id: string | null;
  event: string;
  batch_seq: number | null;
}

interface BatchRow {
  batch_seq: number;
  answer: string | null;
  attempts: number;
  terminal_code: string | null;
}

interface PopAnswerLike {
  received: number;
  accepted: number;
  duplicates: number;
  refused: number;
  flagged: number;
  duplicate: boolean;
  items: { index: number; status: 'duplicate' | 'refused' | 'flagged'; reason?: string; flags?: string[] }[];
}

export function readAgentLog(databaseFile: string): AgentLogSummary {
  if (!existsSync(databaseFile)) throw new Error(`no agent database at ${databaseFile}`);
  const db = new BetterSqlite3(databaseFile, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const plays: LoggedPlay[] = [];
    const rejects: LoggedReject[] = [];
    let modeChanges = 0;
    let tampers = 0;
    let lastSeq = 0;
    const seqsByBatch = new Map<number, number[]>();
    const playIdBySeq = new Map<number, string>();
    const playBySeq = new Map<number, LoggedPlay>();
    for (const row of db
      .prepare<[], RecordRow>('SELECT seq, kind, play_id, event, batch_seq FROM records ORDER BY seq')
      .iterate()) {
      lastSeq = Math.max(lastSeq, row.seq);
      if (row.batch_seq !== null) {
        const list = seqsByBatch.get(row.batch_seq) ?? [];
        list.push(row.seq);
        seqsByBatch.set(row.batch_seq, list);
      }
      const event = JSON.parse(row.event) as Record<string, unknown>;
      if (row.kind === 'play') {
        const start = String(event['start']);
        playIdBySeq.set(row.seq, String(event['play_id']));
        const play: LoggedPlay = {
          seq: row.seq,
          playId: String(event['play_id']),
          approvalNumber: typeof event['approval_number'] === 'string' ? event['approval_number'] : null,
          slot: typeof event['slot'] === 'string' ? event['slot'] : null,
          start,
          day: almatyDate(new Date(start)),
          durationMs: Number(event['duration_ms']),
          interrupted: (event['detail'] as { interrupted?: unknown } | undefined)?.interrupted === true,
          batchSeq: row.batch_seq,
          acknowledged: false,
          status: null,
          resent: false,
        };
        plays.push(play);
        playBySeq.set(row.seq, play);
      } else if (row.kind === 'reject') {
        const detail = (event['detail'] ?? {}) as Record<string, unknown>;
        rejects.push({
          seq: row.seq,
          code: typeof event['code'] === 'string' ? event['code'] : null,
          at: typeof event['at'] === 'string' ? event['at'] : null,
          file: typeof detail['file'] === 'string' ? detail['file'] : null,
          approvalNumber: typeof detail['approval_number'] === 'string' ? detail['approval_number'] : null,
        });
      } else if (row.kind === 'mode_change') modeChanges += 1;
      else if (row.kind === 'tamper') tampers += 1;
    }

    const batches = {
      cut: 0,
      answered: 0,
      duplicateAnswers: 0,
      received: 0,
      accepted: 0,
      duplicates: 0,
      refused: 0,
      flagged: 0,
      attempts: 0,
      terminal: [] as string[],
    };
    const answered: AnsweredRecord[] = [];
    let unacknowledged = 0;
    for (const row of db
      .prepare<[], BatchRow>(
        'SELECT batch_seq, answer, attempts, terminal_code FROM batches ORDER BY batch_seq',
      )
      .iterate()) {
      batches.cut += 1;
      batches.attempts += row.attempts;
      if (row.terminal_code) batches.terminal.push(`${row.batch_seq}:${row.terminal_code}`);
      if (row.answer === null) {
        unacknowledged += seqsByBatch.get(row.batch_seq)?.length ?? 0;
        continue;
      }
      const answer = JSON.parse(row.answer) as PopAnswerLike;
      batches.answered += 1;
      if (answer.duplicate) batches.duplicateAnswers += 1;
      for (const seq of seqsByBatch.get(row.batch_seq) ?? []) {
        const play = playBySeq.get(seq);
        if (!play) continue;
        play.acknowledged = true;
        play.status = 'accepted';
        play.resent = answer.duplicate;
      }
      batches.received += answer.received;
      batches.accepted += answer.accepted;
      batches.duplicates += answer.duplicates;
      batches.refused += answer.refused;
      batches.flagged += answer.flagged;
      const seqs = seqsByBatch.get(row.batch_seq) ?? [];
      for (const item of answer.items) {
        const seq = seqs[item.index] ?? -1;
        const play = playBySeq.get(seq);
        if (play) {
          play.status = item.status;
          if (item.reason !== undefined) play.reason = item.reason;
          if (item.flags !== undefined) play.flags = item.flags;
        }
        answered.push({
          seq,
          playId: playIdBySeq.get(seq) ?? null,
          status: item.status,
          ...(item.reason !== undefined ? { reason: item.reason } : {}),
          ...(item.flags !== undefined ? { flags: item.flags } : {}),
        });
      }
    }
    const unbatched = db
      .prepare<[], { n: number }>('SELECT count(*) AS n FROM records WHERE batch_seq IS NULL')
      .get()!.n;

    const state: Record<string, unknown> = {};
    for (const row of db
      .prepare<[], { key: string; value: string }>('SELECT key, value FROM agent_state')
      .iterate()) {
      state[row.key] = JSON.parse(row.value);
    }
    return {
      lastSeq,
      queueDepth: unbatched + unacknowledged,
      plays,
      rejects,
      modeChanges,
      tampers,
      batches,
      answered,
      state,
    };
  } finally {
    db.close();
  }
}
