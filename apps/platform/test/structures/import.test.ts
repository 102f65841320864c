import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STRUCTURE_IMPORT_MAX_ROWS } from '../../src/structures/schema.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

/**
 * POST /api/v1/console/structures/import (issue 17 item 3: structures registered from a CSV file of a few hundred):
 * every row judged by the single create's rules, field errors by row, all or nothing, safe to send again.
 */

let p: TestPlatform;
let operatorId = '';
let otherOperatorId = '';

beforeAll(async () => {
  p = await startTestPlatform();
  operatorId = (await createOrganisation(p, 'operator', ['console:fleet'], 'Almaty Outdoor LLP')).id;
  otherOperatorId = (await createOrganisation(p, 'operator', ['console:fleet'], 'Steppe Screens LLP')).id;
});
afterAll(async () => {
  await p?.close();
});

const importCall = (body: unknown, key: string | null = p.adminKey) =>
  apiCall(p.servers.api, key, 'POST', '/api/v1/console/structures/import', body);

const rows = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    code: `${prefix}-${String(i + 1).padStart(4, '0')}`,
    district: ['almaly', 'bostandyk', 'medeu', 'auezov'][i % 4]!,
    format: ['billboard', 'digital', 'citylight'][i % 3]!,
    ...(i % 2 === 0 ? { address: `Abay Ave ${i + 1}, Almaty` } : {}),
    ...(i % 5 === 0 ? { lat: 43.2 + i / 10_000, lon: 76.9 + i / 10_000 } : {}),
  }));

const countOf = async (prefix: string) =>
  Number(
    (
      await p.database.db.query<{ n: string }>('SELECT count(*) AS n FROM structures WHERE code LIKE $1', [
        `${prefix}-%`,
      ])
    ).rows[0]!.n,
  );

describe('importing structures', () => {
  test('a dry run of 300 rows stores nothing; the import stores them all; the same file again changes nothing', async () => {
    const structures = rows('IMP', 300);
    const dry = await importCall({ organisation_id: operatorId, structures, dry_run: true });
    expect(dry.statusCode, dry.body).toBe(200);
    expect(dry.json()).toMatchObject({ dry_run: true, created: 300, unchanged: 0 });
    expect(dry.json().items[0]).toEqual({ index: 0, code: 'IMP-0001', status: 'created', id: null });
    expect(await countOf('IMP')).toBe(0);

    const done = await importCall({ organisation_id: operatorId, structures });
    expect(done.statusCode, done.body).toBe(200);
    const answer = done.json();
    expect(answer).toMatchObject({ dry_run: false, created: 300, unchanged: 0 });
    expect(answer.items).toHaveLength(300);
    expect(await countOf('IMP')).toBe(300);

    // Stored as the single create stores them: every field, optional ones null when absent.
    const listed = await apiCall(
      p.servers.api,
      p.adminKey,
      'GET',
      `/api/v1/console/structures?organisation_id=${operatorId}`,
    );
    const byCode = new Map(listed.json().items.map((s: { code: string }) => [s.code, s]));
    expect(byCode.get('IMP-0001')).toEqual({
      id: answer.items[0].id,
      organisation_id: operatorId,
      code: 'IMP-0001',
      district: 'almaly',
      format: 'billboard',
      address: 'Abay Ave 1, Almaty',
      lat: 43.2,
      lon: 76.9,
      retired_at: null,
      venue_type_id: null,
      openooh_screen_id: null,
      geopath_spot_id: null,
    });
    expect(byCode.get('IMP-0002')).toMatchObject({ address: null, lat: null, lon: null });

    // Sent again (a retry after a lost answer, or the same file twice): nothing new, same ids.
    const again = await importCall({ organisation_id: operatorId, structures });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toMatchObject({ created: 0, unchanged: 300 });
    expect(again.json().items.map((i: { id: string }) => i.id)).toEqual(
      answer.items.map((i: { id: string }) => i.id),
    );
    // A file that grew by two rows: the two are created, the rest unchanged.
    const grown = await importCall({ organisation_id: operatorId, structures: rows('IMP', 302) });
    expect(grown.json()).toMatchObject({ created: 2, unchanged: 300 });
    expect(await countOf('IMP')).toBe(302);
  });

  test('every faulty row is named with its field, all in one answer, and nothing of the file is stored', async () => {
    const retired = await createStructure(p, operatorId, { code: 'BAD-RETIRED' });
    await apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/structures/${retired.id}/retire`);
    await createStructure(p, otherOperatorId, { code: 'BAD-THEIRS' });
    await createStructure(p, operatorId, { code: 'BAD-OTHER-FIELDS', district: 'almaly' });
    const structures: unknown[] = [
      { code: 'BAD-0001', district: 'almaly', format: 'billboard' },
      { code: 'BAD-0002', district: 'Almaly District', format: 'billboard' },
      { code: 'BAD-0003', district: 'almaly' },
      { code: 'BAD-0004', district: 'almaly', format: 'billboard', lat: 43.25 },
      { code: 'BAD-0001', district: 'medeu', format: 'digital' },
      { code: 'BAD-THEIRS', district: 'almaly', format: 'billboard' },
      { code: 'BAD-RETIRED', district: 'almaly', format: 'billboard' },
      { code: 'BAD-OTHER-FIELDS', district: 'medeu', format: 'billboard' },
      'BAD-0009,almaly,billboard',
      { code: 'BAD-0010', district: 'almaly', format: 'billboard', lat: 91, lon: 76.9, floor: 2 },
      { code: ' BAD-0011', district: 'almaly', format: 'billboard', address: 'x'.repeat(501) },
    ];
    const res = await importCall({ organisation_id: operatorId, structures });
    expect(res.statusCode).toBe(422);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    const problem = res.json();
    expect(problem.code).toBe('validation_failed');
    expect(problem.detail).toMatch(/nothing was stored/);
    expect(problem.errors.map((e: { path: string; code: string }) => `${e.path} ${e.code}`)).toEqual([
      '/structures/1/district pattern',
      '/structures/2/format required',
      '/structures/3/lon required',
      '/structures/4/code duplicate',
      '/structures/5/code duplicate',
      '/structures/6/code retired',
      '/structures/7/code duplicate',
      '/structures/8 type',
      '/structures/9/floor unknown_key',
      '/structures/9/lat out_of_range',
      '/structures/10/code pattern',
      '/structures/10/address too_long',
    ]);
    expect(await countOf('BAD-000')).toBe(0);
    // A dry run answers the same errors.
    const dry = await importCall({ organisation_id: operatorId, structures, dry_run: true });
    expect(dry.json().errors).toEqual(problem.errors);
  });

  test('hostile values are field errors, never a 5xx, and store nothing', async () => {
    const odd = await importCall({
      organisation_id: operatorId,
      structures: [
        null,
        7,
        [],
        { code: {}, district: ['almaly'], format: null },
        { code: 'ODD-1', district: 'almaly', format: 'billboard', lat: 1e308, lon: -1e308 },
        { code: 'x'.repeat(65), district: 'a'.repeat(65), format: 'billboard', address: 5 },
        { code: 'ODD-2\u202e', district: 'almaly', format: 'billboard' },
      ],
    });
    expect(odd.statusCode).toBe(422);
    expect(odd.json().errors.map((e: { path: string; code: string }) => `${e.path} ${e.code}`)).toEqual([
      '/structures/0 type',
      '/structures/1 type',
      '/structures/2 type',
      '/structures/3/code type',
      '/structures/3/district type',
      '/structures/3/format type',
      '/structures/4/lat out_of_range',
      '/structures/4/lon out_of_range',
      '/structures/5/code too_long',
      '/structures/5/district too_long',
      '/structures/5/address type',
      '/structures/6/code pattern',
    ]);
    for (const body of [
      { organisation_id: 'not-a-uuid', structures: rows('ODD', 1) },
      { organisation_id: operatorId, structures: 'ODD-1,almaly,billboard' },
      { organisation_id: operatorId, structures: rows('ODD', 1), dry_run: 'yes' },
      [rows('ODD', 1)],
    ]) {
      const res = await importCall(body);
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json().code).toBe('validation_failed');
    }
    expect(await countOf('ODD')).toBe(0);
  });

  test('structures belong to an existing operator', async () => {
    const agency = await createOrganisation(p, 'agency', ['write:submissions']);
    const structures = rows('ORG', 2);
    const toAgency = await importCall({ organisation_id: agency.id, structures });
    expect(toAgency.statusCode).toBe(422);
    expect(toAgency.json().errors).toEqual([
      { path: '/organisation_id', code: 'not_allowed', message: 'structures belong to operators' },
    ]);
    const nowhere = await importCall({ organisation_id: '00000000-0000-4000-8000-000000000000', structures });
    expect(nowhere.json().errors[0]).toMatchObject({ path: '/organisation_id', code: 'not_found' });
    expect(await countOf('ORG')).toBe(0);
  });

  test('the size of an import is bounded: rows, body bytes, and at least one row', async () => {
    const tooMany = await importCall({
      organisation_id: operatorId,
      structures: rows('BIG', STRUCTURE_IMPORT_MAX_ROWS + 1),
    });
    expect(tooMany.statusCode).toBe(422);
    expect(tooMany.json().errors).toEqual([
      expect.objectContaining({ path: '/structures', code: 'too_many' }),
    ]);
    const empty = await importCall({ organisation_id: operatorId, structures: [] });
    expect(empty.json().errors).toEqual([expect.objectContaining({ path: '/structures', code: 'too_few' })]);
    const huge = await importCall({
      organisation_id: operatorId,
      structures: [
        { code: 'BIG-1', district: 'almaly', format: 'billboard', address: 'x'.repeat(5_000_000) },
      ],
    });
    expect(huge.statusCode).toBe(413);
    expect(huge.json().code).toBe('body_too_large');
    const unknown = await importCall({ organisation_id: operatorId, structures: rows('BIG', 1), mode: 'x' });
    expect(unknown.json().errors).toEqual([expect.objectContaining({ path: '/mode', code: 'unknown_key' })]);
    expect(await countOf('BIG')).toBe(0);
    // The largest import allowed goes through in one request.
    const largest = await importCall({
      organisation_id: operatorId,
      structures: rows('BIG', STRUCTURE_IMPORT_MAX_ROWS),
    });
    expect(largest.statusCode, largest.body.slice(0, 300)).toBe(200);
    expect(await countOf('BIG')).toBe(STRUCTURE_IMPORT_MAX_ROWS);
  });

  test('only authority administrators import; a caller without credentials gets 401 before any work', async () => {
    const operator = await createOrganisation(p, 'operator', ['console:fleet', 'write:submissions']);
    const body = { organisation_id: operator.id, structures: rows('AUTH', 3) };
    const anonymous = await importCall(body, null);
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json().code).toBe('unauthenticated');
    const asOperator = await importCall(body, operator.key);
    expect(asOperator.statusCode).toBe(403);
    const reader = await createOrganisation(p, 'authority', ['console:read']);
    expect((await importCall(body, reader.key)).statusCode).toBe(403);
    expect(await countOf('AUTH')).toBe(0);
    const malformed = await p.servers.api.inject({
      method: 'POST',
      url: '/api/v1/console/structures/import',
      headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json' },
      payload: '{"organisation_id":',
    });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().code).toBe('invalid_json');
  });

  test('two imports of the same file at once: each row stored once, both answered 200', async () => {
    const structures = rows('RACE', 150);
    const [a, b] = await Promise.all([
      importCall({ organisation_id: operatorId, structures }),
      importCall({ organisation_id: operatorId, structures }),
    ]);
    expect([a.statusCode, b.statusCode], `${a.body.slice(0, 200)} ${b.body.slice(0, 200)}`).toEqual([
      200, 200,
    ]);
    expect(a.json().created + b.json().created).toBe(150);
    expect(a.json().items.map((i: { id: string }) => i.id)).toEqual(
      b.json().items.map((i: { id: string }) => i.id),
    );
    expect(await countOf('RACE')).toBe(150);
  });

  test('two imports at once that disagree on a code: one is stored whole, the other not at all', async () => {
    const first = rows('CLASH', 100);
    // The second file holds 100 rows of its own and CLASH-0100 in another district.
    const second = [
      ...rows('CLASHB', 100),
      { code: 'CLASH-0100', district: 'turksib', format: first[99]!.format },
    ];
    const [a, b] = await Promise.all([
      importCall({ organisation_id: operatorId, structures: first }),
      importCall({ organisation_id: operatorId, structures: second }),
    ]);
    expect([a.statusCode, b.statusCode].sort()).toEqual([200, 422]);
    if (a.statusCode === 200) {
      expect(b.json().errors).toEqual([
        expect.objectContaining({ path: '/structures/100/code', code: 'duplicate' }),
      ]);
      expect([await countOf('CLASH'), await countOf('CLASHB')]).toEqual([100, 0]);
    } else {
      expect(a.json().errors).toEqual([
        expect.objectContaining({ path: '/structures/99/code', code: 'duplicate' }),
      ]);
      expect([await countOf('CLASH'), await countOf('CLASHB')]).toEqual([1, 100]);
    }
  });
});
