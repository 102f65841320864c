import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

let p: TestPlatform;
let operator: { id: string; key: string };
let otherOperator: { id: string; key: string };
let agency: { id: string; key: string };
let own: { id: string; code: string }[];
let foreign: { id: string; code: string };

beforeAll(async () => {
  p = await startTestPlatform({ now: new Date('2026-03-10T05:00:00Z') });
  operator = await createOrganisation(p, 'operator', ['write:submissions']);
  otherOperator = await createOrganisation(p, 'operator', ['write:submissions']);
  agency = await createOrganisation(p, 'agency', ['write:submissions']);
  own = [
    await createStructure(p, operator.id),
    await createStructure(p, operator.id),
    await createStructure(p, operator.id),
  ];
  foreign = await createStructure(p, otherOperator.id);
});
afterAll(async () => {
  await p?.close();
});

const base = () => ({
  advertiser_name: 'Kazakh Tea LLP',
  period_from: '2026-04-01',
  period_to: '2026-04-30',
  structure_ids: [own[0]!.id],
});

const create = (key: string, body: unknown) =>
  apiCall(p.servers.api, key, 'POST', '/api/v1/submissions', body);

describe('who reads submissions', () => {
  test('an authority key holding only write:submissions reads none (it submits nothing); console keys read all', async () => {
    const draft = await create(agency.key, base());
    expect(draft.statusCode, draft.body).toBe(201);
    const id = draft.json<{ id: string }>().id;
    const writeOnly = await createOrganisation(p, 'authority', ['write:submissions']);
    for (const url of ['/api/v1/submissions', `/api/v1/submissions/${id}`]) {
      const res = await apiCall(p.servers.api, writeOnly.key, 'GET', url);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(403);
      expect(res.json()).toMatchObject({ code: 'forbidden' });
      const admin = await apiCall(p.servers.api, p.adminKey, 'GET', url);
      expect(admin.statusCode, url).toBe(200);
    }
    // The submitter itself still reads its own.
    expect((await apiCall(p.servers.api, agency.key, 'GET', `/api/v1/submissions/${id}`)).statusCode).toBe(
      200,
    );
  });
});

describe('POST /api/v1/submissions', () => {
  test('a Submission answered can be sent back as a request: optional fields nobody gave are left out', async () => {
    const res = await create(operator.key, base());
    expect(res.statusCode, res.body).toBe(201);
    const s = res.json<Record<string, unknown>>();
    expect(s).not.toHaveProperty('external_refs');
    expect(s).not.toHaveProperty('declared_daily_plays');
    // The fields a request takes, as the resource gave them.
    const { id: _id, number: _n, state: _s, category: _c, review_due_at: _r, category_id, ...rest } = s;
    const again = await create(operator.key, {
      ...rest,
      ...(category_id === null ? {} : { category_id }),
      structure_ids: [own[0]!.id],
    });
    expect(again.statusCode, again.body).toBe(201);
  });

  test('external_refs and declared_daily_plays that hold nothing ({}) are left out of the answer too', async () => {
    const res = await create(agency.key, {
      ...base(),
      channel: 'programmatic',
      external_refs: {},
      declared_daily_plays: {},
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).not.toHaveProperty('external_refs');
    expect(res.json()).not.toHaveProperty('declared_daily_plays');
  });

  test('a 1 MB body of unknown structure ids is judged in linear time, each named at its position', async () => {
    // 26,000 ids: a search of the list per id (as before) kept the event loop for about 10 s.
    const ids = Array.from(
      { length: 26_000 },
      (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    );
    const started = performance.now();
    const res = await create(agency.key, { ...base(), structure_ids: ids });
    const elapsed = performance.now() - started;
    expect(res.statusCode).toBe(422);
    // Every one judged; the answer lists the first hundred (MAX_LISTED_FIELD_ERRORS) and says how many there were.
    const doc = res.json() as { detail: string; errors: { path: string; code: string }[] };
    const counted = /^(\d+) field error\(s\) \(the first 100 of (\d+) are listed\)$/.exec(doc.detail);
    expect(counted, doc.detail).not.toBeNull();
    expect(Number(counted![2])).toBeGreaterThanOrEqual(26_000);
    expect(doc.errors).toHaveLength(100);
    expect(doc.errors).toContainEqual(
      expect.objectContaining({ path: '/structure_ids/98', code: 'not_found' }),
    );
    expect(elapsed).toBeLessThan(3_000);
  });

  test('an unknown structure id in capitals is named at its own position', async () => {
    const unknown = '0000000A-0000-4000-8000-00000000000B';
    const res = await create(operator.key, { ...base(), structure_ids: [own[0]!.id, 'not-a-uuid', unknown] });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: '/structure_ids/1', code: 'format' }),
        expect.objectContaining({ path: '/structure_ids/2', code: 'not_found' }),
      ]),
    );
  });

  test('creates a draft with a number, category filled in, review_due_at null', async () => {
    const res = await create(operator.key, {
      ...base(),
      advertiser_bin: '123456789012',
      category_id: 1003,
      declared_daily_plays: { [own[0]!.id]: 120 },
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const s = res.json();
    expect(s).toMatchObject({
      state: 'draft',
      advertiser_name: 'Kazakh Tea LLP',
      period_from: '2026-04-01',
      period_to: '2026-04-30',
      category_id: 1003,
      channel: 'direct',
      fast_track: false,
      review_due_at: null,
      declared_daily_plays: { [own[0]!.id]: 120 },
    });
    expect(s.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(s.number).toMatch(/^SUB-2026-\d{6}$/);
    expect(s.category).toEqual({
      id: 1003,
      parent_id: 1002,
      tier: 2,
      name: { en: 'Bars', ru: expect.any(String), kk: expect.any(String) },
    });
    // Fields outside the spec's Submission resource do not leak.
    expect(s).not.toHaveProperty('organisation_id');
    expect(s).not.toHaveProperty('advertiser_bin');

    const got = await apiCall(p.servers.api, operator.key, 'GET', `/api/v1/submissions/${s.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toMatchObject({ id: s.id, number: s.number, structure_ids: [own[0]!.id] });
    const asAuthority = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/submissions/${s.id}`);
    expect(asAuthority.statusCode).toBe(200);
    const asOther = await apiCall(p.servers.api, otherOperator.key, 'GET', `/api/v1/submissions/${s.id}`);
    expect(asOther.statusCode).toBe(404);
  });

  test('every field error is listed at once', async () => {
    const res = await create(operator.key, {
      advertiser_name: 'x'.repeat(301),
      advertiser_bin: '12345',
      period_from: '2026-05-02',
      period_to: '2026-05-01',
      structure_ids: [foreign.id, 'not-a-uuid'],
      channel: 'direct',
      external_refs: { crid: 'c1', colour: 'red' },
      fast_track: true,
      category_id: 999999,
      declared_daily_plays: { [own[1]!.id]: -1 },
      surprise: true,
    });
    expect(res.statusCode).toBe(422);
    const doc = res.json();
    expect(doc.code).toBe('validation_failed');
    const byPath = Object.fromEntries(
      (doc.errors as { path: string; code: string }[]).map((e) => [e.path, e.code]),
    );
    expect(byPath).toMatchObject({
      '/advertiser_name': 'too_long',
      '/advertiser_bin': 'pattern',
      '/period_to': 'out_of_range',
      '/structure_ids/0': 'not_allowed',
      '/structure_ids/1': 'format',
      '/external_refs': 'not_allowed',
      '/external_refs/colour': 'unknown_key',
      '/fast_track': 'not_allowed',
      '/category_id': 'not_found',
      '/surprise': 'unknown_key',
    });
    expect(byPath[`/declared_daily_plays/${own[1]!.id}`]).toBeDefined();
  });

  test('300 characters (not code units) are allowed; required fields are named', async () => {
    const ok = await create(operator.key, { ...base(), advertiser_name: '😀'.repeat(300) });
    expect(ok.statusCode).toBe(201);
    const missing = await create(operator.key, {});
    expect(missing.statusCode).toBe(422);
    const paths = missing.json().errors.map((e: { path: string }) => e.path);
    expect(paths).toEqual(
      expect.arrayContaining(['/advertiser_name', '/period_from', '/period_to', '/structure_ids']),
    );
  });

  test('programmatic: external_refs and fast_track allowed, adomain must be domains', async () => {
    const ok = await create(agency.key, {
      ...base(),
      structure_ids: [foreign.id, own[0]!.id],
      channel: 'programmatic',
      fast_track: true,
      external_refs: { crid: 'cr-1', adomain: ['tea.kz'], dsp: 'dsp-x', ssp: 'ssp-y' },
    });
    expect(ok.statusCode).toBe(201);
    expect(ok.json()).toMatchObject({
      channel: 'programmatic',
      fast_track: true,
      external_refs: { crid: 'cr-1', adomain: ['tea.kz'] },
      review_due_at: null,
    });
    const bad = await create(agency.key, {
      ...base(),
      channel: 'programmatic',
      external_refs: { adomain: ['not a domain'] },
    });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().errors[0].path).toBe('/external_refs/adomain/0');
  });

  test('saved sets expand, retired structures drop out of a set, explicit retired ones are refused', async () => {
    const set = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/structure-sets', {
      name: 'centre',
      structure_ids: [own[1]!.id, own[2]!.id],
    });
    expect(set.statusCode).toBe(201);
    const retiring = await createStructure(p, operator.id);
    const set2 = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/structure-sets', {
      name: 'with retiring',
      structure_ids: [retiring.id],
    });
    await apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/structures/${retiring.id}/retire`);
    const res = await create(operator.key, {
      ...base(),
      structure_set_ids: [set.json().id, set2.json().id],
    });
    expect(res.statusCode).toBe(201);
    const got = await apiCall(p.servers.api, operator.key, 'GET', `/api/v1/submissions/${res.json().id}`);
    expect(got.json().structure_ids).toEqual([own[0]!.id, own[1]!.id, own[2]!.id]);

    const explicitRetired = await create(operator.key, { ...base(), structure_ids: [retiring.id] });
    expect(explicitRetired.statusCode).toBe(422);
    expect(explicitRetired.json().errors[0].code).toBe('retired');

    const notMySet = await create(otherOperator.key, {
      ...base(),
      structure_ids: [foreign.id],
      structure_set_ids: [set.json().id],
    });
    expect(notMySet.statusCode).toBe(422);
    expect(notMySet.json().errors[0]).toMatchObject({ path: '/structure_set_ids/0', code: 'not_found' });
  });

  test('structure limits count the expanded list: 200 for operators, 2000 for agencies', async () => {
    const ids: string[] = [];
    const { rows } = await p.database.db.query<{ id: string }>(
      `INSERT INTO structures (organisation_id, code, district, format, created_at)
       SELECT $1, 'BULK-' || g, 'bostandyq', 'citylight', now() FROM generate_series(1, 2001) g RETURNING id`,
      [operator.id],
    );
    for (const r of rows) ids.push(r.id);
    const set = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/structure-sets', {
      name: 'bulk',
      structure_ids: ids.slice(0, 150),
    });
    expect(set.statusCode).toBe(201);
    const over = await create(operator.key, {
      ...base(),
      structure_ids: ids.slice(150, 201),
      structure_set_ids: [set.json().id],
    });
    expect(over.statusCode).toBe(422);
    expect(over.json().errors).toEqual([
      expect.objectContaining({ path: '/structure_ids', code: 'too_many' }),
    ]);
    const exactly = await create(operator.key, {
      ...base(),
      structure_ids: ids.slice(150, 200),
      structure_set_ids: [set.json().id],
    });
    expect(exactly.statusCode).toBe(201);

    const agencyOk = await create(agency.key, { ...base(), structure_ids: ids.slice(0, 2000) });
    expect(agencyOk.statusCode).toBe(201);
    const agencyOver = await create(agency.key, { ...base(), structure_ids: ids.slice(0, 2001) });
    expect(agencyOver.statusCode).toBe(422);
    expect(agencyOver.json().errors[0].code).toBe('too_many');
  });

  test('numbers are gap-free per year under concurrency, and restart each Almaty year', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => create(operator.key, base())));
    expect(results.every((r) => r.statusCode === 201)).toBe(true);
    const { rows } = await p.database.db.query<{ number: string }>(
      "SELECT number FROM submissions WHERE number LIKE 'SUB-2026-%' ORDER BY number",
    );
    const serials = rows.map((r) => Number(r.number.slice(9)));
    expect(serials).toEqual(serials.map((_, i) => i + 1));
    // 2026-12-31T19:30Z is already 2027-01-01 in Almaty (UTC+5).
    p.clock.set(new Date('2026-12-31T19:30:00Z'));
    const next = await create(operator.key, {
      ...base(),
      period_from: '2027-01-10',
      period_to: '2027-01-20',
    });
    expect(next.json().number).toBe('SUB-2027-000001');
    p.clock.set(new Date('2026-03-10T05:00:00Z'));
  });

  test('a failed create gives its number back (no gap)', async () => {
    const before = await p.database.db.query<{ last: number }>(
      "SELECT last FROM number_counters WHERE series = 'submission' AND year = 2026",
    );
    const bad = await create(operator.key, { ...base(), structure_ids: [] });
    expect(bad.statusCode).toBe(422);
    const after = await p.database.db.query<{ last: number }>(
      "SELECT last FROM number_counters WHERE series = 'submission' AND year = 2026",
    );
    expect(after.rows[0]!.last).toBe(before.rows[0]!.last);
  });
});

describe('GET /api/v1/categories', () => {
  test('tiers 1 and 2 in three languages, without credentials', async () => {
    const res = await p.servers.api.inject({ method: 'GET', url: '/api/v1/categories' });
    expect(res.statusCode).toBe(200);
    const items = res.json().items as { id: number; tier: number; name: Record<string, string> }[];
    expect(items).toHaveLength(378);
    expect(new Set(items.map((i) => i.tier))).toEqual(new Set([1, 2]));
    expect(items.every((i) => i.name['en'] && i.name['ru'] && i.name['kk'])).toBe(true);
  });
});

describe('lists for pickers and queues', () => {
  test('structures: an operator sees its own, an agency every active one; sets are per organisation', async () => {
    const opList = await apiCall(p.servers.api, operator.key, 'GET', '/api/v1/structures');
    expect(opList.statusCode).toBe(200);
    const opIds = opList.json().items.map((s: { id: string }) => s.id);
    expect(opIds).toEqual(expect.arrayContaining(own.map((s) => s.id)));
    expect(opIds).not.toContain(foreign.id);
    const agencyIds = (await apiCall(p.servers.api, agency.key, 'GET', '/api/v1/structures'))
      .json()
      .items.map((s: { id: string }) => s.id);
    expect(agencyIds).toEqual(expect.arrayContaining([foreign.id, own[0]!.id]));
    const sets = await apiCall(p.servers.api, operator.key, 'GET', '/api/v1/structure-sets');
    expect(sets.json().items.length).toBeGreaterThan(0);
    const agencySets = await apiCall(p.servers.api, agency.key, 'GET', '/api/v1/structure-sets');
    expect(agencySets.json().items).toEqual([]);
  });

  test('submissions: own ones for an organisation, all for the authority, filtered by state', async () => {
    const mine = await apiCall(p.servers.api, otherOperator.key, 'GET', '/api/v1/submissions');
    expect(mine.statusCode).toBe(200);
    expect(mine.json().items).toEqual([]);
    const ops = await apiCall(p.servers.api, operator.key, 'GET', '/api/v1/submissions?state=draft');
    expect(ops.json().items.length).toBeGreaterThan(5);
    expect(ops.json().items.every((s: { state: string }) => s.state === 'draft')).toBe(true);
    const all = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/submissions?limit=1000');
    expect(all.json().items.length).toBeGreaterThan(ops.json().items.length);
    const none = await apiCall(p.servers.api, operator.key, 'GET', '/api/v1/submissions?state=approved');
    expect(none.json().items.filter((s: { state: string }) => s.state !== 'approved')).toEqual([]);
    // A fractional limit is taken as its whole part, not handed to PostgreSQL (which refused it with a 500).
    const fractional = await apiCall(p.servers.api, operator.key, 'GET', '/api/v1/submissions?limit=2.5');
    expect(fractional.statusCode).toBe(200);
    expect(fractional.json().items).toHaveLength(2);
    // A state no submission can be in is a mistake, not an empty list.
    const unknown = await apiCall(p.servers.api, operator.key, 'GET', '/api/v1/submissions?state=sent');
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json()).toMatchObject({
      code: 'validation_failed',
      errors: [{ path: 'querystring:/state', code: 'not_allowed' }],
    });
  });
});
