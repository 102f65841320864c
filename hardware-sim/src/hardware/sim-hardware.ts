import type { Clock, Hardware, ScreenPower, TamperState } from '@ooh/agent';

export interface SimHardwareOptions {
  /** Board clock minus true (virtual) time, ms: a player whose clock is 10 minutes fast has +600 000. */
  skewMs?: number;
  screen?: ScreenPower;
  tamper?: TamperState;
}

/**
 * The agent's hardware interface (DESIGN.md §9: "screen power, tamper switch, clock"), simulated: a board clock
 * that reads virtual time plus a settable skew (and can jump), a screen that can be switched on and off, and a
 * tamper switch. Changes are announced to the agent exactly as a board driver would.
 */
export class SimHardware implements Hardware {
  readonly clock: Clock;
  private skew: number;
  private power: ScreenPower;
  private tamperState: TamperState;
  private readonly powerListeners = new Set<(power: ScreenPower) => void>();
  private readonly tamperListeners = new Set<(state: TamperState) => void>();

  constructor(
    private readonly trueNow: () => number,
    options: SimHardwareOptions = {},
  ) {
    this.skew = options.skewMs ?? 0;
    this.power = options.screen ?? 'on';
    this.tamperState = options.tamper ?? 'closed';
    this.clock = { now: () => new Date(this.trueNow() + this.skew) };
  }

  /** Steady time: true (virtual) time, which the board clock's skew and jumps never move. */
  monotonicMs(): number {
    return this.trueNow();
  }

  get skewMs(): number {
    return this.skew;
  }

  /** Sets the board clock's error against true time. */
  setSkew(ms: number): void {
    this.skew = ms;
  }

  /** The board clock jumps by `ms` (an RTC reset, a bad NTP answer, a technician setting the time). */
  jump(ms: number): void {
    this.skew += ms;
  }

  /** Sets the board clock to read `instant` now. */
  setBoardTime(instant: Date): void {
    this.skew = instant.getTime() - this.trueNow();
  }

  screenPower(): ScreenPower {
    return this.power;
  }

  tamper(): TamperState {
    return this.tamperState;
  }

  setScreenPower(power: ScreenPower): void {
    if (power === this.power) return;
    this.power = power;
    for (const listener of [...this.powerListeners]) listener(power);
  }

  setTamper(state: TamperState): void {
    if (state === this.tamperState) return;
    this.tamperState = state;
    for (const listener of [...this.tamperListeners]) listener(state);
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
