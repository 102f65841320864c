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

/** A clock corrected by an offset (ms) learnt from the platform, bounded by `maxOffsetMs`. */
export class CorrectedClock implements Clock {
  private offsetMs = 0;
  private readonly monotonic: MonotonicClock;

  constructor(
    private readonly base: Clock,
    readonly maxOffsetMs: number,
    initialOffsetMs = 0,
    private readonly onOffsetChange?: (offsetMs: number) => void,
    options: { monotonic?: MonotonicClock } = {},
  ) {
    this.offsetMs = Math.abs(initialOffsetMs) <= maxOffsetMs ? initialOffsetMs : 0;
    this.monotonic = options.monotonic ?? systemMonotonic;
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
    if (Math.abs(observed) > this.maxOffsetMs) return false;
    if (Math.abs(observed - this.offsetMs) <= 1500) return true;
    this.offsetMs = Math.round(observed);
    this.onOffsetChange?.(this.offsetMs);
    return true;
  }
}
