import { CorrectedClock } from '@ooh/agent';
import { describe, expect, test } from 'vitest';
import { type DomainIdle, type TimeDomain, TimeDriver } from '../src/time/driver.js';
import { VirtualClock } from '../src/time/virtual-clock.js';

const T0 = Date.UTC(2026, 0, 15, 4, 0, 0);

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

describe('VirtualClock', () => {
  test('sleeps end when virtual time reaches them, earliest first, and never before', async () => {
    const clock = new VirtualClock(T0);
    const woke: string[] = [];
    const sleep = clock.sleepFor('a');
    void sleep(3000).then(() => woke.push(`3s@${clock.now() - T0}`));
    void sleep(1000).then(() => woke.push(`1s@${clock.now() - T0}`));
    void sleep(2000).then(() => woke.push(`2s@${clock.now() - T0}`));
    expect(clock.nextDeadline()).toBe(T0 + 1000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(woke).toEqual([]);
    clock.advanceTo(T0 + 2500);
    await new Promise((resolve) => setImmediate(resolve));
    expect(woke).toEqual(['1s@2500', '2s@2500']);
    expect(clock.nextDeadline()).toBe(T0 + 3000);
    clock.advanceTo(T0 + 3000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(woke).toEqual(['1s@2500', '2s@2500', '3s@3000']);
    expect(clock.nextDeadline()).toBeNull();
    expect(() => clock.advanceTo(T0)).toThrow(RangeError);
  });

  test('an abort ends a sleep at once; a sleep of zero or an aborted signal does not wait for time', async () => {
    const clock = new VirtualClock(T0);
    const controller = new AbortController();
    let ended = false;
    void clock
      .sleepFor('a')(60_000, controller.signal)
      .then(() => {
        ended = true;
      });
    controller.abort();
    await new Promise((resolve) => setImmediate(resolve));
    expect(ended).toBe(true);
    expect(clock.nextDeadline()).toBeNull();
    await clock.sleepFor('a')(0);
    await clock.sleepFor('a')(5000, controller.signal);
    expect(clock.now()).toBe(T0);
  });

  test('settle waits until every owner sleeps in as many sleeps as it has loops', async () => {
    const clock = new VirtualClock(T0, { fallbackMs: 2000 });
    clock.register('agent', 2);
    const sleep = clock.sleepFor('agent');
    // Loop 1 sleeps at once; loop 2 does 30 ms of "I/O" first.
    void sleep(10_000);
    const began = performance.now();
    setTimeout(() => void sleep(10_000), 30);
    const settled = await clock.settle();
    expect(settled.quiescent).toBe(true);
    expect(performance.now() - began).toBeGreaterThanOrEqual(25);
  });

  test('an owner stuck short of its loops ends the wait at the fallback, and after three stalls its count is taken', async () => {
    const adjusted: string[] = [];
    const clock = new VirtualClock(T0, {
      fallbackMs: 20,
      onAdjust: (owner, expected, was) => adjusted.push(`${owner}:${was}->${expected}`),
    });
    clock.register('agent', 3);
    void clock.sleepFor('agent')(10_000);
    void clock.sleepFor('agent')(10_000);
    for (let i = 0; i < 3; i += 1)
      expect(await clock.settle()).toEqual({ quiescent: false, awake: ['agent'] });
    expect(adjusted).toEqual(['agent:3->2']);
    expect(clock.expectedLoops('agent')).toBe(2);
    expect((await clock.settle()).quiescent).toBe(true);
  });

  test('more sleeps at once than expected raise the expected count (an agent with a loop more)', async () => {
    const adjusted: string[] = [];
    const clock = new VirtualClock(T0, {
      onAdjust: (owner, expected, was) => adjusted.push(`${owner}:${was}->${expected}`),
    });
    clock.register('agent', 1);
    void clock.sleepFor('agent')(10_000);
    void clock.sleepFor('agent')(20_000);
    expect(adjusted).toEqual(['agent:1->2']);
    expect(clock.expectedLoops('agent')).toBe(2);
  });

  test('release ends an owner’s sleeps now and later ones at once (an agent shutting down)', async () => {
    const clock = new VirtualClock(T0);
    clock.register('agent', 1);
    let ended = false;
    void clock
      .sleepFor('agent')(3_600_000)
      .then(() => {
        ended = true;
      });
    clock.release('agent');
    await new Promise((resolve) => setImmediate(resolve));
    expect(ended).toBe(true);
    await clock.sleepFor('agent')(3_600_000);
    expect(clock.now()).toBe(T0);
    expect(clock.nextDeadline()).toBeNull();
  });
});

describe('TimeDriver', () => {
  class FakeDomain implements TimeDomain {
    readonly name = 'fake';
    readonly visits: number[] = [];
    constructor(private readonly deadlines: number[]) {}
    async advanceTo(at: number): Promise<DomainIdle> {
      this.visits.push(at - T0);
      while (this.deadlines.length > 0 && this.deadlines[0]! <= at) this.deadlines.shift();
      return { next: this.deadlines[0] ?? null, awake: [] };
    }
  }

  test('steps go to the next deadline, no shorter than the minimum and no longer than the maximum', async () => {
    const platformTimes: number[] = [];
    const domain = new FakeDomain([T0 + 1000, T0 + 40_000, T0 + 41_000, T0 + 200_000]);
    const driver = new TimeDriver({
      startMs: T0,
      minStepMs: 10_000,
      maxStepMs: 60_000,
      platformClock: { set: async (at) => void platformTimes.push(at.getTime() - T0) },
    });
    driver.addDomain(domain);
    await driver.sync();
    await driver.runUntil(T0 + 150_000);
    // 41 s is due within the minimum step after 40 s: it wakes at 50 s; 200 s is beyond the maximum step.
    expect(domain.visits).toEqual([0, 10_000, 40_000, 50_000, 110_000, 150_000]);
    // The platform's clock is set before each step reaches the players.
    expect(platformTimes).toEqual([0, 10_000, 40_000, 50_000, 110_000, 150_000]);
    expect(driver.now()).toBe(T0 + 150_000);
    await driver.jumpTo(T0 + 10 * 86_400_000);
    expect(domain.visits.at(-1)).toBe(10 * 86_400_000);
  });

  test('a domain still busy at its fallback is waited for again, twice at most, before the platform clock moves on', async () => {
    const HOUR = 3_600_000;
    const events: string[] = [];
    // Busy for one wait in the first hour's step, for good in the second's.
    const busyWaits = new Map([
      [HOUR, 1],
      [2 * HOUR, 99],
    ]);
    const domain: TimeDomain = {
      name: 'players',
      async advanceTo(at) {
        events.push(`domain ${(at - T0) / HOUR} h`);
        const busy = busyWaits.get(at - T0) ?? 0;
        busyWaits.set(at - T0, busy - 1);
        return { next: null, awake: busy > 0 ? ['player'] : [] };
      },
    };
    const driver = new TimeDriver({
      startMs: T0,
      minStepMs: HOUR,
      maxStepMs: HOUR,
      platformClock: { set: async (at) => void events.push(`platform ${(at.getTime() - T0) / HOUR} h`) },
    });
    driver.addDomain(domain);
    await driver.runUntil(T0 + 3 * HOUR);
    expect(events).toEqual([
      'platform 1 h',
      'domain 1 h',
      'domain 1 h',
      'platform 2 h',
      'domain 2 h',
      'domain 2 h',
      'domain 2 h',
      'platform 3 h',
      'domain 3 h',
    ]);
    expect(driver.stats.unsettledSteps).toBe(1);
  });

  test("an answer made after the platform's clock moved on reaches a player still in the step before: its clock does not take the step", async () => {
    const HOUR = 3_600_000;
    const clock = new VirtualClock(T0, { fallbackMs: 50 });
    clock.register('agent', 1);
    const domain: TimeDomain = {
      name: 'players',
      async advanceTo(at) {
        clock.advanceTo(at);
        const settled = await clock.settle();
        return { next: clock.nextDeadline(), awake: settled.awake };
      },
    };
    // The agent's clock on the simulated board: virtual time, and virtual time as its steady clock.
    const agentClock = new CorrectedClock({ now: () => new Date(clock.now()) }, 86_400_000, 0, undefined, {
      monotonic: () => clock.now(),
    });
    let platformMs = T0;
    let answerHeld: { release: () => void; observed: Promise<void> } | null = null;
    /** One request: the platform writes its Date when it answers; a held answer waits for the next step. */
    async function request(held: boolean): Promise<void> {
      const sentAt = agentClock.baseNow();
      if (held) {
        const observed = deferred();
        const release = deferred();
        answerHeld = { release: release.resolve, observed: observed.promise };
        await release.promise;
        agentClock.observeServerDate(new Date(platformMs).toUTCString(), sentAt, agentClock.baseNow());
        observed.resolve();
        return;
      }
      agentClock.observeServerDate(new Date(platformMs).toUTCString(), sentAt, agentClock.baseNow());
    }
    const stamps: { at: number; platform: number }[] = [];
    const sleep = clock.sleepFor('agent');
    const agent = (async () => {
      await request(false);
      await sleep(HOUR);
      // Busy past the step's fallback: its answer is still on the way when the driver moves on.
      await request(true);
      await sleep(HOUR);
      // The next step: a play stamped by the agent's clock, which the platform judges by its own.
      stamps.push({ at: agentClock.now().getTime(), platform: platformMs });
      await request(false);
      await sleep(100 * HOUR);
    })();
    const driver = new TimeDriver({
      startMs: T0,
      minStepMs: HOUR,
      maxStepMs: HOUR,
      platformClock: {
        async set(at) {
          platformMs = at.getTime();
          // The held answer is made now, under the new time, and reaches the player before its step does.
          const held = answerHeld;
          answerHeld = null;
          if (held) {
            held.release();
            await held.observed;
          }
        },
      },
    });
    driver.addDomain(domain);
    await driver.sync();
    await driver.runUntil(T0 + 2 * HOUR);
    expect(driver.stats.unsettledSteps).toBe(1);
    expect(answerHeld).toBeNull();
    // The play is stamped by virtual time, within the platform's 300 s (not an hour ahead: time_in_future).
    expect(stamps).toEqual([{ at: T0 + 2 * HOUR, platform: T0 + 2 * HOUR }]);
    expect(agentClock.offset).toBe(0);
    expect(agentClock.heldOffset).toBeNull();
    clock.release('agent');
    await agent;
  });
});
