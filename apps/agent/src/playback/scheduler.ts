import { randomUUID } from 'node:crypto';
import type { Clock, Sleep } from '../clock.js';
import { realSleep } from '../clock.js';
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
        this.refreshMode();
        const item = this.next();
        if (!item) {
          await this.idle(signal);
          continue;
        }
        const report = await this.playOne(item, signal);
        if (report.outcome === 'failed') {
          this.failures++;
          this.options.logger.warn(
            { file: item.relativePath, reason: report.reason },
            'display could not play',
          );
          await this.idle(signal);
        }
      }
    } finally {
      offLibrary();
      offPower();
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
      const powerAtEnd = hardware.screenPower();
      const power: ScreenPower = powerAtStart === powerAtEnd ? powerAtStart : 'unknown';
      log.appendPlay(
        {
          playId,
          ...(item.slot ? { slot: item.slot } : { approvalNumber: item.approvalNumber }),
          mediaSha256: item.sha256,
          start: report.start,
          end: report.end,
          structure: this.options.structure,
          screenPower: power,
          ...(report.interrupted ? { detail: { interrupted: true } } : {}),
        },
        clock.now(),
      );
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
