import { randomBytes } from 'node:crypto';
import * as pkijs from 'pkijs';
import { beforeAll, describe, expect, test } from 'vitest';
import { bytesEqual, type CmsResult, parsePem, verifyCms } from '@ooh/verify';
import { CryptoError, canonicalBytes, cmsSign, generateEs256KeyPair, readCertificate } from '../src/index.js';
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

// What cmsSign makes, verified by @ooh/verify's verifyCms (the one CMS check; its own cases, with SignedData made by
// openssl, are packages/verify/test/cms.test.ts).
const roots = () => parsePem(pki.rootPem);
const codeOf = (result: CmsResult) => (result.ok ? 'ok' : result.error.code);

describe('cmsSign output, verified by @ooh/verify', () => {
  test('gives back the content, the signer certificate and the signing time (whole seconds)', async () => {
    const result = await verifyCms(await sign(), { roots: roots(), at: AT });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(Buffer.from(result.content).equals(Buffer.from(body))).toBe(true);
    expect(bytesEqual(result.signer.der, parsePem(signer.pem)[0]!.der)).toBe(true);
    expect(result.signingTime).toEqual(new Date('2030-06-01T10:20:30Z'));
  });

  test('is judged at `at` only when it is given', async () => {
    const der = await sign();
    expect(codeOf(await verifyCms(der, { roots: roots() }))).toBe('ok');
    expect(codeOf(await verifyCms(der, { roots: roots(), at: new Date(NOT_AFTER.getTime() + 1) }))).toBe(
      'chain_expired',
    );
    expect(codeOf(await verifyCms(der, { roots: roots(), at: new Date(NOT_BEFORE.getTime() - 1) }))).toBe(
      'chain_not_yet_valid',
    );
  });

  test('without the issuing CA embedded, the chain is built from given intermediates', async () => {
    const der = await sign({ extraCertificatesPem: [] });
    expect(codeOf(await verifyCms(der, { roots: roots(), at: AT }))).toBe('chain_no_issuer');
    expect(
      codeOf(await verifyCms(der, { roots: roots(), intermediates: parsePem(pki.issuingPem), at: AT })),
    ).toBe('ok');
  });

  test('empty and large contents, and signing times outside UTCTime', async () => {
    for (const content of [new Uint8Array(0), new Uint8Array(randomBytes(200_000))]) {
      const result = await verifyCms(await sign({ content }), { roots: roots() });
      expect(result.ok && Buffer.from(result.content).equals(Buffer.from(content))).toBe(true);
    }
    for (const signingTime of [new Date('2050-01-01T00:00:00Z'), new Date('1949-12-31T23:59:59Z')]) {
      const result = await verifyCms(await sign({ signingTime }), { roots: roots() });
      expect(result.ok && result.signingTime).toEqual(signingTime);
    }
  });

  test('a tampered body, signing time or signature is refused with its code', async () => {
    const der = await sign();
    const changed = Uint8Array.from(body);
    changed[2] = 'K'.charCodeAt(0);
    expect(codeOf(await verifyCms(replaceOnce(der, body, changed), { roots: roots(), at: AT }))).toBe(
      'cms_message_digest',
    );
    // The UTCTime of the signing time sits in the signed attributes.
    const tamperedTime = replaceOnce(der, Buffer.from('300601102030Z'), Buffer.from('300601102031Z'));
    expect(codeOf(await verifyCms(tamperedTime, { roots: roots() }))).toBe('cms_bad_signature');
    // The signature is the last element; flip a byte inside s.
    const tamperedSignature = Uint8Array.from(der);
    tamperedSignature[tamperedSignature.length - 3]! ^= 0x01;
    expect((await verifyCms(tamperedSignature, { roots: roots() })).ok).toBe(false);
  });

  test('another trust anchor, even with the same names, is refused', async () => {
    const other = await createPki();
    expect(readCertificate(other.rootPem).subject).toBe(readCertificate(pki.rootPem).subject);
    expect((await verifyCms(await sign(), { roots: parsePem(other.rootPem), at: AT })).ok).toBe(false);
    expect(codeOf(await verifyCms(await sign(), { roots: [] }))).toBe('invalid_argument');
  });

  test('a signer certificate replaced by another with the same issuer and serial is refused', async () => {
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
    expect(codeOf(await verifyCms(swapped, { roots: roots() }))).toBe('cms_bad_signature');
  });
});
