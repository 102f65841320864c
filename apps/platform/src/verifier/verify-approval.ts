import { ApprovalManifest, almatyDate, RevocationListBody } from '@ooh/protocol';
import {
  type Certificate,
  canonicalBytes,
  type LedgerInfo,
  parsePems,
  sha256Hex,
  verifyLedgerInfo,
  verifySignedDocument,
} from '@ooh/verify';
import { Value } from '@sinclair/typebox/value';
import {
  type ApprovalPublicStatus,
  ApprovalPublicStatus as ApprovalPublicStatusSchema,
  type LedgerBlock,
} from '../ledger/schema.js';
import type { PublicSource } from './source.js';
import {
  Checks,
  checkAnchoring,
  checkBlockChain,
  fetchBlock,
  getJson,
  ledgerWithheld,
  type VerifyProgress,
  type VerifyReport,
} from './verify-seal.js';

/*
 * The verifier anyone can run, for an approval (DESIGN.md section 6: "Public endpoints on the verify host also serve
 * the ledger blocks and proofs, so a third party can check a seal or an approval without credentials; the project
 * ships a verify CLI that does this from public data only"). From public routes only
 * (/v1/approvals/{number}, /v1/ledger/blocks/{day}, /v1/ledger/head, /v1/revocations.json) and every hash
 * recomputed with @ooh/verify:
 * 1. the approval's public document, and its manifest: manifest_sha256 is the SHA-256 of the manifest's canonical
 *    JSON (DESIGN.md section 4), and the manifest says what the document says (number, media, structures, dates);
 * 2. the ledger leaf of its issue: kind approval, this number and manifest, signed_at the manifest's issued_at; the
 *    leaf hash, the inclusion path (sides derived from index and leaf_count) and the block digest recomputed
 *    (verifyLedgerInfo); the block holds it; the chain of digests from the head down to the first block;
 * 3. when it is revoked: the leaf of its revocation the same way, with its revoked_at; and the signed revocation list
 *    (CMS against the pinned root, over the canonical JSON of its body) names it with that time; when it is not, the
 *    list does not name it;
 * 4. the leaves of every block walked: none revokes the approval unless the document shows that revocation, none
 *    issues its number with another manifest, and the revocation list names every revocation the chain holds (a host
 *    that hides a revocation behind an older signed list is caught here); a null ledger position once the head is
 *    past the block that must hold the leaf is withheld, not pending;
 * 5. with the envelope file a player holds (`--envelope`): its signature against the pinned root, and its body is the
 *    manifest the ledger holds.
 * Envelopes and revocation lists must be signed by the authority's envelope signer, not its seal signer (signer_role).
 */

export interface VerifyApprovalOptions {
  number: string;
  source: PublicSource;
  /** The pinned authority root certificate (PEM). */
  rootPem: string;
  /** The approval's envelope (the `<file>.envelope.json` sidecar, or the envelope_url document), as text. */
  envelopeText?: string;
  /** Fail, rather than note, when a ledger block holding the approval's leaves is not digested yet. */
  requireLedger?: boolean;
  progress?: VerifyProgress;
  /**
   * As for a seal: witness keys the reader pins, how many must cosign, the pinned ledger key; and the verifier's clock
   * (milliseconds, default Date.now()), which also judges the approval's status.
   */
  witnesses?: readonly (string | { text: string })[];
  requireAnchored?: number;
  ledgerKey?: string | { text: string };
  now?: number;
}

const sameInstant = (a: unknown, b: unknown): boolean =>
  typeof a === 'string' &&
  typeof b === 'string' &&
  new Date(a).getTime() === new Date(b).getTime() &&
  !Number.isNaN(new Date(a).getTime());

async function fetchApproval(
  source: PublicSource,
  number: string,
  checks: Checks,
): Promise<ApprovalPublicStatus | null> {
  const subject = `approval ${number}`;
  const path = `/v1/approvals/${encodeURIComponent(number)}`;
  const failed = (reason: string, facts: Record<string, string | number>) =>
    checks.add({ name: 'content', state: 'failed', reason, subject, facts }) && null;
  const { status, value } = await getJson(source, path);
  if (status === 404) return failed('approval_not_found', { url: `${source.origin}${path}` });
  if (status !== 200) return failed(status === -1 ? 'not_json' : 'http_status', { status });
  // Parse, don't trust: nothing is read from a document that is not an approval's public status.
  if (!Value.Check(ApprovalPublicStatusSchema, value)) {
    const first = [...Value.Errors(ApprovalPublicStatusSchema, value)][0];
    return failed('not_an_approval', { detail: first ? `${first.path}: ${first.message}` : 'invalid' });
  }
  if (value.approval_number !== number)
    return failed('another_approval', { approval_number: value.approval_number });
  checks.add({
    name: 'content',
    state: 'ok',
    reason: 'approval_read',
    subject,
    facts: {
      origin: source.origin,
      status: value.status,
      valid_from: value.valid_from,
      valid_until: value.valid_until,
      structures: value.structures.join(' '),
    },
  });
  return value;
}

/** How far the verifier's clock may be from the host's when a status is judged near midnight (as for cosignatures). */
const STATUS_SKEW_MS = 5 * 60_000;

/**
 * The status the document states, judged again from its own dates and revocation at the verifier's clock: revoked once
 * revoked_at has passed, else by the approval's Almaty days, inclusive (DESIGN.md sections 4 and 8). A clock a few
 * minutes off near midnight is allowed either status.
 */
function checkStatus(doc: ApprovalPublicStatus, now: number, checks: Checks): void {
  const statusAt = (ms: number) => {
    if (doc.revoked_at !== null && new Date(doc.revoked_at).getTime() <= ms) return 'revoked';
    const today = almatyDate(new Date(ms));
    return today < doc.valid_from ? 'not_yet_valid' : today > doc.valid_until ? 'expired' : 'valid';
  };
  const possible = new Set([statusAt(now - STATUS_SKEW_MS), statusAt(now), statusAt(now + STATUS_SKEW_MS)]);
  const facts = { status: doc.status, expected: statusAt(now), today: almatyDate(new Date(now)) };
  checks.add({
    name: 'content',
    state: possible.has(doc.status) ? 'ok' : 'failed',
    reason: possible.has(doc.status) ? 'status_matches' : 'status_differs',
    subject: `approval ${doc.approval_number}`,
    facts,
  });
}

/** The manifest: its hash is manifest_sha256, and it says what the public document says. */
async function checkManifest(doc: ApprovalPublicStatus, checks: Checks): Promise<string | null> {
  const subject = `approval ${doc.approval_number}`;
  const manifest = doc.manifest;
  if (manifest === null) {
    checks.add({ name: 'content', state: 'failed', reason: 'no_manifest', subject });
    return null;
  }
  const recomputed = await sha256Hex(canonicalBytes(manifest));
  if (recomputed !== doc.manifest_sha256) {
    checks.add({
      name: 'content',
      state: 'failed',
      reason: 'manifest_sha256_differs',
      subject,
      facts: { manifest_sha256: String(doc.manifest_sha256), recomputed },
    });
    return null;
  }
  const differs = (
    [
      ['approval_number', manifest.approval_number === doc.approval_number],
      ['media_sha256', manifest.media_sha256 === doc.media_sha256],
      // The same codes; the document's order is the database's collation, the manifest's the code units'.
      [
        'structures',
        JSON.stringify([...manifest.structures].sort()) === JSON.stringify([...doc.structures].sort()),
      ],
      ['valid_from', manifest.valid_from === doc.valid_from],
      ['valid_until', manifest.valid_until === doc.valid_until],
      ['issued_at', sameInstant(manifest.issued_at, doc.issued_at)],
    ] as const
  ).filter(([, same]) => !same);
  if (differs.length > 0) {
    checks.add({
      name: 'content',
      state: 'failed',
      reason: 'manifest_differs',
      subject,
      facts: { fields: differs.map(([field]) => field).join(', ') },
    });
    return null;
  }
  checks.add({
    name: 'content',
    state: 'ok',
    reason: 'manifest_matches',
    subject,
    facts: { manifest_sha256: recomputed },
  });
  return recomputed;
}

/**
 * One ledger leaf of the approval (its issue or its revocation): the proof (verifyLedgerInfo) and the leaf's own
 * fields, then the block that holds it. Returns the block when the proof holds and the block agrees with it.
 */
async function checkLeaf(
  what: 'approval' | 'revocation',
  info: LedgerInfo | null,
  expected: {
    approval_number: string;
    manifest_sha256: string;
    signed_at: string;
    revoked_at: string | null;
  },
  options: VerifyApprovalOptions,
  checks: Checks,
): Promise<LedgerBlock | null> {
  const subjectOf = (proof?: LedgerInfo['proof']) =>
    `ledger leaf of ${what === 'approval' ? 'approval' : 'revocation of'} ${expected.approval_number}${
      proof ? ` (block ${proof.day}, index ${proof.index})` : ''
    }`;
  if (info === null) {
    // The leaf is recorded when the approval is issued (signed_at) or revoked (revoked_at).
    const leafDay = almatyDate(new Date(expected.revoked_at ?? expected.signed_at));
    if (await ledgerWithheld(options.source, leafDay, subjectOf(), { leaf_kind: what }, checks)) return null;
    checks.add({
      name: 'ledger',
      state: options.requireLedger ? 'failed' : 'pending',
      reason: 'leaf_not_digested',
      subject: subjectOf(),
      facts: { leaf_kind: what, required: options.requireLedger ? 1 : 0 },
    });
    return null;
  }
  const { proof } = info;
  const subject = subjectOf(proof);
  const leaf = proof.leaf as Record<string, unknown>;
  const facts = {
    leaf_kind: what,
    index: proof.index,
    leaf_count: proof.leaf_count,
    block_height: info.block_height,
    status: info.status,
  };
  const fail = (reason: string, more: Record<string, string | number> = {}) =>
    checks.add({ name: 'ledger', state: 'failed', reason, subject, facts: { ...facts, ...more } }) && null;
  // DESIGN.md section 6: {kind, approval_number, manifest_sha256, signed_at, revoked_at}; the proof's rules are
  // @ooh/verify's (leaf hash recomputed, sides derived from index and leaf_count, digest recomputed).
  const reason = await verifyLedgerInfo(info, {
    kind: what,
    approval_number: expected.approval_number,
    manifest_sha256: expected.manifest_sha256,
  });
  if (reason !== null) return fail(reason, { kind: String(leaf['kind']) });
  if (!sameInstant(leaf['signed_at'], expected.signed_at))
    return fail('leaf_signed_at_differs', {
      leaf_signed_at: String(leaf['signed_at']),
      signed_at: expected.signed_at,
    });
  if (
    expected.revoked_at === null
      ? leaf['revoked_at'] !== null
      : !sameInstant(leaf['revoked_at'], expected.revoked_at)
  )
    return fail('leaf_revoked_at_differs', {
      leaf_revoked_at: String(leaf['revoked_at']),
      revoked_at: String(expected.revoked_at),
    });
  checks.add({ name: 'ledger', state: 'ok', reason: 'approval_leaf_holds', subject, facts });

  const block = await fetchBlock(options.source, proof.day, checks);
  if (!block) return null;
  const listed = block.leaves[proof.index];
  const holds =
    block.block_height === info.block_height &&
    block.digest === proof.digest &&
    block.merkle_root === proof.merkle_root &&
    block.anchor_sha256 === proof.anchor_sha256 &&
    block.leaf_count === proof.leaf_count &&
    listed !== undefined &&
    listed.leaf_sha256 === proof.leaf_sha256;
  checks.add({
    name: 'ledger',
    state: holds ? 'ok' : 'failed',
    reason: holds ? 'block_holds_leaf' : 'block_differs_from_proof',
    subject: `ledger block ${block.day}`,
    facts: { index: proof.index, leaf: `the ${what} leaf` },
  });
  return holds ? block : null;
}

/** A revocation leaf of the ledger: which approval, when, and the block holding it. */
interface RevocationLeaf {
  approval_number: string;
  revoked_at: string;
  day: string;
  index: number;
}

/** What the leaves of the blocks walked say of approvals (every block from the head down to the first). */
interface LeavesOnChain {
  blocks: number;
  revocations: RevocationLeaf[];
  /** The approval leaves of the number checked. */
  issues: { manifest_sha256: string; day: string; index: number }[];
}

function collectLeaves(number: string): { seen: LeavesOnChain; onBlock: (block: LedgerBlock) => void } {
  const seen: LeavesOnChain = { blocks: 0, revocations: [], issues: [] };
  const days = new Set<string>();
  return {
    seen,
    onBlock(block) {
      if (days.has(block.day)) return;
      days.add(block.day);
      seen.blocks += 1;
      for (const { index, leaf } of block.leaves) {
        if (leaf.kind === 'revocation' && leaf.approval_number !== null && leaf.revoked_at !== null) {
          seen.revocations.push({
            approval_number: leaf.approval_number,
            revoked_at: leaf.revoked_at,
            day: block.day,
            index,
          });
        }
        if (leaf.kind === 'approval' && leaf.approval_number === number)
          seen.issues.push({ manifest_sha256: leaf.manifest_sha256, day: block.day, index });
      }
    },
  };
}

/**
 * The ledger is the record no host can take back: a revocation leaf of this approval in a block walked must be the
 * revocation the document shows, and an approval leaf of its number must carry its manifest. A host that serves the
 * approval as never revoked (with an older, genuinely signed revocation list) is caught here.
 */
function checkLeavesOnChain(
  doc: ApprovalPublicStatus,
  manifestSha256: string,
  seen: LeavesOnChain,
  checks: Checks,
): void {
  const number = doc.approval_number;
  let failed = false;
  for (const leaf of seen.revocations.filter((r) => r.approval_number === number)) {
    if (doc.revoked_at !== null && sameInstant(leaf.revoked_at, doc.revoked_at)) continue;
    failed = true;
    checks.add({
      name: 'ledger',
      state: 'failed',
      reason: doc.revoked_at === null ? 'revocation_withheld' : 'ledger_revoked_at_differs',
      subject: `ledger block ${leaf.day}`,
      facts: {
        approval_number: number,
        index: leaf.index,
        leaf_revoked_at: leaf.revoked_at,
        revoked_at: String(doc.revoked_at),
        status: doc.status,
      },
    });
  }
  for (const issue of seen.issues.filter((i) => i.manifest_sha256 !== manifestSha256)) {
    failed = true;
    checks.add({
      name: 'ledger',
      state: 'failed',
      reason: 'ledger_issues_other_manifest',
      subject: `ledger block ${issue.day}`,
      facts: {
        approval_number: number,
        index: issue.index,
        leaf_manifest_sha256: issue.manifest_sha256,
        manifest_sha256: manifestSha256,
      },
    });
  }
  if (!failed) {
    checks.add({
      name: 'ledger',
      state: 'ok',
      reason: 'ledger_leaves_agree',
      subject: `ledger leaves of ${number}`,
      facts: {
        blocks: seen.blocks,
        revocations: seen.revocations.filter((r) => r.approval_number === number).length,
        issues: seen.issues.length,
      },
    });
  }
}

/**
 * The signed revocation list names the approval exactly when (and as) it is revoked, and it is not older than the
 * ledger: every revocation leaf of the blocks walked is in it (each list holds every revocation before it, and is
 * published in the revocation's own transaction), so an older list served in place of the newest fails.
 */
async function checkRevocationList(
  doc: ApprovalPublicStatus,
  roots: Certificate[],
  onChain: readonly RevocationLeaf[],
  options: VerifyApprovalOptions,
  checks: Checks,
): Promise<void> {
  const subject = 'revocation list';
  const { status, body } = await options.source.get('/v1/revocations.json');
  if (status === 404) {
    // "null before the first": no list until an approval is revoked.
    checks.add(
      doc.revoked_at === null && onChain.length === 0
        ? { name: 'content', state: 'ok', reason: 'no_revocation_list', subject }
        : {
            name: 'content',
            state: 'failed',
            reason: 'revocation_list_missing',
            subject,
            facts: { revoked: doc.revoked_at === null ? 0 : 1, ledger_revocations: onChain.length },
          },
    );
    return;
  }
  if (status !== 200) {
    checks.add({ name: 'content', state: 'failed', reason: 'http_status', subject, facts: { status } });
    return;
  }
  const verified = await verifySignedDocument(
    body.toString('utf8'),
    (value: unknown): value is RevocationListBody => Value.Check(RevocationListBody, value),
    roots,
    null,
    'envelope',
  );
  if (!verified.ok) {
    checks.add({
      name: 'signature',
      state: 'failed',
      reason: verified.error.code,
      subject,
      facts: { detail: verified.error.message },
    });
    return;
  }
  const list = verified.body;
  const entries = list.revoked.filter((r) => r.approval_number === doc.approval_number);
  const facts = { version: list.version, issued_at: list.issued_at, approval_number: doc.approval_number };
  const unlisted = onChain.filter(
    (leaf) =>
      !list.revoked.some(
        (r) => r.approval_number === leaf.approval_number && sameInstant(r.revoked_at, leaf.revoked_at),
      ),
  );
  if (unlisted.length > 0) {
    checks.add({
      name: 'content',
      state: 'failed',
      reason: 'revocation_list_stale',
      subject,
      facts: {
        ...facts,
        unlisted: unlisted.length,
        first_unlisted: unlisted[0]!.approval_number,
        first_revoked_at: unlisted[0]!.revoked_at,
        block: unlisted[0]!.day,
      },
    });
  }
  if (doc.revoked_at === null) {
    checks.add(
      entries.length === 0
        ? { name: 'content', state: 'ok', reason: 'not_in_revocation_list', subject, facts }
        : { name: 'content', state: 'failed', reason: 'listed_but_not_revoked', subject, facts },
    );
    return;
  }
  const revokedAt = doc.revoked_at;
  checks.add(
    entries.length === 1 && sameInstant(entries[0]!.revoked_at, revokedAt)
      ? {
          name: 'content',
          state: 'ok',
          reason: 'in_revocation_list',
          subject,
          facts: { ...facts, revoked_at: revokedAt },
        }
      : {
          name: 'content',
          state: 'failed',
          reason: entries.length === 0 ? 'not_in_revocation_list_but_revoked' : 'revocation_list_differs',
          subject,
          facts: { ...facts, revoked_at: revokedAt },
        },
  );
}

/** The envelope a player holds: signed under the pinned root, over the manifest the ledger holds. */
async function checkEnvelope(
  text: string,
  manifestSha256: string | null,
  roots: Certificate[],
  number: string,
  checks: Checks,
): Promise<void> {
  const subject = `envelope of ${number}`;
  const verified = await verifySignedDocument(
    text,
    (value: unknown): value is ApprovalManifest => Value.Check(ApprovalManifest, value),
    roots,
    null,
    'envelope',
  );
  if (!verified.ok) {
    checks.add({
      name: 'signature',
      state: 'failed',
      reason: verified.error.code,
      subject,
      facts: { detail: verified.error.message },
    });
    return;
  }
  checks.add({
    name: 'signature',
    state: 'ok',
    reason: 'verified',
    subject,
    facts: { signer: verified.chain.map((c) => c.subjectCommonName ?? '?').join(' → ') },
  });
  const sha = await sha256Hex(canonicalBytes(verified.body));
  checks.add(
    verified.body.approval_number === number && sha === manifestSha256
      ? { name: 'content', state: 'ok', reason: 'envelope_matches', subject, facts: { manifest_sha256: sha } }
      : {
          name: 'content',
          state: 'failed',
          reason: 'envelope_differs',
          subject,
          facts: { manifest_sha256: sha },
        },
  );
}

/** Checks the approval `number` and everything it rests on. Never throws for bad data: a failed check says what. */
export async function verifyApproval(options: VerifyApprovalOptions): Promise<VerifyReport> {
  const checks = new Checks();
  options.progress?.phase(`reading approval ${options.number}`);
  const doc = await fetchApproval(options.source, options.number, checks);
  if (!doc) return { ok: false, checks: checks.list };
  let roots: Certificate[] = [];
  try {
    roots = parsePems([options.rootPem]);
  } catch {
    // No root that parses: every signature fails as untrusted.
  }
  const manifestSha256 = await checkManifest(doc, checks);
  checkStatus(doc, options.now ?? Date.now(), checks);
  const leaves = collectLeaves(doc.approval_number);
  if (manifestSha256 !== null && doc.manifest !== null) {
    const blocks: LedgerBlock[] = [];
    const issued = await checkLeaf(
      'approval',
      doc.ledger.approval,
      {
        approval_number: doc.approval_number,
        manifest_sha256: manifestSha256,
        signed_at: doc.manifest.issued_at,
        revoked_at: null,
      },
      options,
      checks,
    );
    if (issued) blocks.push(issued);
    if (doc.revoked_at !== null) {
      const revoked = await checkLeaf(
        'revocation',
        doc.ledger.revocation,
        {
          approval_number: doc.approval_number,
          manifest_sha256: manifestSha256,
          signed_at: doc.manifest.issued_at,
          revoked_at: doc.revoked_at,
        },
        options,
        checks,
      );
      if (revoked && !blocks.some((b) => b.day === revoked.day)) blocks.push(revoked);
    } else if (doc.ledger.revocation !== null) {
      checks.add({
        name: 'ledger',
        state: 'failed',
        reason: 'revocation_leaf_but_not_revoked',
        subject: `ledger leaf of revocation of ${doc.approval_number}`,
      });
    }
    if (blocks.length > 0) {
      options.progress?.phase('reading the ledger');
      const chained = await checkBlockChain(
        blocks,
        `approval ${doc.approval_number}'s`,
        options,
        checks,
        leaves.onBlock,
      );
      checkLeavesOnChain(doc, manifestSha256, leaves.seen, checks);
      const newest = blocks.reduce((a, b) => (b.block_height > a.block_height ? b : a));
      await checkAnchoring(newest, chained, options, checks);
    }
  }
  await checkRevocationList(doc, roots, leaves.seen.revocations, options, checks);
  if (options.envelopeText !== undefined) {
    await checkEnvelope(options.envelopeText, manifestSha256, roots, doc.approval_number, checks);
  } else {
    checks.add({
      name: 'signature',
      state: 'unknown',
      reason: 'no_envelope',
      subject: `envelope of ${doc.approval_number}`,
    });
  }
  return { ok: checks.passed, checks: checks.list };
}
