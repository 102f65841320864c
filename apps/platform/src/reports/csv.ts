import { csvRecord } from '../open-data/csv.js';
import type { CampaignReport, ReportTotals } from '@ooh/protocol';

/*
 * The campaign report as a CSV file for spreadsheet applications: RFC 4180 (commas, CRLF after every record, quotes
 * doubled inside quoted fields: the writer of the open-data files), UTF-8 with a byte order mark, because without it
 * Excel reads UTF-8 as the ANSI code page and garbles every Cyrillic or Kazakh name. The time zone of the days is in
 * every row (`time_zone`) and in the file name. One table, one row kind per line (`row`): `day` (a structure on a
 * day), `structure_total`, `campaign_total`.
 */

export const CSV_COLUMNS = [
  'row',
  'submission_number',
  'approval_numbers',
  'advertiser_name',
  'day',
  'time_zone',
  'structure_code',
  'structure_id',
  'operator',
  'live_hours',
  'declared',
  'plays',
  'flagged',
  'unflagged',
  'attested',
  'deviation_pct',
  'outside_band',
] as const;

/**
 * A text a person typed (an advertiser's name, an address) must not become a formula when a spreadsheet opens the
 * file (OWASP "CSV injection"): a leading =, +, -, @, tab or CR is escaped with an apostrophe. Figures are never
 * escaped: they are written by the platform.
 */
export function spreadsheetText(value: string): string {
  return /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
}

const num = (value: number | null): string => (value === null ? '' : String(value));
const bool = (value: boolean | null): string => (value === null ? '' : value ? 'true' : 'false');

export function campaignCsv(report: CampaignReport): string {
  const zone = report.report.time_zone;
  const approvals = spreadsheetText(report.approvals.map((a) => a.approval_number).join(' '));
  const common = {
    submission_number: report.campaign.submission_number,
    approval_numbers: approvals,
    advertiser_name: spreadsheetText(report.campaign.advertiser_name),
    time_zone: zone,
  };
  const structures = new Map(report.structures.map((s) => [s.structure_id, s]));
  const row = (fields: Partial<Record<(typeof CSV_COLUMNS)[number], string>>): string =>
    csvRecord(CSV_COLUMNS.map((c) => fields[c] ?? ''));
  const totals = (t: ReportTotals) => ({
    declared: t.compared_days === 0 ? '' : String(t.declared),
    plays: String(t.plays),
    flagged: String(t.flagged),
    unflagged: String(t.unflagged),
    attested: String(t.attested),
    deviation_pct: num(t.deviation_pct),
  });
  let out = `\uFEFF${csvRecord([...CSV_COLUMNS])}`;
  for (const cell of report.cells) {
    const s = structures.get(cell.structure_id);
    out += row({
      row: 'day',
      ...common,
      day: cell.day,
      structure_code: spreadsheetText(s?.code ?? ''),
      structure_id: cell.structure_id,
      operator: spreadsheetText(s?.operator ?? ''),
      live_hours: String(cell.live_hours),
      declared: num(cell.declared),
      plays: String(cell.plays),
      flagged: String(cell.flagged),
      unflagged: String(cell.plays - cell.flagged),
      attested: String(cell.attested),
      deviation_pct: num(cell.deviation_pct),
      outside_band: bool(cell.outside_band),
    });
  }
  for (const s of report.structures) {
    out += row({
      row: 'structure_total',
      ...common,
      structure_code: spreadsheetText(s.code),
      structure_id: s.structure_id,
      operator: spreadsheetText(s.operator),
      ...totals(s.totals),
    });
  }
  out += row({ row: 'campaign_total', ...common, ...totals(report.totals) });
  return out;
}

/** `SUB-2026-000042-plays-almaty.csv`: the campaign and the time zone of its days. */
export function csvFileName(report: CampaignReport): string {
  const zone = report.report.time_zone === 'UTC' ? 'utc' : 'almaty';
  return `${report.campaign.submission_number}-plays-${zone}.csv`;
}
