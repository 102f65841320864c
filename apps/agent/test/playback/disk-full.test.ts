import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type AgentCore, createAgent } from '../../src/agent.js';
import { systemClock } from '../../src/clock.js';
import { parseConfig } from '../../src/config/config.js';
import { prepareEnrolment } from '../../src/identity/enrolment.js';
import { AgentState } from '../../src/log/agent-state.js';
import { type Database, openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import type { WirePlayRecord, WireStatusRecord } from '../../src/log/records.js';
import { memoryLogger } from '../../src/logger.js';
import { MediaLibrary } from '../../src/media/library.js';
import { ModeTracker } from '../../src/playback/mode.js';
import { PlaybackScheduler } from '../../src/playback/scheduler.js';
import { BatchStore } from '../../src/shipping/batch-store.js';
import { DiskWatch } from '../../src/storage/disk.js';
import { StorageMaintenance } from '../../src/storage/maintenance.js';
import { layOutPlayer } from '../helpers/agent-setup.js';
import { FakeDisplay, ManualHardware } from '../helpers/hardware.js';
import { writeMedia } from '../helpers/media.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import { logPlays } from '../helpers/shipping-fixture.js';
import { ManualClock, tempDir } from '../helpers/temp.js';

const MIB = 1024 * 1024;
const DAY = 86_400_000;

describe('playback on a disk that fills', () => {
  let pki: TestPki;
  let dir: ReturnType<typeof tempDir>;
  let db: Database;
  let log: PlayLog;
  let state: AgentState;
  let clock: ManualClock;
  let display: FakeDisplay;
  let library: MediaLibrary;
  let modes: ModeTracker;
  let disk: DiskWatch;
  let scheduler: PlaybackScheduler;
  let logger: ReturnType<typeof memoryLogger>;
  let freeBytes: number;
  let controller: AbortController;
  let running: Promise<void> | null;

  beforeAll(async () => {
    pki = await createTestPki();
  });

  beforeEach(async () => {
    dir = tempDir();
    const mediaDir = join(dir.path, 'media');
    db = openAgentDatabase(join(dir.path, 'agent.sqlite'));
    log = new PlayLog(db);
    state = new AgentState(db);
    clock = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    display = new FakeDisplay(clock, 15_000);
    await writeMedia(pki, mediaDir, 'a.png', 'image a', { manifest: { approval_number: 'APP-A' } });
    await writeMedia(pki, mediaDir, 'b.png', 'image b', { manifest: { approval_number: 'APP-B' } });
    await writeMedia(pki, mediaDir, 'gov/notice.png', 'gov notice', {
      manifest: { approval_number: 'GOV-1' },
    });
    await new Promise((resolve) => setTimeout(resolve, 120));
    library = new MediaLibrary({
      mediaDir,
      structure: 'ALM-0001',
      trustedRootsPem: [pki.authorityRootPem],
      revocations: { isRevoked: () => false },
      clock: systemClock,
      log,
      logger: memoryLogger(),
      stabilityMs: 100,
      sidecarGraceMs: 0,
    });
    await library.start();
    freeBytes = 4096 * MIB;
    disk = new DiskWatch({
      volumes: [
        { name: 'data', path: dir.path },
        { name: 'media', path: mediaDir },
      ],
      freeSpace: async () => ({ freeBytes, totalBytes: 8192 * MIB }),
      warnFreeBytes: 512 * MIB,
      hardFreeBytes: 128 * MIB,
      clock,
    });
    await disk.check();
    logger = memoryLogger();
    modes = new ModeTracker({ log, state, clock, logger, offlineAfterMs: 600_000 });
    scheduler = new PlaybackScheduler({
      library,
      display,
      hardware: new ManualHardware(clock),
      log,
      modes,
      clock,
      structure: 'ALM-0001',
      imageDurationMs: 10_000,
      logger,
      idleMs: 20,
      disk,
    });
    // As the agent wires it: a change of the disk's state is reported at once.
    disk.onChange(() => {
      try {
        scheduler.refreshMode();
      } catch {
        // the next step reports it
      }
    });
    controller = new AbortController();
    running = null;
  });

  afterEach(async () => {
    controller.abort();
    await running;
    await library.stop();
    db.close();
    dir.cleanup();
  });

  const records = () => log.records(0, 100_000).map((r) => r.record);
  const plays = () => records().filter((r): r is WirePlayRecord => r.kind === 'play');
  const modeChanges = () =>
    records()
      .filter((r): r is WireStatusRecord => r.kind === 'mode_change')
      .map((r) => r.detail);
  async function requests(count: number): Promise<void> {
    while (display.requests.length < count) await display.nextRequest();
  }

  it('below the hard threshold only slot content plays, and what it must prove plays again by itself', async () => {
    running = scheduler.run(controller.signal);
    await requests(4);
    expect(new Set(display.requests.map((r) => r.relativePath))).toEqual(
      new Set(['a.png', 'b.png', 'gov/notice.png']),
    );

    // Below the warning threshold: reported, everything still plays.
    freeBytes = 300 * MIB;
    await disk.check();
    expect(modes.current).toBe('normal');
    const low = display.requests.length;
    await requests(low + 4);

    // Below the hard threshold: after the play on screen, slot content only.
    freeBytes = 100 * MIB;
    await disk.check();
    expect(modes.current).toBe('disk_full');
    const full = display.requests.length;
    await requests(full + 5);
    expect(new Set(display.requests.slice(full + 1).map((r) => r.relativePath))).toEqual(
      new Set(['gov/notice.png']),
    );

    // Space back: billable content by itself, without a restart.
    freeBytes = 2048 * MIB;
    await disk.check();
    const back = display.requests.length;
    await requests(back + 4);
    controller.abort();
    await running;
    expect(display.requests.slice(back + 1).some((r) => !r.relativePath.startsWith('gov/'))).toBe(true);
    expect(modeChanges()).toEqual([
      { from: 'normal', to: 'normal', storage: { state: 'low', free_bytes: 300 * MIB } },
      { from: 'normal', to: 'disk_full', storage: { state: 'full', free_bytes: 100 * MIB } },
      { from: 'disk_full', to: 'normal', storage: { state: 'ok', free_bytes: 2048 * MIB } },
    ]);
    // Every play shown is logged; the slot plays carry slot, not an approval.
    const logged = new Set(plays().map((p) => p.play_id));
    for (const request of display.requests.slice(0, -1)) expect(logged.has(request.playId)).toBe(true);
    expect(
      plays()
        .filter((p) => p.slot === 'gov')
        .every((p) => p.approval_number === undefined),
    ).toBe(true);
  });

  it('a play whose record cannot be written is kept and written first; nothing billable plays meanwhile', async () => {
    running = scheduler.run(controller.signal);
    await requests(3);
    // The file may not grow any more and its pages are full: the next record fails with SQLITE_FULL, as on a full
    // disk (the filling records are tamper reports, not plays).
    db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true })}`);
    let filled = 0;
    for (;;) {
      try {
        log.appendStatus({ kind: 'tamper', at: clock.now(), detail: { filler: 'x'.repeat(200) } });
        filled++;
      } catch (error) {
        expect((error as { code?: string }).code).toBe('SQLITE_FULL');
        break;
      }
    }
    expect(filled).toBeLessThan(1000);
    const before = display.requests.length;
    await requests(before + 8);
    const failedAt = before + 1;
    // The play after the fill is shown and not written; from then on, slot content only.
    expect(disk.state).toBe('full');
    expect(scheduler.status().unlogged.length).toBeGreaterThan(0);
    const waiting = scheduler.status().unlogged.map((u) => u.playId);
    expect(display.requests.slice(failedAt + 1).every((r) => r.relativePath === 'gov/notice.png')).toBe(true);
    expect(logger.lines.some((l) => /its record could not be written: kept/.test(l.message))).toBe(true);

    // Room again: the kept records are written first, in order, then billable content plays again.
    db.pragma('max_page_count = 1073741823');
    const resumed = display.requests.length;
    await requests(resumed + 5);
    controller.abort();
    await running;
    expect(scheduler.status().unlogged).toEqual([]);
    expect(disk.state).toBe('ok');
    const logged = plays().map((p) => p.play_id);
    for (const id of waiting) expect(logged).toContain(id);
    // Every play the display reported (all but the one cut short by the stop) has its record, exactly once.
    for (const request of display.requests.slice(0, -1)) {
      expect(logged.filter((id) => id === request.playId)).toHaveLength(1);
    }
    expect(display.requests.slice(resumed + 1).some((r) => !r.relativePath.startsWith('gov/'))).toBe(true);
    expect(
      logger.lines.some((l) => /the record of a play shown earlier is written now/.test(l.message)),
    ).toBe(true);
    // The mode change to disk_full could not be written while nothing could; by the time it could, it was over.
    expect(modeChanges()).toEqual([]);
  });

  it('keeps logging plays while a large retention pass runs', async () => {
    // 60,000 records the platform answered two months ago.
    const batches = new BatchStore(db);
    const old = new Date(clock.now().getTime() - 60 * DAY);
    for (let i = 0; i < 60; i++) {
      logPlays(log, 1000, old);
      batches.storeAnswer(batches.pendingOrCut({ deviceId: 'd', now: old })!.batchSeq, '{}', old);
    }
    const storage = new StorageMaintenance({
      db,
      dbPath: join(dir.path, 'agent.sqlite'),
      state,
      disk,
      settings: {
        retention: { keepAcknowledgedMs: 28 * DAY, keepSetAsideMs: 180 * DAY, pruneIntervalMs: DAY },
        disk: { warnFreeBytes: 512 * MIB, hardFreeBytes: 128 * MIB, checkIntervalMs: 60_000 },
      },
      clock,
      logger,
    });
    running = scheduler.run(controller.signal);
    await requests(2);
    const playsBefore = scheduler.status().plays;
    const pass = await storage.prunePass();
    const playsDuring = scheduler.status().plays - playsBefore;
    controller.abort();
    await running;
    expect(pass.records).toBe(60_000);
    // The pass took some 30 transactions and more incremental vacuum steps; plays were logged between them.
    expect(playsDuring).toBeGreaterThanOrEqual(10);
    expect(plays().length).toBe(scheduler.status().plays);
    expect(log.stats().unbatched).toBe(records().length);
  });
});

describe('hardware events while the play log refuses writes', () => {
  let pki: TestPki;
  let dir: ReturnType<typeof tempDir>;
  let agent: AgentCore | null;

  beforeAll(async () => {
    pki = await createTestPki();
  });
  beforeEach(() => {
    dir = tempDir();
    agent = null;
  });
  afterEach(async () => {
    await agent?.close();
    dir.cleanup();
  });

  /**
   * Fills the play log's file as the tests above do, down to the last small record: its next write fails with
   * SQLITE_FULL.
   */
  function fill(core: AgentCore): void {
    core.db.pragma(`max_page_count = ${core.db.pragma('page_count', { simple: true })}`);
    for (const filler of ['x'.repeat(200), '']) {
      for (let i = 0; ; i++) {
        if (i > 2000) throw new Error('the log did not fill');
        try {
          core.log.appendStatus({ kind: 'mode_change', at: new Date(), detail: { filler } });
        } catch (error) {
          expect((error as { code?: string }).code).toBe('SQLITE_FULL');
          break;
        }
      }
    }
  }

  async function until(check: () => boolean): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (!check()) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('a tamper change or a screen power change throws nothing into the driver, and its record is written once there is room', async () => {
    // A player laid out as a technician would, its platform nowhere (shipping fails and backs off; nothing else needs it).
    const raw = layOutPlayer({
      dir: dir.path,
      authorityRootPem: pki.authorityRootPem,
      serverCaPem: pki.authorityRootPem,
      deviceId: randomUUID(),
      structure: 'ALM-0001',
      urls: { agents: 'http://127.0.0.1:9', devices: 'http://127.0.0.1:9', verify: 'http://127.0.0.1:9' },
      overrides: {
        shipping: {
          min_interval_ms: 0,
          idle_interval_ms: 60_000,
          backoff_base_ms: 60_000,
          backoff_cap_ms: 60_000,
        },
      },
    });
    const configPath = join(dir.path, 'agent.json');
    writeFileSync(configPath, JSON.stringify(raw));
    const config = parseConfig(raw, dir.path, configPath);
    await prepareEnrolment(config);
    const hardware = new ManualHardware({ now: () => new Date() });
    const logger = memoryLogger();
    const core = await createAgent({
      config,
      hardware,
      display: new FakeDisplay({ now: () => new Date() }),
      logger,
      freeSpace: async () => ({ freeBytes: 4096 * MIB, totalBytes: 8192 * MIB }),
    });
    agent = core;
    await core.start();
    // A driver that emits to several listeners: the agent's must not keep the ones after it from hearing.
    const heard: string[] = [];
    hardware.onTamperChange((state) => heard.push(`tamper ${state}`));
    hardware.onScreenPowerChange((power) => heard.push(`power ${power}`));

    fill(core);
    expect(() => hardware.setTamper('open')).not.toThrow();
    expect(() => hardware.setScreenPower('off')).not.toThrow();
    expect(() => hardware.setTamper('closed')).not.toThrow();
    expect(heard).toEqual(['tamper open', 'power off', 'tamper closed']);
    const tampers = () =>
      core.log
        .records(0, 100_000)
        .map((r) => r.record)
        .filter((r): r is WireStatusRecord => r.kind === 'tamper');
    expect(tampers()).toEqual([]);
    expect(core.records.status().map((r) => r.kind)).toEqual(['tamper', 'tamper']);
    // A write refused: the disk counts as full (nothing billable starts) until one is written.
    expect(core.disk.state).toBe('full');
    expect(logger.lines.some((l) => /a record could not be written: kept/.test(l.message))).toBe(true);

    // Room again: both are written, in order, by the agent itself; the screen's power change is reported too.
    core.db.pragma('max_page_count = 1073741823');
    await until(() => tampers().length === 2 && core.modes.current === 'screen_off');
    expect(tampers().map((r) => r.detail)).toEqual([{ state: 'open' }, { state: 'closed' }]);
    expect(core.records.status()).toEqual([]);
    await until(() => core.disk.state === 'ok');
  });
});
