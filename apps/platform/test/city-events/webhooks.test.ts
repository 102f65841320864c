import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkDeclaredVsActual } from '../../src/city-events/declared-vs-actual.js';
import { claimDueDeliveries } from '../../src/city-events/repository.js';
import { createCityEventsFeature } from '../../src/city-events/routes.js';
import { deliverDueWebhooks, LEASE_MS, MAX_ATTEMPTS, retryDelayMs } from '../../src/city-events/webhooks.js';
import { seedApproval, seedOrganisation, seedPlays, seedStructure } from '../open-data/helpers.js';
import { apiCall, createOrganisation, startTestPlatform, type TestPlatform } from '../support/platform.js';

/*
 * Delivery against a real HTTP server on a local socket that fails the first attempts. The platform's clock is the
 * test clock: the backoff is shown by moving it, never by sleeping.
 */

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

let p: TestPlatform;
let server: Server;
let receiverUrl: string;
const received: Received[] = [];
let failuresLeft = 2;
const SECRET = 'a-test-secret-of-some-length';

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        response.writeHead(500).end('not now');
      } else {
        response.writeHead(204).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/city`;
  // The receiver is on loopback: named in the allow-list, as an operator would for an internal receiver.
  p = await startTestPlatform({
    now: new Date('2026-11-20T12:00:00+05:00'),
    config: { settings: { WEBHOOK_ALLOWED_TARGETS: '127.0.0.1' } },
  });
});
afterAll(async () => {
  await p?.close();
  await new Promise((resolve) => server?.close(resolve));
});

const admin = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) =>
  apiCall(p.servers.api, p.adminKey, method, url, body);
const advance = (ms: number) => p.clock.set(new Date(p.clock.now().getTime() + ms));

/** One declared_vs_actual event for `day` (declared 100, nothing counted). */
async function raiseEventOn(day: string): Promise<void> {
  const db = p.ctx.db;
  const structure = await seedStructure(db, await seedOrganisation(db, 'operator'), 'medeu', 'led');
  const approval = await seedApproval(db, await seedOrganisation(db, 'advertiser'), [structure], {
    validFrom: day,
    validUntil: day,
    declared: { [structure]: 100 },
  });
  await seedPlays(db, {
    structureId: structure,
    approvalNumber: approval.number,
    startAt: new Date(`${day}T12:00:00+05:00`),
    count: 10,
  });
}

describe('webhook subscriptions', () => {
  test('POST /api/v1/console/webhooks: authority admin only; validated; a generated secret is shown once', async () => {
    const operator = await createOrganisation(p, 'operator', ['console:admin']);
    const denied = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/console/webhooks', {
      url: receiverUrl,
      types: ['declared_vs_actual'],
    });
    expect(denied.statusCode).toBe(403);
    for (const body of [
      { url: 'ftp://example.org/x', types: ['declared_vs_actual'] },
      { url: receiverUrl, types: [] },
      { url: receiverUrl, types: ['other'] },
      { url: receiverUrl, types: ['declared_vs_actual'], secret: 'short' },
      { url: 'http://user:pw@example.org/', types: ['declared_vs_actual'] },
    ]) {
      const res = await admin('POST', '/api/v1/console/webhooks', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(422);
    }
    const generated = await admin('POST', '/api/v1/console/webhooks', {
      url: 'http://127.0.0.1:9/unused',
      types: ['declared_vs_actual'],
    });
    expect(generated.statusCode).toBe(201);
    expect(generated.json().secret).toMatch(/^[0-9a-f]{64}$/);
    const removed = await admin('DELETE', `/api/v1/console/webhooks/${generated.json().id}`);
    expect(removed.statusCode).toBe(204);
    expect((await admin('DELETE', `/api/v1/console/webhooks/${generated.json().id}`)).statusCode).toBe(404);
  });

  test('an event is delivered signed, retried with backoff after failures, with the same id and bytes', async () => {
    const created = await admin('POST', '/api/v1/console/webhooks', {
      url: receiverUrl,
      secret: SECRET,
      types: ['declared_vs_actual'],
    });
    expect(created.statusCode).toBe(201);
    expect(created.json().secret).toBeUndefined();
    const id = created.json().id as string;

    await raiseEventOn('2026-11-20');
    p.clock.set(new Date('2026-11-21T00:00:05+05:00'));
    expect((await checkDeclaredVsActual(p.ctx)).events).toBe(1);

    // Attempt 1 fails (500).
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 1, delivered: 0 });
    // Nothing is due before the backoff has passed: 30 s after the first failure.
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 0, delivered: 0 });
    advance(retryDelayMs(1) - 1000);
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 0, delivered: 0 });
    advance(1000);
    // Attempt 2 fails; the next waits twice as long.
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 1, delivered: 0 });
    expect(retryDelayMs(2)).toBe(2 * retryDelayMs(1));
    advance(retryDelayMs(2) - 1000);
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 0, delivered: 0 });
    advance(1000);
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 1, delivered: 1 });
    advance(24 * 3_600_000);
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 0, delivered: 0 });

    expect(received).toHaveLength(3);
    const [first] = received;
    const event = JSON.parse(first!.body);
    expect(event).toMatchObject({
      type: 'declared_vs_actual',
      day: '2026-11-20',
      data: { declared_plays: 100, actual_plays: 10 },
    });
    received.forEach((request, i) => {
      expect(request.body).toBe(first!.body);
      expect(request.headers['content-type']).toBe('application/json');
      expect(request.headers['x-event-id']).toBe(event.id);
      expect(request.headers['x-event-type']).toBe('declared_vs_actual');
      expect(request.headers['x-delivery-attempt']).toBe(String(i + 1));
      expect(request.headers['x-signature']).toBe(
        createHmac('sha256', SECRET).update(request.body).digest('hex'),
      );
    });
    // The delivered body is the document the console lists.
    const listed = await admin('GET', '/api/v1/console/events?type=declared_vs_actual');
    expect(listed.json().items).toEqual([event]);

    const deliveries = await admin('GET', `/api/v1/console/webhooks/${id}/deliveries`);
    expect(deliveries.json().items).toEqual([
      expect.objectContaining({ event_id: event.id, attempts: 3, last_status: 204, failed_at: null }),
    ]);
    expect(deliveries.json().items[0].delivered_at).not.toBeNull();
    const list = await admin('GET', '/api/v1/console/webhooks');
    expect(list.json().items.find((s: { id: string }) => s.id === id)).toMatchObject({
      url: receiverUrl,
      types: ['declared_vs_actual'],
      deliveries: { pending: 0, delivered: 1, failed: 0 },
    });
  });

  test('at least once: a delivery whose sender died is sent again, with the same event id, when its lease runs out', async () => {
    received.length = 0;
    await raiseEventOn('2026-11-22');
    p.clock.set(new Date('2026-11-23T00:00:01+05:00'));
    expect((await checkDeclaredVsActual(p.ctx)).events).toBe(1);
    // An instance claims the delivery, then dies before sending or storing the outcome.
    const now = p.clock.now();
    const claimed = await claimDueDeliveries(p.ctx.db, now, new Date(now.getTime() + LEASE_MS), 10);
    expect(claimed).toHaveLength(1);
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 0, delivered: 0 });
    advance(LEASE_MS);
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 1, delivered: 1 });
    expect(received).toHaveLength(1);
    expect(received[0]!.headers['x-event-id']).toBe(claimed[0]!.eventId);
    expect(received[0]!.headers['x-delivery-attempt']).toBe('2');
  });

  test('a receiver that never answers is given up after the last attempt', async () => {
    const dead = await admin('POST', '/api/v1/console/webhooks', {
      // Nothing listens on port 9 (discard) on the test machine: connections are refused at once.
      url: 'http://127.0.0.1:9/hooks',
      types: ['declared_vs_actual'],
    });
    const id = dead.json().id as string;
    // Only the new subscription gets the next event; the working one gets it too.
    await raiseEventOn('2026-11-24');
    p.clock.set(new Date('2026-11-25T00:00:01+05:00'));
    expect((await checkDeclaredVsActual(p.ctx)).events).toBe(1);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
      const run = await deliverDueWebhooks(p.ctx, { timeoutMs: 2000 });
      expect(run.attempted).toBeGreaterThanOrEqual(1);
      advance(retryDelayMs(attempt));
    }
    expect(await deliverDueWebhooks(p.ctx)).toEqual({ attempted: 0, delivered: 0 });
    const deliveries = (await admin('GET', `/api/v1/console/webhooks/${id}/deliveries`)).json().items;
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ attempts: MAX_ATTEMPTS, delivered_at: null, last_status: null });
    expect(deliveries[0].failed_at).not.toBeNull();
    expect(deliveries[0].last_error).toBeTruthy();
  });

  test("the feature's background loop compares days and delivers", async () => {
    received.length = 0;
    await raiseEventOn('2026-11-26');
    p.clock.set(new Date('2026-11-27T00:00:01+05:00'));
    const stop = await createCityEventsFeature({ tickMs: 5 }).start!(p.ctx);
    try {
      for (let i = 0; i < 400 && received.length === 0; i += 1)
        await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      await stop();
    }
    expect(received).toHaveLength(1);
    expect(JSON.parse(received[0]!.body)).toMatchObject({ day: '2026-11-26' });
  });
});
