import { createHash } from 'node:crypto';
import {
  addMonths,
  almatyMonth,
  almatyMonthEnd,
  almatyMonthStart,
  DAYPARTS,
  daypartOf,
  isCalendarMonth,
  SLOTS,
} from '@ooh/protocol';
import type { PlatformContext } from '../context.js';
import { withTransaction } from '../db/pool.js';
import { type NamedAdvertiser, namedAdvertiserGroups } from './advertisers.js';
import { csvRecord } from './csv.js';
import { buildDictionary, type CellStatus, COLUMNS, DAYPART_CODES, UNKNOWN_DAYPART } from './dictionary.js';
import {
  type DisclosureRules,
  isWithheld,
  type MarginTable,
  PartyPlays,
  primaryStatus,
  suppressComplementary,
} from './disclosure.js';
import {
  firstPlayMonth,
  insertRelease,
  listReleases,
  type MonthPlaysRow,
  monthPlays,
  readSettings,
  releaseExists,
  structureCodes,
} from './repository.js';

const HOUR_MS = 3_600_000;

/** The first day of the month and the first day after it, as 'YYYY-MM-DD'. */
function monthDays(month: string): { firstDay: string; endDay: string } {
  return { firstDay: `${month}-01`, endDay: `${addMonths(month, 1)}-01` };
}

/**
 * Epoch hour -> daypart for every hour of an Almaty month. Almaty's offset has been a whole number of hours since
 * 1930, so one UTC hour is one Almaty hour and the daypart of its first instant is the daypart of all of it.
 */
export function monthHourDayparts(month: string): { epochHours: number[]; dayparts: string[] } {
  const first = Math.floor(almatyMonthStart(month).getTime() / HOUR_MS);
  const end = Math.ceil(almatyMonthEnd(month).getTime() / HOUR_MS);
  const epochHours: number[] = [];
  const dayparts: string[] = [];
  for (let hour = first; hour < end; hour += 1) {
    epochHours.push(hour);
    dayparts.push(daypartOf(new Date(hour * HOUR_MS), DAYPARTS));
  }
  return { epochHours, dayparts };
}

/** A billable play's submitter and named advertiser; a billable row without them is a bug of the query. */
function billableParties(row: MonthPlaysRow, month: string): [string, NamedAdvertiser] {
  if (row.submitterId === null || row.advertiserName === null) {
    throw new Error(`release ${month}: billable plays without a submission (${row.district}/${row.format})`);
  }
  return [row.submitterId, { advertiserName: row.advertiserName, advertiserBin: row.advertiserBin }];
}

function* billable(rows: readonly MonthPlaysRow[]): Iterable<NamedAdvertiser> {
  for (const row of rows) {
    if (row.slot === null && row.advertiserName !== null) {
      yield { advertiserName: row.advertiserName, advertiserBin: row.advertiserBin };
    }
  }
}

/** The month's counted plays as the release's inputs. */
export interface ReleaseInput {
  month: string;
  rules: DisclosureRules;
  districts: readonly string[];
  formats: readonly string[];
  plays: readonly MonthPlaysRow[];
}

export interface ReleaseFiles {
  csv: Buffer;
  dictionary: Buffer;
}

interface CsvRow {
  table: string;
  district: string;
  format: string;
  daypart: string;
  slot: string;
  plays: number;
  status: CellStatus;
}

/**
 * The two files of a release (DESIGN.md section 7). Pure: the same input gives the same bytes. The cells table is
 * district × format × daypart with, per daypart, the district totals, format totals and the daypart total; every
 * value is judged by the disclosure rules, then complementary suppression runs on each daypart's table with its
 * margins. Slot plays are their own table (slot × district × format × daypart) with no totals, judged by the
 * operator rules only.
 */
export function buildReleaseFiles(input: ReleaseInput): ReleaseFiles {
  const { month, rules, districts, formats } = input;
  const districtIndex = new Map(districts.map((code, i) => [code, i]));
  const formatIndex = new Map(formats.map((code, i) => [code, i]));
  const daypartIndex = new Map(DAYPART_CODES.map((code, i) => [code, i]));
  const D = districts.length;
  const F = formats.length;
  const grid = () =>
    Array.from({ length: D + 1 }, () => Array.from({ length: F + 1 }, () => new PartyPlays(true)));
  const cells = DAYPART_CODES.map(grid);
  const slotCells = new Map(
    SLOTS.map((slot) => [
      slot,
      DAYPART_CODES.map(() =>
        Array.from({ length: D }, () => Array.from({ length: F }, () => new PartyPlays(false))),
      ),
    ]),
  );

  const named = namedAdvertiserGroups(billable(input.plays));
  for (const row of input.plays) {
    const d = districtIndex.get(row.district);
    const f = formatIndex.get(row.format);
    const p = daypartIndex.get(row.daypart);
    if (d === undefined || f === undefined || p === undefined) {
      throw new Error(
        `release ${month}: plays of an unknown code ${row.district}/${row.format}/${row.daypart}`,
      );
    }
    if (row.slot !== null) {
      slotCells.get(row.slot)![p]![d]![f]!.add(row.operatorId, null, row.plays);
    } else {
      const [submitter, advertiser] = billableParties(row, month);
      cells[p]![d]![f]!.add(row.operatorId, { named: named(advertiser), submitter }, row.plays);
    }
  }

  const rowsOut: CsvRow[] = [];
  const tables = cells.map((table) => {
    // Margins: column F holds the district totals, row D the format totals, [D][F] the daypart total.
    for (let d = 0; d < D; d += 1) {
      for (let f = 0; f < F; f += 1) {
        table[d]![F]!.addAll(table[d]![f]!);
        table[D]![f]!.addAll(table[d]![f]!);
        table[D]![F]!.addAll(table[d]![f]!);
      }
    }
    const margin: MarginTable = {
      rows: D,
      cols: F,
      plays: table.map((row) => row.map((value) => value.total)),
      status: table.map((row) => row.map((value) => primaryStatus(value, rules))),
    };
    suppressComplementary(margin);
    return margin;
  });

  const push = (
    table: string,
    district: string,
    format: string,
    daypart: string,
    slot: string,
    plays: number,
    status: CellStatus,
  ) => rowsOut.push({ table, district, format, daypart, slot, plays, status });
  DAYPART_CODES.forEach((daypart, p) => {
    const t = tables[p]!;
    for (let d = 0; d < D; d += 1) {
      for (let f = 0; f < F; f += 1)
        push('cells', districts[d]!, formats[f]!, daypart, '', t.plays[d]![f]!, t.status[d]![f]!);
    }
  });
  DAYPART_CODES.forEach((daypart, p) => {
    const t = tables[p]!;
    for (let d = 0; d < D; d += 1)
      push('district_totals', districts[d]!, '', daypart, '', t.plays[d]![F]!, t.status[d]![F]!);
  });
  DAYPART_CODES.forEach((daypart, p) => {
    const t = tables[p]!;
    for (let f = 0; f < F; f += 1)
      push('format_totals', '', formats[f]!, daypart, '', t.plays[D]![f]!, t.status[D]![f]!);
  });
  DAYPART_CODES.forEach((daypart, p) => {
    const t = tables[p]!;
    push('daypart_totals', '', '', daypart, '', t.plays[D]![F]!, t.status[D]![F]!);
  });
  for (const slot of SLOTS) {
    const bySlot = slotCells.get(slot)!;
    DAYPART_CODES.forEach((daypart, p) => {
      for (let d = 0; d < D; d += 1) {
        for (let f = 0; f < F; f += 1) {
          const value = bySlot[p]![d]![f]!;
          push(
            'slot_cells',
            districts[d]!,
            formats[f]!,
            daypart,
            slot,
            value.total,
            primaryStatus(value, rules),
          );
        }
      }
    });
  }

  let csv = csvRecord(COLUMNS);
  for (const row of rowsOut) {
    // A withheld value keeps its row with its status and no number; no_plays is published as 0.
    const plays = isWithheld(row.status) ? '' : String(row.plays);
    csv += csvRecord([month, row.table, row.district, row.format, row.daypart, row.slot, plays, row.status]);
  }
  const dictionary = buildDictionary({ rules, districts, formats, csvName: `plays-${month}.csv` });
  return {
    csv: Buffer.from(csv, 'utf8'),
    dictionary: Buffer.from(`${JSON.stringify(dictionary, null, 2)}\n`, 'utf8'),
  };
}

const sha256Hex = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/**
 * The latest month that may be released at `now`: DESIGN.md section 7 "A month is released lag_months full months
 * after its end", so month M is due from the first instant of M + 1 + lag_months (Almaty).
 */
export function latestDueMonth(now: Date, lagMonths: number): string {
  return addMonths(almatyMonth(now), -(1 + lagMonths));
}

/** True when month M may be released at `now`. */
export function isDue(month: string, now: Date, lagMonths: number): boolean {
  return isCalendarMonth(month) && month <= latestDueMonth(now, lagMonths);
}

/**
 * Builds every month that is due and has no release yet, from the month of the first counted play on; each month
 * once, under an advisory lock, so that platform instances running together build it once. A release is never
 * rebuilt: plays that arrive after it was built (up to 90 days late, DESIGN.md section 5) stay out of it.
 * Returns the months built by this call.
 */
export async function buildDueReleases(ctx: PlatformContext, now: Date = ctx.clock.now()): Promise<string[]> {
  const settings = await readSettings(ctx.db);
  const first = await firstPlayMonth(ctx.db);
  if (first === null) return [];
  const latest = latestDueMonth(now, settings.rules.lagMonths);
  const done = new Set((await listReleases(ctx.db)).map((r) => r.month));
  const built: string[] = [];
  for (let month = first; month <= latest; month = addMonths(month, 1)) {
    if (done.has(month)) continue;
    const stored = await withTransaction(ctx.db, async (client) => {
      const { rows } = await client.query<{ locked: boolean }>(
        `SELECT pg_try_advisory_xact_lock(hashtext('ooh:open_data_release:' || $1)) AS locked`,
        [month],
      );
      // Another instance is building this month right now.
      if (!rows[0]?.locked) return false;
      if (await releaseExists(client, month)) return false;
      const codes = await structureCodes(client);
      const plays = await monthPlays(client, monthDays(month), {
        ...monthHourDayparts(month),
        unknownDaypart: UNKNOWN_DAYPART,
      });
      const files = buildReleaseFiles({ month, rules: settings.rules, ...codes, plays });
      return insertRelease(client, {
        month,
        csv: files.csv,
        csvSha256: sha256Hex(files.csv),
        dictionary: files.dictionary,
        dictionarySha256: sha256Hex(files.dictionary),
        builtAt: now,
        rules: settings.rules,
      });
    });
    if (stored) {
      built.push(month);
      ctx.log.info({ month }, 'open data release built');
    }
  }
  return built;
}
