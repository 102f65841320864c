import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import {
  base64Decode,
  base64Encode,
  base64urlDecode,
  base64urlEncode,
  bytesEqual,
  CryptoError,
  type CryptoErrorCode,
  es256Sign,
  es256Verify,
  es256VerifyAsync,
  exportPrivateKeyPem,
  exportPublicKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  hexDecode,
  hexEncode,
  importPrivateKey,
  importPublicKey,
  isCryptoError,
  publicKeyFingerprint,
  sha256,
  sha256Hex,
  sha256HexAsync,
} from '../src/index.js';

/** Order of the P-256 group. */
const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const HALF_N = N >> 1n;

function expectCode(action: () => unknown, code: CryptoErrorCode): void {
  let caught: unknown;
  try {
    action();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(CryptoError);
  expect((caught as CryptoError).code).toBe(code);
}

function toBigInt(bytes: Uint8Array): bigint {
  return BigInt(`0x${Buffer.from(bytes).toString('hex') || '0'}`);
}

function to32(value: bigint): Uint8Array {
  return Buffer.from(value.toString(16).padStart(64, '0'), 'hex');
}

/** The other of the two valid S values: (r, s) and (r, n - s) both verify in ECDSA. */
function negateS(signature: string): string {
  const raw = base64urlDecode(signature);
  const s = toBigInt(raw.subarray(32));
  return base64urlEncode(Buffer.concat([raw.subarray(0, 32), to32(N - s)]));
}

const message = new TextEncoder().encode('{"device_id":"d1","ts":"2030-06-01T12:00:00.000Z"}');

describe('sha256', () => {
  test('matches the FIPS 180-2 vectors, strings hashed as UTF-8', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex('€')).toBe(sha256Hex(Uint8Array.of(0xe2, 0x82, 0xac)));
    expect(Buffer.from(sha256('abc')).toString('hex')).toBe(sha256Hex('abc'));
    expect(sha256(new Uint8Array(0))).toHaveLength(32);
  });

  test('on the thread pool, the same digests', async () => {
    expect(await sha256HexAsync(new Uint8Array(0))).toBe(sha256Hex(''));
    expect(await sha256HexAsync(new TextEncoder().encode('abc'))).toBe(sha256Hex('abc'));
    const large = randomBytes(3_000_001);
    expect(await sha256HexAsync(large)).toBe(sha256Hex(large));
  });
});

describe('base64url', () => {
  test('round-trips without padding', () => {
    for (let length = 0; length < 70; length += 1) {
      const bytes = randomBytes(length);
      const text = base64urlEncode(bytes);
      expect(text).toMatch(/^[A-Za-z0-9_-]*$/);
      expect(Buffer.from(base64urlDecode(text)).equals(bytes)).toBe(true);
    }
  });

  test('refuses padding, the standard alphabet, whitespace, impossible lengths and stray bits', () => {
    for (const text of ['AA==', 'ab+c', 'ab/c', 'ab c', 'abcde', 'AB', 'AAB']) {
      // 'AB' and 'AAB' carry set bits beyond the last whole byte: not the canonical form.
      expectCode(() => base64urlDecode(text), 'invalid_encoding');
    }
    expect(base64urlDecode('AA')).toEqual(Uint8Array.of(0));
  });
});

describe('base64, hex and comparison helpers', () => {
  test('strict standard base64 and lowercase hex', () => {
    const bytes = Uint8Array.of(0xfb, 0xff, 0x00, 0x10);
    expect(base64Encode(bytes)).toBe('+/8AEA==');
    expect(base64Decode('+/8AEA==')).toEqual(bytes);
    for (const text of ['+/8AEA', '+/8AEA=', '-_8AEA==', '+/8A EA==', '+/8AEB==']) {
      expectCode(() => base64Decode(text), 'invalid_encoding');
    }
    expect(hexEncode(bytes)).toBe('fbff0010');
    expect(hexDecode('fbff0010')).toEqual(bytes);
    for (const text of ['FBFF0010', 'fbf', 'zz', ' fb'])
      expectCode(() => hexDecode(text), 'invalid_encoding');
    expect(bytesEqual(bytes, Uint8Array.from(bytes))).toBe(true);
    expect(bytesEqual(bytes, bytes.subarray(1))).toBe(false);
    expect(bytesEqual(bytes, Uint8Array.of(0xfb, 0xff, 0x00, 0x11))).toBe(false);
  });

  test('isCryptoError narrows by code', () => {
    const error = new CryptoError('invalid_key', 'x', { cause: new Error('inner') });
    expect(isCryptoError(error)).toBe(true);
    expect(isCryptoError(error, 'invalid_key')).toBe(true);
    expect(isCryptoError(error, 'invalid_csr')).toBe(false);
    expect(isCryptoError(new Error('x'))).toBe(false);
    expect(error.cause).toBeInstanceOf(Error);
    expect(error.name).toBe('CryptoError');
  });
});

describe('ES256', () => {
  const { publicKey, privateKey } = generateEs256KeyPair();

  test('signs exact bytes as 64 raw bytes in unpadded base64url and verifies', () => {
    const signature = es256Sign(privateKey, message);
    expect(signature).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(base64urlDecode(signature)).toHaveLength(64);
    expect(es256Verify(publicKey, message, signature)).toBe(true);
    // A private key stands for its public half.
    expect(es256Verify(privateKey, message, signature)).toBe(true);
  });

  test('returns false for a changed message, another key or a changed signature', () => {
    const signature = es256Sign(privateKey, message);
    const changed = Uint8Array.from(message);
    changed[5] = (changed[5] ?? 0) ^ 0x01;
    expect(es256Verify(publicKey, changed, signature)).toBe(false);
    expect(es256Verify(generateEs256KeyPair().publicKey, message, signature)).toBe(false);
    const raw = base64urlDecode(signature);
    for (const index of [0, 31, 32, 63]) {
      const flipped = Uint8Array.from(raw);
      flipped[index] = (flipped[index] ?? 0) ^ 0x80;
      expect(es256Verify(publicKey, message, base64urlEncode(flipped))).toBe(false);
    }
  });

  test('accepts both the low-S and the high-S form of every signature', () => {
    for (let round = 0; round < 32; round += 1) {
      const data = randomBytes(round * 7);
      const signature = es256Sign(privateKey, data);
      const other = negateS(signature);
      const s = toBigInt(base64urlDecode(signature).subarray(32));
      const otherS = toBigInt(base64urlDecode(other).subarray(32));
      // One of the two is the low-S (s <= n/2) form, the other the high-S form.
      expect(s + otherS).toBe(N);
      expect(s > HALF_N).not.toBe(otherS > HALF_N);
      expect(es256Verify(publicKey, data, signature)).toBe(true);
      expect(es256Verify(publicKey, data, other)).toBe(true);
    }
  });

  test('returns false for out-of-range r and s instead of throwing', () => {
    const zero = base64urlEncode(new Uint8Array(64));
    expect(es256Verify(publicKey, message, zero)).toBe(false);
    const signature = base64urlDecode(es256Sign(privateKey, message));
    const rIsN = base64urlEncode(Buffer.concat([to32(N), signature.subarray(32)]));
    const sIsN = base64urlEncode(Buffer.concat([signature.subarray(0, 32), to32(N)]));
    const allOnes = base64urlEncode(new Uint8Array(64).fill(0xff));
    expect(es256Verify(publicKey, message, rIsN)).toBe(false);
    expect(es256Verify(publicKey, message, sIsN)).toBe(false);
    expect(es256Verify(publicKey, message, allOnes)).toBe(false);
  });

  test('throws invalid_length for anything but 64 bytes and invalid_encoding for bad text', () => {
    const raw = base64urlDecode(es256Sign(privateKey, message));
    expectCode(() => es256Verify(publicKey, message, base64urlEncode(raw.subarray(0, 63))), 'invalid_length');
    expectCode(
      () => es256Verify(publicKey, message, base64urlEncode(Buffer.concat([raw, Uint8Array.of(0)]))),
      'invalid_length',
    );
    expectCode(() => es256Verify(publicKey, message, ''), 'invalid_length');
    // Padded, standard-alphabet or space-prefixed text is refused, not answered with false.
    expectCode(() => es256Verify(publicKey, message, `${base64urlEncode(raw)}=`), 'invalid_encoding');
    expectCode(
      () => es256Verify(publicKey, message, Buffer.from(raw).toString('base64')),
      'invalid_encoding',
    );
    expectCode(() => es256Verify(publicKey, message, ` ${base64urlEncode(raw)}`), 'invalid_encoding');
  });

  test('on the thread pool, the same verdicts and the same refusals', async () => {
    const data = randomBytes(2_500_000);
    const signature = es256Sign(privateKey, data);
    const raw = base64urlDecode(signature);
    const flipped = Uint8Array.from(raw);
    flipped[40] = (flipped[40] ?? 0) ^ 0x01;
    const changed = Buffer.from(data);
    changed[1_000_000] = (changed[1_000_000] ?? 0) ^ 0x01;
    const cases: [Uint8Array, string, boolean][] = [
      [data, signature, true],
      [data, negateS(signature), true],
      [changed, signature, false],
      [data, base64urlEncode(flipped), false],
      [data, base64urlEncode(new Uint8Array(64)), false],
      [data, base64urlEncode(new Uint8Array(64).fill(0xff)), false],
    ];
    for (const [bytes, sig, verdict] of cases) {
      expect(es256Verify(publicKey, bytes, sig)).toBe(verdict);
      expect(await es256VerifyAsync(publicKey, bytes, sig)).toBe(verdict);
    }
    expect(await es256VerifyAsync(generateEs256KeyPair().publicKey, data, signature)).toBe(false);
    expectCode(
      () => es256VerifyAsync(publicKey, data, base64urlEncode(raw.subarray(0, 63))),
      'invalid_length',
    );
    expectCode(() => es256VerifyAsync(publicKey, data, `${signature}=`), 'invalid_encoding');
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
    expectCode(() => es256VerifyAsync(p384.publicKey, data, signature), 'unsupported_algorithm');
  });

  test('refuses keys that are not P-256', () => {
    const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
    const ed25519 = generateKeyPairSync('ed25519');
    expectCode(() => es256Sign(p384.privateKey, message), 'unsupported_algorithm');
    expectCode(() => es256Sign(ed25519.privateKey, message), 'unsupported_algorithm');
    expectCode(
      () => es256Verify(p384.publicKey, message, es256Sign(privateKey, message)),
      'unsupported_algorithm',
    );
    expectCode(() => es256Sign(publicKey, message), 'invalid_key');
    expectCode(() => importPublicKey(exportPublicKeySpkiOf(p384.publicKey)), 'unsupported_algorithm');
    expectCode(
      () => importPublicKey(p384.publicKey.export({ format: 'pem', type: 'spki' }).toString()),
      'unsupported_algorithm',
    );
    expectCode(
      () => importPrivateKey(p384.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()),
      'unsupported_algorithm',
    );
  });
});

function exportPublicKeySpkiOf(key: ReturnType<typeof createPublicKey>): string {
  return key.export({ format: 'der', type: 'spki' }).toString('base64');
}

describe('key import and export', () => {
  const { publicKey, privateKey } = generateEs256KeyPair();

  test('SPKI base64 and PEM round-trip; the fingerprint is SHA-256 of the SPKI DER', () => {
    const spki = exportPublicKeySpki(publicKey);
    expect(spki).toBe(exportPublicKeySpki(privateKey));
    expect(Buffer.from(spki, 'base64')).toHaveLength(91);
    const imported = importPublicKey(spki);
    expect(imported.equals(publicKey)).toBe(true);
    const pem = exportPublicKeyPem(publicKey);
    expect(pem).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
    expect(importPublicKey(pem).equals(publicKey)).toBe(true);
    expect(publicKeyFingerprint(publicKey)).toBe(sha256Hex(Buffer.from(spki, 'base64')));
    expect(publicKeyFingerprint(privateKey)).toBe(publicKeyFingerprint(publicKey));
  });

  test('private keys import from PKCS#8 and SEC1 PEM and export as PKCS#8', () => {
    const pkcs8 = exportPrivateKeyPem(privateKey);
    expect(pkcs8).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(importPrivateKey(pkcs8).equals(privateKey)).toBe(true);
    const sec1 = privateKey.export({ format: 'pem', type: 'sec1' }).toString();
    expect(sec1).toMatch(/^-----BEGIN EC PRIVATE KEY-----\n/);
    const fromSec1 = importPrivateKey(sec1);
    expect(es256Verify(publicKey, message, es256Sign(fromSec1, message))).toBe(true);
  });

  test('refuses malformed input with typed codes', () => {
    const spki = exportPublicKeySpki(publicKey);
    expectCode(() => importPublicKey('not base64!'), 'invalid_encoding');
    expectCode(() => importPublicKey(spki.replace(/=+$/, '')), 'invalid_encoding');
    expectCode(() => importPublicKey(Buffer.from('hello world').toString('base64')), 'invalid_key');
    // SPKI with its last point byte cut: not a key.
    expectCode(
      () => importPublicKey(Buffer.from(spki, 'base64').subarray(0, 90).toString('base64')),
      'invalid_key',
    );
    expectCode(() => importPublicKey(exportPrivateKeyPem(privateKey)), 'invalid_encoding');
    expectCode(() => importPrivateKey(exportPublicKeyPem(publicKey)), 'invalid_encoding');
    expectCode(
      () => importPrivateKey('-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n'),
      'invalid_key',
    );
    expectCode(() => importPublicKey(123 as unknown as string), 'invalid_encoding');
  });
});

describe('RFC 6979 A.2.5 published vectors (P-256, SHA-256)', () => {
  // Key and signatures from RFC 6979 appendix A.2.5. ECDSA verification does not depend on how k was
  // chosen, so these check our verifier (and the raw r‖s layout) against published values.
  const x = 'C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721';
  const ux = '60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6';
  const uy = '7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299';
  const vectors = [
    {
      message: 'sample',
      r: 'EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716',
      s: 'F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8',
    },
    {
      message: 'test',
      r: 'F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367',
      s: '019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083',
    },
  ];
  const jwk = (hex: string): string => Buffer.from(hex, 'hex').toString('base64url');
  const publicKey = importPublicKey(
    exportPublicKeySpkiOf(
      createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: jwk(ux), y: jwk(uy) }, format: 'jwk' }),
    ),
  );
  const privateKey = createPrivateKey({
    key: { kty: 'EC', crv: 'P-256', x: jwk(ux), y: jwk(uy), d: jwk(x) },
    format: 'jwk',
  });

  test.each(vectors)('verifies the signature of "$message" in both S forms', ({ message: text, r, s }) => {
    const signature = base64urlEncode(Buffer.from(r + s, 'hex'));
    const data = new TextEncoder().encode(text);
    expect(es256Verify(publicKey, data, signature)).toBe(true);
    expect(es256Verify(publicKey, data, negateS(signature))).toBe(true);
    expect(es256Verify(publicKey, new TextEncoder().encode(`${text}.`), signature)).toBe(false);
  });

  test('our signatures under the published key verify', () => {
    expect(es256Verify(publicKey, message, es256Sign(privateKey, message))).toBe(true);
  });
});
