import { formatAlmaty } from '@ooh/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { evaluateAlerts } from '../../src/alerts/evaluate.js';
import { deliverDueWebhooks } from '../../src/city-events/webhooks.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';
import {
  type Cms,
  cmsPlay,
  type Device,
  enrol,
  MINUTE,
  modeChange,
  play,
  type Receiver,
  registerCms,
  sendBatch,
  sendCms,
  startReceiver,
} from './helpers.js';

/*
 * Issue "A newcomer's two commands ... and an operator's first day", item 5: "A device silent for a configurable time, a
 * screen reported off during its operating hours, a queue lag over an hour, a mapped CMS player that sends batches with
 * no plays: shown on the fleet page and delivered through the existing signed webhooks. Never alert on a device that
 * has not yet sent anything."
 *
 * One operating day of a small fleet, told in order: signed batches from devices enrolled in the console and a CMS
 * installation registered there, the scheduler's evaluation driven by the test clock (never by waiting), and a real
 * webhook receiver on a local socket that checks every signature.
 */

// Friday 2026-11-20, 11:00 Almaty: inside the default operating hours 07:00-23:00.
const T0 = new Date('2026-11-20T06:00:00.000Z');
const SECRETS = {
  '/authority': 'authority-receiver-secret-0001',
  '/a': 'operator-a-receiver-secret-0001',
  '/b': 'operator-b-receiver-secret-0001',
};

let p: TestPlatform;
let receiver: Receiver;
let a: { id: string; key: string };
let b: { id: string; key: string };
const devices = {} as Record<'silent' | 'screen' | 'lag' | 'never' | 'other', Device>;
let cms: Cms;

interface AlertItem {
  id: string;
  kind: string;
  state: string;
  organisation_id: string;
  device_id: string | null;
  cms_installation_id: string | null;
  player: string | null;
  structure_id: string;
  structure_code: string;
  since: string;
  last_seen_at: string | null;
  opened_at: string;
  resolved_at: string | null;
  resolution: string | null;
  detail: Record<string, unknown>;
}

const now = () => p.clock.now();
const at = (minutes: number) => new Date(T0.getTime() + minutes * MINUTE);

async function fleetAlerts(key: string): Promise<AlertItem[]> {
  const res = await apiCall(p.servers.api, key, 'GET', '/api/v1/console/devices');
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ alerts: AlertItem[] }>().alerts;
}

async function alerts(key: string, query = ''): Promise<AlertItem[]> {
  const res = await apiCall(p.servers.api, key, 'GET', `/api/v1/console/alerts${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ items: AlertItem[] }>().items;
}

/**
 * Moves the clock to `target` in steps of five minutes, the scheduler evaluating at each (as its loop would), and
 * `between` doing what the fleet does meanwhile.
 */
async function runUntil(target: Date, between: (instant: Date) => Promise<void> = async () => {}) {
  while (now() < target) {
    p.clock.set(new Date(Math.min(now().getTime() + 5 * MINUTE, target.getTime())));
    await between(now());
    expect(await evaluateAlerts(p.ctx)).not.toBeNull();
  }
}

const deliveredTo = (path: string, type?: string) =>
  receiver.delivered.filter((d) => d.path === path && (type === undefined || d.type === type));

beforeAll(async () => {
  receiver = await startReceiver(SECRETS);
  // The receiver is on loopback: named in the allow-list, as an operator would name an internal receiver.
  p = await startTestPlatform({ now: T0, config: { settings: { WEBHOOK_ALLOWED_TARGETS: '127.0.0.1' } } });
  a = await createOrganisation(p, 'operator', ['console:fleet', 'write:plays'], 'Almaty Screens LLP');
  b = await createOrganisation(p, 'operator', ['console:fleet', 'write:plays'], 'Other Outdoor LLP');
  const structure = async (org: { id: string }, code: string) => createStructure(p, org.id, { code });
  devices.silent = await enrol(p, a.key, await structure(a, 'ALR-0001'));
  devices.screen = await enrol(p, a.key, await structure(a, 'ALR-0002'));
  devices.lag = await enrol(p, a.key, await structure(a, 'ALR-0003'));
  devices.never = await enrol(p, a.key, await structure(a, 'ALR-0004'));
  devices.other = await enrol(p, b.key, await structure(b, 'OTH-0001'));
  cms = await registerCms(p, a.id, a.key, {
    'lobby-1': await structure(a, 'ALR-0101'),
    'lobby-2': await structure(a, 'ALR-0102'),
    'lobby-3': await structure(a, 'ALR-0103'),
  });
  // Subscriptions: the authority's through its admin key, each operator's through its own fleet key.
  for (const [path, key] of [
    ['/authority', p.adminKey],
    ['/a', a.key],
    ['/b', b.key],
  ] as const) {
    const res = await apiCall(p.servers.api, key, 'POST', '/api/v1/console/webhooks', {
      url: receiver.url(path),
      secret: SECRETS[path],
      types: ['alert_opened', 'alert_resolved'],
    });
    expect(res.statusCode, res.body).toBe(201);
  }
});
afterAll(async () => {
  await p?.close();
  await receiver?.close();
});

describe('fleet alerts, one operating day', () => {
  test('nothing is raised about devices and players that have not sent anything yet', async () => {
    await runUntil(at(40));
    expect(await fleetAlerts(p.adminKey)).toEqual([]);
    expect(await alerts(p.adminKey, '?state=all')).toEqual([]);
    const { rows } = await p.ctx.db.query('SELECT count(*)::int AS n FROM city_events');
    expect(rows[0]).toEqual({ n: 0 });
  });

  test('each kind opens once, is shown in the fleet list of its operator, and is delivered once, signed', async () => {
    const start = now();
    await sendBatch(p, devices.silent, [play(devices.silent, new Date(start.getTime() - MINUTE))]);
    await sendBatch(p, devices.screen, [
      play(devices.screen, new Date(start.getTime() - 2 * MINUTE)),
      modeChange(devices.screen, new Date(start.getTime() - 30_000), 'normal', 'screen_off'),
    ]);
    await sendBatch(p, devices.lag, [play(devices.lag, new Date(start.getTime() - MINUTE))]);
    await sendBatch(p, devices.other, [play(devices.other, new Date(start.getTime() - MINUTE))]);
    const lastPlayOfLobby2 = new Date(start.getTime() - 2 * MINUTE);
    await sendCms(p, cms, [
      cmsPlay(cms, 'lobby-1', new Date(start.getTime() - MINUTE)),
      cmsPlay(cms, 'lobby-2', lastPlayOfLobby2),
    ]);

    // The screen was reported off during operating hours: open at once.
    const first = await evaluateAlerts(p.ctx);
    expect(first?.opened.map((x) => x.kind)).toEqual(['screen_off']);

    // An hour and ten minutes on: the screen device, the lagging device and lobby-1 keep reporting every ten minutes;
    // the silent device, the other operator's device and lobby-2 say nothing more.
    let cmsBatchAfterQuiet: Date | null = null;
    await runUntil(new Date(start.getTime() + 70 * MINUTE), async (instant) => {
      if ((instant.getTime() - start.getTime()) % (10 * MINUTE) !== 0) return;
      await sendBatch(p, devices.screen, [play(devices.screen, new Date(instant.getTime() - MINUTE))]);
      await sendBatch(p, devices.lag, [play(devices.lag, new Date(instant.getTime() - MINUTE))]);
      await sendCms(p, cms, [cmsPlay(cms, 'lobby-1', new Date(instant.getTime() - MINUTE))]);
      const quietSince = lastPlayOfLobby2.getTime() - 15_000 + 60 * MINUTE;
      if (cmsBatchAfterQuiet === null && instant.getTime() > quietSince) cmsBatchAfterQuiet = instant;
    });
    // The lagging device comes back with what it kept: plays of 65 minutes ago, well over the hour.
    const lagged = now();
    await sendBatch(p, devices.lag, [play(devices.lag, new Date(lagged.getTime() - 65 * MINUTE))]);
    const last = await evaluateAlerts(p.ctx);
    expect(last?.opened.map((x) => x.kind)).toEqual(['queue_lag']);

    const mine = await fleetAlerts(a.key);
    const byKind = Object.fromEntries(mine.map((x) => [x.kind, x]));
    expect(Object.keys(byKind).sort()).toEqual([
      'cms_player_no_plays',
      'device_silent',
      'queue_lag',
      'screen_off',
    ]);
    expect(mine.every((x) => x.state === 'open' && x.organisation_id === a.id)).toBe(true);
    expect(byKind['device_silent']).toMatchObject({
      device_id: devices.silent.id,
      cms_installation_id: null,
      player: null,
      structure_code: 'ALR-0001',
      since: start.toISOString(),
      last_seen_at: start.toISOString(),
      opened_at: new Date(start.getTime() + 30 * MINUTE).toISOString(),
      resolved_at: null,
      resolution: null,
      detail: { silent_after_minutes: 30 },
    });
    expect(byKind['screen_off']).toMatchObject({
      device_id: devices.screen.id,
      structure_code: 'ALR-0002',
      since: new Date(start.getTime() - 30_000).toISOString(),
      opened_at: start.toISOString(),
      // The newest batch of the device, kept current while the alert is open.
      last_seen_at: new Date(start.getTime() + 70 * MINUTE).toISOString(),
      detail: {
        operating_hours: '07:00-23:00',
        screen_off_at: new Date(start.getTime() - 30_000).toISOString(),
      },
    });
    expect(byKind['queue_lag']).toMatchObject({
      device_id: devices.lag.id,
      structure_code: 'ALR-0003',
      since: lagged.toISOString(),
      last_seen_at: lagged.toISOString(),
      opened_at: lagged.toISOString(),
      detail: { queue_lag_seconds: 65 * 60, threshold_minutes: 60 },
    });
    expect(byKind['cms_player_no_plays']).toMatchObject({
      device_id: null,
      cms_installation_id: cms.id,
      player: 'lobby-2',
      structure_code: 'ALR-0102',
      // The first batch of the installation more than an hour after lobby-2's newest play began.
      since: cmsBatchAfterQuiet!.toISOString(),
      last_seen_at: new Date(lastPlayOfLobby2.getTime() - 15_000).toISOString(),
      detail: { quiet_after_minutes: 60 },
    });
    // Per device in the fleet list: the never-sent device and the players that play or never played have none.
    const subjects = mine.map((x) => x.device_id ?? x.player);
    expect(subjects).not.toContain(devices.never.id);
    expect(subjects).not.toContain('lobby-1');
    expect(subjects).not.toContain('lobby-3');

    // The other operator sees its own device's silence only; the authority sees all five.
    const theirs = await fleetAlerts(b.key);
    expect(theirs.map((x) => [x.kind, x.device_id])).toEqual([['device_silent', devices.other.id]]);
    expect((await fleetAlerts(p.adminKey)).length).toBe(5);
    expect((await alerts(b.key)).map((x) => x.id)).toEqual(theirs.map((x) => x.id));
    const foreign = await apiCall(
      p.servers.api,
      b.key,
      'GET',
      `/api/v1/console/alerts/${byKind['queue_lag']!.id}`,
    );
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json().code).toBe('not_found');
    const own = await apiCall(
      p.servers.api,
      a.key,
      'GET',
      `/api/v1/console/alerts/${byKind['queue_lag']!.id}`,
    );
    expect(own.json()).toEqual(byKind['queue_lag']);
    expect((await alerts(a.key, `?device_id=${devices.screen.id}`)).map((x) => x.kind)).toEqual([
      'screen_off',
    ]);

    // Delivered: one alert_opened per alert and subscription, signed with the subscription's secret.
    await deliverDueWebhooks(p.ctx);
    expect(receiver.badSignatures).toEqual([]);
    const opened = (path: string) =>
      deliveredTo(path, 'alert_opened')
        .map((d) => `${d.body.data.kind} ${d.body.data.alert_id}`)
        .sort();
    expect(opened('/a')).toEqual(mine.map((x) => `${x.kind} ${x.id}`).sort());
    expect(opened('/b')).toEqual([`device_silent ${theirs[0]!.id}`]);
    expect(opened('/authority')).toEqual([...opened('/a'), ...opened('/b')].sort());
    const silentEvent = deliveredTo('/a').find((d) => d.body.data.kind === 'device_silent')!;
    expect(silentEvent.eventId).toBe(silentEvent.body.id);
    expect(silentEvent.attempt).toBe(1);
    expect(silentEvent.body).toEqual({
      id: silentEvent.eventId,
      type: 'alert_opened',
      day: '2026-11-20',
      created_at: formatAlmaty(new Date(start.getTime() + 30 * MINUTE)),
      data: {
        alert_id: byKind['device_silent']!.id,
        kind: 'device_silent',
        state: 'open',
        organisation_id: a.id,
        device_id: devices.silent.id,
        cms_installation_id: null,
        player: null,
        structure_id: devices.silent.structure.id,
        structure_code: 'ALR-0001',
        since: formatAlmaty(start),
        last_seen_at: formatAlmaty(start),
        opened_at: formatAlmaty(new Date(start.getTime() + 30 * MINUTE)),
        resolved_at: null,
        resolution: null,
        detail: { silent_after_minutes: 30 },
      },
    });

    // Evaluated again and again, nothing is raised or sent twice.
    const count = receiver.delivered.length;
    await runUntil(new Date(now().getTime() + 15 * MINUTE));
    await deliverDueWebhooks(p.ctx);
    expect(receiver.delivered.length).toBe(count);
    expect(count).toBe(4 + 1 + 5);
  });

  test('each alert resolves when its condition ends, and the resolution is delivered once', async () => {
    const open = await fleetAlerts(p.adminKey);
    const t = now();
    await sendBatch(p, devices.silent, [play(devices.silent, new Date(t.getTime() - MINUTE))]);
    await sendBatch(p, devices.screen, [
      modeChange(devices.screen, new Date(t.getTime() - 10_000), 'screen_off', 'normal'),
    ]);
    await sendBatch(p, devices.lag, [play(devices.lag, new Date(t.getTime() - MINUTE))]);
    await sendCms(p, cms, [cmsPlay(cms, 'lobby-2', new Date(t.getTime() - MINUTE))]);
    // The other operator revokes its silent device: nobody watches it any more.
    const revoked = await apiCall(
      p.servers.api,
      b.key,
      'POST',
      `/api/v1/console/devices/${devices.other.id}/revoke`,
    );
    expect(revoked.statusCode, revoked.body).toBe(200);

    const evaluation = await evaluateAlerts(p.ctx);
    expect(evaluation?.opened).toEqual([]);
    expect(evaluation?.resolved.map((x) => x.id).sort()).toEqual(open.map((x) => x.id).sort());
    expect(await fleetAlerts(p.adminKey)).toEqual([]);

    const resolved = await alerts(p.adminKey, '?state=resolved');
    expect(resolved.length).toBe(5);
    for (const alert of resolved) {
      expect(alert.state).toBe('resolved');
      expect(alert.resolved_at).toBe(t.toISOString());
      expect(alert.resolution).toBe(alert.device_id === devices.other.id ? 'not_monitored' : 'cleared');
    }
    const silent = resolved.find((x) => x.kind === 'device_silent' && x.device_id === devices.silent.id)!;
    // The batch that ended the silence is its newest sign of life.
    expect(silent.last_seen_at).toBe(t.toISOString());
    expect((await alerts(a.key, '?state=all')).length).toBe(4);

    await deliverDueWebhooks(p.ctx);
    expect(receiver.badSignatures).toEqual([]);
    const resolvedTo = (path: string) =>
      deliveredTo(path, 'alert_resolved')
        .map((d) => d.body.data.alert_id)
        .sort();
    expect(resolvedTo('/authority')).toEqual(resolved.map((x) => x.id).sort());
    expect(resolvedTo('/a')).toEqual(
      resolved
        .filter((x) => x.organisation_id === a.id)
        .map((x) => x.id)
        .sort(),
    );
    expect(resolvedTo('/b')).toEqual(
      resolved
        .filter((x) => x.organisation_id === b.id)
        .map((x) => x.id)
        .sort(),
    );
    const screen = deliveredTo('/a', 'alert_resolved').find((d) => d.body.data.kind === 'screen_off')!;
    expect(screen.body.data).toMatchObject({
      state: 'resolved',
      resolution: 'cleared',
      resolved_at: formatAlmaty(t),
      device_id: devices.screen.id,
    });

    const count = receiver.delivered.length;
    await runUntil(new Date(now().getTime() + 15 * MINUTE), async (instant) => {
      // Everyone of operator A keeps reporting; nothing opens again.
      await sendBatch(p, devices.silent, [play(devices.silent, new Date(instant.getTime() - MINUTE))]);
      await sendBatch(p, devices.lag, [play(devices.lag, new Date(instant.getTime() - MINUTE))]);
    });
    await deliverDueWebhooks(p.ctx);
    expect(receiver.delivered.length).toBe(count);
  });

  test('a device silent again opens a new alert, not the old one', async () => {
    const before = await alerts(a.key, '?state=all&kind=device_silent');
    await runUntil(new Date(now().getTime() + 35 * MINUTE));
    const after = await alerts(a.key, '?kind=device_silent');
    const reopened = after.find((x) => x.device_id === devices.silent.id)!;
    expect(reopened.state).toBe('open');
    expect(before.map((x) => x.id)).not.toContain(reopened.id);
  });
});

describe('who sees and receives what', () => {
  test('an operator subscribes to its alerts only; the city-wide event stays the authority’s', async () => {
    const res = await apiCall(p.servers.api, a.key, 'POST', '/api/v1/console/webhooks', {
      url: receiver.url('/a'),
      types: ['alert_opened', 'declared_vs_actual'],
    });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({
      code: 'validation_failed',
      errors: [{ path: '/types/1', code: 'not_allowed' }],
    });
    // Another kind of organisation holding every scope is refused the route.
    const agency = await createOrganisation(p, 'agency', ['console:fleet', 'console:admin']);
    const denied = await apiCall(p.servers.api, agency.key, 'POST', '/api/v1/console/webhooks', {
      url: receiver.url('/a'),
      types: ['alert_opened'],
    });
    expect(denied.statusCode).toBe(403);
    expect((await apiCall(p.servers.api, agency.key, 'GET', '/api/v1/console/alerts')).statusCode).toBe(403);
  });

  test('subscriptions and events: each operator its own, the authority all of them', async () => {
    const list = async (key: string) => {
      const res = await apiCall(p.servers.api, key, 'GET', '/api/v1/console/webhooks');
      expect(res.statusCode, res.body).toBe(200);
      return res.json<{ items: { id: string; organisation_id: string | null; url: string }[] }>().items;
    };
    const all = await list(p.adminKey);
    const mine = await list(a.key);
    expect(mine.map((s) => [s.url, s.organisation_id])).toEqual([[receiver.url('/a'), a.id]]);
    expect(all.map((s) => s.organisation_id ?? 'authority').sort()).toEqual(['authority', a.id, b.id].sort());
    const theirs = all.find((s) => s.organisation_id === b.id)!;
    // Someone else's subscription does not exist for an operator: not listed, not removable, no deliveries.
    expect(
      (await apiCall(p.servers.api, a.key, 'DELETE', `/api/v1/console/webhooks/${theirs.id}`)).statusCode,
    ).toBe(404);
    expect(
      (await apiCall(p.servers.api, a.key, 'GET', `/api/v1/console/webhooks/${theirs.id}/deliveries`))
        .statusCode,
    ).toBe(404);
    const deliveries = await apiCall(
      p.servers.api,
      a.key,
      'GET',
      `/api/v1/console/webhooks/${mine[0]!.id}/deliveries`,
    );
    expect(deliveries.statusCode).toBe(200);
    expect(deliveries.json<{ items: unknown[] }>().items.length).toBeGreaterThan(0);

    const events = async (key: string) => {
      const res = await apiCall(p.servers.api, key, 'GET', '/api/v1/console/events?limit=500');
      expect(res.statusCode, res.body).toBe(200);
      return res.json<{ items: { type: string; data: { organisation_id: string } }[] }>().items;
    };
    const ofA = await events(a.key);
    expect(ofA.length).toBeGreaterThan(0);
    expect(ofA.every((e) => e.data.organisation_id === a.id && e.type.startsWith('alert_'))).toBe(true);
    expect((await events(p.adminKey)).length).toBe(ofA.length + (await events(b.key)).length);
  });

  test('an operator holds at most ten subscriptions', async () => {
    const c = await createOrganisation(p, 'operator', ['console:fleet']);
    for (let i = 0; i < 10; i += 1) {
      const res = await apiCall(p.servers.api, c.key, 'POST', '/api/v1/console/webhooks', {
        url: receiver.url(`/c${i}`),
        types: ['alert_opened'],
      });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json()).toMatchObject({ organisation_id: c.id, types: ['alert_opened'] });
    }
    const over = await apiCall(p.servers.api, c.key, 'POST', '/api/v1/console/webhooks', {
      url: receiver.url('/c10'),
      types: ['alert_opened'],
    });
    expect(over.statusCode).toBe(409);
    expect(over.json().code).toBe('state_conflict');
  });

  test('the alert routes: a credential first, then checked parameters, never a 5xx', async () => {
    expect((await apiCall(p.servers.api, null, 'GET', '/api/v1/console/alerts')).statusCode).toBe(401);
    const bad = await apiCall(
      p.servers.api,
      a.key,
      'GET',
      '/api/v1/console/alerts?state=closed&kind=fire&device_id=x&limit=0&colour=red',
    );
    expect(bad.statusCode).toBe(422);
    expect(
      bad
        .json<{ errors: { path: string }[] }>()
        .errors.map((e) => e.path)
        .sort(),
    ).toEqual([
      'querystring:/colour',
      'querystring:/device_id',
      'querystring:/kind',
      'querystring:/limit',
      'querystring:/state',
    ]);
    for (const id of ['nope', '00000000-0000-4000-8000-000000000000']) {
      const res = await apiCall(p.servers.api, a.key, 'GET', `/api/v1/console/alerts/${id}`);
      expect(res.statusCode).toBe(404);
    }
  });
});
