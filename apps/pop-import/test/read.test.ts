import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { describe, expect, test } from 'vitest';
import { parseCsv } from '../src/formats/csv.js';
import { detectFormat, exportText, readExport } from '../src/formats/read.js';
import { ExportError } from '../src/formats/source.js';
import { MappingError, parseMapping } from '../src/mapping.js';
import { mapPlays } from '../src/plan.js';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url));
const ALMATY = 'Asia/Almaty';
const XIBO_HEADER =
  '"Stat Date",Type,FromDT,ToDT,Layout,Campaign,Display,Media,Tag,Duration,Count,Engagements';

/** An ExportError's code, or the value thrown when it is not one. */
function exportErrorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof ExportError) return error.code;
    throw error;
  }
  return 'no error';
}

describe('the Xibo proof-of-play export (test/fixtures/README.md)', () => {
  const text = exportText(fixture('xibo-proof-of-play-2026-11-19.csv'));

  test('is recognised by its header and read row by row, times in the CMS zone', () => {
    expect(detectFormat(text)).toBe('xibo');
    const read = readExport(text, { timeZone: ALMATY });
    expect(read.format).toBe('xibo');
    expect(read.rows).toBe(17);
    expect(read.notPlays).toEqual({ layout: 1, event: 1 });
    // Media and widget rows are plays; the hourly aggregate is refused, not made into plays.
    expect(read.plays).toHaveLength(14);
    expect(read.refused).toEqual([
      { line: 13, reason: 'aggregated_row', detail: 'Count 4: one row for 4 plays, without their times' },
    ]);
    const first = read.plays[0]!;
    expect(first).toMatchObject({ line: 3, display: 'ALM-0001 Abai / Dostyk', media: 'tea-autumn-15s.mp4' });
    // 09:00:00 in Almaty (UTC+5) is 04:00 UTC; Duration is in seconds.
    expect(new Date(first.startMs).toISOString()).toBe('2026-11-19T04:00:00.000Z');
    expect(new Date(first.endMs).toISOString()).toBe('2026-11-19T04:00:15.000Z');
    expect(first.durationMs).toBe(15_000);
    expect(first.playId).toMatch(/^xibo-[0-9a-f]{32}$/);
  });

  test('the same row gives the same play_id, another row another one', () => {
    const read = readExport(text, { timeZone: ALMATY });
    const byLine = new Map(read.plays.map((p) => [p.line, p.playId]));
    expect(byLine.get(10)).toBe(byLine.get(11)); // line 11 repeats line 10
    expect(new Set(read.plays.map((p) => p.playId)).size).toBe(read.plays.length - 1);
    expect(readExport(text, { timeZone: ALMATY }).plays.map((p) => p.playId)).toEqual(
      read.plays.map((p) => p.playId),
    );
  });

  test('an export without a time zone is refused unless one is given', () => {
    expect(exportErrorOf(() => readExport(text, { timeZone: null }))).toBe('no_time_zone');
    // Times that carry their own offset need no zone.
    const withOffsets = `${XIBO_HEADER}\n"2026-11-19 09:00:15",media,2026-11-19T09:00:00+05:00,2026-11-19T09:00:15+05:00,L,,D,m.mp4,,15,1,[]\n`;
    const read = readExport(withOffsets, { timeZone: null });
    expect(new Date(read.plays[0]!.startMs).toISOString()).toBe('2026-11-19T04:00:00.000Z');
    // A Xibo export made with "output in UTC" is read with --timezone UTC.
    const utc = readExport(text, { timeZone: 'UTC' });
    expect(new Date(utc.plays[0]!.startMs).toISOString()).toBe('2026-11-19T09:00:00.000Z');
  });

  test('aggregated rows (Count > 1) are refused; Count 0 (records before Xibo 2.1) is one play', () => {
    const rows = [
      `"x",media,"2026-11-19 09:00:00","2026-11-19 09:00:15",L,,D,m.mp4,,15,2,[]`,
      `"x",media,"2026-11-19 09:01:00","2026-11-19 09:01:15",L,,D,m.mp4,,15,0,[]`,
      `"x",media,"2026-11-19 09:02:00","2026-11-19 09:02:15",L,,D,m.mp4,,15,,[]`,
      `"x",media,"2026-11-19 09:03:00","2026-11-19 09:03:15",L,,D,m.mp4,,15,one,[]`,
    ];
    const read = readExport([XIBO_HEADER, ...rows].join('\n'), { timeZone: ALMATY });
    expect(read.refused.map((r) => [r.line, r.reason])).toEqual([
      [2, 'aggregated_row'],
      [5, 'bad_row'],
    ]);
    expect(read.plays.map((p) => p.line)).toEqual([3, 4]);
  });

  test('rows without usable times, durations or media are refused with their line', () => {
    const rows = [
      `"x",media,"2026-11-19 25:00:00","2026-11-19 25:00:15",L,,D,m.mp4,,15,1,[]`,
      `"x",media,"2026-02-30 09:00:00","2026-02-30 09:00:15",L,,D,m.mp4,,15,1,[]`,
      `"x",media,"2026-11-19 09:00:00","2026-11-19 09:00:15",L,,D,m.mp4,,1.5,1,[]`,
      `"x",widget,"2026-11-19 09:00:00","2026-11-19 09:00:15",L,,D,,,15,1,[]`,
    ];
    const read = readExport([XIBO_HEADER, ...rows].join('\r\n'), { timeZone: ALMATY });
    expect(read.refused.map((r) => [r.line, r.reason])).toEqual([
      [2, 'bad_row'],
      [3, 'bad_row'],
      [4, 'bad_row'],
      [5, 'media_missing'],
    ]);
  });

  test('a local time that a daylight-saving jump skipped is refused; a repeated one is read as its first', () => {
    const rows = [
      // Europe/Berlin: 29 March 2026 02:00-03:00 does not exist; 25 October 2026 02:30 happens twice.
      `"x",media,"2026-03-29 02:30:00","2026-03-29 02:30:15",L,,D,m.mp4,,15,1,[]`,
      `"x",media,"2026-10-25 02:30:00","2026-10-25 02:30:15",L,,D,m.mp4,,15,1,[]`,
    ];
    const read = readExport([XIBO_HEADER, ...rows].join('\n'), { timeZone: 'Europe/Berlin' });
    expect(read.refused.map((r) => [r.line, r.reason])).toEqual([[2, 'time_not_in_zone']]);
    expect(new Date(read.plays[0]!.startMs).toISOString()).toBe('2026-10-25T00:30:00.000Z');
  });

  test('a file that is not a Xibo export is refused whole', () => {
    expect(
      exportErrorOf(() => readExport('Type,FromDT\nmedia,x\n', { format: 'xibo', timeZone: ALMATY })),
    ).toBe('bad_header');
    expect(exportErrorOf(() => readExport(`${XIBO_HEADER}\n"x,media`, { timeZone: ALMATY }))).toBe(
      'unreadable',
    );
    expect(exportErrorOf(() => detectFormat('hello, world\n'))).toBe('unknown_format');
  });

  test('fields are read as fputcsv writes them: quotes doubled, line breaks and a BOM', () => {
    expect(parseCsv('\uFEFFa,"b ""c""","d\ne",\r\n\r\nx,y\n')).toEqual([
      { line: 1, fields: ['a', 'b "c"', 'd\ne', ''] },
      { line: 4, fields: ['x', 'y'] },
    ]);
    const event = readExport(text, { timeZone: ALMATY });
    expect(event.notPlays['event']).toBe(1);
  });
});

describe('the Broadsign playlog (test/fixtures/README.md)', () => {
  const bytes = fixture('playlog-2026-11-19.txt');

  test('is recognised by its first line and read line by line, duration in milliseconds', () => {
    const text = exportText(bytes);
    expect(detectFormat(text)).toBe('broadsign');
    const read = readExport(text, { timeZone: ALMATY });
    expect(read.rows).toBe(10);
    expect(read.plays).toHaveLength(9);
    expect(read.refused.map((r) => [r.line, r.reason])).toEqual([[9, 'bad_row']]);
    const first = read.plays[0]!;
    expect(first).toMatchObject({ line: 1, display: '100234', media: '5551001', durationMs: 15_000 });
    // The playlog gives the end; the start is the end less the duration.
    expect(new Date(first.endMs).toISOString()).toBe('2026-11-19T04:00:15.012Z');
    expect(new Date(first.startMs).toISOString()).toBe('2026-11-19T04:00:00.012Z');
    // play_id from the source's identifiers: player, frame, ad copy, end as written.
    expect(first.playId).toBe('bs-100234-880101-5551001-20261119090015012');
  });

  test('a gzipped playlog (Broadsign gzips them after 3 days) is read the same', () => {
    const plain = readExport(exportText(bytes), { timeZone: ALMATY });
    const gzipped = readExport(exportText(gzipSync(bytes)), { timeZone: ALMATY });
    expect(gzipped).toEqual(plain);
  });

  test('a playlog without a time zone is refused unless one is given', () => {
    expect(exportErrorOf(() => readExport(exportText(bytes), { timeZone: null }))).toBe('no_time_zone');
  });

  test('lines without ids, durations or times are refused with their line', () => {
    const line = (fields: string[]) => fields.join('\t');
    const good = [
      '100234',
      '2026-11-19T09:00:15.000',
      '15000',
      '5551001',
      '2',
      '7770001',
      '880101',
      '660201',
    ];
    const text = [
      line(good),
      line(['abc', ...good.slice(1)]),
      line([good[0]!, good[1]!, '15s', ...good.slice(3)]),
      line([good[0]!, 'yesterday', ...good.slice(2)]),
    ].join('\n');
    const read = readExport(text, { format: 'broadsign', timeZone: ALMATY });
    expect(read.plays.map((p) => p.line)).toEqual([1]);
    expect(read.refused.map((r) => [r.line, r.reason])).toEqual([
      [2, 'bad_row'],
      [3, 'bad_row'],
      [4, 'bad_row'],
    ]);
  });
});

describe('the mapping file', () => {
  test('names our players and approvals; what it does not name is not sent', () => {
    const read = readExport(exportText(fixture('xibo-proof-of-play-2026-11-19.csv')), { timeZone: ALMATY });
    const mapping = parseMapping(fixture('xibo-mapping.json').toString('utf8'));
    const mapped = mapPlays(read.plays, mapping);
    expect(mapped.refused.map((r) => [r.line, r.reason, r.detail])).toEqual([
      [6, 'unmapped_media', 'Clock'],
      [11, 'repeated_in_export', read.plays.find((p) => p.line === 11)!.playId],
      [15, 'unmapped_media', 'promo-not-submitted.mp4'],
      [16, 'unmapped_display', 'Office lobby test screen'],
    ]);
    expect(mapped.plays.map((p) => p.line)).toEqual([3, 4, 5, 7, 9, 10, 12, 14, 17, 18]);
    expect(mapped.plays.find((p) => p.line === 14)!.target).toEqual({
      slot: 'emergency',
      media_sha256: '2b4cf0864ab52d6328946efab75b2aead8661020f32c4cea4c0b1d38b9b19f24',
    });
  });

  test('a mapping that could never work is refused whole, with the paths', () => {
    const bad = (value: unknown) => {
      try {
        parseMapping(JSON.stringify(value));
      } catch (error) {
        if (error instanceof MappingError) return error.errors.map((e) => e.path);
        throw error;
      }
      return [];
    };
    expect(bad({ players: { 'Lobby screen': 'has spaces' }, media: {} })).toEqual(['/players/Lobby screen']);
    expect(
      bad({ players: {}, media: { 'a.mp4': { approval_number: 'APR-2026-000001', media_sha256: 'XYZ' } } }),
    ).not.toEqual([]);
    expect(
      bad({ players: {}, media: { 'a.mp4': { slot: 'ads', media_sha256: 'a'.repeat(64) } } }),
    ).not.toEqual([]);
    expect(bad({ players: {} })).toEqual(['/media']);
    expect(() => parseMapping('{')).toThrow(MappingError);
    // A display named like an object's own properties is an ordinary key.
    const odd = parseMapping('{"players":{"__proto__":"p1","constructor":"p2"},"media":{}}');
    const mapped = mapPlays(
      [
        { line: 1, display: '__proto__', media: 'm', startMs: 0, endMs: 1, durationMs: 1, playId: 'a' },
        { line: 2, display: 'toString', media: 'm', startMs: 0, endMs: 1, durationMs: 1, playId: 'b' },
      ],
      odd,
    );
    expect(mapped.refused.map((r) => [r.line, r.reason])).toEqual([
      [1, 'unmapped_media'],
      [2, 'unmapped_display'],
    ]);
  });
});
