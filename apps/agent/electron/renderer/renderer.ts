/**
 * The renderer page: plays one image or video at a time as main commands, and reports through the preload
 * bridge when the media is really on screen (`playing`) and when it left it (`ended`). An image counts as
 * playing once decoded and painted; a video at its first `playing` event, and it ends at its `ended` event.
 * Runs in the browser (no Node); bundled with esbuild into renderer.js.
 */
import type { PlayCommand, PlayerBridge } from '../bridge.js';

declare global {
  interface Window {
    player: PlayerBridge;
  }
}

interface Current {
  playId: string;
  element: HTMLImageElement | HTMLVideoElement;
  started: boolean;
  timer: number | undefined;
}

const DEFAULT_IMAGE_MS = 10_000;
const bridge = window.player;
const stage = document.getElementById('stage') as HTMLDivElement;
let current: Current | null = null;

function afterPaint(callback: () => void): void {
  // Two frames: the first runs before the paint that shows the new element, the second after it.
  requestAnimationFrame(() => requestAnimationFrame(callback));
}

function end(playId: string, interrupted: boolean, reason?: string): void {
  if (!current || current.playId !== playId) return;
  const { element, started, timer } = current;
  current = null;
  if (timer !== undefined) clearTimeout(timer);
  if (element instanceof HTMLVideoElement) {
    element.pause();
    element.removeAttribute('src');
    element.load();
  }
  stage.replaceChildren();
  if (reason !== undefined) bridge.report({ type: 'error', playId, reason });
  else if (started) bridge.report({ type: 'ended', playId, interrupted });
  else bridge.report({ type: 'error', playId, reason: 'stopped before it was shown' });
}

function markPlaying(playId: string): void {
  if (!current || current.playId !== playId || current.started) return;
  current.started = true;
  bridge.report({ type: 'playing', playId });
}

/**
 * Ends an image once it has been on screen `durationMs`, measured from its `playing` report on the steady clock.
 * A timer alone may fire a little early (timers count whole milliseconds of a loop clock), and a play measured
 * 999 ms of 1000 is one the platform refuses as too short: the rest is waited out.
 */
function holdThenEnd(playId: string, durationMs: number): void {
  const shownAt = performance.now();
  const check = () => {
    if (current?.playId !== playId) return;
    const left = durationMs - (performance.now() - shownAt);
    if (left > 0) current.timer = window.setTimeout(check, Math.ceil(left));
    else end(playId, false);
  };
  current!.timer = window.setTimeout(check, durationMs);
}

function playImage(command: PlayCommand): void {
  const image = new Image();
  current = { playId: command.playId, element: image, started: false, timer: undefined };
  image.src = command.url;
  image.decode().then(
    () => {
      if (current?.playId !== command.playId) return;
      stage.replaceChildren(image);
      afterPaint(() => {
        if (current?.playId !== command.playId) return;
        markPlaying(command.playId);
        holdThenEnd(command.playId, command.durationMs ?? DEFAULT_IMAGE_MS);
      });
    },
    () => end(command.playId, false, 'image could not be decoded'),
  );
}

function playVideo(command: PlayCommand): void {
  const video = document.createElement('video');
  video.muted = true;
  video.playsInline = true;
  video.preload = 'auto';
  current = { playId: command.playId, element: video, started: false, timer: undefined };
  video.addEventListener('playing', () => markPlaying(command.playId));
  video.addEventListener('ended', () => end(command.playId, false));
  video.addEventListener('error', () =>
    end(command.playId, false, `video error ${video.error?.code ?? ''}`.trim()),
  );
  video.src = command.url;
  stage.replaceChildren(video);
  video
    .play()
    .catch((error: unknown) => end(command.playId, false, `video refused to play: ${String(error)}`));
}

bridge.onPlay((command) => {
  // One play at a time: a new command ends whatever is still on screen.
  if (current) end(current.playId, true);
  if (command.kind === 'image') playImage(command);
  else playVideo(command);
});

bridge.onStop((playId) => end(playId, true));
