import { ExportError, type ReadResult, type RefusedRow, type SourcePlay } from './source.js';
import { instantOf, parseTimeText } from '../time-zone.js';

/*
 * Broadsign POP Log playlog (docs.broadsign.com, "Broadsign POP Log"): a daily file playlog-YYYY-MM-DD.txt (gzipped
 * after 3 days) with one tab-separated line per ad copy repetition on each player, no header. A line is a
 * successful POP: "an ad copy has played the entire time length, with a tolerance of 500 ms". Its columns, in the
 * order the file has them (see test/fixtures/README.md for where this layout comes from):
 *
 *   0 player id (resource type host)    1 end of the play (date and time, no offset)   2 duration, milliseconds
 *   3 ad copy id (content)              4 a Broadsign code (2)                          5 campaign id (reservation)
 *   6 frame id (skin)                   7 display unit id                               8 impressions
 *   9-11 not used here                  12 extra data (JSON)
 *
 * The mapping file is keyed by the player id and the ad copy id.
 */

const PLAYER = 0;
const END = 1;
const DURATION = 2;
const AD_COPY = 3;
const FRAME = 6;
const DISPLAY_UNIT = 7;
const MIN_COLUMNS = DISPLAY_UNIT + 1;

const ID = /^\d+$/;

/** Whether the first line of a file looks like a playlog line: tab-separated, a numeric player id first. */
export function looksLikeBroadsign(firstLine: string): boolean {
  const fields = firstLine.split('\t');
  return fields.length >= MIN_COLUMNS && ID.test(fields[PLAYER]!.trim());
}

/**
 * play_id from the source's identifiers: a frame plays one ad copy at a time, so player, frame, ad copy and the end
 * time as written (its digits) identify the play.
 */
function broadsignPlayId(player: string, frame: string, adCopy: string, end: string): string {
  return `bs-${player}-${frame}-${adCopy}-${end.replace(/\D/g, '')}`;
}

export function readBroadsign(text: string, timeZone: string | null): ReadResult {
  const plays: SourcePlay[] = [];
  const refused: RefusedRow[] = [];
  let rows = 0;
  const lines = text.split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const line = i + 1;
    const content = i === 0 ? raw.replace(/^\uFEFF/, '') : raw;
    if (content.trim() === '') continue;
    rows += 1;
    const fields = content.split('\t').map((field) => field.trim());
    const refuse = (reason: RefusedRow['reason'], detail: string) => refused.push({ line, reason, detail });
    if (fields.length < MIN_COLUMNS) {
      refuse('bad_row', `${fields.length} tab-separated columns, a playlog line has at least ${MIN_COLUMNS}`);
      continue;
    }
    const player = fields[PLAYER]!;
    const adCopy = fields[AD_COPY]!;
    const frame = fields[FRAME]!;
    const endText = fields[END]!;
    if (!ID.test(player) || !ID.test(adCopy) || !ID.test(frame)) {
      refuse(
        'bad_row',
        `player ${JSON.stringify(player)}, ad copy ${JSON.stringify(adCopy)} or frame are not ids`,
      );
      continue;
    }
    const durationText = fields[DURATION]!;
    if (!ID.test(durationText)) {
      refuse('bad_row', `duration ${JSON.stringify(durationText)} is not whole milliseconds`);
      continue;
    }
    const parsed = parseTimeText(endText);
    if (!parsed) {
      refuse('bad_row', `end ${JSON.stringify(endText)} is not a time`);
      continue;
    }
    const end = instantOf(parsed, timeZone);
    if (!end.ok) {
      if (end.reason === 'no_time_zone') {
        throw new ExportError(
          'no_time_zone',
          `line ${line}: the playlog's times carry no time zone: give the players' zone with --timezone, ` +
            'e.g. --timezone Asia/Almaty',
        );
      }
      refuse('time_not_in_zone', `${endText} does not exist in ${timeZone}`);
      continue;
    }
    const durationMs = Number(durationText);
    plays.push({
      line,
      display: player,
      media: adCopy,
      startMs: end.ms - durationMs,
      endMs: end.ms,
      durationMs,
      playId: broadsignPlayId(player, frame, adCopy, endText),
    });
  }
  return { format: 'broadsign', rows, plays, refused, notPlays: {} };
}
