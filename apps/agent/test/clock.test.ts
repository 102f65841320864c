import { describe, expect, it } from 'vitest';
import { CorrectedClock } from '../src/clock.js';
import { backoffDelayMs, retryAfterMs } from '../src/shipping/backoff.js';
import { ManualClock } from './helpers/temp.js';

describe('corrected clock (Date header)', () => {
  const board = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
  const sent = new Date('2026-11-21T09:00:00.000Z');
  const received = new Date('2026-11-21T09:00:00.200Z');

  it('learns the offset from the server Date, ignoring differences within the header resolution', () => {
    const changes: number[] = [];
    const clock = new CorrectedClock(board, 3_600_000, 0, (offset) => changes.push(offset));
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:00:00 GMT', sent, received)).toBe(true);
    expect(clock.offset).toBe(0);
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:10:00 GMT', sent, received)).toBe(true);
    expect(clock.offset).toBe(600_400);
    expect(clock.now().toISOString()).toBe('2026-11-21T09:10:00.400Z');
    expect(clock.baseNow().toISOString()).toBe('2026-11-21T09:00:00.000Z');
    expect(changes).toEqual([600_400]);
  });

  it('refuses an offset beyond its bound, and unreadable headers', () => {
    const clock = new CorrectedClock(board, 3_600_000);
    expect(clock.observeServerDate('Sun, 22 Nov 2026 09:00:00 GMT', sent, received)).toBe(false);
    expect(clock.observeServerDate('yesterday', sent, received)).toBe(false);
    expect(clock.observeServerDate(undefined, sent, received)).toBe(false);
    expect(clock.offset).toBe(0);
    // A remembered offset beyond the bound is not restored.
    expect(new CorrectedClock(board, 1000, 5000).offset).toBe(0);
    expect(new CorrectedClock(board, 10_000, 5000).offset).toBe(5000);
  });
});

describe('backoff and Retry-After', () => {
  it('grows exponentially to the cap with jitter inside the window', () => {
    const policy = { baseMs: 1000, capMs: 8000 };
    expect([1, 2, 3, 4, 5].map((n) => backoffDelayMs(policy, n, () => 0))).toEqual([
      500, 1000, 2000, 4000, 4000,
    ]);
    expect([1, 2, 3, 4, 5].map((n) => backoffDelayMs(policy, n, () => 1))).toEqual([
      1000, 2000, 4000, 8000, 8000,
    ]);
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    const now = new Date('2026-11-21T09:00:00.000Z');
    expect(retryAfterMs('12', now)).toBe(12_000);
    expect(retryAfterMs('Sat, 21 Nov 2026 09:00:30 GMT', now)).toBe(30_000);
    expect(retryAfterMs('Sat, 21 Nov 2026 08:00:00 GMT', now)).toBe(0);
    expect(retryAfterMs('soon', now)).toBeNull();
    expect(retryAfterMs(undefined, now)).toBeNull();
  });
});
