import { sha256Hex } from '@ooh/crypto';
import { checkPopRecord, CmsBatch, collectFieldErrors, LIMITS } from '@ooh/protocol';
import { describe, expect, test } from 'vitest';
import type { SourcePlay } from '../src/formats/source.js';
import type { MappingFile, MediaTarget } from '../src/mapping.js';
import {
  BODY_MAX_BYTES,
  type Counters,
  fingerprintOf,
  type MappedPlay,
  mapPlays,
  planBatches,
} from '../src/plan.js';

const SOURCE = '6a0f4f5e-2c1b-4d7a-9b3e-0c5d8e9f1a2b';
const TEA: MediaTarget = { approval_number: 'APR-2026-000101', media_sha256: 'a'.repeat(64) };
const FRESH: Counters = { batchSeq: 0, prevSha256: '', seqs: new Map() };
const T = Date.parse('2026-11-19T04:00:00.000Z');

function plays(count: number, players = ['p1', 'p2', 'p3']): MappedPlay[] {
  return Array.from({ length: count }, (_, i) => ({
    line: i + 2,
    player: players[i % players.length]!,
    playId: `play-${i}`,
    target: TEA,
    startMs: T + i * 15_000,
    endMs: T + i * 15_000 + 15_000,
    durationMs: 15_000,
  }));
}

type Body = {
  batch_seq: number;
  prev_sha256: string;
  records: { seq: number; player: string; play_id: string }[];
};
const parse = (body: Buffer) => JSON.parse(body.toString('utf8')) as Body;

describe('planning batches: the same plays make the same bytes', () => {
  test('bodies are CMS batches of valid CMS records, numbered per player from 1', () => {
    const plan = planBatches(plays(7), SOURCE, FRESH);
    expect(plan.batches).toHaveLength(1);
    const body = JSON.parse(plan.batches[0]!.body.toString('utf8')) as { records: unknown[] };
    expect(collectFieldErrors(CmsBatch, body)).toEqual([]);
    for (const record of body.records) expect(checkPopRecord(record, 'cms').ok).toBe(true);
    expect(parse(plan.batches[0]!.body).records.map((r) => [r.player, r.seq])).toEqual([
      ['p1', 1],
      ['p2', 1],
      ['p3', 1],
      ['p1', 2],
      ['p2', 2],
      ['p3', 2],
      ['p1', 3],
    ]);
    expect(plan.end.seqs).toEqual(
      new Map([
        ['p1', 3],
        ['p2', 2],
        ['p3', 2],
      ]),
    );
    expect(plan.batches[0]!.sha256).toBe(sha256Hex(plan.batches[0]!.body));
    // spec: "sent_at ... optional": a time of cutting would make a re-cut batch differ.
    expect(plan.batches[0]!.body.toString('utf8')).not.toContain('sent_at');
  });

  test('the order of the rows in the export does not matter', () => {
    // Rows as an export gives them, with equal start times across screens (ties the sort must break the same way).
    const rows: SourcePlay[] = Array.from({ length: 50 }, (_, i) => ({
      line: i + 2,
      display: `screen-${i % 3}`,
      media: 'tea.mp4',
      startMs: T + Math.floor(i / 3) * 15_000,
      endMs: T + Math.floor(i / 3) * 15_000 + 15_000,
      durationMs: 15_000,
      playId: `row-${i}`,
    }));
    const mapping: MappingFile = {
      players: { 'screen-0': 'p1', 'screen-1': 'p2', 'screen-2': 'p3' },
      media: { 'tea.mp4': TEA },
    };
    // The same rows in another order (and other line numbers, as another export file would give them).
    const reordered = [...rows].reverse().map((row, i) => ({ ...row, line: i + 2 }));
    const a = mapPlays(rows, mapping).plays;
    const b = mapPlays(reordered, mapping).plays;
    const first = planBatches(a, SOURCE, FRESH, { maxRecords: 20 });
    const second = planBatches(b, SOURCE, FRESH, { maxRecords: 20 });
    expect(first.batches).toHaveLength(3);
    expect(second.batches.map((x) => x.sha256)).toEqual(first.batches.map((x) => x.sha256));
    expect(fingerprintOf(b)).toBe(fingerprintOf(a));
    expect(fingerprintOf(a.slice(1))).not.toBe(fingerprintOf(a));
  });

  test('batches are cut at the record limit and chained by prev_sha256', () => {
    const plan = planBatches(plays(45), SOURCE, FRESH, { maxRecords: 20 });
    expect(plan.batches.map((b) => [b.batchSeq, b.records])).toEqual([
      [0, 20],
      [1, 20],
      [2, 5],
    ]);
    const bodies = plan.batches.map((b) => parse(b.body));
    expect(bodies[0]!.prev_sha256).toBe('');
    expect(bodies[1]!.prev_sha256).toBe(plan.batches[0]!.sha256);
    expect(bodies[2]!.prev_sha256).toBe(plan.batches[1]!.sha256);
    // seq runs on across batches.
    expect(bodies[1]!.records[0]).toMatchObject({ player: 'p3', seq: 7 });
    expect(plan.end.batchSeq).toBe(3);
    expect(plan.end.prevSha256).toBe(plan.batches[2]!.sha256);
    // The export line of every record is kept for the answer's items.
    expect(plan.batches[2]!.lines).toEqual([42, 43, 44, 45, 46]);
  });

  test('batches are cut at the byte limit too, and never pass the spec limits', () => {
    const plan = planBatches(plays(100), SOURCE, FRESH, { maxBytes: 5000 });
    expect(plan.batches.length).toBeGreaterThan(2);
    for (const batch of plan.batches) expect(batch.body.length).toBeLessThanOrEqual(5000);
    expect(plan.batches.reduce((n, b) => n + b.records, 0)).toBe(100);
    expect(BODY_MAX_BYTES).toBeLessThan(LIMITS.cmsWireMaxBytes);
    const big = planBatches(plays(10_001), SOURCE, FRESH);
    expect(big.batches.map((b) => b.records)).toEqual([10_000, 1]);
  });

  test('a later plan numbers on from where the last one ended; a plan can be made again from its start', () => {
    const day1 = planBatches(plays(10), SOURCE, FRESH, { maxRecords: 4 });
    const day2Plays = plays(6, ['p1', 'p4']).map((p) => ({ ...p, playId: `next-${p.playId}` }));
    const day2 = planBatches(day2Plays, SOURCE, day1.end, { maxRecords: 4 });
    expect(day2.batches[0]!.batchSeq).toBe(3);
    expect(parse(day2.batches[0]!.body).prev_sha256).toBe(day1.batches[2]!.sha256);
    expect(parse(day2.batches[0]!.body).records.slice(0, 2)).toMatchObject([
      { player: 'p1', seq: 5 },
      { player: 'p4', seq: 1 },
    ]);
    // The start keeps only this plan's players: enough to make the same bytes again.
    expect(day2.start).toEqual({
      batchSeq: 3,
      prevSha256: day1.end.prevSha256,
      seqs: new Map([
        ['p1', 4],
        ['p4', 0],
      ]),
    });
    const again = planBatches(day2Plays, SOURCE, day2.start, { maxRecords: 4 });
    expect(again.batches.map((b) => b.body.toString('hex'))).toEqual(
      day2.batches.map((b) => b.body.toString('hex')),
    );
    expect(day2.end.seqs.get('p2')).toBe(3);
  });

  test('an authority slot play carries its slot and no approval number', () => {
    const slot = plays(1).map((p) => ({
      ...p,
      target: { slot: 'gov' as const, media_sha256: 'b'.repeat(64) },
    }));
    const record = parse(planBatches(slot, SOURCE, FRESH).batches[0]!.body).records[0] as unknown as Record<
      string,
      unknown
    >;
    expect(record['slot']).toBe('gov');
    expect(record).not.toHaveProperty('approval_number');
    expect(checkPopRecord(record, 'cms').ok).toBe(true);
  });

  test('nothing to send makes no batch', () => {
    const plan = planBatches([], SOURCE, FRESH);
    expect(plan.batches).toEqual([]);
    expect(plan.end).toEqual(FRESH);
  });
});
