import {
  exportPrivateKeyPem,
  exportPublicKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  publicKeyFingerprint,
  readCertificate,
  splitPemChain,
} from '@ooh/crypto';
import { addCalendarYears } from '@ooh/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { apiCall, createOrganisation, createStructure } from '../support/platform.js';
import {
  csrFor,
  DAY_MS,
  type DevicesTestPlatform,
  enrolDevice,
  expectStatus,
  HOUR_MS,
  MINUTE_MS,
  realNow,
  startDevicesPlatform,
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

interface DeviceView {
  device_id: string;
  structure_code: string;
  revoked_at: string | null;
  re_enrolled_at: string | null;
  force_renewal_until: string | null;
  keys: { fingerprint: string; public_key: string; registered_at: string; accepted_until: string | null }[];
  certificates: {
    serial: string;
    state: string;
    not_before: string;
    not_after: string;
    issued_by: string;
    old_valid_until: string | null;
  }[];
}

const console_ = (method: 'GET' | 'POST', url: string, body?: unknown, key = p.adminKey) =>
  apiCall(p.servers.api, key, method, url, body);

async function view(id: string, key = p.adminKey): Promise<DeviceView> {
  const res = await console_('GET', `/api/v1/console/devices/${id}`, undefined, key);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<DeviceView>();
}

const errorsOf = (res: { statusCode: number; body: string; json: () => unknown }) => {
  expect(res.statusCode, res.body).toBe(422);
  return (res.json() as { code: string; errors: { path: string; code: string }[] }).errors;
};

describe('enrolment', () => {
  test('with a public key only: the device and its key, no certificate', async () => {
    const keyPair = generateEs256KeyPair();
    const res = await console_('POST', '/api/v1/console/devices', {
      structure_id: p.structure.id,
      public_key: exportPublicKeySpki(keyPair.publicKey),
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<Record<string, unknown>>();
    expect(Object.keys(body).sort()).toEqual(['device_id', 'structure_code']);
    expect(body['structure_code']).toBe(p.structure.code);
    const v = await view(body['device_id'] as string);
    expect(v.certificates).toEqual([]);
    expect(v.keys).toEqual([
      {
        fingerprint: publicKeyFingerprint(keyPair.publicKey),
        public_key: exportPublicKeySpki(keyPair.publicKey),
        registered_at: T0.toISOString(),
        accepted_until: null,
      },
    ]);
  });

  test('one year is a calendar year: issued 2027-09-25, valid until 2028-09-25 across the leap day', async () => {
    p.clock.set(new Date('2027-09-25T10:00:00.000Z'));
    try {
      const keyPair = generateEs256KeyPair();
      const res = await console_('POST', '/api/v1/console/devices', {
        structure_id: p.structure.id,
        public_key: exportPublicKeyPem(keyPair.publicKey),
        csr: await csrFor(keyPair),
      });
      expect(res.statusCode, res.body).toBe(201);
      const body = res.json<{ certificate_pem: string; not_after: string }>();
      expect(body.not_after).toBe('2028-09-25T10:00:00.000Z');
      expect(readCertificate(body.certificate_pem).notAfter.toISOString()).toBe('2028-09-25T10:00:00.000Z');
    } finally {
      p.clock.set(T0);
    }
  });

  test('with a CSR: a one-year client certificate naming the device, and the chain to the device CA', async () => {
    const keyPair = generateEs256KeyPair();
    const res = await console_('POST', '/api/v1/console/devices', {
      structure_id: p.structure.id,
      // PEM is accepted as well as base64 SPKI DER.
      public_key: exportPublicKeyPem(keyPair.publicKey),
      csr: await csrFor(keyPair),
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<{
      device_id: string;
      certificate_pem: string;
      chain_pem: string;
      not_after: string;
    }>();
    const cert = readCertificate(body.certificate_pem);
    expect(cert.subject).toContain(`CN=${body.device_id}`);
    expect(cert.publicKeySpki).toBe(exportPublicKeySpki(keyPair.publicKey));
    expect(cert.notAfter.toISOString()).toBe(body.not_after);
    expect(body.not_after).toBe(addCalendarYears(T0, 1).toISOString());
    expect(cert.notBefore.toISOString()).toBe(new Date(T0.getTime() - 5 * MINUTE_MS).toISOString());
    expect(splitPemChain(body.chain_pem).map((pem) => pem.trim())).toEqual(
      p.ca.trustPems.map((pem) => pem.trim()),
    );
    const v = await view(body.device_id);
    expect(v.certificates).toEqual([
      expect.objectContaining({
        serial: cert.serialHex,
        state: 'current',
        issued_by: 'enrolment',
        old_valid_until: null,
      }),
    ]);
  });

  test('refusals: a CSR for another key, a key already held, a bad key, a bad CSR, an unknown structure', async () => {
    const keyPair = generateEs256KeyPair();
    const other = generateEs256KeyPair();
    const mismatch = await console_('POST', '/api/v1/console/devices', {
      structure_id: p.structure.id,
      public_key: exportPublicKeySpki(keyPair.publicKey),
      csr: await csrFor(other),
    });
    expect(errorsOf(mismatch)).toEqual([expect.objectContaining({ path: '/csr', code: 'key_mismatch' })]);

    const device = await enrolDevice(p);
    const held = await console_('POST', '/api/v1/console/devices', {
      structure_id: p.structure.id,
      public_key: exportPublicKeySpki(device.keyPair.publicKey),
    });
    expect(errorsOf(held)).toEqual([expect.objectContaining({ path: '/public_key', code: 'key_taken' })]);

    const badKey = await console_('POST', '/api/v1/console/devices', {
      structure_id: p.structure.id,
      public_key: 'A'.repeat(124),
    });
    expect(errorsOf(badKey)).toEqual([expect.objectContaining({ path: '/public_key', code: 'invalid_key' })]);

    const badCsr = await console_('POST', '/api/v1/console/devices', {
      structure_id: p.structure.id,
      public_key: exportPublicKeySpki(keyPair.publicKey),
      csr: 'garbage',
    });
    expect(errorsOf(badCsr)).toEqual([expect.objectContaining({ path: '/csr', code: 'invalid_csr' })]);

    const noStructure = await console_('POST', '/api/v1/console/devices', {
      structure_id: '00000000-0000-4000-8000-000000000000',
      public_key: exportPublicKeySpki(keyPair.publicKey),
    });
    expect(errorsOf(noStructure)).toEqual([
      expect.objectContaining({ path: '/structure_id', code: 'not_found' }),
    ]);

    const extra = await console_('POST', '/api/v1/console/devices', {
      structure_id: p.structure.id,
      public_key: exportPublicKeySpki(keyPair.publicKey),
      name: 'x',
    });
    expect(errorsOf(extra)).toEqual([expect.objectContaining({ path: '/name', code: 'unknown_key' })]);
  });

  test('a CSR whose DER the ASN.1 reader throws on: 422 invalid_csr on enrolment and re-enrolment, never a 500', async () => {
    // asn1js throws on a GeneralizedTime (tag 0x18) it cannot convert; these answered 500 internal_error.
    const device = await enrolDevice(p);
    for (const csr of ['GAA=', 'GAEw', 'MAMYATA=']) {
      const enrol = await console_('POST', '/api/v1/console/devices', {
        structure_id: p.structure.id,
        public_key: exportPublicKeySpki(generateEs256KeyPair().publicKey),
        csr,
      });
      expect(errorsOf(enrol)).toEqual([expect.objectContaining({ path: '/csr', code: 'invalid_csr' })]);
      const reEnrol = await console_('POST', `/api/v1/console/devices/${device.id}/re-enrol`, {
        public_key: exportPublicKeySpki(generateEs256KeyPair().publicKey),
        csr,
      });
      expect(errorsOf(reEnrol)).toEqual([expect.objectContaining({ path: '/csr', code: 'invalid_csr' })]);
    }
    // Nothing changed: the device keeps its one certificate.
    expect((await view(device.id)).certificates).toHaveLength(1);
  });

  test('an operator enrols on its own structures only, and sees only its own devices', async () => {
    const mine = await enrolDeviceAs(p.operator.key, p.structure.id);
    expect(mine.statusCode, mine.body).toBe(201);
    const otherOperator = await createOrganisation(p, 'operator', ['console:fleet']);
    const theirs = await createStructure(p, otherOperator.id);
    const refused = await enrolDeviceAs(p.operator.key, theirs.id);
    expect(errorsOf(refused)).toEqual([
      expect.objectContaining({ path: '/structure_id', code: 'not_found' }),
    ]);

    const id = mine.json<{ device_id: string }>().device_id;
    expect(
      (await console_('GET', `/api/v1/console/devices/${id}`, undefined, p.operator.key)).statusCode,
    ).toBe(200);
    const hidden = await console_('GET', `/api/v1/console/devices/${id}`, undefined, otherOperator.key);
    expect(hidden.statusCode).toBe(404);
    expect(hidden.json<{ code: string }>().code).toBe('not_found');
    expect(
      (await console_('POST', `/api/v1/console/devices/${id}/revoke`, undefined, otherOperator.key))
        .statusCode,
    ).toBe(404);

    const advertiser = await createOrganisation(p, 'advertiser', ['write:submissions']);
    const denied = await console_('GET', `/api/v1/console/devices/${id}`, undefined, advertiser.key);
    expect(denied.statusCode).toBe(403);
    expect((await console_('GET', '/api/v1/console/devices/not-a-uuid')).statusCode).toBe(404);
  });

  async function enrolDeviceAs(key: string, structureId: string) {
    const keyPair = generateEs256KeyPair();
    return console_(
      'POST',
      '/api/v1/console/devices',
      {
        structure_id: structureId,
        public_key: exportPublicKeySpki(keyPair.publicKey),
        csr: await csrFor(keyPair),
      },
      key,
    );
  }
});

describe('revocation and force grants', () => {
  test('revoke: every certificate shows revoked, the certificate is refused; revoking again keeps the first time', async () => {
    const device = await enrolDevice(p);
    expectStatus(await whoami(p, device.certPem, device.keyPem), 200);
    const res = await console_('POST', `/api/v1/console/devices/${device.id}/revoke`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<DeviceView>()).toMatchObject({
      revoked_at: T0.toISOString(),
      certificates: [{ state: 'revoked' }],
    });
    expectStatus(await whoami(p, device.certPem, device.keyPem), 401, 'device_unauthorized');
    p.clock.set(new Date(T0.getTime() + HOUR_MS));
    const again = await console_('POST', `/api/v1/console/devices/${device.id}/revoke`);
    expect(again.json<DeviceView>().revoked_at).toBe(T0.toISOString());
    const grant = await console_('POST', `/api/v1/console/devices/${device.id}/allow-force-renewal`);
    expect(grant.statusCode).toBe(409);
    expect(grant.json<{ code: string }>().code).toBe('state_conflict');
    p.clock.set(T0);
  });

  test('allow-force-renewal: until is 24 hours on; the device view shows it while it lasts', async () => {
    const device = await enrolDevice(p);
    const res = await console_('POST', `/api/v1/console/devices/${device.id}/allow-force-renewal`);
    expect(res.statusCode, res.body).toBe(200);
    const until = new Date(T0.getTime() + 24 * HOUR_MS).toISOString();
    expect(res.json()).toEqual({ device_id: device.id, until });
    expect((await view(device.id)).force_renewal_until).toBe(until);
    p.clock.set(new Date(T0.getTime() + 24 * HOUR_MS));
    expect((await view(device.id)).force_renewal_until).toBeNull();
    p.clock.set(T0);
  });
});

describe('re-enrolment: a device whose certificate expired offline is not bricked', () => {
  test('a new key and CSR keep the device id and history; older certificates and keys stop at once', async () => {
    // Enrolled 400 days ago: its certificate expired 35 days ago, for TLS too.
    p.clock.set(new Date(T0.getTime() - 400 * DAY_MS));
    const device = await enrolDevice(p);
    p.clock.set(T0);
    const expired = await whoami(p, device.certPem, device.keyPem);
    expect(expired.status).toBeUndefined();

    const keyPair = generateEs256KeyPair();
    const res = await console_('POST', `/api/v1/console/devices/${device.id}/re-enrol`, {
      public_key: exportPublicKeySpki(keyPair.publicKey),
      csr: await csrFor(keyPair),
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<{ device_id: string; certificate_pem: string; not_after: string }>();
    expect(body.device_id).toBe(device.id);
    const me = expectStatus(
      await whoami(p, body.certificate_pem, exportPrivateKeyPem(keyPair.privateKey)),
      200,
    );
    expect(me.json()).toMatchObject({ device_id: device.id, certificate_state: 'current' });

    const v = await view(device.id);
    expect(v.re_enrolled_at).toBe(T0.toISOString());
    expect(v.certificates.map((c) => [c.issued_by, c.state])).toEqual([
      ['re-enrolment', 'current'],
      ['enrolment', 'superseded'],
    ]);
    const oldKey = v.keys.find((k) => k.fingerprint === publicKeyFingerprint(device.keyPair.publicKey));
    expect(oldKey?.accepted_until).toBe(T0.toISOString());
    const newKey = v.keys.find((k) => k.fingerprint === publicKeyFingerprint(keyPair.publicKey));
    expect(newKey?.accepted_until).toBeNull();
  });

  test('re-enrolment with a valid certificate ends it at once; the device may keep its own key', async () => {
    const device = await enrolDevice(p);
    const res = await console_('POST', `/api/v1/console/devices/${device.id}/re-enrol`, {
      public_key: exportPublicKeySpki(device.keyPair.publicKey),
      csr: await csrFor(device.keyPair),
    });
    expect(res.statusCode, res.body).toBe(200);
    const fresh = res.json<{ certificate_pem: string }>();
    expectStatus(await whoami(p, device.certPem, device.keyPem), 401, 'device_unauthorized');
    expectStatus(await whoami(p, fresh.certificate_pem, device.keyPem), 200);
    const v = await view(device.id);
    expect(v.keys).toHaveLength(1);
    expect(v.keys[0]?.accepted_until).toBeNull();
  });

  test('refused for a key held by another device, and for a revoked device', async () => {
    const device = await enrolDevice(p);
    const other = await enrolDevice(p);
    const held = await console_('POST', `/api/v1/console/devices/${device.id}/re-enrol`, {
      public_key: exportPublicKeySpki(other.keyPair.publicKey),
    });
    expect(errorsOf(held)).toEqual([expect.objectContaining({ path: '/public_key', code: 'key_taken' })]);
    await console_('POST', `/api/v1/console/devices/${device.id}/revoke`);
    const revoked = await console_('POST', `/api/v1/console/devices/${device.id}/re-enrol`, {
      public_key: exportPublicKeySpki(generateEs256KeyPair().publicKey),
    });
    expect(revoked.statusCode).toBe(409);
    expect(revoked.json<{ code: string }>().code).toBe('state_conflict');
  });
});
