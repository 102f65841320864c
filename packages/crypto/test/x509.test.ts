import 'reflect-metadata';
import { generateKeyPairSync, X509Certificate as NodeX509Certificate, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  CryptoError,
  type CryptoErrorCode,
  createCsr,
  createIntermediateCa,
  createRootCa,
  exportPublicKeySpki,
  generateEs256KeyPair,
  issueCertificate,
  parseCsr,
  randomSerialHex,
  readCertificate,
  splitPemChain,
} from '../src/index.js';
import { createPki, issueLeaf, NOT_AFTER, NOT_BEFORE, type Pki } from './helpers/pki.js';

async function expectCode(action: () => Promise<unknown> | unknown, code: CryptoErrorCode): Promise<void> {
  let caught: unknown;
  try {
    await action();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(CryptoError);
  expect((caught as CryptoError).code).toBe(code);
}

function pemToDer(pem: string): Buffer {
  return Buffer.from(pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''), 'base64');
}

function extensionsOf(pem: string): x509.X509Certificate {
  return new x509.X509Certificate(pem);
}

let pki: Pki;
beforeAll(async () => {
  pki = await createPki();
});

describe('certificate authorities', () => {
  test('the root is self-signed, a CA, with the chosen validity and serial', async () => {
    const keyPair = generateEs256KeyPair();
    const pem = await createRootCa({
      subject: 'CN=Authority Root, O=City',
      keyPair,
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
      serialHex: '7f00000000000001',
    });
    const info = readCertificate(pem);
    expect(info).toMatchObject({
      serialHex: '7f00000000000001',
      subject: 'CN=Authority Root, O=City',
      issuer: 'CN=Authority Root, O=City',
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
      isCa: true,
      publicKeySpki: exportPublicKeySpki(keyPair.publicKey),
      pem,
    });
    const cert = extensionsOf(pem);
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(
      x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
    );
    expect(new NodeX509Certificate(pem).verify(keyPair.publicKey)).toBe(true);
    expect(new NodeX509Certificate(pem).ca).toBe(true);
  });

  test('the issuing CA is signed by the root and carries its path length', () => {
    const info = readCertificate(pki.issuingPem);
    expect(info.isCa).toBe(true);
    expect(info.issuer).toBe('CN=City Root CA, O=City');
    expect(info.serialHex).toMatch(/^[4-7][0-9a-f]{31}$/);
    const cert = extensionsOf(pki.issuingPem);
    expect(cert.getExtension(x509.BasicConstraintsExtension)?.pathLength).toBe(0);
    const issuing = new NodeX509Certificate(pki.issuingPem);
    expect(issuing.verify(new NodeX509Certificate(pki.rootPem).publicKey)).toBe(true);
    expect(issuing.checkIssued(new NodeX509Certificate(pki.rootPem))).toBe(true);
  });

  test('refuses an issuer key that does not match, and an issuer that is not a CA', async () => {
    const stranger = generateEs256KeyPair();
    await expectCode(
      () =>
        createIntermediateCa({
          subject: 'CN=Rogue, O=City',
          publicKey: stranger.publicKey,
          issuerCertificatePem: pki.rootPem,
          issuerKey: stranger.privateKey,
          notBefore: NOT_BEFORE,
          notAfter: NOT_AFTER,
        }),
      'invalid_key',
    );
    const leaf = await issueLeaf(pki, 'client');
    await expectCode(
      () =>
        issueCertificate({
          subject: 'CN=below a leaf, O=City',
          publicKey: stranger.publicKey,
          issuerCertificatePem: leaf.pem,
          issuerKey: leaf.keys.privateKey,
          notBefore: NOT_BEFORE,
          notAfter: NOT_AFTER,
          serialHex: '01',
          usage: 'client',
        }),
      'invalid_certificate',
    );
  });

  test('refuses bad arguments', async () => {
    const keyPair = generateEs256KeyPair();
    const root = (overrides: Record<string, unknown>) =>
      createRootCa({ subject: 'CN=R', keyPair, notBefore: NOT_BEFORE, notAfter: NOT_AFTER, ...overrides });
    await expectCode(() => root({ serialHex: 'xyz' }), 'invalid_argument');
    await expectCode(() => root({ serialHex: '0000' }), 'invalid_argument');
    await expectCode(() => root({ serialHex: 'abc' }), 'invalid_argument');
    await expectCode(() => root({ serialHex: 'ff'.repeat(20) }), 'invalid_argument');
    await expectCode(() => root({ notAfter: new Date('2029-01-01T00:00:00Z') }), 'invalid_argument');
    await expectCode(() => root({ subject: '' }), 'invalid_argument');
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
    await expectCode(() => root({ keyPair: p384 }), 'unsupported_algorithm');
    await expectCode(
      () =>
        root({ keyPair: { publicKey: keyPair.publicKey, privateKey: generateEs256KeyPair().privateKey } }),
      'invalid_key',
    );
  });
});

describe('end-entity certificates', () => {
  test('client: digitalSignature and extKeyUsage clientAuth, with the chosen serial', async () => {
    const { keys, pem } = await issueLeaf(pki, 'client', {
      subject: 'CN=device 1234, O=City',
      serialHex: '0a1b2c3d',
    });
    const info = readCertificate(pem);
    expect(info).toMatchObject({
      serialHex: '0a1b2c3d',
      subject: 'CN=device 1234, O=City',
      issuer: 'CN=City Issuing CA, O=City',
      isCa: false,
      publicKeySpki: exportPublicKeySpki(keys.publicKey),
    });
    const cert = extensionsOf(pem);
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.digitalSignature);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual([
      x509.ExtendedKeyUsage.clientAuth,
    ]);
    expect(cert.getExtension(x509.SubjectAlternativeNameExtension)).toBeNull();
    expect(cert.getExtension(x509.BasicConstraintsExtension)?.ca).toBe(false);
    const issuingSki = extensionsOf(pki.issuingPem).getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
    expect(cert.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId).toBe(issuingSki);
  });

  test('server: serverAuth and the subject alternative names', async () => {
    const { pem } = await issueLeaf(pki, 'server', {
      subject: 'CN=devices.city.example, O=City',
      dnsNames: ['devices.city.example', 'agents.city.example'],
      ipAddresses: ['10.0.0.7', '::1'],
    });
    const node = new NodeX509Certificate(pem);
    expect(node.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
    expect(node.checkHost('agents.city.example')).toBe('agents.city.example');
    expect(node.checkHost('other.example')).toBeUndefined();
    expect(node.checkIP('10.0.0.7')).toBe('10.0.0.7');
    expect(node.checkIP('::1')).toBe('::1');
    expect(node.checkIP('10.0.0.8')).toBeUndefined();
  });

  test('signing: digitalSignature only, no extended key usage', async () => {
    const { pem } = await issueLeaf(pki, 'signing');
    const cert = extensionsOf(pem);
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.digitalSignature);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)).toBeNull();
  });

  test('serials keep their value: high bit set, leading zero octets dropped, case folded', async () => {
    for (const [given, read] of [
      ['ff01', 'ff01'],
      ['00ff01', 'ff01'],
      ['0001', '01'],
      ['ABCDEF', 'abcdef'],
      ['7f'.repeat(20), '7f'.repeat(20)],
    ] as const) {
      const { pem } = await issueLeaf(pki, 'client', { serialHex: given });
      expect(readCertificate(pem).serialHex).toBe(read);
    }
  });

  test('randomSerialHex: 16 octets, positive, never starting with a zero octet, distinct', () => {
    const serials = new Set<string>();
    for (let round = 0; round < 200; round += 1) {
      const serial = randomSerialHex();
      expect(serial).toMatch(/^[4-7][0-9a-f]{31}$/);
      serials.add(serial);
    }
    expect(serials.size).toBe(200);
  });
});

describe('reading certificates', () => {
  test('PEM, base64 DER and DER bytes read the same', async () => {
    const { pem } = await issueLeaf(pki, 'client');
    const der = pemToDer(pem);
    expect(readCertificate(der)).toEqual(readCertificate(pem));
    expect(readCertificate(der.toString('base64'))).toEqual(readCertificate(pem));
    expect(readCertificate(pem.replace(/\n/g, '\r\n'))).toEqual(readCertificate(pem));
  });

  test('refuses what is not exactly one certificate', async () => {
    const { pem } = await issueLeaf(pki, 'client');
    const der = pemToDer(pem);
    await expectCode(() => readCertificate('hello'), 'invalid_certificate');
    await expectCode(
      () => readCertificate(new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x01])),
      'invalid_certificate',
    );
    await expectCode(() => readCertificate(Buffer.concat([der, Buffer.of(0)])), 'invalid_certificate');
    await expectCode(() => readCertificate(der.subarray(0, der.length - 1)), 'invalid_certificate');
    await expectCode(() => readCertificate(pem + pki.rootPem), 'invalid_certificate');
    const csr = await createCsr({ subject: 'CN=x', keyPair: generateEs256KeyPair() });
    await expectCode(() => readCertificate(csr), 'invalid_certificate');
  });

  test('splitPemChain splits a bundle and ignores other text', () => {
    const bundle = `leaf:\n${pki.issuingPem}\r\nroot:\n${pki.rootPem.replace(/\n/g, '\r\n')}trailer`;
    const blocks = splitPemChain(bundle);
    expect(blocks).toHaveLength(2);
    expect(readCertificate(blocks[0]!).pem).toBe(pki.issuingPem);
    expect(blocks[1]).toBe(pki.rootPem);
    expect(splitPemChain('nothing here')).toEqual([]);
  });
});

describe('certification requests', () => {
  test('createCsr -> parseCsr from PEM and from base64 DER', async () => {
    const keyPair = generateEs256KeyPair();
    const pem = await createCsr({ subject: 'CN=device 1234, O=City', keyPair });
    expect(pem).toMatch(/^-----BEGIN CERTIFICATE REQUEST-----\n/);
    const info = await parseCsr(pem);
    expect(info.subject).toBe('CN=device 1234, O=City');
    expect(info.signatureValid).toBe(true);
    expect(info.publicKeySpki).toBe(exportPublicKeySpki(keyPair.publicKey));
    expect(info.publicKey.equals(keyPair.publicKey)).toBe(true);
    expect(Buffer.from(info.der).equals(pemToDer(pem))).toBe(true);
    const fromBase64 = await parseCsr(pemToDer(pem).toString('base64'));
    expect(fromBase64.signatureValid).toBe(true);
    expect(fromBase64.publicKeySpki).toBe(info.publicKeySpki);
  });

  test('a request whose public key was swapped after signing does not verify', async () => {
    const keyPair = generateEs256KeyPair();
    const der = pemToDer(await createCsr({ subject: 'CN=device 1234, O=City', keyPair }));
    const ownSpki = keyPair.publicKey.export({ format: 'der', type: 'spki' });
    const otherSpki = generateEs256KeyPair().publicKey.export({ format: 'der', type: 'spki' });
    const at = der.indexOf(ownSpki);
    expect(at).toBeGreaterThan(0);
    const swapped = Buffer.from(der);
    otherSpki.copy(swapped, at);
    const info = await parseCsr(swapped.toString('base64'));
    expect(info.signatureValid).toBe(false);
    expect(info.publicKeySpki).toBe(otherSpki.toString('base64'));
    // A changed subject does not verify either.
    const renamed = Buffer.from(der);
    const nameAt = renamed.indexOf(Buffer.from('device 1234'));
    renamed[nameAt] = 'D'.charCodeAt(0);
    const renamedInfo = await parseCsr(renamed.toString('base64'));
    expect(renamedInfo.subject).toBe('CN=Device 1234, O=City');
    expect(renamedInfo.signatureValid).toBe(false);
  });

  test('refuses unreadable requests and keys other than P-256', async () => {
    await expectCode(() => parseCsr('hello'), 'invalid_csr');
    await expectCode(() => parseCsr(''), 'invalid_csr');
    await expectCode(() => parseCsr(Buffer.from('not a request').toString('base64')), 'invalid_csr');
    await expectCode(() => parseCsr(pki.rootPem), 'invalid_csr');
    const der = pemToDer(await createCsr({ subject: 'CN=x', keyPair: generateEs256KeyPair() }));
    await expectCode(() => parseCsr(Buffer.concat([der, Buffer.of(0)]).toString('base64')), 'invalid_csr');
    await expectCode(() => parseCsr(der.subarray(0, der.length - 3).toString('base64')), 'invalid_csr');

    x509.cryptoProvider.set(webcrypto);
    const p384 = await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, true, [
      'sign',
      'verify',
    ]);
    const p384Csr = await x509.Pkcs10CertificateRequestGenerator.create({
      name: 'CN=p384',
      keys: p384,
      signingAlgorithm: { name: 'ECDSA', hash: 'SHA-384' },
    });
    await expectCode(() => parseCsr(p384Csr.toString('pem')), 'unsupported_algorithm');
  });

  test('DER that makes the ASN.1 reader throw is refused as invalid_csr, not thrown as it is', async () => {
    // asn1js throws a plain Error ("Wrong input string for conversion") on a GeneralizedTime (tag 0x18) it cannot
    // convert, where it reports other faults in its result; these requests reached /d/v1/renew as a 500.
    for (const base64 of ['GAA=', 'GAEw', 'MAMYATA=']) {
      await expectCode(() => parseCsr(base64), 'invalid_csr');
    }
    const pem = `-----BEGIN CERTIFICATE REQUEST-----\nMAMYATA=\n-----END CERTIFICATE REQUEST-----\n`;
    await expectCode(() => parseCsr(pem), 'invalid_csr');
    // The same element inside a request's own fields.
    const der = pemToDer(await createCsr({ subject: 'CN=x', keyPair: generateEs256KeyPair() }));
    const lengthOctets = (der[1] ?? 0) & 0x80 ? 1 + ((der[1] ?? 0) & 0x7f) : 1;
    const content = Buffer.concat([der.subarray(1 + lengthOctets), Buffer.from('180130', 'hex')]);
    const withTime = Buffer.concat([
      Buffer.of(0x30, 0x82, content.length >> 8, content.length & 0xff),
      content,
    ]);
    await expectCode(() => parseCsr(withTime.toString('base64')), 'invalid_csr');
  });

  test('a certificate whose DER makes the ASN.1 reader throw is refused as invalid_certificate', async () => {
    await expectCode(() => readCertificate(Buffer.from('GAA=', 'base64')), 'invalid_certificate');
    await expectCode(() => readCertificate('MAMYATA='), 'invalid_certificate');
  });
});
