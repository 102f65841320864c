import { sha256Hex } from '@ooh/crypto';
import { compiledCheck, SignedTelemetryBatch } from '@ooh/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createShippingFixture, logPlays, type ShippingFixture } from '../helpers/shipping-fixture.js';
import { tempDir } from '../helpers/temp.js';

describe('batch cutting', () => {
  let dir: ReturnType<typeof tempDir>;
  let fx: ShippingFixture;

  beforeEach(() => {
    dir = tempDir();
    fx = createShippingFixture({ dir: dir.path, agentsUrl: 'http://127.0.0.1:9' });
  });
  afterEach(async () => {
    await fx.close();
    dir.cleanup();
  });

  it('cuts up to 1000 events per batch, in seq order, chained by prev_sha256', () => {
    logPlays(fx.log, 2500);
    const now = new Date();
    const seen: { batchSeq: number; first: number; last: number; sha: string; prev: string }[] = [];
    for (let i = 0; i < 3; i++) {
      const batch = fx.batches.pendingOrCut({ deviceId: fx.deviceId, now })!;
      const body = JSON.parse(batch.body.toString('utf8'));
      expect(compiledCheck(SignedTelemetryBatch).Check(body)).toBe(true);
      expect(body.schema).toBe('service.pop/1');
      expect(body.batch_seq).toBe(batch.batchSeq);
      expect(body.device_id).toBe(fx.deviceId);
      expect(body.events.map((e: { seq: number }) => e.seq)).toEqual(
        Array.from({ length: batch.eventCount }, (_, k) => batch.firstSeq + k),
      );
      expect(batch.bodySha256).toBe(sha256Hex(batch.body));
      seen.push({
        batchSeq: batch.batchSeq,
        first: batch.firstSeq,
        last: batch.lastSeq,
        sha: batch.bodySha256,
        prev: body.prev_sha256,
      });
      // Until the pending batch is answered, the same batch comes back, byte for byte.
      expect(fx.batches.pendingOrCut({ deviceId: fx.deviceId, now })!.body.equals(batch.body)).toBe(true);
      fx.batches.storeAnswer(batch.batchSeq, '{}', now);
    }
    expect(seen.map((s) => [s.batchSeq, s.first, s.last])).toEqual([
      [1, 1, 1000],
      [2, 1001, 2000],
      [3, 2001, 2500],
    ]);
    expect(seen[0]!.prev).toBe('');
    expect(seen[1]!.prev).toBe(seen[0]!.sha);
    expect(seen[2]!.prev).toBe(seen[1]!.sha);
    expect(fx.batches.pendingOrCut({ deviceId: fx.deviceId, now })).toBeNull();
    expect(fx.log.stats().queueDepth).toBe(0);
  });

  it('keeps a body under the byte limit by cutting fewer events', () => {
    logPlays(fx.log, 50);
    const batch = fx.batches.pendingOrCut({ deviceId: fx.deviceId, now: new Date(), maxBytes: 5000 })!;
    expect(batch.body.length).toBeLessThanOrEqual(5000);
    expect(batch.eventCount).toBeGreaterThan(1);
    expect(batch.eventCount).toBeLessThan(50);
    expect(JSON.parse(batch.body.toString()).events).toHaveLength(batch.eventCount);
  });

  it('counts records as queued until the answer is stored', () => {
    logPlays(fx.log, 10);
    const batch = fx.batches.pendingOrCut({ deviceId: fx.deviceId, now: new Date() })!;
    expect(fx.log.stats()).toMatchObject({ queueDepth: 10, unbatched: 0 });
    logPlays(fx.log, 2);
    expect(fx.log.stats()).toMatchObject({ queueDepth: 12, unbatched: 2 });
    fx.batches.storeAnswer(batch.batchSeq, '{}', new Date());
    expect(fx.log.stats()).toMatchObject({ queueDepth: 2, unbatched: 2 });
  });

  it('re-signs with a fresh ts: same events, same batch_seq, same prev_sha256', () => {
    logPlays(fx.log, 5);
    const batch = fx.batches.pendingOrCut({
      deviceId: fx.deviceId,
      now: new Date('2026-11-21T09:00:00.000Z'),
    })!;
    const fresh = fx.batches.refreshTs(batch.batchSeq, fx.deviceId, new Date('2026-11-21T09:07:00.000Z'));
    const before = JSON.parse(batch.body.toString());
    const after = JSON.parse(fresh.body.toString());
    expect(after.ts).toBe('2026-11-21T09:07:00.000Z');
    expect({ ...after, ts: before.ts }).toEqual(before);
    expect(fresh.batchSeq).toBe(batch.batchSeq);
    expect(fresh.body.equals(batch.body)).toBe(false);
    // The events part is byte-identical.
    const eventsOf = (b: Buffer) => b.toString().slice(b.toString().indexOf('"events":'));
    expect(eventsOf(fresh.body)).toBe(eventsOf(batch.body));
  });
});
