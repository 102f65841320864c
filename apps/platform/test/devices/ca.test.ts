import { X509Certificate } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { exportPrivateKeyPem, generateEs256KeyPair, splitPemChain } from '@ooh/crypto';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { DEVICE_CA_FILES, DeviceCaError, loadDeviceCa, loadServerTlsPair } from '../../src/devices/ca.js';
import { loadDeviceIdentitySettings } from '../../src/devices/settings.js';
import { execFileAsync, realNow } from './helpers.js';

const log = pino({ level: 'silent' });
let dataDir: string;

beforeEach(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-device-ca-'));
});
afterEach(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

const mode = async (file: string) => (await stat(file)).mode & 0o777;

describe('the generated device CA', () => {
  test('created on first start: keys 0600, folder 0700; the next start reads the same CA and server certificate', async () => {
    const now = realNow();
    const settings = loadDeviceIdentitySettings({ dataDir }, {});
    const ca = await loadDeviceCa(settings, now, log);
    const tls = await loadServerTlsPair(settings, ca, now, log);
    const dir = path.join(dataDir, 'device-ca');
    expect(await mode(dir)).toBe(0o700);
    for (const key of [DEVICE_CA_FILES.rootKey, DEVICE_CA_FILES.issuingKey, DEVICE_CA_FILES.tlsKey]) {
      expect(await mode(path.join(dir, key)), key).toBe(0o600);
    }
    expect(splitPemChain(ca.chainPem)).toHaveLength(2);
    expect(ca.rootPem.trim()).toBe((await readFile(path.join(dir, DEVICE_CA_FILES.rootCert), 'utf8')).trim());

    const again = await loadDeviceCa(settings, now, log);
    expect(again.rootPem).toBe(ca.rootPem);
    expect(again.issuingCertPem).toBe(ca.issuingCertPem);
    expect((await loadServerTlsPair(settings, again, now, log)).certPem).toBe(tls.certPem);

    // openssl: the server certificate chains to the root for TLS servers.
    const { stdout } = await execFileAsync('openssl', [
      'verify',
      '-purpose',
      'sslserver',
      '-CAfile',
      path.join(dir, DEVICE_CA_FILES.rootCert),
      '-untrusted',
      path.join(dir, DEVICE_CA_FILES.issuingCert),
      path.join(dir, DEVICE_CA_FILES.tlsCert),
    ]);
    expect(stdout).toContain(': OK');
    const leaf = new X509Certificate(splitPemChain(tls.certPem)[0]!);
    expect(leaf.checkHost('localhost')).toBe('localhost');
    expect(leaf.checkIP('127.0.0.1')).toBe('127.0.0.1');
  });

  test('two starts at once on one data directory end with one CA', async () => {
    const now = realNow();
    const settings = loadDeviceIdentitySettings({ dataDir }, {});
    const loads = await Promise.all([1, 2, 3].map(() => loadDeviceCa(settings, now, log)));
    expect(new Set(loads.map((ca) => ca.rootPem)).size).toBe(1);
    expect(new Set(loads.map((ca) => ca.issuingCertPem)).size).toBe(1);
    expect((await readdir(dataDir)).sort()).toEqual(['device-ca']);
  });

  test('the server certificate is reissued for a new public host name, and when near expiry', async () => {
    const now = realNow();
    const first = loadDeviceIdentitySettings({ dataDir }, {});
    const ca = await loadDeviceCa(first, now, log);
    const original = await loadServerTlsPair(first, ca, now, log);
    const named = loadDeviceIdentitySettings({ dataDir, publicDevicesUrl: 'https://devices.city.kz' }, {});
    const renamed = await loadServerTlsPair(named, ca, now, log);
    expect(renamed.certPem).not.toBe(original.certPem);
    expect(new X509Certificate(splitPemChain(renamed.certPem)[0]!).checkHost('devices.city.kz')).toBe(
      'devices.city.kz',
    );
    const later = new Date(now.getTime() + 340 * 86_400_000);
    expect((await loadServerTlsPair(named, ca, later, log)).certPem).not.toBe(renamed.certPem);
  });
});

describe('a configured device CA', () => {
  test('read from the configured paths; a key that does not match is refused', async () => {
    const now = realNow();
    const generated = await loadDeviceCa(loadDeviceIdentitySettings({ dataDir }, {}), now, log);
    const dir = path.join(dataDir, 'device-ca');
    const secrets = path.join(dataDir, 'secrets');
    await mkdir(secrets);
    await copyFile(path.join(dir, DEVICE_CA_FILES.issuingCert), path.join(secrets, 'ca.pem'));
    await copyFile(path.join(dir, DEVICE_CA_FILES.issuingKey), path.join(secrets, 'ca.key'));
    await copyFile(path.join(dir, DEVICE_CA_FILES.rootCert), path.join(secrets, 'chain.pem'));
    const env = {
      DEVICE_CA_CERT: path.join(secrets, 'ca.pem'),
      DEVICE_CA_KEY: path.join(secrets, 'ca.key'),
      DEVICE_CA_CHAIN: path.join(secrets, 'chain.pem'),
    };
    const otherData = await mkdtemp(path.join(os.tmpdir(), 'ooh-device-ca-other-'));
    try {
      const configured = await loadDeviceCa(
        loadDeviceIdentitySettings({ dataDir: otherData }, env),
        now,
        log,
      );
      expect(configured.rootPem).toBe(generated.rootPem);
      expect(configured.chainPem).toBe(generated.chainPem);

      await writeFile(path.join(secrets, 'ca.key'), exportPrivateKeyPem(generateEs256KeyPair().privateKey));
      await expect(
        loadDeviceCa(loadDeviceIdentitySettings({ dataDir: otherData }, env), now, log),
      ).rejects.toThrow(DeviceCaError);
    } finally {
      await rm(otherData, { recursive: true, force: true });
    }
  });

  test('a configured TLS pair whose key does not match is refused', async () => {
    const now = realNow();
    const settings = loadDeviceIdentitySettings({ dataDir }, {});
    const ca = await loadDeviceCa(settings, now, log);
    const pair = await loadServerTlsPair(settings, ca, now, log);
    await writeFile(path.join(dataDir, 'tls.pem'), pair.certPem);
    await writeFile(path.join(dataDir, 'tls.key'), exportPrivateKeyPem(generateEs256KeyPair().privateKey));
    const configured = loadDeviceIdentitySettings(
      { dataDir },
      { DEVICES_TLS_CERT: path.join(dataDir, 'tls.pem'), DEVICES_TLS_KEY: path.join(dataDir, 'tls.key') },
    );
    await expect(loadServerTlsPair(configured, ca, now, log)).rejects.toThrow(DeviceCaError);
    await writeFile(path.join(dataDir, 'tls.key'), pair.keyPem);
    expect((await loadServerTlsPair(configured, ca, now, log)).certPem).toBe(pair.certPem);
  });
});
