import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import {
  base64Encode,
  createCsr,
  es256Sign,
  exportPrivateKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  publicKeyFingerprint,
  readCertificate,
} from '@ooh/crypto';
import { addCalendarYears } from '@ooh/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { apiCall } from '../support/platform.js';
import {
  chainParts,
  csrFor,
  DAY_MS,
  type DevicesTestPlatform,
  deviceRequest,
  enrolDevice,
  execFileAsync,
  expectStatus,
  HOUR_MS,
  MINUTE_MS,
  type RenewBody,
  realNow,
  renew,
  startDevicesPlatform,
  type TestDevice,
  tempFiles,
  whoami,
} from './helpers.js';

let p: DevicesTestPlatform;
/** The real time to the minute: the platform clock is moved around it (TLS checks dates on the real clock). */
let T0: Date;
const at = (ms: number) => new Date(T0.getTime() + ms);

beforeAll(async () => {
  T0 = realNow();
  p = await startDevicesPlatform({ now: T0 });
});
afterAll(async () => {
  await p?.close();
});

/** A device enrolled `daysAgo` days before T0 (its certificate has 365 - daysAgo days left at T0); clock at T0. */
async function deviceEnrolled(daysAgo: number): Promise<TestDevice> {
  p.clock.set(at(-daysAgo * DAY_MS));
  const device = await enrolDevice(p);
  p.clock.set(T0);
  return device;
}

/** A renewal of `device` with a fresh key; returns the new pair and the answer. */
async function renewWithNewKey(device: TestDevice, options: { force?: boolean } = {}) {
  const keyPair = generateEs256KeyPair();
  const csr = await csrFor(keyPair);
  const res = await renew(p, { cert: device.certPem, key: device.keyPem, csr, ...options });
  return { keyPair, keyPem: exportPrivateKeyPem(keyPair.privateKey), csr, res };
}

async function consoleDevice(id: string) {
  const res = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/devices/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{
    certificates: {
      serial: string;
      state: string;
      old_valid_until: string | null;
      first_used_at: string | null;
    }[];
    keys: { fingerprint: string; accepted_until: string | null }[];
  }>();
}

describe('renewal: the happy path', () => {
  test('a new certificate that openssl verifies; the old one is accepted for 24 hours, then refused', async () => {
    const device = await deviceEnrolled(310); // 55 days left: due
    const { keyPair, keyPem, res } = await renewWithNewKey(device);
    const answer = expectStatus(res, 200).json<RenewBody>();

    // spec rule 3: same device id, validity one year, old_valid_until = now + 24 h.
    expect(answer.device_id).toBe(device.id);
    expect(answer.old_valid_until).toBe(at(24 * HOUR_MS).toISOString());
    expect(answer.not_after).toBe(addCalendarYears(T0, 1).toISOString());
    const info = readCertificate(answer.certificate_pem);
    expect(info.subject).toContain(`CN=${device.id}`);
    expect(info.notBefore.toISOString()).toBe(at(-5 * MINUTE_MS).toISOString());
    expect(info.publicKeySpki).toBe(exportPublicKeySpki(keyPair.publicKey));

    // openssl accepts the chain the answer carries.
    const { intermediates, root } = chainParts(answer.chain_pem);
    expect(intermediates.length).toBeGreaterThan(0);
    const files = await tempFiles({
      'cert.pem': answer.certificate_pem,
      'untrusted.pem': intermediates.join(''),
      'root.pem': root,
    });
    try {
      const { stdout } = await execFileAsync('openssl', [
        'verify',
        '-purpose',
        'sslclient',
        '-CAfile',
        files.paths['root.pem']!,
        '-untrusted',
        files.paths['untrusted.pem']!,
        files.paths['cert.pem']!,
      ]);
      expect(stdout.trim()).toBe(`${files.paths['cert.pem']}: OK`);
    } finally {
      await files.cleanup();
    }
    expect(root.trim()).toBe(p.ca.rootPem.trim());

    // The new certificate authenticates.
    const asNew = expectStatus(await whoami(p, answer.certificate_pem, keyPem), 200).json();
    expect(asNew).toMatchObject({
      device_id: device.id,
      certificate_serial: info.serialHex,
      certificate_state: 'current',
    });

    // The old one: accepted at +23 h 59 min, refused at +24 h 01 min.
    p.clock.set(at(24 * HOUR_MS - MINUTE_MS));
    const old = expectStatus(await whoami(p, device.certPem, device.keyPem), 200).json();
    expect(old).toMatchObject({
      certificate_state: 'previous-until',
      old_valid_until: answer.old_valid_until,
    });
    p.clock.set(at(24 * HOUR_MS + MINUTE_MS));
    expectStatus(await whoami(p, device.certPem, device.keyPem), 401, 'device_unauthorized');
    expectStatus(await whoami(p, answer.certificate_pem, keyPem), 200);

    // device_keys, the interface with proof of play: the old key until old_valid_until, the new one open.
    const view = await consoleDevice(device.id);
    const oldKey = view.keys.find((k) => k.fingerprint === publicKeyFingerprint(device.keyPair.publicKey));
    const newKey = view.keys.find((k) => k.fingerprint === publicKeyFingerprint(keyPair.publicKey));
    expect(oldKey?.accepted_until).toBe(answer.old_valid_until);
    expect(newKey?.accepted_until).toBeNull();
    expect(view.certificates.map((c) => c.state)).toEqual(['current', 'superseded']);
    p.clock.set(T0);
  });

  test('the CSR may be base64 of DER; exactly 60 days left is due', async () => {
    const device = await deviceEnrolled(305); // exactly 60 days left at T0
    const keyPair = generateEs256KeyPair();
    const pem = await csrFor(keyPair);
    const der = base64Encode(new Uint8Array(Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64')));
    const res = await renew(p, { cert: device.certPem, key: device.keyPem, csr: der });
    expect(readCertificate(expectStatus(res, 200).json<RenewBody>().certificate_pem).publicKeySpki).toBe(
      exportPublicKeySpki(keyPair.publicKey),
    );
  });

  test('only the new certificate may renew afterwards', async () => {
    const device = await deviceEnrolled(310);
    const first = await renewWithNewKey(device);
    const answer = expectStatus(first.res, 200).json<RenewBody>();
    const renewed: TestDevice = {
      ...device,
      certPem: answer.certificate_pem,
      keyPem: first.keyPem,
      keyPair: first.keyPair,
    };
    // The old certificate, with another CSR: refused.
    const fromOld = await renewWithNewKey(device);
    expect(expectStatus(fromOld.res, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^not_newest/,
    );
    // The new certificate renews (with force, since it has a year left, after a grant).
    const grant = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/devices/${device.id}/allow-force-renewal`,
    );
    expect(grant.statusCode).toBe(200);
    const second = await renewWithNewKey(renewed, { force: true });
    expectStatus(second.res, 200);
  });
});

/** Revokes a device through the console, as an administrator does. */
async function revoke(deviceId: string): Promise<void> {
  const res = await apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/devices/${deviceId}/revoke`);
  expect(res.statusCode, res.body).toBe(200);
}

describe('renewal: refusals', () => {
  test('a revoked device: 401 device_unauthorized', async () => {
    const device = await deviceEnrolled(310);
    await revoke(device.id);
    expectStatus((await renewWithNewKey(device)).res, 401, 'device_unauthorized');
  });

  test('a superseded certificate: 409 within its 24 hours (not the newest), 401 after', async () => {
    const device = await deviceEnrolled(310);
    expectStatus((await renewWithNewKey(device)).res, 200);
    const within = (await renewWithNewKey(device)).res;
    expect(expectStatus(within, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^not_newest/,
    );
    p.clock.set(at(24 * HOUR_MS + MINUTE_MS));
    expectStatus((await renewWithNewKey(device)).res, 401, 'device_unauthorized');
    p.clock.set(T0);
  });

  test('an unchanged key: 409 renewal_refused', async () => {
    const device = await deviceEnrolled(310);
    const res = await renew(p, {
      cert: device.certPem,
      key: device.keyPem,
      csr: await csrFor(device.keyPair),
    });
    expect(expectStatus(res, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^unchanged_key/,
    );
  });

  test('a key held by another device: 409 renewal_refused', async () => {
    const device = await deviceEnrolled(310);
    const other = await deviceEnrolled(10);
    const res = await renew(p, {
      cert: device.certPem,
      key: device.keyPem,
      csr: await csrFor(other.keyPair),
    });
    expect(expectStatus(res, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(/^key_held/);
  });

  test('61 days left without force: 409; with force but no grant: 409; with a live grant: 200', async () => {
    const device = await deviceEnrolled(304); // 61 days left
    const notDue = (await renewWithNewKey(device)).res;
    expect(expectStatus(notDue, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^not_due/,
    );
    const noGrant = (await renewWithNewKey(device, { force: true })).res;
    expect(expectStatus(noGrant, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^force_not_allowed/,
    );

    p.clock.set(at(-23 * HOUR_MS - 59 * MINUTE_MS));
    const grant = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/devices/${device.id}/allow-force-renewal`,
    );
    expect(grant.json()).toEqual({ device_id: device.id, until: at(MINUTE_MS).toISOString() });
    p.clock.set(T0);
    // A grant does not make force optional.
    expect(expectStatus((await renewWithNewKey(device)).res, 409).json<{ detail: string }>().detail).toMatch(
      /^not_due/,
    );
    expectStatus((await renewWithNewKey(device, { force: true })).res, 200);
  });

  test('a grant allows one forced renewal: the next needs a new grant', async () => {
    const device = await deviceEnrolled(304);
    const allow = () =>
      apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/devices/${device.id}/allow-force-renewal`);
    expect((await allow()).statusCode).toBe(200);
    const first = await renewWithNewKey(device, { force: true });
    const renewed: TestDevice = {
      ...device,
      certPem: expectStatus(first.res, 200).json<{ certificate_pem: string }>().certificate_pem,
      keyPem: first.keyPem,
    };
    // The renewed certificate has a year left: forcing again needs another grant, the first is used up.
    const again = (await renewWithNewKey(renewed, { force: true })).res;
    expect(expectStatus(again, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^force_not_allowed/,
    );
    const view = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/devices/${device.id}`);
    expect(view.json()).toMatchObject({ force_renewal_until: null });
    expect((await allow()).statusCode).toBe(200);
    expectStatus((await renewWithNewKey(renewed, { force: true })).res, 200);
    const { rows } = await p.database.db.query<{ used: number }>(
      'SELECT count(*)::int AS used FROM device_force_renewal_grants WHERE device_id = $1 AND used_at IS NOT NULL',
      [device.id],
    );
    expect(rows).toEqual([{ used: 2 }]);
  });

  test('force outside the 24-hour grant: 409 renewal_refused', async () => {
    const device = await deviceEnrolled(304);
    p.clock.set(at(-24 * HOUR_MS - MINUTE_MS));
    const grant = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/devices/${device.id}/allow-force-renewal`,
    );
    expect(grant.statusCode).toBe(200);
    p.clock.set(T0);
    const res = (await renewWithNewKey(device, { force: true })).res;
    expect(expectStatus(res, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^force_not_allowed/,
    );
  });

  test('a CSR whose key was swapped after signing: 422', async () => {
    const device = await deviceEnrolled(310);
    const signer = generateEs256KeyPair();
    const swapped = generateEs256KeyPair();
    const der = Buffer.from((await csrFor(signer)).replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
    const signerSpki = Buffer.from(exportPublicKeySpki(signer.publicKey), 'base64');
    const swappedSpki = Buffer.from(exportPublicKeySpki(swapped.publicKey), 'base64');
    const offset = der.indexOf(signerSpki);
    expect(offset).toBeGreaterThan(0);
    swappedSpki.copy(der, offset);
    const res = await renew(p, { cert: device.certPem, key: device.keyPem, csr: der.toString('base64') });
    const problem = expectStatus(res, 422, 'validation_failed').json<{
      errors: { path: string; code: string }[];
    }>();
    expect(problem.errors).toEqual([expect.objectContaining({ path: '/csr', code: 'bad_signature' })]);
  });

  test('a CSR for a P-384 key, or no CSR at all: 422', async () => {
    const device = await deviceEnrolled(310);
    const files = await tempFiles({});
    try {
      await execFileAsync('openssl', [
        'ecparam',
        '-name',
        'secp384r1',
        '-genkey',
        '-noout',
        '-out',
        `${files.dir}/k.pem`,
      ]);
      const { stdout: csr } = await execFileAsync('openssl', [
        'req',
        '-new',
        '-key',
        `${files.dir}/k.pem`,
        '-subj',
        '/CN=x',
      ]);
      const res = await renew(p, { cert: device.certPem, key: device.keyPem, csr });
      const problem = expectStatus(res, 422, 'validation_failed').json<{ errors: { code: string }[] }>();
      expect(problem.errors[0]?.code).toBe('unsupported_algorithm');
    } finally {
      await files.cleanup();
    }
    const garbage = await renew(p, {
      cert: device.certPem,
      key: device.keyPem,
      csr: 'not a certificate request',
    });
    expect(
      expectStatus(garbage, 422, 'validation_failed').json<{ errors: { code: string }[] }>().errors[0]?.code,
    ).toBe('invalid_csr');
  });

  test('a CSR whose DER the ASN.1 reader throws on: 422 invalid_csr, and the device is not marked stuck', async () => {
    // asn1js throws a plain Error on a GeneralizedTime (tag 0x18) it cannot convert: these answered 500
    // internal_error, and the 5xx recorder then showed the device as stuck (server-errors.ts).
    const device = await deviceEnrolled(310);
    for (const csr of ['GAA=', 'GAEw', 'MAMYATA=']) {
      const res = await renew(p, { cert: device.certPem, key: device.keyPem, csr });
      const problem = expectStatus(res, 422, 'validation_failed').json<{
        errors: { path: string; code: string }[];
      }>();
      expect(problem.errors).toEqual([expect.objectContaining({ path: '/csr', code: 'invalid_csr' })]);
    }
    const { rows } = await p.database.db.query('SELECT 1 FROM device_server_errors WHERE device_id = $1', [
      device.id,
    ]);
    expect(rows).toEqual([]);
    expect((await consoleDevice(device.id)).certificates).toHaveLength(1);
  });

  test('a missing, malformed or wrong body signature, or one by the wrong key: 401 bad_signature', async () => {
    const device = await deviceEnrolled(310);
    const csr = await csrFor(generateEs256KeyPair());
    const missing = await renew(p, { cert: device.certPem, key: device.keyPem, csr, signWith: null });
    expectStatus(missing, 401, 'bad_signature');
    const malformed = await renew(p, { cert: device.certPem, key: device.keyPem, csr, signature: 'abc' });
    expectStatus(malformed, 401, 'bad_signature');
    // Signed by the right key, over other bytes.
    const otherBytes = es256Sign(
      device.keyPair.privateKey,
      new TextEncoder().encode('{"csr":"something else"}'),
    );
    expectStatus(
      await renew(p, { cert: device.certPem, key: device.keyPem, csr, signature: otherBytes }),
      401,
      'bad_signature',
    );
    // Signed by another key: a stranger's, or another device's.
    const stranger = generateEs256KeyPair().privateKey;
    expectStatus(
      await renew(p, { cert: device.certPem, key: device.keyPem, csr, signWith: stranger }),
      401,
      'bad_signature',
    );
    const other = await deviceEnrolled(310);
    const byOther = await renew(p, {
      cert: device.certPem,
      key: device.keyPem,
      csr,
      signWith: other.keyPair.privateKey,
    });
    expectStatus(byOther, 401, 'bad_signature');
    // Nothing was renewed.
    expect((await consoleDevice(device.id)).certificates).toHaveLength(1);
  });
});

describe('renewal: the credential before the body', () => {
  /** POST /d/v1/renew with these exact body bytes and headers, signed by the certificate's key unless `signed` is false. */
  function post(
    device: TestDevice,
    body: string | Buffer,
    options: { signed?: boolean; headers?: Record<string, string> } = {},
  ) {
    const bytes = Buffer.from(body);
    const signature = es256Sign(device.keyPair.privateKey, new Uint8Array(bytes));
    return deviceRequest(p, {
      path: '/d/v1/renew',
      cert: device.certPem,
      key: device.keyPem,
      body: bytes,
      headers: {
        ...(options.signed === false ? {} : { 'x-service-signature': signature }),
        ...options.headers,
      },
    });
  }

  /** Hostile bodies: each is refused before the credential is looked at if the body is judged first. */
  const hostileBodies: { body: string | Buffer; headers?: Record<string, string>; judgedAs: string }[] = [
    { body: '{}', judgedAs: '422 validation_failed' },
    { body: '{"csr":""}', judgedAs: '422 validation_failed' },
    { body: '{"csr":1,"force":"true"}', judgedAs: '422 validation_failed' },
    { body: 'not json', judgedAs: '400 invalid_json' },
    { body: Buffer.alloc(70_000, 0x20), judgedAs: '413 body_too_large' },
    { body: '{"csr":"x"}', headers: { 'content-type': 'text/plain' }, judgedAs: '415' },
    { body: '{"csr":"x"}', headers: { 'content-encoding': 'gzip' }, judgedAs: '415' },
  ];

  test('a revoked device: 401 device_unauthorized whatever the body, signed or not', async () => {
    const device = await deviceEnrolled(310);
    await revoke(device.id);
    for (const { body, headers, judgedAs } of hostileBodies) {
      for (const signed of [true, false]) {
        const res = await post(device, body, { signed, ...(headers ? { headers } : {}) });
        expect(res.status, `${judgedAs}, signed ${signed}`).toBe(401);
        expectStatus(res, 401, 'device_unauthorized');
      }
    }
    expect((await consoleDevice(device.id)).certificates).toHaveLength(1);
  });

  test('a revoked device is answered before its body is sent, and the connection closes', async () => {
    const device = await deviceEnrolled(310);
    await revoke(device.id);
    // A megabyte announced, only the headers sent: the answer comes without a byte of the body.
    const answer = await new Promise<{ status: number; connection: unknown; body: string }>(
      (resolve, reject) => {
        const request = https.request(
          {
            host: '127.0.0.1',
            port: p.devicesPort,
            method: 'POST',
            path: '/d/v1/renew',
            agent: false,
            ca: p.ca.rootPem,
            cert: device.certPem,
            key: device.keyPem,
            headers: {
              'content-type': 'application/json',
              'content-length': '1000000',
              'x-service-signature': 'A'.repeat(86),
            },
          },
          (response) => {
            const chunks: Buffer[] = [];
            response.on('data', (c: Buffer) => chunks.push(c));
            response.on('end', () => {
              request.destroy();
              resolve({
                status: response.statusCode ?? 0,
                connection: response.headers.connection,
                body: Buffer.concat(chunks).toString('utf8'),
              });
            });
          },
        );
        request.on('error', reject);
        request.flushHeaders();
      },
    );
    expect(answer.status, answer.body).toBe(401);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'device_unauthorized' });
    expect(answer.connection).toBe('close');
  });

  test('a certificate past its grace: 401 device_unauthorized whatever the body', async () => {
    const device = await deviceEnrolled(310);
    const first = await renewWithNewKey(device);
    const issued = expectStatus(first.res, 200).json<RenewBody>();
    expectStatus(await whoami(p, issued.certificate_pem, first.keyPem), 200);
    p.clock.set(at(24 * HOUR_MS + MINUTE_MS));
    try {
      for (const { body, headers, judgedAs } of hostileBodies) {
        const res = await post(device, body, headers ? { headers } : {});
        expect(res.status, judgedAs).toBe(401);
        expectStatus(res, 401, 'device_unauthorized');
      }
    } finally {
      p.clock.set(T0);
    }
  });

  test('a live device without X-Service-Signature: 401 bad_signature whatever the body', async () => {
    const device = await deviceEnrolled(310);
    for (const { body, headers, judgedAs } of hostileBodies) {
      const res = await post(device, body, { signed: false, ...(headers ? { headers } : {}) });
      expect(res.status, judgedAs).toBe(401);
      expectStatus(res, 401, 'bad_signature');
    }
    expect((await consoleDevice(device.id)).certificates).toHaveLength(1);
  });

  test("a live device's body signed by another key: 401 bad_signature before its fields are judged", async () => {
    const device = await deviceEnrolled(310);
    const stranger = generateEs256KeyPair().privateKey;
    for (const body of ['{}', '{"csr":""}', '{"csr":1,"force":"true"}']) {
      const bytes = new TextEncoder().encode(body);
      const res = await post(device, body, {
        headers: { 'x-service-signature': es256Sign(stranger, bytes) },
      });
      expectStatus(res, 401, 'bad_signature');
    }
    // Signed by its own key, the same bodies are judged: 422 at their fields.
    expectStatus(await post(device, '{"csr":""}'), 422, 'validation_failed');
    expectStatus(await post(device, 'not json'), 400, 'invalid_json');
  });
});

describe('renewal: a lost answer', () => {
  test('the same CSR again from the old certificate gets the certificate already issued', async () => {
    const device = await deviceEnrolled(310);
    const first = await renewWithNewKey(device);
    const issued = expectStatus(first.res, 200).json<RenewBody>();
    // The answer was lost: later, the player sends the same CSR again (in the other encoding, even).
    p.clock.set(at(2 * HOUR_MS));
    const der = first.csr.replace(/-----[A-Z ]+-----|\s/g, '');
    const again = expectStatus(
      await renew(p, { cert: device.certPem, key: device.keyPem, csr: der }),
      200,
    ).json<RenewBody>();
    expect(again).toEqual(issued);
    expect(new X509Certificate(again.certificate_pem).serialNumber).toBe(
      new X509Certificate(issued.certificate_pem).serialNumber,
    );
    // Any other CSR from the old certificate is refused.
    const other = (await renewWithNewKey(device)).res;
    expect(expectStatus(other, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^not_newest/,
    );
    expect((await consoleDevice(device.id)).certificates).toHaveLength(2);
    p.clock.set(T0);
  });

  test('a forced renewal whose answer was lost: the same CSR (force: true) gets the certificate issued, its grant used once', async () => {
    const device = await deviceEnrolled(304); // 61 days left: only a forced renewal may renew
    const allow = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/devices/${device.id}/allow-force-renewal`,
    );
    expect(allow.statusCode).toBe(200);
    const first = await renewWithNewKey(device, { force: true });
    const issued = expectStatus(first.res, 200).json<RenewBody>();
    // The grant is used up, yet the replay of the lost answer needs none.
    const again = await renew(p, { cert: device.certPem, key: device.keyPem, csr: first.csr, force: true });
    expect(expectStatus(again, 200).json<RenewBody>()).toEqual(issued);
    const { rows } = await p.database.db.query(
      `SELECT used_for_serial FROM device_force_renewal_grants WHERE device_id = $1`,
      [device.id],
    );
    expect(rows).toEqual([{ used_for_serial: readCertificate(issued.certificate_pem).serialHex }]);
    expect((await consoleDevice(device.id)).certificates).toHaveLength(2);
  });

  test('once the new certificate has been used, the same CSR is refused', async () => {
    const device = await deviceEnrolled(310);
    const first = await renewWithNewKey(device);
    const issued = expectStatus(first.res, 200).json<RenewBody>();
    expectStatus(await whoami(p, issued.certificate_pem, first.keyPem), 200);
    const view = await consoleDevice(device.id);
    expect(view.certificates[0]?.first_used_at).toBe(T0.toISOString());
    const again = await renew(p, { cert: device.certPem, key: device.keyPem, csr: first.csr });
    expect(expectStatus(again, 409, 'renewal_refused').json<{ detail: string }>().detail).toMatch(
      /^not_newest/,
    );
  });

  test("past the old certificate's old_valid_until, the same CSR still gets the certificate already issued, and nothing else", async () => {
    // The answer was lost, then the player was offline for three days: its old certificate is past its
    // old_valid_until, and the new one never reached it.
    const device = await deviceEnrolled(310);
    const first = await renewWithNewKey(device);
    const issued = expectStatus(first.res, 200).json<RenewBody>();
    p.clock.set(at(3 * DAY_MS));
    try {
      const again = expectStatus(
        await renew(p, { cert: device.certPem, key: device.keyPem, csr: first.csr }),
        200,
      ).json<RenewBody>();
      // The very answer it lost: the same certificate, and the old_valid_until now past.
      expect(again).toEqual(issued);
      expect(again.old_valid_until).toBe(at(24 * HOUR_MS).toISOString());
      // Nothing else from the old certificate: another CSR, telemetry, whoami.
      expectStatus((await renewWithNewKey(device)).res, 401, 'device_unauthorized');
      const telemetry = await deviceRequest(p, {
        path: '/d/v1/telemetry',
        cert: device.certPem,
        key: device.keyPem,
        body: JSON.stringify({ schema: 'service.pop/1', batch_seq: 0, events: [] }),
      });
      expectStatus(telemetry, 401, 'device_unauthorized');
      expectStatus(await whoami(p, device.certPem, device.keyPem), 401, 'device_unauthorized');
      // The same CSR signed by another key is no replay.
      const stranger = await renew(p, {
        cert: device.certPem,
        key: device.keyPem,
        csr: first.csr,
        signWith: generateEs256KeyPair().privateKey,
      });
      expectStatus(stranger, 401, 'bad_signature');
      const view = await consoleDevice(device.id);
      expect(view.certificates.map((c) => c.state)).toEqual(['current', 'superseded']);
      expect(view.certificates[0]?.first_used_at).toBeNull();
      // The new pair works; from then on the replay is over.
      expectStatus(await whoami(p, issued.certificate_pem, first.keyPem), 200);
      expectStatus(
        await renew(p, { cert: device.certPem, key: device.keyPem, csr: first.csr }),
        401,
        'device_unauthorized',
      );
    } finally {
      p.clock.set(T0);
    }
  });

  test("past old_valid_until the replay ends with a re-enrolment, a revocation, or the old certificate's NotAfter", async () => {
    const reEnrolled = await deviceEnrolled(310);
    const lostToReEnrolment = await renewWithNewKey(reEnrolled);
    expectStatus(lostToReEnrolment.res, 200);
    const reEnrol = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/devices/${reEnrolled.id}/re-enrol`,
      { public_key: exportPublicKeySpki(generateEs256KeyPair().publicKey) },
    );
    expect(reEnrol.statusCode, reEnrol.body).toBe(200);

    const revoked = await deviceEnrolled(310);
    const lostToRevocation = await renewWithNewKey(revoked);
    expectStatus(lostToRevocation.res, 200);
    await revoke(revoked.id);

    // 340 days ago: 25 days left, so the old certificate's NotAfter is 25 days on (TLS checks the machine clock,
    // the platform its own).
    const expired = await deviceEnrolled(340);
    const lostToExpiry = await renewWithNewKey(expired);
    expectStatus(lostToExpiry.res, 200);

    p.clock.set(at(3 * DAY_MS));
    try {
      for (const [device, lost] of [
        [reEnrolled, lostToReEnrolment],
        [revoked, lostToRevocation],
      ] as const) {
        expectStatus(
          await renew(p, { cert: device.certPem, key: device.keyPem, csr: lost.csr }),
          401,
          'device_unauthorized',
        );
      }
      // Before its NotAfter it still gets its answer, past it not.
      expectStatus(
        await renew(p, { cert: expired.certPem, key: expired.keyPem, csr: lostToExpiry.csr }),
        200,
      );
      p.clock.set(at(26 * DAY_MS));
      expectStatus(
        await renew(p, { cert: expired.certPem, key: expired.keyPem, csr: lostToExpiry.csr }),
        401,
        'device_unauthorized',
      );
    } finally {
      p.clock.set(T0);
    }
  });
});

describe('renewal: concurrent requests', () => {
  test('the same CSR twice at once: one certificate, both answered with it', async () => {
    const device = await deviceEnrolled(310);
    const csr = await csrFor(generateEs256KeyPair());
    const [a, b] = await Promise.all([
      renew(p, { cert: device.certPem, key: device.keyPem, csr }),
      renew(p, { cert: device.certPem, key: device.keyPem, csr }),
    ]);
    expect(expectStatus(a, 200).json<RenewBody>()).toEqual(expectStatus(b, 200).json<RenewBody>());
    expect((await consoleDevice(device.id)).certificates).toHaveLength(2);
  });

  test('two different CSRs at once: one renewal, one refusal', async () => {
    const device = await deviceEnrolled(310);
    const results = await Promise.all([renewWithNewKey(device), renewWithNewKey(device)]);
    const statuses = results.map((r) => r.res.status).sort();
    expect(statuses).toEqual([200, 409]);
    expect((await consoleDevice(device.id)).certificates).toHaveLength(2);
  });
});

describe('createCsr subjects do not matter', () => {
  test('the certificate names the device id whatever the CSR subject says', async () => {
    const device = await deviceEnrolled(310);
    const keyPair = generateEs256KeyPair();
    const csr = await createCsr({ subject: 'CN=00000000-0000-4000-8000-000000000000', keyPair });
    const answer = expectStatus(
      await renew(p, { cert: device.certPem, key: device.keyPem, csr }),
      200,
    ).json<RenewBody>();
    expect(readCertificate(answer.certificate_pem).subject).toContain(`CN=${device.id}`);
  });
});
