import {
  createIntermediateCa,
  createRootCa,
  es256Sign,
  exportPrivateKeyPem,
  generateEs256KeyPair,
  issueCertificate,
  publicKeyFingerprint,
  randomSerialHex,
  readCertificate,
  sha256Hex,
} from '@ooh/crypto';
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  csrFor,
  DAY_MS,
  type DeviceResponse,
  type DevicesTestPlatform,
  deviceRequest,
  enrolDevice,
  execFileAsync,
  expectStatus,
  type RenewBody,
  realNow,
  startDevicesPlatform,
  tempFiles,
  whoami,
} from './helpers.js';

let p: DevicesTestPlatform;
let T0: Date;

beforeAll(async () => {
  T0 = realNow();
  p = await startDevicesPlatform({ now: T0 });
});
afterAll(async () => {
  await p?.close();
});

/** Refused at TLS (the request fails) or with 401; never answered otherwise. */
function expectRefused(res: DeviceResponse): void {
  if (res.status === undefined) {
    expect(res.error).toMatch(/certificate|alert|socket hang up|ECONNRESET|EPIPE/i);
    return;
  }
  expect(res.status, res.body).toBe(401);
  expect(res.json<{ code: string }>().code).toBe('device_unauthorized');
}

describe('the devices host takes only client certificates of the device CA', () => {
  test('the device certificate authenticates; a health probe alone is answered without one', async () => {
    const device = await enrolDevice(p);
    const res = expectStatus(await whoami(p, device.certPem, device.keyPem), 200);
    expect(res.json()).toMatchObject({
      device_id: device.id,
      structure_code: p.structure.code,
      certificate_state: 'current',
    });
    expectStatus(await deviceRequest(p, { path: '/healthz', cert: device.certPem, key: device.keyPem }), 200);
    // A load balancer's HTTPS probe presents no certificate (issue "What a newcomer tripped over", item 7): /healthz
    // and /readyz are answered on such a connection, nothing else is (src/devices/tls.ts).
    expectStatus(await deviceRequest(p, { path: '/healthz' }), 200);
    expectStatus(await deviceRequest(p, { path: '/readyz' }), 200);
  });

  test('no client certificate at all: refused', async () => {
    const res = await deviceRequest(p, { path: '/d/v1/whoami' });
    expect(res.status).toBeUndefined();
    expectRefused(res);
    // The handshake itself completes (so the refusal can be recorded with what was presented: incidents.test.ts);
    // the listener's gate closes the connection before any HTTP is read.
    expect(p.tlsClientErrors).toEqual([]);
    const renewal = await deviceRequest(p, { path: '/d/v1/renew', body: JSON.stringify({ csr: 'x' }) });
    expectRefused(renewal);
  });

  test('a client certificate from another CA, even naming an enrolled serial: refused at TLS', async () => {
    const device = await enrolDevice(p);
    const serial = readCertificate(device.certPem).serialHex;
    const root = generateEs256KeyPair();
    const rootPem = await createRootCa({
      subject: 'CN=OOH Device Root CA, O=OOH Platform',
      keyPair: root,
      notBefore: new Date(T0.getTime() - DAY_MS),
      notAfter: new Date(T0.getTime() + 3650 * DAY_MS),
    });
    const issuing = generateEs256KeyPair();
    const issuingPem = await createIntermediateCa({
      subject: 'CN=OOH Device Issuing CA, O=OOH Platform',
      publicKey: issuing.publicKey,
      issuerCertificatePem: rootPem,
      issuerKey: root.privateKey,
      notBefore: new Date(T0.getTime() - DAY_MS),
      notAfter: new Date(T0.getTime() + 3650 * DAY_MS),
    });
    // Same names and the same serial as a real device certificate, the device's own key: only the CA differs.
    const forged = await issueCertificate({
      subject: `CN=${device.id}, OU=Devices, O=OOH Platform`,
      publicKey: device.keyPair.publicKey,
      issuerCertificatePem: issuingPem,
      issuerKey: issuing.privateKey,
      notBefore: new Date(T0.getTime() - DAY_MS),
      notAfter: new Date(T0.getTime() + 300 * DAY_MS),
      serialHex: serial,
      usage: 'client',
    });
    const res = await whoami(p, forged + issuingPem, device.keyPem);
    expect(res.status).toBeUndefined();
    expectRefused(res);
    // A refused certificate gets no health answer either: the exception is for a connection with none.
    const probe = await deviceRequest(p, { path: '/healthz', cert: forged + issuingPem, key: device.keyPem });
    expect(probe.status).toBeUndefined();
  });

  test('an expired certificate of the device CA, known to the platform: refused at TLS', async () => {
    const device = await enrolDevice(p);
    const serial = randomSerialHex();
    const expired = await issueCertificate({
      subject: `CN=${device.id}, OU=Devices, O=OOH Platform`,
      publicKey: device.keyPair.publicKey,
      issuerCertificatePem: p.ca.issuingCertPem,
      issuerKey: p.ca.issuingKey,
      notBefore: new Date(Date.now() - 400 * DAY_MS),
      notAfter: new Date(Date.now() - DAY_MS),
      serialHex: serial,
      usage: 'client',
    });
    // Make it the device's newest certificate in the database: TLS must refuse it all the same.
    const info = readCertificate(expired);
    await p.ctx.db.query(
      'UPDATE device_certificates SET replaced_at = $2, old_valid_until = $2 WHERE device_id = $1',
      [device.id, T0],
    );
    await p.ctx.db.query(
      `INSERT INTO device_certificates (serial, device_id, certificate_sha256, key_fingerprint, pem, not_before,
         not_after, issued_at, issued_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'enrolment')`,
      [
        info.serialHex,
        device.id,
        sha256Hex(new X509Certificate(expired).raw),
        publicKeyFingerprint(device.keyPair.publicKey),
        expired,
        info.notBefore,
        info.notAfter,
        T0,
      ],
    );
    const res = await whoami(p, expired, device.keyPem);
    expect(res.status).toBeUndefined();
    expectRefused(res);
  });

  test('a valid certificate of the device CA that the platform never recorded: 401 device_unauthorized', async () => {
    const key = generateEs256KeyPair();
    const stray = await issueCertificate({
      subject: 'CN=stray',
      publicKey: key.publicKey,
      issuerCertificatePem: p.ca.issuingCertPem,
      issuerKey: p.ca.issuingKey,
      notBefore: new Date(T0.getTime() - DAY_MS),
      notAfter: new Date(T0.getTime() + DAY_MS),
      serialHex: randomSerialHex(),
      usage: 'client',
    });
    expectStatus(await whoami(p, stray, exportPrivateKeyPem(key.privateKey)), 401, 'device_unauthorized');
  });

  test('a revoked device: 401 device_unauthorized', async () => {
    const device = await enrolDevice(p);
    await p.ctx.db.query('UPDATE devices SET revoked_at = $2 WHERE id = $1', [device.id, T0]);
    expectStatus(await whoami(p, device.certPem, device.keyPem), 401, 'device_unauthorized');
  });
});

describe('curl, as a technician would try it', () => {
  test('curl --cert --key --cacert: who am I, and a renewal', async () => {
    const device = await enrolDevice(p);
    // Renewal needs 60 days or fewer left: the clock moves on; TLS still checks the real time.
    p.clock.set(new Date(T0.getTime() + 310 * DAY_MS));
    const newKey = generateEs256KeyPair();
    const body = JSON.stringify({ csr: await csrFor(newKey) });
    const signature = es256Sign(device.keyPair.privateKey, new TextEncoder().encode(body));
    const files = await tempFiles({
      'cert.pem': device.certPem,
      'key.pem': device.keyPem,
      'root.pem': p.ca.rootPem,
      'body.json': body,
    });
    const curl = (...args: string[]) =>
      execFileAsync('curl', [
        '--silent',
        '--show-error',
        '--max-time',
        '20',
        '--cacert',
        files.paths['root.pem']!,
        ...args,
      ]);
    try {
      const url = `https://127.0.0.1:${p.devicesPort}`;
      const me = await curl(
        '--cert',
        files.paths['cert.pem']!,
        '--key',
        files.paths['key.pem']!,
        `${url}/d/v1/whoami`,
      );
      expect(JSON.parse(me.stdout)).toMatchObject({ device_id: device.id, certificate_state: 'current' });
      // Also by name: the server certificate covers localhost.
      const byName = await curl(
        '--cert',
        files.paths['cert.pem']!,
        '--key',
        files.paths['key.pem']!,
        `https://localhost:${p.devicesPort}/d/v1/whoami`,
      );
      expect(JSON.parse(byName.stdout)).toMatchObject({ device_id: device.id });

      const renewed = await curl(
        '--cert',
        files.paths['cert.pem']!,
        '--key',
        files.paths['key.pem']!,
        '--header',
        'content-type: application/json',
        '--header',
        `x-service-signature: ${signature}`,
        '--data-binary',
        `@${files.paths['body.json']}`,
        `${url}/d/v1/renew`,
      );
      const answer = JSON.parse(renewed.stdout) as RenewBody;
      expect(answer.device_id).toBe(device.id);
      expect(readCertificate(answer.certificate_pem).subject).toContain(device.id);

      // Without a client certificate curl gets nothing.
      await expect(curl(`${url}/d/v1/whoami`)).rejects.toThrow();
    } finally {
      p.clock.set(T0);
      await files.cleanup();
    }
  });
});
