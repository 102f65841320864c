import { gzipSync } from 'node:zlib';
/**
 * Black-box conformance of the api host's two specified endpoints and their authentication, sentence by sentence
 * (shared/spec/interface-specification.md: "Submission", "Creative entry", "POST {base_url}/api/v1/submissions",
 * "POST {base_url}/api/v1/creatives/lookup", "Authentication", "Errors", "Limits"). Every check goes through HTTP
 * (inject); SQL is used only to set the scene (thousands of structures), never to judge an answer.
 *
 * Claims checked by other files and not repeated here:
 * - category_id "Required to send a new submission for review": test/approvals/submission-flow.test.ts ("refuses 422
 *   without media and without category_id").
 * - number SUB-<year>-<serial> counted per Almaty year (a create at 00:30 on 1 January in Almaty is SUB-2027-...):
 *   test/submissions/create.test.ts ("numbers are gap-free per year ... restart each Almaty year").
 * - 401/403 on every authenticated route of the api host, for every organisation kind and every missing scope:
 *   test/core/authorisation-matrix.test.ts.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { mp4, png } from '../approvals/media-fixtures.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

const T0 = new Date('2026-11-20T06:00:00Z'); // 11:00 on 20 November 2026 in Almaty
const PASSWORD = 'correct horse battery staple';
const SUBMISSIONS = '/api/v1/submissions';
const LOOKUP = '/api/v1/creatives/lookup';
const SCOPES = ['write:submissions', 'read:creatives'];
/** A tier-2 category of the catalogue (Automotive Sales Applications). */
const CATEGORY_ID = 1564;

interface Org {
  id: string;
  key: string;
  keyId: string;
}
interface Site {
  id: string;
  code: string;
}

let p: TestPlatform;
let dataDir: string;
let operatorA: Org;
let operatorB: Org;
let agency: Org;
let advertiser: Org;
let authority: Org;
let siteA: Site;
let siteA2: Site;
let siteB: Site;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-conformance-'));
  p = await startTestPlatform({ dataDir, now: T0 });
  operatorA = await createOrganisation(p, 'operator', SCOPES);
  operatorB = await createOrganisation(p, 'operator', SCOPES);
  agency = await createOrganisation(p, 'agency', SCOPES);
  advertiser = await createOrganisation(p, 'advertiser', SCOPES);
  const { rows } = await p.database.db.query<{ id: string }>(
    "SELECT id FROM organisations WHERE kind = 'authority'",
  );
  authority = await keyFor(rows[0]!.id, SCOPES);
  siteA = await createStructure(p, operatorA.id);
  siteA2 = await createStructure(p, operatorA.id);
  siteB = await createStructure(p, operatorB.id);
});
afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

// --- helpers ------------------------------------------------------------------------------------------------------

async function keyFor(organisationId: string, scopes: string[], routes?: string[]): Promise<Org> {
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${organisationId}/api-keys`,
    { name: 'conformance', scopes, ...(routes ? { routes } : {}) },
  );
  expect(res.statusCode, res.body).toBe(201);
  const k = res.json<{ id: string; key: string }>();
  return { id: organisationId, key: k.key, keyId: k.id };
}

const post = (key: string | null, url: string, body: unknown) =>
  apiCall(p.servers.api, key, 'POST', url, body);
const create = (key: string, body: unknown) => post(key, SUBMISSIONS, body);
const lookup = (key: string, hashes: unknown) => post(key, LOOKUP, { hashes });

const draft = (fields: Record<string, unknown> = {}) => ({
  advertiser_name: 'Kazakh Tea LLP',
  period_from: '2026-12-01',
  period_to: '2026-12-31',
  structure_ids: [siteA.id],
  ...fields,
});

/** spec Errors: "Problem documents use media type application/problem+json with a stable code." */
function expectProblem(res: LightMyRequestResponse, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
  const doc = res.json<{ code: string; status: number; errors?: { path: string; code: string }[] }>();
  expect(doc.code).toBe(code);
  expect(doc.status).toBe(status);
  return doc;
}

/** A 422 whose field errors name `paths` (and only those). */
function expectFieldErrors(res: LightMyRequestResponse, paths: string[]) {
  const doc = expectProblem(res, 422, 'validation_failed');
  expect([...new Set((doc.errors ?? []).map((e) => e.path))].sort()).toEqual([...paths].sort());
  return doc.errors ?? [];
}

function created(res: LightMyRequestResponse) {
  expect(res.statusCode, res.body).toBe(201);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  return res.json<Record<string, unknown>>();
}

/** Structures of `organisationId` made in one statement (the limits need thousands); their ids. */
async function bulkStructures(organisationId: string, n: number): Promise<string[]> {
  const prefix = `BULK-${Math.random().toString(36).slice(2, 8)}-`;
  const { rows } = await p.database.db.query<{ id: string }>(
    `INSERT INTO structures (organisation_id, code, district, format, created_at)
     SELECT $1, $2 || g, 'almaly', 'citylight', now() FROM generate_series(1, $3::int) g RETURNING id`,
    [organisationId, prefix, n],
  );
  return rows.map((r) => r.id);
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

// --- POST /api/v1/submissions -------------------------------------------------------------------------------------

/** spec "Submission (response of creation, 201)": the fields of the table, no other. */
const SUBMISSION_FIELDS = [
  'id',
  'number',
  'state',
  'advertiser_name',
  'period_from',
  'period_to',
  'declared_daily_plays',
  'category_id',
  'category',
  'channel',
  'fast_track',
  'external_refs',
  'review_due_at',
];
const REQUIRED_SUBMISSION_FIELDS = ['id', 'number', 'state', 'advertiser_name', 'period_from', 'period_to'];

describe('POST /api/v1/submissions: the Submission answered (201)', () => {
  test('every field of the resource, with its type; a new one is a draft numbered SUB-<year>-<serial>', async () => {
    const s = created(
      await create(agency.key, {
        ...draft({ structure_ids: [siteA.id, siteB.id] }),
        advertiser_bin: '123456789012',
        channel: 'programmatic',
        fast_track: true,
        external_refs: { crid: 'cr-1', adomain: ['tea.kz', 'www.tea.kz'], dsp: 'dsp-x', ssp: 'ssp-y' },
        category_id: 1003,
        declared_daily_plays: { [siteA.id]: 120, [siteB.id]: 0 },
      }),
    );
    expect(Object.keys(s).sort()).toEqual([...SUBMISSION_FIELDS].sort());
    expect(s['id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    // The Almaty year of the clock: 2026.
    expect(s['number']).toMatch(/^SUB-2026-\d+$/);
    expect(s).toMatchObject({
      state: 'draft',
      advertiser_name: 'Kazakh Tea LLP',
      period_from: '2026-12-01',
      period_to: '2026-12-31',
      declared_daily_plays: { [siteA.id]: 120, [siteB.id]: 0 },
      category_id: 1003,
      channel: 'programmatic',
      fast_track: true,
      external_refs: { crid: 'cr-1', adomain: ['tea.kz', 'www.tea.kz'], dsp: 'dsp-x', ssp: 'ssp-y' },
      // spec: "null without fast_track or before the submission is sent"; States: "review_due_at null".
      review_due_at: null,
    });
    // spec category: "Shape: id (integer), parent_id (integer), tier (integer), name {en, ru, kk} (strings)", the
    // entry of the categories list.
    const list = await p.servers.api.inject({ method: 'GET', url: '/api/v1/categories' });
    const entry = list.json<{ items: { id: number }[] }>().items.find((c) => c.id === 1003);
    expect(s['category']).toEqual(entry);
    expect(s['category']).toEqual({
      id: 1003,
      parent_id: 1002,
      tier: 2,
      name: { en: expect.any(String), ru: expect.any(String), kk: expect.any(String) },
    });
  });

  test('a minimal draft: required fields present, category null when none is set, review_due_at null', async () => {
    const s = created(await create(operatorA.key, draft()));
    for (const field of REQUIRED_SUBMISSION_FIELDS) expect(s).toHaveProperty(field);
    for (const field of Object.keys(s)) expect(SUBMISSION_FIELDS).toContain(field);
    expect(s).toMatchObject({ state: 'draft', category_id: null, category: null, review_due_at: null });
    expect(['direct', 'programmatic']).toContain(s['channel']);
    expect(typeof s['fast_track']).toBe('boolean');
  });

  test('numbers are distinct, SUB-<year>-<serial>, with the serial rising', async () => {
    const numbers: string[] = [];
    for (let i = 0; i < 3; i += 1)
      numbers.push(created(await create(operatorA.key, draft()))['number'] as string);
    expect(new Set(numbers).size).toBe(3);
    const serials = numbers.map((n) => {
      const m = /^SUB-(\d{4})-(\d+)$/.exec(n);
      expect(m, n).not.toBeNull();
      expect(m![1]).toBe('2026');
      return Number(m![2]);
    });
    expect(serials[1]).toBeGreaterThan(serials[0]!);
    expect(serials[2]).toBeGreaterThan(serials[1]!);
  });
});

describe('POST /api/v1/submissions: the request', () => {
  test('advertiser_name is required and takes up to 300 characters (characters, not UTF-16 units)', async () => {
    expectFieldErrors(await create(operatorA.key, { ...draft(), advertiser_name: undefined }), [
      '/advertiser_name',
    ]);
    expect(
      created(await create(operatorA.key, draft({ advertiser_name: 'n'.repeat(300) })))['advertiser_name'],
    ).toBe('n'.repeat(300));
    expect((await create(operatorA.key, draft({ advertiser_name: '😀'.repeat(300) }))).statusCode).toBe(201);
    expectFieldErrors(await create(operatorA.key, draft({ advertiser_name: 'n'.repeat(301) })), [
      '/advertiser_name',
    ]);
    expectFieldErrors(await create(operatorA.key, draft({ advertiser_name: 42 })), ['/advertiser_name']);
  });

  test('advertiser_bin is optional and, when sent, a string of 12 digits', async () => {
    expect((await create(operatorA.key, draft({ advertiser_bin: '000000000001' }))).statusCode).toBe(201);
    for (const bad of [
      '12345678901',
      '1234567890123',
      '12345678901a',
      ' 12345678901',
      123456789012,
      '１２３４５６７８９０１２',
    ]) {
      expectFieldErrors(await create(operatorA.key, draft({ advertiser_bin: bad })), ['/advertiser_bin']);
    }
  });

  test('period_from and period_to are required dates (YYYY-MM-DD), answered as sent', async () => {
    expectFieldErrors(
      await create(operatorA.key, { ...draft(), period_from: undefined, period_to: undefined }),
      ['/period_from', '/period_to'],
    );
    for (const bad of ['2026-12-1', '2026-12-01T00:00:00Z', '01.12.2026', '2026-02-30', 20261201, null]) {
      expectFieldErrors(await create(operatorA.key, draft({ period_from: bad })), ['/period_from']);
    }
    const s = created(
      await create(operatorA.key, draft({ period_from: '2027-02-28', period_to: '2027-03-01' })),
    );
    expect([s['period_from'], s['period_to']]).toEqual(['2027-02-28', '2027-03-01']);
  });

  test('structure_ids is required: an array of structure uuids', async () => {
    expectFieldErrors(await create(operatorA.key, { ...draft(), structure_ids: undefined }), [
      '/structure_ids',
    ]);
    expectFieldErrors(await create(operatorA.key, draft({ structure_ids: siteA.id })), ['/structure_ids']);
    expectFieldErrors(await create(operatorA.key, draft({ structure_ids: [siteA.id, 'site-7'] })), [
      '/structure_ids/1',
    ]);
    expectFieldErrors(
      await create(operatorA.key, draft({ structure_ids: ['00000000-0000-4000-8000-000000000000'] })),
      ['/structure_ids/0'],
    );
  });

  test('operators choose their own structures only; agencies choose structures of any operators', async () => {
    expectFieldErrors(await create(operatorA.key, draft({ structure_ids: [siteA.id, siteB.id] })), [
      '/structure_ids/1',
    ]);
    expect((await create(agency.key, draft({ structure_ids: [siteA.id, siteB.id] }))).statusCode).toBe(201);
  });

  test('limits: operators up to 200 structures, agencies up to 2000, counted after expanding saved sets', async () => {
    const ownIds = await bulkStructures(operatorA.id, 1001);
    const otherIds = await bulkStructures(operatorB.id, 1000);
    // Operators: 200 pass, 201 are refused.
    expect((await create(operatorA.key, draft({ structure_ids: ownIds.slice(0, 200) }))).statusCode).toBe(
      201,
    );
    expectFieldErrors(await create(operatorA.key, draft({ structure_ids: ownIds.slice(0, 201) })), [
      '/structure_ids',
    ]);
    // Counted after expansion: a set of 150 and 51 more are 201.
    const set = await post(operatorA.key, '/api/v1/structure-sets', {
      name: 'bulk',
      structure_ids: ownIds.slice(0, 150),
    });
    expect(set.statusCode, set.body).toBe(201);
    const setId = set.json<{ id: string }>().id;
    expectFieldErrors(
      await create(
        operatorA.key,
        draft({ structure_ids: ownIds.slice(150, 201), structure_set_ids: [setId] }),
      ),
      ['/structure_ids'],
    );
    expect(
      (
        await create(
          operatorA.key,
          draft({ structure_ids: ownIds.slice(150, 200), structure_set_ids: [setId] }),
        )
      ).statusCode,
    ).toBe(201);
    // A member retired since the set was saved is left out, and the limit counts the list without it.
    const retire = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/structures/${ownIds[0]}/retire`,
    );
    expect(retire.statusCode, retire.body).toBeLessThan(300);
    const s = created(
      await create(
        operatorA.key,
        draft({ structure_ids: ownIds.slice(150, 201), structure_set_ids: [setId] }),
      ),
    );
    const got = await apiCall(p.servers.api, operatorA.key, 'GET', `${SUBMISSIONS}/${s['id']}`);
    const chosen = got.json<{ structure_ids: string[] }>().structure_ids;
    expect(chosen).toHaveLength(200);
    expect(chosen).not.toContain(ownIds[0]);
    expect(new Set(chosen)).toEqual(new Set([...ownIds.slice(1, 150), ...ownIds.slice(150, 201)]));
    // Agencies: 2000 of two operators pass, 2001 are refused.
    const mixed = [...ownIds.slice(1, 1001), ...otherIds];
    expect(mixed).toHaveLength(2000);
    expect((await create(agency.key, draft({ structure_ids: mixed }))).statusCode).toBe(201);
    expectFieldErrors(await create(agency.key, draft({ structure_ids: [...mixed, siteA.id] })), [
      '/structure_ids',
    ]);
  });

  test("structure_set_ids are the organisation's saved sets; another organisation's set is refused", async () => {
    const set = await post(operatorA.key, '/api/v1/structure-sets', {
      name: 'centre',
      structure_ids: [siteA2.id],
    });
    expect(set.statusCode).toBe(201);
    const setId = set.json<{ id: string }>().id;
    const s = created(await create(operatorA.key, draft({ structure_ids: [], structure_set_ids: [setId] })));
    const got = await apiCall(p.servers.api, operatorA.key, 'GET', `${SUBMISSIONS}/${s['id']}`);
    expect(got.json<{ structure_ids: string[] }>().structure_ids).toEqual([siteA2.id]);
    expectFieldErrors(
      await create(agency.key, draft({ structure_ids: [siteB.id], structure_set_ids: [setId] })),
      ['/structure_set_ids/0'],
    );
    expectFieldErrors(await create(operatorA.key, draft({ structure_set_ids: ['centre'] })), [
      '/structure_set_ids/0',
    ]);
  });

  test('channel is direct or programmatic', async () => {
    expect(created(await create(agency.key, draft({ channel: 'direct' })))['channel']).toBe('direct');
    expect(created(await create(agency.key, draft({ channel: 'programmatic' })))['channel']).toBe(
      'programmatic',
    );
    for (const bad of ['Programmatic', 'rtb', '', 1]) {
      expectFieldErrors(await create(agency.key, draft({ channel: bad })), ['/channel']);
    }
  });

  test('external_refs: crid, adomain, dsp, ssp; unknown keys refused; only with channel programmatic', async () => {
    const refs = { crid: 'cr-9', adomain: ['tea.kz'], dsp: 'dsp-1', ssp: 'ssp-1' };
    expect(
      created(await create(agency.key, draft({ channel: 'programmatic', external_refs: refs })))[
        'external_refs'
      ],
    ).toEqual(refs);
    expect(
      created(await create(agency.key, draft({ channel: 'programmatic', external_refs: { crid: 'only' } })))[
        'external_refs'
      ],
    ).toEqual({ crid: 'only' });
    expectFieldErrors(
      await create(agency.key, draft({ channel: 'programmatic', external_refs: { crid: 'c', seat: 's1' } })),
      ['/external_refs/seat'],
    );
    expectFieldErrors(await create(agency.key, draft({ channel: 'direct', external_refs: { crid: 'c' } })), [
      '/external_refs',
    ]);
    expectFieldErrors(await create(agency.key, draft({ external_refs: { crid: 'c' } })), ['/external_refs']);
    // spec types: crid, dsp, ssp strings; adomain an array of strings; external_refs an object.
    for (const [field, bad] of [
      ['crid', 7],
      ['dsp', ['x']],
      ['ssp', {}],
      ['adomain', 'tea.kz'],
      ['adomain', [7]],
    ] as const) {
      const res = await create(
        agency.key,
        draft({ channel: 'programmatic', external_refs: { [field]: bad } }),
      );
      expect(
        expectProblem(res, 422, 'validation_failed')
          .errors!.map((e) => e.path)
          .join(' '),
      ).toContain(`/external_refs/${field}`);
    }
    for (const bad of [[], 'crid']) {
      expectFieldErrors(await create(agency.key, draft({ channel: 'programmatic', external_refs: bad })), [
        '/external_refs',
      ]);
    }
  });

  test('fast_track is a boolean, and true only with channel programmatic', async () => {
    const s = created(await create(agency.key, draft({ channel: 'programmatic', fast_track: true })));
    expect(s).toMatchObject({ fast_track: true, review_due_at: null });
    expectFieldErrors(await create(agency.key, draft({ channel: 'direct', fast_track: true })), [
      '/fast_track',
    ]);
    expectFieldErrors(await create(agency.key, draft({ fast_track: true })), ['/fast_track']);
    for (const bad of ['true', 1]) {
      expectFieldErrors(await create(agency.key, draft({ channel: 'programmatic', fast_track: bad })), [
        '/fast_track',
      ]);
    }
  });

  test('category_id: optional at draft, an integer id of the categories list (tiers 1 and 2)', async () => {
    const list = (await p.servers.api.inject({ method: 'GET', url: '/api/v1/categories' })).json<{
      items: { id: number; tier: number }[];
    }>().items;
    const tier1 = list.find((c) => c.tier === 1)!;
    const tier2 = list.find((c) => c.tier === 2)!;
    for (const c of [tier1, tier2]) {
      const s = created(await create(operatorA.key, draft({ category_id: c.id })));
      expect(s['category_id']).toBe(c.id);
      expect(s['category']).toEqual(c);
    }
    const known = new Set(list.map((c) => c.id));
    let unknown = 1;
    while (known.has(unknown)) unknown += 1;
    for (const bad of [unknown, 1003.5, '1003']) {
      expectFieldErrors(await create(operatorA.key, draft({ category_id: bad })), ['/category_id']);
    }
  });

  test('declared_daily_plays: plays per day keyed by the id of a chosen structure', async () => {
    const s = created(
      await create(
        operatorA.key,
        draft({ structure_ids: [siteA.id, siteA2.id], declared_daily_plays: { [siteA2.id]: 300 } }),
      ),
    );
    expect(s['declared_daily_plays']).toEqual({ [siteA2.id]: 300 });
    expectFieldErrors(await create(operatorA.key, draft({ declared_daily_plays: { [siteA2.id]: 300 } })), [
      `/declared_daily_plays/${siteA2.id}`,
    ]);
    for (const bad of [-1, 1.5, '300', null]) {
      expectFieldErrors(await create(operatorA.key, draft({ declared_daily_plays: { [siteA.id]: bad } })), [
        `/declared_daily_plays/${siteA.id}`,
      ]);
    }
    for (const bad of [[300], 300]) {
      expectFieldErrors(await create(operatorA.key, draft({ declared_daily_plays: bad })), [
        '/declared_daily_plays',
      ]);
    }
  });

  test('null in an optional field is "not given", so a Submission sent back as a request is taken', async () => {
    const s = created(
      await create(
        agency.key,
        draft({
          advertiser_bin: null,
          channel: null,
          external_refs: null,
          fast_track: null,
          category_id: null,
          declared_daily_plays: null,
        }),
      ),
    );
    expect(s).toMatchObject({ channel: 'direct', fast_track: false, category_id: null, category: null });
    expect(s).not.toHaveProperty('external_refs');
    expect(s).not.toHaveProperty('declared_daily_plays');
    // The answer itself (category_id null, category null, review_due_at null ...) minus what the server assigns.
    const { id: _id, number: _number, state: _state, category: _category, review_due_at: _due, ...back } = s;
    const again = created(await create(agency.key, { ...back, structure_ids: draft()['structure_ids'] }));
    expect(again).toMatchObject({
      advertiser_name: s['advertiser_name'],
      category_id: null,
      channel: 'direct',
    });
  });

  test('a field the request table does not name is refused, and every field error is listed at once', async () => {
    const errors = expectFieldErrors(
      await create(operatorA.key, {
        advertiser_name: '',
        period_from: 'soon',
        structure_ids: [siteB.id],
        colour: 'red',
      }),
      ['/advertiser_name', '/period_from', '/period_to', '/structure_ids/0', '/colour'],
    );
    expect(errors.length).toBeGreaterThanOrEqual(5);
  });

  test('a text that is not Unicode (a lone surrogate) is a field error, not stored altered', async () => {
    expectFieldErrors(await create(operatorA.key, draft({ advertiser_name: 'Tea \ud800' })), [
      '/advertiser_name',
    ]);
    expectFieldErrors(
      await create(agency.key, draft({ channel: 'programmatic', external_refs: { crid: 'cr-\udc00' } })),
      ['/external_refs/crid'],
    );
  });
});

// --- POST /api/v1/creatives/lookup --------------------------------------------------------------------------------

/** spec "Creative entry": every field required. */
const ENTRY_FIELDS = [
  'status',
  'approval_number',
  'submission_number',
  'valid_from',
  'valid_until',
  'structures',
  'category_id',
  'duration_ms',
  'width',
  'height',
  'envelope_url',
].sort();

interface Sent {
  id: string;
  number: string;
  sha256: string;
}

/** Create, upload and send: a submission in review (the flow's routes are not this file's subject). */
async function inReview(
  org: Org,
  media: { bytes: Buffer; type: string },
  fields: Record<string, unknown>,
): Promise<Sent> {
  const s = created(await create(org.key, draft({ category_id: CATEGORY_ID, ...fields })));
  const up = await p.servers.api.inject({
    method: 'PUT',
    url: `${SUBMISSIONS}/${s['id']}/media`,
    headers: { authorization: `Bearer ${org.key}`, 'content-type': media.type },
    payload: media.bytes,
  });
  expect(up.statusCode, up.body).toBe(200);
  const sent = await post(org.key, `${SUBMISSIONS}/${s['id']}/send`, undefined);
  expect(sent.statusCode, sent.body).toBe(200);
  return {
    id: s['id'] as string,
    number: s['number'] as string,
    sha256: up.json<{ media_sha256: string }>().media_sha256,
  };
}

async function approve(submissionId: string, body: Record<string, unknown> = {}): Promise<string> {
  const res = await post(p.adminKey, `/api/v1/console/submissions/${submissionId}/approve`, body);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ approval_number: string }>().approval_number;
}

describe('POST /api/v1/creatives/lookup', () => {
  // V: the agency's video on A's and B's structures, approved for December on A's only.
  // I: the agency's image in review for 1-15 January 2027. R: the agency's image, rejected.
  // O: operator A's own image, approved for November; revoked in the last test of this block.
  let v: Sent & { approval: string };
  let i: Sent;
  let r: Sent;
  let o: Sent & { approval: string };
  const unknown = sha256('never uploaded');

  beforeAll(async () => {
    p.clock.set(T0);
    const vs = await inReview(
      agency,
      { bytes: mp4(1280, 720, 15_000), type: 'video/mp4' },
      {
        structure_ids: [siteA.id, siteB.id],
      },
    );
    v = { ...vs, approval: await approve(vs.id, { structure_ids: [siteA.id] }) };
    i = await inReview(
      agency,
      { bytes: png(16, 9, 11), type: 'image/png' },
      {
        structure_ids: [siteA.id, siteB.id],
        period_from: '2027-01-01',
        period_to: '2027-01-15',
      },
    );
    r = await inReview(
      agency,
      { bytes: png(16, 9, 12), type: 'image/png' },
      {
        structure_ids: [siteB.id],
        period_from: '2027-02-01',
        period_to: '2027-02-28',
      },
    );
    const rejected = await post(p.adminKey, `/api/v1/console/submissions/${r.id}/reject`, {
      reason: 'claims',
    });
    expect(rejected.statusCode, rejected.body).toBe(200);
    const os_ = await inReview(
      operatorA,
      { bytes: png(40, 30, 13), type: 'image/png' },
      {
        structure_ids: [siteA.id, siteA2.id],
        period_from: '2026-11-01',
        period_to: '2026-11-30',
      },
    );
    o = { ...os_, approval: await approve(os_.id) };
  });

  const itemsOf = async (org: Org, hashes: string[]) => {
    const res = await lookup(org.key, hashes);
    expect(res.statusCode, res.body).toBe(200);
    expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
    return res.json<{
      items: { sha256: string; approvals: Record<string, unknown>[] }[];
      revocation_list_version: unknown;
    }>();
  };

  test('the answer: items of {sha256, approvals} and revocation_list_version, null before the first list', async () => {
    p.clock.set(new Date('2026-12-05T06:00:00Z'));
    const body = await itemsOf(agency, [v.sha256]);
    expect(Object.keys(body).sort()).toEqual(['items', 'revocation_list_version']);
    expect(body.revocation_list_version).toBeNull();
    expect(body.items).toHaveLength(1);
    expect(Object.keys(body.items[0]!).sort()).toEqual(['approvals', 'sha256']);
    expect(body.items[0]!.sha256).toBe(v.sha256);
  });

  test('an issued approval: every field of the creative entry; submission_number for the own submission', async () => {
    p.clock.set(new Date('2026-12-05T06:00:00Z'));
    const [entry] = (await itemsOf(agency, [v.sha256])).items[0]!.approvals;
    expect(Object.keys(entry!).sort()).toEqual(ENTRY_FIELDS);
    expect(entry).toEqual({
      status: 'valid',
      approval_number: v.approval,
      submission_number: v.number,
      valid_from: '2026-12-01',
      valid_until: '2026-12-31',
      // "Codes of the structures the approval covers": B's was narrowed away.
      structures: [siteA.code],
      category_id: CATEGORY_ID,
      duration_ms: 15_000,
      width: 1280,
      height: 720,
      envelope_url: expect.any(String),
    });
    // envelope_url: "string (uri) ... (same credentials needed)".
    const url = new URL(entry!['envelope_url'] as string);
    expect(url.protocol).toMatch(/^https?:$/);
    const envelope = await apiCall(p.servers.api, agency.key, 'GET', url.pathname);
    expect(envelope.statusCode).toBe(200);
    expect(envelope.json<{ body: { approval_number: string } }>().body.approval_number).toBe(v.approval);
    expectProblem(await apiCall(p.servers.api, null, 'GET', url.pathname), 401, 'unauthenticated');
  });

  test("submission_number is filled only for the caller's own submissions", async () => {
    p.clock.set(new Date('2026-12-05T06:00:00Z'));
    // Operator A sees V (its structure is covered), not as its own.
    const [asOperator] = (await itemsOf(operatorA, [v.sha256])).items[0]!.approvals;
    expect(asOperator).toMatchObject({ approval_number: v.approval, submission_number: null });
    const [asAuthority] = (await itemsOf(authority, [v.sha256])).items[0]!.approvals;
    expect(asAuthority).toMatchObject({ approval_number: v.approval, submission_number: null });
    const [own] = (await itemsOf(operatorA, [o.sha256])).items[0]!.approvals;
    expect(own).toMatchObject({ approval_number: o.approval, submission_number: o.number });
  });

  test('pending: no approval number and no envelope, the requested period and structures; images have no duration', async () => {
    const [entry] = (await itemsOf(agency, [i.sha256])).items[0]!.approvals;
    expect(entry).toEqual({
      status: 'pending',
      approval_number: null,
      submission_number: i.number,
      valid_from: '2027-01-01',
      valid_until: '2027-01-15',
      structures: [siteA.code, siteB.code].sort(),
      category_id: CATEGORY_ID,
      duration_ms: null,
      width: 16,
      height: 9,
      envelope_url: null,
    });
  });

  test('rejected: no approval number and no envelope, the requested period', async () => {
    const [entry] = (await itemsOf(agency, [r.sha256])).items[0]!.approvals;
    expect(entry).toEqual({
      status: 'rejected',
      approval_number: null,
      submission_number: r.number,
      valid_from: '2027-02-01',
      valid_until: '2027-02-28',
      structures: [siteB.code],
      category_id: CATEGORY_ID,
      duration_ms: null,
      width: 16,
      height: 9,
      envelope_url: null,
    });
  });

  test("pending and rejected are the caller's own organisation's: others get an empty list, not 404", async () => {
    for (const org of [operatorA, operatorB, authority, advertiser]) {
      const body = await itemsOf(org, [i.sha256, r.sha256]);
      expect(body.items).toEqual([
        { sha256: i.sha256, approvals: [] },
        { sha256: r.sha256, approvals: [] },
      ]);
    }
  });

  test('a hash the caller may not see, or nobody has, gives an empty approvals list, not 404', async () => {
    p.clock.set(new Date('2026-12-05T06:00:00Z'));
    // V covers A's structure only: B may not see it; the advertiser has nothing to do with it.
    for (const org of [operatorB, advertiser]) {
      expect((await itemsOf(org, [v.sha256, unknown])).items).toEqual([
        { sha256: v.sha256, approvals: [] },
        { sha256: unknown, approvals: [] },
      ]);
    }
  });

  test.each([
    ['2026-11-30T18:59:59Z', 'not_yet_valid'], // 23:59:59 on 30 November in Almaty
    ['2026-11-30T19:00:00Z', 'valid'], // 00:00 on 1 December in Almaty
    ['2026-12-31T18:59:59Z', 'valid'],
    ['2026-12-31T19:00:00Z', 'expired'],
  ])('status of an issued approval at %s: %s', async (instant, status) => {
    p.clock.set(new Date(instant));
    expect((await itemsOf(agency, [v.sha256])).items[0]!.approvals[0]!['status']).toBe(status);
  });

  test('one item per requested hash, in the order given, without repeats', async () => {
    p.clock.set(new Date('2026-12-05T06:00:00Z'));
    const order = [r.sha256, unknown, v.sha256, r.sha256, i.sha256, unknown, v.sha256];
    const body = await itemsOf(agency, order);
    expect(body.items.map((item) => item.sha256)).toEqual([r.sha256, unknown, v.sha256, i.sha256]);
    expect(body.items.map((item) => item.approvals.map((a) => a['status']))).toEqual([
      ['rejected'],
      [],
      ['valid'],
      ['pending'],
    ]);
    expect((await itemsOf(agency, [])).items).toEqual([]);
  });

  test('each item is the same answer as the single lookup for that hash', async () => {
    p.clock.set(new Date('2026-12-05T06:00:00Z'));
    const hashes = [v.sha256, i.sha256, r.sha256, o.sha256, unknown];
    for (const org of [agency, operatorA, operatorB, authority]) {
      const body = await itemsOf(org, hashes);
      for (const [index, hash] of hashes.entries()) {
        const single = await apiCall(p.servers.api, org.key, 'GET', `/api/v1/creatives/${hash}`);
        expect(single.statusCode).toBe(200);
        expect(single.json()).toEqual(body.items[index]);
      }
    }
  });

  test('at most 500 hashes, each lowercase hexadecimal SHA-256', async () => {
    const many = Array.from({ length: 501 }, (_, n) => sha256(`h${n}`));
    const five = await itemsOf(agency, many.slice(0, 500));
    expect(five.items).toHaveLength(500);
    expectFieldErrors(await lookup(agency.key, many), ['/hashes']);
    expectFieldErrors(await lookup(agency.key, [v.sha256, v.sha256.toUpperCase()]), ['/hashes/1']);
    expectFieldErrors(await lookup(agency.key, [v.sha256.slice(1)]), ['/hashes/0']);
    expectFieldErrors(await lookup(agency.key, [`${v.sha256}0`]), ['/hashes/0']);
    expectFieldErrors(await lookup(agency.key, ['g'.repeat(64)]), ['/hashes/0']);
    expectFieldErrors(await lookup(agency.key, [64]), ['/hashes/0']);
    expectFieldErrors(await lookup(agency.key, v.sha256), ['/hashes']);
    expectFieldErrors(await post(agency.key, LOOKUP, {}), ['/hashes']);
    expectFieldErrors(await post(agency.key, LOOKUP, { hashes: [], extra: 1 }), ['/extra']);
  });

  test('revoked on any date, and revocation_list_version is then the newest list version', async () => {
    p.clock.set(new Date('2026-11-25T06:00:00Z'));
    expect((await itemsOf(operatorA, [o.sha256])).items[0]!.approvals[0]!['status']).toBe('valid');
    const revoked = await post(p.adminKey, `/api/v1/console/approvals/${o.approval}/revoke`, {
      reason: 'order',
    });
    expect(revoked.statusCode, revoked.body).toBe(200);
    const version = revoked.json<{ revocation_list_version: number }>().revocation_list_version;
    const list = await p.servers.verify.inject({ method: 'GET', url: '/v1/revocations.json' });
    expect(list.json<{ body: { version: number } }>().body.version).toBe(version);
    for (const instant of ['2026-10-01T06:00:00Z', '2026-11-25T06:00:00Z', '2027-06-01T06:00:00Z']) {
      p.clock.set(new Date(instant));
      for (const org of [operatorA, authority]) {
        const body = await itemsOf(org, [o.sha256]);
        expect(body.revocation_list_version).toBe(version);
        expect(body.items[0]!.approvals[0]).toMatchObject({
          status: 'revoked',
          approval_number: o.approval,
          valid_from: '2026-11-01',
          valid_until: '2026-11-30',
          envelope_url: expect.any(String),
        });
      }
    }
    p.clock.set(T0);
  });
});

// --- Authentication and errors ------------------------------------------------------------------------------------

const ROUTES = [
  { url: SUBMISSIONS, scope: 'write:submissions', body: () => draft() },
  { url: LOOKUP, scope: 'read:creatives', body: () => ({ hashes: [sha256('x')] }) },
] as const;

async function signIn(organisationId: string, role: 'admin' | 'member' = 'member') {
  const email = `user-${Math.random().toString(36).slice(2, 10)}@example.kz`;
  const user = await post(p.adminKey, `/api/v1/console/organisations/${organisationId}/users`, {
    email,
    password: PASSWORD,
    role,
  });
  expect(user.statusCode, user.body).toBe(201);
  const res = await p.servers.api.inject({
    method: 'POST',
    url: '/api/v1/console/session',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ email, password: PASSWORD }),
  });
  expect(res.statusCode, res.body).toBe(200);
  const raw = res.headers['set-cookie'];
  const cookies = Array.isArray(raw) ? raw : [String(raw)];
  const cookie = cookies.find((c) => c.startsWith('ooh_session='))!.split(';')[0]!;
  return { cookie, csrf: res.json<{ csrf_token: string }>().csrf_token };
}

const withSession = (s: { cookie: string; csrf: string }, url: string, body: unknown) =>
  p.servers.api.inject({
    method: 'POST',
    url,
    headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });

describe.each(ROUTES)('authentication and errors of POST $url', ({ url, scope, body }) => {
  test('an API key in the Authorization header, Bearer scheme', async () => {
    const res = await p.servers.api.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${operatorA.key}`, 'content-type': 'application/json' },
      payload: JSON.stringify(body()),
    });
    expect(res.statusCode, res.body).toBe(url === SUBMISSIONS ? 201 : 200);
  });

  test('a console session', async () => {
    const session = await signIn(operatorA.id);
    const res = await withSession(session, url, body());
    expect(res.statusCode, res.body).toBe(url === SUBMISSIONS ? 201 : 200);
  });

  test('401 unauthenticated without credentials', async () => {
    expectProblem(await post(null, url, body()), 401, 'unauthenticated');
    const unknownCookie = await p.servers.api.inject({
      method: 'POST',
      url,
      headers: { cookie: 'ooh_session=nothing-of-ours', 'content-type': 'application/json' },
      payload: JSON.stringify(body()),
    });
    expectProblem(unknownCookie, 401, 'unauthenticated');
  });

  test('401 invalid_api_key for an unknown, malformed or revoked key', async () => {
    expectProblem(
      await post('ooh_thisisnotakeyofoursthisisnotakeyofours', url, body()),
      401,
      'invalid_api_key',
    );
    const malformed = await p.servers.api.inject({
      method: 'POST',
      url,
      headers: { authorization: 'Basic dXNlcjpwYXNz', 'content-type': 'application/json' },
      payload: JSON.stringify(body()),
    });
    expectProblem(malformed, 401, 'invalid_api_key');
    const key = await keyFor(operatorA.id, [scope]);
    const revoke = await apiCall(
      p.servers.api,
      p.adminKey,
      'DELETE',
      `/api/v1/console/api-keys/${key.keyId}`,
    );
    expect(revoke.statusCode).toBe(204);
    expectProblem(await post(key.key, url, body()), 401, 'invalid_api_key');
  });

  test('401 session_expired for a session past its idle time', async () => {
    const session = await signIn(operatorA.id);
    p.clock.set(new Date(T0.getTime() + 31 * 60_000));
    try {
      expectProblem(await withSession(session, url, body()), 401, 'session_expired');
    } finally {
      p.clock.set(T0);
    }
  });

  test('403 key_scope_denied without the scope', async () => {
    const other = scope === 'write:submissions' ? 'read:creatives' : 'write:submissions';
    const key = await keyFor(operatorA.id, [other, 'read:submissions']);
    expectProblem(await post(key.key, url, body()), 403, 'key_scope_denied');
  });

  test("403 key_route_denied when the key's route list leaves the route out", async () => {
    const otherRoute = url === SUBMISSIONS ? 'POST /api/v1/creatives/lookup' : 'POST /api/v1/submissions';
    const key = await keyFor(operatorA.id, SCOPES, [otherRoute]);
    expectProblem(await post(key.key, url, body()), 403, 'key_route_denied');
    const allowed = await keyFor(operatorA.id, SCOPES, [`POST ${url}`]);
    expect((await post(allowed.key, url, body())).statusCode).toBeLessThan(300);
  });

  test('400 invalid_json for a body that is not JSON', async () => {
    for (const payload of ['{"hashes": [', '', "{'a': 1}", 'undefined']) {
      const res = await p.servers.api.inject({
        method: 'POST',
        url,
        headers: { authorization: `Bearer ${operatorA.key}`, 'content-type': 'application/json' },
        payload,
      });
      expectProblem(res, 400, 'invalid_json');
    }
  });

  test('415 unsupported_media_type for a body that is not JSON by its media type', async () => {
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      const res = await p.servers.api.inject({
        method: 'POST',
        url,
        headers: { authorization: `Bearer ${operatorA.key}`, 'content-type': type },
        payload: JSON.stringify(body()),
      });
      expectProblem(res, 415, 'unsupported_media_type');
    }
  });

  test('413 body_too_large for a body over the size limit', async () => {
    const res = await post(operatorA.key, url, { ...body(), padding: 'x'.repeat(2_000_000) });
    expectProblem(res, 413, 'body_too_large');
  });

  // RFC 9110 section 15.5.16: a body in a content coding the route does not decode is 415 (the spec names gzip for
  // the CMS channel only). A gzip body was parsed as if plain (400 invalid_json), a labelled plain one taken.
  test('415 unsupported_media_type for a body in a content coding, and identity is no coding', async () => {
    const json = Buffer.from(JSON.stringify(body()), 'utf8');
    for (const [coding, payload] of [
      ['gzip', gzipSync(json)],
      ['br', json],
      ['deflate, gzip', json],
    ] as const) {
      const res = await p.servers.api.inject({
        method: 'POST',
        url,
        headers: {
          authorization: `Bearer ${operatorA.key}`,
          'content-type': 'application/json',
          'content-encoding': coding,
        },
        payload,
      });
      expectProblem(res, 415, 'unsupported_media_type');
      expect(res.headers['accept-encoding']).toBe('identity');
    }
    const plain = await p.servers.api.inject({
      method: 'POST',
      url,
      headers: {
        authorization: `Bearer ${operatorA.key}`,
        'content-type': 'application/json',
        'content-encoding': 'identity',
      },
      payload: json,
    });
    expect(plain.statusCode, plain.body).toBeLessThan(300);
    // No credential: 401 first, as for any body.
    const anonymous = await p.servers.api.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', 'content-encoding': 'br' },
      payload: json,
    });
    expectProblem(anonymous, 401, 'unauthenticated');
  });

  // RFC 8259 section 8.1: a JSON text exchanged between systems is UTF-8, so such a body "is not JSON" (it was read
  // with replacement characters and taken).
  test('400 invalid_json for a body that is not UTF-8', async () => {
    const bytes = Buffer.from(JSON.stringify({ ...body(), advertiser_name: 'Tea xx' }), 'utf8');
    const at = bytes.indexOf('xx');
    bytes[at] = 0xff; // never a byte of UTF-8
    bytes[at + 1] = 0xfe;
    const res = await p.servers.api.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${operatorA.key}`, 'content-type': 'application/json' },
      payload: bytes,
    });
    expectProblem(res, 400, 'invalid_json');
  });

  test('422 validation_failed with field errors for JSON of the wrong shape', async () => {
    for (const payload of ['null', '[]', '"text"', '42', 'true']) {
      const res = await p.servers.api.inject({
        method: 'POST',
        url,
        headers: { authorization: `Bearer ${operatorA.key}`, 'content-type': 'application/json' },
        payload,
      });
      expect(expectProblem(res, 422, 'validation_failed').errors!.length).toBeGreaterThan(0);
    }
  });

  test('never a 5xx, whatever the body: every refusal is a problem document', async () => {
    const hostile: unknown[] = [
      JSON.parse('{"__proto__": {"polluted": true}, "hashes": []}'),
      JSON.parse('{"constructor": {"prototype": {"x": 1}}}'),
      { hashes: ['\u0000'.repeat(64)] },
      { ...body(), advertiser_name: 'a\u0000b' },
      {
        ...body(),
        structure_ids: Array.from({ length: 3000 }, () => '00000000-0000-4000-8000-000000000000'),
      },
      { ...body(), structure_ids: ['ffffffff-ffff-ffff-ffff-ffffffffffff'] },
      { ...body(), period_from: '0000-01-01', period_to: '0000-01-02' },
      { ...body(), period_from: '9999-12-31', period_to: '9999-12-31' },
      { ...body(), category_id: 2 ** 53 + 2 },
      { ...body(), category_id: -(2 ** 31) - 1 },
      { ...body(), declared_daily_plays: { [siteA.id]: 1e308 } },
      {
        ...body(),
        declared_daily_plays: Object.fromEntries(Array.from({ length: 500 }, (_, n) => [`k${n}`, n])),
      },
      { ...body(), channel: 'programmatic', external_refs: { crid: '\ud800', adomain: ['\udfff.kz'] } },
      { ...body(), channel: 'programmatic', external_refs: { adomain: Array(100).fill('a'.repeat(300)) } },
      { ...body(), structure_set_ids: ['00000000-0000-4000-8000-000000000000', 'x', null, 7] },
      { hashes: Array.from({ length: 500 }, () => 'a'.repeat(64)) },
      { hashes: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['deep']]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]] },
    ];
    for (const [index, value] of hostile.entries()) {
      const res = await post(operatorA.key, url, value);
      expect(res.statusCode, `body ${index}: ${res.body}`).toBeLessThan(500);
      if (res.statusCode >= 400) {
        expect(String(res.headers['content-type']), `body ${index}`).toMatch(/^application\/problem\+json/);
        expect(typeof res.json<{ code: unknown }>().code).toBe('string');
      }
    }
  });
});

describe('403 forbidden: a role the route does not allow', () => {
  test('the authority does not create submissions, even holding write:submissions', async () => {
    expectProblem(await create(authority.key, draft()), 403, 'forbidden');
    const session = await signIn(authority.id, 'admin');
    // An authority session holds no write:submissions at all: the scope is what is missing.
    expectProblem(await withSession(session, SUBMISSIONS, draft()), 403, 'key_scope_denied');
  });

  test('a console session without its CSRF token on POST is refused 403 forbidden', async () => {
    const session = await signIn(agency.id);
    for (const url of [SUBMISSIONS, LOOKUP]) {
      const res = await p.servers.api.inject({
        method: 'POST',
        url,
        headers: { cookie: session.cookie, 'content-type': 'application/json' },
        payload: JSON.stringify(url === LOOKUP ? { hashes: [] } : draft()),
      });
      expectProblem(res, 403, 'forbidden');
    }
  });
});
