import type { Clock } from '../../src/clock.js';
import type { Hardware, TamperState } from '../../src/hardware/hardware.js';
import type { ScreenPower } from '../../src/log/records.js';
import type { Display, PlayReport, PlayRequest } from '../../src/playback/display.js';

/** Hardware a test sets by hand. */
export class ManualHardware implements Hardware {
  private power: ScreenPower = 'on';
  private tamperState: TamperState = 'closed';
  private readonly powerListeners = new Set<(power: ScreenPower) => void>();
  private readonly tamperListeners = new Set<(state: TamperState) => void>();

  /**
   * `monotonic` is the steady clock; by default it follows `clock`, so a test that moves `clock` by hand moves
   * time itself. A test that sets the board clock (a jump, a correction) gives a separate steady clock.
   */
  constructor(
    readonly clock: Clock,
    private readonly monotonic: () => number = () => clock.now().getTime(),
  ) {}

  monotonicMs(): number {
    return this.monotonic();
  }

  screenPower(): ScreenPower {
    return this.power;
  }

  tamper(): TamperState {
    return this.tamperState;
  }

  setScreenPower(power: ScreenPower): void {
    this.power = power;
    for (const listener of this.powerListeners) listener(power);
  }

  setTamper(state: TamperState): void {
    this.tamperState = state;
    for (const listener of this.tamperListeners) listener(state);
  }

  onScreenPowerChange(listener: (power: ScreenPower) => void): () => void {
    this.powerListeners.add(listener);
    return () => this.powerListeners.delete(listener);
  }

  onTamperChange(listener: (state: TamperState) => void): () => void {
    this.tamperListeners.add(listener);
    return () => this.tamperListeners.delete(listener);
  }
}

/**
 * A display that "plays" on a clock: reports start = now, end = now + duration (after advancing a manual
 * clock if given), yielding to the event loop in between. `hold` makes a play last until aborted.
 */
export class FakeDisplay implements Display {
  readonly requests: PlayRequest[] = [];
  hold = false;
  failPaths = new Set<string>();
  private readonly waiters: ((request: PlayRequest) => void)[] = [];

  constructor(
    private readonly clock: Clock & { advance?: (ms: number) => Date },
    private readonly videoMs = 5000,
  ) {}

  async play(request: PlayRequest, signal: AbortSignal): Promise<PlayReport> {
    const start = this.clock.now();
    this.requests.push(request);
    for (const waiter of this.waiters.splice(0)) waiter(request);
    await new Promise((resolve) => setImmediate(resolve));
    if (this.failPaths.has(request.relativePath)) return { outcome: 'failed', reason: 'decode error' };
    if (this.hold) {
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
      return { outcome: 'played', start, end: this.clock.now(), interrupted: true };
    }
    const duration = request.durationMs ?? this.videoMs;
    const end = this.clock.advance ? this.clock.advance(duration) : new Date(start.getTime() + duration);
    return { outcome: 'played', start, end, interrupted: false };
  }

  nextRequest(): Promise<PlayRequest> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

/**
 * A display that really waits: images for their duration, videos for `videoMs`; abort ends early. An
 * uninterrupted play lasts at least its duration on the clock it stamps with, as a screen's does: Node counts a
 * timer in whole milliseconds of its loop clock from a truncated start, so a timer may fire up to a millisecond
 * (more when a busy tick makes the loop clock stale) before its delay has passed, and plays stamped with a
 * millisecond clock then measured 999 ms of 1000 (refused by the platform as too_short). The rest is waited out
 * on the steady clock, which a correction of `clock` does not move; `clock` is read before it starts and after it
 * ends, so the stamps span at least the steady time waited.
 */
export class TimerDisplay implements Display {
  plays = 0;

  constructor(
    private readonly clock: Clock,
    private readonly videoMs = 1000,
  ) {}

  async play(request: PlayRequest, signal: AbortSignal): Promise<PlayReport> {
    const start = this.clock.now();
    const steadyStart = performance.now();
    const duration = request.durationMs ?? this.videoMs;
    const interrupted = await new Promise<boolean>((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const wait = (ms: number) => {
        timer = setTimeout(() => {
          const left = duration - (performance.now() - steadyStart);
          if (left > 0) {
            wait(Math.ceil(left));
            return;
          }
          signal.removeEventListener('abort', onAbort);
          resolve(false);
        }, ms);
      };
      if (signal.aborted) {
        resolve(true);
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      wait(duration);
    });
    this.plays++;
    return { outcome: 'played', start, end: this.clock.now(), interrupted };
  }
}
