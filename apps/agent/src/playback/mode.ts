import type { Clock, ClockTrust } from '../clock.js';
import type { AgentState } from '../log/agent-state.js';
import type { PlayLog } from '../log/play-log.js';
import type { ScreenPower } from '../log/records.js';
import type { Logger } from '../logger.js';
import type { DiskState } from '../storage/disk.js';

/**
 * What the player is showing, reported by `mode_change` records (spec record kinds). One mode at a time,
 * by precedence:
 * - `screen_off`: the hardware reports the screen powered off (plays go on and carry screen.power "off");
 * - `emergency`: emergency slot content is playable and is all that plays;
 * - `disk_full`: free space is below `disk.hard_free_bytes` (or a play's record could not be written): content whose
 *   plays must be proven stops, only authority slot content (gov) plays, else nothing;
 * - `offline`: the platform has not been reachable for `offlineAfterMs` (plays go on and queue on disk), or
 *   the clock is implausible (a board in 1970: nothing plays until it is set; the record says `reason: clock`);
 * - `normal`.
 *
 * The disk's state (storage/disk.ts) is reported with them: a `mode_change` is also written when it changes with the
 * mode staying as it is (`from` = `to`), and every `mode_change` written while it is not `ok`, or that reports its
 * change, carries `detail.storage: {state, free_bytes}`. The platform keeps the detail as sent and shows the newest
 * on the fleet list (`storage`).
 */
export type DisplayMode = 'normal' | 'emergency' | 'disk_full' | 'offline' | 'screen_off';

const MODE_KEY = 'display.mode';
/** The disk state last reported in a mode_change record. */
const STORAGE_KEY = 'display.storage';

export interface ModeInputs {
  screenPower: ScreenPower;
  emergencyPlayable: boolean;
  /** The disk's state now (none: not watched, taken as ok and never reported). */
  storage?: { state: DiskState; freeBytes: number | null };
}

export class ModeTracker {
  private mode: DisplayMode;
  private storage: DiskState;
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
    this.storage = options.state.get<DiskState>(STORAGE_KEY) ?? 'ok';
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
    const storage = inputs.storage ?? null;
    const storageState: DiskState = storage?.state ?? 'ok';
    const next: DisplayMode =
      inputs.screenPower === 'off'
        ? 'screen_off'
        : inputs.emergencyPlayable
          ? 'emergency'
          : storageState === 'full'
            ? 'disk_full'
            : offline
              ? 'offline'
              : 'normal';
    const storageChanged = storage !== null && storageState !== this.storage;
    if (next === this.mode && !storageChanged) return next;
    const from = this.mode;
    const detail = {
      from,
      to: next,
      ...(next === 'offline' && waitingForClock ? { reason: 'clock' } : {}),
      ...(storage && (storageChanged || storageState !== 'ok')
        ? { storage: { state: storageState, free_bytes: storage.freeBytes } }
        : {}),
    };
    // The record and the remembered mode change together, so a restart neither repeats nor loses it. Remembered in
    // memory only once written: a write refused by a full disk is tried again at the next update.
    this.options.log.inTransaction(() => {
      this.options.log.appendStatus({ kind: 'mode_change', at: now, detail });
      this.options.state.set(MODE_KEY, next);
      if (storageChanged) this.options.state.set(STORAGE_KEY, storageState);
    });
    this.mode = next;
    if (storageChanged) this.storage = storageState;
    this.options.logger.info(detail, next === from ? 'disk state changed' : 'display mode changed');
    if (next !== from) for (const listener of this.listeners) listener(next);
    return next;
  }
}
