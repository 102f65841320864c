import { randomBytes } from 'node:crypto';
import { cmsSign, createIntermediateCa, generateEs256KeyPair, issueCertificate } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type OpensslWorkspace, pkiWorkspace } from '../../crypto/test/helpers/openssl.js';
import { AT, createPki, issueLeaf, NOT_AFTER, NOT_BEFORE, type Pki } from '../../crypto/test/helpers/pki.js';
import {
  type Certificate,
  parsePem,
  type VerificationErrorCode,
  verifyChain,
  verifyCms,
} from '../src/index.js';

// STYLE.md §7: SignedData made by `openssl cms -sign` verifies here, tampered ones fail with the right code, and the
// chain walk refuses each broken chain with its own code (the checks `openssl verify` makes, cross-checked).

let ws: OpensslWorkspace;
let pki: Pki;
let root: Certificate;
let issuing: Certificate;
let otherRoot: Certificate;
const content = new TextEncoder().encode('{"approval_number":"A-1","v":1}');

beforeAll(async () => {
  ({ ws, pki } = await pkiWorkspace());
  root = parsePem(pki.rootPem)[0]!;
  issuing = parsePem(pki.issuingPem)[0]!;
  otherRoot = parsePem((await createPki()).rootPem)[0]!;
  ws.write('content.bin', content);
});
afterAll(() => ws.dispose());

function opensslSign(out: string, signerPem: string, keyPem: string, ...extra: string[]): Uint8Array {
  ws.write('signer.pem', signerPem);
  ws.write('signer-key.pem', keyPem);
  ws.must([
    'cms',
    '-sign',
    '-binary',
    '-nodetach',
    '-md',
    'sha256',
    '-outform',
    'DER',
    '-in',
    'content.bin',
    '-signer',
    'signer.pem',
    '-inkey',
    'signer-key.pem',
    ...extra,
    '-out',
    out,
  ]);
  return new Uint8Array(ws.read(out));
}

const codeOf = (result: { ok: boolean; error?: { code: VerificationErrorCode } }) =>
  result.ok ? 'ok' : result.error!.code;

describe('CMS SignedData made by openssl cms -sign', () => {
  test('verifies (issuer+serial and key-id signers) with the content, signing time, chain and window', async () => {
    const signer = await issueLeaf(pki, 'signing', { subject: 'CN=Approval Signer, O=City' });
    const keyPem = signer.keys.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    for (const extra of [[], ['-keyid']]) {
      const der = opensslSign('ossl.p7s', signer.pem, keyPem, '-certfile', 'issuing.pem', ...extra);
      const result = await verifyCms(der, { roots: [root], at: AT });
      expect(codeOf(result)).toBe('ok');
      if (!result.ok) continue;
      expect(Buffer.from(result.content).equals(Buffer.from(content))).toBe(true);
      expect(result.signingTime).toBeInstanceOf(Date);
      expect(result.chain.map((c) => c.subjectCommonName)).toEqual([
        'Approval Signer',
        'City Issuing CA',
        'City Root CA',
      ]);
      expect(result.window).toEqual({ notBefore: NOT_BEFORE, notAfter: NOT_AFTER });
      // The base64 text is accepted as well as the DER.
      expect((await verifyCms(Buffer.from(der).toString('base64'), { roots: [root], at: AT })).ok).toBe(true);
    }
  });

  test('each tampering fails with its code, as openssl cms -verify fails it', async () => {
    const signer = await issueLeaf(pki, 'signing');
    const keyPem = signer.keys.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const der = opensslSign('ossl.p7s', signer.pem, keyPem, '-certfile', 'issuing.pem');

    const tampered = Buffer.from(der);
    tampered[tampered.indexOf(Buffer.from(content)) + 3]! ^= 0x20;
    expect(codeOf(await verifyCms(tampered, { roots: [root], at: AT }))).toBe('cms_message_digest');
    ws.write('tampered.p7s', tampered);
    const opensslVerify = (file: string, ca: string) => ws.verifyCms(file, { ca, at: AT });
    expect(opensslVerify('tampered.p7s', 'root.pem').ok).toBe(false);
    expect(opensslVerify('ossl.p7s', 'root.pem').ok).toBe(true);

    // The signature value is the last OCTET STRING: its last byte is inside r‖s.
    const badSignature = Buffer.from(der);
    badSignature[badSignature.length - 1]! ^= 0x01;
    expect(codeOf(await verifyCms(badSignature, { roots: [root], at: AT }))).toBe('cms_bad_signature');

    expect(codeOf(await verifyCms(der, { roots: [otherRoot], at: AT }))).toBe('chain_no_issuer');
    expect(codeOf(await verifyCms(der, { roots: [root], at: new Date('2031-06-01T00:00:00Z') }))).toBe(
      'chain_expired',
    );
    expect(codeOf(await verifyCms(der, { roots: [root], at: new Date('2029-06-01T00:00:00Z') }))).toBe(
      'chain_not_yet_valid',
    );
    // Without a time the dates are not judged; the window says when the chain holds.
    const undated = await verifyCms(der, { roots: [root], at: null });
    expect(undated.ok && undated.window).toEqual({ notBefore: NOT_BEFORE, notAfter: NOT_AFTER });

    const bare = opensslSign('bare.p7s', signer.pem, keyPem);
    expect(codeOf(await verifyCms(bare, { roots: [root], at: AT }))).toBe('chain_no_issuer');
    expect(codeOf(await verifyCms(bare, { roots: [root], intermediates: [issuing], at: AT }))).toBe('ok');
  });

  test('a flipped bit anywhere is refused, never thrown', async () => {
    const signer = await issueLeaf(pki, 'signing');
    const der = await cmsSign({
      content,
      signerCertificatePem: signer.pem,
      signerKey: signer.keys.privateKey,
      extraCertificatesPem: [pki.issuingPem],
      signingTime: AT,
    });
    expect((await verifyCms(der, { roots: [root], at: AT })).ok).toBe(true);
    const accepted: number[] = [];
    for (let i = 0; i < der.length; i += 1) {
      const copy = Uint8Array.from(der);
      copy[i]! ^= 0x01;
      if ((await verifyCms(copy, { roots: [root], at: AT })).ok) accepted.push(i);
    }
    expect(accepted).toEqual([]);
    for (const junk of [new Uint8Array(0), randomBytes(40), 'not base64!', Uint8Array.of(0x30, 0x80, 0, 0)]) {
      const result = await verifyCms(junk, { roots: [root], at: AT });
      expect(codeOf(result)).toBe('malformed');
    }
  });
});

describe('chain walk failures, each with its code', () => {
  test('a leaf signed by a certificate that is not a CA', async () => {
    const notCa = await issueLeaf(pki, 'signing', { subject: 'CN=Not A CA, O=City', serialHex: '2001' });
    // openssl signs with any key it is given; the walk must see that the issuer is not a CA.
    ws.write('not-ca-cert.pem', notCa.pem);
    ws.write('not-ca-key.pem', notCa.keys.privateKey.export({ format: 'pem', type: 'pkcs8' }));
    ws.must(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'below-key.pem']);
    ws.must(['req', '-new', '-key', 'below-key.pem', '-subj', '/CN=below a leaf', '-out', 'below.csr']);
    ws.must([
      'x509',
      '-req',
      '-in',
      'below.csr',
      '-CA',
      'not-ca-cert.pem',
      '-CAkey',
      'not-ca-key.pem',
      '-set_serial',
      '78',
      '-days',
      '3650',
      '-out',
      'below-leaf.pem',
    ]);
    const pem = ws.read('below-leaf.pem').toString();
    const result = await verifyChain({
      leaf: parsePem(pem)[0]!,
      pool: [parsePem(notCa.pem)[0]!, issuing],
      roots: [root],
      at: AT,
    });
    expect(codeOf(result)).toBe('chain_issuer_not_ca');
    ws.write('not-ca.pem', `${notCa.pem}\n${pki.issuingPem}`);
    expect(ws.verifyCertificate('below-leaf.pem', { untrusted: 'not-ca.pem', at: AT }).ok).toBe(false);
  });

  test('a CA below the issuing CA, whose path length is 0', async () => {
    const subKeys = generateEs256KeyPair();
    const subPem = await createIntermediateCa({
      subject: 'CN=City Sub CA, O=City',
      publicKey: subKeys.publicKey,
      issuerCertificatePem: pki.issuingPem,
      issuerKey: pki.issuingKeys.privateKey,
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
    });
    const keys = generateEs256KeyPair();
    const leafPem = await issueCertificate({
      subject: 'CN=deep leaf, O=City',
      publicKey: keys.publicKey,
      issuerCertificatePem: subPem,
      issuerKey: subKeys.privateKey,
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
      serialHex: '3001',
      usage: 'signing',
    });
    const result = await verifyChain({
      leaf: parsePem(leafPem)[0]!,
      pool: [parsePem(subPem)[0]!, issuing],
      roots: [root],
      at: AT,
    });
    expect(codeOf(result)).toBe('chain_path_length');
    ws.write('deep.pem', leafPem);
    ws.write('deep-chain.pem', `${subPem}\n${pki.issuingPem}`);
    expect(ws.verifyCertificate('deep.pem', { untrusted: 'deep-chain.pem', at: AT }).ok).toBe(false);
  });

  test('a certificate whose signature was changed, and one with an unknown critical extension', async () => {
    const signer = await issueLeaf(pki, 'signing');
    const leaf = parsePem(signer.pem)[0]!;
    const good = await verifyChain({ leaf, pool: [issuing], roots: [root], at: AT });
    expect(codeOf(good)).toBe('ok');
    expect(good.ok && good.chain.length).toBe(3);
    const signature = leaf.signature.slice();
    signature[signature.length - 1]! ^= 0x01;
    expect(
      codeOf(await verifyChain({ leaf: { ...leaf, signature }, pool: [issuing], roots: [root], at: AT })),
    ).toBe('chain_bad_signature');

    // openssl signs a leaf with a critical extension nobody knows: openssl verify refuses it, and so does the walk.
    ws.write('issuing-key.pem', pki.issuingKeys.privateKey.export({ format: 'pem', type: 'pkcs8' }));
    ws.must(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'odd-key.pem']);
    ws.must(['req', '-new', '-key', 'odd-key.pem', '-subj', '/CN=odd', '-out', 'odd.csr']);
    ws.write('odd.ext', 'basicConstraints=critical,CA:FALSE\n1.2.3.4.5=critical,DER:05:00\n');
    ws.must([
      'x509',
      '-req',
      '-in',
      'odd.csr',
      '-CA',
      'issuing.pem',
      '-CAkey',
      'issuing-key.pem',
      '-set_serial',
      '77',
      '-days',
      '3650',
      '-extfile',
      'odd.ext',
      '-out',
      'odd.pem',
    ]);
    const odd = parsePem(ws.read('odd.pem').toString())[0]!;
    expect(codeOf(await verifyChain({ leaf: odd, pool: [issuing], roots: [root], at: AT }))).toBe(
      'chain_unknown_critical_extension',
    );
    expect(ws.verifyCertificate('odd.pem', { at: AT }).ok).toBe(false);
  });

  test('no roots is an argument error; an invalid date throws', async () => {
    const signer = await issueLeaf(pki, 'signing');
    const leaf = parsePem(signer.pem)[0]!;
    expect(codeOf(await verifyChain({ leaf, pool: [issuing], roots: [], at: AT }))).toBe('invalid_argument');
    await expect(verifyChain({ leaf, roots: [root], at: new Date(Number.NaN) })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
  });
});
