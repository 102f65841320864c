import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { type Es256PublicKey, es256Verify, importEs256PublicKey, VerificationError } from '../src/index.js';

/*
 * Project Wycheproof's ECDSA P-256 / SHA-256 vectors in IEEE P1363 form (raw r‖s, what ES256 signs), run against
 * es256Verify on WebCrypto, the code the browser runs: every valid signature verifies, every invalid one (r or s out
 * of range, zero, wrong length, modified) is refused. The JSON is kept once, with its source and licence, in
 * packages/crypto/test/vectors/wycheproof/ (README.md there).
 */

interface Vector {
  tcId: number;
  comment: string;
  msg: string;
  sig: string;
  result: 'valid' | 'invalid' | 'acceptable';
}
interface Group {
  publicKeyDer: string;
  sha: string;
  tests: Vector[];
}
const file = JSON.parse(
  readFileSync(
    new URL('../../crypto/test/vectors/wycheproof/ecdsa_secp256r1_sha256_p1363_test.json', import.meta.url),
    'utf8',
  ),
) as { numberOfTests: number; testGroups: Group[] };
const all = file.testGroups.flatMap((g) => g.tests.map((t) => ({ group: g, t })));
const fromHex = (hex: string) => new Uint8Array(Buffer.from(hex, 'hex'));

test('the file is whole: its count, one hash, valid and invalid cases', () => {
  expect(all.length).toBe(file.numberOfTests);
  expect(new Set(file.testGroups.map((g) => g.sha))).toEqual(new Set(['SHA-256']));
  expect(all.filter(({ t }) => t.result === 'valid').length).toBeGreaterThan(100);
  expect(all.filter(({ t }) => t.result === 'invalid').length).toBeGreaterThan(50);
});

describe('es256Verify (WebCrypto)', () => {
  test('every vector', async () => {
    const wrong: string[] = [];
    const keys = new Map<string, Es256PublicKey>();
    for (const { group, t } of all) {
      let key = keys.get(group.publicKeyDer);
      if (!key) {
        key = await importEs256PublicKey(fromHex(group.publicKeyDer));
        keys.set(group.publicKeyDer, key);
      }
      const verified = await es256Verify(key, fromHex(t.msg), fromHex(t.sig));
      if (verified !== (t.result === 'valid')) wrong.push(`tcId ${t.tcId} (${t.comment}): ${verified}`);
    }
    expect(wrong).toEqual([]);
  });

  test('misuse throws a coded error; a key that is not P-256 is refused on import', async () => {
    const key = await importEs256PublicKey(fromHex(file.testGroups[0]!.publicKeyDer));
    await expect(es256Verify(key, 'text' as unknown as Uint8Array, new Uint8Array(64))).rejects.toMatchObject(
      {
        code: 'invalid_argument',
      },
    );
    const error = await importEs256PublicKey(new Uint8Array([0x30, 0x00])).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VerificationError);
    expect((error as VerificationError).code).toBe('invalid_argument');
  });
});
