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

  test('the optional venue_type_id, openooh_screen_id and geopath_spot_id columns (issue 20 item 3)', () => {
    const text =
      'code;district;format;Venue_Type_Id;openooh_screen_id;geopath_spot_id\n' +
      'ALM-0001;almaly;billboard;301;kz.op.scr-0001;0030045678\n' +
      'ALM-0002;almaly;led;;;\n' +
      'ALM-0003;almaly;led;301.5;;\n' +
      'ALM-0004;almaly;led;Billboard;;\n';
    const parsed = parseStructuresCsv(text);
    expect(parsed.rows.slice(0, 2)).toEqual([
      {
        line: 2,
        row: {
          code: 'ALM-0001',
          district: 'almaly',
          format: 'billboard',
          venue_type_id: 301,
          openooh_screen_id: 'kz.op.scr-0001',
          // Kept as text: a leading zero is the identifier's own.
          geopath_spot_id: '0030045678',
        },
      },
      { line: 3, row: { code: 'ALM-0002', district: 'almaly', format: 'led' } },
    ]);
    expect(parsed.problems).toEqual([
      { line: 4, column: 'venue_type_id', code: 'not_a_number' },
      { line: 5, column: 'venue_type_id', code: 'not_a_number' },
    ]);
  });
});
