import { describe, expect, test } from 'vitest';
import {
  lineOfFieldError,
  MAX_IMPORT_ROWS,
  parseStructuresCsv,
} from '../../console/src/lib/structures-csv.js';
import { STRUCTURE_IMPORT_MAX_ROWS } from '../../src/structures/schema.js';

/** The console's reading of a structures CSV file (console/src/lib/structures-csv.ts), before the platform judges it. */
describe('reading a structures CSV file', () => {
  test('comma-separated with a header in any order, quotes, CRLF and a BOM', () => {
    const text =
      '\uFEFFFormat,CODE,district,address,lat,lon\r\n' +
      'billboard,ALM-0001,almaly,"Abay Ave 10, Almaty",43.2389,76.8897\r\n' +
      '\r\n' +
      'digital,ALM-0002,medeu,"The ""Green"" market\nnorth gate",,\r\n' +
      'citylight,ALM-0003,bostandyk,,,\r\n';
    const parsed = parseStructuresCsv(text);
    expect(parsed.problems).toEqual([]);
    expect(parsed.separator).toBe(',');
    expect(parsed.rows).toEqual([
      {
        line: 2,
        row: {
          format: 'billboard',
          code: 'ALM-0001',
          district: 'almaly',
          address: 'Abay Ave 10, Almaty',
          lat: 43.2389,
          lon: 76.8897,
        },
      },
      // Line 3 is empty; the quoted address holds a line break, so the next record starts on line 6.
      {
        line: 4,
        row: {
          format: 'digital',
          code: 'ALM-0002',
          district: 'medeu',
          address: 'The "Green" market\nnorth gate',
        },
      },
      { line: 6, row: { format: 'citylight', code: 'ALM-0003', district: 'bostandyk' } },
    ]);
  });

  test('semicolon-separated, as spreadsheets in Russian and Kazakh write it, with decimal commas', () => {
    const parsed = parseStructuresCsv('code;district;format;lat;lon\nAST-1;esil;digital;51,1694;71,4491\n');
    expect(parsed.separator).toBe(';');
    expect(parsed.problems).toEqual([]);
    expect(parsed.rows[0]!.row).toEqual({
      code: 'AST-1',
      district: 'esil',
      format: 'digital',
      lat: 51.1694,
      lon: 71.4491,
    });
  });

  test('values are not changed: the platform judges them (an upper-case district stays as written)', () => {
    const parsed = parseStructuresCsv('code,district,format\n ALM-9 , Almaly ,billboard\n');
    expect(parsed.rows[0]!.row).toEqual({ code: 'ALM-9', district: 'Almaly', format: 'billboard' });
  });

  test('faults of the file are named by line and column', () => {
    const parsed = parseStructuresCsv(
      'code,district,floor,district\nA-1,almaly,2,x\nA-2,medeu,3,y,extra\nA-3,almaly,,,\nA-4,x,,,"\n',
    );
    expect(parsed.problems).toEqual([
      { line: 1, column: 'floor', code: 'unknown_column' },
      { line: 1, column: 'district', code: 'duplicate_column' },
      { line: 1, column: 'format', code: 'missing_column' },
      { line: 3, column: null, code: 'extra_values' },
      { line: 5, column: null, code: 'unclosed_quote' },
    ]);
    const numbers = parseStructuresCsv('code,district,format,lat,lon\nA-1,almaly,billboard,43.2.1,76\n');
    expect(numbers.problems).toEqual([{ line: 2, column: 'lat', code: 'not_a_number' }]);
    // A decimal comma is read only where the separator is not a comma.
    const comma = parseStructuresCsv('code,district,format,lat,lon\nA-1,almaly,billboard,"43,2",76\n');
    expect(comma.problems).toEqual([{ line: 2, column: 'lat', code: 'not_a_number' }]);
    expect(parseStructuresCsv('\n \n').problems).toEqual([{ line: 1, column: null, code: 'empty_file' }]);
  });

  test('more rows than one import takes is found before anything is sent', () => {
    expect(MAX_IMPORT_ROWS).toBe(STRUCTURE_IMPORT_MAX_ROWS);
    const lines = Array.from({ length: MAX_IMPORT_ROWS + 1 }, (_, i) => `S-${i},almaly,billboard`);
    const parsed = parseStructuresCsv(`code,district,format\n${lines.join('\n')}`);
    expect(parsed.problems).toEqual([{ line: MAX_IMPORT_ROWS + 2, column: null, code: 'too_many_rows' }]);
  });

  test("a platform field error is placed on the row's line and column", () => {
    const parsed = parseStructuresCsv('code,district,format\nA-1,almaly,billboard\n\n"A-2",Medeu,digital\n');
    expect(lineOfFieldError('/structures/1/district', parsed.rows)).toEqual({ line: 4, column: 'district' });
    expect(lineOfFieldError('/structures/0', parsed.rows)).toEqual({ line: 2, column: null });
    expect(lineOfFieldError('/organisation_id', parsed.rows)).toEqual({ line: null, column: null });
  });
});
