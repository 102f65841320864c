import { createHash, X509Certificate } from 'node:crypto';
import { connect } from 'node:net';
import {
  createIntermediateCa,
  createRootCa,
  generateEs256KeyPair,
  importPrivateKey,
  issueCertificate,
  randomSerialHex,
  readCertificate,
} from '@ooh/crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { RefusalRecorder } from '../../src/devices/refusals.js';
import { agentBody, play, postTelemetry } from '../pop/helpers.js';
import { apiCall } from '../support/platform.js';
import {
  DAY_MS,
  type DevicesTestPlatform,
  deviceRequest,
  enrolDevice,
  realNow,
  startDevicesPlatform,
  type TestDevice,
  whoami,
} from './helpers.js';

/*
 * Issue "Trust under attack": item 6, "A client certificate refused during the TLS handshake leaves no trace: log every
 * refused handshake (reason, certificate subject and serial, peer address) and count it in the fleet view, so an
 * operator can see why a player cannot connect"; item 4, "the fleet page show[s] a device that is stuck and why".
 */

let p: DevicesTestPlatform;
let T0: Date;
beforeAll(async () => {
  T0 = realNow();
  p = await startDevicesPlatform({ now: T0 });
});
afterAll(async () => {
  await p?.close();
});

interface RecentRefusal {
  at: string;
  reason: string;
  subject: string | null;
  serial: string | null;
  address: string | null;
  device_id: string | null;
}

interface Fleet {
  items: {
    device_id: string;
    handshake_refusals_24h: number;
    stuck: { since: string; count: number; last_at: string; batch_seq: number | null; reason: string } | null;
  }[];
  handshake_refusals: { last_24h: number; recent: RecentRefusal[] };
}

async function fleet(key = p.adminKey): Promise<Fleet> {
  const res = await apiCall(p.servers.api, key, 'GET', '/api/v1/console/devices');
  expect(res.statusCode, res.body).toBe(200);
  return res.json<Fleet>();
}

/** `read()` once `check` holds of it: what is written in the background (within a second) has landed. */
async function until<T>(read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  for (let i = 0; ; i += 1) {
    const value = await read();
    if (check(value) || i >= 150) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const fleetWhen = (check: (fleet: Fleet) => boolean, key = p.adminKey) => until(() => fleet(key), check);

const itemOf = (f: Fleet, id: string) => f.items.find((d) => d.device_id === id);

/** A certificate from a CA the platform does not know, copying the subject and serial of a device's certificate. */
async function forgedCertificate(device: TestDevice): Promise<string> {
  const root = generateEs256KeyPair();
  const rootPem = await createRootCa({
    subject: 'CN=Someone else, O=Elsewhere',
    keyPair: root,
    notBefore: new Date(T0.getTime() - DAY_MS),
    notAfter: new Date(T0.getTime() + 3650 * DAY_MS),
  });
  const issuing = generateEs256KeyPair();
  const issuingPem = await createIntermediateCa({
    subject: 'CN=Someone else issuing, O=Elsewhere',
    publicKey: issuing.publicKey,
    issuerCertificatePem: rootPem,
    issuerKey: root.privateKey,
    notBefore: new Date(T0.getTime() - DAY_MS),
    notAfter: new Date(T0.getTime() + 3650 * DAY_MS),
  });
  const forged = await issueCertificate({
    subject: `CN=${device.id}, OU=Devices, O=OOH Platform`,
    publicKey: device.keyPair.publicKey,
    issuerCertificatePem: issuingPem,
    issuerKey: issuing.privateKey,
    notBefore: new Date(T0.getTime() - DAY_MS),
    notAfter: new Date(T0.getTime() + 300 * DAY_MS),
    serialHex: readCertificate(device.certPem).serialHex,
    usage: 'client',
  });
  return forged + issuingPem;
}

describe('refused client certificates are recorded and counted in the fleet view', () => {
  test('no certificate, another CA, an expired one and a revoked device: each with its reason, subject, serial, address and device', async () => {
    const before = (await fleet()).handshake_refusals.last_24h;
    // No certificate: TLS lets the handshake finish, the listener's gate closes it before any HTTP.
    const bare = await deviceRequest(p, { path: '/d/v1/whoami' });
    expect(bare.status).toBeUndefined();
    // Another CA, copying a real device's subject and serial: refused, and not put on that device.
    const copied = await enrolDevice(p);
    const forged = await whoami(p, await forgedCertificate(copied), copied.keyPem);
    expect(forged.status).toBeUndefined();
    // Expired, issued by the device CA to a device the platform knows.
    const lapsed = await enrolDevice(p);
    const expiredSerial = randomSerialHex();
    const expired = await issueCertificate({
      subject: `CN=${lapsed.id}, OU=Devices, O=OOH Platform`,
      publicKey: lapsed.keyPair.publicKey,
      issuerCertificatePem: p.ca.issuingCertPem,
      issuerKey: p.ca.issuingKey,
      notBefore: new Date(Date.now() - 400 * DAY_MS),
      notAfter: new Date(Date.now() - DAY_MS),
      serialHex: expiredSerial,
      usage: 'client',
    });
    await p.ctx.db.query(
      `INSERT INTO device_certificates (serial, device_id, certificate_sha256, key_fingerprint, pem, not_before,
         not_after, issued_at, issued_by, replaced_at, old_valid_until)
       SELECT $1, device_id, $2, key_fingerprint, $3, $4, $5, $6, 'enrolment', $6, $6 FROM device_certificates
        WHERE device_id = $7`,
      [
        expiredSerial,
        readCertificateDigest(expired),
        expired,
        new Date(Date.now() - 400 * DAY_MS),
        new Date(Date.now() - DAY_MS),
        new Date(T0.getTime() - 400 * DAY_MS),
        lapsed.id,
      ],
    );
    expect((await whoami(p, expired, lapsed.keyPem)).status).toBeUndefined();
    // A revoked device: the handshake passes, the platform refuses its certificate (401).
    const revoked = await enrolDevice(p);
    const revoke = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/devices/${revoked.id}/revoke`,
    );
    expect(revoke.statusCode).toBe(200);
    const refusedRevoked = await whoami(p, revoked.certPem, revoked.keyPem);
    expect(refusedRevoked.status).toBe(401);

    const answer = await fleetWhen((f) => f.handshake_refusals.last_24h >= before + 4);
    expect(answer.handshake_refusals.last_24h).toBe(before + 4);
    const recent = answer.handshake_refusals.recent;
    const entry = (reason: string) => recent.find((r) => r.reason === reason);
    expect(entry('no_certificate')).toEqual({
      at: T0.toISOString(),
      reason: 'no_certificate',
      subject: null,
      serial: null,
      address: '127.0.0.1',
      device_id: null,
    });
    expect(entry('unknown_ca')).toEqual({
      at: T0.toISOString(),
      reason: 'unknown_ca',
      subject: `CN=${copied.id}, OU=Devices, O=OOH Platform`,
      serial: readCertificate(copied.certPem).serialHex,
      address: '127.0.0.1',
      device_id: null,
    });
    expect(entry('certificate_expired')).toEqual({
      at: T0.toISOString(),
      reason: 'certificate_expired',
      subject: `CN=${lapsed.id}, OU=Devices, O=OOH Platform`,
      serial: expiredSerial,
      address: '127.0.0.1',
      device_id: lapsed.id,
    });
    expect(entry('device_revoked')).toEqual({
      at: T0.toISOString(),
      reason: 'device_revoked',
      subject: `CN=${revoked.id}, OU=Devices, O=OOH Platform`,
      serial: readCertificate(revoked.certPem).serialHex,
      address: '127.0.0.1',
      device_id: revoked.id,
    });
    expect(itemOf(answer, lapsed.id)?.handshake_refusals_24h).toBe(1);
    expect(itemOf(answer, revoked.id)?.handshake_refusals_24h).toBe(1);
    expect(itemOf(answer, copied.id)?.handshake_refusals_24h).toBe(0);

    // The operator of the structure sees its own devices' refusals only, neither the anonymous nor the forged one.
    const operatorView = await fleet(p.operator.key);
    expect(operatorView.handshake_refusals.recent.map((r) => r.reason).sort()).toEqual([
      'certificate_expired',
      'device_revoked',
    ]);
    expect(operatorView.handshake_refusals.last_24h).toBe(2);

    // 24 hours later they have left the counts; the recent list keeps them.
    p.clock.set(new Date(T0.getTime() + DAY_MS + 60_000));
    try {
      const later = await fleet();
      expect(later.handshake_refusals.last_24h).toBe(0);
      expect(itemOf(later, lapsed.id)?.handshake_refusals_24h).toBe(0);
      expect(later.handshake_refusals.recent.length).toBeGreaterThanOrEqual(4);
    } finally {
      p.clock.set(T0);
    }
  });

  test('a plain HTTP request to the HTTPS port is a failed handshake; a connection closed unspoken is none', async () => {
    const before = (await fleet()).handshake_refusals.last_24h;
    await new Promise<void>((resolve) => {
      // Written without closing: the server, not this side, ends the connection (no race with our FIN).
      const socket = connect(p.devicesPort, '127.0.0.1', () => {
        socket.write('GET /d/v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      socket.on('error', () => resolve());
      socket.on('close', () => resolve());
      socket.resume();
    });
    const answer = await fleetWhen((f) =>
      f.handshake_refusals.recent.some((r) => r.reason === 'handshake_failed'),
    );
    expect(answer.handshake_refusals.last_24h).toBe(before + 1);
    expect(answer.handshake_refusals.recent.find((r) => r.reason === 'handshake_failed')).toMatchObject({
      subject: null,
      address: '127.0.0.1',
      device_id: null,
    });
    // A load balancer's TCP check: connect, close.
    await new Promise<void>((resolve) => {
      const socket = connect(p.devicesPort, '127.0.0.1', () => socket.destroy());
      socket.on('close', () => resolve());
    });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await fleet()).handshake_refusals.last_24h).toBe(before + 1);
  });

  test('a flood of refusals is counted in full, in one recent entry, and written in a few statements', async () => {
    const before = (await fleet()).handshake_refusals.last_24h;
    const statements: string[] = [];
    const query = p.ctx.db.query.bind(p.ctx.db);
    p.ctx.db.query = ((text: unknown, ...rest: unknown[]) => {
      if (typeof text === 'string' && text.includes('device_handshake_refusal')) statements.push(text);
      return (query as (...args: unknown[]) => unknown)(text, ...rest);
    }) as typeof p.ctx.db.query;
    const started = performance.now();
    let elapsedMs = 0;
    try {
      // Not /healthz: a load balancer's probe without a certificate is answered, not refused (src/devices/tls.ts).
      await Promise.all(Array.from({ length: 60 }, () => deviceRequest(p, { path: '/d/v1/whoami' })));
      elapsedMs = performance.now() - started;
      const answer = await fleetWhen((f) => f.handshake_refusals.last_24h >= before + 60);
      expect(answer.handshake_refusals.last_24h).toBe(before + 60);
      expect(answer.handshake_refusals.recent.filter((r) => r.reason === 'no_certificate')).toHaveLength(1);
    } finally {
      p.ctx.db.query = query;
    }
    // Written at most once a second, whatever the number of refusals.
    const writes = statements.filter((s) => s.includes('INSERT INTO device_handshake_refusal_counts'));
    expect(writes.length).toBeGreaterThanOrEqual(1);
    expect(writes.length).toBeLessThanOrEqual(Math.ceil(elapsedMs / 1000) + 2);
  });
});

describe('the refusal recorder is bounded', () => {
  test('a thousand distinct refusals: all counted, the newest 50 in the recent list, 20 lines logged', async () => {
    const lines: { msg: string; refusals?: number }[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const at = new Date(T0.getTime() + 3_600_000);
    const { rows: before } = await p.ctx.db.query<{ n: number }>(
      'SELECT coalesce(sum(refusals), 0)::int AS n FROM device_handshake_refusal_counts WHERE minute = $1',
      [new Date(Math.floor(at.getTime() / 60_000) * 60_000)],
    );
    const recorder = new RefusalRecorder({ ...p.ctx, log });
    for (let i = 0; i < 1000; i += 1) {
      recorder.note({
        at,
        reason: 'handshake_failed',
        certificate: null,
        address: `192.0.2.${i % 250}:${i}`,
        deviceId: null,
      });
    }
    await recorder.close();
    const { rows } = await p.ctx.db.query<{ n: number }>(
      'SELECT coalesce(sum(refusals), 0)::int AS n FROM device_handshake_refusal_counts WHERE minute = $1',
      [new Date(Math.floor(at.getTime() / 60_000) * 60_000)],
    );
    expect(rows[0]!.n - before[0]!.n).toBe(1000);
    const { rows: recent } = await p.ctx.db.query<{ flood: number; anonymous: number }>(
      `SELECT count(*) FILTER (WHERE address LIKE '192.0.2.%')::int AS flood,
              count(*) FILTER (WHERE device_id IS NULL)::int AS anonymous
         FROM device_handshake_refusals_recent`,
    );
    expect(recent[0]!.flood).toBe(50);
    expect(recent[0]!.anonymous).toBeLessThanOrEqual(200);
    const single = lines.filter((l) => l.msg === 'device client certificate refused');
    expect(single).toHaveLength(20);
    expect(lines.at(-1)).toMatchObject({ refusals: 980 });
  });
});

describe('a device the platform answers 5xx is shown stuck until a batch of it is taken', () => {
  test('stuck with since, count, batch_seq and reason; a stored batch clears it; the next 5xx starts anew', async () => {
    const device = await enrolDevice(p);
    const signer = importPrivateKey(device.keyPem);
    const telemetry = {
      id: device.id,
      privateKey: signer,
      structure: { id: p.structure.id, code: p.structure.code },
    };
    const send = (batchSeq: number, seq: number) =>
      postTelemetry(p.servers, telemetry, agentBody(device, batchSeq, [play(seq)], { ts: p.clock.now() }));
    // A platform fault for one batch: the database refuses batch_seq 7 (a constraint the platform does not know).
    await p.database.db.query(
      'ALTER TABLE pop_batches ADD CONSTRAINT fault_7 CHECK (batch_seq <> 7) NOT VALID',
    );
    try {
      expect((await send(7, 1)).statusCode).toBe(500);
      await until(fleet, (f) => itemOf(f, device.id)?.stuck != null);
      p.clock.set(new Date(T0.getTime() + 60_000));
      expect((await send(7, 1)).statusCode).toBe(500);
      const stuck = itemOf(
        await until(fleet, (f) => itemOf(f, device.id)?.stuck?.count === 2),
        device.id,
      )?.stuck;
      expect(stuck).toEqual({
        since: T0.toISOString(),
        count: 2,
        last_at: new Date(T0.getTime() + 60_000).toISOString(),
        batch_seq: 7,
        reason: 'internal_error',
      });
      // A batch of no records (the agent's probe) is taken, but the device's records still are not: still stuck.
      const probe = await postTelemetry(
        p.servers,
        telemetry,
        agentBody(device, 8, [], { ts: p.clock.now() }),
      );
      expect(probe.statusCode).toBe(200);
      expect(itemOf(await fleet(), device.id)?.stuck).toEqual(stuck);
      // A batch of records clears it; nothing is written for an answer that is not a 5xx.
      expect((await send(6, 1)).statusCode).toBe(200);
      expect(itemOf(await fleet(), device.id)?.stuck).toBeNull();
      const { rows } = await p.database.db.query(
        'SELECT answers FROM device_server_errors WHERE device_id = $1',
        [device.id],
      );
      expect(rows).toEqual([{ answers: 2 }]);

      p.clock.set(new Date(T0.getTime() + 120_000));
      expect((await send(7, 2)).statusCode).toBe(500);
      const again = await until(fleet, (f) => itemOf(f, device.id)?.stuck != null);
      expect(itemOf(again, device.id)?.stuck).toMatchObject({
        since: new Date(T0.getTime() + 120_000).toISOString(),
        count: 1,
        batch_seq: 7,
      });
      await p.database.db.query('ALTER TABLE pop_batches DROP CONSTRAINT fault_7');
      expect((await send(7, 2)).statusCode).toBe(200);
      expect(itemOf(await fleet(), device.id)?.stuck).toBeNull();
    } finally {
      p.clock.set(T0);
      await p.database.db.query('ALTER TABLE pop_batches DROP CONSTRAINT IF EXISTS fault_7');
    }
  });

  test('a 5xx on the devices host is recorded too, with its route', async () => {
    const device = await enrolDevice(p);
    await p.database.db.query(
      'ALTER TABLE pop_batches ADD CONSTRAINT fault_9 CHECK (batch_seq <> 9) NOT VALID',
    );
    try {
      const res = await deviceRequest(p, {
        path: '/d/v1/telemetry',
        cert: device.certPem,
        key: device.keyPem,
        body: agentBody(device, 9, [play(1)], { ts: p.clock.now() }),
      });
      expect(res.status).toBe(500);
      const { rows } = await until(
        () =>
          p.database.db.query(
            'SELECT answers, batch_seq, status, code, route FROM device_server_errors WHERE device_id = $1',
            [device.id],
          ),
        (result) => result.rows.length > 0,
      );
      expect(rows).toEqual([
        { answers: 1, batch_seq: 9, status: 500, code: 'internal_error', route: 'POST /d/v1/telemetry' },
      ]);
    } finally {
      await p.database.db.query('ALTER TABLE pop_batches DROP CONSTRAINT IF EXISTS fault_9');
    }
  });
});

function readCertificateDigest(pem: string): string {
  return createHash('sha256').update(new X509Certificate(pem).raw).digest('hex');
}
