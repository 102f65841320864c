import { getEventListeners } from 'node:events';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CorrectedClock, systemClock } from '../../src/clock.js';
import { AgentState } from '../../src/log/agent-state.js';
import { type Database, openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import type { WirePlayRecord, WireStatusRecord } from '../../src/log/records.js';
import { memoryLogger } from '../../src/logger.js';
import { MediaLibrary } from '../../src/media/library.js';
import { ModeTracker } from '../../src/playback/mode.js';
import type { Display } from '../../src/playback/display.js';
import { PlaybackScheduler, playTimes } from '../../src/playback/scheduler.js';
import { FakeDisplay, ManualHardware } from '../helpers/hardware.js';
import { sha256Of, swapKeepingSizeAndMtime, writeMedia } from '../helpers/media.js';
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

  function rejects(): WireStatusRecord[] {
    return log
      .records()
      .map((r) => r.record)
      .filter((r): r is WireStatusRecord => r.kind === 'reject');
  }

  /** The scheduler on `shown`, which wraps the test's display; its logger is returned. */
  function schedulerOn(shown: Display): {
    run: () => Promise<void>;
    logger: ReturnType<typeof memoryLogger>;
  } {
    const logger = memoryLogger();
    const own = new PlaybackScheduler({
      library,
      display: shown,
      hardware,
      log,
      modes,
      clock,
      structure: 'ALM-0001',
      imageDurationMs: 10_000,
      logger,
      idleMs: 50,
    });
    return { run: () => own.run(controller.signal), logger };
  }

  it('a file swapped after it was verified (same size, mtime put back) is not played: it is judged again', async () => {
    let swapped = -1;
    // While gov/notice.png plays, a.png (next in the rotation) gets other bytes of its size and its mtime back. The
    // next step follows without a turn of the event loop: the library's watcher has not seen it when a.png is due.
    const { run, logger } = schedulerOn({
      async play(request, signal) {
        const report = await display.play(request, signal);
        if (swapped < 0 && request.relativePath === 'gov/notice.png') {
          swapKeepingSizeAndMtime(join(mediaDir, 'a.png'), 'IMAGE Z');
          swapped = display.requests.length;
        }
        return report;
      },
    });
    running = run();
    await untilRequests(8);
    controller.abort();
    await running;
    expect(display.requests.slice(0, 3).map((r) => r.relativePath)).toEqual([
      'a.png',
      'b.webm',
      'gov/notice.png',
    ]);
    expect(swapped).toBe(3);
    // Never shown again: not the file its verdict was on, and once read, refused for what it is.
    expect(display.requests.slice(swapped).map((r) => r.relativePath)).not.toContain('a.png');
    expect(plays().filter((p) => p.approval_number === 'APP-A')).toHaveLength(1);
    expect(
      logger.lines.some(
        (l) => l.message === 'media file changed since it was verified: not played; judged again',
      ),
    ).toBe(true);
    await until(() => rejects().length > 0);
    expect(rejects()).toEqual([
      expect.objectContaining({
        code: 'HASH_MISMATCH',
        detail: expect.objectContaining({ file: 'a.png', media_sha256: sha256Of('IMAGE Z') }),
      }),
    ]);
  });

  it('a play whose file changed while it was shown is logged as a HASH_MISMATCH reject, never as a play of the approval', async () => {
    let swappedPlay: string | null = null;
    // a.png's bytes are swapped (same size, mtime put back) while it is on the screen.
    const { run, logger } = schedulerOn({
      async play(request, signal) {
        const report = await display.play(request, signal);
        if (swappedPlay === null && request.relativePath === 'a.png') {
          swapKeepingSizeAndMtime(join(mediaDir, 'a.png'), 'IMAGE Z');
          swappedPlay = request.playId;
        }
        return report;
      },
    });
    running = run();
    await untilRequests(4);
    await until(() => rejects().length >= 2);
    controller.abort();
    await running;
    expect(swappedPlay).toBe(display.requests[0]!.playId);
    // No play record for it: nothing the platform would count or bill as APP-A.
    expect(plays().map((p) => p.play_id)).not.toContain(swappedPlay);
    expect(plays().filter((p) => p.approval_number === 'APP-A')).toEqual([]);
    const [shown, refused] = rejects();
    expect(shown).toMatchObject({
      kind: 'reject',
      code: 'HASH_MISMATCH',
      detail: {
        file: 'a.png',
        reason: 'the file changed while it was shown: the bytes shown are not known to be the approved ones',
        approval_number: 'APP-A',
        verified_sha256: sha256Of('image a'),
        play_id: swappedPlay,
        start: '2026-11-21T09:00:00.000Z',
        end: '2026-11-21T09:00:10.000Z',
      },
    });
    expect(shown!.detail).not.toHaveProperty('media_sha256');
    // The library, told, judged the file again: its own reject names the bytes now there.
    expect(refused).toMatchObject({
      code: 'HASH_MISMATCH',
      detail: { file: 'a.png', media_sha256: sha256Of('IMAGE Z') },
    });
    expect(display.requests.slice(1).map((r) => r.relativePath)).not.toContain('a.png');
    expect(
      logger.lines.some(
        (l) => l.message === 'media file changed while it was shown: logged as a reject, not as a play',
      ),
    ).toBe(true);
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

  it('measures the time unreachable on the steady clock: a wall clock step neither hastens nor delays offline', () => {
    let steady = 0;
    const tracker = new ModeTracker({
      log,
      state,
      clock,
      logger: memoryLogger(),
      offlineAfterMs: 600_000,
      monotonic: () => steady,
    });
    const inputs = { screenPower: 'on' as const, emergencyPlayable: false };
    tracker.setReachable(false);
    // The board's clock jumps an hour ahead: still only 1 s unreachable.
    clock.advance(3_600_000);
    steady += 1000;
    expect(tracker.update(inputs)).toBe('normal');
    // The agent corrects it back: the 10 minutes count on the steady clock all the same.
    clock.advance(-3_600_000);
    steady += 600_000;
    expect(tracker.update(inputs)).toBe('offline');
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

  it('a clock corrected backwards in the middle of a play: the play is logged with its real length and playback goes on', async () => {
    // The board runs 10 minutes ahead; the platform's Date header corrects the agent's clock during the first
    // play, so the display's end stamp is ten minutes before its start stamp.
    const truth = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    const board = { now: () => new Date(truth.now().getTime() + 600_000) };
    const agentClock = new CorrectedClock(board, 86_400_000, 0, undefined, {
      monotonic: () => truth.now().getTime(),
    });
    let corrected = false;
    const correcting: Display = {
      async play(request) {
        const start = agentClock.now();
        truth.advance(4000);
        if (!corrected) {
          corrected = true;
          const at = agentClock.baseNow();
          expect(agentClock.observeServerDate(truth.now().toUTCString(), at, at)).toBe(true);
        }
        truth.advance((request.durationMs ?? 15_000) - 4000);
        await new Promise((resolve) => setImmediate(resolve));
        return { outcome: 'played', start, end: agentClock.now(), interrupted: false };
      },
    };
    const logger = memoryLogger();
    const correctedScheduler = new PlaybackScheduler({
      library,
      display: correcting,
      hardware,
      log,
      modes,
      clock: agentClock,
      monotonic: () => truth.now().getTime(),
      structure: 'ALM-0001',
      imageDurationMs: 10_000,
      logger,
      idleMs: 50,
    });
    running = correctedScheduler.run(controller.signal);
    await until(() => plays().length >= 4);
    controller.abort();
    await running;
    const [first, second] = plays();
    // The Date header has one-second resolution and is read as its middle: the offset is -599.5 s.
    expect(agentClock.offset).toBe(-599_500);
    expect(first).toMatchObject({
      start: '2026-11-21T09:00:00.500Z',
      end: '2026-11-21T09:00:10.500Z',
      duration_ms: 10_000,
      detail: { clock_step_ms: -599_500 },
    });
    expect(second).toMatchObject({ start: '2026-11-21T09:00:10.500Z', duration_ms: 15_000 });
    expect(second).not.toHaveProperty('detail');
    expect(logger.lines.filter((line) => line.level === 'error')).toEqual([]);
  });

  it('a clock corrected after the display stamped the end but before it reported: the play is logged in the corrected time', async () => {
    // The board runs 10 minutes ahead. The display reads both stamps on the uncorrected clock; while its report
    // is on the way (a renderer's IPC message, an await), a Date header sets the agent's clock back. The play
    // must not be logged ten minutes ahead as a play of the corrected clock: the platform would refuse it
    // (time_in_future), and it would never be set right, since it carries no mark of the clock it was read on.
    const truth = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    const board = { now: () => new Date(truth.now().getTime() + 600_000) };
    const agentClock = new CorrectedClock(board, 86_400_000, 0, undefined, {
      monotonic: () => truth.now().getTime(),
    });
    const stampedLog = new PlayLog(db, () =>
      agentClock.synced
        ? null
        : { run: 'run-1', steadyMs: truth.now().getTime(), clockMs: agentClock.now().getTime() },
    );
    let corrected = false;
    const lateReport: Display = {
      async play(request) {
        const start = agentClock.now();
        truth.advance(request.durationMs ?? 15_000);
        const end = agentClock.now();
        await new Promise((resolve) => setImmediate(resolve));
        if (!corrected) {
          corrected = true;
          const at = agentClock.baseNow();
          expect(agentClock.observeServerDate(truth.now().toUTCString(), at, at)).toBe(true);
        }
        return { outcome: 'played', start, end, interrupted: false };
      },
    };
    const lateScheduler = new PlaybackScheduler({
      library,
      display: lateReport,
      hardware,
      log: stampedLog,
      modes,
      clock: agentClock,
      monotonic: () => truth.now().getTime(),
      structure: 'ALM-0001',
      imageDurationMs: 10_000,
      logger: memoryLogger(),
      idleMs: 50,
    });
    running = lateScheduler.run(controller.signal);
    await until(() => plays().length >= 2);
    controller.abort();
    await running;
    // The first play was on screen from 09:00:00 to 09:00:10 true time; the corrected clock reads true + 0.5 s.
    expect(agentClock.offset).toBe(-599_500);
    const [first, second] = stampedLog.records().map((r) => r.record as WirePlayRecord);
    expect(first).toMatchObject({
      start: '2026-11-21T09:00:00.500Z',
      end: '2026-11-21T09:00:10.500Z',
      duration_ms: 10_000,
      detail: { clock_step_ms: -599_500 },
    });
    expect(second).toMatchObject({ start: '2026-11-21T09:00:10.500Z', duration_ms: 15_000 });
    // Logged after the sync, in the synced clock's time: nothing waits to be settled.
    expect(stampedLog.stats().unsettled).toBe(0);
  });

  it('an unexpected error in the loop is logged, and playback goes on after a pause', async () => {
    const logger = memoryLogger();
    let throwsLeft = 2;
    const flaky = new ManualHardware(clock);
    const originalPower = flaky.screenPower.bind(flaky);
    flaky.screenPower = () => {
      if (throwsLeft > 0) {
        throwsLeft--;
        throw new Error('board I/O error');
      }
      return originalPower();
    };
    const resilient = new PlaybackScheduler({
      library,
      display,
      hardware: flaky,
      log,
      modes,
      clock,
      structure: 'ALM-0001',
      imageDurationMs: 10_000,
      logger,
      idleMs: 20,
    });
    running = resilient.run(controller.signal);
    await until(() => plays().length >= 2);
    controller.abort();
    await running;
    expect(
      logger.lines.filter((line) => line.message === 'playback step failed; going on after a pause'),
    ).toHaveLength(2);
    expect(resilient.status().failures).toBe(2);
  });

  it('a play that cannot be logged does not stop playback', async () => {
    const logger = memoryLogger();
    const brokenOnce: Display = {
      async play(request, signal) {
        const report = await display.play(request, signal);
        // A display reporting an impossible play (no valid instants) once.
        if (display.requests.length === 1)
          return {
            outcome: 'played',
            start: new Date(Number.NaN),
            end: new Date(Number.NaN),
            interrupted: false,
          };
        return report;
      },
    };
    const resilient = new PlaybackScheduler({
      library,
      display: brokenOnce,
      hardware,
      log,
      modes,
      clock,
      structure: 'ALM-0001',
      imageDurationMs: 10_000,
      logger,
      idleMs: 20,
    });
    running = resilient.run(controller.signal);
    await until(() => plays().length >= 2);
    controller.abort();
    await running;
    expect(logger.lines.some((line) => line.message === 'a play was shown but could not be logged')).toBe(
      true,
    );
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

describe('play times across a clock correction (playTimes)', () => {
  const at = (iso: string) => new Date(iso);
  const T = Date.parse('2026-11-21T09:00:00.000Z');

  it('keeps the reported times when the clock was not set during the play', () => {
    const times = playTimes(
      { start: at('2026-11-21T09:00:00.200Z'), end: at('2026-11-21T09:00:10.200Z') },
      { clockMs: T, monoMs: 1000 },
      { clockMs: T + 10_300, monoMs: 11_300 },
    );
    expect(times).toEqual({
      start: at('2026-11-21T09:00:00.200Z'),
      end: at('2026-11-21T09:00:10.200Z'),
      durationMs: 10_000,
      clockStepMs: null,
    });
  });

  it('a step between the stamps: length = reported length - step, end kept, start derived', () => {
    // 10 s on screen; the clock was set 10 minutes back in the middle.
    const back = playTimes(
      { start: at('2026-11-21T09:10:00.000Z'), end: at('2026-11-21T09:00:10.000Z') },
      { clockMs: T + 600_000, monoMs: 0 },
      { clockMs: T + 10_000, monoMs: 10_000 },
    );
    expect(back).toEqual({
      start: at('2026-11-21T09:00:00.000Z'),
      end: at('2026-11-21T09:00:10.000Z'),
      durationMs: 10_000,
      clockStepMs: -600_000,
    });
    // And 10 minutes forward.
    const forward = playTimes(
      { start: at('2026-11-21T09:00:00.000Z'), end: at('2026-11-21T09:10:10.000Z') },
      { clockMs: T, monoMs: 0 },
      { clockMs: T + 610_000, monoMs: 10_000 },
    );
    expect(forward).toMatchObject({ start: at('2026-11-21T09:10:00.000Z'), durationMs: 10_000 });
  });

  it('a step before the start stamp (while the file loaded) leaves the reported times', () => {
    const times = playTimes(
      { start: at('2026-11-21T09:00:00.500Z'), end: at('2026-11-21T09:00:10.500Z') },
      { clockMs: T + 600_000, monoMs: 0 },
      { clockMs: T + 10_500, monoMs: 10_500 },
    );
    expect(times).toMatchObject({
      start: at('2026-11-21T09:00:00.500Z'),
      end: at('2026-11-21T09:00:10.500Z'),
      durationMs: 10_000,
      clockStepMs: -600_000,
    });
  });

  it('a step after both stamps (the report came later): both are moved into the corrected time', () => {
    const times = playTimes(
      { start: at('2026-11-21T09:10:00.000Z'), end: at('2026-11-21T09:10:10.000Z') },
      { clockMs: T + 600_000, monoMs: 0 },
      { clockMs: T + 10_050, monoMs: 10_050 },
    );
    expect(times).toEqual({
      start: at('2026-11-21T09:00:00.000Z'),
      end: at('2026-11-21T09:00:10.000Z'),
      durationMs: 10_000,
      clockStepMs: -600_000,
    });
    // A video longer than the step: both stamps are still told apart from the corrected time.
    const long = playTimes(
      { start: at('2026-11-21T09:10:00.000Z'), end: at('2026-11-21T09:30:00.000Z') },
      { clockMs: T + 600_000, monoMs: 0 },
      { clockMs: T + 1_200_100, monoMs: 1_200_100 },
    );
    expect(long).toMatchObject({
      start: at('2026-11-21T09:00:00.000Z'),
      end: at('2026-11-21T09:20:00.000Z'),
      durationMs: 1_200_000,
    });
  });

  it('a correction between the stamps is taken as the clock made it, not as measured to a millisecond', () => {
    // A 1000 ms play; the wall clock is read to the millisecond (truncated): the steady time between the
    // scheduler's readings (1000.31 ms) against the wall readings makes the step look 1 ms shorter than the
    // correction was (-599 499 instead of -599 500), and the play 999 ms long: too_short for the platform.
    const times = playTimes(
      { start: new Date(T + 600_000), end: new Date(T + 1500) },
      { clockMs: T + 600_000, monoMs: 0, offsetMs: 0 },
      { clockMs: T + 1501, monoMs: 1000.31, offsetMs: -599_500 },
    );
    expect(times).toEqual({
      start: new Date(T + 500),
      end: new Date(T + 1500),
      durationMs: 1000,
      clockStepMs: -599_500,
    });
  });

  it('never logs a negative length or one longer than the steady time', () => {
    const times = playTimes(
      { start: at('2026-11-21T09:00:20.000Z'), end: at('2026-11-21T09:00:00.000Z') },
      { clockMs: T, monoMs: 0 },
      { clockMs: T + 5000, monoMs: 5000 },
    );
    expect(times.durationMs).toBe(5000);
    expect(times.end.getTime() - times.start.getTime()).toBe(5000);
  });
});
