import { createIntermediateCa, generateEs256KeyPair, issueCertificate } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type OpensslWorkspace, pkiWorkspace } from '../../crypto/test/helpers/openssl.js';
import { AT, createPki, issueLeaf, NOT_AFTER, NOT_BEFORE, type Pki } from '../../crypto/test/helpers/pki.js';
import { type Certificate, type ChainResult, parsePem, verifyChain } from '../src/index.js';

// The chain walk's paths and dates (the cases @ooh/crypto's own walk was tested with, moved here when it went), and
// `purpose`, cross-checked with `openssl verify -purpose`: what TLS checks of a client's chain, so the devices host
// behind a proxy refuses what it refuses on a direct TLS connection.

let ws: OpensslWorkspace;
let pki: Pki;
let root: Certificate;
let issuing: Certificate;

beforeAll(async () => {
  ({ ws, pki } = await pkiWorkspace());
  root = parsePem(pki.rootPem)[0]!;
  issuing = parsePem(pki.issuingPem)[0]!;
});
afterAll(() => ws.dispose());

const one = (pem: string) => parsePem(pem)[0]!;
const codeOf = (result: ChainResult) => (result.ok ? 'ok' : result.error.code);
const ders = (result: ChainResult) => (result.ok ? result.chain.map((c) => c.der) : null);

function opensslVerify(leafPem: string, purpose: string): boolean {
  ws.write('leaf.pem', leafPem);
  return ws.verifyCertificate('leaf.pem', { at: AT, extra: ['-purpose', purpose] }).ok;
}

describe('verifyChain: paths and dates', () => {
  test('leaf -> issuing -> root, in that order, its window the dates every certificate shares', async () => {
    const leaf = one((await issueLeaf(pki, 'client')).pem);
    const result = await verifyChain({ leaf, pool: [issuing], roots: [root], at: AT });
    expect(ders(result)).toEqual([leaf.der, issuing.der, root.der]);
    expect(result.ok && result.window).toEqual({ notBefore: NOT_BEFORE, notAfter: NOT_AFTER });
    // Boundaries of the validity period are inside it.
    for (const at of [NOT_BEFORE, NOT_AFTER]) {
      expect(codeOf(await verifyChain({ leaf, pool: [issuing], roots: [root], at }))).toBe('ok');
    }
  });

  test('finds the issuer among several intermediates and roots; an issuing CA given as a root is an anchor', async () => {
    const other = await createPki('Elsewhere');
    const leaf = one((await issueLeaf(pki, 'server', { dnsNames: ['a.example'] })).pem);
    const result = await verifyChain({
      leaf,
      pool: [one(other.issuingPem), issuing],
      roots: [one(other.rootPem), root],
      at: AT,
    });
    expect(ders(result)).toEqual([leaf.der, issuing.der, root.der]);
    expect(ders(await verifyChain({ leaf, roots: [issuing], at: AT }))).toEqual([leaf.der, issuing.der]);
  });

  test('fails outside the validity period, without the intermediate, or under a root of the same name', async () => {
    const leaf = one((await issueLeaf(pki, 'client')).pem);
    const base = { leaf, pool: [issuing], roots: [root], at: AT };
    expect(codeOf(await verifyChain({ ...base, at: new Date(NOT_BEFORE.getTime() - 1000) }))).toBe(
      'chain_not_yet_valid',
    );
    expect(codeOf(await verifyChain({ ...base, at: new Date(NOT_AFTER.getTime() + 1000) }))).toBe(
      'chain_expired',
    );
    expect(codeOf(await verifyChain({ ...base, pool: [] }))).toBe('chain_no_issuer');
    // A root with the same name but another key: the issuing CA's authority key identifier names the other key, so
    // the name alone does not make it the issuer (OpenSSL's X509_check_issued).
    const sameName = one((await createPki()).rootPem);
    expect(codeOf(await verifyChain({ ...base, roots: [sameName] }))).toBe('chain_no_issuer');
  });

  test('an expired intermediate breaks the chain even when leaf and root are valid', async () => {
    const keys = generateEs256KeyPair();
    const shortPem = await createIntermediateCa({
      subject: 'CN=Short Issuing, O=City',
      publicKey: keys.publicKey,
      issuerCertificatePem: pki.rootPem,
      issuerKey: pki.rootKeys.privateKey,
      notBefore: NOT_BEFORE,
      notAfter: new Date('2030-03-01T00:00:00Z'),
    });
    const leafPem = await issueCertificate({
      subject: 'CN=leaf, O=City',
      publicKey: generateEs256KeyPair().publicKey,
      issuerCertificatePem: shortPem,
      issuerKey: keys.privateKey,
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
      serialHex: '05',
      usage: 'client',
    });
    const args = { leaf: one(leafPem), pool: [one(shortPem)], roots: [root] };
    const early = await verifyChain({ ...args, at: new Date('2030-02-01T00:00:00Z') });
    expect(early.ok && early.window.notAfter).toEqual(new Date('2030-03-01T00:00:00Z'));
    expect(codeOf(await verifyChain({ ...args, at: AT }))).toBe('chain_expired');
    // Dates not judged (at null): the caller judges the window instead.
    expect(codeOf(await verifyChain({ ...args, at: null }))).toBe('ok');
  });
});

describe('verifyChain: the authority key identifier', () => {
  test("a child naming its issuer's serial (authorityCertSerialNumber) is issued only by that certificate", async () => {
    // A second certificate for the issuing CA's own key and name, with another serial: openssl signs a leaf "by" it,
    // its authority key identifier naming that serial. Key and name alike, only the serial tells the two apart.
    const twinPem = await createIntermediateCa({
      subject: 'CN=City Issuing CA, O=City',
      publicKey: pki.issuingKeys.publicKey,
      issuerCertificatePem: pki.rootPem,
      issuerKey: pki.rootKeys.privateKey,
      notBefore: NOT_BEFORE,
      notAfter: NOT_AFTER,
      serialHex: '7e57',
      pathLength: 0,
    });
    const twin = one(twinPem);
    expect(twin.subject).toEqual(issuing.subject);
    ws.write('twin.pem', twinPem);
    ws.write('issuing-key.pem', pki.issuingKeys.privateKey.export({ format: 'pem', type: 'pkcs8' }));
    ws.must(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'aki-key.pem']);
    ws.must(['req', '-new', '-key', 'aki-key.pem', '-subj', '/CN=aki leaf', '-out', 'aki.csr']);
    ws.write(
      'aki.ext',
      'basicConstraints=critical,CA:FALSE\nauthorityKeyIdentifier=keyid:always,issuer:always\n',
    );
    ws.must([
      'x509',
      '-req',
      '-in',
      'aki.csr',
      '-CA',
      'twin.pem',
      '-CAkey',
      'issuing-key.pem',
      '-set_serial',
      '80',
      '-days',
      '3650',
      '-extfile',
      'aki.ext',
      '-out',
      'aki.pem',
    ]);
    const leaf = one(ws.read('aki.pem').toString());
    expect(leaf.authorityCertSerial).toEqual(twin.serial);
    expect(codeOf(await verifyChain({ leaf, pool: [twin], roots: [root], at: null }))).toBe('ok');
    expect(codeOf(await verifyChain({ leaf, pool: [issuing], roots: [root], at: null }))).toBe(
      'chain_no_issuer',
    );
    // openssl verify says the same of both.
    ws.write('leaf.pem', ws.read('aki.pem'));
    const opensslWith = (pool: string) => ws.verifyCertificate('leaf.pem', { untrusted: pool, at: null }).ok;
    expect(opensslWith('twin.pem')).toBe(true);
    expect(opensslWith('issuing.pem')).toBe(false);
  });
});

describe('verifyChain: purpose', () => {
  test('a client certificate is for clientAuth, as openssl verify -purpose sslclient says', async () => {
    const { pem } = await issueLeaf(pki, 'client');
    expect(
      codeOf(
        await verifyChain({ leaf: one(pem), pool: [issuing], roots: [root], at: AT, purpose: 'clientAuth' }),
      ),
    ).toBe('ok');
    expect(opensslVerify(pem, 'sslclient')).toBe(true);
  });

  test('a server certificate of the same CA is refused for clientAuth (chain_purpose), and openssl agrees', async () => {
    const { pem } = await issueLeaf(pki, 'server', { dnsNames: ['devices.city.kz'] });
    const leaf = one(pem);
    expect(
      codeOf(await verifyChain({ leaf, pool: [issuing], roots: [root], at: AT, purpose: 'clientAuth' })),
    ).toBe('chain_purpose');
    expect(opensslVerify(pem, 'sslclient')).toBe(false);
    // Without a purpose the same chain verifies (only its path and dates are asked), and it is good for serverAuth.
    expect(codeOf(await verifyChain({ leaf, pool: [issuing], roots: [root], at: AT }))).toBe('ok');
    expect(
      codeOf(await verifyChain({ leaf, pool: [issuing], roots: [root], at: AT, purpose: 'serverAuth' })),
    ).toBe('ok');
    expect(opensslVerify(pem, 'sslserver')).toBe(true);
  });

  test('a leaf whose keyUsage allows neither digitalSignature nor keyAgreement is refused; openssl agrees', async () => {
    ws.write('issuing-key.pem', pki.issuingKeys.privateKey.export({ format: 'pem', type: 'pkcs8' }));
    ws.must(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'ku-key.pem']);
    ws.must(['req', '-new', '-key', 'ku-key.pem', '-subj', '/CN=nonrepudiation only', '-out', 'ku.csr']);
    ws.write(
      'ku.ext',
      'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,nonRepudiation\nextendedKeyUsage=clientAuth\n',
    );
    ws.must([
      'x509',
      '-req',
      '-in',
      'ku.csr',
      '-CA',
      'issuing.pem',
      '-CAkey',
      'issuing-key.pem',
      '-set_serial',
      '79',
      '-days',
      '3650',
      '-extfile',
      'ku.ext',
      '-out',
      'ku.pem',
    ]);
    const pem = ws.read('ku.pem').toString();
    const leaf = one(pem);
    // Issued "now" for ten years: judged at its own start, where the test CA (2030) is valid too only if it covers
    // it; so the dates are left out (at null) and only path and purpose are asked.
    expect(codeOf(await verifyChain({ leaf, pool: [issuing], roots: [root], at: null }))).toBe('ok');
    expect(
      codeOf(await verifyChain({ leaf, pool: [issuing], roots: [root], at: null, purpose: 'clientAuth' })),
    ).toBe('chain_purpose');
    ws.write('leaf.pem', pem);
    expect(ws.verifyCertificate('leaf.pem', { at: null, extra: ['-purpose', 'sslclient'] }).ok).toBe(false);
    expect(ws.verifyCertificate('leaf.pem', { at: null }).ok).toBe(true);
  });
});
