import { describe, expect, test } from 'vitest';
import type { DisplayedPlay } from '../src/hardware/sim-display.js';
import type { PlayCountItem } from '../src/platform/console-client.js';
import type { AgentLogSummary, LoggedPlay } from '../src/truth/agent-log.js';
import { GroundTruth } from '../src/truth/ground-truth.js';
import { withRunProblems } from '../src/scenario/run.js';
import { formatReconciliation, reconcile } from '../src/truth/reconcile.js';

const DEVICE = '6f1c0e2a-1111-4222-8333-444455556666';
const APPROVAL = 'APR-2026-000001';

function shown(ids: string[]): GroundTruth {
  const truth = new GroundTruth();
  for (const id of ids) {
    truth.record({
      player: 'P1',
      playId: id,
      relativePath: 'a.png',
      sha256: 'a'.repeat(64),
      start: '2026-01-15T04:00:00.000Z',
      end: '2026-01-15T04:00:15.000Z',
      durationMs: 15_000,
      interrupted: false,
      screen: 'on',
    } satisfies DisplayedPlay);
  }
  return truth;
}

function logged(id: string, overrides: Partial<LoggedPlay> = {}): LoggedPlay {
  return {
    seq: Number(id.replace(/\D/g, '')) || 1,
    playId: id,
    approvalNumber: APPROVAL,
    slot: null,
    start: '2026-01-15T04:00:00.000Z',
    day: '2026-01-15',
    durationMs: 15_000,
    interrupted: false,
    batchSeq: 1,
    acknowledged: true,
    status: 'accepted',
    resent: false,
    ...overrides,
  };
}

function log(plays: LoggedPlay[]): AgentLogSummary {
  return {
    lastSeq: plays.length,
    queueDepth: plays.filter((p) => !p.acknowledged).length,
    plays,
    rejects: [],
    modeChanges: 0,
    tampers: 0,
    batches: {
      cut: 1,
      answered: 1,
      duplicateAnswers: 0,
      received: plays.length,
      accepted: plays.length,
      duplicates: 0,
      refused: 0,
      flagged: 0,
      attempts: 1,
      terminal: [],
    },
    answered: [],
    state: {},
  };
}

const counts = (plays: number, flagged = 0): PlayCountItem[] => [
  {
    player: `device:${DEVICE}`,
    structure_id: '00000000-0000-4000-8000-000000000001',
    day: '2026-01-15',
    approval_number: APPROVAL,
    slot: null,
    attested: false,
    plays,
    flagged,
  },
];

const players = [{ id: 'P1', deviceId: DEVICE }];

describe('reconcile', () => {
  test('every play shown, logged and counted once: reconciled', () => {
    const result = reconcile({
      players,
      groundTruth: shown(['p1', 'p2', 'p3']),
      logs: new Map([['P1', log([logged('p1'), logged('p2'), logged('p3', { resent: true })])]]),
      counts: counts(3, 1),
    });
    expect(result.ok).toBe(true);
    expect(result.totals).toMatchObject({
      played: 3,
      logged: 3,
      counted: 3,
      duplicates: 1,
      flagged: 1,
      missing: 0,
      double: 0,
    });
    expect(formatReconciliation(result)).toContain('RECONCILED');
  });

  test('a play logged and answered but not counted is missing; a count above the log is double', () => {
    const logs = new Map([['P1', log([logged('p1'), logged('p2')])]]);
    const missing = reconcile({ players, groundTruth: shown(['p1', 'p2']), logs, counts: counts(1) });
    expect(missing.ok).toBe(false);
    expect(missing.totals.missing).toBe(1);
    expect(missing.problems[0]).toContain('MISSING');
    const double = reconcile({ players, groundTruth: shown(['p1', 'p2']), logs, counts: counts(3) });
    expect(double.totals.double).toBe(1);
    expect(double.problems[0]).toContain('TWICE');
    expect(formatReconciliation(double)).toContain('NOT RECONCILED');
  });

  test('refusals: a short interrupted play is rightly refused; any other refusal is a problem unless allowed', () => {
    const plays = [
      logged('p1'),
      logged('p2', { status: 'refused', reason: 'too_short', interrupted: true, durationMs: 400 }),
      logged('p3', { status: 'refused', reason: 'time_in_future' }),
    ];
    const input = {
      players,
      groundTruth: shown(['p1', 'p2', 'p3']),
      logs: new Map([['P1', log(plays)]]),
      counts: counts(1),
    };
    const strict = reconcile(input);
    expect(strict.totals.refused).toBe(2);
    expect(strict.problems).toEqual(['P1: play seq 3 refused (time_in_future)']);
    expect(reconcile({ ...input, allowedRefusals: 1 }).ok).toBe(true);
  });

  test('shown but not logged is allowed once per power cut; a queue left undrained is a problem', () => {
    const logs = new Map([['P1', log([logged('p1'), logged('p2', { acknowledged: false, status: null })])]]);
    const result = reconcile({
      players,
      groundTruth: shown(['p1', 'p2', 'p3']),
      logs,
      counts: counts(1),
      powerCuts: new Map([['P1', 1]]),
    });
    expect(result.totals).toMatchObject({ unlogged: 1, queued: 1, missing: 0 });
    expect(result.problems).toEqual(['P1: 1 logged play(s) never acknowledged (queue not drained)']);
  });
});

describe("a run's verdict: the last line agrees with the exit code", () => {
  const lastLine = (text: string) =>
    text
      .trimEnd()
      .split('\n')
      .findLast((line) => !line.startsWith('  '));

  test('every play counted but the queues not drained: NOT RECONCILED, naming what is still queued', () => {
    const counted = reconcile({
      players,
      groundTruth: shown(['p1', 'p2']),
      logs: new Map([['P1', log([logged('p1'), logged('p2')])]]),
      counts: counts(2),
    });
    expect(counted.ok).toBe(true);
    const verdict = withRunProblems(counted, { drained: false, stillQueued: 3 });
    expect(verdict.ok).toBe(false);
    const text = formatReconciliation(verdict);
    expect(lastLine(text)).toBe('NOT RECONCILED (1 problem(s)):');
    expect(text).toContain('  - queues not drained: 3 record(s) still queued');
    expect(text).not.toContain('RECONCILED: no play lost');
    // Drained and counted: unchanged.
    expect(withRunProblems(counted, { drained: true, stillQueued: 0 })).toBe(counted);
  });

  test('a run in which nothing was shown is not reconciled', () => {
    const nothing = reconcile({
      players,
      groundTruth: shown([]),
      logs: new Map([['P1', log([])]]),
      counts: [],
    });
    expect(nothing.ok).toBe(true);
    const verdict = withRunProblems(nothing, { drained: true, stillQueued: 0 });
    expect(verdict.ok).toBe(false);
    expect(verdict.problems).toEqual([expect.stringMatching(/^no play was shown: nothing to reconcile/)]);
    expect(lastLine(formatReconciliation(verdict))).toBe('NOT RECONCILED (1 problem(s)):');
  });
});
