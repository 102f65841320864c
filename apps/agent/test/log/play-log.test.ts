import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentError } from '../../src/errors.js';
import { openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import type { PlayInput } from '../../src/log/records.js';
import { BatchStore } from '../../src/shipping/batch-store.js';
import { SHA_A, tempDir } from '../helpers/temp.js';

function play(overrides: Partial<PlayInput> = {}): PlayInput {
  return {
    playId: `p-${Math.random().toString(36).slice(2)}`,
    approvalNumber: 'APP-2026-000001',
    mediaSha256: SHA_A,
    start: new Date('2026-11-21T09:00:00.000Z'),
    end: new Date('2026-11-21T09:00:10.250Z'),
    structure: 'ALM-0001',
    screenPower: 'on',
    ...overrides,
  };
}

describe('play log', () => {
  let dir: ReturnType<typeof tempDir>;
  let dbPath: string;

  beforeEach(() => {
    dir = tempDir();
    dbPath = join(dir.path, 'agent.sqlite');
  });
  afterEach(() => dir.cleanup());

  it('opens the file in WAL mode with synchronous FULL', () => {
    const db = openAgentDatabase(dbPath);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    // 2 = FULL
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
    db.close();
  });

  it('gives every record the next seq from 1, across kinds, and writes the spec record fields', () => {
    const db = openAgentDatabase(dbPath);
    const log = new PlayLog(db);
    const first = log.appendPlay(play({ playId: 'play-1' }));
    const second = log.appendStatus({
      kind: 'reject',
      at: new Date('2026-11-21T09:01:00.000Z'),
      code: 'HASH_MISMATCH',
      detail: { file: 'a.jpg' },
    });
    const third = log.appendPlay(play({ playId: 'play-2', approvalNumber: undefined, slot: 'gov' }));
    expect([first.seq, second.seq, third.seq]).toEqual([1, 2, 3]);
    expect(first.record).toEqual({
      kind: 'play',
      seq: 1,
      play_id: 'play-1',
      approval_number: 'APP-2026-000001',
      media_sha256: SHA_A,
      start: '2026-11-21T09:00:00.000Z',
      end: '2026-11-21T09:00:10.250Z',
      duration_ms: 10_250,
      structure: 'ALM-0001',
      screen: { power: 'on' },
    });
    expect(JSON.parse(first.json)).toEqual(first.record);
    expect(second.record).toEqual({
      kind: 'reject',
      seq: 2,
      at: '2026-11-21T09:01:00.000Z',
      code: 'HASH_MISMATCH',
      detail: { file: 'a.jpg' },
    });
    expect(third.record).toMatchObject({ slot: 'gov' });
    expect(third.record).not.toHaveProperty('approval_number');
    db.close();
  });

  it('refuses a second play with the same play_id without using up a seq', () => {
    const db = openAgentDatabase(dbPath);
    const log = new PlayLog(db);
    log.appendPlay(play({ playId: 'same' }));
    expect(() => log.appendPlay(play({ playId: 'same' }))).toThrowError(AgentError);
    const next = log.appendPlay(play({ playId: 'other' }));
    expect(next.seq).toBe(2);
    db.close();
  });

  it('refuses plays the spec would refuse: no approval and no slot, both, end before start, bad hash', () => {
    const db = openAgentDatabase(dbPath);
    const log = new PlayLog(db);
    const bad: Partial<PlayInput>[] = [
      { approvalNumber: undefined },
      { slot: 'gov' },
      { end: new Date('2026-11-21T08:59:59.000Z') },
      { mediaSha256: 'A'.repeat(64) },
      { playId: 'has space' },
    ];
    for (const overrides of bad) {
      try {
        log.appendPlay(play(overrides));
        expect.unreachable();
      } catch (error) {
        expect((error as AgentError).code).toBe('record_invalid');
      }
    }
    expect(log.stats().lastSeq).toBe(0);
    db.close();
  });

  it('never reuses a seq after the file is closed and reopened', () => {
    let db = openAgentDatabase(dbPath);
    let log = new PlayLog(db);
    for (let i = 0; i < 5; i++) log.appendPlay(play());
    db.close();
    db = openAgentDatabase(dbPath);
    log = new PlayLog(db);
    expect(log.appendPlay(play()).seq).toBe(6);
    expect(log.stats()).toEqual({ lastSeq: 6, queueDepth: 6, unbatched: 6, unsettled: 0 });
    db.close();
  });

  it('logs a reject for a file once, however often it is refused', () => {
    const db = openAgentDatabase(dbPath);
    const log = new PlayLog(db);
    const at = new Date('2026-11-21T10:00:00.000Z');
    const first = log.appendRejectOnce('a.jpg|' + SHA_A, { kind: 'reject', at, code: 'NO_SIGNATURE' });
    const again = log.appendRejectOnce('a.jpg|' + SHA_A, { kind: 'reject', at, code: 'NO_SIGNATURE' });
    const otherCode = log.appendRejectOnce('a.jpg|' + SHA_A, { kind: 'reject', at, code: 'REVOKED' });
    expect(first?.seq).toBe(1);
    expect(again).toBeNull();
    expect(otherCode?.seq).toBe(2);
    db.close();
  });

  it('keeps a record stored by one connection visible to another (durable commit, WAL)', () => {
    const db = openAgentDatabase(dbPath);
    const log = new PlayLog(db);
    log.appendPlay(play({ playId: 'seen' }));
    const reader = new BetterSqlite3(dbPath, { readonly: true });
    const row = reader.prepare('SELECT seq, play_id FROM records').get();
    expect(row).toEqual({ seq: 1, play_id: 'seen' });
    reader.close();
    db.close();
  });
  it('settles the times of unbatched records logged before the clock was synced, and only those', () => {
    const db = openAgentDatabase(dbPath);
    // The board clock runs 10 minutes fast; the steady clock reads 0 at 09:00 true time.
    let steadyMs = 0;
    let synced = false;
    const board = () => Date.parse('2026-11-21T09:10:00.000Z') + steadyMs;
    const log = new PlayLog(db, () => (synced ? null : { run: 'run-1', steadyMs, clockMs: board() }));
    const batches = new BatchStore(db);
    // Logged at true 09:00:10 (board 09:10:10): a play of 10 s, and a reject.
    steadyMs = 10_000;
    log.appendPlay(
      play({
        playId: 'early',
        start: new Date(board() - 10_000),
        end: new Date(board()),
        detail: { interrupted: true },
      }),
    );
    log.appendStatus({
      kind: 'reject',
      at: new Date(board()),
      code: 'HASH_MISMATCH',
      detail: { file: 'a.png' },
    });
    // One record cut into a batch before (by an agent that did not mark records): its bytes are final.
    db.prepare('UPDATE records SET clock_run = NULL WHERE seq = 1').run();
    const cut = batches.pendingOrCut({ deviceId: 'd', now: new Date(board()), maxEvents: 1 })!;
    expect(cut.lastSeq).toBe(1);
    // A record of an earlier run of the agent: its steady clock is gone.
    db.prepare("UPDATE records SET clock_run = 'run-0' WHERE seq = 2").run();
    steadyMs = 20_000;
    log.appendStatus({ kind: 'tamper', at: new Date(board()), detail: { state: 'open' } });
    expect(log.unsettled('run-1')).toEqual({ thisRun: 1, otherRuns: 1 });
    expect(log.stats().unsettled).toBe(2);

    // Synced at true 09:00:30 (steady 30 000).
    steadyMs = 30_000;
    synced = true;
    const settled = log.settleTimes(
      'run-1',
      (steady) => Date.parse('2026-11-21T09:00:30.000Z') - (30_000 - steady),
    );
    expect(settled).toEqual({ corrected: 1, unchanged: 0, asStamped: 1 });
    const [first, second, third] = log.records().map((r) => r.record);
    expect(first).toMatchObject({ start: '2026-11-21T09:10:00.000Z', detail: { interrupted: true } });
    expect(first).not.toHaveProperty('detail.clock_corrected_ms');
    expect(second).toMatchObject({ at: '2026-11-21T09:10:10.000Z' });
    expect(third).toEqual({
      kind: 'tamper',
      seq: 3,
      at: '2026-11-21T09:00:20.000Z',
      detail: { state: 'open', clock_corrected_ms: -600_000 },
    });
    expect(log.unsettled('run-1')).toEqual({ thisRun: 0, otherRuns: 0 });
    expect(batches.get(cut.batchSeq)!.body.equals(cut.body)).toBe(true);
    // Logged while synced: never marked, nothing to settle.
    log.appendStatus({ kind: 'tamper', at: new Date(), detail: { state: 'closed' } });
    expect(log.stats().unsettled).toBe(0);
    expect(log.settleTimes('run-1', () => 0)).toEqual({ corrected: 0, unchanged: 0, asStamped: 0 });
    db.close();
  });

  it('leaves records within a second of the true time as they were logged', () => {
    const db = openAgentDatabase(dbPath);
    const log = new PlayLog(db, () => ({ run: 'r', steadyMs: 5000, clockMs: 1_000_000 }));
    const logged = log.appendStatus({ kind: 'tamper', at: new Date(1_000_000) });
    expect(log.settleTimes('r', (steady) => 1_000_000 + (steady - 5000) + 900)).toEqual({
      corrected: 0,
      unchanged: 1,
      asStamped: 0,
    });
    expect(log.records()[0]!.json).toBe(logged.json);
    db.close();
  });
});
