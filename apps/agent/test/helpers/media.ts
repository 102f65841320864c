import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type TestPki, signEnvelope } from './pki.js';

export interface ManifestOverrides {
  approval_number?: string;
  structures?: string[];
  valid_from?: string;
  valid_until?: string;
  media_sha256?: string;
  duration_ms?: number | null;
}

export function manifestFor(sha256: string, overrides: ManifestOverrides = {}) {
  return {
    kind: 'approval' as const,
    approval_number: overrides.approval_number ?? 'APP-2026-000001',
    media_sha256: overrides.media_sha256 ?? sha256,
    structures: overrides.structures ?? ['ALM-0001'],
    valid_from: overrides.valid_from ?? '2020-01-01',
    valid_until: overrides.valid_until ?? '2099-12-31',
    category_id: 1,
    duration_ms: overrides.duration_ms === undefined ? null : overrides.duration_ms,
    width: 1920,
    height: 1080,
    issued_at: '2026-01-01T00:00:00Z',
  };
}

export function sha256Of(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Writes a media file and (unless `sidecar: false`) its signed sidecar. Returns the file's hash. */
export async function writeMedia(
  pki: TestPki,
  mediaDir: string,
  relativePath: string,
  content: Uint8Array | string,
  options: { sidecar?: boolean; manifest?: ManifestOverrides } = {},
): Promise<string> {
  const path = join(mediaDir, relativePath);
  mkdirSync(dirname(path), { recursive: true });
  const sha256 = sha256Of(content);
  if (options.sidecar !== false) {
    const envelope = await signEnvelope(pki, manifestFor(sha256, options.manifest));
    writeFileSync(`${path}.envelope.json`, JSON.stringify(envelope));
  }
  writeFileSync(path, content);
  return sha256;
}

/**
 * Overwrites a file in place with other bytes of the same size and puts its atime and mtime back to the nanosecond,
 * as `touch -r`, `cp -p`, `rsync -t` or `tar x` do (the real `touch -r`, through a reference file beside it): only
 * the ctime (and nothing a user can set) tells it changed. Returns the new bytes' hash.
 */
export function swapKeepingSizeAndMtime(path: string, content: string): string {
  const before = statSync(path, { bigint: true });
  if (BigInt(Buffer.byteLength(content)) !== before.size)
    throw new Error('the new bytes must be of the same size');
  const reference = `${path}.times`;
  execFileSync('touch', ['-r', path, reference]);
  writeFileSync(path, content);
  execFileSync('touch', ['-r', reference, path]);
  const after = statSync(path, { bigint: true });
  if (after.mtimeNs !== before.mtimeNs || after.size !== before.size || after.ino !== before.ino) {
    throw new Error('size, mtime and inode were not kept');
  }
  return sha256Of(content);
}

/** Revocation list body signed by the authority. */
export async function signedRevocations(
  pki: TestPki,
  version: number,
  revoked: { approval_number: string; revoked_at: string }[],
) {
  return signEnvelope(pki, { version, issued_at: '2026-11-21T00:00:00Z', revoked });
}
