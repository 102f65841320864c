import type { KeyObject } from 'node:crypto';
import { createCsr, es256Sign, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

/**
 * GET /api/v1/console/devices, the console's fleet list: last batch and queue lag (apps/platform/console/README.md
 * "Fleet"). Batches go through the real signed agent channel.
 */

const T0 = new Date('2026-11-20T06:00:00.000Z');
const MINUTE = 60_000;
const MEDIA = 'c'.repeat(64);

let p: TestPlatform;
let operator: { id: string; key: string };
let structure: { id: string; code: string };

interface Device {
  id: string;
  privateKey: KeyObject;
}

interface FleetItem {
  device_id: string;
  structure_code: string;
  organisation_id: string;
  created_at: string;
  revoked_at: string | null;
  certificate_not_after: string | null;
  last_batch_at: string | null;
  last_batch_seq: number | null;
  queue_lag_seconds: number | null;
}

beforeAll(async () => {
  p = await startTestPlatform({ now: T0 });
  operator = await createOrganisation(p, 'operator', ['console:fleet', 'write:submissions']);
  structure = await createStructure(p, operator.id, { code: 'LAG-0001' });
});
afterAll(async () => {
  await p?.close();
});

async function enrol(structureId: string, key = operator.key): Promise<Device> {
  const { publicKey, privateKey } = generateEs256KeyPair();
  const res = await apiCall(p.servers.api, key, 'POST', '/api/v1/console/devices', {
    structure_id: structureId,
    public_key: exportPublicKeySpki(publicKey),
  });
  expect(res.statusCode, res.body).toBe(201);
  return { id: res.json<{ device_id: string }>().device_id, privateKey };
}

/** A play that ended at `end`, 15 seconds long. */
function play(seq: number, end: Date): Record<string, unknown> {
  return {
    kind: 'play',
    seq,
    approval_number: 'APR-2026-000001',
    media_sha256: MEDIA,
    start: new Date(end.getTime() - 15_000).toISOString(),
    end: end.toISOString(),
    duration_ms: 15_000,
  };
}

/** Sends a signed agent batch at the platform's current time; expects it taken. */
async function send(device: Device, batchSeq: number, events: Record<string, unknown>[]) {
  const body = Buffer.from(
    JSON.stringify({
      schema: 'service.pop/1',
      device_id: device.id,
      ts: p.clock.now().toISOString(),
      batch_seq: batchSeq,
      events,
    }),
  );
  const res = await p.servers.agents.inject({
    method: 'POST',
    url: '/s/v1/telemetry',
    headers: {
      'content-type': 'application/json',
      'x-service-signature': es256Sign(device.privateKey, body),
    },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ accepted: number; refused: number }>();
}

async function fleet(key = operator.key): Promise<FleetItem[]> {
  const res = await apiCall(p.servers.api, key, 'GET', '/api/v1/console/devices');
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ items: FleetItem[] }>().items;
}

const itemOf = (items: FleetItem[], device: Device) => items.find((i) => i.device_id === device.id);

describe('GET /api/v1/console/devices: last batch and queue lag', () => {
  test('a device without batches: no last batch, no queue lag', async () => {
    const device = await enrol(structure.id);
    const item = itemOf(await fleet(), device);
    expect(item).toMatchObject({
      structure_code: 'LAG-0001',
      organisation_id: operator.id,
      created_at: T0.toISOString(),
      revoked_at: null,
      certificate_not_after: null,
      last_batch_at: null,
      last_batch_seq: null,
      queue_lag_seconds: null,
    });
  });

  test('queue lag is the receive time of the newest batch minus the newest record time in it', async () => {
    p.clock.set(T0);
    const device = await enrol(structure.id);
    // Shipped while up to date: plays ending 10 and 4 minutes ago, a reject event 2 minutes ago (events count too).
    const answer = await send(device, 1, [
      play(1, new Date(T0.getTime() - 10 * MINUTE)),
      play(2, new Date(T0.getTime() - 4 * MINUTE)),
      { kind: 'reject', at: new Date(T0.getTime() - 2 * MINUTE).toISOString(), code: 'NO_SIGNATURE' },
    ]);
    expect(answer.accepted).toBe(3);
    let item = itemOf(await fleet(), device)!;
    expect(item.last_batch_at).toBe(T0.toISOString());
    expect(item.last_batch_seq).toBe(1);
    expect(item.queue_lag_seconds).toBe(120);

    // Offline for three hours; back online it ships the backlog oldest first: the first batch holds plays of an
    // hour after it went off, so it arrives 2 h 30 min behind.
    const back = new Date(T0.getTime() + 180 * MINUTE);
    p.clock.set(back);
    await send(device, 2, [
      play(3, new Date(T0.getTime() + 20 * MINUTE)),
      play(4, new Date(T0.getTime() + 30 * MINUTE)),
    ]);
    item = itemOf(await fleet(), device)!;
    expect(item.last_batch_at).toBe(back.toISOString());
    expect(item.last_batch_seq).toBe(2);
    expect(item.queue_lag_seconds).toBe(150 * 60);

    // The next batch catches up to a play that ended 45.9 seconds before it arrived: whole seconds, rounded down.
    const caughtUp = new Date(back.getTime() + 11 * 1000);
    p.clock.set(caughtUp);
    await send(device, 3, [play(5, new Date(caughtUp.getTime() - 45_900))]);
    item = itemOf(await fleet(), device)!;
    expect(item.last_batch_seq).toBe(3);
    expect(item.queue_lag_seconds).toBe(45);
  });

  test('a record stamped slightly ahead of the platform clock gives 0, not a negative lag', async () => {
    p.clock.set(T0);
    const device = await enrol(structure.id);
    // Within the 300-second tolerance: accepted.
    await send(device, 1, [play(1, new Date(T0.getTime() + 90_000))]);
    expect(itemOf(await fleet(), device)!.queue_lag_seconds).toBe(0);
  });

  test('a newest batch without a timed record has a last batch but no queue lag', async () => {
    p.clock.set(T0);
    const device = await enrol(structure.id);
    await send(device, 1, [play(1, new Date(T0.getTime() - 5 * MINUTE))]);
    p.clock.set(new Date(T0.getTime() + 20_000));
    // An agent play may leave out start, end and duration (flagged timing_missing, still counted).
    const untimed = { kind: 'play', seq: 2, approval_number: 'APR-2026-000001', media_sha256: MEDIA };
    expect((await send(device, 2, [untimed])).accepted).toBe(1);
    const item = itemOf(await fleet(), device)!;
    expect(item.last_batch_seq).toBe(2);
    expect(item.last_batch_at).toBe(new Date(T0.getTime() + 20_000).toISOString());
    expect(item.queue_lag_seconds).toBeNull();
  });

  test('certificate expiry is of the current certificate: none after a re-enrolment without a CSR', async () => {
    p.clock.set(T0);
    const keyPair = generateEs256KeyPair();
    const enrolled = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/console/devices', {
      structure_id: structure.id,
      public_key: exportPublicKeySpki(keyPair.publicKey),
      csr: await createCsr({ subject: 'CN=player', keyPair }),
    });
    expect(enrolled.statusCode, enrolled.body).toBe(201);
    const { device_id: id, not_after: notAfter } = enrolled.json<{ device_id: string; not_after: string }>();
    let item = (await fleet()).find((i) => i.device_id === id)!;
    expect(item.certificate_not_after).toBe(notAfter);

    const next = generateEs256KeyPair();
    const reEnrolled = await apiCall(
      p.servers.api,
      operator.key,
      'POST',
      `/api/v1/console/devices/${id}/re-enrol`,
      {
        public_key: exportPublicKeySpki(next.publicKey),
      },
    );
    expect(reEnrolled.statusCode, reEnrolled.body).toBe(200);
    item = (await fleet()).find((i) => i.device_id === id)!;
    expect(item.certificate_not_after).toBeNull();
  });

  test('an operator lists only its own devices; the authority lists all; others are refused', async () => {
    p.clock.set(T0);
    const other = await createOrganisation(p, 'operator', ['console:fleet']);
    const otherStructure = await createStructure(p, other.id);
    const theirs = await enrol(otherStructure.id, other.key);
    const mine = await fleet();
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((i) => i.organisation_id === operator.id)).toBe(true);
    expect(itemOf(await fleet(other.key), theirs)).toBeDefined();
    const all = await fleet(p.adminKey);
    expect(all.map((i) => i.device_id)).toEqual(
      expect.arrayContaining([theirs.id, ...mine.map((i) => i.device_id)]),
    );

    const agency = await createOrganisation(p, 'agency', ['write:submissions']);
    const refused = await apiCall(p.servers.api, agency.key, 'GET', '/api/v1/console/devices');
    expect(refused.statusCode).toBe(403);
    expect(refused.headers['content-type']).toContain('application/problem+json');
    const anonymous = await apiCall(p.servers.api, null, 'GET', '/api/v1/console/devices');
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json<{ code: string }>().code).toBe('unauthenticated');
  });
});
