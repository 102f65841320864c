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

/**
 * The `Date` header has one-second resolution: offsets read from two headers within this much of each other
 * (plus half of each request's round trip) are the same offset.
 */
const HEADER_RESOLUTION_MS = 1500;

/** A Date header that would have moved a synced clock, held until a later request confirms it. */
interface HeldJump {
  offsetMs: number;
  /** Board clock (ms) when its answer came: a confirming request is sent after it. */
  receivedAtMs: number;
  roundTripMs: number;
}

/** A clock corrected by an offset (ms) learnt from the platform, bounded by `maxOffsetMs`. */
export class CorrectedClock implements Clock {
  private offsetMs = 0;
  private readonly monotonic: MonotonicClock;
  /** board - steady at the last accepted Date header; null before the first in this run. */
  private anchorMs: number | null = null;
  private refusedAtMs: number | null = null;
  private held: HeldJump | null = null;
  private readonly syncListeners = new Set<() => void>();
  private readonly notBefore: () => Date | null;
  private readonly onHeldChange: (heldOffsetMs: number | null) => void;
  private readonly onRefusedChange: (refusedOffsetMs: number | null) => void;
  /** The offset the last refused Date header showed, until a header is taken; null if none. */
  private refusedOffsetMs: number | null = null;

  constructor(
    private readonly base: Clock,
    readonly maxOffsetMs: number,
    initialOffsetMs = 0,
    private readonly onOffsetChange?: (offsetMs: number) => void,
    options: {
      monotonic?: MonotonicClock;
      /** A further lower bound of a plausible clock (the device certificate's notBefore). */
      notBefore?: () => Date | null;
      /** Called when a jump is held (its offset) and when it is taken or dropped (null): `agent status` shows it. */
      onHeldChange?: (heldOffsetMs: number | null) => void;
      /**
       * Called when a Date header beyond the bound is refused (the offset it showed, when it differs by more than a
       * minute from the one last reported) and when a header is taken again (null): `agent status` shows it.
       */
      onRefusedChange?: (refusedOffsetMs: number | null) => void;
    } = {},
  ) {
    this.offsetMs = Math.abs(initialOffsetMs) <= maxOffsetMs ? initialOffsetMs : 0;
    this.monotonic = options.monotonic ?? systemMonotonic;
    this.notBefore = options.notBefore ?? (() => null);
    this.onHeldChange = options.onHeldChange ?? (() => {});
    this.onRefusedChange = options.onRefusedChange ?? (() => {});
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

  /**
   * The offset (platform minus board clock) the last Date header refused as beyond the bound showed, until a header
   * is taken; null if none. A board clock a month off is no clock the agent may correct on its own (the bound keeps
   * a broken server from moving it far): it plays, judges approval dates and stamps records by that wrong day, so
   * someone must set it.
   */
  get refusedOffset(): number | null {
    return this.refusedOffsetMs;
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

  /** The offset a Date header showed while synced, not yet confirmed by a later request; null if none. */
  get heldOffset(): number | null {
    return this.held?.offsetMs ?? null;
  }

  /**
   * Learns the offset from a server `Date` header read at `receivedAt` (base clock) for a request sent at
   * `sentAt` (base clock). The header has one-second resolution, so differences within ±1.5 s are ignored;
   * offsets beyond the bound are refused so a broken server cannot move the agent's clock far.
   *
   * Not synced (the first header of this run, or the first since the board clock was set): the header is taken
   * at once, there is no better time. Synced: a header that would move the clock further is one sample against
   * the offset every earlier header agreed on (an answer made before the server's clock was stepped and read
   * after, a proxy's cached answer): it is held, and taken only when a later request (sent after its answer came)
   * shows the same offset; a later header that agrees with the clock as it is drops it. A slow answer tells the
   * time only to within half its round trip: while synced, it moves the clock only beyond that.
   *
   * Returns true when the clock now agrees with the header (taken, or already within its resolution); false when
   * the header is unreadable, beyond the bound, or a jump held for confirmation.
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
      if (this.refusedOffsetMs === null || Math.abs(observed - this.refusedOffsetMs) > 60_000) {
        this.refusedOffsetMs = Math.round(observed);
        this.onRefusedChange(this.refusedOffsetMs);
      }
      return false;
    }
    if (this.refusedOffsetMs !== null) {
      this.refusedOffsetMs = null;
      this.onRefusedChange(null);
    }
    const roundTripMs = Math.max(0, receivedAt.getTime() - sentAt.getTime());
    const wasSynced = this.synced;
    // The server may have stamped its answer anywhere in the round trip: a slow answer agrees with every offset
    // within half of it, and is no jump.
    if (wasSynced && Math.abs(observed - this.offsetMs) > HEADER_RESOLUTION_MS + roundTripMs / 2) {
      const held = this.held;
      // The same answer seen twice (the HTTP client and the shipper both read it), or a request that was under
      // way while the held one was answered, confirms nothing: only a request sent after that answer can.
      if (held && sentAt.getTime() <= held.receivedAtMs) return false;
      const confirmed =
        held !== null &&
        Math.abs(observed - held.offsetMs) <= HEADER_RESOLUTION_MS + (held.roundTripMs + roundTripMs) / 2;
      if (!confirmed) {
        this.held = { offsetMs: Math.round(observed), receivedAtMs: receivedAt.getTime(), roundTripMs };
        this.onHeldChange(this.held.offsetMs);
        return false;
      }
    }
    if (this.held) {
      this.held = null;
      this.onHeldChange(null);
    }
    this.anchorMs = this.base.now().getTime() - this.monotonic();
    if (Math.abs(observed - this.offsetMs) > HEADER_RESOLUTION_MS + (wasSynced ? roundTripMs / 2 : 0)) {
      this.offsetMs = Math.round(observed);
      this.onOffsetChange?.(this.offsetMs);
    }
    if (!wasSynced) {
      for (const listener of [...this.syncListeners]) listener();
    }
    return true;
  }
}
