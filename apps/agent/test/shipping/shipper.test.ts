import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { es256Verify } from '@ooh/crypto';
import { MockAgent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CorrectedClock } from '../../src/clock.js';
import { memoryLogger } from '../../src/logger.js';
import { Shipper } from '../../src/shipping/shipper.js';
import { type AgentTestPlatform, startAgentTestPlatform } from '../helpers/platform.js';
import {
  createShippingFixture,
  enrolledShippingFixture,
  logPlays,
  type ShippingFixture,
} from '../helpers/shipping-fixture.js';
import { tempDir } from '../helpers/temp.js';

/*
 * Against the real platform (helpers/platform.ts): its own database, the agents host listening on 127.0.0.1, a device
 * enrolled through the console for each test. What the platform stored and counted is read from its database; what
 * went over the wire, from the agent's transport (FaultyHttp), which also makes the faults the platform does not
 * make on demand (a 5xx, a lost answer, an outage).
 */

describe('shipping to the signed channel', () => {
  let platform: AgentTestPlatform;
  let dir: ReturnType<typeof tempDir>;
  let fx: ShippingFixture;

  beforeAll(async () => {
    platform = await startAgentTestPlatform();
  });
  afterAll(async () => {
    await platform?.close();
  });
  beforeEach(async () => {
    dir = tempDir();
    platform.setClockOffset(0);
    fx = await enrolledShippingFixture(platform, { dir: dir.path });
  });
  afterEach(async () => {
    await fx.close();
    dir.cleanup();
  });

  /** A directory of its own under the test's, for a second agent database. */
  function sub(name: string): string {
    const path = join(dir.path, name);
    mkdirSync(path, { recursive: true });
    return path;
  }

  /**
   * The platform holds a batch 1 of this device with other bytes than this agent's (an agent whose database was
   * replaced by an older copy, say): the same key signed a tamper record under batch_seq 1.
   */
  async function platformHoldsAnotherBatchOne(): Promise<void> {
    const earlier = createShippingFixture({
      dir: sub('earlier'),
      agentsUrl: platform.agentsUrl,
      deviceId: fx.deviceId,
      keys: fx.keys,
    });
    try {
      earlier.log.appendStatus({ kind: 'tamper', at: new Date() });
      expect(await earlier.shipper.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 1 });
    } finally {
      await earlier.close();
    }
  }

  it('sends a signed batch, stores the answer, and only then counts the records as sent', async () => {
    logPlays(fx.log, 3);
    const outcome = await fx.shipper.sendOnce();
    expect(outcome).toMatchObject({ kind: 'answered', batchSeq: 1, channel: 'signed' });
    if (outcome.kind !== 'answered') throw new Error('unreachable');
    expect(outcome.answer).toMatchObject({ batch_seq: 1, received: 3, accepted: 3, duplicate: false });
    expect(await platform.plays(fx.deviceId)).toBe(3);
    expect(await platform.batch(fx.deviceId, 1)).toMatchObject({ channel: 'agent' });
    expect(fx.log.stats().queueDepth).toBe(0);
    expect(JSON.parse(fx.batches.get(1)!.body.toString()).events).toHaveLength(3);
    expect(fx.shipper.status().lastSend).toMatchObject({ batch_seq: 1 });
    expect(await fx.shipper.sendOnce()).toEqual({ kind: 'idle' });
  });

  it('signs the exact bytes it stored', async () => {
    logPlays(fx.log, 2);
    const batch = fx.batches.pendingOrCut({ deviceId: fx.deviceId, now: new Date() })!;
    await fx.shipper.sendOnce();
    expect(fx.http.exchanges[0]).toMatchObject({ status: 200, bodySha256: batch.bodySha256 });
    const stored = (await platform.batch(fx.deviceId, 1))!;
    expect(stored.bodySha256).toBe(batch.bodySha256);
    expect(stored.body.equals(batch.body)).toBe(true);
  });

  it('resends byte for byte after a lost answer and accepts the duplicate answer', async () => {
    logPlays(fx.log, 4);
    fx.http.loseAnswerNext(1);
    const first = await fx.shipper.sendOnce();
    expect(first).toMatchObject({ kind: 'retry', batchSeq: 1 });
    expect(fx.log.stats().queueDepth).toBe(4);
    const second = await fx.shipper.sendOnce();
    expect(second).toMatchObject({ kind: 'answered', batchSeq: 1 });
    if (second.kind === 'answered') expect(second.answer.duplicate).toBe(true);
    const [lost, again] = fx.http.exchanges;
    expect(lost).toMatchObject({ status: 'lost', batchSeq: 1 });
    expect(again).toMatchObject({ status: 200, batchSeq: 1, bodySha256: lost!.bodySha256 });
    expect(fx.http.exchanges).toHaveLength(2);
    expect(await platform.batches(fx.deviceId)).toHaveLength(1);
    expect(await platform.plays(fx.deviceId)).toBe(4);
  });

  it('waits Retry-After on 429 and then sends the same bytes', async () => {
    // The platform's burst is three batches; the fourth within ten seconds is refused.
    for (let i = 0; i < 3; i++) {
      logPlays(fx.log, 1);
      expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: i + 1 });
    }
    logPlays(fx.log, 1);
    const limited = await fx.shipper.sendOnce();
    const refused = fx.http.exchanges[3]!;
    expect(refused).toMatchObject({ status: 429, code: 'rate_limited', batchSeq: 4 });
    const retryAfter = Number(refused.retryAfter);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    expect(limited).toEqual({
      kind: 'retry',
      batchSeq: 4,
      delayMs: retryAfter * 1000,
      reason: 'rate_limited',
    });
    // Those seconds pass on the platform's clock.
    platform.setClockOffset(retryAfter * 1000);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 4 });
    expect(fx.http.exchanges[4]).toMatchObject({ status: 200, bodySha256: refused.bodySha256 });
    expect(await platform.plays(fx.deviceId)).toBe(4);
  });

  it('backs off exponentially with a cap on server errors, resending the same bytes; a probe not taken changes nothing', async () => {
    logPlays(fx.log, 1);
    // An outage: every batch fails, the probes too (from the third 5xx on, each failed resend is followed by one).
    fx.http.failNext(8, 500, 'internal_error');
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const outcome = await fx.shipper.sendOnce();
      if (outcome.kind !== 'retry') throw new Error(`expected retry, got ${outcome.kind}`);
      delays.push(outcome.delayMs);
    }
    // random() = 0.5: three quarters of the window 1 s, 2 s, 4 s ... capped at 60 s.
    expect(delays).toEqual([750, 1500, 3000, 6000, 12_000]);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 1 });
    expect(fx.http.exchanges.map((r) => r.batchSeq)).toEqual([1, 1, 1, 2, 1, 3, 1, 4, 1]);
    expect(new Set(fx.http.exchanges.filter((r) => r.batchSeq === 1).map((r) => r.bodySha256)).size).toBe(1);
    expect(fx.batches.setAsideRecords()).toEqual({ count: 0, newest: [] });
    expect((await platform.batches(fx.deviceId)).map((b) => b.batchSeq)).toEqual([1]);
    expect(await platform.plays(fx.deviceId)).toBe(1);
  });

  it('503 (the platform cannot serve now): resent as it is with backoff, never probed, never cut or set aside', async () => {
    logPlays(fx.log, 2);
    fx.http.failNext(6, 503, 'service_unavailable');
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      const outcome = await fx.shipper.sendOnce();
      expect(outcome).toMatchObject({ kind: 'retry', batchSeq: 1, reason: 'http 503 service_unavailable' });
      if (outcome.kind === 'retry') delays.push(outcome.delayMs);
    }
    expect(delays).toEqual([750, 1500, 3000, 6000, 12_000, 24_000]);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 1 });
    // No probe (batch 2) was sent: every exchange was these bytes.
    expect(fx.http.exchanges.map((r) => r.batchSeq)).toEqual([1, 1, 1, 1, 1, 1, 1]);
    expect(new Set(fx.http.exchanges.map((r) => r.bodySha256)).size).toBe(1);
    expect(fx.batches.setAsideRecords()).toEqual({ count: 0, newest: [] });
    expect(await platform.plays(fx.deviceId)).toBe(2);
  });

  it('re-signs under the same batch_seq with a fresh ts after stale_request, correcting the clock', async () => {
    logPlays(fx.log, 2, new Date(Date.now() + 600_000));
    // The platform's clock runs 10 minutes ahead of the agent's.
    platform.setClockOffset(600_000);
    const stale = await fx.shipper.sendOnce();
    expect(stale).toMatchObject({ kind: 'retry', batchSeq: 1, reason: 'stale_request', delayMs: 0 });
    expect(Math.abs(fx.clock.offset - 600_000)).toBeLessThan(3000);
    const answered = await fx.shipper.sendOnce();
    expect(answered).toMatchObject({ kind: 'answered', batchSeq: 1 });
    const [first, second] = fx.http.exchanges;
    expect(first).toMatchObject({ status: 401, code: 'stale_request', batchSeq: 1 });
    expect(second).toMatchObject({ status: 200, batchSeq: 1 });
    expect(first!.bodySha256).not.toBe(second!.bodySha256);
    const stored = (await platform.batch(fx.deviceId, 1))!;
    expect(stored.bodySha256).toBe(second!.bodySha256);
    const ts = JSON.parse(stored.body.toString()).ts;
    expect(Math.abs(Date.parse(ts) - platform.clock.now().getTime())).toBeLessThan(5000);
    // The next batch chains to the body the platform accepted.
    logPlays(fx.log, 1, new Date(Date.now() + 600_000));
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 2 });
    const next = JSON.parse((await platform.batch(fx.deviceId, 2))!.body.toString());
    expect(next.prev_sha256).toBe(second!.bodySha256);
  });

  it('after stale_request the ts is taken at send time, so a long backoff never makes the resend stale', async () => {
    // Time both sides agree on, moved by the test: the board clock, and the platform's clock.
    let shiftMs = 0;
    await fx.close();
    fx = await enrolledShippingFixture(platform, {
      dir: sub('shifted'),
      boardClock: { now: () => new Date(Date.now() + shiftMs) },
    });
    logPlays(fx.log, 2);
    // The platform's clock is ten minutes on, then twenty. The agent's clock takes the first Date header at once
    // (its first of this run), the jump to twenty only when a second answer shows it too: the ts it signs is
    // stale each time.
    const outcomes = [];
    for (const platformAheadMs of [600_000, 1_200_000, 1_200_000]) {
      platform.setClockOffset(platformAheadMs);
      outcomes.push(await fx.shipper.sendOnce());
    }
    // Two immediate re-signs, then the third waits its backoff like any failure.
    expect(outcomes.map((o) => (o.kind === 'retry' ? [o.reason, o.delayMs > 0] : o.kind))).toEqual([
      ['stale_request', false],
      ['stale_request', false],
      ['stale_request', true],
    ]);
    expect(fx.http.exchanges.map((r) => r.status)).toEqual([401, 401, 401]);
    expect(Math.abs(fx.clock.offset - 1_200_000)).toBeLessThan(3000);
    // The backoff (here ten minutes) passes before the next send, on both clocks.
    shiftMs = 600_000;
    platform.setClockOffset(1_800_000);
    const resent = await fx.shipper.sendOnce();
    expect(resent).toMatchObject({ kind: 'answered', batchSeq: 1 });
    const stored = JSON.parse((await platform.batch(fx.deviceId, 1))!.body.toString());
    expect(Math.abs(Date.parse(stored.ts) - platform.clock.now().getTime())).toBeLessThan(5000);
    expect(await platform.plays(fx.deviceId)).toBe(2);
  });

  it('never re-signs after a lost answer: the resend is byte for byte the body the platform may hold', async () => {
    logPlays(fx.log, 2);
    platform.setClockOffset(600_000);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'stale_request' });
    // The re-signed body is processed and stored, but its answer is lost.
    fx.http.loseAnswerNext(1);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', batchSeq: 1 });
    const resent = await fx.shipper.sendOnce();
    expect(resent).toMatchObject({ kind: 'answered', batchSeq: 1 });
    if (resent.kind === 'answered') expect(resent.answer.duplicate).toBe(true);
    const [stale, lost, again] = fx.http.exchanges;
    expect(stale).toMatchObject({ status: 401, code: 'stale_request' });
    expect(lost).toMatchObject({ status: 'lost' });
    expect(again).toMatchObject({ status: 200, bodySha256: lost!.bodySha256 });
    expect(fx.http.exchanges.some((r) => r.code === 'batch_conflict')).toBe(false);
    expect((await platform.batch(fx.deviceId, 1))!.bodySha256).toBe(lost!.bodySha256);
    expect(await platform.plays(fx.deviceId)).toBe(2);
  });

  it('a first signing the platform stored after answering its resend stale_request is taken, not a batch_conflict', async () => {
    logPlays(fx.log, 2);
    // The first send reaches a platform that takes its time: the agent's request times out, the platform has not
    // committed yet.
    fx.http.holdNext(1);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', batchSeq: 1 });
    // The resend of the same bytes comes when the platform sees their ts as stale (nothing stored yet): re-sign.
    platform.setClockOffset(600_000);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'stale_request' });
    // Then the first request commits after all.
    platform.setClockOffset(0);
    const [late] = await fx.http.deliverHeld();
    expect(late!.status).toBe(200);
    platform.setClockOffset(600_000);
    // The re-signed bytes conflict with those; the agent sends its earlier signing and reads the stored answer.
    const outcome = await fx.shipper.sendOnce();
    expect(outcome).toMatchObject({ kind: 'answered', batchSeq: 1 });
    if (outcome.kind === 'answered') expect(outcome.answer).toMatchObject({ duplicate: true, accepted: 2 });
    const [held, stale, conflict, again] = fx.http.exchanges;
    expect(held).toMatchObject({ status: 'held', batchSeq: 1 });
    expect(stale).toMatchObject({ status: 401, code: 'stale_request', bodySha256: held!.bodySha256 });
    expect(conflict).toMatchObject({ status: 409, code: 'batch_conflict', batchSeq: 1 });
    expect(conflict!.bodySha256).not.toBe(held!.bodySha256);
    expect(again).toMatchObject({ status: 200, batchSeq: 1, bodySha256: held!.bodySha256 });
    expect(fx.shipper.status().alert).toBeNull();
    // The batch now holds the bytes the platform took, and the next batch chains to them.
    expect(fx.batches.get(1)!.bodySha256).toBe(held!.bodySha256);
    expect(fx.batches.earlierSignings(1)).toEqual([]);
    logPlays(fx.log, 1);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 2 });
    const next = JSON.parse((await platform.batch(fx.deviceId, 2))!.body.toString());
    expect(next.prev_sha256).toBe(held!.bodySha256);
    expect(await platform.plays(fx.deviceId)).toBe(3);
  });

  it('a batch_conflict that none of the earlier signings explains still stops shipping', async () => {
    await platformHoldsAnotherBatchOne();
    logPlays(fx.log, 1);
    // This agent's batch 1 was signed twice (a stale_request from an injected answer, here): both are sent.
    fx.http.failNext(1, 401, 'stale_request');
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'stale_request' });
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'terminal', code: 'batch_conflict' });
    expect(fx.http.exchanges.map((r) => [r.status, r.code])).toEqual([
      [401, 'stale_request'],
      [409, 'batch_conflict'],
      [409, 'batch_conflict'],
    ]);
    // The re-signed bytes, then the first signing again: neither is what the platform holds.
    expect(fx.http.exchanges[1]!.bodySha256).not.toBe(fx.http.exchanges[0]!.bodySha256);
    expect(fx.http.exchanges[2]!.bodySha256).toBe(fx.http.exchanges[0]!.bodySha256);
    expect(fx.shipper.status().alert).toMatchObject({ code: 'batch_conflict', batch_seq: 1 });
    expect(await platform.plays(fx.deviceId)).toBe(0);
  });

  it('a stale_request answered before a restart is re-signed by the next agent at its first send', async () => {
    logPlays(fx.log, 1);
    platform.setClockOffset(600_000);
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'stale_request' });
    const before = fx.batches.get(1)!;
    // A new shipper on the same database (the agent restarted), a minute later by its clock, which the platform's
    // clock now agrees with.
    platform.setClockOffset(60_000);
    const restarted = new Shipper({
      batches: fx.batches,
      state: fx.state,
      http: fx.http,
      credentials: {
        signingKey: () => fx.keys.privateKey,
        tlsIdentity: () => null,
        confirm: () => {},
      },
      clock: new CorrectedClock({ now: () => new Date(Date.now() + 60_000) }, 86_400_000),
      deviceId: fx.deviceId,
      agentsUrl: platform.agentsUrl,
      devicesUrl: platform.agentsUrl,
      backoff: { baseMs: 1000, capMs: 60_000 },
      minIntervalMs: 0,
      idleIntervalMs: 50,
      logger: memoryLogger(),
    });
    expect(await restarted.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 1 });
    expect(fx.http.exchanges[1]).toMatchObject({ status: 200 });
    expect(fx.http.exchanges[1]!.bodySha256).not.toBe(before.bodySha256);
    expect(Date.parse(fx.batches.get(1)!.ts)).toBeGreaterThan(Date.parse(before.ts) + 50_000);
  });

  describe('records logged before the clock was synced', () => {
    /** A fixture whose board clock reads `skewMs` off true time, with records marked until synced. */
    async function skewed(name: string, skewMs: number | (() => number)): Promise<void> {
      const skew = typeof skewMs === 'number' ? () => skewMs : skewMs;
      await fx.close();
      fx = await enrolledShippingFixture(platform, {
        dir: sub(name),
        boardClock: { now: () => new Date(Date.now() + skew()) },
        run: `run-${name}`,
      });
    }
    async function sentEvents(
      batchSeq: number,
    ): Promise<{ start?: string; at?: string; detail?: Record<string, unknown> }[]> {
      return JSON.parse((await platform.batch(fx.deviceId, batchSeq))!.body.toString()).events;
    }

    it('a board 10 minutes fast: the platform is asked the time first and the plays go out corrected', async () => {
      await skewed('ahead', 600_000);
      // Three plays ending "now" by the board: ten minutes in the platform's future.
      logPlays(fx.log, 3, fx.clock.now());
      expect(fx.log.stats().unsettled).toBe(3);
      const outcome = await fx.shipper.sendOnce();
      expect(outcome).toMatchObject({ kind: 'answered', batchSeq: 1 });
      if (outcome.kind !== 'answered') throw new Error('unreachable');
      expect(outcome.answer).toMatchObject({ accepted: 3, refused: 0 });
      expect(Math.abs(fx.clock.offset + 600_000)).toBeLessThan(1500);
      const events = await sentEvents(1);
      expect(events).toHaveLength(3);
      for (const event of events) {
        expect(Math.abs(Date.parse(event.start!) - (Date.now() - 2000))).toBeLessThan(5000);
        expect(Math.abs((event.detail!['clock_corrected_ms'] as number) + 600_000)).toBeLessThan(1500);
      }
      expect(await platform.plays(fx.deviceId)).toBe(3);
      expect(fx.log.stats()).toMatchObject({ unsettled: 0, queueDepth: 0 });
    });

    it('a batch already cut is sent byte for byte; only records not yet in a batch are corrected', async () => {
      await skewed('cut', 600_000);
      logPlays(fx.log, 2, fx.clock.now());
      // Cut by an earlier version of the agent, which did not mark records: its bytes are final.
      fx.db.prepare('UPDATE records SET clock_run = NULL').run();
      const cut = fx.batches.pendingOrCut({ deviceId: fx.deviceId, now: fx.clock.now() })!;
      expect(cut.eventCount).toBe(2);
      logPlays(fx.log, 2, fx.clock.now());
      // Its ts is the board's too: stale_request (nothing stored), and the Date header of that answer sets the
      // clock. Re-signed with a fresh ts, the same events go again; they are not corrected.
      expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'stale_request' });
      expect(await platform.batches(fx.deviceId)).toEqual([]);
      const first = await fx.shipper.sendOnce();
      expect(first).toMatchObject({ kind: 'answered', batchSeq: 1 });
      const eventsOf = (body: Buffer) => JSON.stringify(JSON.parse(body.toString()).events);
      expect(eventsOf((await platform.batch(fx.deviceId, 1))!.body)).toBe(eventsOf(cut.body));
      // The platform judged those two plays by their (wrong) times: that is what the bytes say.
      if (first.kind === 'answered') {
        expect(first.answer.refused).toBe(2);
        expect(first.answer.items.map((item) => item.reason)).toEqual(['time_in_future', 'time_in_future']);
      }
      const second = await fx.shipper.sendOnce();
      expect(second).toMatchObject({ kind: 'answered', batchSeq: 2 });
      if (second.kind === 'answered') expect(second.answer).toMatchObject({ accepted: 2, refused: 0 });
      expect((await sentEvents(2)).every((event) => event.detail?.['clock_corrected_ms'] !== undefined)).toBe(
        true,
      );
      expect(await platform.plays(fx.deviceId)).toBe(2);
    });

    it('never cuts a record whose times wait for the clock, nor any after it', async () => {
      await skewed('order', 600_000);
      logPlays(fx.log, 1, fx.clock.now());
      fx.db.prepare('UPDATE records SET clock_run = NULL').run();
      logPlays(fx.log, 2, fx.clock.now());
      fx.db.prepare('UPDATE records SET clock_run = NULL WHERE seq = 3').run();
      const cut = fx.batches.pendingOrCut({ deviceId: fx.deviceId, now: fx.clock.now() })!;
      expect([cut.firstSeq, cut.lastSeq]).toEqual([1, 1]);
      expect(fx.log.stats()).toMatchObject({ unbatched: 2, unsettled: 1 });
    });

    it('a board clock in 1970: nothing is cut while the clock cannot be set', async () => {
      await skewed('1970', Date.UTC(1970, 0, 1) - Date.now());
      fx.log.appendStatus({ kind: 'tamper', at: fx.clock.now(), detail: { state: 'open' } });
      for (let i = 0; i < 2; i++) {
        expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'clock not set' });
      }
      // Only the two requests for the time (empty, refused at once: the signed channel wants its signature before it
      // reads a body); no batch.
      const probe = {
        method: 'POST',
        path: '/s/v1/telemetry',
        bodyBytes: 0,
        status: 401,
        code: 'bad_signature',
      };
      expect(fx.http.exchanges).toEqual([expect.objectContaining(probe), expect.objectContaining(probe)]);
      expect(fx.batches.pending()).toBeNull();
      expect(await platform.batches(fx.deviceId)).toEqual([]);
    });

    it("beyond the correction bound the platform's time cannot be taken: records go with the times they carry", async () => {
      await skewed('far', 2 * 86_400_000);
      logPlays(fx.log, 1, fx.clock.now());
      // (On the signed channel its ts is refused too, for the same reason: no agent fix can help that board.)
      expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'stale_request' });
      expect(fx.clock.offset).toBe(0);
      expect(fx.log.stats().unsettled).toBe(0);
      const batch = JSON.parse(fx.batches.pending()!.body.toString());
      expect(batch.events[0].detail).toBeUndefined();
      expect(fx.logger.lines.some((line) => /go with the board clock's times/.test(line.message))).toBe(true);
    });

    it('a board in 1970 set right while the platform is asked the time: its records never go with 1970 stamps', async () => {
      let skewMs = Date.UTC(1970, 0, 1, 6) - Date.now();
      await skewed('1970-step', () => skewMs);
      fx.log.appendStatus({ kind: 'tamper', at: fx.clock.now(), detail: { state: 'open' } });
      expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'clock not set' });
      // NTP sets the board right while the next request for the time is under way: it was sent in 1970 and
      // answered now, so its Date header cannot be taken (the offset it shows is decades), and the clock is
      // plausible but not synced when the records are cut.
      const post = fx.http.post.bind(fx.http);
      fx.http.post = (...args) => {
        skewMs = 0;
        return post(...args);
      };
      const outcome = await fx.shipper.sendOnce();
      expect(outcome).toMatchObject({ kind: 'answered', batchSeq: 1 });
      const [event] = await sentEvents(1);
      expect(Math.abs(Date.parse(event!.at!) - Date.now())).toBeLessThan(60_000);
      expect(
        Math.abs((event!.detail!['clock_corrected_ms'] as number) - (Date.now() - Date.UTC(1970, 0, 1, 6))),
      ).toBeLessThan(60_000);
      expect(fx.log.stats().unsettled).toBe(0);
    });
  });

  it('stops and alerts on batch_conflict instead of looping', async () => {
    await platformHoldsAnotherBatchOne();
    logPlays(fx.log, 1);
    const controller = new AbortController();
    await fx.shipper.run(controller.signal);
    expect(fx.http.exchanges).toEqual([
      expect.objectContaining({ status: 409, code: 'batch_conflict', batchSeq: 1 }),
    ]);
    expect(fx.shipper.status()).toMatchObject({
      state: 'stopped',
      alert: { code: 'batch_conflict', status: 409, batch_seq: 1 },
    });
    expect(fx.batches.get(1)!.terminalCode).toBe('batch_conflict');
    expect(fx.log.stats().queueDepth).toBe(1);
    expect(fx.logger.lines.some((l) => l.level === 'error')).toBe(true);
    expect(await platform.plays(fx.deviceId)).toBe(0);
  });

  it('stops on device_unauthorized (device unknown to the platform)', async () => {
    await fx.close();
    // Never enrolled: an id and key pair the platform has not seen.
    fx = createShippingFixture({ dir: sub('unknown'), agentsUrl: platform.agentsUrl });
    logPlays(fx.log, 1);
    expect(await fx.shipper.sendOnce()).toMatchObject({
      kind: 'terminal',
      code: 'device_unauthorized',
      status: 401,
    });
  });

  it('keeps everything through a long outage and resumes in order', async () => {
    fx.http.down = true;
    logPlays(fx.log, 1500);
    for (let i = 0; i < 5; i++)
      expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', batchSeq: 1 });
    logPlays(fx.log, 1200);
    expect(fx.log.stats().queueDepth).toBe(2700);
    // The platform is reachable again.
    fx.http.down = false;
    const outcomes = [];
    for (let i = 0; i < 4; i++) outcomes.push(await fx.shipper.sendOnce());
    expect(outcomes.map((o) => o.kind)).toEqual(['answered', 'answered', 'answered', 'idle']);
    expect(fx.http.exchanges.filter((r) => r.status !== 'refused').map((r) => r.batchSeq)).toEqual([1, 2, 3]);
    expect((await platform.batches(fx.deviceId)).map((b) => b.batchSeq)).toEqual([1, 2, 3]);
    expect(await platform.plays(fx.deviceId)).toBe(2700);
    expect(fx.log.stats().queueDepth).toBe(0);
  });

  it('run() ends at once when stopped during a send, without waiting on the aborted signal', async () => {
    const controller = new AbortController();
    // A sleep like the simulator's virtual clock at shutdown: it ends only when its signal aborts.
    const sleeps: AbortSignal[] = [];
    const stopping = await enrolledShippingFixture(platform, {
      dir: sub('stopping'),
      overrides: {
        backoff: { baseMs: 3_600_000, capMs: 3_600_000 },
        sleep: (_ms, signal) =>
          new Promise<void>((resolve) => {
            if (signal) sleeps.push(signal);
            if (signal?.aborted) resolve();
            else signal?.addEventListener('abort', () => resolve(), { once: true });
          }),
        onReachability: () => controller.abort(),
      },
    });
    try {
      stopping.http.failNext(1, 503, 'service_unavailable');
      logPlays(stopping.log, 1);
      const outcome = await Promise.race([
        stopping.shipper.run(controller.signal).then(() => 'stopped'),
        new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2000)),
      ]);
      expect(outcome).toBe('stopped');
      expect(sleeps.every((signal) => signal.aborted)).toBe(true);
      expect(stopping.http.exchanges).toEqual([expect.objectContaining({ status: 503, injected: true })]);
    } finally {
      await stopping.close();
    }
  });

  it('run() drains the queue and wakes up for new records', async () => {
    logPlays(fx.log, 2500);
    const controller = new AbortController();
    const running = fx.shipper.run(controller.signal);
    await waitFor(async () => (await platform.plays(fx.deviceId)) === 2500);
    // Three batches took the platform's burst; ten seconds on by its clock there is room for the next.
    platform.setClockOffset(10_000);
    logPlays(fx.log, 1);
    fx.shipper.wake();
    await waitFor(async () => (await platform.plays(fx.deviceId)) === 2501);
    controller.abort();
    await running;
    expect(fx.log.stats().queueDepth).toBe(0);
    expect(fx.http.exchanges.map((r) => r.status)).toEqual([200, 200, 200, 200]);
  });

  it('run() counts the idle pause from the last answer, so the next batch finds the connection still open', async () => {
    await fx.close();
    // A steady clock that moves only by the shipper's own pauses, and the pauses it asks for.
    let steadyMs = 0;
    const waits: number[] = [];
    const controller = new AbortController();
    fx = createShippingFixture({
      dir: dir.path,
      agentsUrl: platform.agentsUrl,
      deviceId: fx.deviceId,
      keys: fx.keys,
      overrides: {
        minIntervalMs: 10_000,
        idleIntervalMs: 60_000,
        clock: new CorrectedClock({ now: () => new Date() }, 86_400_000, 0, undefined, {
          monotonic: () => steadyMs,
        }),
        sleep: async (ms) => {
          waits.push(ms);
          steadyMs += ms;
          if (waits.length === 1) logPlays(fx.log, 1);
          if (waits.length === 4) controller.abort();
        },
      },
    });
    await fx.shipper.run(controller.signal);
    // Nothing queued and nothing answered yet: the whole idle interval. Then the play is sent, min_interval, an empty
    // look, and the idle pause is what is left of 60 s since the answer (not 60 s more: 70 s would outlast the
    // platform's keep-alive); a look finding nothing a whole idle interval after the answer waits all of it again.
    expect(waits).toEqual([60_000, 10_000, 50_000, 60_000]);
    expect(await platform.plays(fx.deviceId)).toBe(1);
  });
});

describe('shipping edge cases against a mocked platform', () => {
  let dir: ReturnType<typeof tempDir>;
  let mock: MockAgent;
  let fx: ShippingFixture;

  beforeEach(() => {
    dir = tempDir();
    mock = new MockAgent();
    mock.disableNetConnect();
    fx = createShippingFixture({ dir: dir.path, agentsUrl: 'http://platform.test', dispatcher: mock });
  });
  afterEach(async () => {
    await fx.close();
    await mock.close();
    dir.cleanup();
  });

  it('honours a Retry-After given as an HTTP date', async () => {
    logPlays(fx.log, 1);
    const later = new Date(Date.now() + 30_000);
    mock
      .get('http://platform.test')
      .intercept({ path: '/s/v1/telemetry', method: 'POST' })
      .reply(429, { code: 'rate_limited' }, { headers: { 'retry-after': later.toUTCString() } });
    const outcome = await fx.shipper.sendOnce();
    if (outcome.kind !== 'retry') throw new Error('expected retry');
    expect(outcome.delayMs).toBeGreaterThan(25_000);
    expect(outcome.delayMs).toBeLessThanOrEqual(30_000);
  });

  it('does not move its clock for a Date header beyond the bound', async () => {
    logPlays(fx.log, 1);
    mock
      .get('http://platform.test')
      .intercept({ path: '/s/v1/telemetry', method: 'POST' })
      .reply(
        503,
        { code: 'service_unavailable' },
        { headers: { date: new Date(Date.now() + 3 * 86_400_000).toUTCString() } },
      );
    await fx.shipper.sendOnce();
    expect(fx.clock.offset).toBe(0);
  });

  it('sends the X-Service-Signature header over the exact body', async () => {
    logPlays(fx.log, 1);
    let seen: { body: string; signature: string } | null = null;
    mock
      .get('http://platform.test')
      .intercept({ path: '/s/v1/telemetry', method: 'POST' })
      .reply((options) => {
        const headers = options.headers as Record<string, string>;
        seen = { body: String(options.body), signature: headers['x-service-signature']! };
        return {
          statusCode: 200,
          data: {
            batch_seq: 1,
            received: 1,
            accepted: 1,
            duplicates: 0,
            refused: 0,
            flagged: 0,
            duplicate: false,
            items: [],
          },
        };
      });
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'answered' });
    expect(seen).not.toBeNull();
    expect(es256Verify(fx.keys.publicKey, Buffer.from(seen!.body), seen!.signature)).toBe(true);
  });

  it('does not mark records sent when the answer is for another batch or malformed', async () => {
    logPlays(fx.log, 1);
    const pool = mock.get('http://platform.test');
    pool.intercept({ path: '/s/v1/telemetry', method: 'POST' }).reply(200, { batch_seq: 99, received: 1 });
    pool.intercept({ path: '/s/v1/telemetry', method: 'POST' }).reply(200, 'not json');
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'answer_invalid' });
    expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'answer_invalid' });
    expect(fx.log.stats().queueDepth).toBe(1);
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const start = Date.now();
  while (!(await condition())) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
