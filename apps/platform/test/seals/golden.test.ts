import { readFileSync } from 'node:fs';
import { canonicalize, merkleRoot, sha256, sha256Hex } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { sealDay } from '../../src/seals/index.js';
import { insertBatch, playsIn, startSealPlatform } from './helpers.js';

interface GoldenBatch {
  id: number;
  owner: string;
  batch_seq: number;
  received_at: string;
  body: string;
  channel: 'agent' | 'cms';
}
const fixture = (name: string) =>
  JSON.parse(readFileSync(new URL(`../fixtures/seal-golden/${name}`, import.meta.url), 'utf8'));
const input = fixture('batches.json') as { day: string; env: string; batches: GoldenBatch[] };
const expected = fixture('expected.json') as {
  leaves: { leaf: Record<string, unknown>; canonical: string; leaf_sha256: string }[];
  root: string;
  body: Record<string, unknown>;
  body_canonical: string;
  body_sha256: string;
};

describe('golden vector (test/fixtures/seal-golden)', () => {
  test('the fixture is consistent with itself: leaves, root, body and hash recomputed from the batches', () => {
    for (const l of expected.leaves) {
      expect(canonicalize(l.leaf)).toBe(l.canonical);
      expect(sha256Hex(l.canonical)).toBe(l.leaf_sha256);
    }
    expect(Buffer.from(merkleRoot(expected.leaves.map((l) => sha256(l.canonical)))).toString('hex')).toBe(
      expected.root,
    );
    const inDay = input.batches.filter(
      (b) => b.received_at >= '2026-03-14T19:00:00' && b.received_at < '2026-03-15T19:00:00',
    );
    expect(inDay.map((b) => b.id).sort()).toEqual(expected.leaves.map((l) => l.leaf['batch']).sort());
    expect(expected.body['record_count']).toBe(inDay.reduce((n, b) => n + playsIn(b.body), 0));
    expect(canonicalize(expected.body)).toBe(expected.body_canonical);
    expect(sha256Hex(expected.body_canonical)).toBe(expected.body_sha256);
  });

  describe('the platform seals the golden day to exactly these bytes', () => {
    let p: Awaited<ReturnType<typeof startSealPlatform>>;
    beforeAll(async () => {
      p = await startSealPlatform(new Date('2026-03-16T06:00:00Z'));
      for (const b of input.batches) {
        await insertBatch(p.database.db, {
          id: b.id,
          owner: b.owner,
          batchSeq: b.batch_seq,
          body: b.body,
          receivedAt: b.received_at,
          channel: b.channel,
        });
      }
    });
    afterAll(async () => {
      await p?.close();
    });

    test('root, body bytes and body hash', async () => {
      const { seal } = await sealDay(p.ctx, input.day);
      expect(seal.body.toString('utf8')).toBe(expected.body_canonical);
      expect(seal.body_sha256).toBe(expected.body_sha256);
      expect(JSON.parse(seal.body.toString('utf8')).root).toBe(expected.root);
    });
  });
});
