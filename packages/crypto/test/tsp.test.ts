import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createTimeStampRequest,
  hexEncode,
  parseTimeStampResponse,
  sha256,
  timeStampReply,
  verifyTimeStampToken,
} from '../src/index.js';
import { OpensslTsa } from './helpers/tsa.js';

// RFC 3161 with `openssl ts` as the time-stamping authority (STYLE.md §7: openssl checks our side, we check its).

let tsa: OpensslTsa;
let other: OpensslTsa;
let rsa: OpensslTsa;
beforeAll(() => {
  tsa = new OpensslTsa({ name: 'Test TSA' });
  other = new OpensslTsa({ name: 'Other TSA' });
  rsa = new OpensslTsa({ name: 'RSA TSA', key: 'rsa' });
});
afterAll(() => {
  tsa.dispose();
  other.dispose();
  rsa.dispose();
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
    tsa.ws.write('ours.tsq', request.der);
    const text = tsa.ws.must(['ts', '-query', '-in', 'ours.tsq', '-text']);
    expect(text).toContain('Hash Algorithm: sha256');
    // openssl prints the imprint as a hex dump in two lines of 16 bytes.
    const dump = text.replace(/[\s-]/g, '').toLowerCase();
    expect(dump).toContain(hexEncode(digest).slice(0, 32));
    expect(dump).toContain(hexEncode(digest).slice(32));
    expect(text).toMatch(/Nonce: 0x([0-9A-F]+)/);
    expect(/Nonce: 0x([0-9A-F]+)/.exec(text)?.[1]?.toLowerCase()).toBe(request.nonceHex);
    expect(text).toContain('Certificate required: yes');
    // The same as openssl writes for the same digest, but for the nonce: DER, byte for byte.
    tsa.ws.must([
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
    const theirs = tsa.ws.read('theirs.tsq');
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
  test('a token from openssl verifies against the pinned TSA certificate or its CA', async () => {
    const digest = sha256('day 2026-11-20');
    const before = Date.now();
    const { token, nonceHex } = await stamp(tsa, digest);
    for (const pinned of [tsa.caPem, tsa.tsaPem]) {
      const result = await verifyTimeStampToken(token, { digest, trustedTsaPem: [pinned], nonceHex });
      expect(result).toMatchObject({ ok: true, nonceHex, policy: '1.2.3.4.1' });
      if (!result.ok) continue;
      expect(result.tsaSubject).toBe('CN=Test TSA');
      // genTime is openssl's clock, in whole seconds.
      expect(result.genTime.getTime()).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
      expect(result.genTime.getTime()).toBeLessThanOrEqual(Date.now());
    }
  });

  test('openssl ts -verify accepts the token wrapped again as a reply, for the digest', async () => {
    const digest = sha256('day 2026-11-21');
    const { token, reply } = await stamp(tsa, digest);
    // What the platform stores is the token; what it publishes is a granted reply around it.
    const rewrapped = timeStampReply(token);
    tsa.ws.write('rewrapped.tsr', rewrapped);
    tsa.ws.write('reply.tsr', reply);
    for (const file of ['rewrapped.tsr', 'reply.tsr']) {
      const ok = tsa.ws.run([
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
      const wrong = tsa.ws.run([
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

  test('refuses a token for another digest, with another nonce, or from a TSA that is not pinned', async () => {
    const digest = sha256('day 2026-11-22');
    const { token, nonceHex } = await stamp(tsa, digest);
    const otherDigest = await verifyTimeStampToken(token, {
      digest: sha256('rewritten'),
      trustedTsaPem: [tsa.caPem],
    });
    expect(otherDigest).toMatchObject({ ok: false, reason: expect.stringMatching(/stamps digest/) });
    const otherNonce = await verifyTimeStampToken(token, {
      digest,
      trustedTsaPem: [tsa.caPem],
      nonceHex: nonceHex === '1' ? '2' : '1',
    });
    expect(otherNonce).toMatchObject({ ok: false, reason: expect.stringMatching(/nonce/) });
    for (const pinned of [other.caPem, other.tsaPem]) {
      const unpinned = await verifyTimeStampToken(token, { digest, trustedTsaPem: [pinned] });
      expect(unpinned).toMatchObject({ ok: false, reason: expect.stringMatching(/not the pinned one/) });
    }
    // The other TSA's token is refused under this TSA's pin the same way.
    const foreign = await stamp(other, digest);
    expect(await verifyTimeStampToken(foreign.token, { digest, trustedTsaPem: [tsa.caPem] })).toMatchObject({
      ok: false,
    });
  });

  test('refuses a tampered token: every single changed byte of the TSTInfo, and a changed signature', async () => {
    const digest = sha256('day 2026-11-23');
    const { token } = await stamp(tsa, digest);
    // Change a digit of the stamped time, of the serial number, of the digest: the signature no longer holds.
    const text = Buffer.from(token).toString('latin1');
    const genTimeAt = text.search(/\d{14}(\.\d+)?Z/);
    expect(genTimeAt).toBeGreaterThan(0);
    const changedTime = Buffer.from(token);
    changedTime[genTimeAt + 3] = changedTime[genTimeAt + 3] === 0x30 ? 0x31 : 0x30;
    expect(await verifyTimeStampToken(changedTime, { digest, trustedTsaPem: [tsa.caPem] })).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/messageDigest|signature/),
    });
    const signatureEnd = Buffer.from(token);
    signatureEnd[signatureEnd.length - 3] = signatureEnd[signatureEnd.length - 3]! ^ 0x01;
    const tampered = await verifyTimeStampToken(signatureEnd, { digest, trustedTsaPem: [tsa.caPem] });
    expect(tampered.ok).toBe(false);
    // openssl agrees on both.
    for (const [name, bytes] of [
      ['t1.tsr', changedTime],
      ['t2.tsr', signatureEnd],
    ] as const) {
      tsa.ws.write(name, timeStampReply(bytes));
      expect(
        tsa.ws.run(['ts', '-verify', '-digest', hexEncode(digest), '-in', name, '-CAfile', 'ca.pem']).ok,
      ).toBe(false);
    }
    // A byte flipped anywhere: never a throw, and never accepted with another time, serial or policy (a flip in an
    // unsigned part, such as SignedData's own list of digest algorithms, may leave a token that still verifies).
    const original = await verifyTimeStampToken(token, { digest, trustedTsaPem: [tsa.caPem] });
    if (!original.ok) throw new Error(original.reason);
    let refused = 0;
    for (let i = 0; i < 100; i += 1) {
      const flipped = Buffer.from(token);
      const at = Math.floor(Math.random() * flipped.length);
      flipped[at] = (flipped[at]! ^ (1 + Math.floor(Math.random() * 255))) & 0xff;
      const result = await verifyTimeStampToken(flipped, { digest, trustedTsaPem: [tsa.caPem] });
      if (!result.ok) refused += 1;
      else {
        expect(result.genTime).toEqual(original.genTime);
        expect([result.serialHex, result.policy]).toEqual([original.serialHex, original.policy]);
      }
    }
    expect(refused).toBeGreaterThan(90);
  });

  test('an RSA TSA (as most public TSAs are) verifies', async () => {
    const digest = sha256('rsa day');
    const { token, nonceHex } = await stamp(rsa, digest);
    expect(await verifyTimeStampToken(token, { digest, trustedTsaPem: [rsa.caPem], nonceHex })).toMatchObject(
      {
        ok: true,
        tsaSubject: 'CN=RSA TSA',
      },
    );
  });

  test('without the certificate in the token (certReq false) the pinned TSA certificate is the signer', async () => {
    const digest = sha256('no cert');
    const { token } = await stamp(tsa, digest, { certReq: false });
    expect(await verifyTimeStampToken(token, { digest, trustedTsaPem: [tsa.tsaPem] })).toMatchObject({
      ok: true,
    });
    expect(await verifyTimeStampToken(token, { digest, trustedTsaPem: [tsa.caPem] })).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/neither in the token nor pinned/),
    });
  });
});

describe('the response', () => {
  test('a rejection is read with its reason, garbage is refused, and nothing throws', async () => {
    const request = createTimeStampRequest({ digest: sha256('x'), policy: '1.2.3.4.99' });
    const rejected = parseTimeStampResponse(await tsa.reply(request.der));
    expect(rejected).toMatchObject({
      ok: false,
      status: 'rejection',
      reason: expect.stringMatching(/unacceptedPolicy/),
    });
    expect(parseTimeStampResponse(randomBytes(40))).toMatchObject({ ok: false });
    expect(parseTimeStampResponse(new Uint8Array(0))).toMatchObject({ ok: false });
    expect(
      await verifyTimeStampToken(randomBytes(40), { digest: sha256('x'), trustedTsaPem: [tsa.caPem] }),
    ).toMatchObject({
      ok: false,
    });
    expect(() => timeStampReply(randomBytes(3))).toThrow();
  });
});
