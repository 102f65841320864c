import { randomBytes } from 'node:crypto';
import { parsePem, verifyBlockTimestamp } from '@ooh/verify';
import { describe, expect, test } from 'vitest';
import {
  createTimeStampRequest,
  hexEncode,
  parseTimeStampResponse,
  readTimeStampToken,
  sha256,
  timeStampReply,
} from '../src/index.js';
import { type OpensslTsa, tsasForFile } from './helpers/tsa.js';

// RFC 3161 with `openssl ts` as the time-stamping authority (STYLE.md §7: openssl checks our side). Whether a token
// verifies is @ooh/verify's verifyBlockTimestamp (its cases: packages/verify/test/timestamp.test.ts); here, what the
// client side sends and reads, and the replies it wraps verified by openssl and by @ooh/verify.

const tsas = tsasForFile({
  tsa: { name: 'Test TSA' },
  other: { name: 'Other TSA' },
  rsa: { name: 'RSA TSA', key: 'rsa' },
});

/** A granted token from `authority` for `digest`, with the request's nonce. */
async function stamp(
  authority: OpensslTsa,
  digest: Uint8Array,
  options: { certReq?: boolean } = {},
): Promise<{ token: Uint8Array; reply: Buffer; nonceHex: string }> {
  const request = createTimeStampRequest({ digest, ...options });
  const reply = await authority.reply(request.der);
  const parsed = parseTimeStampResponse(reply);
  if (!parsed.ok) throw new Error(parsed.reason);
  return { token: parsed.token, reply, nonceHex: request.nonceHex };
}

describe('the request', () => {
  test('openssl reads our TimeStampReq: SHA-256 imprint, nonce, certificate required', () => {
    const digest = sha256('block');
    const request = createTimeStampRequest({ digest });
    tsas.tsa.ws.write('ours.tsq', request.der);
    const text = tsas.tsa.ws.must(['ts', '-query', '-in', 'ours.tsq', '-text']);
    expect(text).toContain('Hash Algorithm: sha256');
    // openssl prints the imprint as a hex dump in two lines of 16 bytes.
    const dump = text.replace(/[\s-]/g, '').toLowerCase();
    expect(dump).toContain(hexEncode(digest).slice(0, 32));
    expect(dump).toContain(hexEncode(digest).slice(32));
    expect(text).toMatch(/Nonce: 0x([0-9A-F]+)/);
    expect(/Nonce: 0x([0-9A-F]+)/.exec(text)?.[1]?.toLowerCase()).toBe(request.nonceHex);
    expect(text).toContain('Certificate required: yes');
    // The same as openssl writes for the same digest, but for the nonce: DER, byte for byte.
    tsas.tsa.ws.must([
      'ts',
      '-query',
      '-digest',
      hexEncode(digest),
      '-sha256',
      '-cert',
      '-no_nonce',
      '-out',
      'theirs.tsq',
    ]);
    const theirs = tsas.tsa.ws.read('theirs.tsq');
    const ours = createTimeStampRequest({ digest, nonce: Uint8Array.of(1) }).der;
    // Ours has the nonce INTEGER 1 (3 bytes) before certReq; the outer length grows by 3.
    expect(Buffer.from(ours).subarray(2).toString('hex')).toBe(
      Buffer.concat([
        theirs.subarray(2, theirs.length - 3),
        Buffer.from('020101', 'hex'),
        theirs.subarray(-3),
      ]).toString('hex'),
    );
    expect(ours[1]).toBe(theirs[1]! + 3);
  });

  test('refuses a digest that is not 32 bytes and a bad policy', () => {
    expect(() => createTimeStampRequest({ digest: new Uint8Array(20) })).toThrow(/32 bytes/);
    expect(() => createTimeStampRequest({ digest: sha256('x'), policy: 'policy' })).toThrow(
      /object identifier/,
    );
  });
});

describe('the token', () => {
  test("reads the token's nonce (the request's) and the subject of the TSA certificate it carries", async () => {
    for (const [authority, subject] of [
      [tsas.tsa, 'CN=Test TSA'],
      [tsas.rsa, 'CN=RSA TSA'],
    ] as const) {
      const digest = sha256(`day of ${subject}`);
      const { token, nonceHex } = await stamp(authority, digest);
      expect(readTimeStampToken(token)).toEqual({ nonceHex, signerSubject: subject });
      // The same token, as a reply, verifies with @ooh/verify under the TSA's CA.
      const verified = await verifyBlockTimestamp(
        timeStampReply(token),
        hexEncode(digest),
        parsePem(authority.caPem),
      );
      expect(verified).toMatchObject({ ok: true });
    }
    // Another request's token carries another nonce.
    const first = await stamp(tsas.tsa, sha256('one'));
    const second = await stamp(tsas.tsa, sha256('one'));
    expect(readTimeStampToken(second.token)?.nonceHex).not.toBe(first.nonceHex);
    expect(readTimeStampToken(randomBytes(40))).toBeNull();
    expect(readTimeStampToken(new Uint8Array(0))).toBeNull();
  });

  test('openssl ts -verify accepts the token wrapped again as a reply, for the digest', async () => {
    const digest = sha256('day 2026-11-21');
    const { token, reply } = await stamp(tsas.tsa, digest);
    // What the platform stores is the token; what it publishes is a granted reply around it.
    const rewrapped = timeStampReply(token);
    tsas.tsa.ws.write('rewrapped.tsr', rewrapped);
    tsas.tsa.ws.write('reply.tsr', reply);
    for (const file of ['rewrapped.tsr', 'reply.tsr']) {
      const ok = tsas.tsa.ws.run([
        'ts',
        '-verify',
        '-digest',
        hexEncode(digest),
        '-in',
        file,
        '-CAfile',
        'ca.pem',
      ]);
      expect(ok.stdout + ok.stderr).toContain('Verification: OK');
      const wrong = tsas.tsa.ws.run([
        'ts',
        '-verify',
        '-digest',
        hexEncode(sha256('other')),
        '-in',
        file,
        '-CAfile',
        'ca.pem',
      ]);
      expect(wrong.ok).toBe(false);
    }
    expect(parseTimeStampResponse(rewrapped)).toMatchObject({ ok: true, token });
  });

  test('without the certificate in the token (certReq false) no subject is read; the pinned TSA certificate signs', async () => {
    const digest = sha256('no cert');
    const { token, nonceHex } = await stamp(tsas.tsa, digest, { certReq: false });
    expect(readTimeStampToken(token)).toEqual({ nonceHex, signerSubject: null });
    const reply = timeStampReply(token);
    expect(await verifyBlockTimestamp(reply, hexEncode(digest), parsePem(tsas.tsa.tsaPem))).toMatchObject({
      ok: true,
    });
    expect(await verifyBlockTimestamp(reply, hexEncode(digest), parsePem(tsas.tsa.caPem))).toMatchObject({
      ok: false,
      code: 'not_pinned',
    });
  });
});

describe('the response', () => {
  test('a rejection is read with its reason, garbage is refused, and nothing throws', async () => {
    const request = createTimeStampRequest({ digest: sha256('x'), policy: '1.2.3.4.99' });
    const rejected = parseTimeStampResponse(await tsas.tsa.reply(request.der));
    expect(rejected).toMatchObject({
      ok: false,
      status: 'rejection',
      reason: expect.stringMatching(/unacceptedPolicy/),
    });
    expect(parseTimeStampResponse(randomBytes(40))).toMatchObject({ ok: false });
    expect(parseTimeStampResponse(new Uint8Array(0))).toMatchObject({ ok: false });
    // DER asn1js throws on (a GeneralizedTime it cannot convert), alone and inside a SEQUENCE.
    for (const b64 of ['GAA=', 'GAEw', 'MAMYATA=']) {
      expect(parseTimeStampResponse(Buffer.from(b64, 'base64'))).toMatchObject({ ok: false });
    }
    expect(() => timeStampReply(randomBytes(3))).toThrow();
  });
});
