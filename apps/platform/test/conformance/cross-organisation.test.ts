/**
 * One organisation reaching another's data (IDOR), on every route of the api host, as a black box.
 *
 * Organisation A is an operator (structures, a saved set, a device with a batch and an open alert, a CMS installation
 * with a player, an alert webhook, a spare API key, a console user) and an agency buying on its structures (drafts, a
 * submission in review, an approved programmatic campaign with plays, a saved set, an Ad Management webhook). B is an
 * operator, an agency and an advertiser with no tie to A, each calling with an API key that holds every scope, the
 * operator and the agency also through a console session of an administrator.
 *
 * For every route with a path parameter (ROWS), each caller of B names A's resource and then a resource that does not
 * exist: both answers must be the same (status, media type and body, the named id aside), never 2xx or 5xx, carry
 * nothing of A, and A's resources read back by A and the authority must be unchanged. Routes without a path parameter
 * are called with A's ids in their query, body or headers (REFERENCES) and with none (LISTS): no item of A. The last
 * test fails when a route of the api host with a path parameter is in neither table, so a route added later cannot
 * escape. Routes meant to be cross-organisation (the authority, the register of structures, an operator's view of
 * campaigns on its structures) are checked against what docs/decisions.md and the feature docs say in 'by design'.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { es256Sign, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { raiseAdAuditEvents } from '../../src/ad-management/events.js';
import { evaluateAlerts } from '../../src/alerts/evaluate.js';
import { SCOPES } from '../../src/auth/principal.js';
import { registeredRoutes } from '../../src/http/server.js';
import { type Device, enrol, registerCms, sendBatch } from '../alerts/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  type OrgKind,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

// Friday 2026-11-20, 11:00 Almaty: inside the alerts' default operating hours, on the first day of A's campaign.
const T0 = new Date('2026-11-20T06:00:00.000Z');
const CATEGORY_ID = 1564;
const PASSWORD = 'a long password for the console';
const MEDIA_PNG = 'image/png';
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type CallMethod = Method | 'HEAD';

interface Org {
  id: string;
  key: string;
  keyId: string;
  kind: OrgKind;
}

/** Who calls: B's organisations through an API key with every scope, or a console session of an administrator. */
interface Caller {
  name: string;
  kind: OrgKind;
  call(
    method: CallMethod,
    url: string,
    body?: unknown,
    raw?: { payload: Buffer; contentType: string },
  ): Promise<LightMyRequestResponse>;
}

let p: TestPlatform;
let dataDir: string;
let authority: Org;
let opA: Org;
let agA: Org;
let opB: Org;
let agB: Org;
let advB: Org;
const callersB: Caller[] = [];

/** A's resources. */
const A = {
  structure1: { id: '', code: '' },
  structure2: { id: '', code: '' },
  operatorSet: '',
  agencySet: '',
  operatorDraft: { id: '', number: '' },
  agencyDraft: { id: '', number: '' },
  inReview: { id: '', number: '', sha256: '' },
  approved: { id: '', number: '', sha256: '', approvalNumber: '' },
  device: undefined as unknown as Device,
  cms: { id: '', player: 'a-lobby-1' },
  alert: '',
  alertWebhook: '',
  adsWebhook: '',
  /** Not A's but the authority's: no other organisation reads or ends it either. */
  authorityWebhook: '',
  spareKeyId: '',
  userId: '',
  userEmail: '',
  /** Every id, number, name and text of A that B must never read. */
  secrets: [] as string[],
};
/** B's own: a structure and a CMS installation of operator B, an agency B draft. */
const B = { structure: { id: '', code: '' }, cms: '', agencyDraft: '' };

const keyCaller = (name: string, org: Org): Caller => ({
  name,
  kind: org.kind,
  call: (method, url, body, raw) =>
    p.servers.api.inject({
      method,
      url,
      headers: {
        authorization: `Bearer ${org.key}`,
        ...(raw ? { 'content-type': raw.contentType } : {}),
        ...(body !== undefined && !raw ? { 'content-type': 'application/json' } : {}),
      },
      ...(raw ? { payload: raw.payload } : body !== undefined ? { payload: JSON.stringify(body) } : {}),
    }),
});

async function sessionCaller(name: string, org: Org): Promise<Caller> {
  const email = `${name.replace(/\W+/g, '-')}-${randomUUID().slice(0, 8)}@b.example`;
  const user = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${org.id}/users`,
    {
      email,
      password: PASSWORD,
      role: 'admin',
    },
  );
  expect(user.statusCode, user.body).toBe(201);
  const login = await apiCall(p.servers.api, null, 'POST', '/api/v1/console/session', {
    email,
    password: PASSWORD,
  });
  expect(login.statusCode, login.body).toBe(200);
  const token = login.cookies.find((c) => c.name === 'ooh_session')!.value;
  const csrf = login.json<{ csrf_token: string }>().csrf_token;
  return {
    name,
    kind: org.kind,
    call: (method, url, body, raw) =>
      p.servers.api.inject({
        method,
        url,
        headers: {
          cookie: `ooh_session=${token}`,
          ...(method === 'GET' || method === 'HEAD' ? {} : { 'x-csrf-token': csrf }),
          ...(raw ? { 'content-type': raw.contentType } : {}),
          ...(body !== undefined && !raw ? { 'content-type': 'application/json' } : {}),
        },
        ...(raw ? { payload: raw.payload } : body !== undefined ? { payload: JSON.stringify(body) } : {}),
      }),
  };
}

const as = (org: Org | string, method: Method, url: string, body?: unknown) =>
  apiCall(p.servers.api, typeof org === 'string' ? org : org.key, method, url, body);

async function ok<T>(res: Promise<LightMyRequestResponse>, status = 200): Promise<T> {
  const r = await res;
  expect(r.statusCode, r.body).toBe(status);
  return r.json<T>();
}

async function createSubmission(
  org: Org,
  marker: string,
  structureIds: string[],
  extra: Record<string, unknown> = {},
): Promise<{ id: string; number: string }> {
  return ok(
    as(org, 'POST', '/api/v1/submissions', {
      advertiser_name: marker,
      advertiser_bin: '123456789012',
      period_from: '2026-11-20',
      period_to: '2026-12-31',
      structure_ids: structureIds,
      category_id: CATEGORY_ID,
      declared_daily_plays: Object.fromEntries(structureIds.map((id) => [id, 10])),
      ...extra,
    }),
    201,
  );
}

async function uploadAs(org: Org, submissionId: string, seed: number): Promise<string> {
  const res = await p.servers.api.inject({
    method: 'PUT',
    url: `/api/v1/submissions/${submissionId}/media`,
    headers: { authorization: `Bearer ${org.key}`, 'content-type': MEDIA_PNG },
    payload: png(16, 9, seed),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ media_sha256: string }>().media_sha256;
}

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-cross-org-'));
  p = await startTestPlatform({
    dataDir,
    now: T0,
    config: { settings: { WEBHOOK_ALLOWED_TARGETS: '127.0.0.1' } },
  });
  const org = async (kind: OrgKind, name: string): Promise<Org> => ({
    ...(await createOrganisation(p, kind, [...SCOPES], name)),
    kind,
  });
  const { rows } = await p.database.db.query<{ id: string }>(
    "SELECT id FROM organisations WHERE kind = 'authority'",
  );
  const authorityKey = await ok<{ id: string; key: string }>(
    as(p.adminKey, 'POST', `/api/v1/console/organisations/${rows[0]!.id}/api-keys`, {
      name: 'authority, every scope',
      scopes: [...SCOPES],
    }),
    201,
  );
  authority = { id: rows[0]!.id, key: authorityKey.key, keyId: authorityKey.id, kind: 'authority' };
  opA = await org('operator', 'A-SECRET Operator LLP');
  agA = await org('agency', 'A-SECRET Agency LLP');
  opB = await org('operator', 'B Operator LLP');
  agB = await org('agency', 'B Agency LLP');
  advB = await org('advertiser', 'B Advertiser LLP');

  // --- A ---
  A.structure1 = await createStructure(p, opA.id, { code: `A-SECRET-ST1-${process.pid}` });
  A.structure2 = await createStructure(p, opA.id, { code: `A-SECRET-ST2-${process.pid}` });
  A.operatorSet = (
    await ok<{ id: string }>(
      as(opA, 'POST', '/api/v1/structure-sets', { name: 'A-SECRET set', structure_ids: [A.structure1.id] }),
      201,
    )
  ).id;
  A.agencySet = (
    await ok<{ id: string }>(
      as(agA, 'POST', '/api/v1/structure-sets', {
        name: 'A-SECRET agency set',
        structure_ids: [A.structure1.id, A.structure2.id],
      }),
      201,
    )
  ).id;
  A.operatorDraft = await createSubmission(opA, 'A-SECRET operator draft', [A.structure1.id]);
  // A draft that could be sent (media and category): a send by anyone else would show in its state.
  A.agencyDraft = await createSubmission(agA, 'A-SECRET agency draft', [A.structure1.id, A.structure2.id]);
  const draftSha = await uploadAs(agA, A.agencyDraft.id, 1);
  const review = await createSubmission(agA, 'A-SECRET in review', [A.structure1.id]);
  const reviewSha = await uploadAs(agA, review.id, 2);
  await ok(as(agA, 'POST', `/api/v1/submissions/${review.id}/send`));
  A.inReview = { ...review, sha256: reviewSha };
  const approved = await createSubmission(agA, 'A-SECRET campaign', [A.structure1.id, A.structure2.id], {
    channel: 'programmatic',
    external_refs: { crid: 'A-SECRET-CRID', dsp: 'A-SECRET-DSP' },
  });
  const approvedSha = await uploadAs(agA, approved.id, 3);
  await ok(as(agA, 'POST', `/api/v1/submissions/${approved.id}/send`));
  const issued = await ok<{ approval_number: string }>(
    as(p.adminKey, 'POST', `/api/v1/console/submissions/${approved.id}/approve`, {}),
    201,
  );
  A.approved = { ...approved, sha256: approvedSha, approvalNumber: issued.approval_number };

  // A's device sends plays of the campaign and a screen-off report: counted plays, and an alert at once.
  A.device = await enrol(p, opA.key, A.structure1);
  const end = new Date(T0.getTime() - 60_000);
  await sendBatch(p, A.device, [
    {
      kind: 'play',
      seq: A.device.nextSeq++,
      play_id: 'a-play-1',
      approval_number: A.approved.approvalNumber,
      media_sha256: A.approved.sha256,
      start: new Date(end.getTime() - 15_000).toISOString(),
      end: end.toISOString(),
      duration_ms: 15_000,
      structure: A.structure1.code,
      screen: { power: 'on' },
    },
    {
      kind: 'mode_change',
      seq: A.device.nextSeq++,
      at: new Date(T0.getTime() - 30_000).toISOString(),
      detail: { from: 'normal', to: 'screen_off' },
    },
  ]);
  const cms = await registerCms(p, opA.id, opA.key, { [A.cms.player]: A.structure2 });
  A.cms.id = cms.id;
  A.alertWebhook = (
    await ok<{ id: string }>(
      as(opA, 'POST', '/api/v1/console/webhooks', {
        url: 'http://127.0.0.1:9/a-secret-alerts',
        secret: 'a-secret-webhook-secret-0001',
        types: ['alert_opened', 'alert_resolved'],
      }),
      201,
    )
  ).id;
  A.adsWebhook = (
    await ok<{ id: string }>(
      as(agA, 'POST', '/api/v1/ads/webhooks', {
        url: 'http://127.0.0.1:9/a-secret-ads',
        secret: 'a-secret-ads-secret-00001',
      }),
      201,
    )
  ).id;
  // The authority's own subscription, which receives every organisation's events (docs/city-events.md).
  A.authorityWebhook = (
    await ok<{ id: string }>(
      as(p.adminKey, 'POST', '/api/v1/console/webhooks', {
        url: 'http://127.0.0.1:9/a-secret-authority',
        secret: 'a-secret-authority-secret-01',
        types: ['alert_opened', 'declared_vs_actual'],
      }),
      201,
    )
  ).id;
  // B subscribes too, before A's alert opens and A's ad changes are raised: its subscriptions must receive none.
  for (const [org, url, body] of [
    [opB, '/api/v1/console/webhooks', { types: ['alert_opened', 'alert_resolved'] }],
    [agB, '/api/v1/ads/webhooks', {}],
  ] as const) {
    await ok(as(org, 'POST', url, { url: 'http://127.0.0.1:9/b-hook', ...body }), 201);
  }
  const evaluation = await evaluateAlerts(p.ctx);
  expect(await raiseAdAuditEvents(p.ctx)).toBeGreaterThan(0);
  // A's subscriptions have deliveries waiting (no delivery loop runs here): B's nought below means something.
  for (const [org, url] of [
    [opA, '/api/v1/console/webhooks'],
    [agA, '/api/v1/ads/webhooks'],
  ] as const) {
    const hooks = await ok<{ items: { deliveries: { pending: number } }[] }>(as(org, 'GET', url));
    expect(hooks.items.map((h) => h.deliveries.pending)).toEqual([1]);
  }
  expect(evaluation?.opened.map((x) => x.kind)).toEqual(['screen_off']);
  A.alert = (await ok<{ items: { id: string }[] }>(as(opA, 'GET', '/api/v1/console/alerts'))).items[0]!.id;
  A.spareKeyId = (
    await ok<{ id: string }>(
      as(p.adminKey, 'POST', `/api/v1/console/organisations/${opA.id}/api-keys`, {
        name: 'A-SECRET spare key',
        scopes: ['read:submissions'],
      }),
      201,
    )
  ).id;
  A.userEmail = `a-secret-admin-${randomUUID().slice(0, 8)}@a.example`;
  A.userId = (
    await ok<{ id: string }>(
      as(p.adminKey, 'POST', `/api/v1/console/organisations/${opA.id}/users`, {
        email: A.userEmail,
        password: PASSWORD,
        role: 'admin',
      }),
      201,
    )
  ).id;
  A.secrets = [
    opA.id,
    agA.id,
    'A-SECRET',
    'a-secret',
    A.structure1.id,
    A.structure2.id,
    A.operatorSet,
    A.agencySet,
    A.operatorDraft.id,
    A.operatorDraft.number,
    A.agencyDraft.id,
    A.agencyDraft.number,
    draftSha,
    A.inReview.id,
    A.inReview.number,
    A.inReview.sha256,
    A.approved.id,
    A.approved.number,
    A.approved.sha256,
    A.approved.approvalNumber,
    A.device.id,
    A.cms.id,
    A.cms.player,
    A.alert,
    A.alertWebhook,
    A.adsWebhook,
    A.authorityWebhook,
    A.spareKeyId,
    opA.keyId,
    agA.keyId,
    A.userId,
  ];

  // --- B ---
  B.structure = await createStructure(p, opB.id, { code: `B-ST-${process.pid}` });
  B.cms = (await registerCms(p, opB.id, opB.key, { 'b-lobby-1': B.structure })).id;
  B.agencyDraft = (await createSubmission(agB, 'B draft', [B.structure.id])).id;
  callersB.push(
    keyCaller('operator B (key, every scope)', opB),
    keyCaller('agency B (key, every scope)', agB),
    keyCaller('advertiser B (key, every scope)', advB),
    await sessionCaller('operator B (console administrator)', opB),
    await sessionCaller('agency B (console administrator)', agB),
  );
}, 120_000);

afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

// --- what A holds, read back by A and the authority -------------------------------------------------------------

/** A's resources as A and the authority read them, without what a read itself moves (a key's last use). */
async function snapshotOfA(): Promise<Record<string, unknown>> {
  const read = async (key: string, url: string) => {
    const res = await as(key, 'GET', url);
    const type = String(res.headers['content-type'] ?? '');
    const body = type.includes('json') ? res.json<unknown>() : res.body.length;
    return { status: res.statusCode, etag: res.headers['etag'] ?? null, body };
  };
  const withoutLastUse = (value: unknown) =>
    JSON.parse(JSON.stringify(value), (k, v: unknown) => (k === 'last_used_at' ? undefined : v)) as unknown;
  const out: Record<string, unknown> = {};
  for (const [name, org] of [
    ['operator draft', opA],
    ['agency draft', agA],
    ['in review', agA],
    ['approved', agA],
  ] as const) {
    const id = {
      'operator draft': A.operatorDraft.id,
      'agency draft': A.agencyDraft.id,
      'in review': A.inReview.id,
      approved: A.approved.id,
    }[name];
    out[`submission ${name}`] = await read(org.key, `/api/v1/submissions/${id}`);
    out[`media ${name}`] = await read(org.key, `/api/v1/submissions/${id}/media`);
  }
  out['submissions of A'] = await read(authority.key, `/api/v1/submissions?limit=2000`).then((r) => ({
    ...r,
    body: (r.body as { items: { id: string }[] }).items.filter((s) =>
      [A.operatorDraft.id, A.agencyDraft.id, A.inReview.id, A.approved.id].includes(s.id),
    ),
  }));
  out['structures'] = await read(opA.key, '/api/v1/structures');
  out['console structures'] = await read(p.adminKey, `/api/v1/console/structures?organisation_id=${opA.id}`);
  out['operator sets'] = await read(opA.key, '/api/v1/structure-sets');
  out['agency sets'] = await read(agA.key, '/api/v1/structure-sets');
  out['cms'] = await read(opA.key, `/api/v1/console/cms-installations/${A.cms.id}`);
  out['cms list'] = await read(opA.key, '/api/v1/console/cms-installations');
  out['device'] = await read(opA.key, `/api/v1/console/devices/${A.device.id}`);
  out['fleet'] = await read(opA.key, '/api/v1/console/devices');
  out['alert'] = await read(opA.key, `/api/v1/console/alerts/${A.alert}`);
  out['events'] = await read(opA.key, '/api/v1/console/events');
  out['webhooks'] = await read(opA.key, '/api/v1/console/webhooks');
  out['deliveries'] = await read(opA.key, `/api/v1/console/webhooks/${A.alertWebhook}/deliveries`);
  out['ads webhooks'] = await read(agA.key, '/api/v1/ads/webhooks');
  out['every webhook'] = await read(p.adminKey, '/api/v1/console/webhooks');
  out['authority deliveries'] = await read(
    p.adminKey,
    `/api/v1/console/webhooks/${A.authorityWebhook}/deliveries`,
  );
  out['ad'] = await read(agA.key, `/api/v1/ads/${A.approved.id}`);
  out['envelope'] = await read(agA.key, `/api/v1/approvals/${A.approved.approvalNumber}/envelope`);
  const lookup = await as(agA, 'POST', '/api/v1/creatives/lookup', {
    hashes: [A.approved.sha256, A.inReview.sha256],
  });
  out['lookup'] = { status: lookup.statusCode, body: lookup.json<unknown>() };
  out['campaign'] = await read(agA.key, `/api/v1/console/reports/campaigns/${A.approved.id}`).then((r) => ({
    ...r,
    body: { ...(r.body as Record<string, unknown>), report: undefined },
  }));
  out['api keys'] = withoutLastUse(
    await read(p.adminKey, `/api/v1/console/api-keys?organisation_id=${opA.id}`),
  );
  out['users'] = await read(p.adminKey, `/api/v1/console/organisations/${opA.id}/users`);
  return out;
}

// --- comparing answers ----------------------------------------------------------------------------------------------

interface Answer {
  status: number;
  type: string;
  body: string;
}

/** An answer with the id it was asked about written as <named>, so A's and the unknown resource's can be compared. */
function answerOf(res: LightMyRequestResponse, named: readonly string[]): Answer {
  let body = res.body;
  // In any case: a uuid in capitals is answered in lower case.
  for (const n of named)
    if (n !== '') body = body.replace(new RegExp(n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gi'), '<named>');
  return { status: res.statusCode, type: String(res.headers['content-type'] ?? ''), body };
}

/** A's secrets found in `text`, once what the caller may read of A by design (`except`) is taken out of it. */
function secretsIn(text: string, except: readonly string[] = []): string[] {
  let rest = text;
  for (const e of except) if (e !== '') rest = rest.split(e).join('');
  return A.secrets.filter((s) => s !== '' && rest.includes(s));
}

/** The problem code of an answer, if it is a problem document. */
function codeOf(res: LightMyRequestResponse): string | undefined {
  try {
    return (JSON.parse(res.body) as { code?: string }).code;
  } catch {
    return undefined;
  }
}

// --- the routes with a path parameter -------------------------------------------------------------------------------

type AuthorityExpectation =
  /** The authority reads A's resource (DESIGN.md section 3; docs/decisions.md: the authority sees everything). */
  | 'reads'
  /** The route is not the authority's (its organisation kind is refused). */
  | 'forbidden'
  /** A change: not made by the authority here, so the resource stays for the other rows. */
  | 'not called';

interface Row {
  route: string;
  /** Which of A's resources, as a word in the test's name. */
  resource: string;
  /** The URL naming A's resource (`a`) or one that does not exist (`none`). */
  url(named: string): string;
  a(): string;
  none(): string;
  body?: () => unknown;
  raw?: () => { payload: Buffer; contentType: string };
  authority: AuthorityExpectation;
  /** A 2xx answer the same for A's resource as for none (spec: a hash the caller may not see is an empty list). */
  answersEmpty?: boolean;
}

const uuid = () => randomUUID();
const sha = () => randomUUID().replace(/-/g, '').padEnd(64, '0');
const day = '2026-11-19';
const newKey = () => exportPublicKeySpki(generateEs256KeyPair().publicKey);

const ROWS: Row[] = [
  // identity (authority administrators only: B is refused by kind)
  {
    route: 'GET /api/v1/console/api-keys/:id',
    resource: "A's API key",
    url: (id) => `/api/v1/console/api-keys/${id}`,
    a: () => A.spareKeyId,
    none: uuid,
    authority: 'reads',
  },
  {
    route: 'DELETE /api/v1/console/api-keys/:id',
    resource: "A's API key",
    url: (id) => `/api/v1/console/api-keys/${id}`,
    a: () => A.spareKeyId,
    none: uuid,
    authority: 'not called',
  },
  {
    route: 'POST /api/v1/console/organisations/:id/api-keys',
    resource: 'organisation A',
    url: (id) => `/api/v1/console/organisations/${id}/api-keys`,
    a: () => opA.id,
    none: uuid,
    body: () => ({ name: 'B was here', scopes: ['console:fleet'] }),
    authority: 'not called',
  },
  {
    route: 'POST /api/v1/console/organisations/:id/users',
    resource: 'organisation A',
    url: (id) => `/api/v1/console/organisations/${id}/users`,
    a: () => opA.id,
    none: uuid,
    body: () => ({ email: `b-${uuid().slice(0, 8)}@b.example`, password: PASSWORD, role: 'admin' }),
    authority: 'not called',
  },
  {
    route: 'GET /api/v1/console/organisations/:id/users',
    resource: 'organisation A',
    url: (id) => `/api/v1/console/organisations/${id}/users`,
    a: () => opA.id,
    none: uuid,
    authority: 'reads',
  },
  {
    route: 'POST /api/v1/console/users/:id/disable',
    resource: "A's console user",
    url: (id) => `/api/v1/console/users/${id}/disable`,
    a: () => A.userId,
    none: uuid,
    authority: 'not called',
  },
  // structures (the register is the authority's)
  {
    route: 'PATCH /api/v1/console/structures/:id',
    resource: "A's structure",
    url: (id) => `/api/v1/console/structures/${id}`,
    a: () => A.structure1.id,
    none: uuid,
    body: () => ({ openooh_screen_id: 'kz.b:hijack' }),
    authority: 'not called',
  },
  {
    route: 'POST /api/v1/console/structures/:id/retire',
    resource: "A's structure",
    url: (id) => `/api/v1/console/structures/${id}/retire`,
    a: () => A.structure1.id,
    none: uuid,
    authority: 'not called',
  },
  // CMS installations and players
  {
    route: 'GET /api/v1/console/cms-installations/:id',
    resource: "A's CMS installation",
    url: (id) => `/api/v1/console/cms-installations/${id}`,
    a: () => A.cms.id,
    none: uuid,
    authority: 'reads',
  },
  {
    route: 'POST /api/v1/console/cms-installations/:id/keys',
    resource: "A's CMS installation",
    url: (id) => `/api/v1/console/cms-installations/${id}/keys`,
    a: () => A.cms.id,
    none: uuid,
    body: () => ({ public_key: newKey() }),
    authority: 'not called',
  },
  {
    route: 'PUT /api/v1/console/cms-installations/:id/players/:external_id',
    resource: "A's CMS player, moved to B's structure",
    url: (id) => `/api/v1/console/cms-installations/${id}/players/${A.cms.player}`,
    a: () => A.cms.id,
    none: uuid,
    body: () => ({ structure_id: B.structure.id }),
    authority: 'not called',
  },
  {
    route: 'DELETE /api/v1/console/cms-installations/:id/players/:external_id',
    resource: "A's CMS player",
    url: (id) => `/api/v1/console/cms-installations/${id}/players/${A.cms.player}`,
    a: () => A.cms.id,
    none: uuid,
    authority: 'not called',
  },
  // submissions and their media
  ...(['operatorDraft', 'agencyDraft', 'inReview', 'approved'] as const).map(
    (which): Row => ({
      route: 'GET /api/v1/submissions/:id',
      resource: `A's submission (${which})`,
      url: (id) => `/api/v1/submissions/${id}`,
      a: () => A[which].id,
      none: uuid,
      authority: 'reads',
    }),
  ),
  ...(['operatorDraft', 'agencyDraft'] as const).map(
    (which): Row => ({
      route: 'PATCH /api/v1/submissions/:id',
      resource: `A's submission (${which})`,
      url: (id) => `/api/v1/submissions/${id}`,
      a: () => A[which].id,
      none: uuid,
      body: () => ({ advertiser_name: 'B was here' }),
      authority: 'forbidden',
    }),
  ),
  {
    route: 'PUT /api/v1/submissions/:id/media',
    resource: "A's draft",
    url: (id) => `/api/v1/submissions/${id}/media`,
    a: () => A.agencyDraft.id,
    none: uuid,
    raw: () => ({ payload: png(8, 8, 99), contentType: MEDIA_PNG }),
    authority: 'forbidden',
  },
  ...(['agencyDraft', 'inReview'] as const).map(
    (which): Row => ({
      route: 'GET /api/v1/submissions/:id/media',
      resource: `A's media (${which})`,
      url: (id) => `/api/v1/submissions/${id}/media`,
      a: () => A[which].id,
      none: uuid,
      authority: 'reads',
    }),
  ),
  {
    route: 'POST /api/v1/submissions/:id/send',
    resource: "A's draft with media and category",
    url: (id) => `/api/v1/submissions/${id}/send`,
    a: () => A.agencyDraft.id,
    none: uuid,
    authority: 'forbidden',
  },
  // the authority's decisions
  {
    route: 'POST /api/v1/console/submissions/:id/approve',
    resource: "A's submission in review",
    url: (id) => `/api/v1/console/submissions/${id}/approve`,
    a: () => A.inReview.id,
    none: uuid,
    body: () => ({}),
    authority: 'not called',
  },
  {
    route: 'POST /api/v1/console/submissions/:id/reject',
    resource: "A's submission in review",
    url: (id) => `/api/v1/console/submissions/${id}/reject`,
    a: () => A.inReview.id,
    none: uuid,
    body: () => ({ reason: 'B says no' }),
    authority: 'not called',
  },
  {
    route: 'POST /api/v1/console/approvals/:number/revoke',
    resource: "A's approval",
    url: (number) => `/api/v1/console/approvals/${number}/revoke`,
    a: () => A.approved.approvalNumber,
    none: () => 'APR-2026-999999',
    body: () => ({ reason: 'B says no' }),
    authority: 'not called',
  },
  // creatives and envelopes
  ...(['inReview', 'approved'] as const).map(
    (which): Row => ({
      route: 'GET /api/v1/creatives/:sha256',
      resource: `A's media hash (${which})`,
      url: (hash) => `/api/v1/creatives/${hash}`,
      a: () => A[which].sha256,
      none: sha,
      answersEmpty: true,
      authority: 'reads',
    }),
  ),
  {
    route: 'GET /api/v1/approvals/:number/envelope',
    resource: "A's approval envelope",
    url: (number) => `/api/v1/approvals/${number}/envelope`,
    a: () => A.approved.approvalNumber,
    none: () => 'APR-2026-999999',
    authority: 'reads',
  },
  // devices
  {
    route: 'GET /api/v1/console/devices/:id',
    resource: "A's device",
    url: (id) => `/api/v1/console/devices/${id}`,
    a: () => A.device.id,
    none: uuid,
    authority: 'reads',
  },
  {
    route: 'GET /api/v1/console/devices/:id/activity',
    resource: "A's device",
    url: (id) => `/api/v1/console/devices/${id}/activity`,
    a: () => A.device.id,
    none: uuid,
    authority: 'reads',
  },
  {
    route: 'POST /api/v1/console/devices/:id/revoke',
    resource: "A's device",
    url: (id) => `/api/v1/console/devices/${id}/revoke`,
    a: () => A.device.id,
    none: uuid,
    authority: 'not called',
  },
  {
    route: 'POST /api/v1/console/devices/:id/allow-force-renewal',
    resource: "A's device",
    url: (id) => `/api/v1/console/devices/${id}/allow-force-renewal`,
    a: () => A.device.id,
    none: uuid,
    authority: 'not called',
  },
  {
    route: 'POST /api/v1/console/devices/:id/re-enrol',
    resource: "A's device",
    url: (id) => `/api/v1/console/devices/${id}/re-enrol`,
    a: () => A.device.id,
    none: uuid,
    body: () => ({ public_key: newKey() }),
    authority: 'not called',
  },
  // proof of play and seals (the authority's console)
  {
    route: 'GET /api/v1/console/pop/devices/:id/events',
    resource: "A's device",
    url: (id) => `/api/v1/console/pop/devices/${id}/events`,
    a: () => A.device.id,
    none: uuid,
    authority: 'reads',
  },
  {
    route: 'POST /api/v1/console/seals/:day',
    resource: "the day of A's batch (a seal is every organisation's, public once made)",
    url: (d) => `/api/v1/console/seals/${d}`,
    a: () => T0.toISOString().slice(0, 10),
    none: () => day,
    authority: 'not called',
  },
  {
    route: 'GET /api/v1/console/seals/:day/batches',
    resource: "the day of A's batch",
    url: (d) => `/api/v1/console/seals/${d}/batches`,
    a: () => T0.toISOString().slice(0, 10),
    none: () => day,
    authority: 'not called',
  },
  // webhooks and alerts
  {
    route: 'GET /api/v1/console/webhooks/:id/deliveries',
    resource: "the authority's webhook (every organisation's events)",
    url: (id) => `/api/v1/console/webhooks/${id}/deliveries`,
    a: () => A.authorityWebhook,
    none: uuid,
    authority: 'reads',
  },
  {
    route: 'GET /api/v1/console/webhooks/:id/deliveries',
    resource: "A's alert webhook",
    url: (id) => `/api/v1/console/webhooks/${id}/deliveries`,
    a: () => A.alertWebhook,
    none: uuid,
    authority: 'reads',
  },
  ...(['alertWebhook', 'adsWebhook', 'authorityWebhook'] as const).map(
    (which): Row => ({
      route: 'DELETE /api/v1/console/webhooks/:id',
      resource: `A's webhook (${which})`,
      url: (id) => `/api/v1/console/webhooks/${id}`,
      a: () => A[which],
      none: uuid,
      authority: 'not called',
    }),
  ),
  {
    route: 'GET /api/v1/console/alerts/:id',
    resource: "A's alert",
    url: (id) => `/api/v1/console/alerts/${id}`,
    a: () => A.alert,
    none: uuid,
    authority: 'reads',
  },
  // the Ad Management view
  {
    route: 'GET /api/v1/ads/:id',
    resource: "A's programmatic submission",
    url: (id) => `/api/v1/ads/${id}`,
    a: () => A.approved.id,
    none: uuid,
    authority: 'forbidden',
  },
  ...(['adsWebhook', 'alertWebhook', 'authorityWebhook'] as const).map(
    (which): Row => ({
      route: 'DELETE /api/v1/ads/webhooks/:id',
      resource: `A's webhook (${which})`,
      url: (id) => `/api/v1/ads/webhooks/${id}`,
      a: () => A[which],
      none: uuid,
      authority: 'forbidden',
    }),
  ),
  // reports
  ...(['approved', 'agencyDraft'] as const).flatMap((which): Row[] => [
    {
      route: 'GET /api/v1/console/reports/campaigns/:id',
      resource: `A's campaign (${which})`,
      url: (id) => `/api/v1/console/reports/campaigns/${id}`,
      a: () => A[which].id,
      none: uuid,
      authority: which === 'approved' ? 'reads' : 'not called',
    },
    {
      route: 'GET /api/v1/console/reports/campaigns/:id/plays.csv',
      resource: `A's campaign (${which})`,
      url: (id) => `/api/v1/console/reports/campaigns/${id}/plays.csv`,
      a: () => A[which].id,
      none: uuid,
      authority: which === 'approved' ? 'reads' : 'not called',
    },
  ]),
];

/**
 * Routes with a path parameter that name nothing of an organisation, each with the reason. The console's files are
 * the same for everyone (apps/platform/console/README.md "Build and serve").
 */
const NOT_ORGANISATION_DATA: Record<string, string> = {
  'GET /console/*': 'the console web application: static files, the same for every caller, no credentials',
};

// --- routes without a path parameter: A's ids in the query, the body or a header ----------------------------------

interface Reference {
  route: string;
  /** What of A is named, and where. */
  what: string;
  a(): string;
  none(): string;
  call(caller: Caller, named: string): Promise<LightMyRequestResponse>;
  /** Only these callers of B can reach the route; the others are refused by kind or scope, the same either way. */
  callers?: (c: Caller) => boolean;
}

const isBuyer = (c: Caller) => c.kind === 'agency' || c.kind === 'advertiser';
const q = (params: Record<string, string>) => `?${new URLSearchParams(params).toString()}`;

/** A CMS batch of no records, for an installation B does not hold, signed with a key of B's own. */
async function cmsBatchNaming(source: string): Promise<LightMyRequestResponse> {
  const body = Buffer.from(
    JSON.stringify({ schema: 'service.pop/1', source_id: source, batch_seq: 0, records: [] }),
  );
  return p.servers.api.inject({
    method: 'POST',
    url: '/api/v1/pop/batches',
    headers: {
      authorization: `Bearer ${opB.key}`,
      'content-type': 'application/json',
      'x-service-source': source,
      'x-service-signature': es256Sign(generateEs256KeyPair().privateKey, body),
    },
    payload: body,
  });
}

const REFERENCES: Reference[] = [
  {
    route: 'POST /api/v1/submissions',
    what: "A's saved set in structure_set_ids",
    a: () => A.agencySet,
    none: uuid,
    call: (c, set) =>
      c.call('POST', '/api/v1/submissions', {
        advertiser_name: 'B campaign',
        period_from: '2026-12-01',
        period_to: '2026-12-31',
        structure_ids: [],
        structure_set_ids: [set],
      }),
  },
  {
    route: 'PATCH /api/v1/submissions/:id',
    what: "A's saved set in structure_set_ids of B's own draft",
    a: () => A.agencySet,
    none: uuid,
    call: (c, set) => c.call('PATCH', `/api/v1/submissions/${B.agencyDraft}`, { structure_set_ids: [set] }),
  },
  {
    route: 'POST /api/v1/console/devices',
    what: "A's structure in structure_id",
    a: () => A.structure1.id,
    none: uuid,
    call: (c, structure) =>
      c.call('POST', '/api/v1/console/devices', { structure_id: structure, public_key: newKey() }),
  },
  {
    route: 'POST /api/v1/console/cms-installations',
    what: 'organisation A in organisation_id',
    a: () => opA.id,
    none: uuid,
    call: (c, organisation) =>
      c.call('POST', '/api/v1/console/cms-installations', {
        organisation_id: organisation,
        name: 'B CMS',
        kind: 'test-cms',
        public_key: newKey(),
      }),
  },
  {
    route: 'PUT /api/v1/console/cms-installations/:id/players/:external_id',
    what: "A's structure mapped to a player of B's own installation",
    a: () => A.structure1.id,
    none: uuid,
    call: (c, structure) =>
      c.call('PUT', `/api/v1/console/cms-installations/${B.cms}/players/b-lobby-2`, {
        structure_id: structure,
      }),
  },
  {
    route: 'POST /api/v1/pop/batches',
    what: "A's CMS installation in X-Service-Source and source_id",
    a: () => A.cms.id,
    none: uuid,
    // The CMS channel is for operators' keys with write:plays; the batch is sent with operator B's key.
    callers: (c) => c === callersB[0],
    call: (_c, source) => cmsBatchNaming(source),
  },
  {
    route: 'POST /api/v1/creatives/lookup',
    what: "A's media hashes (in review, approved)",
    a: () => `${A.inReview.sha256},${A.approved.sha256}`,
    none: () => `${sha()},${sha()}`,
    call: (c, hashes) => c.call('POST', '/api/v1/creatives/lookup', { hashes: hashes.split(',') }),
  },
  {
    route: 'GET /api/v1/console/reports/plays',
    what: "A's structure and campaign in structure_id and submission_id",
    a: () => `${A.structure1.id},${A.approved.id}`,
    none: () => `${uuid()},${uuid()}`,
    call: (c, ids) => {
      const [structure, submission] = ids.split(',') as [string, string];
      return c.call(
        'GET',
        `/api/v1/console/reports/plays${q({ from: '2026-11-19', to: '2026-11-20', structure_id: structure, submission_id: submission })}`,
      );
    },
  },
  {
    route: 'GET /api/v1/console/reports/plays',
    what: "A's campaign in submission_id, by hour",
    a: () => A.approved.id,
    none: uuid,
    call: (c, submission) =>
      c.call(
        'GET',
        `/api/v1/console/reports/plays${q({ bucket: 'hour', from: '2026-11-20', to: '2026-11-20', submission_id: submission })}`,
      ),
  },
  {
    route: 'GET /api/v1/console/alerts',
    what: "A's device in device_id",
    a: () => A.device.id,
    none: uuid,
    call: (c, device) => c.call('GET', `/api/v1/console/alerts${q({ device_id: device, state: 'all' })}`),
  },
  {
    route: 'GET /api/v1/console/devices',
    what: "the beginning of A's device id in q",
    a: () => A.device.id.slice(0, 8),
    none: () => uuid().slice(0, 8),
    call: (c, text) => c.call('GET', `/api/v1/console/devices${q({ q: text })}`),
  },
  {
    route: 'GET /api/v1/console/devices',
    what: "A's structure code in q",
    a: () => A.structure1.code,
    none: () => `A-NOWHERE-${process.pid}`,
    call: (c, text) => c.call('GET', `/api/v1/console/devices${q({ q: text })}`),
  },
  {
    route: 'GET /api/v1/ads',
    what: "A's ad as the page cursor id",
    a: () => A.approved.id,
    none: uuid,
    call: (c, id) => c.call('GET', `/api/v1/ads${q({ auditStart: '0', id })}`),
  },
];

/** A list as B reads it: nothing of A in it (`except`: what the caller may see of A by design). */
interface Listing {
  route: string;
  url(): string;
  /** What of A this caller reads by design, with the reason (docs/decisions.md). */
  byDesign?: (c: Caller) => string[];
  /** Figures of B's own view that count nothing of A: B holds no device, no play, no campaign. */
  counts?: (body: unknown) => string[];
  /** Ids of A the authority finds in the same list (it sees everything: DESIGN.md section 3). */
  authoritySees?: () => string[];
  /** Only these callers (a console session's own view); default every caller of B. */
  callers?: (c: Caller) => boolean;
}

/** The query of a listing for a test's name, before the scene is set (A's ids are not known yet). */
function queryOf(listing: Listing): string {
  try {
    return listing.url().split('?')[1] ?? 'no query';
  } catch {
    return "a query naming A's organisation";
  }
}

const fleetCounts = (body: unknown): string[] => {
  const f = body as {
    total: number;
    summary: Record<string, number>;
    handshake_refusals: { last_24h: number; recent: unknown[] };
    alerts: unknown[];
  };
  const out: string[] = [];
  if (f.total !== 0) out.push(`total ${f.total}`);
  for (const [k, v] of Object.entries(f.summary)) if (v !== 0) out.push(`summary.${k} ${v}`);
  if (f.handshake_refusals.last_24h !== 0 || f.handshake_refusals.recent.length !== 0) out.push('refusals');
  if (f.alerts.length !== 0) out.push(`alerts ${f.alerts.length}`);
  return out;
};

/** B's subscriptions were made before A's alert opened and A's ad changes were raised: not one delivery for B. */
const deliveriesToB = (body: unknown): string[] =>
  (body as { items: { id: string; deliveries: Record<string, number> }[] }).items.flatMap((w) =>
    Object.entries(w.deliveries)
      .filter(([, n]) => n !== 0)
      .map(([state, n]) => `webhook ${w.id}: ${n} ${state}`),
  );

const LISTINGS: Listing[] = [
  {
    route: 'GET /api/v1/submissions',
    url: () => `/api/v1/submissions${q({ limit: '2000' })}`,
    authoritySees: () => [A.operatorDraft.id, A.agencyDraft.id, A.inReview.id, A.approved.id],
  },
  // An unknown parameter does not choose the organisation.
  {
    route: 'GET /api/v1/submissions',
    url: () => `/api/v1/submissions?organisation_id=${opA.id}&state=draft`,
  },
  {
    route: 'GET /api/v1/structures',
    url: () => '/api/v1/structures',
    // docs/decisions.md "Submissions": agencies and advertisers choose up to 2000 structures "of any operators'";
    // the register of active structures, with their operator, is theirs to read. An operator reads its own.
    byDesign: (c) =>
      isBuyer(c) ? [A.structure1.id, A.structure2.id, A.structure1.code, A.structure2.code, opA.id] : [],
  },
  { route: 'GET /api/v1/structure-sets', url: () => '/api/v1/structure-sets' },
  {
    route: 'GET /api/v1/console/cms-installations',
    url: () => '/api/v1/console/cms-installations',
    authoritySees: () => [A.cms.id],
  },
  {
    route: 'GET /api/v1/console/devices',
    url: () => '/api/v1/console/devices',
    counts: fleetCounts,
    authoritySees: () => [A.device.id, A.alert],
  },
  {
    route: 'GET /api/v1/console/devices',
    url: () => `/api/v1/console/devices${q({ state: 'screen_off' })}`,
    counts: fleetCounts,
  },
  {
    route: 'GET /api/v1/console/alerts',
    url: () => `/api/v1/console/alerts${q({ state: 'all' })}`,
    authoritySees: () => [A.alert],
  },
  {
    route: 'GET /api/v1/console/events',
    url: () => `/api/v1/console/events${q({ type: 'alert_opened' })}`,
    authoritySees: () => [A.alert],
  },
  {
    route: 'GET /api/v1/console/webhooks',
    url: () => '/api/v1/console/webhooks',
    counts: deliveriesToB,
    authoritySees: () => [A.alertWebhook, A.adsWebhook, A.authorityWebhook],
  },
  { route: 'GET /api/v1/ads', url: () => `/api/v1/ads${q({ auditStart: '0' })}` },
  { route: 'GET /api/v1/ads/webhooks', url: () => '/api/v1/ads/webhooks', counts: deliveriesToB },
  {
    route: 'GET /api/v1/console/reports/campaigns',
    url: () => '/api/v1/console/reports/campaigns',
    counts: (body) => {
      const items = (body as { items: unknown[] }).items;
      return items.length === 0 ? [] : [`${items.length} campaigns`];
    },
    authoritySees: () => [A.approved.id],
  },
  {
    route: 'GET /api/v1/console/reports/plays',
    url: () => `/api/v1/console/reports/plays${q({ from: '2026-11-19', to: '2026-11-20' })}`,
    counts: (body) => {
      const b = body as { totals: Record<string, number>; structures: unknown[]; campaigns: unknown[] };
      const out = Object.entries(b.totals)
        .filter(([, v]) => v !== 0)
        .map(([k, v]) => `totals.${k} ${v}`);
      if (b.structures.length + b.campaigns.length > 0) out.push('structures or campaigns');
      return out;
    },
    authoritySees: () => [A.structure1.id, A.approved.id],
  },
  // The authority's console: B is refused by kind whatever the query names.
  {
    route: 'GET /api/v1/console/organisations',
    url: () => '/api/v1/console/organisations',
    authoritySees: () => [opA.id, agA.id],
  },
  {
    route: 'GET /api/v1/console/api-keys',
    url: () => `/api/v1/console/api-keys${q({ organisation_id: opA.id })}`,
    authoritySees: () => [A.spareKeyId, opA.keyId],
  },
  {
    route: 'GET /api/v1/console/structures',
    url: () => `/api/v1/console/structures${q({ organisation_id: opA.id })}`,
    authoritySees: () => [A.structure1.id, A.structure2.id],
  },
  {
    route: 'GET /api/v1/console/submissions/decided',
    url: () => `/api/v1/console/submissions/decided${q({ organisation_id: agA.id })}`,
    authoritySees: () => [A.approved.id],
  },
  {
    route: 'GET /api/v1/console/pop/counts',
    url: () =>
      `/api/v1/console/pop/counts${q({ from: '2026-11-20', to: '2026-11-20', structure_id: A.structure1.id, approval_number: A.approved.approvalNumber })}`,
    authoritySees: () => [A.approved.approvalNumber],
  },
  {
    route: 'GET /api/v1/console/pop/quality',
    url: () => `/api/v1/console/pop/quality${q({ from: '2026-11-20', to: '2026-11-20' })}`,
  },
  // A console session's own view names its own user and organisation only.
  {
    route: 'GET /api/v1/console/session',
    url: () => '/api/v1/console/session',
    callers: (c) => c.name.includes('console'),
  },
  {
    route: 'GET /api/v1/console/reports/fleet-health',
    url: () => `/api/v1/console/reports/fleet-health${q({ bucket: 'hour', days: '1' })}`,
    counts: (body) => {
      const b = body as { devices: number; devices_never_reported: number; items: Record<string, unknown>[] };
      const out: string[] = [];
      if (b.devices !== 0 || b.devices_never_reported !== 0) out.push(`devices ${b.devices}`);
      for (const item of b.items) {
        for (const k of ['devices_expected', 'devices_reporting', 'devices_silent', 'screen_off_devices']) {
          if (item[k] !== 0) out.push(`${item['start']} ${k} ${item[k]}`);
        }
      }
      return out;
    },
  },
];

describe('a route with a path parameter: B never reaches A’s resource', () => {
  test.each(
    ROWS.map((row) => [`${row.route} — ${row.resource}`, row] as const),
  )('%s: the same answer as for nothing, never 2xx or 5xx, nothing of A, nothing changed', async (_name, row) => {
    const before = await snapshotOfA();
    const failures: string[] = [];
    const method = row.route.split(' ')[0] as Method;
    // The id as stored, and in capitals (a uuid names the same row in either case); a GET also as HEAD.
    const spellings = [(id: string) => id, (id: string) => id.toUpperCase()];
    const methods: CallMethod[] = method === 'GET' ? ['GET', 'HEAD'] : [method];
    for (const caller of callersB) {
      for (const spell of spellings) {
        for (const m of methods) {
          const aId = spell(row.a());
          const noneId = spell(row.none());
          const body = row.body?.();
          const raw = row.raw?.();
          const onA = await caller.call(m, row.url(aId), body, raw);
          const onNone = await caller.call(m, row.url(noneId), body, raw);
          const a = answerOf(onA, [aId]);
          const none = answerOf(onNone, [noneId]);
          const who = `${caller.name}, ${m} ${row.url(aId)}`;
          if (onA.statusCode >= 500) failures.push(`${who}: ${onA.statusCode} on A's resource: ${onA.body}`);
          if (!row.answersEmpty && ![403, 404].includes(onA.statusCode))
            failures.push(
              `${who}: ${onA.statusCode} ${codeOf(onA)} (not 403 or 404): ${onA.body.slice(0, 300)}`,
            );
          if (JSON.stringify(a) !== JSON.stringify(none))
            failures.push(
              `${who}: A's resource answers ${a.status} ${a.body.slice(0, 300)}; nothing answers ${none.status} ${none.body.slice(0, 300)}`,
            );
          const leaked = secretsIn(a.body, [aId]);
          if (leaked.length > 0)
            failures.push(`${who}: A's ${leaked.join(', ')} in ${onA.body.slice(0, 300)}`);
        }
      }
    }
    const after = await snapshotOfA();
    expect(failures).toEqual([]);
    expect(after).toEqual(before);
    if (row.authority === 'reads') {
      const res = await as(authority, method, row.url(row.a()));
      expect(res.statusCode, res.body).toBe(200);
    } else if (row.authority === 'forbidden') {
      const res = await apiCall(p.servers.api, authority.key, method, row.url(row.a()), row.body?.());
      expect([res.statusCode, codeOf(res)]).toEqual([403, 'forbidden']);
    }
  });

  test('every route of the api host with a path parameter is in the table', () => {
    const listed = new Set([...ROWS.map((r) => r.route), ...Object.keys(NOT_ORGANISATION_DATA)]);
    const withParameter = registeredRoutes(p.servers.api)
      .filter((r) => /[:*]/.test(r.url))
      .map((r) => `${r.method} ${r.url}`);
    expect(withParameter.length).toBeGreaterThan(30);
    expect(withParameter.filter((r) => !listed.has(r))).toEqual([]);
    // And the table names no route that is gone.
    expect([...listed].filter((r) => !withParameter.includes(r))).toEqual([]);
  });
});

describe("a route without a path parameter: A's ids in a query, a body or a header widen nothing", () => {
  test.each(
    REFERENCES.map((r) => [`${r.route} — ${r.what}`, r] as const),
  )('%s: the same answer as for ids that name nothing, nothing of A, nothing changed', async (_name, ref) => {
    const before = await snapshotOfA();
    const failures: string[] = [];
    for (const caller of callersB.filter(ref.callers ?? (() => true))) {
      const aId = ref.a();
      const noneId = ref.none();
      const onA = await ref.call(caller, aId);
      const onNone = await ref.call(caller, noneId);
      const a = answerOf(onA, aId.split(','));
      const none = answerOf(onNone, noneId.split(','));
      if (onA.statusCode >= 500) failures.push(`${caller.name}: ${onA.statusCode} ${onA.body}`);
      if (JSON.stringify(a) !== JSON.stringify(none))
        failures.push(
          `${caller.name}: naming A answers ${a.status} ${a.body.slice(0, 400)}; naming nothing answers ${none.status} ${none.body.slice(0, 400)}`,
        );
      const leaked = secretsIn(a.body);
      if (leaked.length > 0)
        failures.push(`${caller.name}: A's ${leaked.join(', ')} in ${onA.body.slice(0, 300)}`);
    }
    const after = await snapshotOfA();
    expect(failures).toEqual([]);
    expect(after).toEqual(before);
  });

  test.each(
    LISTINGS.map((l) => [`${l.route} (${queryOf(l)})`, l] as const),
  )('%s: no item of A for B, every one for the authority', async (_name, listing) => {
    const failures: string[] = [];
    for (const caller of callersB.filter(listing.callers ?? (() => true))) {
      const res = await caller.call('GET', listing.url());
      if (res.statusCode >= 500) failures.push(`${caller.name}: ${res.statusCode} ${res.body}`);
      if (res.statusCode === 403) continue; // refused by kind or scope (authorisation-matrix.test.ts)
      if (res.statusCode !== 200) {
        failures.push(`${caller.name}: ${res.statusCode} ${res.body.slice(0, 300)}`);
        continue;
      }
      const leaked = secretsIn(res.body, listing.byDesign?.(caller) ?? []);
      if (leaked.length > 0) failures.push(`${caller.name}: A's ${leaked.join(', ')}`);
      for (const c of listing.counts?.(res.json<unknown>()) ?? [])
        failures.push(`${caller.name}: counts A: ${c}`);
    }
    expect(failures).toEqual([]);
    const expected = listing.authoritySees?.() ?? [];
    if (expected.length > 0) {
      const res = await as(authority, 'GET', listing.url());
      expect(res.statusCode, res.body).toBe(200);
      expect(expected.filter((id) => !res.body.includes(id))).toEqual([]);
    }
  });
});

/** Routes the 'by design' tests call as B with A's ids, where the design lets B go further than "not found". */
const BY_DESIGN_ROUTES = ['POST /api/v1/structure-sets'];

describe('cross-organisation by design (docs/decisions.md, docs/approvals.md, src/reports/README.md)', () => {
  test('an operator sees an approval on its structures, but not the agency’s submission (docs/approvals.md "Lookup visibility")', async () => {
    const lookup = await ok<{
      items: { approvals: { approval_number: string; submission_number: string | null }[] }[];
    }>(as(opA, 'POST', '/api/v1/creatives/lookup', { hashes: [A.approved.sha256, A.inReview.sha256] }));
    expect(lookup.items[0]!.approvals).toMatchObject([
      { approval_number: A.approved.approvalNumber, submission_number: null },
    ]);
    // pending entries are the submitting organisation's only
    expect(lookup.items[1]!.approvals).toEqual([]);
    expect((await as(opA, 'GET', `/api/v1/approvals/${A.approved.approvalNumber}/envelope`)).statusCode).toBe(
      200,
    );
    const detail = await as(opA, 'GET', `/api/v1/submissions/${A.approved.id}`);
    expect([detail.statusCode, codeOf(detail)]).toEqual([404, 'not_found']);
  });

  test('an operator reports on another organisation’s campaign on its structures only, without the BIN (docs/decisions.md "Who sees reports")', async () => {
    const report = await ok<{
      report: { scope: string };
      campaign: { advertiser_bin: string | null };
      structures: { structure_id: string }[];
    }>(as(opA, 'GET', `/api/v1/console/reports/campaigns/${A.approved.id}`));
    expect(report.report.scope).toBe('own_structures');
    expect(report.campaign.advertiser_bin).toBeNull();
    expect(report.structures.map((s) => s.structure_id).sort()).toEqual(
      [A.structure1.id, A.structure2.id].sort(),
    );
    const own = await ok<{ report: { scope: string }; campaign: { advertiser_bin: string | null } }>(
      as(agA, 'GET', `/api/v1/console/reports/campaigns/${A.approved.id}`),
    );
    expect([own.report.scope, own.campaign.advertiser_bin]).toEqual(['full', '123456789012']);
  });

  test('agencies and advertisers buy on any operator’s structures; operators on their own (docs/decisions.md "Submissions")', async () => {
    for (const caller of callersB) {
      const res = await caller.call('POST', '/api/v1/structure-sets', {
        name: 'B set on A',
        structure_ids: [A.structure1.id],
      });
      if (isBuyer(caller)) expect(res.statusCode, `${caller.name}: ${res.body}`).toBe(201);
      else {
        // The register of active structures is every buyer's to read (GET /api/v1/structures), so an operator told
        // that a structure is another operator's learns its code, which any agency reads there, and nothing else.
        expect([res.statusCode, codeOf(res)], caller.name).toEqual([422, 'validation_failed']);
        expect(secretsIn(res.body, [A.structure1.id, A.structure1.code]), caller.name).toEqual([]);
      }
    }
  });

  test('the authority reads every organisation’s resources (DESIGN.md section 3)', async () => {
    for (const url of [
      `/api/v1/submissions/${A.agencyDraft.id}`,
      `/api/v1/console/devices/${A.device.id}`,
      `/api/v1/console/cms-installations/${A.cms.id}`,
      `/api/v1/console/alerts/${A.alert}`,
      `/api/v1/console/webhooks/${A.adsWebhook}/deliveries`,
      `/api/v1/console/reports/campaigns/${A.approved.id}`,
    ]) {
      const res = await as(authority, 'GET', url);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
    }
    // ... but a pending entry of the lookup is the submitter's alone (docs/approvals.md "Lookup visibility"), and the
    // Ad Management view is the submitter's (src/ad-management/README.md): the authority has no ads.
    const lookup = await ok<{ items: { approvals: { status: string }[] }[] }>(
      as(authority, 'POST', '/api/v1/creatives/lookup', { hashes: [A.inReview.sha256, A.approved.sha256] }),
    );
    expect(lookup.items.map((i) => i.approvals.map((e) => e.status))).toEqual([[], ['valid']]);
    const ads = await as(authority, 'GET', `/api/v1/ads/${A.approved.id}`);
    expect([ads.statusCode, codeOf(ads)]).toEqual([403, 'forbidden']);
  });
});

describe("what B reports itself cannot open A's records", () => {
  // A's approval number and media hash are public (GET {verify_url}/v1/approvals/{number} and ?media_sha256=), so any
  // operator's device can send a play naming them. Plays are judged and counted on the reporting operator's structure
  // (flag approval_not_for_structure: DESIGN.md section 5), so the operator sees them; A's campaign stays A's
  // (src/reports/README.md "Who sees what": an operator sees another organisation's campaign that uses its structures;
  // "anyone else: 404").
  test("an operator's plays under A's approval number show no submission, number or advertiser of A", async () => {
    const opC = {
      ...(await createOrganisation(p, 'operator', [...SCOPES], 'C Operator LLP')),
      kind: 'operator' as const,
    };
    const structure = await createStructure(p, opC.id, { code: `C-ST-${process.pid}` });
    const device = await enrol(p, opC.key, structure);
    const end = new Date(T0.getTime() - 120_000);
    await sendBatch(p, device, [
      {
        kind: 'play',
        seq: device.nextSeq++,
        play_id: 'c-play-1',
        approval_number: A.approved.approvalNumber,
        media_sha256: A.approved.sha256,
        start: new Date(end.getTime() - 15_000).toISOString(),
        end: end.toISOString(),
        duration_ms: 15_000,
        screen: { power: 'on' },
      },
    ]);
    // What C sent itself, and what the verify host publishes of every approval.
    const own = [A.approved.approvalNumber, A.approved.sha256];
    const failures: string[] = [];
    for (const url of [
      `/api/v1/console/reports/plays${q({ from: '2026-11-19', to: '2026-11-20' })}`,
      `/api/v1/console/reports/plays${q({ bucket: 'hour', from: '2026-11-20', to: '2026-11-20' })}`,
      `/api/v1/console/reports/plays${q({ from: '2026-11-19', to: '2026-11-20', structure_id: structure.id })}`,
      '/api/v1/console/reports/campaigns',
      `/api/v1/console/devices/${device.id}/activity`,
      '/api/v1/console/devices',
      '/api/v1/console/reports/fleet-health',
    ]) {
      const res = await as(opC, 'GET', url);
      if (res.statusCode !== 200) failures.push(`${url}: ${res.statusCode} ${res.body.slice(0, 200)}`);
      const leaked = secretsIn(res.body, own);
      if (leaked.length > 0) failures.push(`${url}: A's ${leaked.join(', ')}`);
    }
    // The plays are C's all the same: counted on its structure.
    const plays = await ok<{ totals: { plays: number } }>(
      as(opC, 'GET', `/api/v1/console/reports/plays${q({ from: '2026-11-19', to: '2026-11-20' })}`),
    );
    expect(plays.totals.plays).toBe(1);
    // Naming A's campaign is no way in either.
    for (const url of [
      `/api/v1/console/reports/plays${q({ from: '2026-11-19', to: '2026-11-20', submission_id: A.approved.id })}`,
      `/api/v1/console/reports/campaigns/${A.approved.id}`,
    ]) {
      const res = await as(opC, 'GET', url);
      const leaked = secretsIn(res.body, [...own, A.approved.id]);
      if (leaked.length > 0) failures.push(`${url}: A's ${leaked.join(', ')}`);
    }
    expect(failures).toEqual([]);
  });
});

test('every route of the api host that names a resource is covered by one of the tables', () => {
  const covered = new Set([
    ...ROWS.map((r) => r.route),
    ...REFERENCES.map((r) => r.route),
    ...LISTINGS.map((l) => l.route),
    ...BY_DESIGN_ROUTES,
  ]);
  // Printed for the record: how many routes of the api host this file calls as B.
  const all = registeredRoutes(p.servers.api).map((r) => `${r.method} ${r.url}`);
  expect([...covered].filter((r) => !all.includes(r))).toEqual([]);
  expect(covered.size).toBeGreaterThan(50);
});
