import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateEs256KeyPair, exportPublicKeySpki } from '@ooh/crypto';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform();
});
afterAll(async () => {
  await p?.close();
});

const spki = () => exportPublicKeySpki(generateEs256KeyPair().publicKey);

describe('organisations and API keys', () => {
  test('a key is shown once, stored hashed, and stops working when deleted', async () => {
    const org = await createOrganisation(p, 'advertiser', ['write:submissions']);
    const stored = await p.database.db.query('SELECT key_hash FROM api_keys WHERE id = $1', [org.keyId]);
    expect(Buffer.from(stored.rows[0].key_hash).toString('utf8')).not.toContain(org.key);
    const before = await apiCall(
      p.servers.api,
      org.key,
      'GET',
      '/api/v1/submissions/00000000-0000-4000-8000-000000000000',
    );
    expect(before.statusCode).toBe(404);
    const del = await apiCall(p.servers.api, p.adminKey, 'DELETE', `/api/v1/console/api-keys/${org.keyId}`);
    expect(del.statusCode).toBe(204);
    const after = await apiCall(
      p.servers.api,
      org.key,
      'GET',
      '/api/v1/submissions/00000000-0000-4000-8000-000000000000',
    );
    expect(after.statusCode).toBe(401);
    expect(after.json().code).toBe('invalid_api_key');
    const again = await apiCall(p.servers.api, p.adminKey, 'DELETE', `/api/v1/console/api-keys/${org.keyId}`);
    expect(again.statusCode).toBe(404);
  });

  test('unknown scopes and organisations are refused', async () => {
    const org = await createOrganisation(p, 'agency', ['write:submissions']);
    const bad = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/organisations/${org.id}/api-keys`,
      {
        name: 'k',
        scopes: ['write:everything'],
      },
    );
    expect(bad.statusCode).toBe(422);
    expect(bad.json().errors[0].path).toBe('/scopes/0');
    const missing = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      '/api/v1/console/organisations/6a1c7e0e-0000-4000-8000-000000000000/api-keys',
      { name: 'k', scopes: ['read:creatives'] },
    );
    expect(missing.statusCode).toBe(404);
    const notUuid = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      '/api/v1/console/organisations/nope/api-keys',
      {
        name: 'k',
        scopes: ['read:creatives'],
      },
    );
    expect(notUuid.statusCode).toBe(404);
    expect(notUuid.json().code).toBe('not_found');
  });

  test('a key limited to a route list may call only those routes', async () => {
    const org = await createOrganisation(p, 'operator', ['write:submissions', 'read:submissions']);
    const res = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/organisations/${org.id}/api-keys`,
      {
        name: 'reader',
        scopes: ['read:submissions', 'write:submissions'],
        routes: ['GET /api/v1/submissions/:id'],
      },
    );
    const key = res.json().key as string;
    const get = await apiCall(
      p.servers.api,
      key,
      'GET',
      '/api/v1/submissions/00000000-0000-4000-8000-000000000000',
    );
    expect(get.statusCode).toBe(404);
    const post = await apiCall(p.servers.api, key, 'POST', '/api/v1/submissions', {});
    expect(post.statusCode).toBe(403);
    expect(post.json().code).toBe('key_route_denied');
  });
});

describe('structures and saved sets', () => {
  test('structures belong to operators, codes are unique, retiring is idempotent', async () => {
    const op = await createOrganisation(p, 'operator', ['write:submissions']);
    const agency = await createOrganisation(p, 'agency', ['write:submissions']);
    const s = await createStructure(p, op.id, { code: 'ALM-001' });
    const dup = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/structures', {
      organisation_id: op.id,
      code: 'ALM-001',
      district: 'almaly',
      format: 'billboard',
    });
    expect(dup.statusCode).toBe(422);
    expect(dup.json().errors[0]).toMatchObject({ path: '/code', code: 'duplicate' });
    const wrongOrg = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/structures', {
      organisation_id: agency.id,
      code: 'ALM-002',
      district: 'almaly',
      format: 'billboard',
    });
    expect(wrongOrg.statusCode).toBe(422);
    const r1 = await apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/structures/${s.id}/retire`);
    expect(r1.statusCode).toBe(200);
    const r2 = await apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/structures/${s.id}/retire`);
    expect(r2.json().retired_at).toBe(r1.json().retired_at);
  });

  test('an operator saves a set of its own structures only', async () => {
    const op = await createOrganisation(p, 'operator', ['write:submissions']);
    const other = await createOrganisation(p, 'operator', ['write:submissions']);
    const mine = await createStructure(p, op.id);
    const theirs = await createStructure(p, other.id);
    const bad = await apiCall(p.servers.api, op.key, 'POST', '/api/v1/structure-sets', {
      name: 'mixed',
      structure_ids: [mine.id, theirs.id],
    });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().errors).toEqual([
      expect.objectContaining({ path: '/structure_ids/1', code: 'not_allowed' }),
    ]);
    const ok = await apiCall(p.servers.api, op.key, 'POST', '/api/v1/structure-sets', {
      name: 'mine',
      structure_ids: [mine.id],
    });
    expect(ok.statusCode).toBe(201);
    expect(ok.json()).toMatchObject({ name: 'mine', structure_ids: [mine.id] });
  });
});

describe('CMS installations', () => {
  test('register, rotate with grace, map and unmap players', async () => {
    const op = await createOrganisation(p, 'operator', ['console:fleet']);
    const other = await createOrganisation(p, 'operator', ['console:fleet']);
    const s = await createStructure(p, op.id);
    const foreign = await createStructure(p, other.id);

    const notP256 = await apiCall(p.servers.api, op.key, 'POST', '/api/v1/console/cms-installations', {
      organisation_id: op.id,
      name: 'cms',
      kind: 'broadsign',
      public_key: Buffer.alloc(91, 1).toString('base64'),
    });
    expect(notP256.statusCode).toBe(422);
    expect(notP256.json().errors[0].path).toBe('/public_key');

    const forOther = await apiCall(p.servers.api, op.key, 'POST', '/api/v1/console/cms-installations', {
      organisation_id: other.id,
      name: 'cms',
      kind: 'broadsign',
      public_key: spki(),
    });
    expect(forOther.statusCode).toBe(422);

    const created = await apiCall(p.servers.api, op.key, 'POST', '/api/v1/console/cms-installations', {
      organisation_id: op.id,
      name: 'cms',
      kind: 'broadsign',
      public_key: spki(),
    });
    expect(created.statusCode).toBe(201);
    const id = created.json().id as string;

    const invisible = await apiCall(
      p.servers.api,
      other.key,
      'GET',
      `/api/v1/console/cms-installations/${id}`,
    );
    expect(invisible.statusCode).toBe(404);

    p.clock.set(new Date('2026-11-20T10:00:00Z'));
    const rotated = await apiCall(
      p.servers.api,
      op.key,
      'POST',
      `/api/v1/console/cms-installations/${id}/keys`,
      {
        public_key: spki(),
      },
    );
    expect(rotated.statusCode).toBe(201);
    expect(rotated.json().previous_keys_accepted_until).toBe('2026-11-21T10:00:00.000Z');

    const map = await apiCall(
      p.servers.api,
      op.key,
      'PUT',
      `/api/v1/console/cms-installations/${id}/players/screen-7`,
      {
        structure_id: s.id,
      },
    );
    expect(map.statusCode).toBe(200);
    const mapForeign = await apiCall(
      p.servers.api,
      op.key,
      'PUT',
      `/api/v1/console/cms-installations/${id}/players/screen-8`,
      { structure_id: foreign.id },
    );
    expect(mapForeign.statusCode).toBe(422);

    const details = await apiCall(p.servers.api, op.key, 'GET', `/api/v1/console/cms-installations/${id}`);
    expect(details.json().keys).toHaveLength(2);
    expect(details.json().keys[0].accepted_until).toBe('2026-11-21T10:00:00.000Z');
    expect(details.json().keys[1].accepted_until).toBeNull();
    expect(details.json().players).toEqual([
      expect.objectContaining({ external_id: 'screen-7', structure_id: s.id }),
    ]);

    const unmap = await apiCall(
      p.servers.api,
      op.key,
      'DELETE',
      `/api/v1/console/cms-installations/${id}/players/screen-7`,
    );
    expect(unmap.statusCode).toBe(204);
    const unmapAgain = await apiCall(
      p.servers.api,
      op.key,
      'DELETE',
      `/api/v1/console/cms-installations/${id}/players/screen-7`,
    );
    expect(unmapAgain.statusCode).toBe(404);
  });
});
