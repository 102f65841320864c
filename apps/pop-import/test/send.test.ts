import { gunzipSync } from 'node:zlib';
import { es256Verify, generateEs256KeyPair } from '@ooh/crypto';
import { LIMITS } from '@ooh/protocol';
import { describe, expect, test } from 'vitest';
import { retryAfterMs, type SendOptions, sendBatch, specPacing, wireOf } from '../src/send.js';

const SOURCE = '6a0f4f5e-2c1b-4d7a-9b3e-0c5d8e9f1a2b';
const { publicKey, privateKey } = generateEs256KeyPair();
const BODY = Buffer.from(
  JSON.stringify({ schema: 'service.pop/1', source_id: SOURCE, batch_seq: 4, prev_sha256: '', records: [] }),
);
const BATCH = { batchSeq: 4, body: BODY, records: 0 };
const ANSWER = {
  batch_seq: 4,
  received: 0,
  accepted: 0,
  duplicates: 0,
  refused: 0,
  flagged: 0,
  duplicate: false,
  items: [],
};

interface Seen {
  url: string;
  headers: Record<string, string>;
  wire: Buffer;
}

/** A network that answers from a script, a clock that sleeps by moving. */
function harness(replies: (Response | Error)[]) {
  const seen: Seen[] = [];
  const sleeps: number[] = [];
  let t = 1_000_000;
  const fetchImpl = (async (url: string, init: RequestInit) => {
    seen.push({
      url,
      headers: Object.fromEntries(Object.entries(init.headers as Record<string, string>)),
      wire: Buffer.from(init.body as Uint8Array),
    });
    const next = replies.shift();
    if (!next) throw new Error('no more replies scripted');
    if (next instanceof Error) throw next;
    return next;
  }) as unknown as typeof fetch;
  const options: SendOptions = {
    apiUrl: 'https://api.example.kz/',
    apiKey: 'key-123',
    sourceId: SOURCE,
    privateKey,
    fetch: fetchImpl,
    now: () => t,
    sleep: async (ms) => {
      sleeps.push(ms);
      t += ms;
    },
    random: () => 0.5,
  };
  return { seen, sleeps, options };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
const problem = (status: number, code: string, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify({ type: 'x', title: 't', status, code, detail: `why ${code}` }), {
    status,
    headers: { 'content-type': 'application/problem+json', ...headers },
  });

describe('sending one batch (spec "CMS batch for many players")', () => {
  test('signed over the body before compression, gzipped, with the key and the installation', async () => {
    const { seen, options } = harness([json(200, ANSWER)]);
    const result = await sendBatch(BATCH, options);
    expect(result).toEqual({ kind: 'answered', answer: ANSWER });
    const request = seen[0]!;
    expect(request.url).toBe('https://api.example.kz/api/v1/pop/batches');
    expect(request.headers['authorization']).toBe('Bearer key-123');
    expect(request.headers['x-service-source']).toBe(SOURCE);
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(request.wire).equals(BODY)).toBe(true);
    // spec: "ES256 over the body after decompression, raw r||s, base64url, no padding".
    expect(request.headers['x-service-signature']).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(es256Verify(publicKey, BODY, request.headers['x-service-signature']!)).toBe(true);
  });

  test('429 waits Retry-After and sends the same bytes again', async () => {
    const { seen, sleeps, options } = harness([
      problem(429, 'rate_limited', { 'retry-after': '3' }),
      json(200, ANSWER),
    ]);
    expect((await sendBatch(BATCH, options)).kind).toBe('answered');
    expect(sleeps).toEqual([3000]);
    expect(seen).toHaveLength(2);
    expect(gunzipSync(seen[1]!.wire).equals(gunzipSync(seen[0]!.wire))).toBe(true);
  });

  test('5xx, a timeout and a lost connection back off and send the same bytes again', async () => {
    const timeout = new Error('timed out');
    timeout.name = 'TimeoutError';
    const waits: string[] = [];
    const { seen, sleeps, options } = harness([
      problem(503, 'service_unavailable'),
      new Response('bad gateway', { status: 502 }),
      timeout,
      new TypeError('fetch failed'),
      new Response('<html>proxy</html>', { status: 200 }),
      json(200, ANSWER),
    ]);
    options.onWait = (why) => waits.push(why);
    expect((await sendBatch(BATCH, options)).kind).toBe('answered');
    // Equal jitter with random 0.5: three quarters of 1, 2, 4, 8, 16 s.
    expect(sleeps).toEqual([750, 1500, 3000, 6000, 12_000]);
    expect(waits).toEqual([
      'the platform is busy',
      'HTTP 502',
      'no answer in time',
      'no connection (fetch failed)',
      'an answer that is not a batch answer',
    ]);
    const bodies = seen.map((s) => gunzipSync(s.wire).toString('hex'));
    expect(new Set(bodies).size).toBe(1);
  });

  test('a final refusal stops with its code; nothing else is tried', async () => {
    const { seen, options } = harness([problem(409, 'batch_conflict')]);
    expect(await sendBatch(BATCH, options)).toEqual({
      kind: 'stopped',
      status: 409,
      code: 'batch_conflict',
      detail: 'why batch_conflict',
    });
    expect(seen).toHaveLength(1);
    const other = harness([new Response('nope', { status: 401 })]);
    expect(await sendBatch(BATCH, other.options)).toMatchObject({ kind: 'stopped', code: 'http_401' });
  });

  test('an answer for another batch is no answer', async () => {
    const { seen, options } = harness([json(200, { ...ANSWER, batch_seq: 5 }), json(200, ANSWER)]);
    expect((await sendBatch(BATCH, options)).kind).toBe('answered');
    expect(seen).toHaveLength(2);
  });

  test('a batch that keeps failing is given up after the time allowed, for the next run to send', async () => {
    const { options } = harness(Array.from({ length: 50 }, () => problem(503, 'service_unavailable')));
    options.giveUpAfterMs = 60_000;
    const result = await sendBatch(BATCH, options);
    expect(result).toMatchObject({ kind: 'stopped', status: null, code: 'gave_up' });
  });

  test('Retry-After in seconds or as an HTTP date', () => {
    expect(retryAfterMs('7', 0)).toBe(7000);
    expect(retryAfterMs('Fri, 20 Nov 2026 06:00:10 GMT', Date.parse('2026-11-20T06:00:00Z'))).toBe(10_000);
    expect(retryAfterMs('soon', 0)).toBeNull();
    expect(retryAfterMs(null, 0)).toBeNull();
  });
});

describe('the wire', () => {
  test('gzip while the body inflates within the 20:1 rule, uncompressed beyond it', () => {
    const usual = wireOf(BODY);
    expect(usual.gzip).toBe(true);
    // JSON so repetitive that even level 1 gzips it past 20:1 (spec: "a compressed body may not inflate to more
    // than 20 times its size").
    const repetitive = Buffer.from(
      JSON.stringify({ records: Array.from({ length: 5000 }, () => ({ a: 1 })) }),
    );
    const wire = wireOf(repetitive);
    expect(wire.gzip).toBe(false);
    expect(wire.wire.equals(repetitive)).toBe(true);
    for (const { wire: w, gzip } of [usual, wire]) {
      if (gzip) expect(gunzipSync(w).length).toBeLessThanOrEqual(w.length * LIMITS.cmsInflateRatioMax);
    }
  });
});

describe('pacing within the spec CMS rates', () => {
  test('a burst of 10 batches, then 2 a second', async () => {
    let t = 0;
    const sleeps: number[] = [];
    const pacing = specPacing({
      now: () => t,
      sleep: async (ms) => {
        sleeps.push(ms);
        t += ms;
      },
    });
    for (let i = 0; i < 10; i += 1) await pacing.take(100);
    expect(t).toBe(0);
    await pacing.take(100);
    await pacing.take(100);
    expect(sleeps).toEqual([500, 500]);
    expect(t).toBe(1000);
  });

  test('2 000 000 records an hour per organisation', async () => {
    let t = 0;
    const pacing = specPacing({
      now: () => t,
      sleep: async (ms) => {
        t += ms;
      },
    });
    // 1 000 000 records, then 990 000 half an hour later, then 10 000: the hour's 2 000 000 are taken at once.
    await pacing.take(1_000_000);
    t = 30 * 60_000;
    await pacing.take(990_000);
    await pacing.take(10_000);
    expect(t).toBe(30 * 60_000);
    // The next 10 000 wait until the first minute's 1 000 000 leave the window, as the platform counts it: 61
    // minutes after that minute began (a take counts its own minute and the 60 before).
    await pacing.take(10_000);
    expect(t).toBe(61 * 60_000);
    // Then the half hour's 1 000 000 hold the window until their own minute leaves it.
    await pacing.take(990_001);
    expect(t).toBe(91 * 60_000);
  });
});
