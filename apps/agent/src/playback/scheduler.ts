import { randomUUID } from 'node:crypto';
import type { Clock, MonotonicClock, Sleep } from '../clock.js';
import { CorrectedClock, realSleep } from '../clock.js';
import type { Hardware } from '../hardware/hardware.js';
import { AgentError } from '../errors.js';
import type { PlayLog } from '../log/play-log.js';
import { StatusRecorder } from '../log/status-recorder.js';
import type { PlayInput, ScreenPower } from '../log/records.js';
import type { Logger } from '../logger.js';
import type { MediaItem, MediaLibrary } from '../media/library.js';
import type { DiskState } from '../storage/disk.js';
import type { Display, PlayReport } from './display.js';
import type { ModeInputs, ModeTracker } from './mode.js';

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
  /** The disk (storage/disk.ts DiskWatch): below its hard threshold only slot content plays. Default: always ok. */
  disk?: PlaybackDisk;
  /**
   * Writes the status records playback makes (a reject for a play whose file changed on screen), keeping any the
   * log refuses; the agent shares its own. Default: one of the scheduler's, tried again at every step.
   */
  records?: StatusRecorder;
}

/** What playback needs of the disk watch. */
export interface PlaybackDisk {
  readonly state: DiskState;
  report(): { freeBytes: number | null } | null;
  /** A play's record could not be written for a storage fault: the disk counts as full until one is. */
  noteWriteFailure(what: string): void;
  noteWriteSuccess(): void;
}

export interface SchedulerStatus {
  playing: { relativePath: string; playId: string } | null;
  plays: number;
  failures: number;
  /**
   * Plays shown whose records could not be written yet (the disk), oldest first: written again before anything
   * billable plays. At most one of them is billable (nothing billable starts while one waits).
   */
  unlogged: { playId: string; file: string; since: string }[];
}

/** Slot plays kept in memory at most while the log refuses writes (beyond, the oldest slot ones are dropped). */
const MAX_UNLOGGED = 100;

interface UnloggedPlay {
  input: PlayInput;
  loggedAt: Date;
  file: string;
  since: Date;
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
  /** Plays shown whose records a storage fault kept from being written (see {@link logShownPlay}). */
  private unlogged: UnloggedPlay[] = [];
  /** The mode change that could not be written was reported (once, until one is written). */
  private modeWriteFailing = false;
  private readonly records: StatusRecorder;

  constructor(private readonly options: SchedulerOptions) {
    this.sleep = options.sleep ?? realSleep;
    this.records =
      options.records ??
      new StatusRecorder({
        log: options.log,
        logger: options.logger,
        clock: options.clock,
        ...(options.disk ? { disk: options.disk } : {}),
      });
  }

  status(): SchedulerStatus {
    return {
      playing: this.playing,
      plays: this.plays,
      failures: this.failures,
      unlogged: this.unlogged.map((play) => ({
        playId: play.input.playId,
        file: play.file,
        since: play.since.toISOString(),
      })),
    };
  }

  /**
   * Re-evaluates the mode now (a hardware, reachability or disk change). Never throws: it runs in the listeners of the
   * hardware driver, the shipper, the disk watch and the media library, which must not get the play log's errors (a
   * library listener that threw kept the ones after it, the play's own among them, from hearing of the change). A
   * mode change that cannot be written (the disk) is written at a later step, as in {@link step}.
   */
  refreshMode(): void {
    try {
      this.updateMode(this.modeInputs());
    } catch (error) {
      // Reading the hardware failed: the next step reads it again.
      this.options.logger.warn({ err: error }, 'refreshing the display mode failed');
    }
  }

  /** Updates the mode; a mode_change the log refuses is reported once and tried again at the next update. */
  private updateMode(inputs: ModeInputs): void {
    try {
      this.options.modes.update(inputs);
      this.modeWriteFailing = false;
    } catch (error) {
      // The mode_change could not be written (the disk): playback goes on by the rules of the state it is in (slot
      // content only while the disk is full, emergency content first); the change is written at a later step.
      if (!this.modeWriteFailing) {
        this.options.logger.error(
          { err: error },
          'a mode change could not be written; trying again at each play',
        );
      }
      this.modeWriteFailing = true;
    }
  }

  private modeInputs(): ModeInputs {
    const items = this.options.library.playable();
    const disk = this.options.disk;
    return {
      screenPower: this.options.hardware.screenPower(),
      emergencyPlayable: items.some((item) => item.slot === 'emergency'),
      ...(disk ? { storage: { state: disk.state, freeBytes: disk.report()?.freeBytes ?? null } } : {}),
    };
  }

  /**
   * Whether content whose plays must be proven (an advertiser's approval: billed) may start now: only when its
   * record can be made durable, i.e. the disk is not below its hard threshold and no play shown earlier still waits
   * for its record. Authority slot content (gov, emergency) is never billed and plays regardless.
   */
  private provable(): boolean {
    return this.unlogged.length === 0 && (this.options.disk?.state ?? 'ok') !== 'full';
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
      this.retryUnlogged();
      this.records.flush();
      for (const play of this.unlogged) {
        this.options.logger.error(
          { play_id: play.input.playId, file: play.file },
          'stopping with a play shown whose record could not be written: it is lost',
        );
      }
    }
  }

  private async step(signal: AbortSignal): Promise<void> {
    // A shown play's record first: until it is durable nothing billable starts (see provable).
    this.retryUnlogged();
    this.records.flush();
    this.updateMode(this.modeInputs());
    const item = this.next();
    if (!item) {
      await this.idle(signal);
      return;
    }
    // The display loads the file by path: it must be the file the verdict was reached on. If not, the library has
    // dropped its verdict (it is judged again) and the next step plays something else.
    if (!this.options.library.unchanged(item)) {
      this.options.logger.warn(
        { file: item.relativePath },
        'media file changed since it was verified: not played; judged again',
      );
      return;
    }
    const report = await this.playOne(item, signal);
    if (report.outcome === 'failed') {
      this.failures++;
      this.options.logger.warn({ file: item.relativePath, reason: report.reason }, 'display could not play');
      await this.idle(signal);
    }
  }

  /**
   * The next item of the rotation after the cursor: emergency content alone while there is any; while plays cannot be
   * proven (disk full), slot content alone, and nothing (the display's blank screen) when there is none.
   */
  private next(): MediaItem | null {
    const items = this.options.library.playable();
    const emergency = items.filter((item) => item.slot === 'emergency');
    const rotation =
      emergency.length > 0 ? emergency : this.provable() ? items : items.filter((item) => item.slot !== null);
    if (rotation.length === 0) return null;
    // Round robin by path: the first item after the one played last, wrapping around.
    const found = this.cursor === null ? 0 : rotation.findIndex((item) => item.relativePath > this.cursor!);
    const index = found < 0 ? 0 : found;
    const item = rotation[index]!;
    this.cursor = item.relativePath;
    return item;
  }

  private async playOne(item: MediaItem, outer: AbortSignal): Promise<PlayReport> {
    const { library, display, hardware, clock } = this.options;
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
      if (!library.unchanged(item)) {
        this.rejectChangedPlay(item, playId, times);
        return report;
      }
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
      const input: PlayInput = {
        playId,
        ...(item.slot ? { slot: item.slot } : { approvalNumber: item.approvalNumber }),
        mediaSha256: item.sha256,
        start: times.start,
        end: times.end,
        structure: this.options.structure,
        screenPower: power,
        ...(Object.keys(detail).length > 0 ? { detail } : {}),
      };
      const logged = this.logShownPlay(input, new Date(after.clockMs), item.relativePath);
      if (logged !== null) return { outcome: 'failed', reason: `play not logged: ${logged}` };
    }
    return report;
  }

  /**
   * The file changed (or went) while it was shown: what the screen showed is not known to be the bytes the approval
   * names, so the play is not logged as a play of it (no `play` record with its media_sha256 and approval_number, which
   * the platform would count and bill). It is logged as a HASH_MISMATCH reject, the code of "these bytes are not the
   * approved ones", naming the play and the approval; the detail has no media_sha256, the bytes shown being unknown.
   * The library, told by {@link MediaLibrary.unchanged}, judges the file again and logs its own reject if it is refused.
   */
  private rejectChangedPlay(item: MediaItem, playId: string, times: PlayTimes): void {
    this.options.logger.warn(
      { file: item.relativePath, play_id: playId },
      'media file changed while it was shown: logged as a reject, not as a play',
    );
    this.records.record({
      kind: 'reject',
      at: this.options.clock.now(),
      code: 'HASH_MISMATCH',
      detail: {
        file: item.relativePath,
        reason: 'the file changed while it was shown: the bytes shown are not known to be the approved ones',
        ...(item.slot ? { slot: item.slot } : {}),
        approval_number: item.approvalNumber,
        verified_sha256: item.sha256,
        play_id: playId,
        start: times.start.toISOString(),
        end: times.end.toISOString(),
      },
    });
  }

  /**
   * Logs a play the display showed. A storage fault (the disk full, an I/O error) does not lose it: the record is kept
   * in memory and written again before every later step, and until it is durable no content that must be proven
   * starts (only slot content: see provable), so at most this one play waits for its proof, and only while the
   * process lives. A record the log refuses as invalid (a bug) is reported and dropped: trying again cannot help.
   * Returns null when logged, else why not.
   */
  private logShownPlay(input: PlayInput, loggedAt: Date, file: string): string | null {
    try {
      this.options.log.appendPlay(input, loggedAt);
      this.plays++;
      return null;
    } catch (error) {
      const message = (error as Error).message;
      if (error instanceof AgentError && error.code === 'record_invalid') {
        this.options.logger.error(
          { err: error, play_id: input.playId, file },
          'a play was shown but could not be logged',
        );
        return message;
      }
      this.unlogged.push({ input, loggedAt, file, since: this.options.clock.now() });
      if (this.unlogged.length > MAX_UNLOGGED) {
        // Only slot plays can pile up (nothing billable starts while one waits): the oldest of them go.
        const index = this.unlogged.findIndex((play) => play.input.slot !== undefined);
        const [dropped] = this.unlogged.splice(index < 0 ? 0 : index, 1);
        this.options.logger.error(
          { play_id: dropped!.input.playId, file: dropped!.file },
          'too many plays wait for their records: the oldest slot play is given up',
        );
      }
      this.options.disk?.noteWriteFailure(`play record: ${message}`);
      this.options.logger.error(
        { err: error, play_id: input.playId, file },
        'a play was shown but its record could not be written: kept, written again before anything billable plays',
      );
      return message;
    }
  }

  /** Writes the records of plays shown earlier, oldest first, as far as the log takes them now. */
  private retryUnlogged(): void {
    while (this.unlogged.length > 0) {
      const pending = this.unlogged[0]!;
      try {
        this.options.log.appendPlay(pending.input, pending.loggedAt);
        this.plays++;
      } catch (error) {
        if (!(error instanceof AgentError && error.code === 'record_invalid')) return;
        // Never writable (say, its play_id was logged already): dropped, and nothing was written, so the disk's
        // write failure is not cleared by it.
        this.options.logger.error(
          { err: error, play_id: pending.input.playId },
          'a kept play record is invalid',
        );
        this.unlogged.shift();
        continue;
      }
      this.unlogged.shift();
      this.options.logger.info(
        { play_id: pending.input.playId, file: pending.file, since: pending.since.toISOString() },
        'the record of a play shown earlier is written now',
      );
      if (this.unlogged.length === 0) this.options.disk?.noteWriteSuccess();
    }
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
