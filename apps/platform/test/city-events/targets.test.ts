import { createServer, type Server } from 'node:http';
import {
  type AddressInfo,
  createServer as createTcpServer,
  type Socket,
  type Server as TcpServer,
} from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  isPrivateAddress,
  MAX_ANSWER_BYTES,
  postToTarget,
  resolveTarget,
  targetPolicy,
} from '../../src/city-events/targets.js';
import { deliverDueWebhooks } from '../../src/city-events/webhooks.js';
import { apiCall, startTestPlatform, type TestPlatform } from '../support/platform.js';

/*
 * Issue "Trust under attack", item 6: "Webhook targets may be loopback, private or link-local addresses and their
 * answers are read whole into memory and shown to console users: refuse such targets unless an allow-list names
 * them, and read at most a few kB of an answer."
 */

const none = targetPolicy({});

describe('which addresses are private', () => {
  test.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '169.254.169.254',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '64:ff9b::7f00:1',
    '64:ff9b::a00:1',
    '64:ff9b:1::a00:1',
    '::7f00:1',
    '::a00:1',
    '::ffff:0:7f00:1',
    '2002:7f00:1::1',
    '2002:a9fe:a9fe::',
  ])('%s is refused', (address) => {
    expect(isPrivateAddress(address)).toBe(true);
  });

  test.each([
    '8.8.8.8',
    '93.184.216.34',
    '172.32.0.1',
    '2a00:1450:4001::1',
    '::ffff:8.8.8.8',
    '2002:808:808::1',
  ])('%s is public', (address) => {
    expect(isPrivateAddress(address)).toBe(false);
  });
});

describe('targets of URLs, as the URL parser reads them', () => {
  test.each([
    'http://127.0.0.1:8080/x',
    'http://2130706433/',
    'http://0x7f.1/',
    'http://0177.0.0.1/',
    'http://127.1/',
    'http://[::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[::127.0.0.1]/',
    'http://[::ffff:0:127.0.0.1]/',
    'http://[2002:7f00:1::1]/',
    'http://127.0.0.1./',
    'http://017700000001/',
    'http://0.0.0.0:8080/',
    'http://localhost/',
    'http://169.254.169.254/latest/meta-data/',
  ])('%s is refused without an allow-list', async (url) => {
    expect(await resolveTarget(new URL(url), none)).toMatchObject({ ok: false, why: 'private' });
  });

  test('an allow-list names addresses, ranges and host names', async () => {
    const policy = targetPolicy({ WEBHOOK_ALLOWED_TARGETS: '10.1.2.3, 192.168.50.0/24,localhost' });
    expect(await resolveTarget(new URL('http://10.1.2.3/'), policy)).toMatchObject({
      ok: true,
      address: '10.1.2.3',
    });
    expect(await resolveTarget(new URL('http://192.168.50.7/'), policy)).toMatchObject({ ok: true });
    expect(await resolveTarget(new URL('http://192.168.51.7/'), policy)).toMatchObject({ ok: false });
    expect(await resolveTarget(new URL('http://localhost:9/'), policy)).toMatchObject({ ok: true });
    expect(() => targetPolicy({ WEBHOOK_ALLOWED_TARGETS: '10.0.0.0/40' })).toThrow(/WEBHOOK_ALLOWED_TARGETS/);
    expect(() => targetPolicy({ WEBHOOK_ALLOWED_TARGETS: 'a b' })).toThrow(/WEBHOOK_ALLOWED_TARGETS/);
  });

  test('a public address is taken as it is; another scheme is not', async () => {
    expect(await resolveTarget(new URL('https://8.8.8.8/hook'), none)).toEqual({
      ok: true,
      address: '8.8.8.8',
      family: 4,
    });
    expect(await resolveTarget(new URL('ftp://8.8.8.8/'), none)).toMatchObject({ ok: false, why: 'scheme' });
  });
});

describe('registration and delivery', () => {
  let p: TestPlatform;
  let server: Server;
  let receiverUrl: string;
  let hits = 0;
  beforeAll(async () => {
    server = createServer((request, response) => {
      hits += 1;
      request.resume();
      // An answer of a megabyte: a delivery reads a few kB of it.
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end('x'.repeat(1_000_000));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    p = await startTestPlatform({ now: new Date('2026-11-20T12:00:00+05:00') });
  });
  afterAll(async () => {
    await p?.close();
    await new Promise((resolve) => server?.close(resolve));
  });

  const subscribe = (url: string) =>
    apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/webhooks', {
      url,
      types: ['declared_vs_actual'],
    });

  test('a loopback, private or link-local target is refused 422 with the field; a name that does not resolve yet is taken', async () => {
    for (const url of [receiverUrl, 'http://10.0.0.5/x', 'http://169.254.169.254/', 'http://[::1]:8080/']) {
      const res = await subscribe(url);
      expect(res.statusCode, url).toBe(422);
      expect(res.json()).toMatchObject({
        code: 'validation_failed',
        errors: [{ path: '/url', code: 'not_allowed' }],
      });
    }
    expect((await subscribe('https://events.city.invalid/ooh')).statusCode).toBe(201);
  });

  test('a delivery checks the target again: a subscription to loopback written before the rule sends nothing', async () => {
    // As a database made by an earlier version could hold.
    const { rows } = await p.database.db.query<{ id: string }>(
      `INSERT INTO webhook_subscriptions (url, secret, types, created_at)
       VALUES ($1, 'a-secret-of-some-length-0000', '{declared_vs_actual}', $2) RETURNING id`,
      [receiverUrl, p.clock.now()],
    );
    const { rows: events } = await p.database.db.query<{ id: string }>(
      `INSERT INTO city_events (id, type, subject_key, day, payload, body, created_at)
       VALUES (gen_random_uuid(), 'declared_vs_actual', 'fixture', '2026-11-19', '{}', '{}', $1) RETURNING id`,
      [p.clock.now()],
    );
    await p.database.db.query(
      `INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $3)`,
      [rows[0]!.id, events[0]!.id, p.clock.now()],
    );
    const before = hits;
    await deliverDueWebhooks(p.ctx);
    expect(hits).toBe(before);
    const deliveries = await apiCall(
      p.servers.api,
      p.adminKey,
      'GET',
      `/api/v1/console/webhooks/${rows[0]!.id}/deliveries`,
    );
    expect(deliveries.json<{ items: { last_error: string | null }[] }>().items).toEqual([
      expect.objectContaining({
        last_error: expect.stringMatching(/^target refused: 127\.0\.0\.1 is 127\.0\.0\.1/),
      }),
    ]);
  });

  test('at most a few kB of an answer are read', async () => {
    const url = new URL(receiverUrl);
    const result = await postToTarget(url, { address: '127.0.0.1', family: 4 }, '{}', {}, 5000);
    expect(result.status).toBe(200);
    expect(result.excerpt.length).toBe(MAX_ANSWER_BYTES);
  });
});

describe('a delivery', () => {
  const servers: Server[] = [];
  const listen = async (handler: Parameters<typeof createServer>[1]): Promise<number> => {
    const server = createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };
  const rawServers: TcpServer[] = [];
  const rawSockets: Socket[] = [];
  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
    for (const socket of rawSockets) socket.destroy();
    for (const server of rawServers) await new Promise((resolve) => server.close(resolve));
  });

  test('connects to the address it checked, never looking the name up again (DNS rebinding)', async () => {
    const hosts: (string | undefined)[] = [];
    const port = await listen((request, response) => {
      hosts.push(request.headers.host);
      request.resume();
      response.end('ok');
    });
    // rebind.invalid resolves nowhere: reaching the receiver proves the connection went to the checked address.
    const result = await postToTarget(
      new URL(`http://rebind.invalid:${port}/hook`),
      { address: '127.0.0.1', family: 4 },
      '{}',
      {},
      5000,
    );
    expect(result).toEqual({ status: 200, excerpt: 'ok' });
    expect(hosts).toEqual([`rebind.invalid:${port}`]);
  });

  test('follows no redirect: the 3xx is the answer', async () => {
    const paths: (string | undefined)[] = [];
    const port = await listen((request, response) => {
      paths.push(request.url);
      request.resume();
      response.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    });
    const result = await postToTarget(
      new URL(`http://127.0.0.1:${port}/hook`),
      { address: '127.0.0.1', family: 4 },
      '{}',
      {},
      5000,
    );
    expect(result.status).toBe(302);
    expect(paths).toEqual(['/hook']);
  });

  /** A receiver that writes `answer` to every connection once the request has arrived, then does `after`. */
  const rawReceiver = async (answer: string, after: 'hold' | 'close'): Promise<number> => {
    const server: TcpServer = createTcpServer((socket) => {
      rawSockets.push(socket);
      socket.once('data', () => {
        socket.write(answer);
        if (after === 'close') socket.end();
      });
      socket.on('error', () => {});
    });
    rawServers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };

  test('a receiver answering 101 Switching Protocols: the 101 is its answer, and the send ends', async () => {
    // Node hands an upgraded socket over without an error or a response: the send used to wait for ever, holding a
    // place of the process's sends and its stop (audit K finding 1).
    const port = await rawReceiver(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
      'hold',
    );
    const started = performance.now();
    const result = await postToTarget(
      new URL(`http://127.0.0.1:${port}/hook`),
      { address: '127.0.0.1', family: 4 },
      '{}',
      {},
      5000,
    );
    expect(result).toEqual({ status: 101, excerpt: '' });
    expect(performance.now() - started).toBeLessThan(4000);
  });

  test('a receiver closing the connection without an answer: the send fails at once', async () => {
    const port = await rawReceiver('', 'close');
    await expect(
      postToTarget(
        new URL(`http://127.0.0.1:${port}/hook`),
        { address: '127.0.0.1', family: 4 },
        '{}',
        {},
        5000,
      ),
    ).rejects.toThrow();
  });

  test('gives up on a target that does not answer in time', async () => {
    const port = await listen((request) => {
      request.resume();
    });
    const started = performance.now();
    await expect(
      postToTarget(
        new URL(`http://127.0.0.1:${port}/hook`),
        { address: '127.0.0.1', family: 4 },
        '{}',
        {},
        300,
      ),
    ).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(performance.now() - started).toBeLessThan(3000);
  });
});
