import type { PlayCountItem } from '../platform/console-client.js';
import type { GroundTruth } from './ground-truth.js';
import type { AgentLogSummary } from './agent-log.js';

/**
 * Reconciliation: what the simulated screens showed (ground truth), what each agent logged and what the platform
 * answered, against what the platform counts, per player and per approval. A play the platform does not count
 * although the agent logged it and no answer refused it is MISSING (a loss); a count above that is a DOUBLE
 * count. Both must be zero.
 */

export interface PlayerInfo {
  id: string;
  deviceId: string;
}

export interface ReconcileInput {
  players: PlayerInfo[];
  groundTruth: GroundTruth;
  logs: Map<string, AgentLogSummary>;
  /** Rows of GET /api/v1/console/pop/counts (player "device:<uuid>"). */
  counts: PlayCountItem[];
  /** Power cuts per player: each may leave one play shown and not logged (or the reverse) at the cut. */
  powerCuts?: ReadonlyMap<string, number>;
  /** Refusals tolerated (besides short interrupted plays, which the platform rightly refuses as too_short). */
  allowedRefusals?: number;
  /** Media hash to approval number, to attribute shown plays the agent never logged. */
  approvalOfSha?: ReadonlyMap<string, string>;
}

export interface Tally {
  /** Shown on the simulated screen. */
  played: number;
  /** In the agent's log. */
  logged: number;
  /** Counted by the platform (flagged included). */
  counted: number;
  /** Not counted again because the platform had them (a resend after a lost answer, a record below the mark). */
  duplicates: number;
  refused: number;
  flagged: number;
  /** Logged, not refused, answered, and not counted: lost. */
  missing: number;
  /** Counted more often than logged. */
  double: number;
  /** Logged but never answered (still queued at the end). */
  queued: number;
}

export interface PlayerReconciliation extends Tally {
  id: string;
  deviceId: string;
  /** Shown but not in the agent's log / in the log but not seen shown (power cuts only). */
  unlogged: number;
  unshown: number;
  powerCuts: number;
  refusals: Record<string, number>;
}

export interface ApprovalReconciliation extends Tally {
  approval: string;
}

export interface Reconciliation {
  players: PlayerReconciliation[];
  approvals: ApprovalReconciliation[];
  totals: Tally & { unlogged: number; unshown: number; powerCuts: number };
  problems: string[];
  ok: boolean;
}

const emptyTally = (): Tally => ({
  played: 0,
  logged: 0,
  counted: 0,
  duplicates: 0,
  refused: 0,
  flagged: 0,
  missing: 0,
  double: 0,
  queued: 0,
});

const TALLY_KEYS: (keyof Tally)[] = [
  'played',
  'logged',
  'counted',
  'duplicates',
  'refused',
  'flagged',
  'missing',
  'double',
  'queued',
];

function add(into: Tally, from: Tally): void {
  for (const key of TALLY_KEYS) into[key] += from[key];
}

/** The approval a count or play belongs to: its number, or `slot:<gov|emergency>`. */
const subjectOf = (approval: string | null, slot: string | null) => approval ?? `slot:${slot ?? 'none'}`;

export function reconcile(input: ReconcileInput): Reconciliation {
  const problems: string[] = [];
  const players: PlayerReconciliation[] = [];
  const approvals = new Map<string, ApprovalReconciliation>();
  const approvalTally = (subject: string) => {
    let tally = approvals.get(subject);
    if (!tally) {
      tally = { approval: subject, ...emptyTally() };
      approvals.set(subject, tally);
    }
    return tally;
  };

  // The platform's counts by player, day and subject.
  const counted = new Map<string, { plays: number; flagged: number }>();
  for (const row of input.counts) {
    if (row.attested) continue; // CMS plays are not the simulator's
    const key = `${row.player}|${row.day}|${subjectOf(row.approval_number, row.slot)}`;
    const entry = counted.get(key) ?? { plays: 0, flagged: 0 };
    entry.plays += row.plays;
    entry.flagged += row.flagged;
    counted.set(key, entry);
  }

  let allowedRefusals = input.allowedRefusals ?? 0;
  for (const player of input.players) {
    const log = input.logs.get(player.id);
    const shown = input.groundTruth.plays(player.id);
    const cuts = input.powerCuts?.get(player.id) ?? 0;
    const result: PlayerReconciliation = {
      id: player.id,
      deviceId: player.deviceId,
      ...emptyTally(),
      unlogged: 0,
      unshown: 0,
      powerCuts: cuts,
      refusals: {},
    };
    result.played = shown.length;
    if (!log) {
      problems.push(`${player.id}: the agent's log could not be read`);
      players.push(result);
      continue;
    }
    const loggedIds = new Map(log.plays.map((play) => [play.playId, play]));
    const shownIds = new Set(shown.map((play) => play.playId));
    for (const play of shown) {
      const logged = loggedIds.get(play.playId);
      const subject = logged
        ? subjectOf(logged.approvalNumber, logged.slot)
        : (input.approvalOfSha?.get(play.sha256) ?? `sha:${play.sha256.slice(0, 12)}`);
      approvalTally(subject).played += 1;
      if (!logged) result.unlogged += 1;
    }

    // What each (day, subject) of this player should have counted: logged, answered, not refused.
    const expected = new Map<string, { expected: number; subject: string }>();
    const playerKey = `device:${player.deviceId}`;
    for (const play of log.plays) {
      const subject = subjectOf(play.approvalNumber, play.slot);
      const tally = approvalTally(subject);
      result.logged += 1;
      tally.logged += 1;
      if (!shownIds.has(play.playId)) result.unshown += 1;
      if (!play.acknowledged) {
        result.queued += 1;
        tally.queued += 1;
        continue;
      }
      if (play.resent || play.status === 'duplicate') {
        result.duplicates += 1;
        tally.duplicates += 1;
      }
      if (play.status === 'refused') {
        result.refused += 1;
        tally.refused += 1;
        const reason = play.reason ?? 'unknown';
        result.refusals[reason] = (result.refusals[reason] ?? 0) + 1;
        // spec: "a play counts from duration_ms 1000": a play cut short on screen is rightly not counted.
        const rightlyRefused = reason === 'too_short' && (play.interrupted || play.durationMs < 1000);
        if (!rightlyRefused) {
          if (allowedRefusals > 0) allowedRefusals -= 1;
          else problems.push(`${player.id}: play seq ${play.seq} refused (${reason})`);
        }
        continue;
      }
      if (play.status === 'duplicate') continue; // the platform already had it (counted with its first batch)
      const key = `${playerKey}|${play.day}|${subject}`;
      const entry = expected.get(key) ?? { expected: 0, subject };
      entry.expected += 1;
      expected.set(key, entry);
    }
    for (const [key, entry] of counted) {
      if (!key.startsWith(`${playerKey}|`)) continue;
      const subject = key.slice(key.lastIndexOf('|') + 1);
      const tally = approvalTally(subject);
      result.counted += entry.plays;
      result.flagged += entry.flagged;
      tally.counted += entry.plays;
      tally.flagged += entry.flagged;
      if (!expected.has(key)) expected.set(key, { expected: 0, subject });
    }
    for (const [key, entry] of expected) {
      const got = counted.get(key)?.plays ?? 0;
      const tally = approvalTally(entry.subject);
      if (got < entry.expected) {
        result.missing += entry.expected - got;
        tally.missing += entry.expected - got;
        problems.push(
          `${player.id}: ${entry.expected - got} play(s) MISSING on ${key.split('|')[1]} for ${entry.subject}`,
        );
      } else if (got > entry.expected) {
        result.double += got - entry.expected;
        tally.double += got - entry.expected;
        problems.push(
          `${player.id}: ${got - entry.expected} play(s) counted TWICE on ${key.split('|')[1]} for ${entry.subject}`,
        );
      }
    }
    if (result.queued > 0)
      problems.push(`${player.id}: ${result.queued} logged play(s) never acknowledged (queue not drained)`);
    if (result.unlogged > cuts) {
      problems.push(`${player.id}: ${result.unlogged} play(s) shown but not logged (${cuts} power cut(s))`);
    }
    if (result.unshown > cuts) {
      problems.push(
        `${player.id}: ${result.unshown} logged play(s) the screen never showed (${cuts} power cut(s))`,
      );
    }
    players.push(result);
  }

  const totals = { ...emptyTally(), unlogged: 0, unshown: 0, powerCuts: 0 };
  for (const player of players) {
    add(totals, player);
    totals.unlogged += player.unlogged;
    totals.unshown += player.unshown;
    totals.powerCuts += player.powerCuts;
  }
  return {
    players,
    approvals: [...approvals.values()].sort((a, b) => (a.approval < b.approval ? -1 : 1)),
    totals,
    problems,
    ok: problems.length === 0,
  };
}

const COLUMNS = TALLY_KEYS;

/** The reconciliation as text tables: per approval, per player (all, or only those with problems), totals. */
export function formatReconciliation(result: Reconciliation, options: { allPlayers?: boolean } = {}): string {
  const lines: string[] = [];
  const table = (title: string, rows: { name: string; tally: Tally }[]) => {
    const width = Math.max(12, ...rows.map((r) => r.name.length));
    lines.push(title);
    lines.push(`  ${''.padEnd(width)}${COLUMNS.map((c) => c.padStart(11)).join('')}`);
    for (const row of rows) {
      lines.push(
        `  ${row.name.padEnd(width)}${COLUMNS.map((c) => String(row.tally[c]).padStart(11)).join('')}`,
      );
    }
  };
  table(
    'per approval',
    result.approvals.map((a) => ({ name: a.approval, tally: a })),
  );
  const shown = options.allPlayers
    ? result.players
    : result.players.filter(
        (p) => p.missing + p.double + p.queued + p.refused > 0 || p.unlogged > p.powerCuts,
      );
  if (shown.length > 0) {
    table(
      options.allPlayers ? 'per player' : 'players with something to look at',
      shown.map((p) => ({ name: p.id, tally: p })),
    );
  }
  table('total', [{ name: `${result.players.length} players`, tally: result.totals }]);
  if (result.totals.powerCuts > 0) {
    lines.push(
      `  power cuts: ${result.totals.powerCuts}; shown but not logged at a cut: ${result.totals.unlogged}; ` +
        `logged but not seen shown: ${result.totals.unshown}`,
    );
  }
  lines.push(
    result.ok
      ? 'RECONCILED: no play lost, none counted twice'
      : `NOT RECONCILED (${result.problems.length} problem(s)):`,
  );
  for (const problem of result.problems.slice(0, 50)) lines.push(`  - ${problem}`);
  if (result.problems.length > 50) lines.push(`  ... and ${result.problems.length - 50} more`);
  return `${lines.join('\n')}\n`;
}
