import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  KeyObject,
  sign as nodeSign,
  verify as nodeVerify,
} from 'node:crypto';
import { base64Decode, base64Encode, base64urlDecode, base64urlEncode, sha256Hex } from './bytes.js';
import { CryptoError } from './errors.js';

// DESIGN.md §4: "ECDSA P-256 over SHA-256 of the exact body bytes ..., raw r‖s (64 bytes),
// base64url without padding. Both low-S and high-S signatures verify."
// node:crypto (OpenSSL) accepts both S forms and is ~30x faster than pure-JS ECDSA.

const P256_CURVE = 'prime256v1';
const RAW_SIGNATURE_LENGTH = 64;
const PUBLIC_KEY_PEM = /^-----BEGIN PUBLIC KEY-----\r?\n[A-Za-z0-9+/=\r\n]+-----END PUBLIC KEY-----\s*$/;
const PRIVATE_KEY_PEM =
  /^-----BEGIN (EC |)PRIVATE KEY-----\r?\n[A-Za-z0-9+/=\r\n]+-----END (EC |)PRIVATE KEY-----\s*$/;

/** Keys already checked to be P-256, so the hot verify path does not re-read key details. */
const checkedP256Keys = new WeakSet<KeyObject>();

function isP256(key: KeyObject): boolean {
  if (checkedP256Keys.has(key)) return true;
  const ok = key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === P256_CURVE;
  if (ok) checkedP256Keys.add(key);
  return ok;
}

function requireP256(key: KeyObject, type: 'public' | 'private' | 'any'): void {
  if (!(key instanceof KeyObject) || key.type === 'secret') {
    throw new CryptoError('invalid_key', 'not an asymmetric KeyObject');
  }
  if (type !== 'any' && key.type !== type) {
    throw new CryptoError('invalid_key', `expected a ${type} key, got a ${key.type} key`);
  }
  if (!isP256(key)) {
    throw new CryptoError('unsupported_algorithm', 'only ECDSA P-256 keys are supported');
  }
}

export function generateEs256KeyPair(): { publicKey: KeyObject; privateKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: P256_CURVE });
}

/** A public key from base64 (standard, padded) of SPKI DER, or an SPKI PEM. P-256 only. */
export function importPublicKey(spkiBase64OrPem: string): KeyObject {
  if (typeof spkiBase64OrPem !== 'string') {
    throw new CryptoError('invalid_encoding', 'public key must be a string');
  }
  const text = spkiBase64OrPem.trim();
  let key: KeyObject;
  if (text.startsWith('-----')) {
    if (!PUBLIC_KEY_PEM.test(text)) {
      throw new CryptoError('invalid_encoding', 'expected a "PUBLIC KEY" PEM block');
    }
    try {
      key = createPublicKey({ key: text, format: 'pem' });
    } catch (cause) {
      throw new CryptoError('invalid_key', 'unreadable SPKI PEM', { cause });
    }
  } else {
    const der = base64Decode(text);
    try {
      key = createPublicKey({ key: Buffer.from(der), format: 'der', type: 'spki' });
    } catch (cause) {
      throw new CryptoError('invalid_key', 'unreadable SPKI DER', { cause });
    }
  }
  requireP256(key, 'public');
  return key;
}

/** A private key from PEM, PKCS#8 or SEC1 ("EC PRIVATE KEY"), unencrypted. P-256 only. */
export function importPrivateKey(pkcs8Pem: string): KeyObject {
  if (typeof pkcs8Pem !== 'string' || !PRIVATE_KEY_PEM.test(pkcs8Pem.trim())) {
    throw new CryptoError('invalid_encoding', 'expected an unencrypted PRIVATE KEY or EC PRIVATE KEY PEM');
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pkcs8Pem, format: 'pem' });
  } catch (cause) {
    throw new CryptoError('invalid_key', 'unreadable private key PEM', { cause });
  }
  requireP256(key, 'private');
  return key;
}

function publicOf(key: KeyObject): KeyObject {
  requireP256(key, 'any');
  return key.type === 'private' ? createPublicKey(key) : key;
}

/** SPKI DER of a public key (or of the public half of a private key). */
export function publicKeySpkiDer(key: KeyObject): Uint8Array {
  const der = publicOf(key).export({ format: 'der', type: 'spki' });
  return new Uint8Array(der.buffer, der.byteOffset, der.byteLength);
}

/** base64 (standard, padded) of SPKI DER; accepts a private key too. */
export function exportPublicKeySpki(key: KeyObject): string {
  return base64Encode(publicKeySpkiDer(key));
}

export function exportPublicKeyPem(key: KeyObject): string {
  return publicOf(key).export({ format: 'pem', type: 'spki' }).toString();
}

/** PKCS#8 PEM, unencrypted. */
export function exportPrivateKeyPem(key: KeyObject): string {
  requireP256(key, 'private');
  return key.export({ format: 'pem', type: 'pkcs8' }).toString();
}

/** SHA-256 hex of the SPKI DER. */
export function publicKeyFingerprint(key: KeyObject): string {
  return sha256Hex(publicKeySpkiDer(key));
}

/** ES256 over the exact bytes: raw r‖s, base64url without padding. */
export function es256Sign(privateKey: KeyObject, data: Uint8Array): string {
  requireP256(privateKey, 'private');
  requireBytes(data);
  const signature = nodeSign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
  return base64urlEncode(signature);
}

/**
 * Verifies an ES256 signature over the exact bytes. Throws CryptoError('invalid_encoding') when the
 * signature is not strict base64url, ('invalid_length') when it is not 64 bytes; returns false when it
 * does not verify. Low-S and high-S forms both verify (DESIGN.md §4). A private key may be given; its
 * public half is used.
 */
export function es256Verify(publicKey: KeyObject, data: Uint8Array, signature: string): boolean {
  const raw = verifyArguments(publicKey, data, signature);
  try {
    return nodeVerify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, raw);
  } catch {
    // OpenSSL refuses some out-of-range r/s values with an error rather than a mismatch.
    return false;
  }
}

/**
 * es256Verify on libuv's thread pool: the body is hashed and the signature checked while the calling thread goes on
 * (the CMS channel's 2.5 MB bodies: about 7 ms each on the development machine). The same checks, thrown the same
 * way, before anything starts; the verdict resolves false where OpenSSL refuses an out-of-range r or s.
 */
export function es256VerifyAsync(
  publicKey: KeyObject,
  data: Uint8Array,
  signature: string,
): Promise<boolean> {
  const raw = verifyArguments(publicKey, data, signature);
  return new Promise((resolve) => {
    try {
      nodeVerify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, raw, (error, ok) =>
        resolve(error === null && ok),
      );
    } catch {
      resolve(false);
    }
  });
}

/** What es256Verify and es256VerifyAsync check before verifying: the key, the data, and the raw 64-byte signature. */
function verifyArguments(publicKey: KeyObject, data: Uint8Array, signature: string): Uint8Array {
  requireP256(publicKey, 'any');
  requireBytes(data);
  const raw = base64urlDecode(signature);
  if (raw.byteLength !== RAW_SIGNATURE_LENGTH) {
    throw new CryptoError(
      'invalid_length',
      `signature must be ${RAW_SIGNATURE_LENGTH} bytes, got ${raw.byteLength}`,
    );
  }
  return raw;
}

function requireBytes(data: Uint8Array): void {
  if (!(data instanceof Uint8Array)) {
    throw new CryptoError('invalid_argument', 'data must be a Uint8Array');
  }
}
