import { toArrayBuffer } from './bytes.js';
import { VerificationError } from './errors.js';

/*
 * ES256 (RFC 7518 §3.4: ECDSA P-256 with SHA-256, the signature as raw r ‖ s of 64 bytes, IEEE P1363) verified with
 * WebCrypto. The noble-curves contract (STYLE.md): misuse throws, a signature that does not verify is `false`.
 * Tested against Wycheproof's ecdsa_secp256r1_sha256_p1363 vectors.
 */

/** A WebCrypto public key (CryptoKey), named so that both the DOM's and Node's typings accept it. */
export type Es256PublicKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

/** Imports a P-256 public key from its DER SubjectPublicKeyInfo; throws VerificationError('invalid_argument'). */
export async function importEs256PublicKey(spki: Uint8Array): Promise<Es256PublicKey> {
  if (!(spki instanceof Uint8Array)) throw new VerificationError('invalid_argument', 'spki must be bytes');
  try {
    return await crypto.subtle.importKey(
      'spki',
      toArrayBuffer(spki),
      { name: 'ECDSA', namedCurve: 'P-256' },
      false,
      ['verify'],
    );
  } catch (cause) {
    throw new VerificationError('invalid_argument', 'not a P-256 SubjectPublicKeyInfo', { cause });
  }
}

/** Whether `signature` (64 bytes r ‖ s) is a valid ES256 signature of `data` by `key`; any other length is false. */
export async function es256Verify(
  key: Es256PublicKey,
  data: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  if (!(data instanceof Uint8Array) || !(signature instanceof Uint8Array))
    throw new VerificationError('invalid_argument', 'data and signature must be bytes');
  if (signature.byteLength !== 64) return false;
  return crypto.subtle.verify(
    { name: 'ECDSA', hash: 'SHA-256' },
    key,
    toArrayBuffer(signature),
    toArrayBuffer(data),
  );
}
