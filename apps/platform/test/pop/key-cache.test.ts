import { ECDH, type KeyObject } from 'node:crypto';
import {
  CryptoError,
  es256Sign,
  es256Verify,
  exportPublicKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  importPublicKey,
} from '@ooh/crypto';
import { describe, expect, test } from 'vitest';
import { importSpki, KeyCache } from '../../src/pop/key-cache.js';

/*
 * The agent and CMS channels' key cache (src/pop/key-cache.ts): the cheaper import of the common SPKI form accepts
 * and refuses exactly what importPublicKey does, and the cache keeps parsed keys only, least recently used dropped.
 */

const body = Buffer.from('{"schema":"service.pop/1","events":[]}');
const pair = generateEs256KeyPair();
const spki = exportPublicKeySpki(pair.publicKey);
const der = () => Buffer.from(spki, 'base64');
const spkiOf = (bytes: Buffer) => bytes.toString('base64');

/** What an import gives: the key's SPKI, or the CryptoError code it was refused with. */
function outcome(read: (text: string) => KeyObject, text: string): string {
  try {
    return exportPublicKeySpki(read(text));
  } catch (error) {
    if (!(error instanceof CryptoError)) throw error;
    return `refused: ${error.code}`;
  }
}

describe('importSpki', () => {
  test('an uncompressed P-256 SPKI gives the same key: same SPKI, verifies what its private key signed', () => {
    const key = importSpki(spki);
    expect(exportPublicKeySpki(key)).toBe(spki);
    const signature = es256Sign(pair.privateKey, body);
    expect(es256Verify(key, body, signature)).toBe(true);
    expect(es256Verify(key, Buffer.concat([body, Buffer.from(' ')]), signature)).toBe(false);
    expect(es256Verify(key, body, es256Sign(generateEs256KeyPair().privateKey, body))).toBe(false);
  });

  test('a point off the curve, or a coordinate beyond the field, is refused as importPublicKey refuses it', () => {
    const offCurve = der();
    offCurve[90] = offCurve[90]! ^ 0x01;
    const beyond = der();
    beyond.fill(0xff, 27, 59);
    const zero = der();
    zero.fill(0, 27, 91);
    for (const bytes of [offCurve, beyond, zero]) {
      expect(outcome(importSpki, spkiOf(bytes))).toBe('refused: invalid_key');
      expect(outcome(importPublicKey, spkiOf(bytes))).toBe('refused: invalid_key');
    }
  });

  test('any one byte of the point changed: both imports agree, key for key', () => {
    let refused = 0;
    for (let i = 0; i < 200; i += 1) {
      const bytes = der();
      const at = 27 + (i % 64);
      bytes[at] = bytes[at]! ^ (1 + ((i * 37) % 255));
      const text = spkiOf(bytes);
      const fast = outcome(importSpki, text);
      expect(fast).toBe(outcome(importPublicKey, text));
      if (fast.startsWith('refused')) refused += 1;
    }
    // Nearly every changed point is off the curve; the comparison above saw both outcomes' refusals.
    expect(refused).toBeGreaterThan(190);
  });

  test('non-canonical base64 of the right bytes is refused, as base64Decode refuses it', () => {
    const text = spki;
    expect(text.endsWith('==')).toBe(true);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const last = alphabet.indexOf(text[text.length - 3]!);
    // The last character before the padding carries 4 unused bits: set one, the bytes stay the same.
    const stray = `${text.slice(0, -3)}${alphabet[last ^ 1]}==`;
    expect(Buffer.from(stray, 'base64').equals(der())).toBe(true);
    expect(outcome(importSpki, stray)).toBe('refused: invalid_encoding');
    expect(outcome(importSpki, `${text.slice(0, -2)}`)).toBe(outcome(importPublicKey, text.slice(0, -2)));
  });

  test('other forms still go through importPublicKey: PEM, a compressed point, another curve, garbage', () => {
    expect(exportPublicKeySpki(importSpki(exportPublicKeyPem(pair.publicKey)))).toBe(spki);
    const point = der().subarray(26);
    const compressed = ECDH.convertKey(point, 'prime256v1', undefined, undefined, 'compressed') as Buffer;
    const compressedSpki = spkiOf(
      Buffer.concat([Buffer.from('3039301306072a8648ce3d020106082a8648ce3d030107032200', 'hex'), compressed]),
    );
    const key = importSpki(compressedSpki);
    expect(es256Verify(key, body, es256Sign(pair.privateKey, body))).toBe(true);
    // prime192v1's OID (1.2.840.10045.3.1.1) in place of prime256v1's (...3.1.7): not P-256.
    const k1 = der();
    k1[22] = 0x01;
    const k1Text = spkiOf(k1);
    expect(outcome(importSpki, k1Text)).toBe(outcome(importPublicKey, k1Text));
    expect(outcome(importSpki, k1Text)).toMatch(/^refused/);
    expect(outcome(importSpki, 'not a key')).toBe('refused: invalid_encoding');
    expect(outcome(importSpki, '')).toBe(outcome(importPublicKey, ''));
  });
});

describe('KeyCache', () => {
  const counting = () => {
    const imported: string[] = [];
    return {
      imported,
      importKey: (text: string) => {
        imported.push(text);
        return importSpki(text);
      },
    };
  };
  const texts = Array.from({ length: 3 }, () => exportPublicKeySpki(generateEs256KeyPair().publicKey));
  const [a, b, c] = texts as [string, string, string];

  test('a key is imported once while it is used; the least recently used is dropped first', () => {
    const { imported, importKey } = counting();
    const cache = new KeyCache(2, importKey);
    const keyA = cache.get(a);
    cache.get(b);
    expect(cache.get(a)).toBe(keyA);
    expect(imported).toEqual([a, b]);
    // c pushes out b (a was used after it), not a.
    cache.get(c);
    expect(cache.size).toBe(2);
    expect(cache.get(a)).toBe(keyA);
    expect(imported).toEqual([a, b, c]);
    cache.get(b);
    expect(imported).toEqual([a, b, c, b]);
    // b pushed out c this time (a, then b, were used after it).
    cache.get(a);
    cache.get(c);
    expect(imported).toEqual([a, b, c, b, c]);
  });

  test('a text that is not a key is refused each time and keeps nothing', () => {
    const { imported, importKey } = counting();
    const cache = new KeyCache(2, importKey);
    cache.get(a);
    const bad = spkiOf(Buffer.concat([der().subarray(0, 90), Buffer.from([der()[90]! ^ 1])]));
    expect(() => cache.get(bad)).toThrow(CryptoError);
    expect(() => cache.get(bad)).toThrow(CryptoError);
    expect(cache.size).toBe(1);
    expect(imported).toEqual([a, bad, bad]);
  });

  test('the default cache verifies with the keys it imports', () => {
    const cache = new KeyCache();
    const signature = es256Sign(pair.privateKey, body);
    expect(es256Verify(cache.get(spki), body, signature)).toBe(true);
    expect(es256Verify(cache.get(spki), body, signature)).toBe(true);
    expect(cache.size).toBe(1);
  });
});
