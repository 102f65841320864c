import {
  createTimeStampRequest,
  hexEncode,
  parseTimeStampResponse,
  sha256,
  timeStampReply,
} from '@ooh/crypto';
import { describe, expect, test } from 'vitest';
import { type OpensslTsa, tsasForFile } from '../../crypto/test/helpers/tsa.js';
import { parsePem, verifyBlockTimestamp } from '../src/index.js';

// The browser's check of a ledger block's RFC 3161 timestamp (src/timestamp.ts, WebCrypto only), run
// under Node against tokens of `openssl ts -reply`, as the verify host serves them (timestamp.tsr).

const tsas = tsasForFile({
  below: { name: 'Chained TSA', intermediate: true },
  tsa: { name: 'City TSA' },
  other: { name: 'Other TSA' },
  rsa: { name: 'RSA TSA', key: 'rsa' },
});

async function reply(authority: OpensslTsa, digest: Uint8Array, certReq = true): Promise<Uint8Array> {
  const answer = await authority.reply(createTimeStampRequest({ digest, certReq }).der);
  const parsed = parseTimeStampResponse(answer);
  if (!parsed.ok) throw new Error(parsed.reason);
  // As the platform publishes it: the stored token in a granted reply.
  return timeStampReply(parsed.token);
}

describe('the browser check of a block timestamp', () => {
  test('a TSA below an intermediate CA the token carries chains to the pinned root by the one chain walk', async () => {
    const digest = sha256('block below');
    const tsr = await reply(tsas.below, digest);
    expect(await verifyBlockTimestamp(tsr, hexEncode(digest), parsePem(tsas.below.caPem))).toMatchObject({
      ok: true,
      tsa: 'Chained TSA',
    });
    // Pinning the intermediate is enough too; another TSA's root is not.
    expect(
      await verifyBlockTimestamp(tsr, hexEncode(digest), parsePem(tsas.below.intermediatePem!)),
    ).toMatchObject({ ok: true });
    expect(await verifyBlockTimestamp(tsr, hexEncode(digest), parsePem(tsas.tsa.caPem))).toMatchObject({
      ok: false,
      code: 'not_pinned',
    });
    // A token that carries no certificates cannot reach the root through the intermediate.
    const bare = await reply(tsas.below, digest, false);
    expect(await verifyBlockTimestamp(bare, hexEncode(digest), parsePem(tsas.below.caPem))).toMatchObject({
      ok: false,
    });
  });

  test('accepts the pinned TSA (its CA or its own certificate), EC and RSA, and reads genTime', async () => {
    const digest = sha256('block');
    const before = Math.floor(Date.now() / 1000) * 1000;
    for (const [authority, name] of [
      [tsas.tsa, 'City TSA'],
      [tsas.rsa, 'RSA TSA'],
    ] as const) {
      const tsr = await reply(authority, digest);
      for (const pinned of [authority.caPem, authority.tsaPem]) {
        const result = await verifyBlockTimestamp(tsr, hexEncode(digest), parsePem(pinned));
        expect(result).toMatchObject({ ok: true, tsa: name });
        if (result.ok) {
          expect(result.genTime.getTime()).toBeGreaterThanOrEqual(before);
          expect(result.genTime.getTime()).toBeLessThanOrEqual(Date.now());
        }
      }
    }
    // Without the certificate in the token, the pinned TSA certificate is the signer.
    const bare = await reply(tsas.tsa, digest, false);
    expect(await verifyBlockTimestamp(bare, hexEncode(digest), parsePem(tsas.tsa.tsaPem))).toMatchObject({
      ok: true,
    });
    expect(await verifyBlockTimestamp(bare, hexEncode(digest), parsePem(tsas.tsa.caPem))).toMatchObject({
      ok: false,
    });
  });

  test('refuses another digest, an unpinned TSA, a tampered token, a stamp from before the day ended, and garbage', async () => {
    const digest = sha256('block 2');
    const tsr = await reply(tsas.tsa, digest);
    const pinned = parsePem(tsas.tsa.caPem);
    expect(await verifyBlockTimestamp(tsr, hexEncode(sha256('rewritten')), pinned)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/another digest/),
    });
    for (const pem of [tsas.other.caPem, tsas.other.tsaPem]) {
      expect(await verifyBlockTimestamp(tsr, hexEncode(digest), parsePem(pem))).toMatchObject({
        ok: false,
        reason: expect.stringMatching(/not the pinned one/),
      });
    }
    const tampered = new Uint8Array(tsr);
    const at = Buffer.from(tsr)
      .toString('latin1')
      .search(/\d{14}(\.\d+)?Z/);
    tampered[at + 13] = tampered[at + 13] === 0x30 ? 0x31 : 0x30;
    expect(await verifyBlockTimestamp(tampered, hexEncode(digest), pinned)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/messageDigest/),
    });
    const signature = new Uint8Array(tsr);
    signature[signature.length - 3] = signature[signature.length - 3]! ^ 1;
    expect(await verifyBlockTimestamp(signature, hexEncode(digest), pinned)).toMatchObject({ ok: false });
    const tomorrow = new Date(Date.now() + 86_400_000);
    expect(await verifyBlockTimestamp(tsr, hexEncode(digest), pinned, tomorrow)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/before the day ended/),
    });
    expect(await verifyBlockTimestamp(new Uint8Array([1, 2, 3]), hexEncode(digest), pinned)).toMatchObject({
      ok: false,
    });
    // Any byte flipped: never a throw, and never accepted with another time.
    const good = await verifyBlockTimestamp(tsr, hexEncode(digest), pinned);
    if (!good.ok) throw new Error(good.reason);
    let refused = 0;
    for (let i = 0; i < 60; i += 1) {
      const flipped = new Uint8Array(tsr);
      const index = Math.floor(Math.random() * flipped.length);
      flipped[index] = flipped[index]! ^ (1 + Math.floor(Math.random() * 255));
      const result = await verifyBlockTimestamp(flipped, hexEncode(digest), pinned);
      if (result.ok) expect(result.genTime).toEqual(good.genTime);
      else refused += 1;
    }
    expect(refused).toBeGreaterThan(50);
  });
});
