import type { Clock, Display, PlayReport, PlayRequest, ScreenPower, Sleep } from '@ooh/agent';

/** A timer firing this much early at most is waited out (more is a clock set back, not a timer). */
const TIMER_SLACK_MS = 50;

/** How long a halted screen waits per sleep (it loops until aborted). */
const HALT_WAIT_MS = 24 * 3_600_000;

/** One play the simulated screen really showed: the simulator's ground truth. */
export interface DisplayedPlay {
  player: string;
  playId: string;
  relativePath: string;
  sha256: string;
  /** As the agent's clock read them (the clock the agent stamps its records with). */
  start: string;
  end: string;
  durationMs: number;
  interrupted: boolean;
  screen: ScreenPower;
}

export interface SimDisplayOptions {
  player: string;
  /** Sleeps on the player's time (virtual in tests); a play lasts its duration on it. */
  sleep: Sleep;
  /** The clock plays are stamped with; the agent's corrected clock once the agent exists. */
  clock: () => Clock;
  screenPower: () => ScreenPower;
  /** Length of a video whose manifest gives none. */
  defaultVideoMs?: number;
  /** Every play shown, as it ends. */
  onPlayed: (play: DisplayedPlay) => void;
}

/**
 * A simulated screen: "plays" a file for its duration on the player's (virtual) clock and reports the instants it
 * observed, as the Electron renderer does on a real player. An abort (the file stopped being playable) ends the
 * play early and the report says so. `failNext` makes the next plays fail (a decode error).
 */
export class SimDisplay implements Display {
  private failures = 0;
  private shown = 0;
  private halted = false;

  constructor(private readonly options: SimDisplayOptions) {}

  /** Plays shown so far. */
  get plays(): number {
    return this.shown;
  }

  failNext(count = 1): void {
    this.failures += count;
  }

  /**
   * New plays wait without showing anything until aborted, and are then reported as not played (the one on screen
   * finishes normally): the end of a run, so that queues can drain while nothing new is logged.
   */
  halt(): void {
    this.halted = true;
  }

  resume(): void {
    this.halted = false;
  }

  async play(request: PlayRequest, signal: AbortSignal): Promise<PlayReport> {
    if (this.halted) {
      while (!signal.aborted && this.halted) await this.options.sleep(HALT_WAIT_MS, signal);
      if (this.halted || signal.aborted)
        return { outcome: 'failed', reason: 'screen halted by the simulator' };
    }
    if (this.failures > 0) {
      this.failures -= 1;
      return { outcome: 'failed', reason: 'simulated decode error' };
    }
    const clock = this.options.clock();
    const start = clock.now();
    const powerAtStart = this.options.screenPower();
    const durationMs = request.durationMs ?? this.options.defaultVideoMs ?? 15_000;
    await this.options.sleep(durationMs, signal);
    let end = clock.now();
    // The whole length on the clock it stamps with: a real-time sleep is a timer, which may fire a millisecond or
    // so early, and a 999 ms play of a 1000 ms image is one the platform refuses as too short. Only such a shortfall
    // is waited out; a board clock set back meanwhile is the agent's to reconcile (its steady clock).
    for (
      let left = durationMs - (end.getTime() - start.getTime());
      left > 0 && left <= TIMER_SLACK_MS && !signal.aborted;
      left = durationMs - (end.getTime() - start.getTime())
    ) {
      await this.options.sleep(left, signal);
      end = clock.now();
    }
    const interrupted = signal.aborted;
    const power = this.options.screenPower() === powerAtStart ? powerAtStart : 'unknown';
    this.shown += 1;
    this.options.onPlayed({
      player: this.options.player,
      playId: request.playId,
      relativePath: request.relativePath,
      sha256: request.sha256,
      start: start.toISOString(),
      end: end.toISOString(),
      durationMs: end.getTime() - start.getTime(),
      interrupted,
      screen: power,
    });
    return { outcome: 'played', start, end, interrupted };
  }
}
