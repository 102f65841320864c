import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Password hashes: scrypt (RFC 7914) with a per-user random salt. The cost parameters are stored with each hash
 * (`scrypt$N$r$p$salt$hash`, base64), so they can be raised later without invalidating existing hashes.
 */
export interface ScryptParameters {
  N: number;
  r: number;
  p: number;
}

/** 2^15 × 8 × 128 bytes = 32 MiB of memory per hash: the OWASP minimum for scrypt. */
export const DEFAULT_SCRYPT: ScryptParameters = { N: 32_768, r: 8, p: 1 };
const SALT_BYTES = 16;
const HASH_BYTES = 32;

function derive(password: string, salt: Buffer, params: ScryptParameters): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(
      password.normalize('NFC'),
      salt,
      HASH_BYTES,
      { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + 1024 * 1024 },
      (error, key) => (error ? reject(error) : resolve(key)),
    );
  });
}

export async function hashPassword(
  password: string,
  params: ScryptParameters = DEFAULT_SCRYPT,
): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await derive(password, salt, params);
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

const STORED = /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9+/=]{4,64})\$([A-Za-z0-9+/=]{4,128})$/;

/** False for a wrong password and for a stored value that is not a hash this code writes (never throws on it). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const match = STORED.exec(stored);
  if (!match) return false;
  const params = { N: Number(match[1]), r: Number(match[2]), p: Number(match[3]) };
  // A power of two from 2^10 to 2^20: anything else was not written by hashPassword.
  if (
    params.N < 1024 ||
    params.N > 1_048_576 ||
    (params.N & (params.N - 1)) !== 0 ||
    params.r < 1 ||
    params.p < 1
  ) {
    return false;
  }
  const expected = Buffer.from(match[5]!, 'base64');
  if (expected.length !== HASH_BYTES) return false;
  const actual = await derive(password, Buffer.from(match[4]!, 'base64'), params);
  return timingSafeEqual(actual, expected);
}

/** A hash of nothing in particular: verified against when the email is unknown, so timing does not tell. */
let dummyHash: Promise<string> | null = null;
export function dummyPasswordHash(): Promise<string> {
  dummyHash ??= hashPassword(randomBytes(16).toString('hex'));
  return dummyHash;
}
