import { cmsSign } from '@ooh/crypto';
import { beforeAll, describe, expect, test } from 'vitest';
import { AT, createPki, issueLeaf, NOT_AFTER, NOT_BEFORE, type Pki } from '../../crypto/test/helpers/pki.js';
import { canonicalBytes, type Certificate, parsePem, verifySignedDocument } from '../src/index.js';

// Signed documents as the platform makes envelopes and revocation lists (DESIGN.md §4): a CMS over the canonical
// JSON of body, base64 in `signature`.

interface ListBody {
  version: number;
  issued_at: string;
  revoked: { approval_number: string; revoked_at: string }[];
}
const isListBody = (body: unknown): body is ListBody =>
  typeof body === 'object' && body !== null && Number.isSafeInteger((body as { version?: unknown }).version);

let pki: Pki;
let root: Certificate;
let otherRoot: Certificate;
let sign: (body: unknown) => Promise<string>;

beforeAll(async () => {
  pki = await createPki();
  root = parsePem(pki.rootPem)[0]!;
  otherRoot = parsePem((await createPki('Other')).rootPem)[0]!;
  const signer = await issueLeaf(pki, 'signing', { subject: 'CN=Revocation Signer, O=City' });
  sign = async (body) =>
    Buffer.from(
      await cmsSign({
        content: canonicalBytes(body),
        signerCertificatePem: signer.pem,
        signerKey: signer.keys.privateKey,
        signingTime: AT,
        extraCertificatesPem: [pki.issuingPem],
      }),
    ).toString('base64');
});

const body: ListBody = {
  version: 3,
  issued_at: '2030-06-01T17:00:00+05:00',
  revoked: [{ approval_number: 'A-2030-0001', revoked_at: '2030-06-01T16:00:00+05:00' }],
};

describe('verifySignedDocument', () => {
  test('a revocation list verifies: the body, the chain, the signing time and the window', async () => {
    // Member order in the text does not matter: the signature is over the canonical JSON.
    const text = JSON.stringify({ v: 1, signature: await sign(body), body });
    const result = await verifySignedDocument(text, isListBody, [root], AT);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.body).toEqual(body);
    expect(result.signingTime).toEqual(AT);
    expect(result.chain.map((c) => c.subjectCommonName)).toEqual([
      'Revocation Signer',
      'City Issuing CA',
      'City Root CA',
    ]);
    expect(result.window).toEqual({ notBefore: NOT_BEFORE, notAfter: NOT_AFTER });
  });

  test("without a time the dates are the caller's to judge; with one outside the window the chain fails", async () => {
    const text = JSON.stringify({ v: 1, body, signature: await sign(body) });
    const undated = await verifySignedDocument(text, null, [root], null);
    expect(undated.ok && undated.window.notAfter).toEqual(NOT_AFTER);
    const late = await verifySignedDocument(text, null, [root], new Date('2032-01-01T00:00:00Z'));
    expect(late.ok ? 'ok' : late.error.code).toBe('chain_expired');
  });

  test('each refusal has its code', async () => {
    const signature = await sign(body);
    const cases: [string, string][] = [
      ['not json', 'document_malformed'],
      ['[1]', 'document_malformed'],
      [JSON.stringify({ body }), 'document_unsigned'],
      [JSON.stringify({ body, signature: '' }), 'document_unsigned'],
      [JSON.stringify({ body, signature: null }), 'document_unsigned'],
      [JSON.stringify({ body, signature: 42 }), 'document_malformed'],
      [JSON.stringify({ signature }), 'document_malformed'],
      [JSON.stringify({ body, signature: 'bm90IGEgY21z' }), 'malformed'],
      [JSON.stringify({ body: { ...body, version: 4 }, signature }), 'document_content_differs'],
      [JSON.stringify({ body: { ...body, extra: true }, signature }), 'document_content_differs'],
    ];
    for (const [text, code] of cases) {
      const result = await verifySignedDocument(text, isListBody, [root], AT);
      expect(result.ok ? 'ok' : result.error.code, text.slice(0, 60)).toBe(code);
    }
    const foreign = await verifySignedDocument(JSON.stringify({ body, signature }), null, [otherRoot], AT);
    expect(foreign.ok ? 'ok' : foreign.error.code).toBe('chain_no_issuer');
    const notAList = { hello: 'world' };
    const invalid = await verifySignedDocument(
      JSON.stringify({ body: notAList, signature: await sign(notAList) }),
      isListBody,
      [root],
      AT,
    );
    expect(invalid.ok ? 'ok' : invalid.error.code).toBe('document_body_invalid');
  });

  test("asked for the envelope signer's role, a list signed by the seal signer fails signer_role (audit H)", async () => {
    const signWith = async (subject: string, serialHex: string) => {
      const signer = await issueLeaf(pki, 'signing', { subject, serialHex });
      const signature = await cmsSign({
        content: canonicalBytes(body),
        signerCertificatePem: signer.pem,
        signerKey: signer.keys.privateKey,
        signingTime: AT,
        extraCertificatesPem: [pki.issuingPem],
      });
      return JSON.stringify({ v: 1, body, signature: Buffer.from(signature).toString('base64') });
    };
    const bySealSigner = await signWith('CN=OOH Stats Seal Signer, O=City', '2001');
    const refused = await verifySignedDocument(bySealSigner, isListBody, [root], AT, 'envelope');
    expect(refused.ok ? 'ok' : refused.error.code).toBe('signer_role');
    // Without a role asked, any signer of the authority (the agent's use, unchanged).
    expect((await verifySignedDocument(bySealSigner, isListBody, [root], AT)).ok).toBe(true);
    const byEnvelopeSigner = await signWith('CN=OOH Approval Envelope Signer, O=City', '2002');
    expect((await verifySignedDocument(byEnvelopeSigner, isListBody, [root], AT, 'envelope')).ok).toBe(true);
    // A name that only contains the role's words is not the role.
    const lookalike = await signWith('CN=Envelope Signer Backup, O=City', '2003');
    const notRole = await verifySignedDocument(lookalike, isListBody, [root], AT, 'envelope');
    expect(notRole.ok ? 'ok' : notRole.error.code).toBe('signer_role');
  });
});
