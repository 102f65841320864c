/**
 * A CSV file of structures for POST /api/v1/console/structures/import: a header row naming the columns (code,
 * district, format, address, lat, lon, and the optional venue_type_id, openooh_screen_id, geopath_spot_id; any order,
 * any case), then one structure a line. Fields follow RFC 4180
 * (quotes around a field with the separator, a quote or a line break; "" for a quote inside). The separator is the
 * header's: comma, semicolon (what spreadsheets write in Russian and Kazakh locales) or tab. In a file separated by
 * semicolons or tabs a decimal comma is read as a point (43,238). Nothing else is changed: the platform judges every
 * value by the rules of a single structure, and its field errors come back by row, shown here by line.
 */

export const STRUCTURE_COLUMNS = [
  'code',
  'district',
  'format',
  'address',
  'lat',
  'lon',
  'venue_type_id',
  'openooh_screen_id',
  'geopath_spot_id',
] as const;
export type StructureColumn = (typeof STRUCTURE_COLUMNS)[number];
const REQUIRED: readonly StructureColumn[] = ['code', 'district', 'format'];
/** The platform's limit of one import (STRUCTURE_IMPORT_MAX_ROWS). */
export const MAX_IMPORT_ROWS = 2000;

export interface ImportRow {
  code?: string;
  district?: string;
  format?: string;
  address?: string;
  lat?: number;
  lon?: number;
  venue_type_id?: number;
  openooh_screen_id?: string;
  geopath_spot_id?: string;
}

/** A fault of the file itself, found before anything is sent. `line` counts from 1 (the header). */
export interface CsvProblem {
  line: number;
  column: string | null;
  code:
    | 'empty_file'
    | 'unclosed_quote'
    | 'unknown_column'
    | 'duplicate_column'
    | 'missing_column'
    | 'extra_values'
    | 'not_a_number'
    | 'too_many_rows';
}

export interface ParsedCsv {
  /** One per structure line, in file order, with the line it starts on. */
  rows: { line: number; row: ImportRow }[];
  problems: CsvProblem[];
  separator: ',' | ';' | '\t';
}

interface Record_ {
  line: number;
  fields: string[];
}

/** RFC 4180 records; `line` is where each starts. An unclosed quote is reported on the line it opened. */
function records(text: string, separator: string): { records: Record_[]; unclosedAt: number | null } {
  const out: Record_[] = [];
  let fields: string[] = [];
  let field = '';
  let line = 1;
  let start = 1;
  let quoted = false;
  let quoteLine = 0;
  let atFieldStart = true;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else {
        if (c === '\n') line++;
        field += c;
      }
      continue;
    }
    if (c === '"' && atFieldStart) {
      quoted = true;
      quoteLine = line;
      atFieldStart = false;
    } else if (c === separator) {
      fields.push(field);
      field = '';
      atFieldStart = true;
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      fields.push(field);
      out.push({ line: start, fields });
      fields = [];
      field = '';
      line++;
      start = line;
      atFieldStart = true;
    } else {
      field += c;
      atFieldStart = false;
    }
  }
  if (quoted) return { records: out, unclosedAt: quoteLine };
  if (field !== '' || fields.length > 0) out.push({ line: start, fields: [...fields, field] });
  return { records: out, unclosedAt: null };
}

function separatorOf(headerLine: string): ',' | ';' | '\t' {
  const count = (c: string) => headerLine.split(c).length - 1;
  const candidates = [',', ';', '\t'] as const;
  return candidates.reduce((best, c) => (count(c) > count(best) ? c : best), ',' as ',' | ';' | '\t');
}

export function parseStructuresCsv(input: string): ParsedCsv {
  const text = input.replace(/^\uFEFF/, '');
  const firstLine = text.split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  const separator = separatorOf(firstLine);
  const problems: CsvProblem[] = [];
  const { records: all, unclosedAt } = records(text, separator);
  if (unclosedAt !== null) problems.push({ line: unclosedAt, column: null, code: 'unclosed_quote' });
  const nonEmpty = all.filter((r) => r.fields.some((f) => f.trim() !== ''));
  const header = nonEmpty[0];
  if (!header) {
    if (problems.length === 0) problems.push({ line: 1, column: null, code: 'empty_file' });
    return { rows: [], problems, separator };
  }
  const columns: (StructureColumn | null)[] = [];
  const seen = new Set<string>();
  for (const raw of header.fields) {
    const name = raw.trim().toLowerCase();
    if (!(STRUCTURE_COLUMNS as readonly string[]).includes(name)) {
      problems.push({ line: header.line, column: raw.trim(), code: 'unknown_column' });
      columns.push(null);
    } else if (seen.has(name)) {
      problems.push({ line: header.line, column: name, code: 'duplicate_column' });
      columns.push(null);
    } else {
      seen.add(name);
      columns.push(name as StructureColumn);
    }
  }
  for (const name of REQUIRED) {
    if (!seen.has(name)) problems.push({ line: header.line, column: name, code: 'missing_column' });
  }
  const decimalComma = separator !== ',';
  const rows: ParsedCsv['rows'] = [];
  for (const record of nonEmpty.slice(1)) {
    // Empty values past the last column (a spreadsheet's trailing separators) are nothing; others are a fault.
    if (record.fields.slice(columns.length).some((f) => f.trim() !== '')) {
      problems.push({ line: record.line, column: null, code: 'extra_values' });
      continue;
    }
    const row: ImportRow = {};
    columns.forEach((column, i) => {
      const value = (record.fields[i] ?? '').trim();
      if (column === null || value === '') return;
      if (column === 'lat' || column === 'lon') {
        const normal = decimalComma ? value.replace(/^(-?\d+),(\d+)$/, '$1.$2') : value;
        const n = /^-?\d+(\.\d+)?$/.test(normal) ? Number(normal) : Number.NaN;
        if (Number.isNaN(n)) problems.push({ line: record.line, column, code: 'not_a_number' });
        else row[column] = n;
      } else if (column === 'venue_type_id') {
        // A whole number; anything else is the file's fault, said by line. The platform checks it is a venue type.
        if (/^\d{1,9}$/.test(value)) row.venue_type_id = Number(value);
        else problems.push({ line: record.line, column, code: 'not_a_number' });
      } else {
        row[column] = value;
      }
    });
    rows.push({ line: record.line, row });
  }
  if (rows.length > MAX_IMPORT_ROWS) {
    problems.push({ line: rows[MAX_IMPORT_ROWS]!.line, column: null, code: 'too_many_rows' });
  }
  problems.sort((a, b) => a.line - b.line);
  return { rows, problems, separator };
}

/** The line and column of a platform field error of an import (`/structures/{index}/{field}`). */
export function lineOfFieldError(
  path: string,
  rows: ParsedCsv['rows'],
): { line: number | null; column: string | null } {
  const m = /^\/structures\/(\d+)(?:\/([^/]+))?/.exec(path);
  if (!m) return { line: null, column: null };
  return { line: rows[Number(m[1])]?.line ?? null, column: m[2] ?? null };
}
