import { randomUUID } from 'node:crypto';
import type { Clock, MonotonicClock, Sleep } from '../clock.js';
import { CorrectedClock, realSleep } from '../clock.js';
import type { Hardware } from '../hardware/hardware.js';
import type { PlayLog } from '../log/play-log.js';
import type { ScreenPower } from '../log/records.js';
import type { Logger } from '../logger.js';
import type { MediaItem, MediaLibrary } from '../media/library.js';
import type { Display, PlayReport } from './display.js';
import type { ModeTracker } from './mode.js';

export interface SchedulerOptions {
  library: MediaLibrary;
  display: Display;
  hardware: Hardware;
  log: PlayLog;
  modes: ModeTracker;
  clock: Clock;
  /**
   * Steady time (ms) to measure how long a play really lasted when the clock was corrected during it.
   * Without one, the wall clock stands in (no correction can then be told from a play's length).
   */
  monotonic?: MonotonicClock;
  structure: string;
  /** How long an image stays on screen. */
  imageDurationMs: number;
  logger: Logger;
  sleep?: Sleep;
  /** Wait when nothing is playable, or after a play failed, before looking again (a change wakes it). */
  idleMs?: number;
}

export interface SchedulerStatus {
  playing: { relativePath: string; playId: string } | null;
  plays: number;
  failures: number;
}

/**
 * The playback loop: plays the playable media in turn (images for the configured duration, videos for their
 * length), only emergency content while there is any, gov content in the rotation with the rest. A file that
 * stops being playable is taken off the screen at once. A play is logged only when the display reports it
 * really started and ended.
 */
export class PlaybackScheduler {
  private cursor: string | null = null;
  private playing: SchedulerStatus['playing'] = null;
  private plays = 0;
  private failures = 0;
  private wakeController: AbortController | null = null;
  private readonly sleep: Sleep;

  constructor(private readonly options: SchedulerOptions) {
    this.sleep = options.sleep ?? realSleep;
  }

  status(): SchedulerStatus {
    return { playing: this.playing, plays: this.plays, failures: this.failures };
  }

  /** Re-evaluates the mode now (a hardware or reachability change). */
  refreshMode(): void {
    const items = this.options.library.playable();
    this.options.modes.update({
      screenPower: this.options.hardware.screenPower(),
      emergencyPlayable: items.some((item) => item.slot === 'emergency'),
    });
  }

  async run(signal: AbortSignal): Promise<void> {
    const { library, hardware } = this.options;
    const offLibrary = library.onChange(() => {
      this.refreshMode();
      this.wakeController?.abort();
    });
    const offPower = hardware.onScreenPowerChange(() => this.refreshMode());
    try {
      while (!signal.aborted) {
        // Nothing may end this loop but the stop signal: a screen that stops playing until someone restarts
        // the player is the worst failure a player can have. An unexpected error is logged, then a pause.
        try {
          await this.step(signal);
        } catch (error) {
          this.failures++;
          this.options.logger.error({ err: error }, 'playback step failed; going on after a pause');
          await this.idle(signal);
        }
      }
    } finally {
      offLibrary();
      offPower();
    }
  }

  private async step(signal: AbortSignal): Promise<void> {
    this.refreshMode();
    const item = this.next();
    if (!item) {
      await this.idle(signal);
      return;
    }
    const report = await this.playOne(item, signal);
    if (report.outcome === 'failed') {
      this.failures++;
      this.options.logger.warn({ file: item.relativePath, reason: report.reason }, 'display could not play');
      await this.idle(signal);
    }
  }

  /** The next item of the rotation after the cursor. */
  private next(): MediaItem | null {
    const items = this.options.library.playable();
    const emergency = items.filter((item) => item.slot === 'emergency');
    const rotation = emergency.length > 0 ? emergency : items;
    if (rotation.length === 0) return null;
    // Round robin by path: the first item after the one played last, wrapping around.
    const found = this.cursor === null ? 0 : rotation.findIndex((item) => item.relativePath > this.cursor!);
    const index = found < 0 ? 0 : found;
    const item = rotation[index]!;
    this.cursor = item.relativePath;
    return item;
  }

  private async playOne(item: MediaItem, outer: AbortSignal): Promise<PlayReport> {
    const { library, display, hardware, log, clock } = this.options;
    const controller = new AbortController();
    const abort = () => controller.abort();
    // An aborted signal never fires 'abort' again: a listener added now would wait for nothing.
    if (outer.aborted) controller.abort();
    else outer.addEventListener('abort', abort, { once: true });
    const offChange = library.onChange((items) => {
      const stillPlayable = library.isPlayable(item.relativePath, item.sha256);
      const emergencyArrived = item.slot !== 'emergency' && items.some((other) => other.slot === 'emergency');
      if (!stillPlayable || emergencyArrived) controller.abort();
    });
    const playId = randomUUID();
    const powerAtStart = hardware.screenPower();
    this.playing = { relativePath: item.relativePath, playId };
    const monotonic = this.options.monotonic ?? (() => clock.now().getTime());
    // The agent's own corrections are known to the millisecond; only a step of the board clock is measured.
    const offsetMs = () => (clock instanceof CorrectedClock ? clock.offset : 0);
    const before = { clockMs: clock.now().getTime(), monoMs: monotonic(), offsetMs: offsetMs() };
    let report: PlayReport;
    try {
      report = await display.play(
        {
          playId,
          path: item.path,
          relativePath: item.relativePath,
          kind: item.kind,
          sha256: item.sha256,
          durationMs: item.kind === 'image' ? this.options.imageDurationMs : item.durationMs,
        },
        controller.signal,
      );
    } catch (error) {
      report = { outcome: 'failed', reason: (error as Error).message };
    } finally {
      outer.removeEventListener('abort', abort);
      offChange();
      this.playing = null;
    }
    if (report.outcome === 'played') {
      const after = { clockMs: clock.now().getTime(), monoMs: monotonic(), offsetMs: offsetMs() };
      const times = playTimes(report, before, after);
      if (times.clockStepMs !== null) {
        this.options.logger.info(
          { play_id: playId, clock_step_ms: times.clockStepMs, duration_ms: times.durationMs },
          'clock corrected during a play: its times were derived from its steady length',
        );
      }
      const powerAtEnd = hardware.screenPower();
      const power: ScreenPower = powerAtStart === powerAtEnd ? powerAtStart : 'unknown';
      const detail = {
        ...(report.interrupted ? { interrupted: true } : {}),
        ...(times.clockStepMs !== null ? { clock_step_ms: times.clockStepMs } : {}),
      };
      try {
        log.appendPlay(
          {
            playId,
            ...(item.slot ? { slot: item.slot } : { approvalNumber: item.approvalNumber }),
            mediaSha256: item.sha256,
            start: times.start,
            end: times.end,
            structure: this.options.structure,
            screenPower: power,
            ...(Object.keys(detail).length > 0 ? { detail } : {}),
          },
          new Date(after.clockMs),
        );
      } catch (error) {
        // The play was shown but cannot be logged (disk full, a broken record): say so loudly, go on playing.
        this.options.logger.error(
          { err: error, play_id: playId, file: item.relativePath },
          'a play was shown but could not be logged',
        );
        return { outcome: 'failed', reason: `play not logged: ${(error as Error).message}` };
      }
      this.plays++;
    }
    return report;
  }

  private async idle(signal: AbortSignal): Promise<void> {
    // Stopping while a play failed (or just ended): return at once. A listener added to an aborted signal
    // never fires, so the wait below would last its whole length (for ever with a virtual clock at shutdown).
    if (signal.aborted) return;
    const controller = new AbortController();
    const abort = () => controller.abort();
    signal.addEventListener('abort', abort, { once: true });
    this.wakeController = controller;
    try {
      await this.sleep(this.options.idleMs ?? 1000, controller.signal);
    } finally {
      signal.removeEventListener('abort', abort);
      if (this.wakeController === controller) this.wakeController = null;
    }
  }
}

/** Clock moves within this are not corrections (the platform's Date header has one-second resolution). */
const CLOCK_STEP_TOLERANCE_MS = 1000;

export interface PlayTimes {
  start: Date;
  end: Date;
  durationMs: number;
  /** How far the wall clock was set (corrected, or the board clock jumped) during the play; null if not. */
  clockStepMs: number | null;
}

/**
 * The times to log for a play the display reported, in the time of the wall clock as it reads when the play is
 * logged. The display stamps start and end with the agent's wall clock, which the agent itself corrects from the
 * platform's Date header (and which the board may set), so a correction during the play, or between the
 * display's stamps and its report, puts the stamps in different times: end - start wrong, even negative, or both
 * stamps ten minutes ahead of the clock the record is logged by. The rule:
 * - the step is how much the wall clock moved between `before` and `after` beyond the steady (monotonic) time
 *   that passed: the agent's own correction (`offsetMs`, exact), plus a move of the board clock itself as
 *   measured, when more than {@link CLOCK_STEP_TOLERANCE_MS} (less is the reading's own error: wall readings are
 *   whole milliseconds, so a measured step is off by up to one, which would go into the length of a play
 *   straddling it: 999 ms for a 1000 ms play, under the platform's minimum); within the tolerance there was
 *   no step: the reported times stand as they are;
 * - otherwise each stamp is placed on the side of the step it was read on: the start near `before` as read
 *   before the step (`before.clockMs`) or after it (`before.clockMs + step`), the end near `after` as read after
 *   the step (`after.clockMs`) or before it (`after.clockMs - step`), whichever is nearer; a stamp read before the
 *   step is moved by the step;
 * - the length is then end - start, unless that does not fit the steady time the play took (negative, or
 *   longer): then the steady time itself, and the start is end - length;
 * - never negative, never longer than the steady time the play took.
 */
export function playTimes(
  reported: { start: Date; end: Date },
  before: { clockMs: number; monoMs: number; offsetMs?: number },
  after: { clockMs: number; monoMs: number; offsetMs?: number },
): PlayTimes {
  const steadyMs = Math.max(0, after.monoMs - before.monoMs);
  const correctionMs = (after.offsetMs ?? 0) - (before.offsetMs ?? 0);
  const boardStepMs = Math.round(after.clockMs - before.clockMs - steadyMs - correctionMs);
  const stepMs = correctionMs + (Math.abs(boardStepMs) > CLOCK_STEP_TOLERANCE_MS ? boardStepMs : 0);
  const stepped = Math.abs(stepMs) > CLOCK_STEP_TOLERANCE_MS;
  const clockStepMs = stepped ? stepMs : null;
  const longestMs = Math.round(steadyMs) + CLOCK_STEP_TOLERANCE_MS;
  const fits = (ms: number) => ms >= 0 && ms <= longestMs;
  let startMs = reported.start.getTime();
  let endMs = reported.end.getTime();
  if (stepped) {
    const startBeforeStep =
      Math.abs(startMs - before.clockMs) <= Math.abs(startMs - (before.clockMs + stepMs));
    const endBeforeStep = Math.abs(endMs - (after.clockMs - stepMs)) < Math.abs(endMs - after.clockMs);
    if (startBeforeStep) startMs += stepMs;
    if (endBeforeStep) endMs += stepMs;
  }
  const lengthMs = endMs - startMs;
  if (fits(lengthMs)) {
    return { start: new Date(startMs), end: new Date(endMs), durationMs: lengthMs, clockStepMs };
  }
  const durationMs = Math.max(0, Math.min(Math.round(steadyMs), longestMs));
  return { start: new Date(endMs - durationMs), end: new Date(endMs), durationMs, clockStepMs };
}
