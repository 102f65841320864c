import { randomBytes } from 'node:crypto';
import { parsePem, verifyChain, verifyCms } from '@ooh/verify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  base64urlDecode,
  base64urlEncode,
  CryptoError,
  cmsSign,
  createCsr,
  es256Sign,
  es256Verify,
  exportPublicKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  importPrivateKey,
  importPublicKey,
  parseCsr,
} from '../src/index.js';
import {
  derSignatureToRaw,
  type OpensslWorkspace,
  pkiWorkspace,
  rawSignatureToDer,
} from './helpers/openssl.js';
import { AT, createPki, issueLeaf, type Pki } from './helpers/pki.js';

// STYLE.md §7: signatures are checked by openssl as well as by our code, in both directions.

const MESSAGES = 100;
/** Half the order of P-256: an S above it is the "high-S" form that some verifiers refuse. */
const HALF_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n >> 1n;

let ws: OpensslWorkspace;
let pki: Pki;
beforeAll(async () => {
  ({ ws, pki } = await pkiWorkspace());
  ws.write('other-root.pem', (await createPki()).rootPem);
});
afterAll(() => ws.dispose());

/** One sh process runs the loop; it prints "<i> ok" or "<i> fail" per message. */
function verifyLoop(command: (index: string) => string, count: number): string[] {
  const result = ws.shell(
    `i=0; while [ $i -lt ${count} ]; do if ${command('$i')} >/dev/null 2>&1; then echo "$i ok"; else echo "$i fail"; fi; i=$((i+1)); done`,
  );
  expect(result.ok).toBe(true);
  return result.stdout.trim().split('\n');
}

describe('ES256 against openssl dgst', () => {
  test(`openssl verifies ${MESSAGES} of our signatures and refuses them on changed messages`, () => {
    const { publicKey, privateKey } = generateEs256KeyPair();
    ws.write('es-pub.pem', exportPublicKeyPem(publicKey));
    for (let index = 0; index < MESSAGES; index += 1) {
      const message = randomBytes(index * 13);
      const signature = es256Sign(privateKey, message);
      ws.write(`es-msg-${index}.bin`, message);
      ws.write(`es-sig-${index}.der`, rawSignatureToDer(base64urlDecode(signature)));
      ws.write(`es-bad-${index}.bin`, Buffer.concat([message, Buffer.of(index)]));
    }
    const good = verifyLoop(
      (i) => `openssl dgst -sha256 -verify es-pub.pem -signature es-sig-${i}.der es-msg-${i}.bin`,
      MESSAGES,
    );
    expect(good).toEqual(Array.from({ length: MESSAGES }, (_, index) => `${index} ok`));
    const bad = verifyLoop(
      (i) => `openssl dgst -sha256 -verify es-pub.pem -signature es-sig-${i}.der es-bad-${i}.bin`,
      MESSAGES,
    );
    expect(bad).toEqual(Array.from({ length: MESSAGES }, (_, index) => `${index} fail`));
  });

  test(`we verify ${MESSAGES} openssl signatures (low-S and high-S as openssl makes them) and refuse changed ones`, () => {
    ws.must(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'ossl-key.pem']);
    ws.must(['pkey', '-in', 'ossl-key.pem', '-pubout', '-out', 'ossl-pub.pem']);
    const publicKey = importPublicKey(ws.read('ossl-pub.pem').toString());
    // openssl's key file imports as our private key, and its public half is the same key.
    expect(exportPublicKeySpki(importPrivateKey(ws.read('ossl-key.pem').toString()))).toBe(
      exportPublicKeySpki(publicKey),
    );
    const messages = Array.from({ length: MESSAGES }, (_, index) => randomBytes(index * 11 + 1));
    messages.forEach((message, index) => {
      ws.write(`ossl-msg-${index}.bin`, message);
    });
    const signed = verifyLoop(
      (i) => `openssl dgst -sha256 -sign ossl-key.pem -out ossl-sig-${i}.der ossl-msg-${i}.bin`,
      MESSAGES,
    );
    expect(signed.every((line) => line.endsWith(' ok'))).toBe(true);

    let highS = 0;
    messages.forEach((message, index) => {
      const raw = derSignatureToRaw(ws.read(`ossl-sig-${index}.der`));
      if (BigInt(`0x${Buffer.from(raw.subarray(32)).toString('hex')}`) > HALF_N) highS += 1;
      const signature = base64urlEncode(raw);
      expect(es256Verify(publicKey, message, signature)).toBe(true);
      expect(es256Verify(publicKey, Buffer.concat([message, Buffer.of(1)]), signature)).toBe(false);
    });
    // openssl does not normalise S: about half of its signatures are high-S (none in 100: p = 2^-100).
    expect(highS).toBeGreaterThan(0);
    expect(highS).toBeLessThan(MESSAGES);
  });
});

describe('CSRs against openssl req', () => {
  test('openssl accepts our requests and refuses one whose key was swapped', async () => {
    const keyPair = generateEs256KeyPair();
    const pem = await createCsr({ subject: 'CN=device 1234, O=City', keyPair });
    ws.write('ours.csr', pem);
    // openssl 3.0 exits 0 even when the self-signature fails, so the verdict is read from its message.
    const verified = ws.run(['req', '-verify', '-noout', '-in', 'ours.csr']);
    expect(verified.ok).toBe(true);
    expect(verified.stderr.trim()).toBe('Certificate request self-signature verify OK');
    expect(ws.must(['req', '-noout', '-subject', '-in', 'ours.csr']).trim()).toBe(
      'subject=CN = device 1234, O = City',
    );

    const der = Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
    const own = keyPair.publicKey.export({ format: 'der', type: 'spki' });
    const swapped = Buffer.from(der);
    generateEs256KeyPair().publicKey.export({ format: 'der', type: 'spki' }).copy(swapped, der.indexOf(own));
    ws.write('swapped.csr', swapped);
    const refused = ws.run(['req', '-verify', '-noout', '-inform', 'DER', '-in', 'swapped.csr']);
    expect(refused.stderr).toContain('self-signature verify failure');
    expect(refused.stderr).not.toContain('verify OK');
    expect((await parseCsr(swapped.toString('base64'))).signatureValid).toBe(false);
  });

  test('we read openssl requests: P-256 accepted, P-384 and Ed25519 refused', async () => {
    ws.must(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'csr-p256.pem']);
    ws.must(['req', '-new', '-key', 'csr-p256.pem', '-subj', '/CN=device 9/O=City', '-out', 'p256.csr']);
    const info = await parseCsr(ws.read('p256.csr').toString());
    expect(info).toMatchObject({ subject: 'CN=device 9, O=City', signatureValid: true });
    expect(info.publicKeySpki).toBe(
      exportPublicKeySpki(importPrivateKey(ws.read('csr-p256.pem').toString())),
    );

    ws.must(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384', '-out', 'csr-p384.pem']);
    ws.must(['req', '-new', '-key', 'csr-p384.pem', '-subj', '/CN=p384', '-out', 'p384.csr']);
    ws.must(['genpkey', '-algorithm', 'ED25519', '-out', 'csr-ed.pem']);
    ws.must(['req', '-new', '-key', 'csr-ed.pem', '-subj', '/CN=ed', '-out', 'ed.csr']);
    for (const name of ['p384.csr', 'ed.csr']) {
      const error = await parseCsr(ws.read(name).toString()).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(CryptoError);
      expect((error as CryptoError).code).toBe('unsupported_algorithm');
    }
  });
});

describe('certificate chains against openssl verify', () => {
  test('openssl accepts our root -> issuing -> leaf chains for each usage and purpose', async () => {
    const client = await issueLeaf(pki, 'client', { subject: 'CN=device 1234, O=City' });
    const server = await issueLeaf(pki, 'server', {
      subject: 'CN=devices.city.example, O=City',
      dnsNames: ['devices.city.example'],
      ipAddresses: ['10.0.0.7'],
    });
    const signing = await issueLeaf(pki, 'signing', { subject: 'CN=Approval Signer, O=City' });
    ws.write('client.pem', client.pem);
    ws.write('server.pem', server.pem);
    ws.write('signing.pem', signing.pem);
    const verify = (leaf: string, ...extra: string[]) => ws.verifyCertificate(leaf, { at: AT, extra });

    for (const leaf of ['client.pem', 'server.pem', 'signing.pem']) {
      const result = verify(leaf);
      expect(result.stdout.trim()).toBe(`${leaf}: OK`);
    }
    expect(verify('client.pem', '-purpose', 'sslclient').ok).toBe(true);
    expect(verify('server.pem', '-purpose', 'sslserver', '-verify_hostname', 'devices.city.example').ok).toBe(
      true,
    );
    expect(verify('server.pem', '-purpose', 'sslserver', '-verify_ip', '10.0.0.7').ok).toBe(true);
    expect(verify('signing.pem', '-purpose', 'smimesign').ok).toBe(true);

    // @ooh/verify's walk, which the platform and every reader use, agrees on each chain and purpose.
    const chainOf = (pem: string, purpose?: 'clientAuth' | 'serverAuth') =>
      verifyChain({
        leaf: parsePem(pem)[0]!,
        pool: parsePem(pki.issuingPem),
        roots: parsePem(pki.rootPem),
        at: AT,
        ...(purpose ? { purpose } : {}),
      });
    for (const leaf of [client, server, signing]) expect((await chainOf(leaf.pem)).ok).toBe(true);
    expect((await chainOf(client.pem, 'clientAuth')).ok).toBe(true);
    expect((await chainOf(server.pem, 'serverAuth')).ok).toBe(true);
    expect((await chainOf(client.pem, 'serverAuth')).ok).toBe(false);
    expect((await chainOf(server.pem, 'clientAuth')).ok).toBe(false);

    // And the refusals: wrong purpose, wrong name, missing intermediate, other root, outside validity.
    expect(verify('client.pem', '-purpose', 'sslserver').ok).toBe(false);
    expect(verify('server.pem', '-purpose', 'sslclient').ok).toBe(false);
    expect(verify('server.pem', '-verify_hostname', 'other.example').ok).toBe(false);
    expect(ws.verifyCertificate('client.pem', { untrusted: null, at: AT }).ok).toBe(false);
    expect(ws.verifyCertificate('client.pem', { ca: 'other-root.pem', at: AT }).ok).toBe(false);
    const afterExpiry = new Date('2031-06-01T00:00:00Z');
    expect(ws.verifyCertificate('client.pem', { at: afterExpiry }).ok).toBe(false);
  });
});

describe('CMS SignedData against openssl cms', () => {
  const content = Buffer.from(
    '{"body":{"kind":"approval","approval_number":"A-1"},"v":1}\n\u0000\r\n binary',
    'latin1',
  );

  test('openssl verifies ours (with and without -purpose any) and refuses a tampered body and another root', async () => {
    const signer = await issueLeaf(pki, 'signing', { subject: 'CN=Approval Signer, O=City' });
    const der = await cmsSign({
      content,
      signerCertificatePem: signer.pem,
      signerKey: signer.keys.privateKey,
      signingTime: AT,
      extraCertificatesPem: [pki.issuingPem],
    });
    ws.write('ours.p7s', der);
    const verify = (file: string, ca: string, ...extra: string[]) =>
      ws.verifyCms(file, { ca, at: AT, extra });

    // DESIGN.md §4 names exactly this command, without -purpose any.
    const plain = verify('ours.p7s', 'root.pem');
    expect(plain.ok).toBe(true);
    expect(ws.read('ours.p7s.out').equals(content)).toBe(true);
    expect(verify('ours.p7s', 'root.pem', '-purpose', 'any').ok).toBe(true);
    // The content where it is asked for; and without -attime openssl judges by its own clock, before these
    // certificates' 2030.
    expect(ws.verifyCms('ours.p7s', { ca: 'root.pem', at: AT, out: 'ours.content' }).ok).toBe(true);
    expect(ws.read('ours.content').equals(content)).toBe(true);
    const today = ws.verifyCms('ours.p7s', { ca: 'root.pem', out: 'today.content' });
    expect(today.ok).toBe(false);
    expect(today.stderr).toMatch(/certificate is not yet valid/);

    const tampered = Buffer.from(der);
    tampered[tampered.indexOf(content) + 3]! ^= 0x20;
    ws.write('tampered.p7s', tampered);
    expect(verify('tampered.p7s', 'root.pem', '-purpose', 'any').ok).toBe(false);
    expect((await verifyCms(new Uint8Array(tampered), { roots: parsePem(pki.rootPem), at: AT })).ok).toBe(
      false,
    );

    expect(verify('ours.p7s', 'other-root.pem', '-purpose', 'any').ok).toBe(false);
    expect((await verifyCms(der, { roots: parsePem((await createPki()).rootPem), at: AT })).ok).toBe(false);
    // And @ooh/verify, which every reader uses, accepts what openssl accepts.
    expect((await verifyCms(der, { roots: parsePem(pki.rootPem), at: AT })).ok).toBe(true);

    // Without the embedded issuing CA, `-CAfile root.pem` alone cannot build the chain (and openssl 3.0's
    // cms -verify does not use -certfile for chain building): signers must pass extraCertificatesPem.
    const bare = await cmsSign({
      content,
      signerCertificatePem: signer.pem,
      signerKey: signer.keys.privateKey,
      signingTime: AT,
    });
    ws.write('bare.p7s', bare);
    ws.write('root-and-issuing.pem', pki.rootPem + pki.issuingPem);
    expect(verify('bare.p7s', 'root.pem').ok).toBe(false);
    expect(verify('bare.p7s', 'root-and-issuing.pem').ok).toBe(true);

    // openssl reads the three signed attributes as we meant them.
    const printed = ws.must(['cms', '-cmsout', '-print', '-inform', 'DER', '-in', 'ours.p7s']);
    expect(printed).toContain('contentType (1.2.840.113549.1.9.3)');
    expect(printed).toContain('signingTime (1.2.840.113549.1.9.5)');
    expect(printed).toContain('messageDigest (1.2.840.113549.1.9.4)');
    expect(printed).toContain('UTCTIME:Jun  1 12:00:00 2030 GMT');
  });
});
