import { describe, expect, it } from 'vitest';
import { CorrectedClock } from '../src/clock.js';
import { backoffDelayMs, retryAfterMs } from '@ooh/protocol';
import { ManualClock } from './helpers/temp.js';

describe('corrected clock (Date header)', () => {
  const board = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
  const sent = new Date('2026-11-21T09:00:00.000Z');
  const received = new Date('2026-11-21T09:00:00.200Z');

  it('learns the offset from the first server Date at once, ignoring differences within the header resolution', () => {
    const changes: number[] = [];
    const clock = new CorrectedClock(board, 3_600_000, 0, (offset) => changes.push(offset));
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:10:00 GMT', sent, received)).toBe(true);
    expect(clock.offset).toBe(600_400);
    expect(clock.now().toISOString()).toBe('2026-11-21T09:10:00.400Z');
    expect(clock.baseNow().toISOString()).toBe('2026-11-21T09:00:00.000Z');
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:10:01 GMT', sent, received)).toBe(true);
    expect(clock.offset).toBe(600_400);
    expect(changes).toEqual([600_400]);
    const agreeing = new CorrectedClock(board, 3_600_000, 0, (offset) => changes.push(offset));
    expect(agreeing.observeServerDate('Sat, 21 Nov 2026 09:00:00 GMT', sent, received)).toBe(true);
    expect(agreeing.offset).toBe(0);
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

describe('a Date header that would move a synced clock', () => {
  /** A board clock on true time, and its steady clock: a clock synced at offset 0 at 09:00. */
  function synced(changes: number[] = []) {
    const truth = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    const clock = new CorrectedClock(truth, 86_400_000, 0, (offset) => changes.push(offset), {
      monotonic: () => truth.now().getTime(),
    });
    const at = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:00:00 GMT', at, at)).toBe(true);
    expect(clock.trust()).toBe('synced');
    return { truth, clock };
  }

  it("is held, not taken, when it is one answer from the next simulator step (the platform's clock an hour on)", () => {
    // A step left unsettled: the platform's clock moved to 10:00 while this player's board still reads 09:00 and
    // its answer was on the way. Taken, the hour would be the offset, and every play stamped an hour ahead
    // (time_in_future).
    const changes: number[] = [];
    const { truth, clock } = synced(changes);
    const sentAt = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 10:00:00 GMT', sentAt, clock.baseNow())).toBe(false);
    // The shipper reads the same answer again: no confirmation.
    expect(clock.observeServerDate('Sat, 21 Nov 2026 10:00:00 GMT', sentAt, clock.baseNow())).toBe(false);
    // Another request under way in the same instant confirms nothing either.
    const other = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 10:00:00 GMT', other, other)).toBe(false);
    expect(clock.offset).toBe(0);
    expect(clock.heldOffset).toBe(3_600_500);
    expect(clock.now().toISOString()).toBe('2026-11-21T09:00:00.000Z');
    expect(clock.trust()).toBe('synced');
    // The player's step comes: its next request finds the platform at the same time, which drops the held jump.
    truth.advance(3_600_000);
    const next = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 10:00:00 GMT', next, next)).toBe(true);
    expect(clock.heldOffset).toBeNull();
    expect(clock.now().toISOString()).toBe('2026-11-21T10:00:00.000Z');
    expect(changes).toEqual([]);
  });

  it('a slow answer moves it only beyond half its round trip (a request under way while a step was taken)', () => {
    // Sent in one simulator step, read in the next: the server stamped it somewhere in that hour.
    const { truth, clock } = synced();
    const sentAt = clock.baseNow();
    truth.advance(3_600_000);
    expect(clock.observeServerDate('Sat, 21 Nov 2026 10:00:00 GMT', sentAt, clock.baseNow())).toBe(true);
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:00:00 GMT', sentAt, clock.baseNow())).toBe(true);
    expect(clock.offset).toBe(0);
    expect(clock.heldOffset).toBeNull();
    // Beyond half its round trip it is a jump like any other: held.
    const later = clock.baseNow();
    truth.advance(10_000);
    expect(clock.observeServerDate('Sat, 21 Nov 2026 10:10:10 GMT', later, clock.baseNow())).toBe(false);
    expect(clock.heldOffset).toBe(605_500);
  });

  it('is taken once a later request shows the same offset (the server clock was stepped)', () => {
    const changes: number[] = [];
    const { truth, clock } = synced(changes);
    // The platform's clock is set ten minutes on.
    truth.advance(5000);
    const first = clock.baseNow();
    truth.advance(200);
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:10:05 GMT', first, clock.baseNow())).toBe(false);
    expect(clock.offset).toBe(0);
    // A later request, with a slower answer: within the header's resolution and half of each round trip.
    truth.advance(30_000);
    const second = clock.baseNow();
    truth.advance(2000);
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:10:36 GMT', second, clock.baseNow())).toBe(true);
    expect(clock.offset).toBe(600_300);
    expect(clock.heldOffset).toBeNull();
    expect(changes).toEqual([600_300]);
    expect(clock.now().toISOString()).toBe('2026-11-21T09:10:37.500Z');
  });

  it('a later header that disagrees replaces the held one; one that agrees with the clock drops it', () => {
    const { truth, clock } = synced();
    const header = (at: Date) => at.toUTCString();
    const ask = (serverAheadMs: number) => {
      truth.advance(60_000);
      const at = clock.baseNow();
      return clock.observeServerDate(header(new Date(at.getTime() + serverAheadMs)), at, at);
    };
    expect(ask(3_600_000)).toBe(false);
    expect(ask(-600_000)).toBe(false);
    expect(clock.heldOffset).toBe(-599_500);
    expect(ask(0)).toBe(true);
    expect(clock.heldOffset).toBeNull();
    // The first jump is not remembered: one more header an hour on is held again, not taken.
    expect(ask(3_600_000)).toBe(false);
    expect(clock.offset).toBe(0);
    expect(ask(3_600_000)).toBe(true);
    expect(clock.offset).toBe(3_600_500);
  });

  it('tells each held jump, and its end (taken or dropped), to onHeldChange: the agent keeps it for `agent status`', () => {
    const truth = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    const held: (number | null)[] = [];
    const clock = new CorrectedClock(truth, 86_400_000, 0, undefined, {
      monotonic: () => truth.now().getTime(),
      onHeldChange: (offset) => held.push(offset),
    });
    const ask = (serverAheadMs: number) => {
      truth.advance(60_000);
      const at = clock.baseNow();
      return clock.observeServerDate(new Date(at.getTime() + serverAheadMs).toUTCString(), at, at);
    };
    // The first header syncs the clock, agreeing headers hold nothing: nothing told.
    expect(ask(0)).toBe(true);
    expect(ask(0)).toBe(true);
    expect(held).toEqual([]);
    expect(ask(3_600_000)).toBe(false);
    expect(ask(-600_000)).toBe(false);
    expect(ask(0)).toBe(true);
    expect(held).toEqual([3_600_500, -599_500, null]);
    expect(ask(3_600_000)).toBe(false);
    expect(ask(3_600_000)).toBe(true);
    expect(clock.offset).toBe(3_600_500);
    expect(held).toEqual([3_600_500, -599_500, null, 3_600_500, null]);
  });

  it('is taken at once when the clock is not synced: the first header of a run, even against a remembered offset', () => {
    const truth = new ManualClock(new Date('2026-11-21T09:00:00.000Z'));
    const clock = new CorrectedClock(truth, 86_400_000, 600_000, undefined, {
      monotonic: () => truth.now().getTime(),
    });
    expect(clock.now().toISOString()).toBe('2026-11-21T09:10:00.000Z');
    const at = clock.baseNow();
    expect(clock.observeServerDate('Sat, 21 Nov 2026 09:00:00 GMT', at, at)).toBe(true);
    expect(clock.offset).toBe(500);
    expect(clock.trust()).toBe('synced');
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
