import { describe, expect, it } from 'vitest';
import { CHANNEL_PLAY, CHANNEL_STOP, type PlayCommand } from '../../electron/bridge.js';
import { IMAGE_HOLD_MARGIN_MS, isPlayerReport, RendererDisplay } from '../../electron/renderer-display.js';
import type { PlayRequest } from '../../src/playback/display.js';
import { ManualClock, SHA_A } from '../helpers/temp.js';

function request(overrides: Partial<PlayRequest> = {}): PlayRequest {
  return {
    playId: 'play-1',
    path: '/srv/media/a b.png',
    relativePath: 'a b.png',
    kind: 'image',
    sha256: SHA_A,
    durationMs: 10_000,
    ...overrides,
  };
}

describe('RendererDisplay (main-process side of the bridge)', () => {
  it('sends a play command and stamps start and end with the agent clock as the renderer reports them', async () => {
    const clock = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    const sent: [string, unknown][] = [];
    const display = new RendererDisplay({ send: (channel, arg) => sent.push([channel, arg]) }, clock);
    const result = display.play(request(), new AbortController().signal);
    expect(sent).toEqual([
      [
        CHANNEL_PLAY,
        {
          playId: 'play-1',
          url: `file:///srv/media/a%20b.png?sha256=${SHA_A}`,
          kind: 'image',
          // Held a margin longer, so that stamps taken as the reports arrive span the whole length.
          durationMs: 10_000 + IMAGE_HOLD_MARGIN_MS,
        } satisfies PlayCommand,
      ],
    ]);
    clock.advance(120);
    display.onReport({ type: 'playing', playId: 'play-1' });
    clock.advance(10_000);
    display.onReport({ type: 'ended', playId: 'play-1', interrupted: false });
    expect(await result).toEqual({
      outcome: 'played',
      start: new Date('2026-11-21T09:00:00.120Z'),
      end: new Date('2026-11-21T09:00:10.120Z'),
      interrupted: false,
    });
  });

  it('asks the renderer to stop on abort; an end without a start is no play', async () => {
    const clock = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    const sent: [string, unknown][] = [];
    const display = new RendererDisplay({ send: (channel, arg) => sent.push([channel, arg]) }, clock);
    const controller = new AbortController();
    const result = display.play(request({ kind: 'video', durationMs: 15_000 }), controller.signal);
    controller.abort();
    expect(sent.at(-1)).toEqual([CHANNEL_STOP, 'play-1']);
    display.onReport({ type: 'ended', playId: 'play-1', interrupted: true });
    expect(await result).toEqual({ outcome: 'failed', reason: 'ended without having started' });
    // Reports for unknown plays are ignored.
    display.onReport({ type: 'ended', playId: 'other', interrupted: false });
  });

  it('passes a renderer error on as a failed play', async () => {
    const display = new RendererDisplay({ send: () => {} }, new ManualClock(new Date()));
    const result = display.play(request(), new AbortController().signal);
    display.onReport({ type: 'error', playId: 'play-1', reason: 'image could not be decoded' });
    expect(await result).toEqual({ outcome: 'failed', reason: 'image could not be decoded' });
  });

  it('accepts only well-formed reports from the renderer', () => {
    expect(isPlayerReport({ type: 'playing', playId: 'x' })).toBe(true);
    expect(isPlayerReport({ type: 'ended', playId: 'x', interrupted: false })).toBe(true);
    expect(isPlayerReport({ type: 'ended', playId: 'x' })).toBe(false);
    expect(isPlayerReport({ type: 'error', playId: 'x' })).toBe(false);
    expect(isPlayerReport({ type: 'shown', playId: 'x' })).toBe(false);
    expect(isPlayerReport('playing')).toBe(false);
  });
});
