import type { PopAnswer } from '@ooh/protocol';
import type { Format, RefusedRow } from './formats/source.js';
import type { StoredAnswer } from './state.js';

/** The answer's counts as the state keeps them: refused and flagged records counted by reason and flag. */
export function storedAnswerOf(answer: PopAnswer): StoredAnswer {
  const reasons: Record<string, number> = {};
  const flags: Record<string, number> = {};
  for (const item of answer.items) {
    if (item.status === 'refused') {
      const reason = item.reason ?? 'unknown';
      reasons[reason] = (reasons[reason] ?? 0) + 1;
    }
    if (item.status === 'flagged') for (const flag of item.flags ?? []) flags[flag] = (flags[flag] ?? 0) + 1;
  }
  return {
    received: answer.received,
    accepted: answer.accepted,
    duplicates: answer.duplicates,
    refused: answer.refused,
    flagged: answer.flagged,
    duplicate: answer.duplicate,
    reasons,
    flags,
  };
}

/** What a run did, as printed and as `--json` gives it. */
export interface Summary {
  file: string;
  format: Format;
  fingerprint: string;
  rows: number;
  plays: number;
  /** Statistics rows that are not plays (Xibo layout and event rows), by type. */
  not_plays: Record<string, number>;
  /** Rows not sent, by reason, with the first lines of each. */
  not_sent: Record<string, { count: number; lines: number[]; examples: string[] }>;
  /** Whether this export had been planned by an earlier run (a re-run sends the same bytes again). */
  imported_before: boolean;
  batches: { planned: number; first_batch_seq: number | null; last_batch_seq: number | null };
  /** Batches of an earlier import, left unanswered by a run that stopped, sent first. */
  earlier_batches_sent: number;
  sent: {
    batches: number;
    /** Batches the platform had already received (answered duplicate: true): nothing counted again. */
    already_received: number;
    records: number;
    accepted: number;
    flagged: number;
    duplicates: number;
    refused: number;
    reasons: Record<string, number>;
    flags: Record<string, number>;
    /** Records of already-received batches, counted when those were first received. */
    counted_before: number;
    /** The first export lines of the records refused, by reason (records of this export only). */
    refused_lines: Record<string, number[]>;
  };
  /** Set when sending stopped before every batch was answered. */
  stopped: { batch_seq: number; status: number | null; code: string; detail: string } | null;
  /** Batches still waiting for an answer (sent again by the next run). */
  pending: number;
}

export function emptySent(): Summary['sent'] {
  return {
    batches: 0,
    already_received: 0,
    records: 0,
    accepted: 0,
    flagged: 0,
    duplicates: 0,
    refused: 0,
    reasons: {},
    flags: {},
    counted_before: 0,
    refused_lines: {},
  };
}

const add = (into: Record<string, number>, from: Record<string, number>) => {
  for (const [key, count] of Object.entries(from)) into[key] = (into[key] ?? 0) + count;
};

export function addAnswer(sent: Summary['sent'], answer: StoredAnswer): void {
  sent.batches += 1;
  sent.records += answer.received;
  if (answer.duplicate) {
    // spec rule 4: "answered duplicate true and counted once": its counts are those of its first receipt.
    sent.already_received += 1;
    sent.counted_before += answer.accepted;
    return;
  }
  sent.accepted += answer.accepted;
  sent.flagged += answer.flagged;
  sent.duplicates += answer.duplicates;
  sent.refused += answer.refused;
  add(sent.reasons, answer.reasons);
  add(sent.flags, answer.flags);
}

export function notSentOf(refused: readonly RefusedRow[]): Summary['not_sent'] {
  const out: Summary['not_sent'] = {};
  for (const row of refused) {
    const entry = out[row.reason] ?? { count: 0, lines: [], examples: [] };
    out[row.reason] = entry;
    entry.count += 1;
    if (entry.lines.length < 5) entry.lines.push(row.line);
    if (entry.examples.length < 3 && !entry.examples.includes(row.detail)) entry.examples.push(row.detail);
  }
  return out;
}

const number = (n: number) => n.toLocaleString('en-US');
const byKey = (counts: Record<string, number>) =>
  Object.entries(counts)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([key, count]) => `${key} ${number(count)}`)
    .join(', ');

/** What to do about the final refusals an operator can meet (apps/platform/docs/cms-integration.md, "Errors"). */
const ADVICE: Record<string, string> = {
  batch_conflict:
    'the platform has other bytes under this batch_seq: this state folder does not know what the installation ' +
    'sent before (another sender, or a lost state folder). Restore the state folder from its backup, or, in an ' +
    'empty state folder, import the exports again in the order they were first imported (they come out the same ' +
    'bytes), or send through an installation of its own',
  bad_signature: 'sign with the installation key registered in the console (--key)',
  source_unauthorized: 'the key was rotated out more than 24 hours ago: use the current key (--key)',
  source_unknown: "no installation with this id belongs to the API key's organisation (--source)",
  invalid_api_key: 'the API key is unknown, revoked or expired: ask the authority for a new one',
  key_scope_denied: 'the API key needs the scope write:plays',
  gave_up: 'the platform could not be reached for long enough: run the same command again later',
};

/** The summary as lines for a person. */
export function summaryLines(s: Summary): string[] {
  const lines: string[] = [];
  const notPlays = Object.keys(s.not_plays).length > 0 ? `; not plays: ${byKey(s.not_plays)}` : '';
  lines.push(`read ${s.file} (${s.format}): ${number(s.rows)} rows, ${number(s.plays)} plays${notPlays}`);
  const notSent = Object.entries(s.not_sent);
  if (notSent.length > 0) {
    const total = notSent.reduce((sum, [, e]) => sum + e.count, 0);
    lines.push(`not sent: ${number(total)} rows`);
    for (const [reason, e] of notSent.sort(([a], [b]) => (a < b ? -1 : 1))) {
      const more = e.count > e.lines.length ? ', ...' : '';
      lines.push(
        `  ${reason} ${number(e.count)}: line ${e.lines.join(', ')}${more} (${e.examples.join('; ')})`,
      );
    }
  }
  if (s.earlier_batches_sent > 0) {
    lines.push(`first sent ${s.earlier_batches_sent} unanswered batch(es) of an earlier import`);
  }
  const range =
    s.batches.first_batch_seq === null
      ? 'no batch'
      : s.batches.first_batch_seq === s.batches.last_batch_seq
        ? `batch_seq ${s.batches.first_batch_seq}`
        : `batch_seq ${s.batches.first_batch_seq}-${s.batches.last_batch_seq}`;
  lines.push(
    s.imported_before
      ? `imported before (import ${s.fingerprint.slice(0, 12)}, ${range}): the same bytes were sent again`
      : `planned: import ${s.fingerprint.slice(0, 12)}, ${number(s.batches.planned)} batch(es), ${range}`,
  );
  const t = s.sent;
  if (t.batches > 0) {
    const parts = [`accepted ${number(t.accepted)}`];
    if (t.flagged > 0) parts.push(`of them flagged ${number(t.flagged)} (${byKey(t.flags)})`);
    parts.push(`duplicates ${number(t.duplicates)}`);
    parts.push(`refused ${number(t.refused)}${t.refused > 0 ? ` (${byKey(t.reasons)})` : ''}`);
    lines.push(`sent ${number(t.batches)} batch(es), ${number(t.records)} records: ${parts.join(', ')}`);
    for (const [reason, at] of Object.entries(t.refused_lines).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const more = (t.reasons[reason] ?? 0) > at.length ? ', ...' : '';
      lines.push(`  refused ${reason}: line ${at.join(', ')}${more}`);
    }
    if (t.already_received > 0) {
      lines.push(
        `  ${number(t.already_received)} batch(es) had been received before (answered duplicate): nothing ` +
          `counted again; ${number(t.counted_before)} of their records were counted when first received`,
      );
    }
  }
  if (s.stopped) {
    const status = s.stopped.status === null ? '' : `HTTP ${s.stopped.status} `;
    lines.push(
      `STOPPED at batch_seq ${s.stopped.batch_seq}: ${status}${s.stopped.code}${s.stopped.detail ? `: ${s.stopped.detail}` : ''}`,
    );
    const advice = ADVICE[s.stopped.code];
    if (advice) lines.push(`  ${advice}`);
  }
  if (s.pending > 0) {
    lines.push(
      `${number(s.pending)} batch(es) not answered yet: run the same command again to send the same bytes`,
    );
  }
  return lines;
}
