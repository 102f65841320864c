import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { hashPassword, verifyPassword } from '../../src/sessions/index.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  type OrgKind,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

const T0 = new Date('2026-11-20T06:00:00Z');
const PASSWORD = 'correct horse battery staple';
const MINUTE = 60_000;

let p: TestPlatform;
let authorityId: string;

beforeAll(async () => {
  p = await startTestPlatform({ now: T0 });
  const { rows } = await p.database.db.query<{ id: string }>(
    "SELECT id FROM organisations WHERE kind = 'authority'",
  );
  authorityId = rows[0]!.id;
});
afterAll(async () => {
  await p?.close();
});

let counter = 0;
async function createUser(
  organisationId: string,
  role: 'admin' | 'member' = 'admin',
  email = `user${++counter}@example.kz`,
): Promise<{ id: string; email: string }> {
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${organisationId}/users`,
    {
      email,
      password: PASSWORD,
      role,
    },
  );
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

function login(
  email: string,
  password = PASSWORD,
  remoteAddress = '192.0.2.10',
  headers: Record<string, string> = {},
  platform: TestPlatform = p,
) {
  return platform.servers.api.inject({
    method: 'POST',
    url: '/api/v1/console/session',
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify({ email, password }),
    remoteAddress,
  });
}

interface Session {
  cookie: string;
  csrf: string;
  body: { scopes: string[]; user: { id: string }; organisation: { kind: string } };
}

/** The `name=value` of cookie `name` set by an answer. */
function cookieOf(res: LightMyRequestResponse, name = 'ooh_session'): string {
  const raw = res.headers['set-cookie'];
  const headers = Array.isArray(raw) ? raw : raw === undefined ? [] : [String(raw)];
  const header = headers.find((h) => h.startsWith(`${name}=`));
  if (!header) throw new Error(`no ${name} cookie was set`);
  return header.split(';')[0]!;
}

async function signIn(email: string): Promise<Session> {
  const res = await login(email);
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json();
  return { cookie: cookieOf(res), csrf: body.csrf_token, body };
}

function withSession(
  s: Session | null,
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  url: string,
  body?: unknown,
  options: { csrf?: string | null; authorization?: string } = {},
) {
  const csrf = options.csrf === undefined ? s?.csrf : options.csrf;
  return p.servers.api.inject({
    method,
    url,
    headers: {
      ...(s ? { cookie: `theme=dark; ${s.cookie}` } : {}),
      ...(csrf ? { 'x-csrf-token': csrf } : {}),
      ...(options.authorization ? { authorization: options.authorization } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
}

async function organisation(kind: OrgKind) {
  return createOrganisation(p, kind, ['write:submissions']);
}

describe('password hashes', () => {
  test('scrypt with a per-user salt and its parameters stored; wrong and tampered values refused', async () => {
    const a = await hashPassword(PASSWORD);
    const b = await hashPassword(PASSWORD);
    expect(a).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword(PASSWORD, a)).toBe(true);
    expect(await verifyPassword(`${PASSWORD} `, a)).toBe(false);
    const parts = a.split('$');
    parts[5] = Buffer.alloc(32, 1).toString('base64');
    expect(await verifyPassword(PASSWORD, parts.join('$'))).toBe(false);
    expect(await verifyPassword(PASSWORD, 'plain text')).toBe(false);
    expect(await verifyPassword(PASSWORD, a.replace('$32768$', '$1000$'))).toBe(false);
  });
});

describe('console users', () => {
  test('created by the authority: lower-case unique email, password of at least 12 characters', async () => {
    const org = await organisation('agency');
    const created = await createUser(org.id, 'member', 'Mixed.Case@Example.KZ');
    expect(created).toMatchObject({
      email: 'mixed.case@example.kz',
      role: 'member',
      organisation_id: org.id,
    });
    expect(JSON.stringify(created)).not.toContain('scrypt');

    const again = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/organisations/${org.id}/users`,
      {
        email: 'MIXED.case@example.kz',
        password: PASSWORD,
        role: 'admin',
      },
    );
    expect(again.statusCode).toBe(422);
    expect(again.json().errors).toEqual([expect.objectContaining({ path: '/email', code: 'duplicate' })]);

    const short = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/organisations/${org.id}/users`,
      {
        email: 'short@example.kz',
        password: 'too short',
        role: 'admin',
      },
    );
    expect(short.statusCode).toBe(422);
    expect(short.json().errors[0]).toMatchObject({ path: '/password', code: 'too_short' });

    const list = await apiCall(
      p.servers.api,
      p.adminKey,
      'GET',
      `/api/v1/console/organisations/${org.id}/users`,
    );
    expect(list.json().items.map((u: { email: string }) => u.email)).toEqual(['mixed.case@example.kz']);

    const missing = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      '/api/v1/console/organisations/00000000-0000-4000-8000-000000000000/users',
      { email: 'x@example.kz', password: PASSWORD, role: 'admin' },
    );
    expect(missing.statusCode).toBe(404);
  });

  test('only authority administrators create users (an operator key, even with every scope, is refused)', async () => {
    const op = await createOrganisation(p, 'operator', [
      'console:admin',
      'console:fleet',
      'write:submissions',
    ]);
    const res = await apiCall(p.servers.api, op.key, 'POST', `/api/v1/console/organisations/${op.id}/users`, {
      email: 'self@example.kz',
      password: PASSWORD,
      role: 'admin',
    });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('forbidden');
  });
});

describe('sign-in and the session cookie', () => {
  test('a wrong password or unknown address is 401 unauthenticated with one message', async () => {
    const org = await organisation('advertiser');
    const user = await createUser(org.id);
    const wrong = await login(user.email, 'not the password', '192.0.2.50');
    const unknown = await login('nobody@example.kz', PASSWORD, '192.0.2.50');
    for (const res of [wrong, unknown]) {
      expect(res.statusCode).toBe(401);
      expect(res.json().code).toBe('unauthenticated');
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    expect(wrong.json().detail).toBe(unknown.json().detail);
  });

  test('200 sets an HttpOnly, SameSite=Strict, Path=/ cookie (not Secure over plain HTTP) and answers who is signed in', async () => {
    const org = await organisation('operator');
    const user = await createUser(org.id, 'admin', 'Boss@Operator.KZ');
    const res = await login('  boss@operator.kz ');
    expect(res.statusCode, res.body).toBe(200);
    const cookies = res.headers['set-cookie'] as string[];
    const cookie = cookies.find((c) => c.startsWith('ooh_session='))!;
    expect(cookie).toMatch(/^ooh_session=[A-Za-z0-9_-]{43}; /);
    // And the browser is known to the account from now on: a device cookie sent to the sign-in route only.
    const device = cookies.find((c) => c.startsWith('ooh_device='))!;
    expect(device).toMatch(
      /^ooh_device=[A-Za-z0-9_-]{43}; Path=\/api\/v1\/console\/session; HttpOnly; SameSite=Strict; Max-Age=\d+$/,
    );
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).toContain('Path=/');
    expect(cookie).not.toContain('Secure');
    const body = res.json();
    expect(body).toMatchObject({
      user: { id: user.id, email: 'boss@operator.kz', role: 'admin' },
      organisation: { id: org.id, kind: 'operator' },
      idle_timeout_seconds: 1800,
    });
    expect(body.csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(body.scopes.sort()).toEqual([
      'console:fleet',
      'read:creatives',
      'read:submissions',
      'write:submissions',
    ]);

    // The token is not stored: only its SHA-256.
    const token = cookieOf(res).split('=')[1]!;
    const { rows } = await p.database.db.query('SELECT id FROM console_sessions WHERE user_id = $1', [
      user.id,
    ]);
    expect(rows.map((r) => r.id)).not.toContain(token);

    const me = await withSession({ cookie: cookieOf(res), csrf: '', body }, 'GET', '/api/v1/console/session');
    expect(me.statusCode).toBe(200);
    expect(me.json()).toMatchObject({ user: { id: user.id }, csrf_token: body.csrf_token });
  });

  test('Secure is set when the request came over HTTPS (proxy with an https public URL)', async () => {
    const secure = await startTestPlatform({
      now: T0,
      config: {
        publicUrls: {
          api: 'https://console.example.kz',
          agents: 'https://agents.example.kz',
          devices: 'https://devices.example.kz',
          verify: 'https://verify.example.kz',
        },
      },
    });
    try {
      const { rows } = await secure.database.db.query<{ id: string }>(
        "SELECT id FROM organisations WHERE kind = 'authority'",
      );
      const created = await apiCall(
        secure.servers.api,
        secure.adminKey,
        'POST',
        `/api/v1/console/organisations/${rows[0]!.id}/users`,
        { email: 'admin@city.kz', password: PASSWORD, role: 'admin' },
      );
      expect(created.statusCode).toBe(201);
      const res = await secure.servers.api.inject({
        method: 'POST',
        url: '/api/v1/console/session',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ email: 'admin@city.kz', password: PASSWORD }),
      });
      expect(res.statusCode).toBe(200);
      expect(String(res.headers['set-cookie'])).toMatch(/; Secure$/);
    } finally {
      await secure.close();
    }
  });

  test('GET session without a cookie or with an unknown one is 401 unauthenticated', async () => {
    const none = await withSession(null, 'GET', '/api/v1/console/session');
    expect(none.json().code).toBe('unauthenticated');
    const forged = await withSession(
      { cookie: `ooh_session=${'A'.repeat(43)}`, csrf: 'x', body: {} as Session['body'] },
      'GET',
      '/api/v1/console/session',
    );
    expect(forged.statusCode).toBe(401);
    expect(forged.json().code).toBe('unauthenticated');
  });
});

describe('a session is accepted beside API keys', () => {
  test('create a submission and look up creatives with a session; unsafe methods need the CSRF token', async () => {
    const op = await organisation('operator');
    const structure = await createStructure(p, op.id);
    const user = await createUser(op.id);
    const s = await signIn(user.email);
    const draft = {
      advertiser_name: 'Acme LLP',
      period_from: '2026-12-01',
      period_to: '2026-12-31',
      structure_ids: [structure.id],
    };

    const noToken = await withSession(s, 'POST', '/api/v1/submissions', draft, { csrf: null });
    expect(noToken.statusCode).toBe(403);
    expect(noToken.json().code).toBe('forbidden');
    const wrongToken = await withSession(s, 'POST', '/api/v1/submissions', draft, {
      csrf: `${s.csrf.slice(1)}x`,
    });
    expect(wrongToken.statusCode).toBe(403);

    const created = await withSession(s, 'POST', '/api/v1/submissions', draft);
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id;

    const read = await withSession(s, 'GET', `/api/v1/submissions/${id}`, undefined, { csrf: null });
    expect(read.statusCode).toBe(200);

    const lookup = await withSession(s, 'POST', '/api/v1/creatives/lookup', { hashes: ['a'.repeat(64)] });
    expect(lookup.statusCode, lookup.body).toBe(200);
    expect(lookup.json().items).toEqual([{ sha256: 'a'.repeat(64), approvals: [] }]);
  });

  test('API-key calls are not affected by CSRF, even with a session cookie beside the key', async () => {
    const agency = await createOrganisation(p, 'agency', ['read:creatives']);
    const user = await createUser(agency.id);
    const s = await signIn(user.email);
    const res = await withSession(
      s,
      'POST',
      '/api/v1/creatives/lookup',
      { hashes: ['b'.repeat(64)] },
      {
        csrf: null,
        authorization: `Bearer ${agency.key}`,
      },
    );
    expect(res.statusCode, res.body).toBe(200);
  });

  test('scopes follow the organisation kind and role', async () => {
    const op = await organisation('operator');
    const member = await signIn((await createUser(op.id, 'member')).email);
    expect(member.body.scopes).not.toContain('console:fleet');
    const fleet = await withSession(member, 'POST', '/api/v1/console/cms-installations', {
      organisation_id: op.id,
      name: 'CMS',
      kind: 'x',
      public_key: 'A'.repeat(91),
    });
    expect(fleet.statusCode).toBe(403);
    expect(fleet.json().code).toBe('key_scope_denied');

    const agency = await organisation('agency');
    const agent = await signIn((await createUser(agency.id)).email);
    const orgs = await withSession(agent, 'GET', '/api/v1/console/organisations');
    expect(orgs.statusCode).toBe(403);

    const authorityAdmin = await signIn((await createUser(authorityId, 'admin')).email);
    expect(authorityAdmin.body.scopes).toContain('console:admin');
    const allOrgs = await withSession(authorityAdmin, 'GET', '/api/v1/console/organisations');
    expect(allOrgs.statusCode).toBe(200);
    const authorityMember = await signIn((await createUser(authorityId, 'member')).email);
    expect(authorityMember.body.scopes).not.toContain('console:admin');
    const refused = await withSession(authorityMember, 'POST', '/api/v1/console/organisations', {
      name: 'New',
      kind: 'agency',
    });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().code).toBe('key_scope_denied');
  });
});

describe('idle timeout, absolute end, sign-out, disabled users', () => {
  test('a session unused for more than 30 minutes answers 401 session_expired; activity keeps it alive', async () => {
    const org = await organisation('agency');
    const s = await signIn((await createUser(org.id)).email);
    const start = p.clock.now();
    try {
      for (let i = 1; i <= 3; i += 1) {
        p.clock.set(new Date(start.getTime() + i * 25 * MINUTE));
        const ok = await withSession(s, 'GET', '/api/v1/console/session');
        expect(ok.statusCode).toBe(200);
      }
      p.clock.set(new Date(start.getTime() + 3 * 25 * MINUTE + 31 * MINUTE));
      const expired = await withSession(s, 'POST', '/api/v1/creatives/lookup', { hashes: ['c'.repeat(64)] });
      expect(expired.statusCode).toBe(401);
      expect(expired.json().code).toBe('session_expired');
      const me = await withSession(s, 'GET', '/api/v1/console/session');
      expect(me.json().code).toBe('session_expired');
    } finally {
      p.clock.set(start);
    }
  });

  test('a session ends 12 hours after sign-in whatever the activity', async () => {
    const org = await organisation('agency');
    const s = await signIn((await createUser(org.id)).email);
    const start = p.clock.now();
    try {
      for (let minutes = 20; minutes < 12 * 60; minutes += 20) {
        p.clock.set(new Date(start.getTime() + minutes * MINUTE));
        expect((await withSession(s, 'GET', '/api/v1/console/session')).statusCode).toBe(200);
      }
      p.clock.set(new Date(start.getTime() + 12 * 60 * MINUTE));
      expect((await withSession(s, 'GET', '/api/v1/console/session')).json().code).toBe('session_expired');
    } finally {
      p.clock.set(start);
    }
  });

  test('sign-out needs the CSRF token, ends the session and clears the cookie', async () => {
    const org = await organisation('agency');
    const s = await signIn((await createUser(org.id)).email);
    const forged = await withSession(s, 'DELETE', '/api/v1/console/session', undefined, { csrf: null });
    expect(forged.statusCode).toBe(403);
    expect((await withSession(s, 'GET', '/api/v1/console/session')).statusCode).toBe(200);

    const out = await withSession(s, 'DELETE', '/api/v1/console/session');
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/^ooh_session=; .*Max-Age=0/);
    const after = await withSession(s, 'POST', '/api/v1/creatives/lookup', { hashes: ['d'.repeat(64)] });
    expect(after.statusCode).toBe(401);
    expect(after.json().code).toBe('unauthenticated');
    // Signing out twice is harmless.
    expect((await withSession(s, 'DELETE', '/api/v1/console/session')).statusCode).toBe(204);
  });

  test('disabling a user ends its sessions and refuses its sign-in', async () => {
    const org = await organisation('agency');
    const user = await createUser(org.id);
    const s = await signIn(user.email);
    const res = await apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/users/${user.id}/disable`);
    expect(res.statusCode).toBe(200);
    expect(res.json().disabled_at).toBe(p.clock.now().toISOString());
    expect((await withSession(s, 'GET', '/api/v1/console/session')).json().code).toBe('unauthenticated');
    expect((await login(user.email, PASSWORD, '192.0.2.77')).statusCode).toBe(401);
  });
});

describe('sign-in limits: strangers cannot lock a user out', () => {
  const wrong = 'wrong password';

  test("the issue's case: twenty failures with made-up addresses from one address, then the right password from it", async () => {
    const org = await organisation('advertiser');
    const user = await createUser(org.id);
    const address = '203.0.113.7';
    for (let i = 0; i < 25; i += 1) {
      expect((await login(`made-up-${i}@example.kz`, wrong, address)).statusCode).toBe(401);
    }
    // Slowed down, never refused: behind a proxy this address is everyone.
    expect((await login(user.email, PASSWORD, address)).statusCode).toBe(200);
  });

  test('guessing one account from one address: that address is refused for that account, nobody else is', async () => {
    const org = await organisation('advertiser');
    const user = await createUser(org.id);
    const start = p.clock.now();
    try {
      for (let i = 0; i < 5; i += 1) {
        p.clock.set(new Date(start.getTime() + i * MINUTE));
        expect((await login(user.email, wrong, '198.51.100.1')).statusCode).toBe(401);
      }
      p.clock.set(new Date(start.getTime() + 5 * MINUTE));
      const limited = await login(user.email, PASSWORD, '198.51.100.1');
      expect(limited.statusCode).toBe(429);
      expect(limited.json().code).toBe('rate_limited');
      // The first failure leaves the window at start + 15 min: 10 minutes from now.
      expect(limited.headers['retry-after']).toBe('600');
      // The owner, elsewhere, signs in.
      expect((await login(user.email, PASSWORD, '198.51.100.2')).statusCode).toBe(200);
      p.clock.set(new Date(start.getTime() + 15 * MINUTE + 1000));
      expect((await login(user.email, PASSWORD, '198.51.100.1')).statusCode).toBe(200);
    } finally {
      p.clock.set(start);
    }
  });

  test("guessing one account from many addresses: browsers that do not know it wait, the owner's browser does not", async () => {
    const org = await organisation('advertiser');
    const user = await createUser(org.id);
    // The owner signed in once from this browser: it keeps the device cookie.
    const first = await login(user.email, PASSWORD, '192.0.2.200');
    expect(first.statusCode).toBe(200);
    const device = cookieOf(first, 'ooh_device');
    for (let i = 0; i < 20; i += 1) {
      expect((await login(user.email, wrong, `198.18.1.${i + 1}`)).statusCode).toBe(401);
    }
    const stranger = await login(user.email, PASSWORD, '198.18.2.1');
    expect(stranger.statusCode).toBe(429);
    // Same address as the attackers' last, right password, the owner's browser: signed in.
    expect((await login(user.email, PASSWORD, '198.18.1.20', { cookie: device })).statusCode).toBe(200);
  });

  test("a browser's own failures limit it, device cookie or not", async () => {
    const org = await organisation('advertiser');
    const user = await createUser(org.id);
    const device = cookieOf(await login(user.email, PASSWORD, '192.0.2.201'), 'ooh_device');
    for (let i = 0; i < 5; i += 1) {
      expect((await login(user.email, wrong, `192.0.2.${210 + i}`, { cookie: device })).statusCode).toBe(401);
    }
    expect((await login(user.email, PASSWORD, '192.0.2.220', { cookie: device })).statusCode).toBe(429);
    // Another user's device cookie is no one's for this account: limited as any browser would be.
    const other = await createUser(org.id);
    expect((await login(other.email, PASSWORD, '192.0.2.221', { cookie: device })).statusCode).toBe(200);
  });

  test('attempts at the same moment never pass the limit together', async () => {
    const org = await organisation('advertiser');
    const user = await createUser(org.id);
    const answers = await Promise.all(
      Array.from({ length: 9 }, () => login(user.email, wrong, '198.18.0.1')),
    );
    const codes = answers.map((r) => r.statusCode).sort();
    expect(codes).toEqual([401, 401, 401, 401, 401, 429, 429, 429, 429]);
  });

  test('TRUST_PROXY: X-Forwarded-For names the client only when the peer is a listed proxy', async () => {
    const behind = await startTestPlatform({ now: T0, config: { trustProxy: ['127.0.0.1'] } });
    try {
      const org = await createOrganisation(behind, 'advertiser', ['read:creatives']);
      const created = await apiCall(
        behind.servers.api,
        behind.adminKey,
        'POST',
        `/api/v1/console/organisations/${org.id}/users`,
        {
          email: 'owner@example.kz',
          password: PASSWORD,
          role: 'admin',
        },
      );
      expect(created.statusCode).toBe(201);
      const via = (client: string) => ({ 'x-forwarded-for': client });
      for (let i = 0; i < 5; i += 1) {
        const res = await login('owner@example.kz', wrong, '127.0.0.1', via('203.0.113.66'), behind);
        expect(res.statusCode).toBe(401);
      }
      // Through the same proxy, another client: its own address, not the attacker's.
      expect(
        (await login('owner@example.kz', PASSWORD, '127.0.0.1', via('203.0.113.67'), behind)).statusCode,
      ).toBe(200);
      // A peer that is no listed proxy cannot choose the address it is limited under.
      for (let i = 0; i < 5; i += 1) {
        await login('owner@example.kz', wrong, '198.51.100.9', via(`10.9.9.${i}`), behind);
      }
      expect(
        (await login('owner@example.kz', PASSWORD, '198.51.100.9', via('10.9.9.99'), behind)).statusCode,
      ).toBe(429);
    } finally {
      await behind.close();
    }
  });
});
