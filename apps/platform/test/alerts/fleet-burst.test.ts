import { afterAll, beforeAll, expect, test } from 'vitest';
import { evaluateAlerts } from '../../src/alerts/evaluate.js';
import type { Db } from '../../src/db/pool.js';
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
  play,
  registerCms,
  sendBatch,
  sendCms,
} from './helpers.js';

/*
 * A whole fleet's alerts change in one evaluation (after a network outage, or a CMS that falls behind for all its
 * screens at once): the evaluation writes them, their city events and their webhook deliveries in a few statements,
 * not three or four a alert, and each alert still gets its own event and one delivery per subscription, in order.
 */

const T0 = new Date('2026-11-20T07:00:00.000Z');
const PLAYERS = 250;
const minutes = (m: number) => new Date(T0.getTime() + m * MINUTE);

let p: TestPlatform;
let operator: { id: string; key: string };
let cms: Cms;
let lagA: Device;
let lagB: Device;

/** The pool, with every statement of the connections it hands out counted. */
function countingDb(db: Db): { db: Db; statements: () => number } {
  let statements = 0;
  const counting = Object.create(db) as Db;
  counting.connect = (async () => {
    const client = await db.connect();
    const query = client.query;
    const release = client.release;
    client.query = ((...args: Parameters<typeof query>) => {
      statements += 1;
      return (query as (...a: unknown[]) => unknown).apply(client, args);
    }) as typeof query;
    client.release = (...args: Parameters<typeof release>) => {
      client.query = query;
      client.release = release;
      return release.apply(client, args);
    };
    return client;
  }) as Db['connect'];
  return { db: counting, statements: () => statements };
}

async function evaluateCounted(at: Date) {
  p.clock.set(at);
  const counted = countingDb(p.ctx.db);
  const result = await evaluateAlerts({ ...p.ctx, db: counted.db });
  expect(result).not.toBeNull();
  return { result: result!, statements: counted.statements() };
}

beforeAll(async () => {
  p = await startTestPlatform({
    now: T0,
    config: { settings: { WEBHOOK_ALLOWED_TARGETS: '127.0.0.1' } },
  });
  operator = await createOrganisation(p, 'operator', ['console:fleet', 'write:plays']);
  const structure = await createStructure(p, operator.id, { code: 'BURST-1' });
  lagA = await enrol(p, operator.key, await createStructure(p, operator.id, { code: 'BURST-A' }));
  lagB = await enrol(p, operator.key, await createStructure(p, operator.id, { code: 'BURST-B' }));
  cms = await registerCms(p, operator.id, operator.key, {});
  await p.ctx.db.query(
    `INSERT INTO cms_players (installation_id, external_id, structure_id, mapped_at)
     SELECT $1, 'screen-' || n, $2, $3 FROM generate_series(1, $4::int) AS n`,
    [cms.id, structure.id, T0, PLAYERS],
  );
  // Two subscribers of alerts: the authority and the operator (the port is never reached: nothing is delivered here).
  for (const key of [p.adminKey, operator.key]) {
    const res = await apiCall(p.servers.api, key, 'POST', '/api/v1/console/webhooks', {
      url: 'http://127.0.0.1:9/alerts',
      secret: 'a-long-enough-shared-secret-0123456789',
      types: ['alert_opened', 'alert_resolved'],
    });
    expect(res.statusCode, res.body).toBe(201);
  }
});
afterAll(async () => {
  await p?.close();
});

test('a fleet’s alerts open, keep current and resolve in a few statements, each with its event and deliveries', async () => {
  // The platform watches from T0 on (an evaluation at most ten minutes apart keeps the watch unbroken).
  for (let m = 0; m <= 60; m += 10) await evaluateCounted(minutes(m));

  // Two devices fall behind, each since its own batch: A after a batch on time, B from its first batch.
  p.clock.set(minutes(60));
  await sendBatch(p, lagA, [play(lagA, minutes(59))]);
  p.clock.set(minutes(62));
  await sendBatch(p, lagA, [play(lagA, minutes(1))]);
  p.clock.set(minutes(66));
  await sendBatch(p, lagB, [play(lagB, minutes(2))]);
  // The CMS sends, for every screen, a play of more than an hour ago: nothing of it counted since.
  p.clock.set(minutes(70));
  await sendCms(
    p,
    cms,
    Array.from({ length: PLAYERS }, (_, i) => cmsPlay(cms, `screen-${i + 1}`, minutes(5))),
  );

  const opening = await evaluateCounted(minutes(70));
  expect(opening.result.opened).toHaveLength(PLAYERS + 2);
  expect(opening.statements).toBeLessThanOrEqual(10);
  const lag = Object.fromEntries(
    opening.result.opened.filter((a) => a.kind === 'queue_lag').map((a) => [a.device_id, a.since]),
  );
  expect(lag).toEqual({ [lagA.id]: minutes(62), [lagB.id]: minutes(66) });
  expect(opening.result.opened.filter((a) => a.kind === 'cms_player_no_plays')).toHaveLength(PLAYERS);

  // One event per alert, named by the alert; one delivery per event and subscriber, queued in the alerts' order.
  const { rows: events } = await p.ctx.db.query<{ alert_id: string; event_id: string; type: string }>(
    `SELECT a.id AS alert_id, a.opened_event_id AS event_id, e.type
       FROM alerts a JOIN city_events e ON e.id = a.opened_event_id AND e.subject_key = a.id::text`,
  );
  const eventOf = new Map(events.map((e) => [e.alert_id, e.event_id]));
  expect(events.every((e) => e.type === 'alert_opened')).toBe(true);
  const expectedOrder = opening.result.opened.map((a) => eventOf.get(a.id));
  const deliveries = async () =>
    (
      await p.ctx.db.query<{ event_id: string; n: number }>(
        `SELECT event_id, count(*)::int AS n, min(id) AS first FROM webhook_deliveries
          GROUP BY event_id ORDER BY first`,
      )
    ).rows;
  const queued = await deliveries();
  expect(queued.map((d) => d.event_id)).toEqual(expectedOrder);
  expect(queued.every((d) => d.n === 2)).toBe(true);

  // Five minutes on: the CMS's plays are current again, and both devices send more of what they kept.
  p.clock.set(minutes(75));
  await sendCms(
    p,
    cms,
    Array.from({ length: PLAYERS }, (_, i) => cmsPlay(cms, `screen-${i + 1}`, minutes(74))),
  );
  await sendBatch(p, lagA, [play(lagA, minutes(3))]);
  await sendBatch(p, lagB, [play(lagB, minutes(4))]);
  const settling = await evaluateCounted(minutes(75));
  expect(settling.result.opened).toEqual([]);
  expect(settling.result.resolved).toHaveLength(PLAYERS);
  expect(settling.result.resolved.every((a) => a.resolution === 'cleared')).toBe(true);
  expect(settling.statements).toBeLessThanOrEqual(12);

  const { rows: alerts } = await p.ctx.db.query<{
    kind: string;
    device_id: string | null;
    last_seen_at: Date | null;
    resolved_at: Date | null;
    resolved_event_id: string | null;
  }>('SELECT kind, device_id, last_seen_at, resolved_at, resolved_event_id FROM alerts');
  const players = alerts.filter((a) => a.kind === 'cms_player_no_plays');
  expect(players.every((a) => a.resolved_at?.getTime() === minutes(75).getTime())).toBe(true);
  expect(new Set(players.map((a) => a.resolved_event_id)).size).toBe(PLAYERS);
  // The two lags stay open, their newest sign of life kept current.
  expect(
    alerts.filter((a) => a.kind === 'queue_lag').map((a) => [a.resolved_at, a.last_seen_at?.toISOString()]),
  ).toEqual([
    [null, minutes(75).toISOString()],
    [null, minutes(75).toISOString()],
  ]);
  const after = await deliveries();
  expect(after).toHaveLength(2 * PLAYERS + 2);
  expect(after.every((d) => d.n === 2)).toBe(true);

  // Nothing changed: an evaluation writes nothing.
  const quiet = await evaluateCounted(minutes(76));
  expect(quiet.result.opened.length + quiet.result.resolved.length).toBe(0);
  expect(await deliveries()).toHaveLength(2 * PLAYERS + 2);
});
