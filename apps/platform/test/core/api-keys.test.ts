import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { apiCall, createOrganisation, startTestPlatform, type TestPlatform } from '../support/platform.js';

/*
 * Issue "Trust under attack", item 6: "API keys can be neither listed nor found by id (bootstrap prints no id), so a
 * leaked key cannot be revoked without SQL. Add listing (id, name, organisation, scopes, created, last used), an
 * optional expiry, revocation in the console, and print the id at bootstrap."
 */

const T0 = new Date('2026-11-20T06:00:00Z');
let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform({ now: T0 });
});
afterAll(async () => {
  await p?.close();
});

const admin = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) =>
  apiCall(p.servers.api, p.adminKey, method, url, body);

describe('API keys can be found, expire and be revoked', () => {
  test('listed per organisation and found by id, with what a leak needs and never the hash', async () => {
    const org = await createOrganisation(p, 'operator', ['write:plays']);
    const listed = await admin('GET', `/api/v1/console/api-keys?organisation_id=${org.id}`);
    expect(listed.statusCode, listed.body).toBe(200);
    const items = listed.json<{ items: Record<string, unknown>[] }>().items;
    expect(items).toEqual([
      {
        id: org.keyId,
        name: 'test key',
        organisation: { id: org.id, name: expect.any(String), kind: 'operator' },
        scopes: ['write:plays'],
        routes: null,
        created_at: T0.toISOString(),
        expires_at: null,
        last_used_at: null,
        revoked_at: null,
        state: 'active',
      },
    ]);
    expect(listed.body).not.toMatch(/key_hash|ooh_/);
    const one = await admin('GET', `/api/v1/console/api-keys/${org.keyId}`);
    expect(one.json()).toEqual(items[0]);
    expect(
      (await admin('GET', '/api/v1/console/api-keys/00000000-0000-4000-8000-000000000000')).statusCode,
    ).toBe(404);
    // Every organisation's keys for the authority, the bootstrap key among them.
    const all = (await admin('GET', '/api/v1/console/api-keys')).json<{ items: { id: string }[] }>().items;
    expect(all.length).toBeGreaterThanOrEqual(2);
  });

  test('only authority administrators list or revoke keys', async () => {
    const org = await createOrganisation(p, 'operator', ['console:fleet', 'console:admin', 'write:plays']);
    expect((await apiCall(p.servers.api, org.key, 'GET', '/api/v1/console/api-keys')).statusCode).toBe(403);
    expect(
      (await apiCall(p.servers.api, org.key, 'DELETE', `/api/v1/console/api-keys/${org.keyId}`)).statusCode,
    ).toBe(403);
  });

  test('a key with an expiry works until then and answers 401 invalid_api_key after', async () => {
    const org = await createOrganisation(p, 'agency', ['read:creatives']);
    const created = await admin('POST', `/api/v1/console/organisations/${org.id}/api-keys`, {
      name: 'campaign tool',
      scopes: ['read:creatives'],
      expires_at: new Date(T0.getTime() + 3_600_000).toISOString(),
    });
    expect(created.statusCode, created.body).toBe(201);
    const { id, key } = created.json<{ id: string; key: string }>();
    const lookup = () =>
      apiCall(p.servers.api, key, 'POST', '/api/v1/creatives/lookup', { hashes: ['a'.repeat(64)] });
    try {
      expect((await lookup()).statusCode).toBe(200);
      p.clock.set(new Date(T0.getTime() + 3_600_000));
      const expired = await lookup();
      expect(expired.statusCode).toBe(401);
      expect(expired.json().code).toBe('invalid_api_key');
      expect((await admin('GET', `/api/v1/console/api-keys/${id}`)).json()).toMatchObject({
        state: 'expired',
      });
    } finally {
      p.clock.set(T0);
    }
    const past = await admin('POST', `/api/v1/console/organisations/${org.id}/api-keys`, {
      name: 'late',
      scopes: ['read:creatives'],
      expires_at: new Date(T0.getTime() - 1000).toISOString(),
    });
    expect(past.statusCode).toBe(422);
    expect(past.json().errors).toEqual([
      expect.objectContaining({ path: '/expires_at', code: 'out_of_range' }),
    ]);
  });

  test('last use is recorded, at most once a minute a key', async () => {
    const org = await createOrganisation(p, 'agency', ['read:creatives']);
    const call = () => apiCall(p.servers.api, org.key, 'POST', '/api/v1/creatives/lookup', { hashes: [] });
    const lastUsed = async () =>
      (await admin('GET', `/api/v1/console/api-keys/${org.keyId}`)).json<{ last_used_at: string | null }>()
        .last_used_at;
    const waitFor = async (expected: string) => {
      for (let i = 0; i < 50 && (await lastUsed()) !== expected; i += 1)
        await new Promise((r) => setTimeout(r, 20));
      expect(await lastUsed()).toBe(expected);
    };
    try {
      await call();
      await waitFor(T0.toISOString());
      p.clock.set(new Date(T0.getTime() + 30_000));
      await call();
      // Not written again within the minute.
      await new Promise((r) => setTimeout(r, 100));
      expect(await lastUsed()).toBe(T0.toISOString());
      p.clock.set(new Date(T0.getTime() + 61_000));
      await call();
      await waitFor(new Date(T0.getTime() + 61_000).toISOString());
    } finally {
      p.clock.set(T0);
    }
  });

  test('a revoked key is listed as revoked and refused', async () => {
    const org = await createOrganisation(p, 'agency', ['read:creatives']);
    expect((await admin('DELETE', `/api/v1/console/api-keys/${org.keyId}`)).statusCode).toBe(204);
    const refused = await apiCall(p.servers.api, org.key, 'POST', '/api/v1/creatives/lookup', { hashes: [] });
    expect(refused.json().code).toBe('invalid_api_key');
    const view = (await admin('GET', `/api/v1/console/api-keys/${org.keyId}`)).json();
    expect(view).toMatchObject({ state: 'revoked', revoked_at: T0.toISOString() });
    const active = (
      await admin('GET', `/api/v1/console/api-keys?organisation_id=${org.id}&state=active`)
    ).json();
    expect(active).toEqual({ items: [] });
  });
});
