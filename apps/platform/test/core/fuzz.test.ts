import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { es256Sign, exportPublicKeySpki, generateEs256KeyPair, importPrivateKey } from '@ooh/crypto';
import { PROBLEM_CODES } from '@ooh/protocol';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { RouteAuth } from '../../src/auth/principal.js';
import { SCOPES } from '../../src/auth/principal.js';
import { registeredRoutes } from '../../src/http/server.js';
import {
  csrFor,
  type DevicesTestPlatform,
  deviceRequest,
  enrolDevice,
  realNow,
  startDevicesPlatform,
  type TestDevice,
} from '../devices/helpers.js';
import { createStructure, createOrganisation, type OrgKind } from '../support/platform.js';
import { registerSource, type TestSource } from '../pop/helpers.js';

/*
 * Issue "Trust under attack", item 4: "A fuzz test (fast-check) over every route of the four hosts, with valid
 * credentials, sending mutated bodies, headers and paths: no 5xx, a problem document with a stable code for every
 * refusal, nothing partly stored."
 *
 * The routes come from the servers themselves (registeredRoutes), so a route added later is fuzzed without anyone
 * remembering to add it here. Each request carries a credential the route accepts: an API key of an organisation of
 * an allowed kind with every scope or, now and then, the console session of an administrator
 * of that kind (api host), the body signed by an enrolled device's key (agent channel), a device
 * certificate over real mutual TLS (devices host); the CMS channel's body is signed by its installation. Bodies are
 * mutated from valid seeds. FUZZ_RUNS raises the number of requests (default 1000, fixed seed; FUZZ_SEED another).
 */

const RUNS = Number(process.env['FUZZ_RUNS'] ?? 1000);
const SEED = Number(process.env['FUZZ_SEED'] ?? 20261124);

let p: DevicesTestPlatform;
const keys = new Map<OrgKind, string>();
/** A console session (cookie and CSRF token) of an administrator of each kind, the other credential of the api host. */
const sessions = new Map<OrgKind, { cookie: string; csrf: string }>();
let device: TestDevice;
let source: TestSource;
/** Existing ids the paths may name: entities made for the fuzz, none of them a credential it uses. */
const real: Record<string, string> = {};

/** Tables whose rows a refused request must leave as they were (counted before and after each refused request). */
const STORED = [
  'organisations',
  'api_keys',
  'structures',
  'structure_sets',
  'cms_installations',
  'cms_keys',
  'cms_players',
  'submissions',
  'submission_structures',
  'submission_media',
  'devices',
  'device_keys',
  'device_certificates',
  'device_force_renewal_grants',
  'approvals',
  'pop_batches',
  'pop_records',
  'play_counts',
  'pop_play_sets',
  'stats_seals',
  'ledger_leaves',
  'webhook_subscriptions',
  'console_users',
];

async function storedCounts(): Promise<Record<string, number>> {
  const { rows } = await p.database.db.query<Record<string, number>>(
    `SELECT ${STORED.map((t) => `(SELECT count(*)::int FROM ${t}) AS ${t}`).join(', ')}`,
  );
  return rows[0]!;
}

beforeAll(async () => {
  p = await startDevicesPlatform();
  for (const kind of ['authority', 'operator', 'agency', 'advertiser'] as const) {
    const organisation = await createOrganisation(p, kind, [...SCOPES]);
    keys.set(kind, organisation.key);
    sessions.set(kind, await consoleSession(organisation.id, kind));
  }
  device = await enrolDevice(p);
  const operator = await createOrganisation(p, 'operator', ['write:plays', 'console:fleet']);
  const structures = [await createStructure(p, operator.id), await createStructure(p, operator.id)];
  source = await registerSource(p, { ...operator, structures }, { 'screen-1': structures[0]! });
  // The entities paths may name.
  const victim = await createOrganisation(p, 'agency', ['write:submissions']);
  real['organisation'] = victim.id;
  real['apiKey'] = victim.keyId;
  real['structure'] = structures[1]!.id;
  real['device'] = (await enrolDevice(p)).id;
  real['installation'] = (await registerSource(p, { ...operator, structures }, {})).id;
  const draft = await p.servers.api.inject({
    method: 'POST',
    url: '/api/v1/submissions',
    headers: { authorization: `Bearer ${victim.key}` },
    payload: seedSubmission(),
  });
  real['submission'] = draft.json<{ id: string }>().id;
  const renewal = generateEs256KeyPair();
  real['csr'] = await csrFor({ publicKey: renewal.publicKey, privateKey: renewal.privateKey });
}, 120_000);
afterAll(async () => {
  await p?.close();
});

async function consoleSession(
  organisationId: string,
  kind: OrgKind,
): Promise<{ cookie: string; csrf: string }> {
  const email = `fuzz-${kind}@example.kz`;
  const password = 'a long enough password for the fuzz';
  const authority = keys.get('authority')!;
  const user = await p.servers.api.inject({
    method: 'POST',
    url: `/api/v1/console/organisations/${organisationId}/users`,
    headers: { authorization: `Bearer ${authority}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ email, password, role: 'admin' }),
  });
  expect(user.statusCode, user.body).toBe(201);
  const signIn = await p.servers.api.inject({
    method: 'POST',
    url: '/api/v1/console/session',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ email, password }),
  });
  expect(signIn.statusCode, signIn.body).toBe(200);
  const raw = signIn.headers['set-cookie'];
  const cookie = (Array.isArray(raw) ? raw : [String(raw)]).find((c) => c.startsWith('ooh_session='))!;
  return { cookie: cookie.split(';')[0]!, csrf: signIn.json<{ csrf_token: string }>().csrf_token };
}

function seedSubmission(): Record<string, unknown> {
  return {
    advertiser_name: 'Acme LLP',
    period_from: '2026-12-01',
    period_to: '2026-12-31',
    structure_ids: [real['structure'] ?? randomUUID()],
    category_id: 1564,
  };
}

const spki = () => exportPublicKeySpki(generateEs256KeyPair().publicKey);

/** Valid bodies, per route (others start from {}). */
function seedFor(method: string, url: string): unknown {
  const now = p.clock.now().toISOString();
  switch (`${method} ${url}`) {
    case 'POST /api/v1/submissions':
      return seedSubmission();
    case 'PATCH /api/v1/submissions/:id':
      return { advertiser_name: 'Other LLP', declared_daily_plays: {} };
    case 'POST /api/v1/creatives/lookup':
      return { hashes: ['a'.repeat(64), 'b'.repeat(64)] };
    case 'POST /api/v1/console/organisations':
      return { name: 'Fuzz LLP', kind: 'agency' };
    case 'POST /api/v1/console/organisations/:id/api-keys':
      return { name: 'fuzz', scopes: ['read:creatives'] };
    case 'POST /api/v1/console/organisations/:id/users':
      return { email: 'fuzz@example.kz', password: 'a long enough password', role: 'member' };
    case 'POST /api/v1/console/structures':
      return { organisation_id: real['organisation'], code: 'FZ-1', district: 'almaly', format: 'billboard' };
    case 'POST /api/v1/structure-sets':
      return { name: 'set', structure_ids: [real['structure']] };
    case 'POST /api/v1/console/cms-installations':
      return { organisation_id: real['organisation'], name: 'cms', kind: 'xibo', public_key: spki() };
    case 'POST /api/v1/console/cms-installations/:id/keys':
    case 'POST /api/v1/console/devices/:id/re-enrol':
      return { public_key: spki() };
    case 'PUT /api/v1/console/cms-installations/:id/players/:external_id':
      return { structure_id: real['structure'] };
    case 'POST /api/v1/console/devices':
      return { structure_id: real['structure'], public_key: spki() };
    case 'POST /api/v1/console/webhooks':
      return { url: 'https://hooks.example.kz/x', types: ['declared_vs_actual'] };
    case 'PUT /api/v1/console/events/settings':
      return { declared_band_pct: 30 };
    case 'PUT /api/v1/console/open-data/publication':
      return { enabled: true };
    case 'PUT /api/v1/console/open-data/disclosure':
      return { min_operators: 3, min_advertisers: 3, max_party_share_pct: 70, lag_months: 1 };
    case 'POST /api/v1/console/session':
      return { email: 'nobody@example.kz', password: 'wrong' };
    case 'PUT /api/v1/console/clock':
      return { now, frozen: true };
    case 'POST /api/v1/console/submissions/:id/reject':
    case 'POST /api/v1/console/approvals/:number/revoke':
      return { reason: 'fuzz' };
    case 'POST /api/v1/pop/batches':
      return {
        schema: 'service.pop/1',
        source_id: source.id,
        batch_seq: 0,
        prev_sha256: '',
        records: [
          {
            kind: 'play',
            seq: 1,
            play_id: 'p1',
            player: 'screen-1',
            approval_number: 'A-1',
            media_sha256: 'a'.repeat(64),
            start: new Date(Date.parse(now) - 70_000).toISOString(),
            end: new Date(Date.parse(now) - 60_000).toISOString(),
            duration_ms: 10_000,
          },
        ],
      };
    case 'POST /d/v1/renew':
      return { csr: real['csr'], force: true };
    case 'POST /s/v1/telemetry':
    case 'POST /d/v1/telemetry':
      return {
        schema: 'service.pop/1',
        device_id: device.id,
        ts: now,
        batch_seq: 0,
        events: [
          {
            kind: 'play',
            seq: 1,
            play_id: 'p1',
            approval_number: 'A-1',
            media_sha256: 'a'.repeat(64),
            duration_ms: 5000,
          },
          { kind: 'reject', seq: 2, at: now, code: 'REVOKED', detail: { file: 'x.mp4' } },
        ],
      };
    default:
      return {};
  }
}

// ---- mutations ----

const HOSTILE_TEXT = fc.constantFrom(
  '',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x'.repeat(70_000),
  '../../etc/passwd',
  '%00',
  '<script>',
  '0',
  '-1',
  'null',
  '1e309',
);
const HOSTILE_KEY = fc.constantFrom('__proto__', 'constructor', 'prototype', 'k\u0000', '', 'extra');
const deep = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const anyValue = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  HOSTILE_TEXT,
  fc.constant(null),
  fc.integer(),
  fc.double(),
);

type BodyMutation =
  | { kind: 'seed' }
  | { kind: 'drop'; pick: number }
  | { kind: 'replace'; pick: number; value: unknown }
  | { kind: 'add'; key: string; value: unknown }
  | { kind: 'deep'; pick: number; depth: number }
  | { kind: 'json'; value: unknown }
  | { kind: 'text'; text: string };

const bodyMutation: fc.Arbitrary<BodyMutation> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: 'seed' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('drop' as const), pick: fc.nat() }) },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('replace' as const), pick: fc.nat(), value: anyValue }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('add' as const), key: HOSTILE_KEY, value: anyValue }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('deep' as const),
      pick: fc.nat(),
      depth: fc.constantFrom(40, 1000, 100_000),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('json' as const), value: fc.jsonValue() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('text' as const),
      text: fc.constantFrom('', '{', 'null', '[]', '"x"', '{"a":1}{', '\u0000', '{"a":"\\ud800"}'),
    }),
  },
);

/** Walks into the seed to the `pick`-th field (records and events included), to drop or replace it. */
function fieldPaths(
  value: unknown,
  path: (string | number)[] = [],
  out: (string | number)[][] = [],
): (string | number)[][] {
  if (typeof value !== 'object' || value === null) return out;
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value);
  for (const [key, child] of entries) {
    out.push([...path, key]);
    fieldPaths(child, [...path, key], out);
  }
  return out;
}

function applyMutation(seed: unknown, m: BodyMutation): string {
  if (m.kind === 'text') return m.text;
  if (m.kind === 'json') return JSON.stringify(m.value);
  const body = structuredClone(seed) as Record<string, unknown>;
  const paths = fieldPaths(body);
  const DEEP = '__fuzz_deep__';
  if (m.kind === 'add') {
    return JSON.stringify(body).replace(
      /^\{/,
      `{${JSON.stringify(m.key)}:${JSON.stringify(m.value) ?? 'null'}${Object.keys(body).length ? ',' : ''}`,
    );
  }
  if (m.kind !== 'seed' && paths.length > 0) {
    const path = paths[m.pick % paths.length]!;
    let parent: Record<string | number, unknown> = body;
    for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
    const last = path[path.length - 1]!;
    if (m.kind === 'drop') {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else if (m.kind === 'replace') {
      parent[last] = m.value;
    } else {
      parent[last] = DEEP;
      return JSON.stringify(body).replace(`"${DEEP}"`, deep(m.depth));
    }
  }
  return JSON.stringify(body);
}

const PARAM_VALUES = fc.constantFrom(
  'real',
  'random',
  'upper',
  'x',
  '%00',
  '0'.repeat(300),
  '%E2%80%AE',
  '..%2F..',
  '-1',
  '2026-02-30',
  '0000-01-01',
  'APR-2026-000001',
);

function paramValue(name: string, choice: string): string {
  const realFor: Record<string, string | undefined> = {
    id: real['submission'],
    number: 'APR-2026-000001',
    sha256: 'a'.repeat(64),
    external_id: 'screen-1',
    day: '2026-11-20',
    month: '2026-10',
  };
  if (choice === 'real') return encodeURIComponent(realFor[name] ?? 'x');
  if (choice === 'random') return randomUUID();
  if (choice === 'upper') return (realFor[name] ?? randomUUID()).toUpperCase();
  return choice;
}

const request = fc.record({
  route: fc.nat(),
  body: bodyMutation,
  params: fc.array(PARAM_VALUES, { minLength: 3, maxLength: 3 }),
  idTarget: fc.constantFrom('submission', 'organisation', 'apiKey', 'structure', 'device', 'installation'),
  contentType: fc.constantFrom(
    'application/json',
    'application/json',
    'application/json',
    'text/plain',
    'application/json; charset=latin1',
    'image/png',
    '',
  ),
  encoding: fc.constantFrom(undefined, undefined, undefined, 'gzip', 'br', 'identity'),
  /** On the api host: the caller's console session instead of its API key, now and then. */
  viaSession: fc.boolean(),
  query: fc.option(
    fc.constantFrom(
      '?state=%00',
      '?from=0000-01-01&to=9999-12-31',
      '?limit=-1',
      '?kind=x',
      '?a=1&a=2',
      '?organisation_id=zz',
      '?' + 'q='.repeat(500),
    ),
    { nil: '' },
  ),
});

test('every route of the four hosts, with valid credentials and mutated bodies, headers and paths', async () => {
  const routes = [
    ...registeredRoutes(p.servers.api).map((r) => ({ ...r, host: 'api' as const })),
    ...registeredRoutes(p.servers.agents).map((r) => ({ ...r, host: 'agents' as const })),
    ...registeredRoutes(p.servers.devices).map((r) => ({ ...r, host: 'devices' as const })),
    ...registeredRoutes(p.servers.verify).map((r) => ({ ...r, host: 'verify' as const })),
  ].filter((r) => r.method !== 'OPTIONS');
  expect(routes.length).toBeGreaterThan(60);
  const failures: string[] = [];
  const seen = new Set<string>();
  const statuses = new Map<number, number>();
  let batchSeq = 1;

  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const route = routes[r.route % routes.length]!;
      const ids: Record<string, string | undefined> = {
        submission: real['submission'],
        organisation: real['organisation'],
        apiKey: real['apiKey'],
        structure: real['structure'],
        device: real['device'],
        installation: real['installation'],
      };
      let n = 0;
      const url =
        route.url.replace(/:([a-z_]+)/g, (_, name: string) => {
          const choice = r.params[n++ % 3]!;
          return name === 'id' && choice === 'real' ? ids[r.idTarget]! : paramValue(name, choice);
        }) + (r.query ?? '');
      const hasBody = !['GET', 'HEAD', 'DELETE'].includes(route.method);
      const text = hasBody ? applyMutation(seedFor(route.method, route.url), r.body) : '';
      // A fresh batch_seq now and then, so that bodies get past idempotency into the judgement.
      const payload = Buffer.from(text.replace('"batch_seq":0', `"batch_seq":${batchSeq++}`), 'utf8');
      const headers: Record<string, string> = {};
      if (hasBody && r.contentType) headers['content-type'] = r.contentType;
      let wire = payload;
      if (hasBody && r.encoding) {
        headers['content-encoding'] = r.encoding;
        if (r.encoding === 'gzip') wire = gzipSync(payload);
      }
      const auth = route.auth as RouteAuth | undefined;
      if (route.host === 'api' && auth) {
        const kind = (['authority', 'operator', 'agency', 'advertiser'] as const).find((k) =>
          auth.anyOf.some((g) => !g.kinds || g.kinds.includes(k)),
        )!;
        const session = sessions.get(kind)!;
        if (r.viaSession) {
          headers['cookie'] = session.cookie;
          headers['x-csrf-token'] = session.csrf;
        } else {
          headers['authorization'] = `Bearer ${keys.get(kind)}`;
        }
      }
      if (route.url === '/api/v1/pop/batches') {
        headers['x-service-source'] = source.id;
        headers['authorization'] = `Bearer ${source.operator.key}`;
        headers['x-service-signature'] = es256Sign(source.privateKey, payload);
      }
      if (route.url === '/s/v1/telemetry' || route.url === '/d/v1/renew') {
        headers['x-service-signature'] = es256Sign(importPrivateKey(device.keyPem), payload);
      }

      const before = await storedCounts();
      let status: number;
      let contentType: string;
      let body: string;
      if (route.host === 'devices') {
        const res = await deviceRequest(p, {
          method: route.method as 'GET' | 'POST',
          path: url,
          cert: device.certPem,
          key: device.keyPem,
          ...(hasBody ? { body: wire } : {}),
          headers,
        });
        if (res.status === undefined) {
          failures.push(`${route.method} ${url}: request failed: ${res.error}`);
          return;
        }
        status = res.status;
        contentType = String(res.headers['content-type'] ?? '');
        body = res.body;
      } else {
        const res = await p.servers[route.host].inject({
          method: route.method as 'GET',
          url,
          headers,
          ...(hasBody ? { payload: wire } : {}),
        });
        status = res.statusCode;
        contentType = String(res.headers['content-type'] ?? '');
        body = res.body;
      }
      // The test clock may have been moved by PUT /api/v1/console/clock: back to now.
      p.clock.set(realNow());
      const name = `${route.method} ${route.url} (${url.slice(0, 120)})`;
      seen.add(`${route.host} ${route.method} ${route.url}`);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      // The console's pages answer 503 until the console is built (npm run build): a state, not a crash.
      const unbuiltConsole =
        route.url.startsWith('/console') && status === 503 && body.includes('service_unavailable');
      if (status >= 500 && !unbuiltConsole) {
        failures.push(`${name}: ${status} ${body.slice(0, 300)} for ${JSON.stringify(r.body).slice(0, 300)}`);
        return;
      }
      if (status >= 400 && !unbuiltConsole) {
        let code: unknown;
        try {
          code = (JSON.parse(body) as { code?: unknown }).code;
        } catch {
          code = undefined;
        }
        if (!contentType.startsWith('application/problem+json') || !PROBLEM_CODES.includes(code as never)) {
          failures.push(
            `${name}: ${status} without a problem document of a known code: ${body.slice(0, 200)}`,
          );
        }
        const after = await storedCounts();
        const changed = STORED.filter((t) => before[t] !== after[t]);
        if (changed.length > 0) failures.push(`${name}: refused ${status} but changed ${changed.join(', ')}`);
      }
    }),
    { numRuns: RUNS, seed: SEED },
  );
  if (process.env['FUZZ_REPORT']) console.log({ statuses: Object.fromEntries(statuses), routes: seen.size });
  expect(failures).toEqual([]);
  // Bodies got past validation into the handlers (not everything refused at the door).
  expect([...statuses.entries()].filter(([s]) => s < 300).reduce((n, [, c]) => n + c, 0)).toBeGreaterThan(
    RUNS / 10,
  );
  // A fixed seed must reach most routes; more runs reach all of them.
  expect(seen.size).toBeGreaterThan(routes.length * 0.6);
}, 600_000);
