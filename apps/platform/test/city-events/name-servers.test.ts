import { createSocket, type Socket } from 'node:dgram';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hostsFileAddresses, resolveTarget, targetPolicy } from '../../src/city-events/targets.js';
import { deliverDueWebhooks } from '../../src/city-events/webhooks.js';
import { apiCall, createOrganisation, startTestPlatform, type TestPlatform } from '../support/platform.js';

/*
 * WEBHOOK_NAME_SERVERS: the name servers a receiver's name is asked of. Real UDP name servers on loopback: one that
 * answers from a table (A records; NXDOMAIN for the rest), one that never answers. A name server that never answers
 * holds a delivery for its send timeout at most, and holds neither the event loop nor another subscription's
 * deliveries.
 */

/** A name server answering A queries from `table` (NOERROR, no record for AAAA; NXDOMAIN for a name not in it). */
async function tableNameServer(
  table: Record<string, string>,
): Promise<{ socket: Socket; server: string; asked: string[] }> {
  const socket = createSocket('udp4');
  const asked: string[] = [];
  socket.on('message', (query, from) => {
    // Header (12 bytes), then the question: labels, a zero byte, type and class.
    const labels: string[] = [];
    let at = 12;
    while (query[at]! !== 0) {
      const length = query[at]!;
      labels.push(query.subarray(at + 1, at + 1 + length).toString('ascii'));
      at += 1 + length;
    }
    const question = query.subarray(12, at + 5);
    const type = query.readUInt16BE(at + 1);
    const name = labels.join('.').toLowerCase();
    asked.push(`${name} ${type === 1 ? 'A' : type === 28 ? 'AAAA' : type}`);
    const address = table[name];
    const answer = type === 1 && address !== undefined;
    const header = Buffer.alloc(12);
    header.writeUInt16BE(query.readUInt16BE(0), 0);
    // QR, RD and RA; NXDOMAIN (3) for a name the table does not hold.
    header.writeUInt16BE(0x8180 | (address === undefined ? 3 : 0), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answer ? 1 : 0, 6);
    const record = Buffer.alloc(16);
    if (answer) {
      record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      record.writeUInt16BE(1, 2); // A
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(60, 6); // TTL
      record.writeUInt16BE(4, 10);
      Buffer.from(address.split('.').map(Number)).copy(record, 12);
    }
    socket.send(
      Buffer.concat([header, question, answer ? record : Buffer.alloc(0)]),
      from.port,
      from.address,
    );
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { socket, server: `127.0.0.1:${(socket.address() as AddressInfo).port}`, asked };
}

/** A name server that takes every query and never answers. */
async function silentNameServer(): Promise<{ socket: Socket; server: string; queries: () => number }> {
  const socket = createSocket('udp4');
  let queries = 0;
  socket.on('message', () => {
    queries += 1;
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { socket, server: `127.0.0.1:${(socket.address() as AddressInfo).port}`, queries: () => queries };
}

describe('WEBHOOK_NAME_SERVERS', () => {
  test('takes addresses with an optional port; anything else is named at start', () => {
    expect(targetPolicy({}).nameServers).toBeNull();
    expect(targetPolicy({ WEBHOOK_NAME_SERVERS: ' ' }).nameServers).toBeNull();
    expect(
      targetPolicy({
        WEBHOOK_NAME_SERVERS: '9.9.9.9, 149.112.112.112:5353,[2620:fe::fe]:53,2620:fe::9,[::1]:5300',
      }).nameServers,
    ).toEqual(['9.9.9.9', '149.112.112.112:5353', '2620:fe::fe', '2620:fe::9', '[::1]:5300']);
    // Port 0 would abort the process inside c-ares' binding, and 70000 would wrap to another port.
    for (const bad of [
      'dns.example',
      '1.2.3.4:0',
      '1.2.3.4:70000',
      '[1.2.3.4]:53',
      '1.2.3.4:',
      '9.9.9.9,,8.8.8.8',
    ]) {
      expect(() => targetPolicy({ WEBHOOK_NAME_SERVERS: bad }), bad).toThrow(/WEBHOOK_NAME_SERVERS/);
    }
  });

  test('a receiver’s name is asked of those servers only, and the addresses they give are checked', async () => {
    const dns = await tableNameServer({
      'hooks.partner.example': '93.184.216.34',
      'inside.partner.example': '10.0.0.7',
    });
    try {
      const policy = targetPolicy({ WEBHOOK_NAME_SERVERS: dns.server });
      expect(await resolveTarget(new URL('https://hooks.partner.example/ooh'), policy)).toEqual({
        ok: true,
        address: '93.184.216.34',
        family: 4,
      });
      expect(await resolveTarget(new URL('https://inside.partner.example/ooh'), policy)).toMatchObject({
        ok: false,
        why: 'private',
      });
      // A name the chosen servers do not know is not looked for in /etc/hosts (the system's localhost).
      expect(await resolveTarget(new URL('http://localhost/hook'), policy)).toMatchObject({
        ok: false,
        why: 'unresolvable',
      });
      expect(dns.asked).toEqual(
        expect.arrayContaining(['hooks.partner.example A', 'inside.partner.example A', 'localhost A']),
      );
      // Without the setting the system's lookup finds localhost, a loopback address.
      expect(await resolveTarget(new URL('http://localhost/hook'), targetPolicy({}))).toMatchObject({
        ok: false,
        why: 'private',
      });
    } finally {
      dns.socket.close();
    }
  });

  test('a name server that never answers: unresolvable within the resolver’s bound, the event loop free meanwhile', async () => {
    const dns = await silentNameServer();
    let ticks = 0;
    const ticker = setInterval(() => {
      ticks += 1;
    }, 20);
    try {
      const started = performance.now();
      const target = await resolveTarget(
        new URL('https://hooks.partner.example/ooh'),
        targetPolicy({ WEBHOOK_NAME_SERVERS: dns.server }),
      );
      const elapsed = performance.now() - started;
      expect(target).toMatchObject({
        ok: false,
        why: 'unresolvable',
        reason: expect.stringMatching(/ETIMEOUT/),
      });
      // Two tries of 2 s each, the second possibly longer (c-ares backs off): well under a send timeout's bound.
      expect(elapsed).toBeGreaterThan(3_000);
      expect(elapsed).toBeLessThan(15_000);
      expect(dns.queries()).toBeGreaterThanOrEqual(2);
      // The event loop kept running: far more than one tick a second.
      expect(ticks).toBeGreaterThan(elapsed / 1000);
    } finally {
      clearInterval(ticker);
      dns.socket.close();
    }
  }, 30_000);
});

describe('deliveries while a receiver’s name server never answers', () => {
  let p: TestPlatform;
  let dns: Awaited<ReturnType<typeof silentNameServer>>;
  let receiver: Server;
  let receiverUrl: string;
  const received: string[] = [];

  beforeAll(async () => {
    dns = await silentNameServer();
    receiver = createServer((request, response) => {
      let body = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => {
        body += chunk;
      });
      request.on('end', () => {
        received.push(body);
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    p = await startTestPlatform({
      now: new Date('2026-11-20T12:00:00+05:00'),
      config: { settings: { WEBHOOK_NAME_SERVERS: dns.server, WEBHOOK_ALLOWED_TARGETS: '127.0.0.1' } },
    });
  });
  afterAll(async () => {
    await p?.close();
    await new Promise((resolve) => receiver?.close(resolve));
    dns?.socket.close();
  });

  async function subscriptionWithDelivery(url: string): Promise<string> {
    const { rows } = await p.database.db.query<{ id: string }>(
      `INSERT INTO webhook_subscriptions (url, secret, types, created_at)
       VALUES ($1, 'a-secret-of-some-length-0000', '{declared_vs_actual}', $2) RETURNING id`,
      [url, p.clock.now()],
    );
    const { rows: events } = await p.database.db.query<{ id: string }>(
      `INSERT INTO city_events (id, type, subject_key, day, payload, body, created_at)
       VALUES (gen_random_uuid(), 'declared_vs_actual', $2, '2026-11-19', '{}', '{"n":1}', $1) RETURNING id`,
      [p.clock.now(), `fixture ${url}`],
    );
    await p.database.db.query(
      `INSERT INTO webhook_deliveries (subscription_id, event_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $3)`,
      [rows[0]!.id, events[0]!.id, p.clock.now()],
    );
    return rows[0]!.id;
  }

  test('an operator at its limit of subscriptions is refused before any name is looked up (audit K finding 2)', async () => {
    const operator = await createOrganisation(p, 'operator', ['console:fleet']);
    for (let i = 0; i < 10; i++) {
      const made = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/console/webhooks', {
        url: `http://127.0.0.1:9/hook-${i}`,
        types: ['alert_opened'],
      });
      expect(made.statusCode, made.body).toBe(201);
    }
    const before = dns.queries();
    const started = performance.now();
    const refused = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/console/webhooks', {
      url: 'https://hooks.partner.example/eleventh',
      types: ['alert_opened'],
    });
    expect(refused.statusCode, refused.body).toBe(409);
    expect(refused.json()).toMatchObject({ code: 'state_conflict' });
    // The silent name server was not asked: before, the 409 came after its resolver's tries (about 4 s).
    expect(dns.queries()).toBe(before);
    expect(performance.now() - started).toBeLessThan(2_000);
  }, 30_000);

  test('the delivery to the silent name’s receiver fails with a timeout; the other subscription’s is delivered', async () => {
    const stuck = await subscriptionWithDelivery('https://hooks.partner.example/ooh');
    const fine = await subscriptionWithDelivery(receiverUrl);
    const started = performance.now();
    await deliverDueWebhooks(p.ctx, { timeoutMs: 1_000 });
    // Bounded by the send timeout, not by the resolver's tries.
    expect(performance.now() - started).toBeLessThan(3_500);
    expect(received).toHaveLength(1);
    const deliveries = async (id: string) =>
      (await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/webhooks/${id}/deliveries`)).json<{
        items: { last_error: string | null; delivered_at: string | null; attempts: number }[];
      }>().items;
    expect(await deliveries(stuck)).toEqual([
      expect.objectContaining({ last_error: 'timeout', delivered_at: null }),
    ]);
    expect(await deliveries(fine)).toEqual([expect.objectContaining({ last_error: null })]);
    expect((await deliveries(fine))[0]!.delivered_at).not.toBeNull();
    expect(dns.queries()).toBeGreaterThanOrEqual(1);
  }, 30_000);
});

describe('/etc/hosts, read by the platform itself (never getaddrinfo, audit K finding 2)', () => {
  test('a name is found as the hosts file gives it, case and a final dot aside; comments and other names are not', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ooh-hosts-'));
    const file = path.join(dir, 'hosts');
    writeFileSync(
      file,
      [
        '# a comment naming receiver.lan 10.9.9.9',
        '127.0.0.1\tlocalhost',
        '192.0.2.10  receiver.lan  receiver   # the receiver',
        'fe80::1%eth0 receiver.lan',
        'not-an-address receiver.lan',
        '',
      ].join('\n'),
    );
    expect(await hostsFileAddresses('Receiver.LAN.', file)).toEqual([
      { address: '192.0.2.10', family: 4 },
      { address: 'fe80::1%eth0', family: 6 },
    ]);
    expect(await hostsFileAddresses('other.lan', file)).toEqual([]);
    expect(await hostsFileAddresses('receiver.lan', path.join(dir, 'missing'))).toEqual([]);
  });
});
