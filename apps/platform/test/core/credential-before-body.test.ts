import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Slots } from '../../src/http/inflate.js';
import { createOrganisation, startTestPlatform, type TestPlatform } from '../support/platform.js';

/*
 * Issue "Trust under attack", item 3: "Check the key, its scope and the organisation kind before the body is read
 * (401/403 first), bound how many inflations run at once, and do the same review for every route that reads a large
 * body". Each request below announces a large body and sends none of it: the answer must come anyway, from the
 * headers alone (before, the server waited for the body it meant to read, inflate and parse first).
 */

let p: TestPlatform;
let api = '';
let agents = '';

async function listen(server: TestPlatform['servers']['api']): Promise<string> {
  await server.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  p = await startTestPlatform();
  api = await listen(p.servers.api);
  agents = await listen(p.servers.agents);
});
afterAll(async () => {
  await p?.close();
});

interface Early {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: { code: string };
}

/** Sends the headers of a request announcing `length` bytes, none of them, and waits for the answer (5 s at most). */
function headersOnly(
  base: string,
  path: string,
  length: number,
  headers: Record<string, string>,
): Promise<Early> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    const request = http.request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(length), ...headers },
    });
    const timer = setTimeout(() => {
      request.destroy();
      reject(new Error(`no answer to ${path} before its body was sent`));
    }, 5000);
    request.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        clearTimeout(timer);
        request.destroy();
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as { code: string },
        });
      });
    });
    request.flushHeaders();
  });
}

describe('no body is read for a caller without a credential', () => {
  test('CMS batches: no key, an unknown key, a key without write:plays, an agency key: answered from the headers', async () => {
    const cms = (headers: Record<string, string>) =>
      headersOnly(api, '/api/v1/pop/batches', 3_900_000, { 'content-encoding': 'gzip', ...headers });
    const none = await cms({});
    expect(none).toMatchObject({ status: 401, body: { code: 'unauthenticated' } });
    expect(none.headers['content-type']).toMatch(/^application\/problem\+json/);
    // The rest of the body is not wanted: the connection is closed after the answer.
    expect(none.headers.connection).toBe('close');
    expect(await cms({ authorization: 'Bearer ooh_not-a-key-that-exists-0000000' })).toMatchObject({
      status: 401,
      body: { code: 'invalid_api_key' },
    });
    const reader = await createOrganisation(p, 'operator', ['read:creatives']);
    expect(await cms({ authorization: `Bearer ${reader.key}` })).toMatchObject({
      status: 403,
      body: { code: 'key_scope_denied' },
    });
    const agency = await createOrganisation(p, 'agency', ['write:plays']);
    expect(await cms({ authorization: `Bearer ${agency.key}` })).toMatchObject({
      status: 403,
      body: { code: 'forbidden' },
    });
  });

  test('every other authenticated route of the api host, media upload included', async () => {
    expect(await headersOnly(api, '/api/v1/submissions', 900_000, {})).toMatchObject({
      status: 401,
      body: { code: 'unauthenticated' },
    });
    const upload = await new Promise<number>((resolve, reject) => {
      const request = http.request(
        new URL('/api/v1/submissions/00000000-0000-4000-8000-000000000000/media', api),
        {
          method: 'PUT',
          headers: { 'content-type': 'video/mp4', 'content-length': '150000000' },
        },
      );
      request.on('error', reject);
      request.on('response', (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
        request.destroy();
      });
      request.flushHeaders();
    });
    expect(upload).toBe(401);
  });

  test("a refusal after the credential, before the body (an upload to a submission not the caller's): the connection closes", async () => {
    const advertiser = await createOrganisation(p, 'advertiser', ['write:submissions']);
    const answer = await new Promise<{ status: number; connection: string | undefined }>(
      (resolve, reject) => {
        const request = http.request(
          new URL('/api/v1/submissions/00000000-0000-4000-8000-000000000000/media', api),
          {
            method: 'PUT',
            headers: {
              authorization: `Bearer ${advertiser.key}`,
              'content-type': 'video/mp4',
              'content-length': '150000000',
            },
          },
        );
        request.on('error', reject);
        request.on('response', (response) => {
          response.resume();
          resolve({ status: response.statusCode ?? 0, connection: response.headers.connection });
          request.destroy();
        });
        request.flushHeaders();
      },
    );
    // Not 150 MB read and thrown away: the answer says the connection ends with it.
    expect(answer).toEqual({ status: 404, connection: 'close' });
  });

  test('agent telemetry: a request without X-Service-Signature is refused before its body', async () => {
    const answer = await headersOnly(agents, '/s/v1/telemetry', 900_000, {});
    expect(answer).toMatchObject({ status: 401, body: { code: 'bad_signature' } });
    expect(answer.headers.connection).toBe('close');
  });
});

describe('inflation slots', () => {
  test('two at once, eight waiting, then 503 service_unavailable with Retry-After; a release lets the next in', async () => {
    // Ten places among three callers, none over its share of four.
    const slots = new Slots(2, 8, 4);
    const callers = ['a', 'a', 'b', 'b', 'c', 'c', 'c', 'c'];
    const held = [await slots.acquire('a'), await slots.acquire('b')];
    let started = 0;
    const waiting = callers.map((caller) =>
      slots.acquire(caller).then((release) => {
        started += 1;
        return release;
      }),
    );
    await expect(slots.acquire('d')).rejects.toMatchObject({
      code: 'service_unavailable',
      headers: { 'retry-after': '1' },
    });
    expect(started).toBe(0);
    held[0]!();
    held[0]!(); // releasing twice frees one slot only
    const first = await waiting[0]!;
    expect(started).toBe(1);
    first();
    held[1]!();
    for (const next of waiting.slice(1)) (await next)();
    expect(started).toBe(8);
    // All free again: two at once without waiting, for one caller alone too.
    const again = [await slots.acquire('a'), await slots.acquire('a')];
    for (const release of again) release();
    expect(slots.placesOf('a')).toBe(0);
  });

  test('one caller holds at most its share of the places: beyond it 429 rate_limited, the others still get in', async () => {
    const slots = new Slots(2, 8, 4);
    const flood = [await slots.acquire('flooder'), await slots.acquire('flooder')];
    const queued = [slots.acquire('flooder'), slots.acquire('flooder')];
    await expect(slots.acquire('flooder')).rejects.toMatchObject({
      code: 'rate_limited',
      headers: { 'retry-after': '1' },
    });
    // Six places are left to the others, not to the flooder.
    const others = Array.from({ length: 6 }, (_, i) => slots.acquire(`other-${i % 2}`));
    await expect(slots.acquire('third')).rejects.toMatchObject({ code: 'service_unavailable' });
    expect(slots.placesOf('flooder')).toBe(4);
    // Freed slots go to whoever inflates the fewest, not to the flooder's older entries.
    const order: string[] = [];
    const track = (name: string, p: Promise<() => void>) =>
      p.then((release) => {
        order.push(name);
        return release;
      });
    const tracked = [
      ...queued.map((p, i) => track(`flooder-${i}`, p)),
      ...others.map((p, i) => track(`other-${i % 2}`, p)),
    ];
    flood[0]!();
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(['other-0']);
    flood[1]!();
    await new Promise((resolve) => setImmediate(resolve));
    // Now the flooder inflates none, as other-1: the older of their entries, the flooder's, goes.
    expect(order).toEqual(['other-0', 'flooder-0']);
    // Everyone is served in the end.
    for (const next of tracked) (await next)();
    expect(order).toHaveLength(8);
    expect(slots.placesOf('flooder')).toBe(0);
  });

  test('a share outside 1 to the number of places is refused', () => {
    expect(() => new Slots(2, 8, 0)).toThrow(RangeError);
    expect(() => new Slots(2, 8, 11)).toThrow(RangeError);
  });
});
