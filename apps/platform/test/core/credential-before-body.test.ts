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
    // One caller alone may take every place: nothing is held back for callers who are not there.
    const slots = new Slots(2, 8);
    const held = [await slots.acquire('a'), await slots.acquire('a')];
    let started = 0;
    const waiting = Array.from({ length: 8 }, () =>
      slots.acquire('a').then((release) => {
        started += 1;
        return release;
      }),
    );
    await expect(slots.acquire('a')).rejects.toMatchObject({
      code: 'service_unavailable',
      headers: { 'retry-after': '1' },
    });
    expect(slots.placesOf('a')).toBe(10);
    expect(started).toBe(0);
    held[0]!();
    held[0]!(); // releasing twice frees one slot only
    const first = await waiting[0]!;
    expect(started).toBe(1);
    first();
    held[1]!();
    for (const next of waiting.slice(1)) (await next)();
    expect(started).toBe(8);
    expect(slots.placesOf('a')).toBe(0);
    // Ten callers holding one place each: an eleventh finds no one to make room, 503.
    const ten = await Promise.all(Array.from({ length: 2 }, (_, i) => slots.acquire(`c${i}`)));
    const queued = Array.from({ length: 8 }, (_, i) => slots.acquire(`c${i + 2}`));
    await expect(slots.acquire('c10')).rejects.toMatchObject({ code: 'service_unavailable' });
    for (const release of ten) release();
    for (const next of queued) (await next)();
  });

  test('a flood takes every free place, and gives its newest waiting one back, 429 rate_limited, to another caller', async () => {
    const slots = new Slots(2, 8);
    const flood = [await slots.acquire('flooder'), await slots.acquire('flooder')];
    const outcomes: string[] = [];
    const queued = Array.from({ length: 8 }, (_, i) =>
      slots.acquire('flooder').then(
        (release) => {
          outcomes.push(`flooder-${i} started`);
          return release;
        },
        (error: { code: string; headers: Record<string, string> }) => {
          outcomes.push(`flooder-${i} ${error.code} ${error.headers['retry-after']}`);
          return null;
        },
      ),
    );
    await expect(slots.acquire('flooder')).rejects.toMatchObject({ code: 'service_unavailable' });
    // Another caller: the flooder's newest waiting body is turned away and the other takes its place.
    const other = slots.acquire('other');
    await new Promise((resolve) => setImmediate(resolve));
    expect(outcomes).toEqual(['flooder-7 rate_limited 1']);
    expect(slots.placesOf('flooder')).toBe(9);
    expect(slots.placesOf('other')).toBe(1);
    // A third: the flooder, still holding the most by two or more, gives up another.
    const third = slots.acquire('third');
    await new Promise((resolve) => setImmediate(resolve));
    expect(outcomes).toEqual(['flooder-7 rate_limited 1', 'flooder-6 rate_limited 1']);
    // A freed slot goes to whoever inflates the fewest, the oldest among equals: the other before the flooder's
    // older bodies; then, the flooder inflating none, its oldest; then the third.
    flood[0]!();
    const otherRelease = await other;
    expect(outcomes).toHaveLength(2);
    flood[1]!();
    await new Promise((resolve) => setImmediate(resolve));
    expect(outcomes.at(-1)).toBe('flooder-0 started');
    otherRelease();
    const thirdRelease = await third;
    expect(outcomes).toHaveLength(3);
    thirdRelease();
    for (const next of queued) (await next)?.();
    expect(outcomes.filter((o) => o.endsWith('started'))).toHaveLength(6);
    expect(slots.placesOf('flooder')).toBe(0);
  });

  test('callers with about equal shares do not push each other out', async () => {
    const slots = new Slots(2, 8);
    const held = [await slots.acquire('a'), await slots.acquire('b')];
    const queued = ['a', 'a', 'a', 'a', 'b', 'b', 'b', 'b'].map((caller) => slots.acquire(caller));
    // a and b hold five each; a sixth from a finds b holding no more than it: 503, nobody turned away.
    await expect(slots.acquire('a')).rejects.toMatchObject({ code: 'service_unavailable' });
    expect([slots.placesOf('a'), slots.placesOf('b')]).toEqual([5, 5]);
    for (const release of held) release();
    for (const next of queued) (await next)();
  });
});
