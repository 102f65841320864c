import { X509Certificate } from 'node:crypto';
import { canonicalBytes, cmsVerify, sha256Hex } from '@ooh/crypto';
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

/** The CMS check: `cmsVerify` of @ooh/crypto, injectable so tests can count the calls. */
export type VerifySignature = typeof cmsVerify;

/** How long the certificates that signed an envelope are all valid: [notBefore, notAfter] in ms. */
interface ValidityWindow {
  notBefore: number;
  notAfter: number;
}

/**
 * What does not depend on the time of the check, worked out once per envelope text: whether the CMS signature
 * verifies against the pinned roots, its content is the canonical JSON of `body`, and `body` is an approval
 * manifest; and the validity window of the signing chain, so that a later check only compares dates.
 */
type SignatureCheck =
  | { ok: false; reason: string }
  | { ok: true; manifest: ApprovalManifest; der: Uint8Array; window: ValidityWindow | null };

/** Envelopes remembered; a player holds a few hundred files, so this is never reached in practice. */
const CACHE_ENTRIES = 4096;

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
  private readonly cache = new Map<string, SignatureCheck>();
  private readonly verifySignature: VerifySignature;

  constructor(
    private readonly options: {
      trustedRootsPem: string[];
      verifySignature?: VerifySignature;
      maxEntries?: number;
    },
  ) {
    this.verifySignature = options.verifySignature ?? cmsVerify;
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

    const signed = await this.signatureOf(check.envelopeText, parsed);
    if (!signed.ok) return refused('BAD_SIGNATURE', signed.reason);
    const manifest = signed.manifest;
    const at = check.now.getTime();
    if (signed.window) {
      // x509 validity is inclusive at both ends (RFC 5280 §4.1.2.5).
      if (at < signed.window.notBefore) {
        return { status: 'not_yet_valid', manifest, reason: 'signing certificate not yet valid (clock?)' };
      }
      if (at > signed.window.notAfter) {
        return refused('BAD_SIGNATURE', 'signing certificate expired', manifest);
      }
    } else {
      // The chain could not be read for its dates: judge it at `now` the long way (not remembered).
      const dated = await this.verifySignature(signed.der, {
        trustedRootsPem: this.options.trustedRootsPem,
        at: check.now,
      });
      if (!dated.ok) return refused('BAD_SIGNATURE', `signature does not verify: ${dated.reason}`, manifest);
    }

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

  private async signatureOf(text: string, envelope: Envelope): Promise<SignatureCheck> {
    const key = sha256Hex(Buffer.from(text, 'utf8'));
    const known = this.cache.get(key);
    if (known) {
      // Most recently used last: the oldest entry goes first when the cache is full.
      this.cache.delete(key);
      this.cache.set(key, known);
      return known;
    }
    const result = await this.checkSignature(envelope);
    this.cache.set(key, result);
    const limit = this.options.maxEntries ?? CACHE_ENTRIES;
    while (this.cache.size > limit) this.cache.delete(this.cache.keys().next().value as string);
    return result;
  }

  private async checkSignature(envelope: Envelope): Promise<SignatureCheck> {
    const der = decodeBase64Strict(envelope.signature);
    if (!der) return { ok: false, reason: 'signature is not base64' };
    // No `at`: the dates of the chain are judged at each check from the window kept below.
    const result = await this.verifySignature(der, { trustedRootsPem: this.options.trustedRootsPem });
    if (!result.ok) return { ok: false, reason: `signature does not verify: ${result.reason}` };
    let expected: Uint8Array;
    try {
      expected = canonicalBytes(envelope.body);
    } catch {
      return { ok: false, reason: 'body cannot be canonicalized' };
    }
    // DESIGN.md §4: the signature is "over canonical JSON of body": the signed content must be exactly that.
    if (!Buffer.from(result.content).equals(Buffer.from(expected))) {
      return { ok: false, reason: 'signed content is not the body' };
    }
    if (!compiledCheck(ApprovalManifestSchema).Check(envelope.body)) {
      return { ok: false, reason: 'signed body is not an approval manifest' };
    }
    return {
      ok: true,
      manifest: envelope.body as ApprovalManifest,
      der,
      window: chainWindow(der, result.signerCertificatePem, this.options.trustedRootsPem),
    };
  }
}

/** One check without memory (tests, one-off checks); the library keeps an {@link EnvelopeVerifier}. */
export async function verifyEnvelope(check: EnvelopeCheck): Promise<EnvelopeVerdict> {
  return new EnvelopeVerifier({ trustedRootsPem: check.trustedRootsPem }).verify(check);
}

/**
 * The window in which every certificate from the signer up to a pinned root is valid, or null when the path
 * cannot be rebuilt here (then each check verifies at its own `now`). The CMS verification has already proved
 * the path; this only finds the same certificates again to read their dates: signer → certificates embedded in
 * the SignedData → a pinned root, each link checked by issuer name and signature.
 */
function chainWindow(der: Uint8Array, signerPem: string, rootsPem: string[]): ValidityWindow | null {
  try {
    const roots = rootsPem.map((pem) => new X509Certificate(pem));
    const pool = embeddedCertificates(der).map((certificate) => new X509Certificate(certificate));
    let current = new X509Certificate(signerPem);
    const chain = [current];
    for (let depth = 0; depth < 8; depth++) {
      if (roots.some((root) => root.raw.equals(current.raw))) return windowOf(chain);
      const issuedBy = (candidate: X509Certificate) =>
        !chain.some((item) => item.raw.equals(candidate.raw)) &&
        current.checkIssued(candidate) &&
        current.verify(candidate.publicKey);
      const root = roots.find(issuedBy);
      if (root) return windowOf([...chain, root]);
      const issuer = pool.find(issuedBy);
      if (!issuer) return null;
      chain.push(issuer);
      current = issuer;
    }
    return null;
  } catch {
    return null;
  }
}

function windowOf(chain: X509Certificate[]): ValidityWindow | null {
  const notBefore = Math.max(...chain.map((item) => Date.parse(item.validFrom)));
  const notAfter = Math.min(...chain.map((item) => Date.parse(item.validTo)));
  return Number.isFinite(notBefore) && Number.isFinite(notAfter) ? { notBefore, notAfter } : null;
}

/**
 * The `certificates` of a DER CMS SignedData (RFC 5652 §5.1): ContentInfo { contentType, [0] { SignedData {
 * version, digestAlgorithms, encapContentInfo, [0] IMPLICIT certificates, ... } } }. Definite lengths only
 * (DER); anything else gives none, and the window is then not known.
 */
function embeddedCertificates(der: Uint8Array): Uint8Array[] {
  const contentInfo = readTlv(der, 0);
  if (contentInfo?.tag !== 0x30) return [];
  const explicit = childrenOf(der, contentInfo)[1];
  if (explicit?.tag !== 0xa0) return [];
  const signedData = readTlv(der, explicit.start);
  if (signedData?.tag !== 0x30) return [];
  const certificates = childrenOf(der, signedData).find((child) => child.tag === 0xa0);
  if (!certificates) return [];
  return childrenOf(der, certificates)
    .filter((child) => child.tag === 0x30)
    .map((child) => der.subarray(child.offset, child.end));
}

interface Tlv {
  tag: number;
  /** Where the TLV begins (its tag). */
  offset: number;
  /** Where its value begins and ends. */
  start: number;
  end: number;
}

function readTlv(der: Uint8Array, offset: number): Tlv | null {
  if (offset + 2 > der.length) return null;
  const tag = der[offset]!;
  const first = der[offset + 1]!;
  let position = offset + 2;
  let length = first;
  if (first >= 0x80) {
    const octets = first & 0x7f;
    if (octets === 0 || octets > 4 || position + octets > der.length) return null;
    length = 0;
    for (let index = 0; index < octets; index++) length = length * 256 + der[position++]!;
  }
  const end = position + length;
  return end <= der.length ? { tag, offset, start: position, end } : null;
}

function childrenOf(der: Uint8Array, parent: Tlv): Tlv[] {
  const children: Tlv[] = [];
  for (let offset = parent.start; offset < parent.end; ) {
    const child = readTlv(der, offset);
    if (!child || child.end > parent.end) return children;
    children.push(child);
    offset = child.end;
  }
  return children;
}

function refused(code: RejectCode, reason: string, manifest?: ApprovalManifest): EnvelopeVerdict {
  return manifest ? { status: 'refused', code, reason, manifest } : { status: 'refused', code, reason };
}

function decodeBase64Strict(text: string): Uint8Array | null {
  const compact = text.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(compact) || compact.length % 4 !== 0) return null;
  return Buffer.from(compact, 'base64');
}
