import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readCertificate } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AuthorityError, authoritySource, loadAuthority } from '../../src/authority/index.js';
import { createAuthorityFiles, GENERATED_FILES, readAuthority } from '../../src/authority/pki.js';
import { TestClock } from '../../src/clock.js';
import type { PlatformConfig } from '../../src/config.js';
import { AuthorityCache } from '../../src/authority/cache.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

const NOW = new Date('2026-11-20T06:00:00Z');
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ooh-authority-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A platform's caches on `dataDir` (as startPlatform builds them), without the rest of the platform. */
const ctxFor = (dataDir: string) => {
  const config = { dataDir } as PlatformConfig;
  return {
    caches: { authority: new AuthorityCache({ config, clock: new TestClock(NOW, { frozen: true }) }) },
  };
};

describe('authority PKI', () => {
  test('is created on first load with keys of mode 0600, and its chain verifies with openssl', async () => {
    const dataDir = path.join(tmp, 'first');
    const authority = await loadAuthority(ctxFor(dataDir));
    const dir = path.join(dataDir, 'authority');
    for (const name of Object.values(GENERATED_FILES)) {
      const mode = (await stat(path.join(dir, name))).mode & 0o777;
      if (name.endsWith('.key')) expect(mode, name).toBe(0o600);
      else expect(mode & 0o077, name).toBe(0o044);
    }
    expect(authority.chainPem).toHaveLength(1);
    const root = readCertificate(authority.rootPem);
    const issuing = readCertificate(authority.chainPem[0]!);
    const envelope = readCertificate(authority.envelopeSigner.certPem);
    const seal = readCertificate(authority.sealSigner.certPem);
    expect(root.isCa).toBe(true);
    expect(issuing.isCa).toBe(true);
    expect(issuing.issuer).toBe(root.subject);
    expect(envelope.isCa).toBe(false);
    expect(envelope.issuer).toBe(issuing.subject);
    expect(seal.issuer).toBe(issuing.subject);
    expect(envelope.publicKeySpki).not.toBe(seal.publicKeySpki);
    // openssl, not only our code, accepts the chain for both signers.
    for (const leaf of [GENERATED_FILES.envelopeCert, GENERATED_FILES.sealCert]) {
      const out = execFileSync('openssl', [
        'verify',
        '-CAfile',
        path.join(dir, GENERATED_FILES.rootCert),
        '-untrusted',
        path.join(dir, GENERATED_FILES.issuingCert),
        path.join(dir, leaf),
      ]).toString();
      expect(out).toContain(': OK');
    }
  });

  test('is read again, not recreated, and cached per platform', async () => {
    const dataDir = path.join(tmp, 'again');
    const platform = ctxFor(dataDir);
    const first = await loadAuthority(platform);
    expect(await loadAuthority(platform)).toBe(first);
    // Another platform on the same folder reads the same files itself: the same authority, not the same object.
    const second = await loadAuthority(ctxFor(dataDir));
    expect(second).not.toBe(first);
    expect(second.rootPem).toBe(first.rootPem);
    expect(second.sealSigner.certPem).toBe(first.sealSigner.certPem);
    const reread = await readAuthority({ kind: 'generated', dir: path.join(dataDir, 'authority') }, NOW);
    expect(reread.rootPem).toBe(first.rootPem);
    expect(reread.envelopeSigner.certPem).toBe(first.envelopeSigner.certPem);
    const other = await loadAuthority(ctxFor(path.join(tmp, 'other')));
    expect(other.rootPem).not.toBe(first.rootPem);
  });

  test('a second creation into an existing folder keeps the first one', async () => {
    const dir = path.join(tmp, 'race', 'authority');
    await createAuthorityFiles(dir, NOW);
    const before = await readFile(path.join(dir, GENERATED_FILES.rootCert), 'utf8');
    await createAuthorityFiles(dir, NOW);
    expect(await readFile(path.join(dir, GENERATED_FILES.rootCert), 'utf8')).toBe(before);
  });

  test('mounted files are used as named; naming only some is a configuration error', async () => {
    const dir = path.join(tmp, 'mounted');
    await createAuthorityFiles(dir, NOW);
    const env = {
      AUTHORITY_ROOT_CERT: path.join(dir, GENERATED_FILES.rootCert),
      AUTHORITY_CHAIN_CERTS: path.join(dir, GENERATED_FILES.issuingCert),
      AUTHORITY_ENVELOPE_CERT: path.join(dir, GENERATED_FILES.envelopeCert),
      AUTHORITY_ENVELOPE_KEY: path.join(dir, GENERATED_FILES.envelopeKey),
      AUTHORITY_SEAL_CERT: path.join(dir, GENERATED_FILES.sealCert),
      AUTHORITY_SEAL_KEY: path.join(dir, GENERATED_FILES.sealKey),
    };
    const source = authoritySource('/nowhere', env);
    expect(source.kind).toBe('files');
    const authority = await readAuthority(source, NOW);
    expect(authority.rootPem).toBe(await readFile(env.AUTHORITY_ROOT_CERT, 'utf8'));

    expect(() => authoritySource('/nowhere', { AUTHORITY_ROOT_CERT: env.AUTHORITY_ROOT_CERT })).toThrow(
      AuthorityError,
    );
    expect(authoritySource('/data', { AUTHORITY_DIR: '/secrets/authority' })).toEqual({
      kind: 'generated',
      dir: '/secrets/authority',
    });
  });

  test('a mounted signer named for the other role is refused: no verifier would accept what it signs', async () => {
    const dir = path.join(tmp, 'roles');
    await createAuthorityFiles(dir, NOW);
    // The seal signer's certificate and key mounted as the envelope signer: they match and chain to the root.
    const source = authoritySource('/nowhere', {
      AUTHORITY_ROOT_CERT: path.join(dir, GENERATED_FILES.rootCert),
      AUTHORITY_CHAIN_CERTS: path.join(dir, GENERATED_FILES.issuingCert),
      AUTHORITY_ENVELOPE_CERT: path.join(dir, GENERATED_FILES.sealCert),
      AUTHORITY_ENVELOPE_KEY: path.join(dir, GENERATED_FILES.sealKey),
      AUTHORITY_SEAL_CERT: path.join(dir, GENERATED_FILES.sealCert),
      AUTHORITY_SEAL_KEY: path.join(dir, GENERATED_FILES.sealKey),
    });
    await expect(readAuthority(source, NOW)).rejects.toMatchObject({
      code: 'authority_invalid',
      message: expect.stringMatching(
        /^envelope signer: the common name of .* \(OOH Stats Seal Signer\) must end in "Envelope Signer"/,
      ),
    });
  });

  test('a key that does not match its certificate is refused', async () => {
    const dir = path.join(tmp, 'mismatch');
    await createAuthorityFiles(dir, NOW);
    // The seal key in the envelope key's place.
    await writeFile(
      path.join(dir, GENERATED_FILES.envelopeKey),
      await readFile(path.join(dir, GENERATED_FILES.sealKey)),
    );
    await expect(readAuthority({ kind: 'generated', dir }, NOW)).rejects.toMatchObject({
      code: 'authority_invalid',
    });
  });
});

describe('GET {verify_url}/v1/authority-root.pem', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await startTestPlatform({ dataDir: path.join(tmp, 'platform') });
  });
  afterAll(async () => {
    await p?.close();
  });

  test('is public and serves the root certificate of the data folder', async () => {
    const res = await p.servers.verify.inject({ method: 'GET', url: '/v1/authority-root.pem' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/x-pem-file/);
    expect(res.body).toBe(
      await readFile(path.join(tmp, 'platform', 'authority', GENERATED_FILES.rootCert), 'utf8'),
    );
    expect(readCertificate(res.body).isCa).toBe(true);
  });
});
