/**
 * The contract between the main process and the renderer page, carried by the preload bridge
 * (`window.player`). Shared by main.ts, preload.ts and renderer/renderer.ts; types only.
 */

/** Main → renderer: show this file now. */
export interface PlayCommand {
  playId: string;
  /** URL of the media file (file:// in the player). */
  url: string;
  kind: 'image' | 'video';
  /** Images: how long to show. Videos: null (play to the real end) or the expected length. */
  durationMs: number | null;
}

/** Renderer → main: what really happened on screen. */
export type PlayerReport =
  | { type: 'playing'; playId: string }
  | { type: 'ended'; playId: string; interrupted: boolean }
  | { type: 'error'; playId: string; reason: string };

/** What the preload exposes to the page as `window.player` (contextIsolation on, nodeIntegration off). */
export interface PlayerBridge {
  onPlay(listener: (command: PlayCommand) => void): void;
  onStop(listener: (playId: string) => void): void;
  report(report: PlayerReport): void;
}

export const CHANNEL_PLAY = 'player:play';
export const CHANNEL_STOP = 'player:stop';
export const CHANNEL_REPORT = 'player:report';
