import type { Clock } from '../clock.js';
import type { MediaKind } from '../media/library.js';

export interface PlayRequest {
  playId: string;
  /** Absolute path of the file. */
  path: string;
  relativePath: string;
  kind: MediaKind;
  sha256: string;
  /** Images: how long to show. Videos: the expected length (the display plays to the real end). */
  durationMs: number | null;
}

/**
 * What the display reports about one play. A play is logged only when the display says it really started
 * and ended (`played`), with the instants it observed.
 */
export type PlayReport =
  | { outcome: 'played'; start: Date; end: Date; interrupted: boolean }
  | { outcome: 'failed'; reason: string };

/**
 * The screen: the Electron renderer in a real player (through the main process), a simulated panel in
 * `hardware-sim`, a fake in tests. `play` resolves when the item has ended; aborting `signal` ends it early
 * (the file stopped being playable, or emergency content arrived) and the report says so.
 */
export interface Display {
  play(request: PlayRequest, signal: AbortSignal): Promise<PlayReport>;
  /**
   * The clock a play's start and end are to be read on: the agent's own, corrected from the platform's Date header
   * (a board clock minutes off would otherwise put every play minutes off, and the platform refuses a play over
   * 300 s ahead). The agent calls it once, when it is created, before any play. A display that is handed its clock
   * otherwise need not have it.
   */
  useClock?(clock: Clock): void;
}
