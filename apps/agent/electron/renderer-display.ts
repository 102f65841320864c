import { pathToFileURL } from 'node:url';
import type { Clock, Display, PlayReport, PlayRequest } from '../src/index.js';
import { CHANNEL_PLAY, CHANNEL_STOP, type PlayCommand, type PlayerReport } from './bridge.js';

/** Where main sends commands (a BrowserWindow's webContents). */
export interface CommandSink {
  send(channel: string, ...args: unknown[]): void;
}

interface Pending {
  request: PlayRequest;
  start: Date | null;
  resolve: (report: PlayReport) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** A play that never starts or never ends within this margin past its expected length is given up. */
const MARGIN_MS = 30_000;

/**
 * How much longer than asked an image stays on screen. Main stamps a play when the renderer's reports arrive, and
 * the first may travel slower than the last (a busy main loop): the image is held this much longer so that the
 * stamps still span at least the length asked for, which the platform's minimum (1000 ms) may equal.
 */
export const IMAGE_HOLD_MARGIN_MS = 20;

/**
 * The agent's Display, implemented by the renderer page: main sends a play command, the page reports
 * `playing` when the media is really on screen and `ended` when it left it; main stamps both with the agent's
 * clock, which the agent hands over when it is created (`useClock`): the board's own clock may be minutes off.
 * Only then is a play logged.
 */
export class RendererDisplay implements Display {
  private readonly pending = new Map<string, Pending>();
  private clock: Clock | null;

  constructor(
    private readonly sink: CommandSink,
    clock?: Clock,
  ) {
    this.clock = clock ?? null;
  }

  useClock(clock: Clock): void {
    this.clock = clock;
  }

  play(request: PlayRequest, signal: AbortSignal): Promise<PlayReport> {
    if (this.clock === null) {
      // Not attached to an agent: no clock to stamp a play with, so nothing is shown that could not be logged.
      return Promise.resolve({ outcome: 'failed', reason: 'the display has no clock' });
    }
    return new Promise<PlayReport>((resolve) => {
      const expected = request.durationMs ?? 0;
      const timer = setTimeout(
        () => this.finish(request.playId, { outcome: 'failed', reason: 'no report from the renderer' }),
        expected + MARGIN_MS,
      );
      this.pending.set(request.playId, { request, start: null, resolve, timer });
      const command: PlayCommand = {
        playId: request.playId,
        // The hash in the URL: Chromium keeps what it loaded by URL, so a file replaced by another approved one at
        // the same path would otherwise show the old bytes under the new hash. A file URL's query names no file.
        url: `${pathToFileURL(request.path).href}?sha256=${request.sha256}`,
        kind: request.kind,
        durationMs:
          request.kind === 'image' && request.durationMs !== null
            ? request.durationMs + IMAGE_HOLD_MARGIN_MS
            : null,
      };
      signal.addEventListener('abort', () => this.sink.send(CHANNEL_STOP, request.playId), { once: true });
      this.sink.send(CHANNEL_PLAY, command);
    });
  }

  /** Called by main for each report from the renderer (already checked to come from our window). */
  onReport(report: PlayerReport): void {
    const pending = this.pending.get(report.playId);
    if (!pending || this.clock === null) return;
    const now = this.clock.now();
    if (report.type === 'playing') {
      pending.start ??= now;
      // A video's real length is only known at its end; extend the watchdog while it plays.
      clearTimeout(pending.timer);
      pending.timer = setTimeout(
        () => this.finish(report.playId, { outcome: 'failed', reason: 'no end reported' }),
        (pending.request.durationMs ?? 0) * 2 + MARGIN_MS,
      );
    } else if (report.type === 'ended') {
      this.finish(
        report.playId,
        pending.start
          ? { outcome: 'played', start: pending.start, end: now, interrupted: report.interrupted }
          : { outcome: 'failed', reason: 'ended without having started' },
      );
    } else {
      this.finish(report.playId, { outcome: 'failed', reason: report.reason });
    }
  }

  private finish(playId: string, report: PlayReport): void {
    const pending = this.pending.get(playId);
    if (!pending) return;
    clearTimeout(pending.timer);
    this.pending.delete(playId);
    pending.resolve(report);
  }
}

export function isPlayerReport(value: unknown): value is PlayerReport {
  if (typeof value !== 'object' || value === null) return false;
  const report = value as Record<string, unknown>;
  if (typeof report['playId'] !== 'string') return false;
  switch (report['type']) {
    case 'playing':
      return true;
    case 'ended':
      return typeof report['interrupted'] === 'boolean';
    case 'error':
      return typeof report['reason'] === 'string';
    default:
      return false;
  }
}
