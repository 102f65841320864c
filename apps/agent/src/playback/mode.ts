import type { Clock, ClockTrust } from '../clock.js';
import type { AgentState } from '../log/agent-state.js';
import type { PlayLog } from '../log/play-log.js';
import type { ScreenPower } from '../log/records.js';
import type { Logger } from '../logger.js';

/**
 * What the player is showing, reported by `mode_change` records (spec record kinds). One mode at a time,
 * by precedence:
 * - `screen_off`: the hardware reports the screen powered off (plays go on and carry screen.power "off");
 * - `emergency`: emergency slot content is playable and is all that plays;
 * - `offline`: the platform has not been reachable for `offlineAfterMs` (plays go on and queue on disk), or
 *   the clock is implausible (a board in 1970: nothing plays until it is set; the record says `reason: clock`);
 * - `normal`.
 */
export type DisplayMode = 'normal' | 'emergency' | 'offline' | 'screen_off';

const MODE_KEY = 'display.mode';

export interface ModeInputs {
  screenPower: ScreenPower;
  emergencyPlayable: boolean;
}

export class ModeTracker {
  private mode: DisplayMode;
  private unreachableSince: number | null = null;
  private readonly listeners = new Set<(mode: DisplayMode) => void>();

  constructor(
    private readonly options: {
      log: PlayLog;
      state: AgentState;
      clock: Clock;
      logger: Logger;
      offlineAfterMs: number;
      clockTrust?: () => ClockTrust;
      /**
       * The steady clock (ms) the time unreachable is measured on: a step of the wall clock (the board's own, or
       * the agent's correction) must neither send the player offline early nor hold it online. Without one, the
       * wall clock.
       */
      monotonic?: () => number;
    },
  ) {
    this.mode = options.state.get<DisplayMode>(MODE_KEY) ?? 'normal';
  }

  get current(): DisplayMode {
    return this.mode;
  }

  onChange(listener: (mode: DisplayMode) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Shipping tells whether its last call reached the platform. */
  setReachable(reachable: boolean): void {
    if (reachable) this.unreachableSince = null;
    else if (this.unreachableSince === null) this.unreachableSince = this.steadyNow();
  }

  private steadyNow(): number {
    return this.options.monotonic ? this.options.monotonic() : this.options.clock.now().getTime();
  }

  /** Computes the mode from the inputs; a change is logged as one `mode_change` record. */
  update(inputs: ModeInputs): DisplayMode {
    const now = this.options.clock.now();
    const waitingForClock = this.options.clockTrust?.() === 'implausible';
    const offline =
      waitingForClock ||
      (this.unreachableSince !== null &&
        this.steadyNow() - this.unreachableSince >= this.options.offlineAfterMs);
    const next: DisplayMode =
      inputs.screenPower === 'off'
        ? 'screen_off'
        : inputs.emergencyPlayable
          ? 'emergency'
          : offline
            ? 'offline'
            : 'normal';
    if (next === this.mode) return next;
    const from = this.mode;
    this.mode = next;
    const detail = { from, to: next, ...(next === 'offline' && waitingForClock ? { reason: 'clock' } : {}) };
    // The record and the remembered mode change together, so a restart neither repeats nor loses it.
    this.options.log.inTransaction(() => {
      this.options.log.appendStatus({ kind: 'mode_change', at: now, detail });
      this.options.state.set(MODE_KEY, next);
    });
    this.options.logger.info(detail, 'display mode changed');
    for (const listener of this.listeners) listener(next);
    return next;
  }
}
