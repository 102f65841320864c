import { createRootCa, generateEs256KeyPair, issueCertificate, randomSerialHex } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DeviceSettingsError, loadDeviceIdentitySettings } from '../../src/devices/settings.js';
import { apiCall } from '../support/platform.js';
import { DAY_MS, type DevicesTestPlatform, enrolDevice, realNow, startDevicesPlatform } from './helpers.js';

const PROXY_ENV = {
  DEVICES_TLS_TERMINATION: 'proxy',
  DEVICES_CLIENT_CERT_HEADER: 'X-Client-Cert',
  DEVICES_TRUSTED_PROXIES: '10.1.2.3, ::ffff:10.1.2.4',
};

describe('behind a TLS-terminating proxy', () => {
  let p: DevicesTestPlatform;
  let T0: Date;
  beforeAll(async () => {
    T0 = realNow();
    p = await startDevicesPlatform({ now: T0, env: PROXY_ENV });
  });
  afterAll(async () => {
    await p?.close();
  });

  const whoamiVia = (remoteAddress: string, certificate?: string) =>
    p.servers.devices.inject({
      method: 'GET',
      url: '/d/v1/whoami',
      remoteAddress,
      headers: certificate === undefined ? {} : { 'x-client-cert': certificate },
    });

  test("the listener is plain HTTP: TLS is the proxy's", () => {
    expect(p.devicesUrl.startsWith('http://')).toBe(true);
  });

  test('a trusted proxy passes the certificate (nginx $ssl_client_escaped_cert, PEM or base64 DER)', async () => {
    const device = await enrolDevice(p);
    const escaped = encodeURIComponent(device.certPem);
    for (const [from, form] of [
      ['10.1.2.3', escaped],
      ['10.1.2.4', escaped],
      ['::ffff:10.1.2.3', device.certPem.replace(/-----[A-Z ]+-----|\s/g, '')],
    ] as const) {
      const res = await whoamiVia(from, form);
      expect(res.statusCode, `${from}: ${res.body}`).toBe(200);
      expect(res.json()).toMatchObject({ device_id: device.id });
    }
  });

  test('a certificate chained once is not trusted beyond its device: revocation and dates still apply', async () => {
    const device = await enrolDevice(p);
    const escaped = encodeURIComponent(device.certPem);
    for (let i = 0; i < 3; i++) expect((await whoamiVia('10.1.2.3', escaped)).statusCode).toBe(200);
    // Past the certificate's end the remembered chain is checked again, and the certificate refused.
    const start = p.clock.now();
    p.clock.set(new Date(start.getTime() + 400 * DAY_MS));
    try {
      expect((await whoamiVia('10.1.2.3', escaped)).statusCode).toBe(401);
    } finally {
      p.clock.set(start);
    }
    expect((await whoamiVia('10.1.2.3', escaped)).statusCode).toBe(200);
    const revoked = await p.servers.api.inject({
      method: 'POST',
      url: `/api/v1/console/devices/${device.id}/revoke`,
      headers: { authorization: `Bearer ${p.adminKey}` },
    });
    expect(revoked.statusCode).toBe(200);
    const res = await whoamiVia('10.1.2.3', escaped);
    expect(res.statusCode).toBe(401);
    expect(res.json<{ code: string }>().code).toBe('device_unauthorized');
  });

  test('the header from anyone else is ignored: 401', async () => {
    const device = await enrolDevice(p);
    const res = await whoamiVia('10.9.9.9', encodeURIComponent(device.certPem));
    expect(res.statusCode).toBe(401);
    expect(res.json<{ code: string }>().code).toBe('device_unauthorized');
    expect((await whoamiVia('127.0.0.1', encodeURIComponent(device.certPem))).statusCode).toBe(401);
  });

  test('from a trusted proxy: no header, garbage, or a certificate of another CA: 401', async () => {
    expect((await whoamiVia('10.1.2.3')).statusCode).toBe(401);
    expect((await whoamiVia('10.1.2.3', 'garbage')).statusCode).toBe(401);
    const root = generateEs256KeyPair();
    const rootPem = await createRootCa({
      subject: 'CN=Other',
      keyPair: root,
      notBefore: new Date(T0.getTime() - DAY_MS),
      notAfter: new Date(T0.getTime() + DAY_MS),
    });
    const key = generateEs256KeyPair();
    const foreign = await issueCertificate({
      subject: 'CN=x',
      publicKey: key.publicKey,
      issuerCertificatePem: rootPem,
      issuerKey: root.privateKey,
      notBefore: new Date(T0.getTime() - DAY_MS),
      notAfter: new Date(T0.getTime() + DAY_MS),
      serialHex: randomSerialHex(),
      usage: 'client',
    });
    const res = await whoamiVia('10.1.2.3', encodeURIComponent(foreign));
    expect(res.statusCode).toBe(401);
    expect(res.json<{ code: string }>().code).toBe('device_unauthorized');

    // Each refusal is recorded for the fleet view with its reason and the address it came from (issue "Trust under
    // attack", item 6), like those of direct TLS (incidents.test.ts).
    const all = async () => {
      const fleet = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/devices');
      return fleet.json<{
        handshake_refusals: { recent: { reason: string; address: string; subject: string | null }[] };
      }>().handshake_refusals.recent;
    };
    const reasons = async () => (await all()).filter((r) => r.address === '10.1.2.3');
    let recent = await reasons();
    for (let i = 0; i < 100 && recent.length < 5; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      recent = await reasons();
    }
    // With those of the tests before: a certificate past its end (by the platform clock) and a revoked device.
    expect(recent.map((r) => r.reason).sort()).toEqual([
      'certificate_expired',
      'certificate_unreadable',
      'device_revoked',
      'no_certificate',
      'unknown_ca',
    ]);
    expect(recent.find((r) => r.reason === 'unknown_ca')?.subject).toBe('CN=x');
    // The header from someone not a proxy (the test before).
    expect((await all()).find((r) => r.address === '10.9.9.9')?.reason).toBe('untrusted_proxy');
  });

  test('a server certificate of the device CA is not a client certificate: 401 certificate_invalid', async () => {
    // Direct TLS refuses it (the handshake checks the client chain for clientAuth); behind a proxy the platform's
    // own check (@ooh/verify's verifyChain, purpose clientAuth) refuses it alike, before any device lookup.
    const ca = await p.ctx.caches.devices.ca();
    const key = generateEs256KeyPair();
    const server = await issueCertificate({
      subject: 'CN=devices.city.kz',
      publicKey: key.publicKey,
      issuerCertificatePem: ca.issuingCertPem,
      issuerKey: ca.issuingKey,
      notBefore: new Date(T0.getTime() - DAY_MS),
      notAfter: new Date(T0.getTime() + DAY_MS),
      serialHex: randomSerialHex(),
      usage: 'server',
      dnsNames: ['devices.city.kz'],
    });
    const res = await whoamiVia('10.1.2.4', encodeURIComponent(server));
    expect(res.statusCode).toBe(401);
    expect(res.json<{ code: string }>().code).toBe('device_unauthorized');
    let recent: { reason: string; address: string; subject: string | null }[] = [];
    for (let i = 0; i < 100 && recent.length === 0; i++) {
      const fleet = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/devices');
      recent = fleet
        .json<{
          handshake_refusals: { recent: { reason: string; address: string; subject: string | null }[] };
        }>()
        .handshake_refusals.recent.filter((r) => r.address === '10.1.2.4');
      if (recent.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(recent.map((r) => r.reason)).toEqual(['certificate_invalid']);
    expect(recent[0]?.subject).toBe('CN=devices.city.kz');
  });
});

describe('device identity settings', () => {
  test('defaults: direct TLS, generated CA in the data directory', () => {
    const s = loadDeviceIdentitySettings(
      { dataDir: '/srv/data', publicDevicesUrl: 'https://devices.example.kz:8443' },
      {},
    );
    expect(s).toEqual({
      dir: '/srv/data/device-ca',
      ca: null,
      tls: null,
      termination: 'direct',
      clientCertHeader: null,
      trustedProxies: [],
      serverNames: ['devices.example.kz'],
    });
  });

  test('configured paths are taken as given', () => {
    const s = loadDeviceIdentitySettings(
      { dataDir: '/srv/data' },
      {
        DEVICE_CA_CERT: '/run/secrets/ca.pem',
        DEVICE_CA_KEY: '/run/secrets/ca.key',
        DEVICE_CA_CHAIN: '/run/secrets/chain.pem',
        DEVICES_TLS_CERT: '/run/secrets/tls.pem',
        DEVICES_TLS_KEY: '/run/secrets/tls.key',
      },
    );
    expect(s.ca).toEqual({
      certPath: '/run/secrets/ca.pem',
      keyPath: '/run/secrets/ca.key',
      chainPath: '/run/secrets/chain.pem',
    });
    expect(s.tls).toEqual({ certPath: '/run/secrets/tls.pem', keyPath: '/run/secrets/tls.key' });
  });

  test('incomplete or wrong settings are refused, each named', () => {
    const problems = (env: NodeJS.ProcessEnv) => {
      try {
        loadDeviceIdentitySettings({ dataDir: '/d' }, env);
      } catch (error) {
        expect(error).toBeInstanceOf(DeviceSettingsError);
        return (error as DeviceSettingsError).problems;
      }
      return [];
    };
    expect(problems({ DEVICE_CA_CERT: '/x' })).toHaveLength(1);
    expect(problems({ DEVICES_TLS_KEY: '/x' })).toHaveLength(1);
    expect(problems({ DEVICES_TLS_TERMINATION: 'none' })).toHaveLength(1);
    expect(problems({ DEVICES_TLS_TERMINATION: 'proxy' })).toHaveLength(2);
    expect(
      problems({
        DEVICES_TLS_TERMINATION: 'proxy',
        DEVICES_CLIENT_CERT_HEADER: 'x-cert',
        DEVICES_TRUSTED_PROXIES: 'proxy.local',
      }),
    ).toHaveLength(1);
  });
});
