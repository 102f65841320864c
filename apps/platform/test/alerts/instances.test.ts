import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { evaluateAlerts } from '../../src/alerts/evaluate.js';
import { createAlertsFeature } from '../../src/alerts/routes.js';
import { deliverDueWebhooks } from '../../src/city-events/webhooks.js';
import { createOperator, type PopCluster, startPopCluster } from '../pop/helpers.js';
import { apiCall } from '../support/platform.js';
import { type Device, enrol, MINUTE, play, type Receiver, sendBatch, startReceiver } from './helpers.js';

/*
 * Several platform instances on one database (DESIGN.md section 2; docs/decisions.md "PLATFORM_WORKERS"): whichever
 * evaluates, and however many evaluate at once, an alert opens once, resolves once, and each transition is delivered
 * once per subscription.
 */

const T0 = new Date('2026-11-20T06:00:00.000Z');
const SECRET = 'instances-receiver-secret-0001';
const DEVICES = 12;

let cluster: PopCluster;
let receiver: Receiver;
const devices: Device[] = [];

beforeAll(async () => {
  receiver = await startReceiver({ '/hook': SECRET });
  cluster = await startPopCluster({ instances: 2, now: T0 });
  for (const instance of cluster.instances) {
    instance.ctx.config.settings = { WEBHOOK_ALLOWED_TARGETS: '127.0.0.1' };
  }
  const operator = await createOperator(cluster.platform, DEVICES);
  for (const structure of operator.structures)
    devices.push(await enrol(cluster.platform, operator.key, structure));
  const res = await apiCall(
    cluster.platform.servers.api,
    cluster.adminKey,
    'POST',
    '/api/v1/console/webhooks',
    {
      url: receiver.url('/hook'),
      secret: SECRET,
      types: ['alert_opened', 'alert_resolved'],
    },
  );
  expect(res.statusCode, res.body).toBe(201);
});
afterAll(async () => {
  await cluster?.close();
  await receiver?.close();
});

const both = <T>(work: (ctx: (typeof cluster.instances)[number]['ctx']) => Promise<T>) =>
  Promise.all(cluster.instances.map((instance) => work(instance.ctx)));

async function countRows(sql: string): Promise<number> {
  const { rows } = await cluster.db.query<{ n: number }>(sql);
  return rows[0]!.n;
}

describe('two instances, one database', () => {
  test('evaluating together, every alert opens once and is delivered once', async () => {
    await both((ctx) => evaluateAlerts(ctx));
    // Each device sends through one instance or the other.
    for (const [i, device] of devices.entries()) {
      const instance = cluster.instances[i % 2]!;
      await sendBatch({ servers: instance.servers, clock: instance.clock }, device, [
        play(device, new Date(T0.getTime() - MINUTE)),
      ]);
    }
    for (let m = 5; m <= 40; m += 5) {
      cluster.setNow(new Date(T0.getTime() + m * MINUTE));
      const results = await both((ctx) => evaluateAlerts(ctx));
      // Never both at once: one evaluates, the other skips its turn or finds nothing to do.
      expect(results.filter((r) => r !== null && r.opened.length > 0).length).toBeLessThanOrEqual(1);
    }
    expect(await countRows('SELECT count(*)::int AS n FROM alerts WHERE resolved_at IS NULL')).toBe(DEVICES);
    expect(await countRows("SELECT count(*)::int AS n FROM city_events WHERE type = 'alert_opened'")).toBe(
      DEVICES,
    );

    // Both instances deliver at once: each delivery is claimed by one of them.
    const runs = await both((ctx) => deliverDueWebhooks(ctx));
    expect(runs.reduce((sum, run) => sum + run.delivered, 0)).toBe(DEVICES);
    await both((ctx) => deliverDueWebhooks(ctx));
    expect(receiver.badSignatures).toEqual([]);
    expect(receiver.delivered.length).toBe(DEVICES);
    expect(new Set(receiver.delivered.map((d) => d.eventId)).size).toBe(DEVICES);
    expect(new Set(receiver.delivered.map((d) => d.body.data['device_id'])).size).toBe(DEVICES);
  });

  test('the schedulers of both instances, driven by the test clock, resolve each alert once', async () => {
    const now = new Date(T0.getTime() + 45 * MINUTE);
    cluster.setNow(now);
    for (const [i, device] of devices.entries()) {
      const instance = cluster.instances[i % 2]!;
      await sendBatch({ servers: instance.servers, clock: instance.clock }, device, [
        play(device, new Date(now.getTime() - MINUTE)),
      ]);
    }
    // The evaluation loop of each instance, as `platform run` starts it (src/features.ts), ticking fast.
    const feature = createAlertsFeature({ tickMs: 5 });
    const stops = await Promise.all(cluster.instances.map((instance) => feature.start!(instance.ctx)));
    try {
      await expect
        .poll(() => countRows('SELECT count(*)::int AS n FROM alerts WHERE resolved_at IS NULL'), {
          timeout: 10_000,
          interval: 20,
        })
        .toBe(0);
      // Let both loops go round a few more times: nothing more is raised.
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      await Promise.all(stops.map((stop) => stop()));
    }
    expect(await countRows("SELECT count(*)::int AS n FROM city_events WHERE type = 'alert_resolved'")).toBe(
      DEVICES,
    );
    await both((ctx) => deliverDueWebhooks(ctx));
    await both((ctx) => deliverDueWebhooks(ctx));
    expect(receiver.delivered.filter((d) => d.type === 'alert_resolved').length).toBe(DEVICES);
    expect(receiver.delivered.length).toBe(2 * DEVICES);
  });
});
