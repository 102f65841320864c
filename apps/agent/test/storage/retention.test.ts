import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CorrectedClock } from '../../src/clock.js';
import { parseConfig } from '../../src/config/config.js';
import { AgentState } from '../../src/log/agent-state.js';
import { type Database, openAgentDatabase, WAL_SIZE_LIMIT_BYTES } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import { memoryLogger } from '../../src/logger.js';
import { BatchStore, CHAIN_HEAD_KEY } from '../../src/shipping/batch-store.js';
import { DiskWatch } from '../../src/storage/disk.js';
import {
  LAST_PRUNE_KEY,
  type LastPrune,
  StorageMaintenance,
  type StorageMaintenanceOptions,
} from '../../src/storage/maintenance.js';
import { Retention } from '../../src/storage/retention.js';
import { logPlays } from '../helpers/shipping-fixture.js';
import { ManualClock, tempDir } from '../helpers/temp.js';

const DAY = 86_400_000;
const DEVICE = '6f1c0000-0000-4000-8000-000000000001';
const T0 = new Date('2026-01-10T08:00:00.000Z');

/** Settings as the agent reads them (defaults: 28 days, 180 days for records set aside). */
const settings = parseConfig(
  {
    structure: 'ALM-0001',
    platform: { agents_url: 'http://a', devices_url: 'http://d', verify_url: 'http://v' },
    authority_root_file: 'root.pem',
  },
  '/tmp',
);

describe('retention of the play log', () => {
  let dir: ReturnType<typeof tempDir>;
  let dbPath: string;
  let db: Database;
  let log: PlayLog;
  let batches: BatchStore;
  let state: AgentState;
  let clock: ManualClock;
  let freeBytes: number;

  beforeEach(() => {
    dir = tempDir();
    dbPath = join(dir.path, 'agent.sqlite');
    db = openAgentDatabase(dbPath);
    log = new PlayLog(db);
    batches = new BatchStore(db);
    state = new AgentState(db);
    clock = new ManualClock(T0);
    freeBytes = 10 * 1024 ** 3;
  });
  afterEach(() => {
    if (db.open) db.close();
    dir.cleanup();
  });

  function maintenance(overrides: Partial<StorageMaintenanceOptions> = {}): StorageMaintenance {
    const disk = new DiskWatch({
      volumes: [{ name: 'data', path: dir.path }],
      freeSpace: async () => ({ freeBytes, totalBytes: 16 * 1024 ** 3 }),
      warnFreeBytes: settings.disk.warnFreeBytes,
      hardFreeBytes: settings.disk.hardFreeBytes,
      clock,
    });
    return new StorageMaintenance({
      db,
      dbPath,
      state,
      disk,
      settings,
      clock,
      logger: memoryLogger(),
      ...overrides,
    });
  }

  function tamper(): number {
    return log.appendStatus({ kind: 'tamper', at: clock.now(), detail: { state: 'open' } }, clock.now()).seq;
  }
  function cut(): ReturnType<BatchStore['pendingOrCut']> {
    return batches.pendingOrCut({ deviceId: DEVICE, now: clock.now() });
  }
  const seqs = () =>
    (db.prepare('SELECT seq FROM records ORDER BY seq').all() as { seq: number }[]).map((r) => r.seq);
  const batchSeqs = () =>
    (db.prepare('SELECT batch_seq FROM batches ORDER BY batch_seq').all() as { batch_seq: number }[]).map(
      (r) => r.batch_seq,
    );

  it('removes what the platform answered once old enough, never what it has not, and numbering goes on', async () => {
    // 1-3 in batch 1, answered.
    tamper();
    tamper();
    tamper();
    const b1 = cut()!;
    batches.storeAnswer(b1.batchSeq, '{}', clock.now());
    // 4 alone in batch 2, set aside (the platform could not take it while it took others).
    tamper();
    const b2 = cut()!;
    batches.setAside(b2.batchSeq, clock.now(), 'http 500 internal_error');
    // 5-8 in batch 3, given up and cut again as batch 4, answered.
    for (let i = 0; i < 4; i++) tamper();
    const b3 = cut()!;
    batches.abandonForRecut(b3.batchSeq, clock.now());
    const b4 = cut()!;
    expect([b4.firstSeq, b4.lastSeq]).toEqual([5, 8]);
    batches.storeAnswer(b4.batchSeq, '{}', clock.now());
    // Probes: one taken (answered), one not.
    const p5 = batches.cutProbe(DEVICE, clock.now());
    batches.storeAnswer(p5.batchSeq, '{}', clock.now());
    const p6 = batches.cutProbe(DEVICE, clock.now());
    batches.abandonProbe(p6.batchSeq, clock.now());
    // 9-10 in batch 7, never answered: sent, failed, refused for good (a terminal answer).
    tamper();
    tamper();
    const b7 = cut()!;
    batches.noteFailure(b7.batchSeq, { at: clock.now(), serverError: true, what: 'http 500' });
    batches.markTerminal(b7.batchSeq, 'batch_conflict');
    // 11-12 not cut yet (a batch is pending).
    tamper();
    tamper();
    expect(cut()!.batchSeq).toBe(b7.batchSeq);
    const pendingBody = batches.get(b7.batchSeq)!.body;

    // 27 days later nothing is old enough.
    clock.advance(27 * DAY);
    const storage = maintenance();
    await storage.prunePass();
    expect(seqs()).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(batchSeqs()).toEqual([1, 2, 3, 4, 5, 6, 7]);

    // 40 days: what was answered goes, and the batches given up; the record set aside stays, as does everything
    // the platform has not answered, however old.
    clock.advance(13 * DAY);
    const pass = await storage.prunePass();
    expect(pass).toMatchObject({ batches: 5, records: 7, under_pressure: false });
    expect(seqs()).toEqual([4, 9, 10, 11, 12]);
    expect(batchSeqs()).toEqual([2, 7]);
    expect(batches.pending()!.batchSeq).toBe(b7.batchSeq);
    expect(batches.pending()!.body.equals(pendingBody)).toBe(true);
    expect(batches.setAsideRecords().count).toBe(1);
    expect(log.stats()).toMatchObject({ lastSeq: 12, queueDepth: 4, unbatched: 2 });

    // 200 days: the record set aside goes too (180 days); still nothing unanswered.
    clock.advance(160 * DAY);
    await storage.prunePass();
    expect(seqs()).toEqual([9, 10, 11, 12]);
    expect(batchSeqs()).toEqual([7]);

    // The platform answers batch 7 at last; 30 days later it goes, and it was the newest answered batch: the next
    // batch still names its body (prev_sha256), and numbers go on from the counters.
    batches.storeAnswer(b7.batchSeq, '{}', clock.now());
    clock.advance(30 * DAY);
    await storage.prunePass();
    expect(seqs()).toEqual([11, 12]);
    expect(batchSeqs()).toEqual([]);
    expect(state.get(CHAIN_HEAD_KEY)).toEqual({ batch_seq: 7, body_sha256: b7.bodySha256 });
    const b8 = cut()!;
    expect(b8.batchSeq).toBe(8);
    expect(b8.prevSha256).toBe(b7.bodySha256);
    expect(JSON.parse(b8.body.toString('utf8'))).toMatchObject({ batch_seq: 8, prev_sha256: b7.bodySha256 });
    expect([b8.firstSeq, b8.lastSeq]).toEqual([11, 12]);
    batches.storeAnswer(b8.batchSeq, '{}', clock.now());

    // And after a restart.
    db.close();
    db = openAgentDatabase(dbPath);
    log = new PlayLog(db);
    batches = new BatchStore(db);
    expect(tamper()).toBe(13);
    const b9 = cut()!;
    expect(b9.batchSeq).toBe(9);
    expect(b9.prevSha256).toBe(b8.bodySha256);
  });

  it('under disk pressure keeps answered history one day only, and still nothing unanswered', async () => {
    logPlays(log, 30, clock.now());
    batches.storeAnswer(cut()!.batchSeq, '{}', clock.now());
    clock.advance(DAY + 60_000);
    logPlays(log, 20, clock.now());
    batches.storeAnswer(cut()!.batchSeq, '{}', clock.now());
    logPlays(log, 5, clock.now());
    const pending = cut()!;
    logPlays(log, 5, clock.now());
    clock.advance(60_000);
    const storage = maintenance();
    await storage.prunePass();
    expect(new Retention(db).kept()).toEqual({ records: 60, batches: 3 });
    freeBytes = settings.disk.warnFreeBytes - 1;
    await storage.checkDisk();
    const pass = await storage.prunePass();
    // The batch answered more than a day ago goes; the one answered a minute ago stays.
    expect(pass).toMatchObject({ batches: 1, records: 30, under_pressure: true });
    expect(new Retention(db).kept()).toEqual({ records: 30, batches: 2 });
    expect(batches.pending()!.batchSeq).toBe(pending.batchSeq);
    expect(new Retention(db).oldestUnacknowledged()).toMatchObject({ seq: 51 });
  });

  it('gives the space back to the file system a step at a time, and the WAL stays small', async () => {
    // About 30 MB of answered records and batch bytes, two months old.
    for (let i = 0; i < 30; i++) {
      logPlays(log, 1000, clock.now());
      const batch = cut()!;
      batches.storeAnswer(batch.batchSeq, '{}', clock.now());
    }
    logPlays(log, 10, clock.now());
    db.pragma('wal_checkpoint(TRUNCATE)');
    const before = statSync(dbPath).size;
    expect(before).toBeGreaterThan(10 * 1024 * 1024);
    expect(new Retention(db).autoVacuum()).toBe('incremental');

    clock.advance(60 * DAY);
    const storage = maintenance();
    const pass = await storage.prunePass();
    expect(pass.records).toBe(30_000);
    expect(pass.bytes_freed).toBeGreaterThan(before / 2);
    const after = statSync(dbPath).size;
    expect(after).toBeLessThan(before / 4);
    expect(statSync(`${dbPath}-wal`).size).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES);
    expect(new Retention(db).freePages()).toBe(0);
    expect(log.stats()).toMatchObject({ lastSeq: 30_010, unbatched: 10 });
    const status = storage.status();
    expect(status.database.file_bytes).toBe(after);
    expect(status.database.vacuum).toBe('incremental');
    expect(status.retention.kept).toEqual({ records: 10, batches: 0 });
    expect(status.retention.last_prune).toMatchObject({ records: 30_000, batches: 30 });
    expect(status.oldest_unacknowledged).toMatchObject({ seq: 30_001, age_seconds: 60 * 86_400 });
  });

  describe('after a clock that ran a year ahead is set back', () => {
    const YEAR = 365 * DAY;
    /** The true time, the board clock (a year ahead until set) and the steady clock beside it. */
    let truth: ManualClock;
    let board: ManualClock;
    let steadyMs: number;
    let agentClock: CorrectedClock;
    const pass = (ms: number) => {
      truth.advance(ms);
      board.advance(ms);
      steadyMs += ms;
    };
    const stamps = () =>
      db.prepare('SELECT batch_seq, answered_at, abandoned_at FROM batches ORDER BY batch_seq').all();

    beforeEach(() => {
      truth = new ManualClock(T0);
      board = new ManualClock(new Date(T0.getTime() + YEAR));
      steadyMs = 0;
      agentClock = new CorrectedClock(board, DAY, 0, undefined, { monotonic: () => steadyMs });
    });

    it('frees what was answered then a keep after the clock is synced, never what waits, nor a record set aside before its time', async () => {
      // A year ahead the platform's Date is refused (beyond 24 h): the agent stamps by the board clock.
      expect(agentClock.observeServerDate(truth.now().toUTCString(), board.now(), board.now())).toBe(false);
      const at = () => agentClock.now();
      const status = () =>
        log.appendStatus({ kind: 'tamper', at: at(), detail: { state: 'open' } }, at()).seq;
      const cutNow = () => batches.pendingOrCut({ deviceId: DEVICE, now: at() })!;
      // 1-3 in batch 1, answered; 4 in batch 2, set aside; 5-6 in batch 3, sent and never answered; 7 not cut.
      status();
      status();
      status();
      batches.storeAnswer(cutNow().batchSeq, '{}', at());
      status();
      batches.setAside(cutNow().batchSeq, at(), 'http 500 internal_error');
      status();
      status();
      const pending = cutNow();
      batches.noteFailure(pending.batchSeq, { at: at(), serverError: true, what: 'http 500' });
      status();
      const aheadStamps = stamps();
      const logger = memoryLogger();
      const storage = maintenance({
        clock: agentClock,
        clockSynced: () => agentClock.synced,
        monotonic: () => steadyMs,
        logger,
      });

      // A technician sets the board clock right. Before the platform's time is taken, a stamp ahead of the clock may
      // as well be right and the clock behind: nothing moves.
      pass(DAY);
      board.set(truth.now());
      await storage.prunePass();
      expect(stamps()).toEqual(aheadStamps);

      // The next Date header is taken: the clock is synced, the stamps a year ahead count from now.
      expect(agentClock.observeServerDate(truth.now().toUTCString(), board.now(), board.now())).toBe(true);
      expect(await storage.prunePass()).toMatchObject({ batches: 0, records: 0 });
      const now = truth.now().toISOString();
      expect(stamps()).toEqual([
        { batch_seq: 1, answered_at: now, abandoned_at: null },
        { batch_seq: 2, answered_at: null, abandoned_at: now },
        { batch_seq: 3, answered_at: null, abandoned_at: null },
      ]);
      expect(logger.lines.some((l) => /kept from now/.test(l.message))).toBe(true);

      // Kept its 28 days from then, not a year and 28 days.
      pass(27 * DAY);
      await storage.prunePass();
      expect(seqs()).toEqual([1, 2, 3, 4, 5, 6, 7]);
      pass(2 * DAY);
      expect(await storage.prunePass()).toMatchObject({ batches: 1, records: 3 });
      expect(seqs()).toEqual([4, 5, 6, 7]);
      expect(batches.setAsideRecords().count).toBe(1);

      // The record set aside goes 180 days after, never what the platform has not answered.
      pass(150 * DAY);
      await storage.prunePass();
      expect(seqs()).toEqual([4, 5, 6, 7]);
      pass(2 * DAY);
      await storage.prunePass();
      expect(seqs()).toEqual([5, 6, 7]);
      expect(batchSeqs()).toEqual([pending.batchSeq]);
      expect(batches.pending()!.batchSeq).toBe(pending.batchSeq);
      expect(log.stats()).toMatchObject({ lastSeq: 7, unbatched: 1 });
    });

    it('runs its pass every prune_interval of steady time, not a year after the clock was set back', async () => {
      let rounds = 0;
      let controller = new AbortController();
      const storage = maintenance({
        clock: board,
        monotonic: () => steadyMs,
        sleep: async (ms) => {
          pass(ms);
          if (--rounds <= 0) controller.abort();
        },
      });
      rounds = 1;
      await storage.run(controller.signal);
      expect(state.get<LastPrune>(LAST_PRUNE_KEY)?.at).toBe(new Date(T0.getTime() + YEAR).toISOString());

      board.set(truth.now());
      controller = new AbortController();
      // An hour of disk checks, one a minute.
      rounds = Math.ceil(settings.retention.pruneIntervalMs / settings.disk.checkIntervalMs) + 1;
      await storage.run(controller.signal);
      expect(state.get<LastPrune>(LAST_PRUNE_KEY)?.at).toBe(
        new Date(T0.getTime() + settings.retention.pruneIntervalMs).toISOString(),
      );
    });
  });

  it('removes in small transactions: one chunk never takes more than a couple of thousand records', () => {
    for (let i = 0; i < 5; i++) {
      logPlays(log, 1000, clock.now());
      batches.storeAnswer(cut()!.batchSeq, '{}', clock.now());
    }
    clock.advance(30 * DAY);
    const retention = new Retention(db);
    const policy = { acknowledgedBefore: clock.now(), setAsideBefore: new Date(0) };
    const chunks = [];
    for (;;) {
      const chunk = retention.pruneChunk(policy);
      chunks.push(chunk);
      if (!chunk.more) break;
    }
    expect(chunks.map((c) => c.records)).toEqual([2000, 2000, 1000]);
    expect(retention.kept()).toEqual({ records: 0, batches: 0 });
  });
});
