import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { CorrectedClock } from '../../src/clock.js';
import { parseConfig } from '../../src/config/config.js';
import { PlayLog } from '../../src/log/play-log.js';
import {
  createHttpClient,
  type HttpClient,
  type HttpClientOptions,
  observeServerDates,
  TransportError,
} from '../../src/net/http-client.js';
import type { SendOutcome } from '../../src/shipping/shipper.js';
import {
  answer,
  createTlsAuthority,
  flood,
  type HostilePlayer,
  type HostileServer,
  hostilePlayer,
  type Respond,
  type ServerIdentity,
  startCountingHttpServer,
  startHostileServer,
  type TlsAuthority,
} from '../helpers/hostile.js';
import { signedRevocations } from '../helpers/media.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import { createShippingFixture, logPlays, type ShippingFixture } from '../helpers/shipping-fixture.js';
import { tempDir } from '../helpers/temp.js';

/*
 * An attacker's audit of the agent's side of the network: whoever holds the network between a player and the platform
 * (a hostile Wi-Fi, a broken or malicious proxy, a DNS answer pointing elsewhere) but no key of the platform's, and a
 * platform that answers what it should not. Each case runs the agent's real transport (undici, TLS verified against
 * the player's server_ca_file) against a real TLS server on 127.0.0.1 that answers raw bytes (helpers/hostile.ts),
 * and the agent's real SQLite log. The revocation list and renewal answers: hostile-platform.test.ts.
 *
 * Failed before the agent was changed: an answer whose counts do not fit the batch (a `received` larger than the
 * batch, items out of place) was taken and its records marked sent; a body dripped a byte at a time never ended the
 * request (undici's body timeout is reset by every byte); Retry-After of years was waited (up to Node's longest timer,
 * 24.8 days), of 0, of a negative number or of a date past not at all (a tight loop); a refused server certificate was
 * logged at every retry and not shown by `agent status`. Guards (right before, kept): no request byte is sent to a
 * server whose certificate is not the platform's; a body beyond the limit is cut there; headers beyond 16 KiB are
 * refused; nothing is decoded (a gzip bomb stays small bytes that do not parse); no redirect is followed; a Date far
 * off moves no clock, and one jump is held.
 */

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** A PopAnswer as the spec has it for a clean batch of `count` records. */
function cleanAnswer(batchSeq: number, count: number): Record<string, unknown> {
  return {
    batch_seq: batchSeq,
    received: count,
    accepted: count,
    duplicates: 0,
    refused: 0,
    flagged: 0,
    duplicate: false,
    items: [],
  };
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

async function cli(args: string[]): Promise<{ code: number; output: string }> {
  let output = '';
  const code = await main(
    args,
    (text) => {
      output += text;
    },
    () => {},
  );
  return { code, output };
}

let pki: TestPki;
let authority: TlsAuthority;
let platformIdentity: ServerIdentity;

beforeAll(async () => {
  [pki, authority] = await Promise.all([createTestPki(), createTlsAuthority('Platform TLS Root')]);
  platformIdentity = await authority.issue();
});

describe('a server whose certificate is not the platform’s', () => {
  let dir: ReturnType<typeof tempDir>;
  let server: HostileServer | null = null;
  let player: HostilePlayer | null = null;
  const identities: Record<string, ServerIdentity> = {};

  beforeAll(async () => {
    const lookalike = await createTlsAuthority('Platform TLS Root');
    identities['another CA'] = await lookalike.issue();
    identities['the right CA, another host name'] = await authority.issue({
      dnsNames: ['platform.example.kz'],
      ipAddresses: ['10.0.0.1'],
    });
    identities['the right CA and host, expired'] = await authority.issue({
      notBefore: new Date(Date.now() - 400 * DAY_MS),
      notAfter: new Date(Date.now() - DAY_MS),
    });
  });
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(async () => {
    await player?.agent.close();
    await server?.close();
    player = null;
    server = null;
    dir.cleanup();
  });

  it.each([
    ['another CA', 'tls_untrusted'],
    ['the right CA, another host name', 'tls_wrong_host'],
    ['the right CA and host, expired', 'tls_expired'],
  ])('%s: no batch and no CSR is sent, the records stay queued, the refusal is logged once and shown by agent status', async (name, kind) => {
    server = await startHostileServer(identities[name]!, (socket) => answer(socket, 503));
    // A certificate with 10 days left: the certificate channel, and a renewal due at once.
    player = await hostilePlayer({
      dir: dir.path,
      pki,
      serverCaPem: authority.rootPem,
      url: server.url,
      daysLeft: 10,
    });
    const { agent, logger } = player;
    logPlays(new PlayLog(agent.db), 3);
    const serial = agent.credentials.certificate!.serialHex;

    const outcomes: SendOutcome[] = [];
    for (let i = 0; i < 3; i++) outcomes.push(await agent.shipper.sendOnce());
    const renewals = [await agent.renewal.check(), await agent.renewal.check()];
    expect(await agent.revocations.refresh()).toBe('unreachable');

    // Nothing of any request reached the server: TLS is refused before the request is written.
    expect(server.requests).toEqual([]);
    expect(server.applicationBytes).toBe(0);
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({ kind: 'retry', reason: expect.stringMatching(`^network: ${kind}`) });
      expect((outcome as { delayMs: number }).delayMs).toBeGreaterThan(0);
    }
    expect(renewals).toEqual([
      { result: 'failed', reason: expect.stringMatching(`^${kind}`) },
      { result: 'failed', reason: expect.stringMatching(`^${kind}`) },
    ]);
    // The records wait, unanswered; the old certificate stays (the CSR is kept to be sent when it can be).
    expect(agent.log.stats().queueDepth).toBe(3);
    expect(agent.batches.pending()).toMatchObject({ batchSeq: 1, eventCount: 3 });
    expect(agent.credentials.certificate!.serialHex).toBe(serial);
    expect(agent.credentials.renewalState?.state).toBe('requested');

    // Said once for six refused calls: one error from the transport, one warning of the shipper's first retry.
    const mentions = logger.lines.filter((line) => JSON.stringify(line).includes(kind));
    expect(mentions.filter((line) => line.level === 'error')).toEqual([
      expect.objectContaining({ fields: expect.objectContaining({ origin: server.url, kind }) }),
    ]);
    expect(mentions).toHaveLength(2);
    expect(agent.status().network.tls_refused).toEqual([
      expect.objectContaining({ origin: server.url, kind, attempts: 6 }),
    ]);

    // `agent status` (read from disk, as a technician runs it) shows it and exits 1.
    await agent.close();
    const shown = await cli(['status', '--config', player.configPath]);
    expect(shown.code).toBe(1);
    expect(shown.output).toContain(`TLS REFUSED:     ${server.url}`);
    expect(shown.output).toContain(`(${kind})`);

    // The platform's own certificate again: the first answer clears it.
    server.setIdentity(platformIdentity);
    const again = await player.restart();
    expect(await again.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'http 503' });
    expect(server.requests).toHaveLength(1);
    expect(again.status().network.tls_refused).toEqual([]);
    expect(logger.lines.at(-2)).toMatchObject({ level: 'info', fields: { origin: server.url, kind } });
  });
});

describe('answers that are hostile', () => {
  let dir: ReturnType<typeof tempDir>;
  let server: HostileServer;
  let fx: ShippingFixture | null = null;
  let http: HttpClient | null = null;

  beforeEach(async () => {
    dir = tempDir();
    server = await startHostileServer(platformIdentity, (socket) => answer(socket, 503));
  });
  afterEach(async () => {
    await http?.close();
    await fx?.close();
    await server.close();
    http = null;
    fx = null;
    dir.cleanup();
  });

  /** The agent's shipper on the signed channel to the hostile server, over the agent's real transport. */
  function shipper(options: HttpClientOptions = {}): ShippingFixture {
    http = createHttpClient({ serverCaPem: authority.rootPem, ...options });
    fx = createShippingFixture({ dir: dir.path, agentsUrl: server.url, overrides: { http } });
    return fx;
  }

  async function transportError(call: Promise<unknown>): Promise<TransportError> {
    const error = await call.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TransportError);
    return error as TransportError;
  }

  function use(respond: Respond): void {
    server.respond = respond;
  }

  it('cuts a body beyond the limit as it passes the limit, never reading it whole, and retries later', async () => {
    let written: Promise<number> = Promise.resolve(0);
    use((socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n');
      written = flood(socket, Buffer.alloc(64 * 1024, 0x20), 1024 * 1024 * 1024);
    });
    const { shipper: s, log } = shipper();
    logPlays(log, 2);
    const outcome = await s.sendOnce();
    expect(outcome).toMatchObject({
      kind: 'retry',
      reason: expect.stringMatching(/^network: response_too_large/),
    });
    expect((outcome as { delayMs: number }).delayMs).toBeGreaterThan(0);
    // Sent up to the agent's limit (16 MiB) and what the sockets' buffers held when it stopped reading: never the GiB.
    expect(await written).toBeLessThan(64 * 1024 * 1024);
    expect(log.stats().queueDepth).toBe(2);
  });

  it('refuses a Content-Length beyond the limit before reading any of the body', async () => {
    use((socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10737418240\r\n\r\n{"batch_seq":');
    });
    shipper({ deadlineMs: 30_000 });
    const error = await transportError(http!.get(`${server.url}/v1/revocations.json`));
    expect(error.code).toBe('response_too_large');
  });

  it('gives up on an answer that drips a byte at a time, in bounded time, and retries later', async () => {
    // A byte every 200 ms: never silent for the 1 s timeout, so only the deadline of the whole exchange ends it.
    use((socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n');
      const timer = setInterval(() => (socket.destroyed ? clearInterval(timer) : socket.write(' ')), 200);
      socket.on('close', () => clearInterval(timer));
    });
    const { shipper: s, log } = shipper({ timeoutMs: 1000, deadlineMs: 2500 });
    logPlays(log, 1);
    const started = performance.now();
    const outcome = await s.sendOnce();
    expect(performance.now() - started).toBeLessThan(20_000);
    expect(outcome).toMatchObject({ kind: 'retry', reason: expect.stringMatching(/^network: timeout/) });
    expect((outcome as { delayMs: number }).delayMs).toBeGreaterThan(0);
    expect(log.stats().queueDepth).toBe(1);
  });

  it('gives up on headers that drip, and on an answer that never starts', async () => {
    use((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nx-drip: ');
      const timer = setInterval(() => (socket.destroyed ? clearInterval(timer) : socket.write('a')), 200);
      socket.on('close', () => clearInterval(timer));
    });
    shipper({ timeoutMs: 1000, deadlineMs: 2500 });
    expect((await transportError(http!.get(`${server.url}/v1/revocations.json`))).code).toBe('timeout');
    use(() => {});
    expect((await transportError(http!.get(`${server.url}/v1/revocations.json`))).code).toBe('timeout');
  });

  it('refuses headers beyond 16 KiB (and endless ones) without waiting for their end', async () => {
    let written: Promise<number> = Promise.resolve(0);
    use((socket) => {
      socket.write('HTTP/1.1 200 OK\r\n');
      written = flood(socket, Buffer.from(`x-junk: ${'a'.repeat(1000)}\r\n`), 256 * 1024 * 1024);
    });
    const { shipper: s, log } = shipper({ deadlineMs: 30_000 });
    logPlays(log, 1);
    const outcome = await s.sendOnce();
    expect(outcome).toMatchObject({
      kind: 'retry',
      reason: expect.stringMatching(/^network: response_too_large/),
    });
    expect(await written).toBeLessThan(64 * 1024 * 1024);
    expect(log.stats().queueDepth).toBe(1);
  });

  it('decodes nothing: a gzip bomb stays its few compressed bytes, not an answer', async () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20));
    use((socket) =>
      answer(socket, 200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }, bomb),
    );
    const { shipper: s, log } = shipper();
    logPlays(log, 1);
    expect(await s.sendOnce()).toMatchObject({ kind: 'retry', reason: 'answer_invalid' });
    expect(log.stats().queueDepth).toBe(1);
    // The agent asks for no encoding and undoes none.
    expect(server.requests[0]!.headers['accept-encoding']).toBeUndefined();
    const raw = await http!.get(`${server.url}/v1/revocations.json`);
    expect(raw.body.length).toBe(bomb.length);
  });

  it('never takes records on a 200 whose JSON is not the spec’s answer to the batch, and backs off each time', async () => {
    const good = cleanAnswer(1, 2);
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    const bodies: [string, string][] = [
      ['truncated', JSON.stringify(good).slice(0, 40)],
      ['null', 'null'],
      ['an array', JSON.stringify([good])],
      ['a string', JSON.stringify(JSON.stringify(good))],
      ['empty object', '{}'],
      ['missing items', JSON.stringify({ ...good, items: undefined })],
      ['batch_seq as a string', JSON.stringify({ ...good, batch_seq: '1' })],
      ['a negative count', JSON.stringify({ ...good, refused: -1, accepted: 3 })],
      ['a fraction', JSON.stringify({ ...good, accepted: 1.5, refused: 0.5 })],
      ['fields only under __proto__', `{"__proto__": ${JSON.stringify(good)}}`],
      [
        'deep nesting',
        `{"batch_seq":1,"received":2,"accepted":2,"duplicates":0,"refused":0,"flagged":0,"duplicate":false,"items":${deep}}`,
      ],
      ['another batch', JSON.stringify(cleanAnswer(2, 2))],
      ['counted larger than the batch', JSON.stringify(cleanAnswer(1, 1000))],
      ['fewer received than sent', JSON.stringify(cleanAnswer(1, 1))],
      ['accepted beyond received', JSON.stringify({ ...good, accepted: 5 })],
      ['counts that do not add up', JSON.stringify({ ...good, accepted: 1 })],
      ['more flagged than accepted', JSON.stringify({ ...good, flagged: 3, items: [] })],
      [
        'an item beyond the batch',
        JSON.stringify({ ...good, accepted: 1, refused: 1, items: [{ index: 7, status: 'refused' }] }),
      ],
      ['a refused record not listed', JSON.stringify({ ...good, accepted: 1, refused: 1, items: [] })],
      [
        'one record listed twice',
        JSON.stringify({
          ...good,
          accepted: 0,
          refused: 2,
          items: [
            { index: 0, status: 'refused' },
            { index: 0, status: 'refused' },
          ],
        }),
      ],
    ];
    let next = 0;
    use((socket) => answer(socket, 200, { 'content-type': 'application/json' }, bodies[next++]![1]));
    const { shipper: s, log, batches } = shipper();
    logPlays(log, 2);
    const delays: number[] = [];
    for (const [name] of bodies) {
      const outcome = await s.sendOnce();
      expect({ name, outcome }).toEqual({
        name,
        outcome: expect.objectContaining({ kind: 'retry', reason: 'answer_invalid' }),
      });
      delays.push((outcome as { delayMs: number }).delayMs);
    }
    // Never taken, never a tight loop: every wait longer than the one before, up to the cap.
    expect(log.stats().queueDepth).toBe(2);
    expect(batches.pending()).toMatchObject({ batchSeq: 1, failures: bodies.length });
    expect(delays[0]).toBeGreaterThan(0);
    for (let i = 1; i < delays.length; i++) expect(delays[i]).toBeGreaterThanOrEqual(delays[i - 1]!);
    expect(Math.max(...delays)).toBeLessThanOrEqual(60_000);
    // The same bytes every time.
    expect(new Set(server.requests.map((r) => sha256(r.body))).size).toBe(1);

    // The spec's answer, with an extra member named __proto__: taken, and it sets no prototype.
    use((socket) =>
      answer(socket, 200, {}, `{"__proto__":{"polluted":true},${JSON.stringify(good).slice(1)}`),
    );
    expect(await s.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 1 });
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
    expect(log.stats().queueDepth).toBe(0);
  });

  it.each([
    301, 302, 307, 308,
  ])('follows no %i redirect with the batch, to another host or to http://', async (status) => {
    const elsewhere = await startHostileServer(platformIdentity, (socket) =>
      answer(socket, 200, {}, JSON.stringify(cleanAnswer(1, 1))),
    );
    const plain = await startCountingHttpServer();
    try {
      const { shipper: s, log } = shipper();
      logPlays(log, 1);
      for (const target of [elsewhere.url, plain.url]) {
        use((socket, request) => answer(socket, status, { location: `${target}${request.path}` }));
        expect(await s.sendOnce()).toMatchObject({ kind: 'retry', reason: `http ${status}` });
      }
      expect(elsewhere.requests).toEqual([]);
      expect(plain.requests).toEqual([]);
      expect(log.stats().queueDepth).toBe(1);
    } finally {
      await elsewhere.close();
      await plain.close();
    }
  });

  it('bounds a hostile Retry-After by its own backoff and cap: never years, never at once', async () => {
    const values = [
      '99999999999',
      '-5',
      'Fri, 31 Dec 9999 23:59:59 GMT',
      'soon',
      '0',
      '1e9',
      '3.5',
      '',
      new Date(Date.now() - 3600_000).toUTCString(),
      '0',
      '0',
    ];
    let next = 0;
    use((socket) => answer(socket, 429, { 'retry-after': values[next++]! }, '{"code":"rate_limited"}'));
    const { shipper: s, log } = shipper();
    logPlays(log, 1);
    const delays: number[] = [];
    for (const value of values) {
      const outcome = await s.sendOnce();
      expect({ value, outcome }).toEqual({
        value,
        outcome: expect.objectContaining({ kind: 'retry', reason: 'rate_limited' }),
      });
      delays.push((outcome as { delayMs: number }).delayMs);
    }
    // The fixture's backoff: 1 s base, 60 s cap.
    for (const delay of delays) {
      expect(delay).toBeGreaterThan(0);
      expect(delay).toBeLessThanOrEqual(60_000);
    }
    expect(delays[0]).toBe(60_000);
    // Answered 429 again and again: the waits grow like any backoff.
    for (let i = 1; i < delays.length; i++) {
      if (
        values[i] !== '99999999999' &&
        values[i] !== 'Fri, 31 Dec 9999 23:59:59 GMT' &&
        values[i] !== '1e9'
      ) {
        expect(delays[i]).toBeGreaterThanOrEqual(Math.min(60_000, 750 * 2 ** (i - 1)) * 0.66);
      }
    }
    expect(log.stats().queueDepth).toBe(1);
  });

  it('waits the platform’s own Retry-After as given', async () => {
    use((socket) => answer(socket, 429, { 'retry-after': '7' }, '{"code":"rate_limited"}'));
    const { shipper: s, log } = shipper();
    logPlays(log, 1);
    expect(await s.sendOnce()).toMatchObject({ kind: 'retry', reason: 'rate_limited', delayMs: 7000 });
  });
});

describe('a Date header far off, or one jump, on the answers', () => {
  let dir: ReturnType<typeof tempDir>;
  let server: HostileServer;
  let player: HostilePlayer | null = null;
  let dates: (() => Date)[] = [];

  beforeEach(async () => {
    dir = tempDir();
    dates = [];
    server = await startHostileServer(platformIdentity, (socket, request) => {
      const date = (dates.shift() ?? (() => new Date()))().toUTCString();
      if (request.path === '/v1/revocations.json') answer(socket, 404, { date });
      else if (request.path === '/d/v1/renew') answer(socket, 409, { date }, '{"code":"renewal_refused"}');
      else answer(socket, 503, { date }, '{"code":"service_unavailable"}');
    });
  });
  afterEach(async () => {
    await player?.agent.close();
    await server.close();
    player = null;
    dir.cleanup();
  });

  it.each([
    ['ten years ahead', 3650 * DAY_MS],
    ['ten years behind', -3650 * DAY_MS],
    ['31 days ahead (into the renewal window)', 31 * DAY_MS],
    ['two days behind', -2 * DAY_MS],
  ])('%s on every answer moves neither the clock, the play log nor the renewal', async (_name, skewMs) => {
    dates = Array.from({ length: 20 }, () => () => new Date(Date.now() + skewMs));
    player = await hostilePlayer({
      dir: dir.path,
      pki,
      serverCaPem: authority.rootPem,
      url: server.url,
      daysLeft: 45,
    });
    const { agent } = player;
    logPlays(new PlayLog(agent.db), 1);
    await agent.revocations.refresh();
    for (let i = 0; i < 3; i++) await agent.shipper.sendOnce();
    expect(await agent.renewal.check()).toMatchObject({ result: 'not_due' });
    expect(agent.clock.offset).toBe(0);
    expect(agent.clock.heldOffset).toBeNull();
    expect(Math.abs(agent.clock.now().getTime() - Date.now())).toBeLessThan(5000);
    // What the player stamps now is the true time.
    const record = agent.log.appendStatus({
      kind: 'tamper',
      at: agent.clock.now(),
      detail: { state: 'open' },
    });
    expect(Math.abs(Date.parse((record.record as { at: string }).at) - Date.now())).toBeLessThan(5000);
    expect(server.requests.some((r) => r.path === '/d/v1/renew')).toBe(false);
  });

  it('holds one answer’s jump of the clock once synced: the play log and the renewal are not moved by it', async () => {
    // 30.5 days left: a clock moved 20 hours ahead would find the renewal due.
    player = await hostilePlayer({
      dir: dir.path,
      pki,
      serverCaPem: authority.rootPem,
      url: server.url,
      daysLeft: 30.5,
    });
    const { agent } = player;
    // Batch answers (POSTs: never a cache's copy, see mayBeCachedCopy), each a 503 with its Date.
    logPlays(new PlayLog(agent.db), 1);
    dates = [() => new Date(), () => new Date(Date.now() + 20 * HOUR_MS), () => new Date()];
    await agent.shipper.sendOnce();
    expect(agent.clock.synced).toBe(true);
    await agent.shipper.sendOnce();
    expect(agent.clock.heldOffset).toBeGreaterThan(19 * HOUR_MS);
    expect(Math.abs(agent.clock.offset)).toBeLessThan(2000);
    const record = agent.log.appendStatus({
      kind: 'tamper',
      at: agent.clock.now(),
      detail: { state: 'open' },
    });
    expect(Math.abs(Date.parse((record.record as { at: string }).at) - Date.now())).toBeLessThan(5000);
    expect(await agent.renewal.check()).toMatchObject({ result: 'not_due' });
    // The next answer agrees with the clock as it is: the jump is dropped.
    await agent.shipper.sendOnce();
    expect(agent.clock.heldOffset).toBeNull();
    expect(server.requests.some((r) => r.path === '/d/v1/renew')).toBe(false);
  });

  it('a Date header that is no date changes nothing', async () => {
    const clock = new CorrectedClock({ now: () => new Date() }, DAY_MS);
    const http = observeServerDates(createHttpClient({ serverCaPem: authority.rootPem }), clock);
    server.respond = (socket) => answer(socket, 503, { date: 'Tue, 99 Foo 20x6 25:61:61 GMT' });
    await http.get(`${server.url}/v1/revocations.json`);
    server.respond = (socket) => answer(socket, 503, { date: '-1e309' });
    await http.get(`${server.url}/v1/revocations.json`);
    await http.close();
    expect(clock.synced).toBe(false);
    expect(clock.offset).toBe(0);
  });
});

describe('an answer a cache on the way kept', () => {
  // The verify host serves the revocation list `public, max-age=60`: a proxy or CDN in front of it may hand back a
  // copy made a minute ago, with the platform's Date of then. Its age is the copy's, not the clock's error.
  const MINUTE_MS = 60_000;
  let dir: ReturnType<typeof tempDir>;
  let server: HostileServer;
  let player: HostilePlayer | null = null;
  let list: string;
  /** The copy's Age header (RFC 9111 §5.1); nginx's proxy_cache sends none. */
  let age: string | undefined;

  beforeEach(async () => {
    dir = tempDir();
    age = '60';
    list = JSON.stringify(await signedRevocations(pki, 1, []));
    server = await startHostileServer(platformIdentity, (socket, request) => {
      const now = Date.now();
      if (request.path === '/v1/revocations.json') {
        const copy = {
          date: new Date(now - MINUTE_MS).toUTCString(),
          'cache-control': 'public, max-age=60',
          'content-type': 'application/json',
        };
        answer(socket, 200, age === undefined ? copy : { ...copy, age }, list);
      } else {
        answer(socket, 503, { date: new Date(now).toUTCString() }, '{"code":"service_unavailable"}');
      }
    });
  });
  afterEach(async () => {
    await player?.agent.close();
    await server.close();
    player = null;
    dir.cleanup();
  });

  it('sets no clock by a revocation list a minute old; the first batch answer sets it, and a copy then holds no jump', async () => {
    player = await hostilePlayer({
      dir: dir.path,
      pki,
      serverCaPem: authority.rootPem,
      url: server.url,
      daysLeft: 45,
    });
    const { agent } = player;
    // The first answer of the run, from the cache: the list is as good as ever, its Date is a minute old.
    expect(await agent.revocations.refresh()).toBe('updated');
    expect(agent.clock.synced).toBe(false);
    expect(agent.clock.offset).toBe(0);
    // The same copy from a cache that does not say its age.
    age = undefined;
    expect(await agent.revocations.refresh()).toBe('unchanged');
    expect(agent.clock.synced).toBe(false);
    expect(agent.clock.offset).toBe(0);
    expect(Math.abs(agent.clock.now().getTime() - Date.now())).toBeLessThan(2000);

    // A batch's answer (a POST: no cache answers it) is the platform's time now.
    logPlays(new PlayLog(agent.db), 1);
    await agent.shipper.sendOnce();
    expect(agent.clock.synced).toBe(true);
    expect(Math.abs(agent.clock.offset)).toBeLessThan(2000);

    // Synced, a copy a minute old is not even a jump to hold for confirmation.
    age = '60';
    expect(await agent.revocations.refresh()).toBe('unchanged');
    expect(agent.clock.heldOffset).toBeNull();
    expect(Math.abs(agent.clock.offset)).toBeLessThan(2000);
  });

  it('takes no Date from a GET a cache may have stored, with or without Age; a POST’s answer or a no-store GET it takes', async () => {
    const stamps: { offset: number }[] = [];
    const clock = {
      baseNow: () => new Date(),
      observeServerDate: (date: string | undefined) => {
        stamps.push({ offset: Date.parse(date ?? '') - Date.now() });
        return true;
      },
    };
    const answers: Record<string, string>[] = [];
    server.respond = (socket) =>
      answer(socket, 200, { date: new Date(Date.now() - MINUTE_MS).toUTCString(), ...answers.shift() }, '{}');
    const http = observeServerDates(createHttpClient({ serverCaPem: authority.rootPem }), clock);
    const get = async (headers: Record<string, string>) => {
      answers.push(headers);
      await http.get(`${server.url}/v1/revocations.json`);
    };
    const post = async (headers: Record<string, string>) => {
      answers.push(headers);
      await http.post(`${server.url}/d/v1/telemetry`, new Uint8Array(0), {}, undefined);
    };
    try {
      await get({ age: '60', 'cache-control': 'public, max-age=60' });
      await get({ 'cache-control': 'public, max-age=60' }); // nginx proxy_cache: no Age
      await get({}); // heuristically cacheable (RFC 9111 §4.2.2)
      await get({ 'cache-control': 'private="set-cookie", max-age=60' }); // only a field is private
      await get({ 'cache-control': 'no-store', age: '5' }); // a cache said it held it all the same
      await post({ age: '60' });
      expect(stamps).toEqual([]);
      await get({ 'cache-control': 'No-Store' });
      await get({ 'cache-control': 'max-age=0, private' });
      await post({});
      await post({ age: '0', 'cache-control': 'public, max-age=60' });
      expect(stamps).toHaveLength(4);
    } finally {
      await http.close();
    }
  });
});

describe('a platform URL in plain http', () => {
  it('is named among the config warnings unless it is this machine', () => {
    const config = (agents: string) =>
      parseConfig(
        {
          device_id: null,
          structure: 'ALM-0001',
          platform: {
            agents_url: agents,
            devices_url: 'https://devices.example.kz',
            verify_url: 'https://verify.example.kz',
          },
          authority_root_file: 'authority-root.pem',
        },
        '/tmp',
      );
    expect(config('http://agents.example.kz').warnings).toEqual([
      expect.stringMatching(/^platform\.agents_url is plain http to agents\.example\.kz: /),
    ]);
    for (const loopback of [
      'http://127.0.0.1:8081',
      'http://localhost:8081',
      'http://[::1]:8081',
      'https://agents.example.kz',
    ]) {
      expect(config(loopback).warnings).toEqual([]);
    }
  });
});
