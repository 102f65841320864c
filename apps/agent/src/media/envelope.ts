import { canonicalBytes, cmsVerify } from '@ooh/crypto';
import {
  type ApprovalManifest,
  almatyDate,
  compiledCheck,
  ApprovalManifest as ApprovalManifestSchema,
  Envelope,
  type RejectCode,
} from '@ooh/protocol';

/** Answers whether an approval number is revoked at an instant (see RevocationStore). */
export interface RevocationIndex {
  isRevoked(approvalNumber: string, at: Date): boolean;
}

export type EnvelopeVerdict =
  | { status: 'playable'; manifest: ApprovalManifest }
  /** Signed and matching, but its first day has not come yet: not playable, and not refused either. */
  | { status: 'not_yet_valid'; manifest: ApprovalManifest }
  | { status: 'refused'; code: RejectCode; reason: string; manifest?: ApprovalManifest };

export interface EnvelopeCheck {
  /** Text of the sidecar `<file>.envelope.json`, or null when there is none. */
  envelopeText: string | null;
  /** SHA-256 (hex) of the media file as read from disk. */
  mediaSha256: string;
  /** The pinned authority root(s). */
  trustedRootsPem: string[];
  now: Date;
  /** The player's structure code. */
  structure: string;
  revocations: RevocationIndex;
}

/**
 * Decides whether a media file may play (DESIGN.md §9): "playable only when its SHA-256 matches a verified
 * envelope, today is inside the approval's dates, the player's structure is covered, and the revocation list
 * does not name it". Checks run in this order, and the first failure names the reject code:
 * 1. a sidecar with a signature → else NO_SIGNATURE;
 * 2. the CMS verifies against the pinned root at `now`, its attached content is exactly the canonical JSON of
 *    `body`, and `body` is an approval manifest → else BAD_SIGNATURE;
 * 3. the manifest names this file's hash → else HASH_MISMATCH;
 * 4. the revocation list does not name the approval → else REVOKED;
 * 5. the structure is covered and today (Almaty) is not after valid_until → else EXPIRED_APPROVAL
 *    (the five codes of the spec have no separate one for "another structure": the approval is not in force
 *    here, which is what EXPIRED_APPROVAL tells the authority; `reason` says which);
 * 6. today is not before valid_from → else not yet playable, with no reject (it becomes playable by itself).
 */
export async function verifyEnvelope(check: EnvelopeCheck): Promise<EnvelopeVerdict> {
  if (check.envelopeText === null) return refused('NO_SIGNATURE', 'no sidecar envelope');
  let parsed: unknown;
  try {
    parsed = JSON.parse(check.envelopeText);
  } catch {
    return refused('BAD_SIGNATURE', 'sidecar is not JSON');
  }
  if (typeof parsed === 'object' && parsed !== null) {
    const signature = (parsed as { signature?: unknown }).signature;
    if (signature === undefined || signature === null || signature === '') {
      return refused('NO_SIGNATURE', 'sidecar carries no signature');
    }
  }
  if (!compiledCheck(Envelope).Check(parsed)) return refused('BAD_SIGNATURE', 'sidecar is not an envelope');
  const envelope = parsed;

  const der = decodeBase64Strict(envelope.signature);
  if (!der) return refused('BAD_SIGNATURE', 'signature is not base64');
  const result = await cmsVerify(der, { trustedRootsPem: check.trustedRootsPem, at: check.now });
  if (!result.ok) return refused('BAD_SIGNATURE', `signature does not verify: ${result.reason}`);
  let expected: Uint8Array;
  try {
    expected = canonicalBytes(envelope.body);
  } catch {
    return refused('BAD_SIGNATURE', 'body cannot be canonicalized');
  }
  // DESIGN.md §4: the signature is "over canonical JSON of body": the signed content must be exactly that.
  if (!Buffer.from(result.content).equals(Buffer.from(expected))) {
    return refused('BAD_SIGNATURE', 'signed content is not the body');
  }
  if (!compiledCheck(ApprovalManifestSchema).Check(envelope.body)) {
    return refused('BAD_SIGNATURE', 'signed body is not an approval manifest');
  }
  const manifest = envelope.body as ApprovalManifest;

  if (manifest.media_sha256 !== check.mediaSha256) {
    return refused('HASH_MISMATCH', 'file hash differs from the approval', manifest);
  }
  if (check.revocations.isRevoked(manifest.approval_number, check.now)) {
    return refused('REVOKED', 'approval is on the revocation list', manifest);
  }
  if (!manifest.structures.includes(check.structure)) {
    return refused('EXPIRED_APPROVAL', 'structure_not_covered', manifest);
  }
  // DESIGN.md §4: valid_from, valid_until are "Almaty dates, inclusive"; YYYY-MM-DD compares as text.
  const today = almatyDate(check.now);
  if (today > manifest.valid_until) return refused('EXPIRED_APPROVAL', 'valid_until_passed', manifest);
  if (today < manifest.valid_from) return { status: 'not_yet_valid', manifest };
  return { status: 'playable', manifest };
}

function refused(code: RejectCode, reason: string, manifest?: ApprovalManifest): EnvelopeVerdict {
  return manifest ? { status: 'refused', code, reason, manifest } : { status: 'refused', code, reason };
}

function decodeBase64Strict(text: string): Uint8Array | null {
  const compact = text.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(compact) || compact.length % 4 !== 0) return null;
  return Buffer.from(compact, 'base64');
}
