/**
 * Preload (runs in the renderer's isolated world; contextIsolation on, nodeIntegration off, sandboxed):
 * exposes `window.player` and nothing else. Messages from main are passed on only in their expected shape.
 */
import { contextBridge, ipcRenderer } from 'electron';
import {
  CHANNEL_PLAY,
  CHANNEL_REPORT,
  CHANNEL_STOP,
  type PlayCommand,
  type PlayerBridge,
  type PlayerReport,
} from './bridge.js';

function isPlayCommand(value: unknown): value is PlayCommand {
  if (typeof value !== 'object' || value === null) return false;
  const command = value as Record<string, unknown>;
  return (
    typeof command['playId'] === 'string' &&
    typeof command['url'] === 'string' &&
    (command['kind'] === 'image' || command['kind'] === 'video') &&
    (command['durationMs'] === null || typeof command['durationMs'] === 'number')
  );
}

const bridge: PlayerBridge = {
  onPlay(listener) {
    ipcRenderer.on(CHANNEL_PLAY, (_event, command) => {
      if (isPlayCommand(command)) listener(command);
    });
  },
  onStop(listener) {
    ipcRenderer.on(CHANNEL_STOP, (_event, playId) => {
      if (typeof playId === 'string') listener(playId);
    });
  },
  report(report: PlayerReport) {
    ipcRenderer.send(CHANNEL_REPORT, report);
  },
};

contextBridge.exposeInMainWorld('player', bridge);
