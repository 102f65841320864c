import { readFileSync } from 'node:fs';
import { webcrypto } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { CryptoError, es256Verify, importPublicKey } from '../src/index.js';

/*
 * Project Wycheproof's ECDSA P-256 / SHA-256 vectors in IEEE P1363 form (raw r‖s, what ES256 signs), run against
 * es256Verify (Node's OpenSSL) and against WebCrypto (what the console's verifier uses in the browser): every valid
 * signature verifies, every invalid one (r or s out of range, zero, wrong length, modified) is refused (issue 18:
 * "Add Wycheproof's ecdsa_secp256r1_sha256_p1363 vectors for ES256 verification"). Source and licence:
 * test/vectors/wycheproof/README.md.
 */

interface Vector {
  tcId: number;
  comment: string;
  flags: string[];
  msg: string;
  sig: string;
  result: 'valid' | 'invalid' | 'acceptable';
}
interface Group {
  publicKeyPem: string;
  publicKeyDer: string;
  sha: string;
  tests: Vector[];
}
const file = JSON.parse(
  readFileSync(
    new URL('./vectors/wycheproof/ecdsa_secp256r1_sha256_p1363_test.json', import.meta.url),
    'utf8',
  ),
) as { numberOfTests: number; testGroups: Group[] };
const groups = file.testGroups;
const all = groups.flatMap((g) => g.tests.map((t) => ({ group: g, t })));

const fromHex = (hex: string) => new Uint8Array(Buffer.from(hex, 'hex'));
const base64url = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');

test('the file is whole: its count, one curve and hash, valid and invalid cases', () => {
  expect(all.length).toBe(file.numberOfTests);
  expect(new Set(groups.map((g) => g.sha))).toEqual(new Set(['SHA-256']));
  expect(all.filter(({ t }) => t.result === 'valid').length).toBeGreaterThan(100);
  expect(all.filter(({ t }) => t.result === 'invalid').length).toBeGreaterThan(50);
});

describe('es256Verify (OpenSSL)', () => {
  test('every vector', () => {
    const wrong: string[] = [];
    for (const { group, t } of all) {
      const key = importPublicKey(group.publicKeyPem);
      const sig = fromHex(t.sig);
      let verified: boolean;
      try {
        verified = es256Verify(key, fromHex(t.msg), base64url(sig));
      } catch (error) {
        // A signature that is not 64 bytes is refused before any arithmetic.
        expect(error).toBeInstanceOf(CryptoError);
        expect((error as CryptoError).code).toBe('invalid_length');
        expect(sig.length).not.toBe(64);
        verified = false;
      }
      if (verified !== (t.result === 'valid')) wrong.push(`tcId ${t.tcId} (${t.comment}): ${verified}`);
    }
    expect(wrong).toEqual([]);
  });
});

describe('WebCrypto (the browser verifier)', () => {
  test('every vector', async () => {
    const wrong: string[] = [];
    const keys = new Map<string, webcrypto.CryptoKey>();
    for (const { group, t } of all) {
      let key = keys.get(group.publicKeyDer);
      if (!key) {
        key = await webcrypto.subtle.importKey(
          'spki',
          fromHex(group.publicKeyDer),
          { name: 'ECDSA', namedCurve: 'P-256' },
          false,
          ['verify'],
        );
        keys.set(group.publicKeyDer, key);
      }
      const sig = fromHex(t.sig);
      // WebCrypto takes raw r‖s of exactly 64 bytes; other lengths are refused as the verifiers refuse them.
      const verified =
        sig.length === 64 &&
        (await webcrypto.subtle.verify({ name: 'ECDSA', hash: 'SHA-256' }, key, sig, fromHex(t.msg)));
      if (verified !== (t.result === 'valid')) wrong.push(`tcId ${t.tcId} (${t.comment}): ${verified}`);
    }
    expect(wrong).toEqual([]);
  });
});
