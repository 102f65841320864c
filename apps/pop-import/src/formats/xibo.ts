import { sha256Hex } from '@ooh/crypto';
import { CsvError, parseCsv } from './csv.js';
import { ExportError, type ReadResult, type RefusedRow, type SourcePlay } from './source.js';
import { instantOf, parseTimeText } from '../time-zone.js';

/*
 * Xibo CMS proof-of-play export (Reporting > Proof of Play > Export, xibo-cms lib/Controller/Stats.php `export()`):
 *
 *   Stat Date,Type,FromDT,ToDT,Layout,Campaign,Display,Media,Tag,Duration,Count,Engagements
 *
 * one row per statistics record, written by fputcsv; times as "Y-m-d H:i:s" in the CMS's time zone (or UTC when
 * "output in UTC" was ticked), never with an offset. Type is layout, media, widget or event (lower case): a media or
 * widget row is one play of that item on the Display, the others are the layout around it and engagement events.
 * Duration is in seconds. Count is 1 for a play; a player that aggregates its statistics (hourly or daily) reports
 * one row for many plays with Count > 1, which has no times of its own and is refused (issue 20 item 2).
 * Names, not ids, identify the display and the media: the mapping file is keyed by them.
 */

export const XIBO_HEADER = [
  'Stat Date',
  'Type',
  'FromDT',
  'ToDT',
  'Layout',
  'Campaign',
  'Display',
  'Media',
  'Tag',
  'Duration',
  'Count',
  'Engagements',
] as const;

/** The columns the import reads; the others may be absent (older CMS versions have no Campaign). */
const NEEDED = ['Type', 'FromDT', 'ToDT', 'Layout', 'Display', 'Media', 'Duration', 'Count'] as const;
type Column = (typeof NEEDED)[number];

const PLAY_TYPES = new Set(['media', 'widget']);

/** Whether the first line of a file is Xibo's header. */
export function looksLikeXibo(firstLine: string): boolean {
  const names = new Set(firstLine.split(',').map((name) => name.trim().replace(/^"|"$/g, '')));
  return NEEDED.every((name) => names.has(name));
}

/** play_id from the row's own identifiers and times as written: the same row always gives the same id. */
function xiboPlayId(row: Record<Column, string>): string {
  const identity = JSON.stringify([
    row.Display,
    row.Layout,
    row.Media,
    row.Type.toLowerCase(),
    row.FromDT,
    row.ToDT,
  ]);
  return `xibo-${sha256Hex(identity).slice(0, 32)}`;
}

export function readXibo(text: string, timeZone: string | null): ReadResult {
  let rows: ReturnType<typeof parseCsv>;
  try {
    rows = parseCsv(text);
  } catch (error) {
    if (error instanceof CsvError) {
      throw new ExportError('unreadable', `line ${error.line}: ${error.message}`);
    }
    throw error;
  }
  const header = rows[0];
  if (!header) throw new ExportError('bad_header', 'the file is empty');
  const index = new Map(header.fields.map((name, i) => [name.trim(), i]));
  const missing = NEEDED.filter((name) => !index.has(name));
  if (missing.length > 0) {
    throw new ExportError(
      'bad_header',
      `line 1 is not a Xibo proof-of-play header: ${missing.join(', ')} missing (expected ${XIBO_HEADER.join(',')})`,
    );
  }
  const plays: SourcePlay[] = [];
  const refused: RefusedRow[] = [];
  const notPlays: Record<string, number> = {};
  let rowsRead = 0;
  for (const { line, fields } of rows.slice(1)) {
    rowsRead += 1;
    const row = Object.fromEntries(NEEDED.map((name) => [name, fields[index.get(name)!] ?? ''])) as Record<
      Column,
      string
    >;
    const type = row.Type.trim().toLowerCase();
    if (!PLAY_TYPES.has(type)) {
      const kind = type || '(no type)';
      notPlays[kind] = (notPlays[kind] ?? 0) + 1;
      continue;
    }
    const refuse = (reason: RefusedRow['reason'], detail: string) => refused.push({ line, reason, detail });
    const count = row.Count.trim();
    // Records made before Xibo 2.1 have no count: the sanitizer writes 0. One play either way.
    if (!/^\d+$/.test(count === '' ? '0' : count)) {
      refuse('bad_row', `Count is ${JSON.stringify(row.Count)}, not a whole number`);
      continue;
    }
    if (Number(count) > 1) {
      refuse('aggregated_row', `Count ${count}: one row for ${count} plays, without their times`);
      continue;
    }
    const from = parseTimeText(row.FromDT);
    const to = parseTimeText(row.ToDT);
    if (!from || !to) {
      refuse(
        'bad_row',
        `FromDT ${JSON.stringify(row.FromDT)} or ToDT ${JSON.stringify(row.ToDT)} is not a time`,
      );
      continue;
    }
    const start = instantOf(from, timeZone);
    const end = instantOf(to, timeZone);
    if (!start.ok || !end.ok) {
      const reason = (!start.ok ? start : end) as { reason: 'no_time_zone' | 'time_not_in_zone' };
      if (reason.reason === 'no_time_zone') {
        throw new ExportError(
          'no_time_zone',
          `line ${line}: the export's times carry no time zone (Xibo writes the CMS's local time, or UTC when ` +
            `"output in UTC" was ticked): give it with --timezone, e.g. --timezone Asia/Almaty or --timezone UTC`,
        );
      }
      refuse('time_not_in_zone', `${row.FromDT} to ${row.ToDT} does not exist in ${timeZone}`);
      continue;
    }
    const seconds = row.Duration.trim();
    if (!/^\d+$/.test(seconds)) {
      refuse('bad_row', `Duration is ${JSON.stringify(row.Duration)}, not whole seconds`);
      continue;
    }
    if (row.Media.trim() === '') {
      refuse('media_missing', `a ${type} row without a Media name`);
      continue;
    }
    plays.push({
      line,
      display: row.Display.trim(),
      media: row.Media.trim(),
      startMs: start.ms,
      endMs: end.ms,
      // Xibo's Duration is the time on screen in seconds; without one, the span between the two times.
      durationMs: Number(seconds) > 0 ? Number(seconds) * 1000 : end.ms - start.ms,
      playId: xiboPlayId(row),
    });
  }
  return { format: 'xibo', rows: rowsRead, plays, refused, notPlays };
}
