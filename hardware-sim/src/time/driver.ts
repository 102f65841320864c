/**
 * The time driver: moves virtual time for the platform and every group of simulated players together, in steps.
 * Each step first sets the platform's clock, then moves every domain's clock and waits until its players have
 * done what the step woke them for. The platform and the players therefore never disagree by more than one
 * step (beyond the 300 s the spec allows for `ts` when steps are long: a player still busy when the platform's
 * clock moves on may read the next step's time in a `Date` header; the agent holds such a jump until a later
 * answer confirms it, and the driver waits for a busy domain again before it moves the platform's clock).
 */

/** Further waits for a domain still busy at its fallback before time moves on (a stuck loop is counted down by the third). */
const EXTRA_SETTLES = 2;

/** A place where players live with their own copy of virtual time: this process, or a child process. */
export interface TimeDomain {
  readonly name: string;
  /** Moves the domain to `at`, wakes what is due and waits until its players are idle; answers its next deadline. */
  advanceTo(at: number): Promise<DomainIdle>;
}

export interface DomainIdle {
  next: number | null;
  /** Players still busy when the domain stopped waiting (the fallback timeout). */
  awake: string[];
  /** Real milliseconds the domain took to settle. */
  settleMs?: number;
}

/** The platform's clock as the simulator moves it (PUT /api/v1/console/clock, or a test's own clock). */
export interface PlatformClock {
  set(at: Date): Promise<void>;
}

export interface DriverOptions {
  startMs: number;
  platformClock?: PlatformClock | null;
  /** Smallest step: sleeps due within it wake together (default 15 s). */
  minStepMs?: number;
  /** Largest step, even when nothing is due sooner (default 1 h). */
  maxStepMs?: number;
}

export interface DriverStats {
  steps: number;
  /** Steps in which some domain stopped waiting before its players were idle. */
  unsettledSteps: number;
  /** Real milliseconds spent setting the platform's clock, and waiting for the domains. */
  platformMs: number;
  domainsMs: number;
  /** Sum over steps of the slowest domain's own settle time. */
  settleMs: number;
}

export class TimeDriver {
  private current: number;
  private readonly domains = new Map<TimeDomain, number | null>();
  private readonly minStepMs: number;
  private readonly maxStepMs: number;
  private lastPlatformSet: number | null = null;
  readonly stats: DriverStats = { steps: 0, unsettledSteps: 0, platformMs: 0, domainsMs: 0, settleMs: 0 };

  constructor(private readonly options: DriverOptions) {
    this.current = options.startMs;
    this.minStepMs = options.minStepMs ?? 15_000;
    this.maxStepMs = options.maxStepMs ?? 3_600_000;
  }

  now(): number {
    return this.current;
  }

  addDomain(domain: TimeDomain): void {
    this.domains.set(domain, null);
  }

  removeDomain(domain: TimeDomain): void {
    this.domains.delete(domain);
  }

  /** The platform restarted (its test clock starts over): set it again at the next step. */
  forgetPlatformClock(): void {
    this.lastPlatformSet = null;
  }

  /** Sets the platform clock to the current virtual time and lets every domain settle (after setup, faults). */
  async sync(): Promise<void> {
    await this.setPlatform(this.current);
    await this.stepDomains(this.current);
  }

  /** Moves time to `target` in steps; `onStep` runs after each step (progress, scheduled faults). */
  async runUntil(target: number, onStep?: (now: number) => Promise<void> | void): Promise<void> {
    while (this.current < target) {
      const next = this.nextStep(target);
      await this.setPlatform(next);
      this.current = next;
      await this.stepDomains(next);
      this.stats.steps += 1;
      await onStep?.(next);
    }
  }

  /** Moves time by `ms` (see {@link runUntil}). */
  advance(ms: number, onStep?: (now: number) => Promise<void> | void): Promise<void> {
    return this.runUntil(this.current + ms, onStep);
  }

  /**
   * Jumps straight to `at` in one step (the platform and every sleeper see the jump at once): for skipping the
   * months between enrolment and a certificate's last 30 days.
   */
  async jumpTo(at: number): Promise<void> {
    if (at <= this.current) return;
    await this.setPlatform(at);
    this.current = at;
    await this.stepDomains(at);
    this.stats.steps += 1;
  }

  private nextStep(target: number): number {
    let earliest: number | null = null;
    for (const next of this.domains.values()) {
      if (next !== null && (earliest === null || next < earliest)) earliest = next;
    }
    const wanted = earliest ?? this.current + this.maxStepMs;
    const step = Math.min(Math.max(wanted, this.current + this.minStepMs), this.current + this.maxStepMs);
    return Math.min(step, target);
  }

  private async setPlatform(at: number): Promise<void> {
    if (!this.options.platformClock || this.lastPlatformSet === at) return;
    const began = performance.now();
    await this.options.platformClock.set(new Date(at));
    this.lastPlatformSet = at;
    this.stats.platformMs += performance.now() - began;
  }

  private async stepDomains(at: number): Promise<void> {
    const domains = [...this.domains.keys()];
    const began = performance.now();
    const results = await Promise.all(domains.map((domain) => domain.advanceTo(at)));
    // A domain whose players are still busy at its fallback is waited for again, at the same time, before the
    // platform's clock moves on: an answer the platform makes after that reaches a player still in this step,
    // stamped with the next one (an hour on in a test with hour steps). A player stuck short of its loops is
    // counted down by the virtual clock after three such waits, so this ends.
    for (let round = 0; round < EXTRA_SETTLES; round += 1) {
      const busy = results.flatMap((result, i) =>
        result.awake.length > 0 && this.domains.has(domains[i]!) ? [i] : [],
      );
      if (busy.length === 0) break;
      const again = await Promise.all(busy.map((i) => domains[i]!.advanceTo(at)));
      busy.forEach((i, k) => {
        const first = results[i]!;
        const settled = again[k]!;
        results[i] = { ...settled, settleMs: (first.settleMs ?? 0) + (settled.settleMs ?? 0) };
      });
    }
    this.stats.domainsMs += performance.now() - began;
    this.stats.settleMs += Math.max(0, ...results.map((r) => r.settleMs ?? 0));
    let unsettled = false;
    results.forEach((result, i) => {
      const domain = domains[i]!;
      // A domain removed during the step (killed) is not put back.
      if (this.domains.has(domain)) this.domains.set(domain, result.next);
      if (result.awake.length > 0) unsettled = true;
    });
    if (unsettled) this.stats.unsettledSteps += 1;
  }
}
