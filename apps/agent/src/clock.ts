/**
 * Time sources. Everything in the agent reads time through a {@link Clock} (STYLE.md: inject the clock);
 * the hardware provides the base clock and {@link CorrectedClock} adds the bounded offset learnt from the
 * platform's `Date` header (DESIGN.md §5: "Responses carry a Date header the agent may use to correct its clock").
 */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/**
 * A steady clock in milliseconds from an arbitrary origin: it never jumps when the wall clock is set
 * (CLOCK_MONOTONIC). Durations are measured on it, never on the wall clock, which the agent itself corrects.
 */
export type MonotonicClock = () => number;

export const systemMonotonic: MonotonicClock = () => performance.now();

/** Waits `ms` or until the signal aborts (resolves either way; never rejects). */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export const realSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(done, Math.max(0, Math.min(ms, 2_147_483_647)));
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * How far the agent trusts its clock:
 * - `synced`: a platform `Date` header was taken in this run, and the board clock has not been set since
 *   (it still keeps step with the steady clock);
 * - `unsynced`: not (or no longer) synced, but plausible: the best guess, used as is and corrected later;
 * - `implausible`: before the earliest instant a correct clock can show (this build's date, the device
 *   certificate's notBefore): a board whose clock was reset (1970). Nothing is judged or stamped by it.
 */
export type ClockTrust = 'synced' | 'unsynced' | 'implausible';

/** No correct clock reads earlier than this: this code did not exist before it. */
export const EARLIEST_PLAUSIBLE = new Date('2025-01-01T00:00:00.000Z');

/**
 * The board clock and the steady clock may drift apart by this much before the board clock counts as set
 * (a step: an NTP jump, an RTC reset, a technician). Both are disciplined together by NTP; only a step
 * (or a suspend, which players do not do) separates them.
 */
const STEP_TOLERANCE_MS = 2000;

/** A clock corrected by an offset (ms) learnt from the platform, bounded by `maxOffsetMs`. */
export class CorrectedClock implements Clock {
  private offsetMs = 0;
  private readonly monotonic: MonotonicClock;
  /** board - steady at the last accepted Date header; null before the first in this run. */
  private anchorMs: number | null = null;
  private refusedAtMs: number | null = null;
  private readonly syncListeners = new Set<() => void>();
  private readonly notBefore: () => Date | null;

  constructor(
    private readonly base: Clock,
    readonly maxOffsetMs: number,
    initialOffsetMs = 0,
    private readonly onOffsetChange?: (offsetMs: number) => void,
    options: {
      monotonic?: MonotonicClock;
      /** A further lower bound of a plausible clock (the device certificate's notBefore). */
      notBefore?: () => Date | null;
    } = {},
  ) {
    this.offsetMs = Math.abs(initialOffsetMs) <= maxOffsetMs ? initialOffsetMs : 0;
    this.monotonic = options.monotonic ?? systemMonotonic;
    this.notBefore = options.notBefore ?? (() => null);
  }

  /** The steady clock beside this one (the board's, or `performance.now()`). */
  monotonicMs(): number {
    return this.monotonic();
  }

  now(): Date {
    return new Date(this.base.now().getTime() + this.offsetMs);
  }

  /** The uncorrected board clock (for measuring a request against the server's Date header). */
  baseNow(): Date {
    return this.base.now();
  }

  get offset(): number {
    return this.offsetMs;
  }

  /** A platform Date header was taken in this run and the board clock has not been set since. */
  get synced(): boolean {
    if (this.anchorMs === null) return false;
    const drift = this.base.now().getTime() - this.monotonic() - this.anchorMs;
    return Math.abs(drift) <= STEP_TOLERANCE_MS;
  }

  /** Steady time (ms) of the last Date header refused as beyond the bound; null if none. */
  get lastRefusedAt(): number | null {
    return this.refusedAtMs;
  }

  /** The earliest instant this clock may plausibly show. */
  earliestPlausible(): Date {
    const certificate = this.notBefore();
    return certificate && certificate.getTime() > EARLIEST_PLAUSIBLE.getTime()
      ? certificate
      : EARLIEST_PLAUSIBLE;
  }

  trust(): ClockTrust {
    if (this.synced) return 'synced';
    return this.now().getTime() < this.earliestPlausible().getTime() ? 'implausible' : 'unsynced';
  }

  /** Called (synchronously) each time the clock becomes synced: a first Date header, or one after a step. */
  onSync(listener: () => void): () => void {
    this.syncListeners.add(listener);
    return () => this.syncListeners.delete(listener);
  }

  /**
   * Learns the offset from a server `Date` header read at `receivedAt` (base clock) for a request sent at
   * `sentAt` (base clock). The header has one-second resolution, so differences within ±1.5 s are ignored;
   * offsets beyond the bound are refused (returns false) so a broken server cannot move the agent's clock far.
   */
  observeServerDate(dateHeader: string | undefined, sentAt: Date, receivedAt: Date): boolean {
    if (!dateHeader) return false;
    const serverMs = Date.parse(dateHeader);
    if (!Number.isFinite(serverMs)) return false;
    // The server stamped the header somewhere between send and receive; take the midpoint, and the header
    // truncates to whole seconds, so add half a second.
    const localMid = (sentAt.getTime() + receivedAt.getTime()) / 2;
    const observed = serverMs + 500 - localMid;
    if (Math.abs(observed) > this.maxOffsetMs) {
      this.refusedAtMs = this.monotonic();
      return false;
    }
    const wasSynced = this.synced;
    this.anchorMs = this.base.now().getTime() - this.monotonic();
    if (Math.abs(observed - this.offsetMs) > 1500) {
      this.offsetMs = Math.round(observed);
      this.onOffsetChange?.(this.offsetMs);
    }
    if (!wasSynced) {
      for (const listener of [...this.syncListeners]) listener();
    }
    return true;
  }
}
