import { createHmac, timingSafeEqual } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { raiseAdAuditEvents } from '../../src/ad-management/events.js';
import {
  type AdCollection,
  AdCollectionReaderSchema,
  AdCollectionSchema,
} from '../../src/ad-management/view.js';
import { deliverDueWebhooks } from '../../src/city-events/webhooks.js';
import { approve, CATEGORY_ID, reject, revoke, upload } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  type TestPlatform,
  startTestPlatform,
} from '../support/platform.js';

/*
 * The Ad Management API view of an exchange partner's programmatic submissions, through HTTP on a real PostgreSQL,
 * with webhooks delivered to real local receivers that check every signature as a partner would.
 */

const FIXTURES = new URL('../fixtures/iab/', import.meta.url);
const T0 = new Date('2026-11-20T10:00:00+05:00');
const MINUTE = 60_000;

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let p: TestPlatform;
let server: Server;
let base: string;
const received: Received[] = [];
const SECRET = 'partner-secret-of-some-length';
const OTHER_SECRET = 'another-partner-secret-here';

let partner: { id: string; key: string };
let foreign: { id: string; key: string };
let structure: { id: string; code: string };
/** Submission ids by what happens to them. */
const ad: Record<string, string> = {};
const approvalNumber: Record<string, string> = {};
let counter = 0;

const at = (iso: string) => new Date(iso).getTime();
const get = (key: string | null, url: string) => apiCall(p.servers.api, key, 'GET', url);
const later = (ms = MINUTE) => p.clock.set(new Date(p.clock.now().getTime() + ms));

async function programmatic(
  key: string,
  fields: { from: string; to: string; send?: boolean; channel?: 'direct' | 'programmatic' },
): Promise<string> {
  counter += 1;
  const channel = fields.channel ?? 'programmatic';
  const res = await apiCall(p.servers.api, key, 'POST', '/api/v1/submissions', {
    advertiser_name: 'Acme LLP',
    period_from: fields.from,
    period_to: fields.to,
    structure_ids: [structure.id],
    category_id: CATEGORY_ID,
    channel,
    ...(channel === 'programmatic'
      ? { external_refs: { crid: `cr-${counter}`, adomain: ['acme.kz'], dsp: 'dsp-1', ssp: 'ssp-1' } }
      : {}),
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = res.json<{ id: string }>().id;
  const up = await upload(p, key, id, png(64, 32, counter), 'image/png');
  expect(up.statusCode, up.body).toBe(200);
  if (fields.send !== false) {
    const sent = await apiCall(p.servers.api, key, 'POST', `/api/v1/submissions/${id}/send`);
    expect(sent.statusCode, sent.body).toBe(200);
  }
  return id;
}

async function collection(key: string, url: string): Promise<AdCollection> {
  const res = await get(key, url);
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json<AdCollection>();
  expect(
    Value.Check(AdCollectionSchema, body),
    JSON.stringify([...Value.Errors(AdCollectionSchema, body)]),
  ).toBe(true);
  return body;
}

const one = async (id: string) => (await collection(partner.key, `/api/v1/ads/${id}`)).ads[0]!;

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      // "The bidder must respond 204 No Content if the webhook is successfully processed."
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  p = await startTestPlatform({ now: T0, config: { settings: { WEBHOOK_ALLOWED_TARGETS: '127.0.0.1' } } });

  const operator = await createOrganisation(p, 'operator', ['write:submissions']);
  structure = await createStructure(p, operator.id);
  partner = await createOrganisation(p, 'agency', ['write:submissions', 'read:ads']);
  foreign = await createOrganisation(p, 'agency', ['write:submissions', 'read:ads']);

  // Two sent at the same instant: equal lastmod, ordered by id.
  ad['pending'] = await programmatic(partner.key, { from: '2026-12-01', to: '2026-12-31' });
  ad['pending2'] = await programmatic(partner.key, { from: '2026-12-01', to: '2026-12-31' });
  later();
  ad['rejected'] = await programmatic(partner.key, { from: '2026-12-01', to: '2026-12-31' });
  ad['future'] = await programmatic(partner.key, { from: '2026-12-01', to: '2026-12-31' });
  ad['current'] = await programmatic(partner.key, { from: '2026-11-20', to: '2026-11-21' });
  ad['revoked'] = await programmatic(partner.key, { from: '2026-11-20', to: '2026-12-31' });
  ad['draft'] = await programmatic(partner.key, { from: '2026-12-01', to: '2026-12-31', send: false });
  ad['direct'] = await programmatic(partner.key, { from: '2026-12-01', to: '2026-12-31', channel: 'direct' });
  ad['foreign'] = await programmatic(foreign.key, { from: '2026-12-01', to: '2026-12-31' });
  later();
  expect((await reject(p, ad['rejected'], 'alcohol advertising near schools')).statusCode).toBe(200);
  later();
  for (const name of ['future', 'current', 'revoked']) {
    const res = await approve(p, ad[name]!);
    expect(res.statusCode, res.body).toBe(201);
    approvalNumber[name] = res.json<{ approval_number: string }>().approval_number;
    later();
  }
  expect((await revoke(p, approvalNumber['revoked']!, 'court order 12/3')).statusCode).toBe(200);
  later();
});

afterAll(async () => {
  await p?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('GET /api/v1/ads/{id}: our states as audit statuses', () => {
  test('pending is 1, with init and lastmod the time it was sent', async () => {
    const a = await one(ad['pending']!);
    expect(a.id).toBe(ad['pending']);
    expect(a.audit).toEqual({
      status: 1,
      init: T0.getTime(),
      lastmod: T0.getTime(),
      ext: { status: 'pending' },
    });
    expect(a.adomain).toEqual(['acme.kz']);
    expect(a.cat).toEqual([String(CATEGORY_ID)]);
    expect(a.cattax).toBe(8);
    expect(a.display).toEqual({ mime: 'image/png', w: 64, h: 32 });
    expect(a.ext).toMatchObject({
      crid: expect.stringMatching(/^cr-/),
      dsp: 'dsp-1',
      ssp: 'ssp-1',
      fast_track: false,
    });
  });

  test('rejected is 4 with the reason as feedback, lastmod the decision', async () => {
    const a = await one(ad['rejected']!);
    expect(a.audit.status).toBe(4);
    expect(a.audit.feedback).toEqual(['alcohol advertising near schools']);
    expect(a.audit.lastmod).toBe(T0.getTime() + 2 * MINUTE);
    expect(a.audit.ext).toEqual({ status: 'rejected' });
  });

  test('approved before its period (not_yet_valid) and within it (valid) are both 3, lastmod the issue', async () => {
    const future = await one(ad['future']!);
    expect(future.audit).toMatchObject({
      status: 3,
      lastmod: T0.getTime() + 3 * MINUTE,
      ext: { status: 'not_yet_valid' },
    });
    expect(future.audit.feedback).toBeUndefined();
    expect(future.ext).toMatchObject({ approval_number: approvalNumber['future'], valid_from: '2026-12-01' });
    const current = await one(ad['current']!);
    expect(current.audit).toMatchObject({
      status: 3,
      lastmod: T0.getTime() + 4 * MINUTE,
      ext: { status: 'valid' },
    });
  });

  test('revoked is 4 with the revocation reason, lastmod the revocation', async () => {
    const a = await one(ad['revoked']!);
    expect(a.audit).toMatchObject({
      status: 4,
      feedback: ['court order 12/3'],
      lastmod: T0.getTime() + 6 * MINUTE,
      ext: { status: 'revoked' },
    });
  });

  test("a draft, a direct submission, another partner's ad and a non-id are 404", async () => {
    for (const id of [
      ad['draft'],
      ad['direct'],
      ad['foreign'],
      'not-an-id',
      '00000000-0000-4000-8000-000000000000',
    ]) {
      const res = await get(partner.key, `/api/v1/ads/${id}`);
      expect(res.statusCode, String(id)).toBe(404);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.json().code).toBe('not_found');
    }
    // The other partner sees its own and nothing of ours.
    expect((await get(foreign.key, `/api/v1/ads/${ad['pending']}`)).statusCode).toBe(404);
    const theirs = await collection(foreign.key, '/api/v1/ads?auditStart=0');
    expect(theirs.ads.map((a) => a.id)).toEqual([ad['foreign']]);
  });
});

describe('credentials', () => {
  test('no credential 401, another scope 403, the authority 403', async () => {
    const none = await get(null, '/api/v1/ads?auditStart=0');
    expect(none.statusCode).toBe(401);
    expect(none.json().code).toBe('unauthenticated');
    expect((await get(null, `/api/v1/ads/${ad['pending']}`)).statusCode).toBe(401);
    expect(
      (await apiCall(p.servers.api, null, 'POST', '/api/v1/ads/webhooks', { url: base })).statusCode,
    ).toBe(401);
    const reader = await createOrganisation(p, 'agency', ['read:creatives', 'write:submissions']);
    const scoped = await get(reader.key, '/api/v1/ads?auditStart=0');
    expect(scoped.statusCode).toBe(403);
    expect(scoped.json().code).toBe('key_scope_denied');
    const authority = await p.database.db.query<{ id: string }>(
      "SELECT id FROM organisations WHERE kind = 'authority'",
    );
    const key = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/organisations/${authority.rows[0]!.id}/api-keys`,
      { name: 'ads', scopes: ['read:ads'] },
    );
    expect(key.statusCode, key.body).toBe(201);
    const authorityRead = await get(key.json().key, '/api/v1/ads?auditStart=0');
    expect(authorityRead.statusCode).toBe(403);
    expect(authorityRead.json().code).toBe('forbidden');
  });

  test('hostile query values are 422 validation_failed, never 5xx', async () => {
    for (const query of [
      '',
      'auditStart=',
      'auditStart=abc',
      'auditStart=-1',
      'auditStart=1e3',
      'auditStart=1.5',
      'auditStart=99999999999999999999',
      'auditStart=0&auditStart=1',
      'auditStart=0&limit=0',
      'auditStart=0&limit=501',
      'auditStart=0&limit=ten',
      'auditStart=0&id=1%27%20OR%201=1',
      'auditStart=0&bidderId=496',
      'auditStart=2000&auditEnd=1000',
      'auditStart=0&auditEnd=%00',
    ]) {
      const res = await get(partner.key, `/api/v1/ads?${query}`);
      expect(res.statusCode, query).toBe(422);
      expect(res.json().code, query).toBe('validation_failed');
    }
  });
});

describe('GET /api/v1/ads: paging by auditStart, auditEnd and id', () => {
  test("all of the partner's sent programmatic ads, oldest audit change first, ties by id", async () => {
    const all = await collection(partner.key, '/api/v1/ads?auditStart=0');
    expect(all.count).toBe(6);
    expect(all.more).toBe(0);
    expect(all.nextPage).toBeNull();
    const ids = all.ads.map((a) => a.id);
    expect(new Set(ids)).toEqual(
      new Set(['pending', 'pending2', 'rejected', 'future', 'current', 'revoked'].map((n) => ad[n])),
    );
    const keys = all.ads.map((a) => [a.audit.lastmod, a.id] as const);
    const sorted = [...keys].sort((x, y) => x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0));
    expect(keys).toEqual(sorted);
    // The two sent together share a lastmod.
    expect(all.ads[0]!.audit.lastmod).toBe(all.ads[1]!.audit.lastmod);
  });

  test('auditStart is exclusive, auditEnd inclusive', async () => {
    const rejectedAt = T0.getTime() + 2 * MINUTE;
    const after = await collection(partner.key, `/api/v1/ads?auditStart=${rejectedAt}`);
    expect(after.ads.map((a) => a.id)).toEqual([ad['future'], ad['current'], ad['revoked']]);
    const window = await collection(
      partner.key,
      `/api/v1/ads?auditStart=${T0.getTime()}&auditEnd=${rejectedAt}`,
    );
    expect(window.ads.map((a) => a.id)).toEqual([ad['rejected']]);
    const none = await collection(partner.key, `/api/v1/ads?auditStart=${T0.getTime() + 6 * MINUTE}`);
    expect(none).toEqual({ count: 0, more: 0, nextPage: null, ads: [] });
  });

  test('nextPage walks every ad once, also through equal timestamps', async () => {
    const all = (await collection(partner.key, '/api/v1/ads?auditStart=0')).ads.map((a) => a.id);
    const seen: string[] = [];
    let url: string | null = '/api/v1/ads?auditStart=0&limit=1';
    let pages = 0;
    while (url) {
      const page = await collection(partner.key, url);
      pages += 1;
      seen.push(...page.ads.map((a) => a.id));
      if (page.more === 1) {
        expect(page.nextPage).toMatch(
          new RegExp(`^${p.ctx.config.publicUrls.api}/api/v1/ads\\?auditStart=\\d+&id=`),
        );
        url = page.nextPage!.slice(p.ctx.config.publicUrls.api.length);
      } else {
        url = null;
      }
      expect(pages).toBeLessThan(20);
    }
    expect(seen).toEqual(all);
  });

  test('an approval past its last day is 6 expired from midnight Almaty', async () => {
    const before = p.clock.now();
    p.clock.set(new Date('2026-11-22T09:00:00+05:00'));
    try {
      const a = await one(ad['current']!);
      expect(a.audit).toMatchObject({
        status: 6,
        lastmod: at('2026-11-22T00:00:00+05:00'),
        ext: { status: 'expired' },
      });
      // It is now the newest change.
      const latest = await collection(partner.key, `/api/v1/ads?auditStart=${T0.getTime() + 6 * MINUTE}`);
      expect(latest.ads.map((x) => x.id)).toEqual([ad['current']]);
    } finally {
      p.clock.set(before);
    }
  });
});

describe('webhooks: each change delivered once, signed, to its partner only', () => {
  const mine = () => received.filter((r) => r.path === '/hooks/partner');
  const theirs = () => received.filter((r) => r.path === '/hooks/foreign');

  const verified = (r: Received, secret: string): AdCollection => {
    const expected = createHmac('sha256', secret).update(r.body, 'utf8').digest();
    const given = Buffer.from(String(r.headers['x-signature']), 'hex');
    expect(given.length).toBe(expected.length);
    expect(timingSafeEqual(given, expected)).toBe(true);
    expect(r.headers['x-event-type']).toBe('ad_audit_changed');
    const body = JSON.parse(r.body) as AdCollection & { id: string; type: string };
    expect(body.id).toBe(r.headers['x-event-id']);
    expect(Value.Check(AdCollectionSchema, body)).toBe(true);
    expect(body.count).toBe(1);
    return body;
  };

  test('subscribing: validated, own organisation only', async () => {
    // Nobody subscribed yet: nothing is raised.
    expect(await raiseAdAuditEvents(p.ctx)).toBe(0);
    for (const body of [
      { url: 'ftp://example.org/x' },
      { url: `${base}/x`, secret: 'short' },
      { url: `${base}/x`, types: ['alert_opened'] },
      { url: 'http://user:pw@127.0.0.1/x' },
    ]) {
      const res = await apiCall(p.servers.api, partner.key, 'POST', '/api/v1/ads/webhooks', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(422);
    }
    const created = await apiCall(p.servers.api, partner.key, 'POST', '/api/v1/ads/webhooks', {
      url: `${base}/hooks/partner`,
      secret: SECRET,
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ types: ['ad_audit_changed'] });
    expect(created.json().secret).toBeUndefined();
    const other = await apiCall(p.servers.api, foreign.key, 'POST', '/api/v1/ads/webhooks', {
      url: `${base}/hooks/foreign`,
      secret: OTHER_SECRET,
    });
    expect(other.statusCode).toBe(201);
    const list = await get(partner.key, '/api/v1/ads/webhooks');
    expect(list.json().items.map((s: { id: string }) => s.id)).toEqual([created.json().id]);
    // Another partner's subscription cannot be ended.
    const stolen = await apiCall(
      p.servers.api,
      partner.key,
      'DELETE',
      `/api/v1/ads/webhooks/${other.json().id}`,
    );
    expect(stolen.statusCode).toBe(404);
  });

  test('the first look raises one event per ad; each is delivered once; nothing more without a change', async () => {
    expect(await raiseAdAuditEvents(p.ctx)).toBe(7);
    expect((await deliverDueWebhooks(p.ctx, { timeoutMs: 5_000 })).delivered).toBe(7);
    expect(mine()).toHaveLength(6);
    expect(theirs()).toHaveLength(1);
    const ids = mine().map((r) => verified(r, SECRET).ads[0]!.id);
    expect(new Set(ids)).toEqual(
      new Set(['pending', 'pending2', 'rejected', 'future', 'current', 'revoked'].map((n) => ad[n])),
    );
    expect(verified(theirs()[0]!, OTHER_SECRET).ads[0]!.id).toBe(ad['foreign']);

    expect(await raiseAdAuditEvents(p.ctx)).toBe(0);
    expect((await deliverDueWebhooks(p.ctx)).attempted).toBe(0);
    expect(mine()).toHaveLength(6);
  });

  test('an approval, then an expiry: one delivery each, to the partner only', async () => {
    later();
    const res = await approve(p, ad['pending']!);
    expect(res.statusCode, res.body).toBe(201);
    expect(await raiseAdAuditEvents(p.ctx)).toBe(1);
    await deliverDueWebhooks(p.ctx);
    expect(mine()).toHaveLength(7);
    const approved = verified(mine()[6]!, SECRET).ads[0]!;
    expect(approved).toMatchObject({
      id: ad['pending'],
      audit: { status: 3, lastmod: p.clock.now().getTime() },
    });

    // Becoming valid on the first day changes nothing for the partner; the end of the period does.
    p.clock.set(new Date('2026-11-22T00:00:30+05:00'));
    expect(await raiseAdAuditEvents(p.ctx)).toBe(1);
    expect(await raiseAdAuditEvents(p.ctx)).toBe(0);
    await deliverDueWebhooks(p.ctx);
    expect(mine()).toHaveLength(8);
    expect(verified(mine()[7]!, SECRET).ads[0]).toMatchObject({ id: ad['current'], audit: { status: 6 } });
    expect(theirs()).toHaveLength(1);
  });
  test("the authority may subscribe to the type and receives every partner's changes; an operator may not", async () => {
    const operator = await createOrganisation(p, 'operator', ['console:fleet']);
    const refused = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/console/webhooks', {
      url: `${base}/hooks/operator`,
      types: ['ad_audit_changed'],
    });
    expect(refused.statusCode).toBe(422);
    const authority = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/webhooks', {
      url: `${base}/hooks/authority`,
      secret: SECRET,
      types: ['ad_audit_changed'],
    });
    expect(authority.statusCode, authority.body).toBe(201);
    later();
    expect((await revoke(p, approvalNumber['future']!, 'withdrawn by the advertiser')).statusCode).toBe(200);
    expect(await raiseAdAuditEvents(p.ctx)).toBe(1);
    await deliverDueWebhooks(p.ctx);
    expect(mine()).toHaveLength(9);
    expect(verified(mine()[8]!, SECRET).ads[0]).toMatchObject({
      id: ad['future'],
      audit: { status: 4, feedback: ['withdrawn by the advertiser'] },
    });
    const toAuthority = received.filter((r) => r.path === '/hooks/authority');
    expect(toAuthority).toHaveLength(1);
    expect(toAuthority[0]!.body).toBe(mine()[8]!.body);
    expect(theirs()).toHaveLength(1);
  });
});

describe('the IAB examples and our answers read with the same schema', () => {
  const examples = readdirSync(FIXTURES).filter((f) => f.endsWith('.json'));

  test('every published example is a collection of ads', () => {
    expect(examples.length).toBeGreaterThanOrEqual(7);
    for (const file of examples) {
      const doc = JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8'));
      expect(
        Value.Check(AdCollectionReaderSchema, doc),
        `${file}: ${JSON.stringify([...Value.Errors(AdCollectionReaderSchema, doc)])}`,
      ).toBe(true);
    }
  });

  test('the schema refuses what is not one (an audit status as text, no ads)', () => {
    const doc = JSON.parse(readFileSync(new URL('minimal-webhook-denied.json', FIXTURES), 'utf8'));
    doc.ads[0].audit.status = '4';
    expect(Value.Check(AdCollectionReaderSchema, doc)).toBe(false);
    expect(Value.Check(AdCollectionReaderSchema, { count: 1 })).toBe(false);
  });

  test('our answer reads as the examples do: same keys and types where both have them', async () => {
    const ours = await collection(partner.key, '/api/v1/ads?auditStart=0');
    expect(Value.Check(AdCollectionReaderSchema, ours)).toBe(true);
    const example = JSON.parse(readFileSync(new URL('minimal-poll-page-2.json', FIXTURES), 'utf8'));
    // The example's first ad is a denial: compared with our denied one.
    const denied = ours.ads.find((a) => a.audit.status === 4)!;
    for (const key of Object.keys(example)) expect(ours).toHaveProperty(key);
    for (const key of Object.keys(example.ads[0]))
      expect(typeof denied[key as keyof typeof denied]).toBe(typeof example.ads[0][key]);
    for (const key of Object.keys(example.ads[0].audit)) expect(denied.audit).toHaveProperty(key);
    expect(denied.audit.feedback).toEqual([expect.any(String)]);
  });
});
