import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RouteAuth } from '../../src/auth/principal.js';
import { SCOPES } from '../../src/auth/principal.js';
import { registeredRoutes } from '../../src/http/server.js';
import {
  createOrganisation,
  startTestPlatform,
  type OrgKind,
  type TestPlatform,
} from '../support/platform.js';

/**
 * Every route of the api host, called by every organisation kind holding all
 * scopes, and by a key missing each scope the route accepts. Routes added
 * later are covered without touching this test.
 */
let p: TestPlatform;
const KINDS: OrgKind[] = ['authority', 'operator', 'agency', 'advertiser'];
const keys = new Map<string, string>();

beforeAll(async () => {
  p = await startTestPlatform();
  for (const kind of KINDS) {
    keys.set(kind, (await createOrganisation(p, kind, [...SCOPES])).key);
    for (const missing of SCOPES) {
      keys.set(
        `${kind}-${missing}`,
        (
          await createOrganisation(
            p,
            kind,
            SCOPES.filter((s) => s !== missing),
          )
        ).key,
      );
    }
  }
});
afterAll(async () => {
  await p?.close();
});

const PARAMS: Record<string, string> = {
  id: '00000000-0000-4000-8000-000000000000',
  number: 'APR-2026-000001',
  sha256: 'a'.repeat(64),
  external_id: 'player-1',
  day: '2026-01-01',
  month: '2026-01',
};
const fill = (url: string) => url.replace(/:([a-z_]+)/g, (_, name: string) => PARAMS[name] ?? 'x');
const AUTHENTICATION_CODES = ['unauthenticated', 'invalid_api_key', 'session_expired'];

/** The problem code of an answer, if it is a problem document. */
function codeOf(res: { headers: Record<string, unknown>; body: string }): string | undefined {
  if (!String(res.headers['content-type'] ?? '').includes('json')) return undefined;
  try {
    return (JSON.parse(res.body) as { code?: string }).code;
  } catch {
    return undefined;
  }
}

const call = (method: string, url: string, key: string | null) =>
  p.servers.api.inject({
    method: method as 'GET',
    url: fill(url),
    headers: key ? { authorization: `Bearer ${key}` } : {},
  });

describe('authorisation matrix of the api host', () => {
  test('every authenticated route: 401 without or with a bad key; 403 by kind and by missing scope', async () => {
    const routes = registeredRoutes(p.servers.api).filter((r) => r.auth);
    expect(routes.length).toBeGreaterThan(10);
    const failures: string[] = [];
    for (const route of routes) {
      const auth = route.auth as RouteAuth;
      const name = `${route.method} ${route.url}`;
      const none = await call(route.method, route.url, null);
      if (none.statusCode !== 401 || codeOf(none) !== 'unauthenticated')
        failures.push(`${name} no key: ${none.statusCode}`);
      const bad = await call(route.method, route.url, 'ooh_notarealkeyatallnotarealkeyatall');
      if (bad.statusCode !== 401 || codeOf(bad) !== 'invalid_api_key')
        failures.push(`${name} bad key: ${bad.statusCode}`);

      for (const kind of KINDS) {
        const allowed = auth.anyOf.some((g) => !g.kinds || g.kinds.includes(kind));
        const res = await call(route.method, route.url, keys.get(kind)!);
        const code = codeOf(res);
        if (
          allowed &&
          (res.statusCode === 403 || (res.statusCode === 401 && AUTHENTICATION_CODES.includes(code ?? '')))
        ) {
          failures.push(`${name} as ${kind} with all scopes: ${res.statusCode} ${code}`);
        }
        if (!allowed && (res.statusCode !== 403 || code !== 'forbidden')) {
          failures.push(`${name} as ${kind}: expected 403 forbidden, got ${res.statusCode} ${code}`);
        }
        for (const missing of SCOPES) {
          const stillGranted = auth.anyOf.some(
            (g) => g.scope !== missing && (!g.kinds || g.kinds.includes(kind)),
          );
          const anyScopeLeft = auth.anyOf.some((g) => g.scope !== missing);
          const r = await call(route.method, route.url, keys.get(`${kind}-${missing}`)!);
          const c = codeOf(r);
          if (!anyScopeLeft && (r.statusCode !== 403 || c !== 'key_scope_denied')) {
            failures.push(
              `${name} as ${kind} without ${missing}: expected key_scope_denied, got ${r.statusCode} ${c}`,
            );
          }
          if (stillGranted && r.statusCode === 403) {
            failures.push(
              `${name} as ${kind} without ${missing}: refused though another grant allows it (${c})`,
            );
          }
        }
      }
    }
    expect(failures).toEqual([]);
  });

  // The two published taxonomies (IAB Ad Product categories, OpenOOH venue types) are reference data anyone may read.
  test('the only api routes without credentials are health, the taxonomies, the console page and signing in', () => {
    const publicRoutes = registeredRoutes(p.servers.api)
      .filter((r) => !r.auth)
      .map((r) => `${r.method} ${r.url}`);
    for (const r of publicRoutes) {
      expect(r).toMatch(
        /^(GET \/(healthz|readyz|api\/v1\/(categories|venue-types)|console)|(GET|POST|DELETE) \/api\/v1\/console\/session$)/,
      );
    }
  });
});
