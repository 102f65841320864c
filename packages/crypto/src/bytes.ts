import { createHash, timingSafeEqual, webcrypto } from 'node:crypto';
import { CryptoError } from './errors.js';

const BASE64URL_TEXT = /^[A-Za-z0-9_-]*$/;
const BASE64_TEXT = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const HEX_TEXT = /^(?:[0-9a-f]{2})*$/;

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** base64url (RFC 4648 §5) without padding. */
export function base64urlEncode(bytes: Uint8Array): string {
  return asBuffer(bytes).toString('base64url');
}

/**
 * Strict base64url: only the URL-safe alphabet, no padding, no whitespace, and the canonical
 * encoding only (unused trailing bits zero), so one byte string has exactly one text form.
 */
export function base64urlDecode(text: string): Uint8Array {
  if (typeof text !== 'string' || !BASE64URL_TEXT.test(text) || text.length % 4 === 1) {
    throw new CryptoError('invalid_encoding', 'not base64url without padding');
  }
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.toString('base64url') !== text) {
    throw new CryptoError('invalid_encoding', 'non-canonical base64url (trailing bits set)');
  }
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Standard base64 with padding. */
export function base64Encode(bytes: Uint8Array): string {
  return asBuffer(bytes).toString('base64');
}

/** Strict standard base64 (RFC 4648 §4): padded, canonical, no whitespace. */
export function base64Decode(text: string): Uint8Array {
  if (typeof text !== 'string' || !BASE64_TEXT.test(text)) {
    throw new CryptoError('invalid_encoding', 'not padded standard base64');
  }
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) {
    throw new CryptoError('invalid_encoding', 'non-canonical base64 (trailing bits set)');
  }
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Lowercase hex. */
export function hexEncode(bytes: Uint8Array): string {
  return asBuffer(bytes).toString('hex');
}

/** Lowercase hex of an even length only; anything else is CryptoError('invalid_encoding'). */
export function hexDecode(text: string): Uint8Array {
  if (typeof text !== 'string' || !HEX_TEXT.test(text)) {
    throw new CryptoError('invalid_encoding', 'not lowercase hex of whole bytes');
  }
  const bytes = Buffer.from(text, 'hex');
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** SHA-256; a string is hashed as its UTF-8 bytes. */
export function sha256(data: Uint8Array | string): Uint8Array {
  const digest = createHash('sha256').update(data).digest();
  return new Uint8Array(digest.buffer, digest.byteOffset, digest.byteLength);
}

/** SHA-256 as lowercase hex; a string is hashed as its UTF-8 bytes. */
export function sha256Hex(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** sha256Hex of bytes, computed on libuv's thread pool (WebCrypto's digest) while the calling thread goes on. */
export async function sha256HexAsync(data: Uint8Array): Promise<string> {
  return Buffer.from(await webcrypto.subtle.digest('SHA-256', data)).toString('hex');
}

/** Constant-time comparison of two byte strings (false on different lengths). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && timingSafeEqual(a, b);
}
