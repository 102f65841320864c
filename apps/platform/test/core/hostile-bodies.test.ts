import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHostServer, hostileFields } from '../../src/http/server.js';
import { createDraft, organisation, structures } from '../approvals/helpers.js';
import { apiCall, startTestPlatform, type TestPlatform } from '../support/platform.js';

/*
 * Issue "Trust under attack", item 4: "U+0000 in external_refs (create or PATCH) answers 500 ... Refuse NUL in every
 * string at validation, and map every data-exception SQLSTATE that input can cause to 422"; "PATCH ... {"__proto__":
 * {...}} is answered 200 and smuggles unknown fields. Refuse __proto__, constructor, prototype".
 */

let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform();
});
afterAll(async () => {
  await p?.close();
});

const problem = (res: { statusCode: number; headers: Record<string, unknown>; json: () => unknown }) => ({
  ...(res.json() as { code: string; errors?: { path: string; code: string }[] }),
  status: res.statusCode,
  contentType: res.headers['content-type'],
});

describe('bodies no route takes are refused with 422, naming the field', () => {
  test('U+0000 in external_refs, on create and on PATCH', async () => {
    const agency = await organisation(p, 'agency');
    const operator = await organisation(p, 'operator');
    const [structure] = await structures(p, operator.id, 1);
    const created = await apiCall(p.servers.api, agency.key, 'POST', '/api/v1/submissions', {
      advertiser_name: 'Acme',
      period_from: '2026-12-01',
      period_to: '2026-12-31',
      structure_ids: [structure!.id],
      channel: 'programmatic',
      external_refs: { crid: 'cr\u0000id' },
    });
    expect(problem(created)).toMatchObject({
      status: 422,
      contentType: expect.stringMatching(/^application\/problem\+json/),
      code: 'validation_failed',
      errors: [{ path: '/external_refs/crid', code: 'format' }],
    });
    const draft = await createDraft(p, agency.key, { structure_ids: [structure!.id] });
    const patched = await apiCall(p.servers.api, agency.key, 'PATCH', `/api/v1/submissions/${draft.id}`, {
      channel: 'programmatic',
      external_refs: { dsp: 'd\u0000' },
    });
    expect(problem(patched)).toMatchObject({
      status: 422,
      code: 'validation_failed',
      errors: [{ path: '/external_refs/dsp', code: 'format' }],
    });
  });

  test('__proto__, constructor and prototype keys, anywhere; nothing of them is kept', async () => {
    const agency = await organisation(p, 'agency');
    const operator = await organisation(p, 'operator');
    const [structure] = await structures(p, operator.id, 1);
    const draft = await createDraft(p, agency.key, { structure_ids: [structure!.id] });
    // JSON.parse makes "__proto__" an own key; the body is sent as text so that it stays one.
    const smuggle = await p.servers.api.inject({
      method: 'PATCH',
      url: `/api/v1/submissions/${draft.id}`,
      headers: { authorization: `Bearer ${agency.key}`, 'content-type': 'application/json' },
      payload: '{"advertiser_name":"Other","__proto__":{"state":"approved","channel":"programmatic"}}',
    });
    expect(problem(smuggle)).toMatchObject({
      status: 422,
      code: 'validation_failed',
      errors: [{ path: '/__proto__', code: 'not_allowed' }],
    });
    const nested = await p.servers.api.inject({
      method: 'PATCH',
      url: `/api/v1/submissions/${draft.id}`,
      headers: { authorization: `Bearer ${agency.key}`, 'content-type': 'application/json' },
      payload: '{"declared_daily_plays":{"constructor":{"prototype":1}}}',
    });
    expect(problem(nested)).toMatchObject({
      status: 422,
      errors: [{ path: '/declared_daily_plays/constructor', code: 'not_allowed' }],
    });
    const read = await apiCall(p.servers.api, agency.key, 'GET', `/api/v1/submissions/${draft.id}`);
    expect(read.json()).toMatchObject({ advertiser_name: 'Acme LLP', state: 'draft' });
  });

  test('a body nested 100,000 levels deep is one error, not a crash', async () => {
    const res = await p.servers.api.inject({
      method: 'POST',
      url: '/api/v1/console/organisations',
      headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json' },
      payload: `{"name":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
    });
    expect(problem(res)).toMatchObject({
      status: 422,
      code: 'validation_failed',
      errors: [{ path: expect.stringMatching(/^\/name(\/0)+$/), code: 'too_deep' }],
    });
  });

  test('hostileFields names every kind, at most 20', () => {
    expect(hostileFields({ a: ['x\u0000'], 'k\u0000': 1, b: { prototype: 2 } })).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: '/a/0', code: 'format' }),
        expect.objectContaining({ path: '/k\u0000', code: 'format' }),
        expect.objectContaining({ path: '/b/prototype', code: 'not_allowed' }),
      ]),
    );
    expect(hostileFields(Array.from({ length: 100 }, () => '\u0000'))).toHaveLength(20);
    expect(hostileFields({ fine: [1, 'two', { three: null }] })).toEqual([]);
    // Lone surrogates, in a text or a key; a pair (an astral character) is fine.
    const surrogates = hostileFields({ a: 'x\ud800', b: ['\udc00y'], 'k\udbff': 1, ok: 'ȍ😀' });
    expect(surrogates).toHaveLength(3);
    expect(surrogates).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: '/a', code: 'format' }),
        expect.objectContaining({ path: '/b/0', code: 'format' }),
        expect.objectContaining({ path: '/k\udbff', code: 'format' }),
      ]),
    );
  });
});

describe("PostgreSQL's refusals of a value are the client's error", () => {
  test.each([
    ['22P05', 'unsupported Unicode escape sequence'],
    ['22001', 'value too long'],
    ['22003', 'numeric value out of range'],
    ['22P02', 'invalid input syntax'],
    ['54000', 'array size exceeds the maximum'],
  ])('SQLSTATE %s (%s): 422 validation_failed', async (code, message) => {
    const app = createHostServer({ name: 'api', logger: pino({ level: 'silent' }) });
    app.post('/x', async () => {
      throw Object.assign(new Error(message), { code });
    });
    const res = await app.inject({ method: 'POST', url: '/x', payload: { a: 1 } });
    expect(problem(res)).toMatchObject({ status: 422, code: 'validation_failed' });
    await app.close();
  });

  test.each([
    ['42P01', 'relation "secret_table" does not exist'],
    // Class 22 that no value of a caller raises, only our own SQL: a bug, not the caller's input.
    ['22012', 'division by zero secret_table'],
    ['22023', 'invalid parameter value secret_table'],
  ])('any other error (%s) stays 500 internal_error, without its message', async (code, message) => {
    const app = createHostServer({ name: 'api', logger: pino({ level: 'silent' }) });
    app.get('/x', async () => {
      throw Object.assign(new Error(message), { code });
    });
    const res = await app.inject({ method: 'GET', url: '/x' });
    expect(res.statusCode).toBe(500);
    expect(res.body).not.toContain('secret_table');
    await app.close();
  });
});

describe('requests that are not well-formed HTTP get a problem document', () => {
  /** Writes `raw` on a fresh connection to a listening host server and returns everything it answers. */
  async function rawExchange(raw: string): Promise<string> {
    const app = createHostServer({ name: 'api', logger: pino({ level: 'silent' }) });
    app.post('/x', async (request) => ({ got: request.body }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as AddressInfo;
      return await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.write(raw));
        const chunks: Buffer[] = [];
        socket.on('data', (chunk: Buffer) => chunks.push(chunk));
        socket.on('error', reject);
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        setTimeout(() => socket.destroy(), 5000);
      });
    } finally {
      await app.close();
    }
  }

  test('a Content-Length shorter than the body: 400 invalid_json as a problem document, and the connection closes', async () => {
    const body = '{"a":1}GARBAGE /not-http\r\n\r\n';
    const answer = await rawExchange(
      `POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n${body}`,
    );
    // Node's parser reads the rest in the same chunk and refuses the connection before the first answer is
    // written: whatever comes, no 5xx, and the refusal is a problem document, not Fastify's plain JSON.
    expect(answer).not.toMatch(/HTTP\/1\.1 5\d\d/);
    const second = answer.slice(answer.indexOf('HTTP/1.1 400'));
    expect(second).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(second).toMatch(/Content-Type: application\/problem\+json/i);
    expect(second).toMatch(/Connection: close/i);
    const doc = JSON.parse(second.slice(second.indexOf('\r\n\r\n') + 4)) as { code: string; status: number };
    expect(doc).toMatchObject({ code: 'invalid_json', status: 400 });
  });

  test('a malformed header and an oversized one: 400 invalid_json as a problem document', async () => {
    for (const raw of [
      'POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}',
      `GET /x HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    ]) {
      const answer = await rawExchange(raw);
      expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(answer).toMatch(/Content-Type: application\/problem\+json/i);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
        code: 'invalid_json',
      });
    }
  });
});
