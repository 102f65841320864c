import { almatyDate } from '@ooh/protocol';
import fc from 'fast-check';
import { expect, test } from 'vitest';
import { almatyDayOf, judgeRecords, settle } from '../../src/pop/judge.js';

test('almatyDayOf (one tz lookup per UTC hour) agrees with the protocol calendar, across the 2024 offset change', () => {
  fc.assert(
    fc.property(
      fc.date({
        min: new Date('1931-01-01T00:00:00Z'),
        max: new Date('2040-01-01T00:00:00Z'),
        noInvalidDate: true,
      }),
      (instant) => {
        expect(almatyDayOf(instant)).toBe(almatyDate(instant));
      },
    ),
    { numRuns: 2000 },
  );
  // 2024-03-01: Almaty went from +06 to +05 at local midnight, so 2024-02-29 lasted 25 hours.
  expect(almatyDayOf(new Date('2024-02-29T17:59:59.999Z'))).toBe('2024-02-29');
  expect(almatyDayOf(new Date('2024-02-29T18:30:00.000Z'))).toBe('2024-02-29');
  expect(almatyDayOf(new Date('2024-02-29T19:00:00.000Z'))).toBe('2024-03-01');
});

test('dates in other RFC 3339 forms are read as the instants they name', () => {
  const player = { key: 'device:x', structureId: 's', structureCode: 'S' };
  const receivedAt = new Date('2026-11-20T06:00:00Z');
  const verdicts = judgeRecords(
    [
      {
        kind: 'play',
        seq: 1,
        approval_number: 'A',
        media_sha256: 'a'.repeat(64),
        start: '2026-11-20T10:00:00+05:00',
        end: '2026-11-20T05:00:15.25Z',
      },
      {
        kind: 'play',
        seq: 2,
        approval_number: 'A',
        media_sha256: 'a'.repeat(64),
        start: '2026-11-20t05:00:00z',
        duration_ms: 2000,
      },
    ],
    { channel: 'agent', receivedAt, attested: false, playerOf: () => player, approval: () => undefined },
  );
  const rows = settle(verdicts, new Map()).rows;
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  expect(rows.map((r) => [iso(r.startAt), iso(r.endAt)])).toEqual([
    ['2026-11-20T05:00:00.000Z', '2026-11-20T05:00:15.250Z'],
    ['2026-11-20T05:00:00.000Z', null],
  ]);
});

test('a record refused for its shape still has its number read: duplicate at or below the mark, taken above it', () => {
  const player = { key: 'cms:i:screen-1', structureId: 's', structureCode: 'S' };
  const receivedAt = new Date('2026-11-20T06:00:00Z');
  const play = (seq: unknown, extra: Record<string, unknown> = {}) => ({
    kind: 'play',
    seq,
    player: 'screen-1',
    play_id: `p${String(seq)}`,
    approval_number: 'A',
    media_sha256: 'a'.repeat(64),
    start: '2026-11-20T05:00:00.000Z',
    end: '2026-11-20T05:00:10.000Z',
    duration_ms: 10_000,
    ...extra,
  });
  const verdicts = judgeRecords(
    [
      play(4, { media_sha256: 'A'.repeat(64) }), // at the mark, bad hash: duplicate
      play(5, { kind: 'tamper' }), // above the mark, not a play from a CMS: refused, 5 taken
      play(5), // its number was taken: duplicate
      play(6, { player: 'screen-9' }), // unknown player: refused, no number taken
      play(0.5, { media_sha256: 'A'.repeat(64) }), // no valid seq: refused, no number read
      play(6, { player: 42 }), // a player that is no text: refused, no number read
      play(6),
    ],
    {
      channel: 'cms',
      receivedAt,
      attested: true,
      playerOf: (record) => (record.player === 'screen-1' ? player : null),
      approval: () => undefined,
    },
  );
  const settled = settle(verdicts, new Map([[player.key, 4]]));
  expect(settled.items).toEqual([
    { index: 0, status: 'duplicate' },
    { index: 1, status: 'refused', reason: 'kind_not_allowed' },
    { index: 2, status: 'duplicate' },
    { index: 3, status: 'refused', reason: 'player_unknown' },
    { index: 4, status: 'refused', reason: 'invalid_record' },
    { index: 5, status: 'refused', reason: 'invalid_record' },
    // approval A is unknown to this context: flagged, and counted.
    expect.objectContaining({ index: 6, status: 'flagged' }),
  ]);
  expect([settled.accepted, settled.duplicates, settled.refused]).toEqual([1, 2, 4]);
  expect(settled.highWater.get(player.key)).toBe(6);
});
