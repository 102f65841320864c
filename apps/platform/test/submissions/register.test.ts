import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { png } from '../approvals/media-fixtures.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

/*
 * The authority's register of decided submissions (issue 25 item 3), through HTTP: search, filters, paging on the
 * server, each submission's history with who and when, and the refusals (no credential, someone else's, hostile
 * query values).
 */

const URL_BASE = '/api/v1/console/submissions/decided';
let p: TestPlatform;
let dataDir: string;
let operator: { id: string; key: string; keyId: string };
let agency: { id: string; key: string; keyId: string };
const made: Record<string, { id: string; number: string; approval?: string }> = {};

async function ok(key: string, method: 'POST' | 'GET', url: string, body?: unknown) {
  const res = await apiCall(p.servers.api, key, method, url, body);
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  return res.json();
}

/** A sent submission of `owner` for `advertiser` (each with a media file of its own). */
async function sent(owner: { key: string }, advertiser: string, structureId: string, seed: number) {
  const draft = await ok(owner.key, 'POST', '/api/v1/submissions', {
    advertiser_name: advertiser,
    advertiser_bin: `99000000000${seed % 10}`,
    period_from: '2026-04-01',
    period_to: '2026-04-30',
    structure_ids: [structureId],
    category_id: 1564,
  });
  const upload = await p.servers.api.inject({
    method: 'PUT',
    url: `/api/v1/submissions/${draft.id}/media`,
    headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'image/png' },
    payload: png(64 + seed, 32, seed),
  });
  expect(upload.statusCode, upload.body).toBe(200);
  await ok(owner.key, 'POST', `/api/v1/submissions/${draft.id}/send`);
  return { id: draft.id as string, number: draft.number as string };
}

const register = (query = '', key: string | null = p.adminKey) =>
  apiCall(p.servers.api, key, 'GET', `${URL_BASE}${query}`);

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-register-'));
  p = await startTestPlatform({ dataDir, now: new Date('2026-03-10T05:00:00Z') });
  operator = await createOrganisation(
    p,
    'operator',
    ['write:submissions', 'read:submissions'],
    'Steppe Screens',
  );
  agency = await createOrganisation(
    p,
    'agency',
    ['write:submissions', 'read:submissions', 'read:creatives'],
    'Media 100% Agency',
  );
  const structure = await createStructure(p, operator.id);
  const agencyStructure = await createStructure(p, operator.id);
  // Decided in this order, an hour apart: approved (tea), rejected (coffee), approved then revoked (milk).
  made['tea'] = await sent(agency, 'Kazakh Tea LLP', agencyStructure.id, 1);
  made['coffee'] = await sent(agency, 'Coffee_House', agencyStructure.id, 2);
  made['milk'] = await sent(operator, 'Milk & Co', structure.id, 3);
  made['waiting'] = await sent(operator, 'Still Waiting LLP', structure.id, 4);
  await ok(operator.key, 'POST', '/api/v1/submissions', {
    advertiser_name: 'Draft Only LLP',
    period_from: '2026-04-01',
    period_to: '2026-04-30',
    structure_ids: [structure.id],
  });
  p.clock.set(new Date('2026-03-10T06:00:00Z'));
  made['tea'].approval = (
    await ok(p.adminKey, 'POST', `/api/v1/console/submissions/${made['tea'].id}/approve`, {})
  ).approval_number;
  p.clock.set(new Date('2026-03-10T07:00:00Z'));
  await ok(p.adminKey, 'POST', `/api/v1/console/submissions/${made['coffee'].id}/reject`, {
    reason: 'The text is too small to read from the road.',
  });
  p.clock.set(new Date('2026-03-10T08:00:00Z'));
  made['milk'].approval = (
    await ok(p.adminKey, 'POST', `/api/v1/console/submissions/${made['milk'].id}/approve`, {})
  ).approval_number;
  p.clock.set(new Date('2026-03-10T09:00:00Z'));
  await ok(p.adminKey, 'POST', `/api/v1/console/approvals/${made['milk'].approval}/revoke`, {
    reason: 'Court order 12/2026.',
  });
}, 120_000);

afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

interface Item {
  submission_id: string;
  number: string;
  state: string;
  advertiser_name: string;
  organisation: { id: string; name: string; kind: string };
  decided_at: string;
  approval: { number: string; revoked_at: string | null; revoke_reason: string | null } | null;
  reject_reason: string | null;
  history: { event: string; at: string; by: { kind: string; name: string } | null; reason?: string }[];
}
interface Page {
  items: Item[];
  total: number;
  limit: number;
  offset: number;
}

describe('GET /api/v1/console/submissions/decided', () => {
  test('every decided submission, latest decision first, with its outcome and history; drafts and the queue left out', async () => {
    const res = await register();
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('private, no-store');
    const page = res.json<Page>();
    expect(page.total).toBe(3);
    expect(page.items.map((i) => [i.number, i.state])).toEqual([
      [made['milk']!.number, 'revoked'],
      [made['coffee']!.number, 'rejected'],
      [made['tea']!.number, 'approved'],
    ]);
    const milk = page.items[0]!;
    expect(milk.organisation).toEqual({ id: operator.id, name: 'Steppe Screens', kind: 'operator' });
    expect(milk.approval?.number).toBe(made['milk']!.approval);
    expect(milk.approval?.revoke_reason).toBe('Court order 12/2026.');
    // Created and sent by the organisation, approved and revoked by the authority's key (named), in time order.
    expect(milk.history.map((h) => [h.event, h.at, h.by?.kind ?? null])).toEqual([
      ['created', '2026-03-10T10:00:00+05:00', 'organisation'],
      ['sent', '2026-03-10T10:00:00+05:00', 'organisation'],
      ['approved', '2026-03-10T13:00:00+05:00', 'api_key'],
      ['revoked', '2026-03-10T14:00:00+05:00', 'api_key'],
    ]);
    expect(milk.history[2]!.by?.name).toBeTruthy();
    expect(milk.history[3]!.reason).toBe('Court order 12/2026.');
    const coffee = page.items[1]!;
    expect(coffee.reject_reason).toBe('The text is too small to read from the road.');
    expect(coffee.approval).toBeNull();
    expect(coffee.history.at(-1)).toEqual({
      event: 'rejected',
      at: '2026-03-10T12:00:00+05:00',
      by: null,
      reason: 'The text is too small to read from the road.',
    });
  });

  test('filters by outcome and organisation, and searches number, approval number, advertiser, BIN and organisation', async () => {
    const numbers = async (query: string) => {
      const res = await register(query);
      expect(res.statusCode, res.body).toBe(200);
      return res.json<Page>().items.map((i) => i.number);
    };
    expect(await numbers('?state=approved')).toEqual([made['tea']!.number]);
    expect(await numbers('?state=rejected')).toEqual([made['coffee']!.number]);
    expect(await numbers('?state=revoked')).toEqual([made['milk']!.number]);
    expect(await numbers(`?organisation_id=${operator.id}`)).toEqual([made['milk']!.number]);
    expect(await numbers(`?organisation_id=${agency.id.toUpperCase()}&state=approved`)).toEqual([
      made['tea']!.number,
    ]);
    expect(await numbers('?q=kazakh%20tea')).toEqual([made['tea']!.number]);
    expect(await numbers(`?q=${made['coffee']!.number.toLowerCase()}`)).toEqual([made['coffee']!.number]);
    expect(await numbers(`?q=${made['milk']!.approval}`)).toEqual([made['milk']!.number]);
    expect(await numbers('?q=990000000001')).toEqual([made['tea']!.number]);
    expect(await numbers('?q=steppe')).toEqual([made['milk']!.number]);
    // LIKE wildcards are matched as themselves: '%' and '_' find the names holding them, not everything.
    expect(await numbers('?q=100%25')).toEqual([made['coffee']!.number, made['tea']!.number]);
    expect(await numbers('?q=e_h')).toEqual([made['coffee']!.number]);
    expect(await numbers('?q=%25')).toEqual([made['coffee']!.number, made['tea']!.number]);
    expect(await numbers('?q=nobody%20at%20all')).toEqual([]);
    expect(await numbers(`?q=${encodeURIComponent("'; DROP TABLE submissions; --")}`)).toEqual([]);
    expect(await numbers('?q=Still%20Waiting')).toEqual([]);
  });

  test('pages on the server: limit and offset, with the total', async () => {
    const first = (await register('?limit=2')).json<Page>();
    expect(first).toMatchObject({ total: 3, limit: 2, offset: 0 });
    expect(first.items).toHaveLength(2);
    const second = (await register('?limit=2&offset=2')).json<Page>();
    expect(second.items.map((i) => i.number)).toEqual([made['tea']!.number]);
    const past = (await register('?limit=2&offset=10')).json<Page>();
    expect(past).toMatchObject({ items: [], total: 3 });
  });

  test('hostile or malformed query values are 422 validation_failed naming the parameter, never a 5xx', async () => {
    const cases: [string, string][] = [
      ['?state=draft', 'querystring:/state'],
      ['?state=in_review', 'querystring:/state'],
      ['?organisation_id=not-a-uuid', 'querystring:/organisation_id'],
      [`?organisation_id=${"'%20OR%201=1--"}`, 'querystring:/organisation_id'],
      ['?limit=0', 'querystring:/limit'],
      ['?limit=101', 'querystring:/limit'],
      ['?limit=-1', 'querystring:/limit'],
      ['?limit=1e3', 'querystring:/limit'],
      ['?offset=10001', 'querystring:/offset'],
      ['?offset=99999999999999999999', 'querystring:/offset'],
      ['?q=a&q=b', 'querystring:/q'],
      ['?state=approved&state=rejected', 'querystring:/state'],
      [`?q=${'x'.repeat(201)}`, 'querystring:/q'],
      ['?q=a%00b', 'querystring:/q'],
      ['?sort=number', 'querystring:/sort'],
      ['?__proto__=1', 'querystring:/__proto__'],
    ];
    for (const [query, path] of cases) {
      const res = await register(query);
      expect(res.statusCode, `${query}: ${res.body}`).toBe(422);
      expect(res.headers['content-type']).toContain('application/problem+json');
      const body = res.json<{ code: string; errors: { path: string }[] }>();
      expect(body.code, query).toBe('validation_failed');
      expect(body.errors.map((e) => e.path)).toContain(path);
    }
  });

  test('the authority only: no credential is 401, an operator or agency key is 403', async () => {
    expect((await register('', null)).statusCode).toBe(401);
    for (const key of [operator.key, agency.key]) {
      const res = await register('', key);
      expect(res.statusCode, res.body).toBe(403);
      expect(res.body).not.toContain(made['tea']!.number);
    }
    // Their own lists stay theirs: the agency sees its two decided submissions, not the operator's.
    const own = await apiCall(p.servers.api, agency.key, 'GET', '/api/v1/submissions');
    expect(
      own
        .json<{ items: { number: string }[] }>()
        .items.map((i) => i.number)
        .sort(),
    ).toEqual([made['tea']!.number, made['coffee']!.number].sort());
  });
});
