import { importPrivateKey } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type DeviceResponse,
  type DevicesTestPlatform,
  deviceRequest,
  enrolDevice,
  expectStatus,
  realNow,
  startDevicesPlatform,
  type TestDevice,
} from '../devices/helpers.js';
import { apiCall } from '../support/platform.js';
import { agentBody, type Answer, insertApproval, play, postTelemetry, sign } from './helpers.js';

/*
 * DESIGN.md section 5: "The certificate channel POST {devices_url}/d/v1/telemetry takes the same body and answer;
 * the client certificate identifies the device, so no signature header and no ts window are needed."
 * Over real TLS with client certificates issued by the device CA.
 */
let p: DevicesTestPlatform;
let now: Date;

beforeAll(async () => {
  now = realNow();
  p = await startDevicesPlatform({ now });
  await insertApproval(p.ctx.db, p.operator.id, {
    number: 'A-2026-000001',
    validFrom: '2000-01-01',
    validUntil: '2100-12-31',
    structureIds: [p.structure.id],
  });
});
afterAll(async () => {
  await p?.close();
});

function certBody(batchSeq: number, events: unknown[], extra: Record<string, unknown> = {}) {
  return Buffer.from(JSON.stringify({ schema: 'service.pop/1', batch_seq: batchSeq, events, ...extra }));
}

function postCert(device: TestDevice, body: Buffer): Promise<DeviceResponse> {
  return deviceRequest(p, {
    method: 'POST',
    path: '/d/v1/telemetry',
    cert: device.certPem,
    key: device.keyPem,
    body,
  });
}

function answerOf(res: DeviceResponse): Answer {
  return expectStatus(res, 200).json<Answer>();
}

const ended = () => new Date(now.getTime() - 60_000);

describe('POST /d/v1/telemetry (mutual TLS)', () => {
  test('the client certificate names the device: no signature, no device_id, no ts needed', async () => {
    const device = await enrolDevice(p);
    const body = certBody(0, [play(1, {}, ended()), play(2, {}, ended())]);
    const res = expectStatus(await postCert(device, body), 200);
    expect(res.json<Answer>()).toMatchObject({
      batch_seq: 0,
      received: 2,
      accepted: 2,
      duplicate: false,
      items: [],
    });
    expect(res.headers['date']).toBe(now.toUTCString());
    const { rows } = await p.ctx.db.query('SELECT channel, body FROM pop_batches WHERE owner = $1', [
      `device:${device.id}`,
    ]);
    expect(rows).toHaveLength(1);
    expect(rows[0].channel).toBe('cert');
    expect(Buffer.compare(rows[0].body, body)).toBe(0);
    // The same batch again: duplicate, counted once.
    expect(answerOf(await postCert(device, body)).duplicate).toBe(true);
    const { rows: counts } = await p.ctx.db.query(
      'SELECT sum(plays)::int AS plays FROM play_counts WHERE player_key = $1',
      [`device:${device.id}`],
    );
    expect(counts[0].plays).toBe(2);
  });

  test('one batch_seq space and one seq space per device across both channels', async () => {
    const device = await enrolDevice(p);
    answerOf(await postCert(device, certBody(0, [play(1, {}, ended()), play(2, {}, ended())])));
    const signer = {
      id: device.id,
      privateKey: importPrivateKey(device.keyPem),
      structure: { id: p.structure.id, code: device.structureCode },
    };
    const signed = agentBody(device, 0, [play(3, {}, ended())], { ts: now });
    const conflict = await postTelemetry(p.servers, signer, signed);
    expect(conflict.statusCode, conflict.body).toBe(409);
    expect(conflict.json<{ code: string }>().code).toBe('batch_conflict');
    const next = await postTelemetry(
      p.servers,
      signer,
      agentBody(device, 1, [play(2, {}, ended()), play(3, {}, ended())], { ts: now }),
    );
    expect(next.statusCode, next.body).toBe(200);
    expect(next.json<Answer>().items).toEqual([{ index: 0, status: 'duplicate' }]);
  });

  test('no ts window; a signature header is not needed and not read', async () => {
    const device = await enrolDevice(p);
    const old = new Date(now.getTime() - 6 * 3600_000);
    const body = certBody(0, [play(1, {}, ended())], { device_id: device.id, ts: old.toISOString() });
    const res = await deviceRequest(p, {
      method: 'POST',
      path: '/d/v1/telemetry',
      cert: device.certPem,
      key: device.keyPem,
      body,
      headers: { 'x-service-signature': sign(importPrivateKey(device.keyPem), Buffer.from('other bytes')) },
    });
    expect(answerOf(res).accepted).toBe(1);
  });

  test('a device_id of another device: 401 device_unauthorized; no certificate: refused', async () => {
    const device = await enrolDevice(p);
    const other = await enrolDevice(p);
    const res = await postCert(device, certBody(0, [play(1, {}, ended())], { device_id: other.id }));
    expectStatus(res, 401, 'device_unauthorized');
    const anonymous = await deviceRequest(p, {
      method: 'POST',
      path: '/d/v1/telemetry',
      body: certBody(0, []),
    });
    if (anonymous.status !== undefined) expectStatus(anonymous, 401, 'device_unauthorized');
  });

  test('a revoked device is refused at once', async () => {
    const device = await enrolDevice(p);
    answerOf(await postCert(device, certBody(0, [play(1, {}, ended())])));
    const revoke = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/devices/${device.id}/revoke`,
    );
    expect(revoke.statusCode, revoke.body).toBe(200);
    expectStatus(await postCert(device, certBody(1, [play(2, {}, ended())])), 401, 'device_unauthorized');
  });

  test('legacy format, then 409 legacy_after_pop, limits as on the signed channel', async () => {
    const device = await enrolDevice(p);
    const legacy = Buffer.from(JSON.stringify({ batch_seq: 0, events: [play(1, {}, ended())] }));
    expect(answerOf(await postCert(device, legacy)).accepted).toBe(1);
    answerOf(await postCert(device, certBody(1, [play(2, {}, ended())])));
    const again = Buffer.from(JSON.stringify({ batch_seq: 2, events: [play(3, {}, ended())] }));
    expectStatus(await postCert(device, again), 409, 'legacy_after_pop');
    expectStatus(await postCert(device, certBody(2, [], { schema: 'service.pop/9' })), 400, 'schema_unknown');
    const many = certBody(
      2,
      Array.from({ length: 1001 }, (_, i) => ({ kind: 'tamper', seq: i + 10 })),
    );
    expectStatus(await postCert(device, many), 413, 'batch_too_large');
  });
});
