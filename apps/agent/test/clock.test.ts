import { describe, expect, it } from 'vitest';
import { CorrectedClock } from '../src/clock.js';
import { backoffDelayMs, retryAfterMs } from '@ooh/protocol';
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

describe('clock trust', () => {
  it('is synced after a Date header is taken, and no longer once the board clock is set', () => {
    const truth = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    let skewMs = 600_000;
    const board = { now: () => new Date(truth.now().getTime() + skewMs) };
    const clock = new CorrectedClock(board, 86_400_000, 0, undefined, {
      monotonic: () => truth.now().getTime(),
    });
    const synced: string[] = [];
    clock.onSync(() => synced.push(clock.now().toISOString()));
    expect(clock.trust()).toBe('unsynced');
    const at = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:00:00 GMT', at, at)).toBe(true);
    expect(clock.trust()).toBe('synced');
    expect(synced).toEqual(['2026-11-21T09:00:00.500Z']);
    // Time passes: still synced. Another header: no second notice.
    truth.advance(3_600_000);
    expect(clock.trust()).toBe('synced');
    const later = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 10:00:00 GMT', later, later)).toBe(true);
    expect(synced).toHaveLength(1);
    // The board clock is set (an NTP step): the offset is no longer known to be right.
    skewMs = 0;
    expect(clock.trust()).toBe('unsynced');
    const after = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 10:00:00 GMT', after, after)).toBe(true);
    expect(clock.trust()).toBe('synced');
    expect(synced).toHaveLength(2);
  });

  it('is implausible before 2025 or before the device certificate, until synced; refusals are remembered', () => {
    const truth = new ManualClock(new Date('1970-01-01T06:00:00.000Z'));
    let certificateNotBefore: Date | null = null;
    const clock = new CorrectedClock(truth, 86_400_000, 0, undefined, {
      monotonic: () => truth.now().getTime(),
      notBefore: () => certificateNotBefore,
    });
    expect(clock.trust()).toBe('implausible');
    expect(clock.lastRefusedAt).toBeNull();
    const at = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:00:00 GMT', at, at)).toBe(false);
    expect(clock.lastRefusedAt).toBe(truth.now().getTime());
    expect(clock.trust()).toBe('implausible');
    truth.set(new Date('2026-11-21T09:00:00.000Z'));
    expect(clock.trust()).toBe('unsynced');
    certificateNotBefore = new Date('2026-11-21T09:05:00.000Z');
    expect(clock.trust()).toBe('implausible');
    expect(clock.earliestPlausible()).toEqual(certificateNotBefore);
    const now = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:00:00 GMT', now, now)).toBe(true);
    expect(clock.trust()).toBe('synced');
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
