/** Every time-dependent rule reads time from an injected clock (STYLE.md practice 5). */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/**
 * The test clock: set to an instant, it then runs on at real speed from there
 * unless frozen. Only ever used when the platform starts with --test-clock.
 */
export class TestClock implements Clock {
  private base: number;
  private setAt: number;
  private frozen: boolean;

  constructor(start: Date = new Date(), options: { frozen?: boolean } = {}) {
    this.base = start.getTime();
    this.setAt = performance.now();
    this.frozen = options.frozen ?? false;
  }

  now(): Date {
    return new Date(this.frozen ? this.base : this.base + (performance.now() - this.setAt));
  }

  set(instant: Date, options: { frozen?: boolean } = {}): void {
    this.base = instant.getTime();
    this.setAt = performance.now();
    if (options.frozen !== undefined) this.frozen = options.frozen;
  }

  advance(ms: number): void {
    this.set(new Date(this.now().getTime() + ms));
  }

  get isFrozen(): boolean {
    return this.frozen;
  }
}
