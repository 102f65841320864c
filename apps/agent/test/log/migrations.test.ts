import { statSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { AgentState } from '../../src/log/agent-state.js';
import { openAgentDatabase } from '../../src/log/database.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS, migrate } from '../../src/log/migrations.js';
import { PlayLog } from '../../src/log/play-log.js';
import { memoryLogger } from '../../src/logger.js';
import { BatchStore } from '../../src/shipping/batch-store.js';
import { DiskWatch } from '../../src/storage/disk.js';
import { StorageMaintenance } from '../../src/storage/maintenance.js';
import { Retention } from '../../src/storage/retention.js';
import { logPlays } from '../helpers/shipping-fixture.js';
import { SHA_A, tempDir } from '../helpers/temp.js';

const DEVICE = '6f1c0000-0000-4000-8000-000000000001';

describe('schema migrations', () => {
  let dir: ReturnType<typeof tempDir>;
  let dbPath: string;

  beforeEach(() => {
    dir = tempDir();
    dbPath = join(dir.path, 'agent.sqlite');
  });
  afterEach(() => dir.cleanup());

  it('numbers migrations 1..n and brings a new file to the latest version', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    const db = openAgentDatabase(dbPath);
    expect(db.pragma('user_version', { simple: true })).toBe(LATEST_SCHEMA_VERSION);
    db.close();
  });

  it('migration 2 keeps the records and batches of a version-1 file and only adds', () => {
    // Build a version-1 file and seed it as a version-1 agent would have.
    const v1 = openAgentDatabase(dbPath, { targetVersion: 1 });
    expect(v1.pragma('user_version', { simple: true })).toBe(1);
    v1.prepare("UPDATE counters SET value = 2 WHERE name = 'record_seq'").run();
    v1.prepare("UPDATE counters SET value = 1 WHERE name = 'batch_seq'").run();
    v1.prepare(
      `INSERT INTO records (seq, kind, play_id, event, logged_at, batch_seq) VALUES
        (1, 'play', 'p1', '{"kind":"play","seq":1}', '2026-01-01T00:00:00.000Z', 1),
        (2, 'tamper', NULL, '{"kind":"tamper","seq":2}', '2026-01-01T00:00:01.000Z', NULL)`,
    ).run();
    v1.prepare(
      `INSERT INTO batches (batch_seq, first_seq, last_seq, event_count, prev_sha256, sent_at, ts, body, body_sha256, cut_at)
       VALUES (1, 1, 1, 1, '', 'x', 'x', x'7b7d', ?, 'x')`,
    ).run(SHA_A);
    const columnsBefore = tableColumns(v1);
    v1.close();

    const db = openAgentDatabase(dbPath, { targetVersion: 2 });
    expect(db.pragma('user_version', { simple: true })).toBe(2);
    // Additive only: every table and column of version 1 is still there.
    const columnsAfter = tableColumns(db);
    for (const [table, columns] of Object.entries(columnsBefore)) {
      expect(columnsAfter[table]).toEqual(expect.arrayContaining(columns));
    }
    expect(columnsAfter['rejects_logged']).toBeDefined();
    expect(columnsAfter['agent_state']).toBeDefined();
    expect(columnsAfter['batches']).toContain('terminal_code');
    expect(db.prepare('SELECT seq, play_id, batch_seq FROM records ORDER BY seq').all()).toEqual([
      { seq: 1, play_id: 'p1', batch_seq: 1 },
      { seq: 2, play_id: null, batch_seq: null },
    ]);
    db.close();
    // The counter carried over: the next record (by this agent, on the latest schema) is 3.
    const latest = openAgentDatabase(dbPath);
    expect(new PlayLog(latest).appendStatus({ kind: 'tamper', at: new Date() }).seq).toBe(3);
    latest.close();
  });

  it('migration 3 adds the clock columns to a version-2 file; its records count as rightly timed', () => {
    const v2 = openAgentDatabase(dbPath, { targetVersion: 2 });
    // As a version-2 agent wrote it (it knew no clock columns).
    v2.prepare("UPDATE counters SET value = 1 WHERE name = 'record_seq'").run();
    v2.prepare(
      `INSERT INTO records (seq, kind, play_id, event, logged_at) VALUES
        (1, 'tamper', NULL, '{"kind":"tamper","seq":1,"at":"2026-01-01T00:00:00.000Z"}', '2026-01-01T00:00:00.000Z')`,
    ).run();
    const columnsBefore = tableColumns(v2);
    v2.close();

    const db = openAgentDatabase(dbPath);
    expect(db.pragma('user_version', { simple: true })).toBe(LATEST_SCHEMA_VERSION);
    const columnsAfter = tableColumns(db);
    for (const [table, columns] of Object.entries(columnsBefore)) {
      expect(columnsAfter[table]).toEqual(expect.arrayContaining(columns));
    }
    expect(columnsAfter['records']).toEqual(
      expect.arrayContaining(['clock_run', 'clock_steady_ms', 'clock_read_ms']),
    );
    const log = new PlayLog(db, () => ({ run: 'r', steadyMs: 1, clockMs: 2 }));
    expect(log.stats()).toMatchObject({ lastSeq: 1, unbatched: 1, unsettled: 0 });
    expect(log.appendStatus({ kind: 'tamper', at: new Date() }).seq).toBe(2);
    expect(log.unsettled('r')).toEqual({ thisRun: 1, otherRuns: 0 });
    db.close();
  });

  it('migration 4 adds failure, probe and set-aside columns to a version-3 file; its unanswered batch stays pending', () => {
    const v3 = openAgentDatabase(dbPath, { targetVersion: 3 });
    v3.prepare("UPDATE counters SET value = 2 WHERE name = 'record_seq'").run();
    v3.prepare("UPDATE counters SET value = 2 WHERE name = 'batch_seq'").run();
    v3.prepare(
      `INSERT INTO records (seq, kind, play_id, event, logged_at, batch_seq) VALUES
        (1, 'tamper', NULL, '{"kind":"tamper","seq":1}', '2026-01-01T00:00:00.000Z', 1),
        (2, 'tamper', NULL, '{"kind":"tamper","seq":2}', '2026-01-01T00:00:01.000Z', 2)`,
    ).run();
    v3.prepare(
      `INSERT INTO batches (batch_seq, first_seq, last_seq, event_count, prev_sha256, sent_at, ts, body, body_sha256,
                            cut_at, attempts, answer, answered_at)
       VALUES (1, 1, 1, 1, '', 'x', 'x', x'7b7d', ?, 'x', 1, '{}', 'x'),
              (2, 2, 2, 1, ?, 'x', 'x', x'7b7d', ?, 'x', 5, NULL, NULL)`,
    ).run(SHA_A, SHA_A, SHA_A);
    const columnsBefore = tableColumns(v3);
    v3.close();

    const db = openAgentDatabase(dbPath);
    expect(db.pragma('user_version', { simple: true })).toBe(LATEST_SCHEMA_VERSION);
    const columnsAfter = tableColumns(db);
    for (const [table, columns] of Object.entries(columnsBefore)) {
      expect(columnsAfter[table]).toEqual(expect.arrayContaining(columns));
    }
    const batches = new BatchStore(db);
    expect(batches.pending()).toMatchObject({ batchSeq: 2, attempts: 5, failures: 0, serverErrors: 0 });
    expect(batches.setAsideRecords()).toEqual({ count: 0, newest: [] });
    expect(new PlayLog(db).stats()).toMatchObject({ lastSeq: 2, queueDepth: 1, unbatched: 0 });
    expect(() =>
      db.prepare("UPDATE batches SET abandon_reason = 'lost' WHERE batch_seq = 2").run(),
    ).toThrowError(expect.objectContaining({ code: 'SQLITE_CONSTRAINT_CHECK' }));
    db.close();
  });

  it('migration 5: a version-4 file loses no unsent record; its one VACUUM turns on incremental vacuum', async () => {
    // A file as a version-4 agent made it: its migrations only, WAL, no auto_vacuum (the new opener sets it first).
    const v4 = new BetterSqlite3(dbPath);
    v4.pragma('journal_mode = WAL');
    for (const migration of MIGRATIONS.filter((m) => m.version <= 4)) {
      v4.transaction(() => {
        v4.exec(migration.sql);
        v4.pragma(`user_version = ${migration.version}`);
      })();
    }
    expect(v4.pragma('auto_vacuum', { simple: true })).toBe(0);
    v4.close();
    // A year of history as that agent would have left it: answered batches, one pending, records not yet cut.
    const old = openAgentDatabase(dbPath, { targetVersion: 4 });
    const log = new PlayLog(old);
    const batches = new BatchStore(old);
    const yearAgo = new Date(Date.now() - 365 * 86_400_000);
    // (The answer written as that agent wrote it: today's BatchStore.storeAnswer also clears a later version's table.)
    const answer = old.prepare('UPDATE batches SET answer = ?, answered_at = ? WHERE batch_seq = ?');
    for (let i = 0; i < 20; i++) {
      logPlays(log, 500, yearAgo);
      answer.run(
        '{}',
        yearAgo.toISOString(),
        batches.pendingOrCut({ deviceId: DEVICE, now: yearAgo })!.batchSeq,
      );
    }
    logPlays(log, 300, yearAgo);
    const pending = batches.pendingOrCut({ deviceId: DEVICE, now: yearAgo })!;
    logPlays(log, 200, new Date());
    const unsent = old
      .prepare('SELECT seq, event, batch_seq FROM records WHERE seq > 10000 ORDER BY seq')
      .all() as { seq: number; event: string; batch_seq: number | null }[];
    expect(unsent).toHaveLength(500);
    expect(old.pragma('user_version', { simple: true })).toBe(4);
    expect(old.pragma('auto_vacuum', { simple: true })).toBe(0);
    old.close();
    const sizeBefore = statSync(dbPath).size;

    // The new agent: migration 5 in its transaction; incremental vacuum still pending (VACUUM cannot run in it).
    const db = openAgentDatabase(dbPath);
    expect(db.pragma('user_version', { simple: true })).toBe(LATEST_SCHEMA_VERSION);
    const storage = new StorageMaintenance({
      db,
      dbPath,
      state: new AgentState(db),
      disk: new DiskWatch({
        volumes: [{ name: 'data', path: dir.path }],
        freeSpace: async () => ({ freeBytes: 8 * 1024 ** 3, totalBytes: 16 * 1024 ** 3 }),
        warnFreeBytes: 512 * 1024 ** 2,
        hardFreeBytes: 128 * 1024 ** 2,
        clock: systemClock,
      }),
      settings: {
        retention: {
          keepAcknowledgedMs: 28 * 86_400_000,
          keepSetAsideMs: 180 * 86_400_000,
          pruneIntervalMs: 1,
        },
        disk: { warnFreeBytes: 512 * 1024 ** 2, hardFreeBytes: 128 * 1024 ** 2, checkIntervalMs: 1000 },
      },
      clock: systemClock,
      logger: memoryLogger(),
    });
    expect(storage.status().database.vacuum).toBe('pending');
    expect(db.prepare('SELECT count(*) AS n FROM records').get()).toEqual({ n: 10_500 });
    // Its first pass removes the year of answered history, then runs the one VACUUM.
    await storage.checkDisk();
    await storage.prunePass();
    expect(new Retention(db).autoVacuum()).toBe('incremental');
    expect(storage.status().database.vacuum).toBe('incremental');
    expect(
      db.prepare('SELECT seq, event, batch_seq FROM records ORDER BY seq').all() as typeof unsent,
    ).toEqual(unsent);
    const stillPending = new BatchStore(db).pending()!;
    expect(stillPending.batchSeq).toBe(pending.batchSeq);
    expect(stillPending.body.equals(pending.body)).toBe(true);
    expect(new PlayLog(db).stats()).toMatchObject({ lastSeq: 10_500, queueDepth: 500, unbatched: 200 });
    expect(statSync(dbPath).size).toBeLessThan(sizeBefore / 5);
    db.close();
  });

  it('migration 5: the one VACUUM waits while the disk has no room for it, and nothing changes meanwhile', async () => {
    const v4 = new BetterSqlite3(dbPath);
    v4.pragma('journal_mode = WAL');
    for (const migration of MIGRATIONS.filter((m) => m.version <= 4)) {
      v4.transaction(() => {
        v4.exec(migration.sql);
        v4.pragma(`user_version = ${migration.version}`);
      })();
    }
    v4.close();
    const db = openAgentDatabase(dbPath);
    logPlays(new PlayLog(db), 100);
    let free = 1024 ** 2;
    const storage = new StorageMaintenance({
      db,
      dbPath,
      state: new AgentState(db),
      disk: new DiskWatch({
        volumes: [{ name: 'data', path: dir.path }],
        freeSpace: async () => ({ freeBytes: free, totalBytes: 16 * 1024 ** 3 }),
        warnFreeBytes: 0,
        hardFreeBytes: 0,
        clock: systemClock,
      }),
      settings: {
        retention: { keepAcknowledgedMs: 86_400_000, keepSetAsideMs: 86_400_000, pruneIntervalMs: 1 },
        disk: { warnFreeBytes: 0, hardFreeBytes: 0, checkIntervalMs: 1000 },
      },
      clock: systemClock,
      logger: memoryLogger(),
    });
    // Twice the live data does not fit in 1 MiB: postponed.
    free = 1000;
    await storage.checkDisk();
    expect(storage.maybeVacuumOnce()).toBe('postponed');
    expect(new Retention(db).autoVacuum()).toBe('none');
    free = 8 * 1024 ** 3;
    await storage.checkDisk();
    expect(storage.maybeVacuumOnce()).toBe('incremental');
    expect(new PlayLog(db).stats()).toMatchObject({ lastSeq: 100, unbatched: 100 });
    db.close();
  });

  it('migration 6: a batch pending in a version-5 file keeps its bytes; a re-sign keeps them as its earlier signing', () => {
    const v5 = openAgentDatabase(dbPath, { targetVersion: 5 });
    logPlays(new PlayLog(v5), 2);
    const pending = new BatchStore(v5).pendingOrCut({
      deviceId: DEVICE,
      now: new Date(Date.now() - 600_000),
    })!;
    v5.close();

    const db = openAgentDatabase(dbPath);
    expect(db.pragma('user_version', { simple: true })).toBe(LATEST_SCHEMA_VERSION);
    const batches = new BatchStore(db);
    expect(batches.pending()).toMatchObject({ batchSeq: pending.batchSeq, bodySha256: pending.bodySha256 });
    expect(batches.earlierSignings(pending.batchSeq)).toEqual([]);
    const resigned = batches.refreshTs(pending.batchSeq, DEVICE, new Date());
    expect(resigned.bodySha256).not.toBe(pending.bodySha256);
    expect(batches.earlierSignings(pending.batchSeq).map((b) => [b.bodySha256, b.ts])).toEqual([
      [pending.bodySha256, pending.ts],
    ]);
    batches.storeAnswer(pending.batchSeq, '{}', new Date());
    expect(db.prepare('SELECT count(*) AS n FROM batch_versions').get()).toEqual({ n: 0 });
    db.close();
  });

  it('is idempotent: migrating a current file changes nothing', () => {
    const db = openAgentDatabase(dbPath);
    new PlayLog(db).appendStatus({ kind: 'tamper', at: new Date() });
    expect(migrate(db)).toBe(LATEST_SCHEMA_VERSION);
    expect(db.prepare('SELECT count(*) AS n FROM records').get()).toEqual({ n: 1 });
    db.close();
  });

  it('refuses a file written by a newer agent instead of touching it', () => {
    const raw = new BetterSqlite3(dbPath);
    raw.pragma(`user_version = ${LATEST_SCHEMA_VERSION + 1}`);
    raw.close();
    expect(() => openAgentDatabase(dbPath)).toThrowError(expect.objectContaining({ code: 'database_newer' }));
  });
});

function tableColumns(db: BetterSqlite3.Database): Record<string, string[]> {
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    .all() as { name: string }[];
  const result: Record<string, string[]> = {};
  for (const { name } of tables) {
    result[name] = (db.prepare(`PRAGMA table_info(${name})`).all() as { name: string }[]).map((c) => c.name);
  }
  return result;
}
