import { generateEs256KeyPair, issueCertificate, randomSerialHex } from '@ooh/crypto';
import { verifySignedDocument } from '@ooh/verify';
import { beforeAll, describe, expect, it } from 'vitest';
import { EnvelopeVerifier, verifyEnvelope } from '../../src/media/envelope.js';
import { manifestFor, sha256Of } from '../helpers/media.js';
import { createTestPki, type SignerMaterial, signEnvelope, type TestPki } from '../helpers/pki.js';

const noRevocations = { isRevoked: () => false };
const NOW = new Date('2026-11-21T09:00:00.000Z');

describe('envelope verification (DESIGN.md §4, §9)', () => {
  let pki: TestPki;
  let otherPki: TestPki;
  const media = 'media bytes';
  const sha = sha256Of(media);

  beforeAll(async () => {
    pki = await createTestPki(new Date('2026-01-01T00:00:00Z'));
    otherPki = await createTestPki(new Date('2026-01-01T00:00:00Z'));
  });

  async function check(
    envelope: unknown,
    overrides: { now?: Date; structure?: string; mediaSha256?: string; revoked?: boolean } = {},
  ) {
    return verifyEnvelope({
      envelopeText:
        envelope === null ? null : typeof envelope === 'string' ? envelope : JSON.stringify(envelope),
      mediaSha256: overrides.mediaSha256 ?? sha,
      trustedRootsPem: [pki.authorityRootPem],
      now: overrides.now ?? NOW,
      structure: overrides.structure ?? 'ALM-0001',
      revocations: overrides.revoked ? { isRevoked: () => true } : noRevocations,
    });
  }

  it('accepts a signed manifest for this file, structure and day', async () => {
    const verdict = await check(await signEnvelope(pki, manifestFor(sha)));
    expect(verdict.status).toBe('playable');
    if (verdict.status === 'playable') expect(verdict.manifest.approval_number).toBe('APP-2026-000001');
  });

  it('NO_SIGNATURE without a sidecar or without a signature in it', async () => {
    expect(await check(null)).toMatchObject({ status: 'refused', code: 'NO_SIGNATURE' });
    expect(await check({ v: 1, body: manifestFor(sha) })).toMatchObject({
      status: 'refused',
      code: 'NO_SIGNATURE',
    });
    expect(await check({ v: 1, body: manifestFor(sha), signature: '' })).toMatchObject({
      code: 'NO_SIGNATURE',
    });
  });

  it('BAD_SIGNATURE for another root, an altered body, garbage and a non-manifest body', async () => {
    expect(await check(await signEnvelope(otherPki, manifestFor(sha)))).toMatchObject({
      code: 'BAD_SIGNATURE',
    });
    const signed = await signEnvelope(pki, manifestFor(sha));
    const altered = { ...signed, body: { ...(signed.body as object), valid_until: '2199-12-31' } };
    expect(await check(altered)).toMatchObject({ code: 'BAD_SIGNATURE' });
    expect(await check({ ...signed, signature: 'AAAA' })).toMatchObject({ code: 'BAD_SIGNATURE' });
    expect(await check({ ...signed, signature: 'not base64!' })).toMatchObject({ code: 'BAD_SIGNATURE' });
    expect(await check('{not json')).toMatchObject({ code: 'BAD_SIGNATURE' });
    const notManifest = await signEnvelope(pki, { hello: 'world' });
    expect(await check(notManifest)).toMatchObject({ code: 'BAD_SIGNATURE' });
  });

  it('BAD_SIGNATURE naming the code of @ooh/verify: a foreign root, a tampered signed content', async () => {
    const foreign = await check(await signEnvelope(otherPki, manifestFor(sha)));
    expect(foreign).toMatchObject({ status: 'refused', code: 'BAD_SIGNATURE' });
    if (foreign.status === 'refused')
      expect(foreign.reason).toMatch(/^signature does not verify: .+ \(chain_no_issuer\)$/);
    // One byte of the content inside the CMS changed ("APP-2026-000001" becomes "APP-2026-000002"), and the body
    // changed to match it: the signed attributes' message digest no longer matches the content.
    const signed = await signEnvelope(pki, manifestFor(sha));
    const der = Buffer.from(signed.signature, 'base64');
    const at = der.indexOf('APP-2026-000001');
    expect(at).toBeGreaterThan(0);
    der[at + 14] = '2'.charCodeAt(0);
    const tampered = await check({
      ...signed,
      body: manifestFor(sha, { approval_number: 'APP-2026-000002' }),
      signature: der.toString('base64'),
    });
    expect(tampered).toMatchObject({ status: 'refused', code: 'BAD_SIGNATURE' });
    if (tampered.status === 'refused') expect(tampered.reason).toMatch(/\(cms_message_digest\)$/);
  });

  /** A signer issued by the test authority's issuing CA, named `name`, valid between the two dates. */
  async function authoritySigner(name: string, notBefore: string, notAfter: string): Promise<SignerMaterial> {
    const keys = generateEs256KeyPair();
    const certificatePem = await issueCertificate({
      subject: `CN=${name}, O=City`,
      publicKey: keys.publicKey,
      issuerCertificatePem: pki.authorityIssuing.certificatePem,
      issuerKey: pki.authorityIssuing.key,
      notBefore: new Date(notBefore),
      notAfter: new Date(notAfter),
      serialHex: randomSerialHex(),
      usage: 'signing',
    });
    return { certificatePem, key: keys.privateKey };
  }

  it('BAD_SIGNATURE for an envelope signed by the authority seal signer: the roles stay apart', async () => {
    const sealSigner = await authoritySigner(
      'Test Stats Seal Signer',
      '2026-01-01T00:00:00Z',
      '2036-01-01T00:00:00Z',
    );
    const sealSigned = await signEnvelope(pki, manifestFor(sha), undefined, sealSigner);
    const verdict = await check(sealSigned);
    expect(verdict).toMatchObject({ status: 'refused', code: 'BAD_SIGNATURE' });
    if (verdict.status === 'refused') expect(verdict.reason).toMatch(/\(signer_role\)$/);
  });

  it('judges the dates of the whole chain: a signer expired before now is BAD_SIGNATURE, one not yet valid waits', async () => {
    const signerValid = (notBefore: string, notAfter: string) =>
      authoritySigner('Short-lived Approval Envelope Signer', notBefore, notAfter);
    const expired = await signerValid('2026-01-02T00:00:00Z', '2026-11-21T08:59:59Z');
    expect(
      await check(await signEnvelope(pki, manifestFor(sha), new Date('2026-06-01T00:00:00Z'), expired)),
    ).toMatchObject({ status: 'refused', code: 'BAD_SIGNATURE', reason: 'signing certificate expired' });
    const early = await signerValid('2026-11-21T09:00:01Z', '2027-11-21T00:00:00Z');
    expect(
      await check(await signEnvelope(pki, manifestFor(sha), new Date('2026-11-21T09:00:01Z'), early)),
    ).toEqual({
      status: 'not_yet_valid',
      manifest: manifestFor(sha),
      reason: 'signing certificate not yet valid (clock?)',
    });
  });

  it('HASH_MISMATCH when the file is not the approved one', async () => {
    const verdict = await check(await signEnvelope(pki, manifestFor(sha)), {
      mediaSha256: sha256Of('other'),
    });
    expect(verdict).toMatchObject({ status: 'refused', code: 'HASH_MISMATCH' });
  });

  it('REVOKED when the revocation list names the approval', async () => {
    const verdict = await check(await signEnvelope(pki, manifestFor(sha)), { revoked: true });
    expect(verdict).toMatchObject({ status: 'refused', code: 'REVOKED' });
  });

  it('EXPIRED_APPROVAL after valid_until, counted in Almaty days (inclusive)', async () => {
    const envelope = await signEnvelope(
      pki,
      manifestFor(sha, { valid_from: '2026-11-01', valid_until: '2026-11-21' }),
    );
    // 23:59:59.999 on 21 November in Almaty (UTC+5) is still inside.
    expect((await check(envelope, { now: new Date('2026-11-21T18:59:59.999Z') })).status).toBe('playable');
    expect(await check(envelope, { now: new Date('2026-11-21T19:00:00.000Z') })).toMatchObject({
      status: 'refused',
      code: 'EXPIRED_APPROVAL',
      reason: 'valid_until_passed',
    });
  });

  it('before valid_from: not yet playable and not refused', async () => {
    const envelope = await signEnvelope(
      pki,
      manifestFor(sha, { valid_from: '2026-11-22', valid_until: '2026-12-01' }),
    );
    expect((await check(envelope, { now: new Date('2026-11-21T18:59:59.000Z') })).status).toBe(
      'not_yet_valid',
    );
    expect((await check(envelope, { now: new Date('2026-11-21T19:00:00.000Z') })).status).toBe('playable');
  });

  it('EXPIRED_APPROVAL (structure_not_covered) on a structure the approval does not name', async () => {
    const verdict = await check(await signEnvelope(pki, manifestFor(sha, { structures: ['ALM-0002'] })));
    expect(verdict).toMatchObject({
      status: 'refused',
      code: 'EXPIRED_APPROVAL',
      reason: 'structure_not_covered',
    });
  });
  it('remembers a verified signature per envelope text and judges the chain dates from it', async () => {
    let calls = 0;
    const verifier = new EnvelopeVerifier({
      trustedRootsPem: [pki.authorityRootPem],
      verifyDocument: (text, validate, roots, at) => {
        calls++;
        return verifySignedDocument(text, validate, roots, at);
      },
    });
    const text = JSON.stringify(await signEnvelope(pki, manifestFor(sha)));
    const at = (now: Date, mediaSha256 = sha) =>
      verifier.verify({
        envelopeText: text,
        mediaSha256,
        now,
        structure: 'ALM-0001',
        revocations: noRevocations,
      });
    expect((await at(NOW)).status).toBe('playable');
    expect(await at(NOW, sha256Of('other'))).toMatchObject({ code: 'HASH_MISMATCH' });
    // The PKI was made valid from 2025-12-31 for 20 years.
    expect(await at(new Date('2025-06-01T00:00:00Z'))).toMatchObject({
      status: 'not_yet_valid',
      reason: 'signing certificate not yet valid (clock?)',
    });
    expect(await at(new Date('2046-06-01T00:00:00Z'))).toMatchObject({
      status: 'refused',
      code: 'BAD_SIGNATURE',
      reason: 'signing certificate expired',
    });
    expect(calls).toBe(1);
    // The same bytes once more, another envelope, a broken one: one verification each, refusals remembered too.
    const other = JSON.stringify(await signEnvelope(pki, manifestFor(sha, { approval_number: 'APP-X' })));
    const forged = JSON.stringify({
      ...JSON.parse(other),
      body: manifestFor(sha, { approval_number: 'APP-Y' }),
    });
    for (const envelopeText of [other, forged, other, forged]) {
      await verifier.verify({
        envelopeText,
        mediaSha256: sha,
        now: NOW,
        structure: 'ALM-0001',
        revocations: noRevocations,
      });
    }
    expect(calls).toBe(3);
    expect(
      await verifier.verify({
        envelopeText: forged,
        mediaSha256: sha,
        now: NOW,
        structure: 'ALM-0001',
        revocations: noRevocations,
      }),
    ).toMatchObject({ code: 'BAD_SIGNATURE', reason: 'signed content is not the body' });
  });

  it('verifies an envelope asked for by several files at once only once, and does not remember a fault', async () => {
    let calls = 0;
    let fail = true;
    const verifier = new EnvelopeVerifier({
      trustedRootsPem: [pki.authorityRootPem],
      verifyDocument: async (text, validate, roots, at) => {
        calls++;
        if (fail) {
          fail = false;
          throw new Error('a fault, not a verdict');
        }
        return verifySignedDocument(text, validate, roots, at);
      },
    });
    const text = JSON.stringify(await signEnvelope(pki, manifestFor(sha)));
    const ask = () =>
      verifier.verify({
        envelopeText: text,
        mediaSha256: sha,
        now: NOW,
        structure: 'ALM-0001',
        revocations: noRevocations,
      });
    await expect(ask()).rejects.toThrow('a fault, not a verdict');
    const verdicts = await Promise.all([ask(), ask(), ask()]);
    expect(verdicts.map((verdict) => verdict.status)).toEqual(['playable', 'playable', 'playable']);
    expect(calls).toBe(2);
  });
});
