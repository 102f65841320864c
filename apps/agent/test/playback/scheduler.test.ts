import { getEventListeners } from 'node:events';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { AgentState } from '../../src/log/agent-state.js';
import { type Database, openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import type { WirePlayRecord, WireStatusRecord } from '../../src/log/records.js';
import { memoryLogger } from '../../src/logger.js';
import { MediaLibrary } from '../../src/media/library.js';
import { ModeTracker } from '../../src/playback/mode.js';
import type { Display } from '../../src/playback/display.js';
import { PlaybackScheduler } from '../../src/playback/scheduler.js';
import { FakeDisplay, ManualHardware } from '../helpers/hardware.js';
import { writeMedia } from '../helpers/media.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import { ManualClock, tempDir } from '../helpers/temp.js';

describe('playback scheduler', () => {
  let pki: TestPki;
  let dir: ReturnType<typeof tempDir>;
  let mediaDir: string;
  let db: Database;
  let log: PlayLog;
  let state: AgentState;
  let clock: ManualClock;
  let hardware: ManualHardware;
  let display: FakeDisplay;
  let library: MediaLibrary;
  let modes: ModeTracker;
  let scheduler: PlaybackScheduler;
  let revoked: Set<string>;
  let controller: AbortController;
  let running: Promise<void> | null;

  beforeAll(async () => {
    pki = await createTestPki();
  });

  beforeEach(async () => {
    dir = tempDir();
    mediaDir = join(dir.path, 'media');
    db = openAgentDatabase(join(dir.path, 'agent.sqlite'));
    log = new PlayLog(db);
    state = new AgentState(db);
    clock = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    hardware = new ManualHardware(clock);
    display = new FakeDisplay(clock, 15_000);
    revoked = new Set();
    await writeMedia(pki, mediaDir, 'a.png', 'image a', { manifest: { approval_number: 'APP-A' } });
    await writeMedia(pki, mediaDir, 'b.webm', 'video b', {
      manifest: { approval_number: 'APP-B', duration_ms: 15_000 },
    });
    await writeMedia(pki, mediaDir, 'gov/notice.png', 'gov notice', {
      manifest: { approval_number: 'GOV-1' },
    });
    await new Promise((resolve) => setTimeout(resolve, 120));
    library = new MediaLibrary({
      mediaDir,
      structure: 'ALM-0001',
      trustedRootsPem: [pki.authorityRootPem],
      revocations: { isRevoked: (n) => revoked.has(n) },
      clock: systemClock,
      log,
      logger: memoryLogger(),
      stabilityMs: 100,
      sidecarGraceMs: 0,
    });
    await library.start();
    modes = new ModeTracker({ log, state, clock, logger: memoryLogger(), offlineAfterMs: 600_000 });
    scheduler = new PlaybackScheduler({
      library,
      display,
      hardware,
      log,
      modes,
      clock,
      structure: 'ALM-0001',
      imageDurationMs: 10_000,
      logger: memoryLogger(),
      idleMs: 50,
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

  function plays(): WirePlayRecord[] {
    return log
      .records()
      .map((r) => r.record)
      .filter((r): r is WirePlayRecord => r.kind === 'play');
  }
  function modeChanges(): WireStatusRecord[] {
    return log
      .records()
      .map((r) => r.record)
      .filter((r): r is WireStatusRecord => r.kind === 'mode_change');
  }
  async function until(condition: () => boolean): Promise<void> {
    const started = Date.now();
    while (!condition()) {
      if (Date.now() - started > 10_000) throw new Error('condition not met');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  async function untilRequests(count: number): Promise<void> {
    while (display.requests.length < count) await display.nextRequest();
  }

  it('plays the rotation in turn and logs each reported play with the spec fields', async () => {
    running = scheduler.run(controller.signal);
    await untilRequests(7);
    controller.abort();
    await running;
    expect(display.requests.slice(0, 6).map((r) => [r.relativePath, r.kind, r.durationMs])).toEqual([
      ['a.png', 'image', 10_000],
      ['b.webm', 'video', 15_000],
      ['gov/notice.png', 'image', 10_000],
      ['a.png', 'image', 10_000],
      ['b.webm', 'video', 15_000],
      ['gov/notice.png', 'image', 10_000],
    ]);
    const logged = plays();
    expect(logged.length).toBeGreaterThanOrEqual(6);
    expect(logged[0]).toMatchObject({
      kind: 'play',
      seq: 1,
      approval_number: 'APP-A',
      start: '2026-11-21T09:00:00.000Z',
      end: '2026-11-21T09:00:10.000Z',
      duration_ms: 10_000,
      structure: 'ALM-0001',
      screen: { power: 'on' },
    });
    expect(logged[1]).toMatchObject({ approval_number: 'APP-B', duration_ms: 15_000 });
    expect(logged[2]).toMatchObject({ slot: 'gov' });
    expect(logged[2]).not.toHaveProperty('approval_number');
    expect(new Set(logged.map((p) => p.play_id)).size).toBe(logged.length);
    expect(logged[0]!.play_id).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(modeChanges()).toEqual([]);
  });

  it('takes a file off the screen the moment it stops being playable and does not play it again', async () => {
    display.hold = true;
    running = scheduler.run(controller.signal);
    await untilRequests(1);
    expect(display.requests[0]!.relativePath).toBe('a.png');
    clock.advance(4000);
    revoked.add('APP-A');
    await library.reevaluateAll();
    await untilRequests(2);
    display.hold = false;
    await untilRequests(6);
    controller.abort();
    await running;
    expect(display.requests.slice(1).every((r) => r.relativePath !== 'a.png')).toBe(true);
    const first = plays()[0]!;
    expect(first).toMatchObject({
      approval_number: 'APP-A',
      duration_ms: 4000,
      detail: { interrupted: true },
    });
  });

  it('switches to emergency content only, with mode_change records both ways', async () => {
    running = scheduler.run(controller.signal);
    await untilRequests(2);
    await writeMedia(pki, mediaDir, 'emergency/alert.png', 'alert', {
      manifest: { approval_number: 'EMG-1' },
    });
    await until(() => library.playable().some((i) => i.slot === 'emergency'));
    const start = display.requests.length;
    await untilRequests(start + 4);
    const during = display.requests.slice(start + 1).map((r) => r.relativePath);
    expect(new Set(during)).toEqual(new Set(['emergency/alert.png']));
    rmSync(join(mediaDir, 'emergency/alert.png'));
    await library.schedule('emergency/alert.png');
    await until(() => !library.playable().some((i) => i.slot === 'emergency'));
    const after = display.requests.length;
    await untilRequests(after + 3);
    controller.abort();
    await running;
    expect(display.requests.slice(after + 1).some((r) => r.relativePath !== 'emergency/alert.png')).toBe(
      true,
    );
    expect(modeChanges().map((m) => m.detail)).toEqual([
      { from: 'normal', to: 'emergency' },
      { from: 'emergency', to: 'normal' },
    ]);
    expect(plays().some((p) => p.slot === 'emergency')).toBe(true);
  });

  it('reports screen off as a mode and on each play', async () => {
    hardware.setScreenPower('off');
    running = scheduler.run(controller.signal);
    await untilRequests(3);
    controller.abort();
    await running;
    expect(modeChanges().map((m) => m.detail)).toEqual([{ from: 'normal', to: 'screen_off' }]);
    expect(plays()[0]!.screen).toEqual({ power: 'off' });
  });

  it('goes offline after the platform is unreachable long enough, and remembers the mode across restarts', () => {
    scheduler.refreshMode();
    modes.setReachable(false);
    clock.advance(599_000);
    scheduler.refreshMode();
    expect(modes.current).toBe('normal');
    clock.advance(2000);
    scheduler.refreshMode();
    expect(modes.current).toBe('offline');
    expect(modeChanges()).toHaveLength(1);
    // A restart while still offline: the remembered mode is offline, no duplicate record.
    const again = new ModeTracker({ log, state, clock, logger: memoryLogger(), offlineAfterMs: 600_000 });
    expect(again.current).toBe('offline');
    modes.setReachable(true);
    scheduler.refreshMode();
    expect(modeChanges().map((m) => m.detail)).toEqual([
      { from: 'normal', to: 'offline' },
      { from: 'offline', to: 'normal' },
    ]);
  });

  it('stops at once when stopped during a failed play: no wait on an already-aborted signal', async () => {
    // A sleep like the simulator's virtual clock at shutdown: it ends only when its signal aborts.
    const sleeps: AbortSignal[] = [];
    const sleepUntilAborted = (_ms: number, signal?: AbortSignal) =>
      new Promise<void>((resolve) => {
        if (signal) sleeps.push(signal);
        if (signal?.aborted) resolve();
        else signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    const stopper = new AbortController();
    const stopping: Display = {
      // The agent is stopped while the display is busy, and the play fails.
      play: async () => {
        stopper.abort();
        return { outcome: 'failed', reason: 'decode error' };
      },
    };
    const stoppable = new PlaybackScheduler({
      library,
      display: stopping,
      hardware,
      log,
      modes,
      clock,
      structure: 'ALM-0001',
      imageDurationMs: 10_000,
      logger: memoryLogger(),
      sleep: sleepUntilAborted,
      idleMs: 3_600_000,
    });
    const outcome = await Promise.race([
      stoppable.run(stopper.signal).then(() => 'stopped'),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2000)),
    ]);
    expect(outcome).toBe('stopped');
    expect(sleeps.every((signal) => signal.aborted)).toBe(true);
    expect(getEventListeners(stopper.signal, 'abort')).toHaveLength(0);
  });

  it('logs nothing for a play the display could not start', async () => {
    display.failPaths.add('b.webm');
    running = scheduler.run(controller.signal);
    await untilRequests(5);
    controller.abort();
    await running;
    expect(plays().every((p) => p.approval_number !== 'APP-B')).toBe(true);
    expect(scheduler.status().failures).toBeGreaterThan(0);
  });
});
