import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_LISTED_FIELD_ERRORS } from '../../src/http/problem.js';
import { apiCall, createOrganisation, startTestPlatform, type TestPlatform } from '../support/platform.js';

let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform();
});
afterAll(async () => {
  await p?.close();
});

const problemOf = (res: { headers: Record<string, unknown>; json: () => unknown }) => {
  expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
  return res.json() as {
    type: string;
    title: string;
    status: number;
    code: string;
    detail?: string;
    errors?: unknown[];
  };
};

describe('every error is a problem document with a stable code', () => {
  test('unknown route: 404 not_found on every host', async () => {
    for (const host of ['api', 'agents', 'devices', 'verify'] as const) {
      const res = await p.servers[host].inject({ method: 'GET', url: '/nothing/here' });
      expect(res.statusCode).toBe(404);
      const doc = problemOf(res);
      expect(doc).toMatchObject({ status: 404, code: 'not_found', type: 'urn:ooh:problem:not_found' });
      expect(doc.title.length).toBeGreaterThan(0);
    }
  });

  test('known path with another method: 405 method_not_allowed with Allow', async () => {
    const res = await p.servers.api.inject({ method: 'DELETE', url: '/api/v1/submissions' });
    expect(res.statusCode).toBe(405);
    expect(problemOf(res).code).toBe('method_not_allowed');
    expect(res.headers['allow']).toContain('POST');
  });

  test('a trailing slash is another path: 404, not a 405 naming the methods of the path without it', async () => {
    for (const url of ['/api/v1/submissions/', '/api/v1/creatives/lookup/']) {
      const res = await apiCall(p.servers.api, p.adminKey, 'POST', url, {});
      expect(res.statusCode, url).toBe(404);
      expect(problemOf(res).code).toBe('not_found');
      expect(res.headers['allow']).toBeUndefined();
    }
  });

  test('a path no route serves is answered before its body is read, with or without a credential', async () => {
    const bodies = ['{', '{"a":"\\u0000"}', JSON.stringify({ pad: 'x'.repeat(900_000) })];
    for (const key of [null, p.adminKey]) {
      for (const url of ['/api/v1/submissions/', '/api/v1/creatives/lookup/', '/api/v1/nothing-here']) {
        for (const payload of bodies) {
          const res = await p.servers.api.inject({
            method: 'POST',
            url,
            headers: {
              ...(key ? { authorization: `Bearer ${key}` } : {}),
              'content-type': 'application/json',
            },
            payload,
          });
          // Not 400 invalid_json or 422: the body was never parsed.
          expect(res.statusCode, `${url} ${payload.slice(0, 20)}`).toBe(404);
          expect(problemOf(res).code).toBe('not_found');
          expect(res.headers['connection']).toBe('close');
        }
      }
    }
    // A known path with another method too: 405 before the body.
    const res = await p.servers.api.inject({
      method: 'PUT',
      url: '/api/v1/submissions',
      headers: { 'content-type': 'application/json' },
      payload: '{',
    });
    expect(res.statusCode).toBe(405);
    expect(problemOf(res).code).toBe('method_not_allowed');
  });

  test('no body at all, with no Content-Type, is 400 invalid_json as an empty JSON body is', async () => {
    const advertiser = await createOrganisation(p, 'advertiser', ['write:submissions', 'read:creatives']);
    for (const url of ['/api/v1/submissions', '/api/v1/creatives/lookup']) {
      for (const headers of [{}, { 'content-type': 'application/json' }]) {
        const res = await p.servers.api.inject({
          method: 'POST',
          url,
          headers: { authorization: `Bearer ${advertiser.key}`, ...headers },
        });
        expect(res.statusCode, `${url} ${JSON.stringify(headers)}: ${res.body}`).toBe(400);
        expect(problemOf(res).code).toBe('invalid_json');
      }
    }
  });

  test(`a 422 lists at most ${MAX_LISTED_FIELD_ERRORS} field errors, and says how many there were`, async () => {
    const advertiser = await createOrganisation(p, 'advertiser', ['write:submissions', 'read:creatives']);
    const submission = await apiCall(p.servers.api, advertiser.key, 'POST', '/api/v1/submissions', {
      advertiser_name: 'A',
      structure_ids: Array.from({ length: 50_000 }, (_, i) => i),
    });
    const lookup = await apiCall(p.servers.api, advertiser.key, 'POST', '/api/v1/creatives/lookup', {
      hashes: Array.from({ length: 50_000 }, (_, i) => i),
    });
    for (const res of [submission, lookup]) {
      expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
      const doc = problemOf(res);
      expect(doc.code).toBe('validation_failed');
      expect(doc.errors).toHaveLength(MAX_LISTED_FIELD_ERRORS);
      expect(doc.detail).toMatch(new RegExp(`the first ${MAX_LISTED_FIELD_ERRORS} of \\d+ are listed`));
      expect(res.body.length).toBeLessThan(50_000);
    }
  });

  test('non-JSON media type: 415 unsupported_media_type', async () => {
    const res = await p.servers.api.inject({
      method: 'POST',
      url: '/api/v1/console/organisations',
      headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'text/plain' },
      payload: 'hello',
    });
    expect(res.statusCode).toBe(415);
    expect(problemOf(res).code).toBe('unsupported_media_type');
  });

  test('broken JSON: 400 invalid_json, and an empty JSON body too', async () => {
    for (const payload of ['{"advertiser_name":', '']) {
      const res = await p.servers.api.inject({
        method: 'POST',
        url: '/api/v1/console/organisations',
        headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json' },
        payload,
      });
      expect(res.statusCode).toBe(400);
      expect(problemOf(res).code).toBe('invalid_json');
    }
  });

  test('a body over the limit: 413 body_too_large', async () => {
    const res = await p.servers.api.inject({
      method: 'POST',
      url: '/api/v1/console/organisations',
      headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x'.repeat(2_000_000), kind: 'operator' }),
    });
    expect(res.statusCode).toBe(413);
    expect(problemOf(res).code).toBe('body_too_large');
  });

  test('schema errors: 422 validation_failed listing every field at once', async () => {
    const res = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/organisations', {
      kind: 'pirate',
      extra: 1,
    });
    expect(res.statusCode).toBe(422);
    const doc = problemOf(res);
    expect(doc.code).toBe('validation_failed');
    const paths = (doc.errors as { path: string }[]).map((e) => e.path);
    expect(paths).toEqual(expect.arrayContaining(['/name', '/extra']));
  });

  test('a value PostgreSQL cannot store (NUL character, year 0000): 422 validation_failed, not 500', async () => {
    const calls = [
      apiCall(p.servers.api, null, 'POST', '/api/v1/console/session', {
        email: 'a\u0000@b.kz',
        password: 'x',
      }),
      apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/submissions?state=draft%00'),
      p.servers.verify.inject({ method: 'GET', url: '/v1/approvals/APR-2026-000001%00' }),
      apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/events?day=0000-01-01'),
      apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/0000-01-01'),
    ];
    const answers = await Promise.all(calls);
    for (const res of answers) {
      expect(res.statusCode, res.body).toBe(422);
      expect(problemOf(res).code).toBe('validation_failed');
      expect(res.body).not.toMatch(/encoding|UTF8|SELECT/);
    }
    // A NUL character is named by the field that holds it.
    const paths = (res: (typeof answers)[number]) =>
      ((problemOf(res).errors ?? []) as { path: string; code: string }[]).map((e) => e.path);
    expect(paths(answers[0]!)).toEqual(['/email']);
    expect(paths(answers[1]!)).toEqual(['querystring:/state']);
    expect(paths(answers[2]!)).toEqual(['params:/number']);
  });

  test('an internal failure shows neither stack nor SQL', async () => {
    // A uuid-shaped id that PostgreSQL cannot take as uuid would surface an SQL error if it leaked.
    await p.database.db.query('ALTER TABLE organisations RENAME TO organisations_gone');
    try {
      const res = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/organisations');
      expect(res.statusCode).toBe(500);
      const doc = problemOf(res);
      expect(doc.code).toBe('internal_error');
      expect(res.body).not.toMatch(/organisations_gone|relation|SELECT|at .*\.ts/);
    } finally {
      await p.database.db.query('ALTER TABLE organisations_gone RENAME TO organisations');
    }
  });

  test('healthz and readyz answer on each host; responses carry a request id', async () => {
    for (const host of ['api', 'agents', 'devices', 'verify'] as const) {
      const h = await p.servers[host].inject({ method: 'GET', url: '/healthz' });
      expect(h.statusCode).toBe(200);
      expect(h.json()).toEqual({ status: 'ok', host });
      expect(h.headers['x-request-id']).toBeTruthy();
      const r = await p.servers[host].inject({ method: 'GET', url: '/readyz' });
      expect(r.statusCode).toBe(200);
    }
  });
});

describe('the Date header', () => {
  test("every answer of every host tells the platform's clock (players set their clocks by it)", async () => {
    const before = p.clock.now();
    p.clock.set(new Date('2026-03-04T05:06:07Z'));
    try {
      for (const host of ['api', 'agents', 'devices', 'verify'] as const) {
        for (const url of ['/healthz', '/nothing/here']) {
          const res = await p.servers[host].inject({ method: 'GET', url });
          expect(res.headers['date'], `${host} ${url}`).toBe('Wed, 04 Mar 2026 05:06:07 GMT');
        }
      }
    } finally {
      p.clock.set(before);
    }
  });
});
