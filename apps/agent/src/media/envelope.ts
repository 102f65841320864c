import { createHash } from 'node:crypto';
import {
  type ApprovalManifest,
  almatyDate,
  compiledCheck,
  ApprovalManifest as ApprovalManifestSchema,
  Envelope,
  type RejectCode,
} from '@ooh/protocol';
import {
  base64Decode,
  type Certificate,
  parsePems,
  type ValidityWindow,
  type VerificationError,
  verifySignedDocument,
} from '@ooh/verify';

/** Answers whether the revocation list held names an approval number (see RevocationStore). */
export interface RevocationIndex {
  isRevoked(approvalNumber: string): boolean;
}

export type EnvelopeVerdict =
  | { status: 'playable'; manifest: ApprovalManifest }
  /**
   * Signed, but its first day (or its signing certificate) has not come yet: not playable, and not refused
   * either; `reason` when it is the certificate (a clock to doubt).
   */
  | { status: 'not_yet_valid'; manifest: ApprovalManifest; reason?: string }
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

/** The signed-document check of @ooh/verify, injectable so tests can count the calls. */
export type VerifyDocument = typeof verifySignedDocument;

/**
 * What does not depend on the time of the check, worked out once per envelope text: whether the CMS signature
 * verifies against the pinned roots, its content is the canonical JSON of `body`, and `body` is an approval
 * manifest; and the validity window of the signing chain (signer to pinned root), so that a later check only
 * compares dates.
 */
type SignatureCheck =
  | { ok: false; reason: string }
  | { ok: true; manifest: ApprovalManifest; window: ValidityWindow };

/** Envelopes remembered; a player holds a few hundred files, so this is never reached in practice. */
const CACHE_ENTRIES = 4096;

const isManifest = (body: unknown): body is ApprovalManifest =>
  compiledCheck(ApprovalManifestSchema).Check(body);

/**
 * Decides whether a media file may play (DESIGN.md §9): "playable only when its SHA-256 matches a verified
 * envelope, today is inside the approval's dates, the player's structure is covered, and the revocation list
 * does not name it". Checks run in this order, and the first failure names the reject code:
 * 1. a sidecar with a signature → else NO_SIGNATURE;
 * 2. the CMS verifies against the pinned root, its attached content is exactly the canonical JSON of `body`,
 *    `body` is an approval manifest, and the signing chain is valid at `now` → else BAD_SIGNATURE (a chain not
 *    valid YET is not a bad signature but a clock to doubt: not playable, no reject);
 * 3. the manifest names this file's hash → else HASH_MISMATCH;
 * 4. the revocation list does not name the approval → else REVOKED;
 * 5. the structure is covered and today (Almaty) is not after valid_until → else EXPIRED_APPROVAL
 *    (the five codes of the spec have no separate one for "another structure": the approval is not in force
 *    here, which is what EXPIRED_APPROVAL tells the authority; `reason` says which);
 * 6. today is not before valid_from → else not yet playable, with no reject (it becomes playable by itself).
 *
 * The signature (about 20-40 ms of CMS and certificate work) is verified once per envelope text (keyed by its
 * SHA-256) and remembered with its chain's validity window; a recheck (a new day, a new revocation list, the
 * periodic media recheck) then only compares dates, the hash, the structure and the revocation list.
 */
export class EnvelopeVerifier {
  /** The outcome of each envelope text's signature check, kept while it runs too (one check for concurrent asks). */
  private readonly cache = new Map<string, Promise<SignatureCheck>>();
  private readonly verifyDocument: VerifyDocument;
  private roots: Certificate[] | null = null;

  constructor(
    private readonly options: {
      trustedRootsPem: string[];
      verifyDocument?: VerifyDocument;
      maxEntries?: number;
    },
  ) {
    this.verifyDocument = options.verifyDocument ?? verifySignedDocument;
  }

  /** Whether this verifier checks against exactly these roots (it may then serve another agent that pins them). */
  trusts(rootsPem: readonly string[]): boolean {
    const own = this.options.trustedRootsPem;
    return own.length === rootsPem.length && own.every((pem, i) => pem.trim() === rootsPem[i]!.trim());
  }

  async verify(check: Omit<EnvelopeCheck, 'trustedRootsPem'>): Promise<EnvelopeVerdict> {
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

    const signed = await this.signatureOf(check.envelopeText, parsed.signature);
    if (!signed.ok) return refused('BAD_SIGNATURE', signed.reason);
    const { manifest, window } = signed;
    // x509 validity is inclusive at both ends (RFC 5280 §4.1.2.5).
    const at = check.now.getTime();
    if (at < window.notBefore.getTime()) {
      return { status: 'not_yet_valid', manifest, reason: 'signing certificate not yet valid (clock?)' };
    }
    if (at > window.notAfter.getTime())
      return refused('BAD_SIGNATURE', 'signing certificate expired', manifest);

    if (manifest.media_sha256 !== check.mediaSha256) {
      return refused('HASH_MISMATCH', 'file hash differs from the approval', manifest);
    }
    if (check.revocations.isRevoked(manifest.approval_number)) {
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

  private signatureOf(text: string, signature: string): Promise<SignatureCheck> {
    const key = createHash('sha256').update(text, 'utf8').digest('hex');
    const known = this.cache.get(key);
    if (known) {
      // Most recently used last: the oldest entry goes first when the cache is full.
      this.cache.delete(key);
      this.cache.set(key, known);
      return known;
    }
    const result = this.checkSignature(text, signature);
    this.cache.set(key, result);
    // verifySignedDocument answers bad input as a value: a throw is a fault, not a verdict, so it is not remembered.
    result.catch(() => {
      if (this.cache.get(key) === result) this.cache.delete(key);
    });
    const limit = this.options.maxEntries ?? CACHE_ENTRIES;
    while (this.cache.size > limit) this.cache.delete(this.cache.keys().next().value as string);
    return result;
  }

  private async checkSignature(text: string, signature: string): Promise<SignatureCheck> {
    if (!base64Decode(signature)) return { ok: false, reason: 'signature is not base64' };
    const roots = this.pinnedRoots();
    if (!roots) return { ok: false, reason: 'the pinned authority root cannot be read' };
    // No `at`: the dates of the chain are judged at each check from the window kept.
    // Signed by the envelope signer, not the seal signer (@ooh/verify signer-role.ts).
    const result = await this.verifyDocument(text, isManifest, roots, null, 'envelope');
    if (!result.ok) return { ok: false, reason: reasonOf(result.error) };
    return { ok: true, manifest: result.body, window: result.window };
  }

  private pinnedRoots(): Certificate[] | null {
    if (!this.roots) {
      try {
        this.roots = parsePems(this.options.trustedRootsPem);
      } catch {
        return null;
      }
    }
    return this.roots;
  }
}

/** One check without memory (tests, one-off checks); the library keeps an {@link EnvelopeVerifier}. */
export async function verifyEnvelope(check: EnvelopeCheck): Promise<EnvelopeVerdict> {
  return new EnvelopeVerifier({ trustedRootsPem: check.trustedRootsPem }).verify(check);
}

/** The reason a reject record carries for a signature that does not verify (`detail.reason`). */
function reasonOf(error: VerificationError): string {
  switch (error.code) {
    case 'document_content_differs':
      return error.cause === undefined ? 'signed content is not the body' : 'body cannot be canonicalized';
    case 'document_body_invalid':
      return 'signed body is not an approval manifest';
    default:
      return `signature does not verify: ${error.message} (${error.code})`;
  }
}

function refused(code: RejectCode, reason: string, manifest?: ApprovalManifest): EnvelopeVerdict {
  return manifest ? { status: 'refused', code, reason, manifest } : { status: 'refused', code, reason };
}
