import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import type { PlayReport } from '../../src/playback/display.js';
import { TimerDisplay } from '../helpers/hardware.js';

const request = (durationMs: number) => ({
  playId: 'p',
  path: '/media/a.png',
  relativePath: 'a.png',
  kind: 'image' as const,
  sha256: 'a'.repeat(64),
  durationMs,
});

describe('the timer test display', () => {
  it('never reports an uninterrupted play shorter than asked, on the clock it stamps with', async () => {
    // Node counts a timer in whole milliseconds of its loop clock from a truncated start, so a 20 ms timer may
    // fire after 19.2 ms: stamped with a millisecond clock, a few plays in a hundred measured 19 ms. Agent tests
    // set images at the platform's 1000 ms minimum, so each such play was refused as too_short.
    const display = new TimerDisplay(systemClock);
    const lengths: number[] = [];
    for (let round = 0; round < 8; round++) {
      const reports = await Promise.all(
        Array.from({ length: 50 }, () => display.play(request(20), new AbortController().signal)),
      );
      for (const report of reports as Extract<PlayReport, { outcome: 'played' }>[]) {
        expect(report.interrupted).toBe(false);
        lengths.push(report.end.getTime() - report.start.getTime());
      }
    }
    expect(lengths.filter((ms) => ms < 20)).toEqual([]);
  });

  it('ends at once when aborted, and says so', async () => {
    const display = new TimerDisplay(systemClock);
    const controller = new AbortController();
    const playing = display.play(request(60_000), controller.signal);
    controller.abort();
    const report = await playing;
    expect(report).toMatchObject({ outcome: 'played', interrupted: true });
  });
});
