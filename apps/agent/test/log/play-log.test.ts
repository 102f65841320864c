import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentError } from '../../src/errors.js';
import { openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import type { PlayInput } from '../../src/log/records.js';
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
    expect(log.stats()).toEqual({ lastSeq: 6, queueDepth: 6, unbatched: 6 });
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
});
