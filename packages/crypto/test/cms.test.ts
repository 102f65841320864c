import { randomBytes } from 'node:crypto';
import * as pkijs from 'pkijs';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  CryptoError,
  canonicalBytes,
  cmsSign,
  cmsVerify,
  generateEs256KeyPair,
  readCertificate,
} from '../src/index.js';
import { AT, createPki, issueLeaf, NOT_AFTER, NOT_BEFORE, type Pki } from './helpers/pki.js';

const body = canonicalBytes({
  kind: 'approval',
  approval_number: 'A-2030-000001',
  media_sha256: 'ab'.repeat(32),
});
const SIGNING_TIME = new Date('2030-06-01T10:20:30.456Z');

let pki: Pki;
let signer: Awaited<ReturnType<typeof issueLeaf>>;
beforeAll(async () => {
  pki = await createPki();
  signer = await issueLeaf(pki, 'signing', { subject: 'CN=Approval Signer, O=City' });
});

function sign(overrides: Partial<Parameters<typeof cmsSign>[0]> = {}): Promise<Uint8Array> {
  return cmsSign({
    content: body,
    signerCertificatePem: signer.pem,
    signerKey: signer.keys.privateKey,
    signingTime: SIGNING_TIME,
    extraCertificatesPem: [pki.issuingPem],
    ...overrides,
  });
}

function replaceOnce(haystack: Uint8Array, needle: Uint8Array, replacement: Uint8Array): Uint8Array {
  const buffer = Buffer.from(haystack);
  const at = buffer.indexOf(Buffer.from(needle));
  expect(at).toBeGreaterThanOrEqual(0);
  expect(buffer.indexOf(Buffer.from(needle), at + 1)).toBe(-1);
  Buffer.from(replacement).copy(buffer, at);
  return new Uint8Array(buffer);
}

describe('cmsSign output', () => {
  test('is DER SignedData with attached id-data, one signer, the three signed attributes and the certificates', async () => {
    const der = await sign();
    const contentInfo = pkijs.ContentInfo.fromBER(der);
    expect(contentInfo.contentType).toBe('1.2.840.113549.1.7.2');
    const signedData = new pkijs.SignedData({ schema: contentInfo.content });
    expect(signedData.encapContentInfo.eContentType).toBe('1.2.840.113549.1.7.1');
    // Primitive OCTET STRING: DER, not the constructed BER form.
    expect(signedData.encapContentInfo.eContent?.idBlock.isConstructed).toBe(false);
    expect(Buffer.from(signedData.encapContentInfo.eContent!.getValue()).equals(Buffer.from(body))).toBe(
      true,
    );
    expect(signedData.signerInfos).toHaveLength(1);
    const signerInfo = signedData.signerInfos[0]!;
    expect(signerInfo.digestAlgorithm.algorithmId).toBe('2.16.840.1.101.3.4.2.1');
    expect(signerInfo.signatureAlgorithm.algorithmId).toBe('1.2.840.10045.4.3.2');
    expect(signerInfo.signedAttrs?.attributes.map((attribute) => attribute.type).sort()).toEqual([
      '1.2.840.113549.1.9.3',
      '1.2.840.113549.1.9.4',
      '1.2.840.113549.1.9.5',
    ]);
    expect(signedData.certificates).toHaveLength(2);
    // Re-encoding what pkijs read gives the same bytes only if the input was DER throughout.
    const reencoded = new pkijs.ContentInfo({
      contentType: contentInfo.contentType,
      content: signedData.toSchema(true),
    });
    expect(Buffer.from(reencoded.toSchema().toBER(false)).equals(Buffer.from(der))).toBe(true);
  });

  test('refuses a key that is not the certificate key and bad arguments', async () => {
    await expect(sign({ signerKey: generateEs256KeyPair().privateKey })).rejects.toMatchObject({
      code: 'invalid_key',
    });
    await expect(sign({ signerKey: signer.keys.publicKey })).rejects.toMatchObject({ code: 'invalid_key' });
    await expect(sign({ signerCertificatePem: 'nope' })).rejects.toBeInstanceOf(CryptoError);
    await expect(sign({ signingTime: new Date(Number.NaN) })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    await expect(sign({ content: 'text' as unknown as Uint8Array })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
  });
});

describe('cmsVerify', () => {
  test('returns the content, the signer certificate and the signing time (whole seconds)', async () => {
    const result = await cmsVerify(await sign(), { trustedRootsPem: [pki.rootPem], at: AT });
    expect(result).toEqual({
      ok: true,
      content: body,
      signerCertificatePem: signer.pem,
      signingTime: new Date('2030-06-01T10:20:30Z'),
    });
  });

  test('checks validity at `at` only when it is given', async () => {
    const der = await sign();
    expect((await cmsVerify(der, { trustedRootsPem: [pki.rootPem] })).ok).toBe(true);
    const late = await cmsVerify(der, {
      trustedRootsPem: [pki.rootPem],
      at: new Date(NOT_AFTER.getTime() + 1),
    });
    expect(late).toMatchObject({ ok: false, reason: expect.stringContaining('not valid') });
    const early = await cmsVerify(der, {
      trustedRootsPem: [pki.rootPem],
      at: new Date(NOT_BEFORE.getTime() - 1),
    });
    expect(early.ok).toBe(false);
  });

  test('builds the chain from given intermediates when none is embedded', async () => {
    const der = await sign({ extraCertificatesPem: [] });
    expect((await cmsVerify(der, { trustedRootsPem: [pki.rootPem], at: AT })).ok).toBe(false);
    const result = await cmsVerify(der, {
      trustedRootsPem: [pki.rootPem],
      intermediatesPem: [pki.issuingPem],
      at: AT,
    });
    expect(result.ok).toBe(true);
  });

  test('empty and large contents, and signing times outside UTCTime', async () => {
    for (const content of [new Uint8Array(0), new Uint8Array(randomBytes(200_000))]) {
      const result = await cmsVerify(await sign({ content }), { trustedRootsPem: [pki.rootPem] });
      expect(result.ok && Buffer.from(result.content).equals(Buffer.from(content))).toBe(true);
    }
    for (const signingTime of [new Date('2050-01-01T00:00:00Z'), new Date('1949-12-31T23:59:59Z')]) {
      const result = await cmsVerify(await sign({ signingTime }), { trustedRootsPem: [pki.rootPem] });
      expect(result.ok && result.signingTime).toEqual(signingTime);
    }
  });

  test('a tampered body fails on the message digest', async () => {
    const der = await sign();
    const changed = Uint8Array.from(body);
    changed[2] = 'K'.charCodeAt(0);
    const tampered = replaceOnce(der, body, changed);
    expect(await cmsVerify(tampered, { trustedRootsPem: [pki.rootPem], at: AT })).toEqual({
      ok: false,
      reason: 'messageDigest does not match the content',
    });
  });

  test('a tampered signature or signing time fails on the signature', async () => {
    const der = await sign();
    // The UTCTime of the signing time sits in the signed attributes.
    const tamperedTime = replaceOnce(der, Buffer.from('300601102030Z'), Buffer.from('300601102031Z'));
    expect(await cmsVerify(tamperedTime, { trustedRootsPem: [pki.rootPem] })).toEqual({
      ok: false,
      reason: 'signature does not verify',
    });
    // The signature is the last element; flip a byte inside s.
    const tamperedSignature = Buffer.from(der);
    tamperedSignature[tamperedSignature.length - 3]! ^= 0x01;
    expect(await cmsVerify(tamperedSignature, { trustedRootsPem: [pki.rootPem] })).toMatchObject({
      ok: false,
    });
  });

  test('another trust anchor, even with the same names, fails', async () => {
    const other = await createPki();
    expect(readCertificate(other.rootPem).subject).toBe(readCertificate(pki.rootPem).subject);
    const result = await cmsVerify(await sign(), { trustedRootsPem: [other.rootPem], at: AT });
    expect(result).toMatchObject({ ok: false, reason: expect.stringContaining('signer certificate') });
    expect((await cmsVerify(await sign(), { trustedRootsPem: [] })).ok).toBe(false);
  });

  test('a signer certificate replaced by another with the same issuer and serial fails', async () => {
    const derOf = (pem: string): Buffer => Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
    const der = await sign();
    const genuineDer = derOf(signer.pem);
    // Same name, serial and issuer; a new key. ECDSA signatures vary in length, so retry until the
    // impostor has the same length and can be swapped in place.
    let impostorDer = derOf((await issueLeaf(pki, 'signing', { subject: 'CN=Approval Signer, O=City' })).pem);
    for (let attempt = 0; attempt < 50 && impostorDer.length !== genuineDer.length; attempt += 1) {
      impostorDer = derOf((await issueLeaf(pki, 'signing', { subject: 'CN=Approval Signer, O=City' })).pem);
    }
    expect(impostorDer.length).toBe(genuineDer.length);
    const swapped = replaceOnce(der, genuineDer, impostorDer);
    expect(await cmsVerify(swapped, { trustedRootsPem: [pki.rootPem] })).toEqual({
      ok: false,
      reason: 'signature does not verify',
    });
  });

  test('never throws on malformed input', async () => {
    const der = await sign();
    const inputs: unknown[] = [
      new Uint8Array(0),
      Uint8Array.of(0x30, 0x00),
      der.subarray(0, der.length - 1),
      Buffer.concat([der, Buffer.of(0)]),
      new Uint8Array(randomBytes(300)),
      canonicalBytes({ not: 'cms' }),
      'a string',
      null,
    ];
    for (const input of inputs) {
      const result = await cmsVerify(input as Uint8Array, { trustedRootsPem: [pki.rootPem] });
      expect(result.ok).toBe(false);
    }
    for (const options of [
      null,
      {},
      { trustedRootsPem: 'pem' },
      { trustedRootsPem: [pki.rootPem], at: new Date('x') },
    ]) {
      const result = await cmsVerify(der, options as Parameters<typeof cmsVerify>[1]);
      expect(result.ok).toBe(false);
    }
  });
});
