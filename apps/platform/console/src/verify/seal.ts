import { bytesEqual, hexDecode, hexEncode, sha256, sha256Hex, utf8 } from './bytes.js';
import { verifyCms } from './cms.js';
import { canonicalize } from './jcs.js';
import { rootFromProof } from './merkle.js';
import type { Certificate } from './x509.js';

/** The StatsSeal as the verify host serves it (spec "Stats seal (StatsSeal)"). */
export interface StatsSeal {
  day: string;
  signed_at: string;
  body: {
    v: number;
    env: string;
    day: string;
    batch_count: number;
    record_count: number;
    root: string;
    prev_seal_sha256: string;
  };
  signature: string;
  ledger: {
    day: string;
    status: string;
    block_height: number;
    digest: string;
    proof: {
      v: number;
      day: string;
      leaf: Record<string, unknown> & { kind?: unknown; manifest_sha256?: unknown };
      leaf_sha256: string;
      index: number;
      leaf_count: number;
      path: { side: string; hash: string }[];
      merkle_root: string;
      anchor_sha256: string;
      digest: string;
    };
  } | null;
}

export type CheckName = 'signature' | 'content' | 'chain' | 'ledger';
export type CheckState = 'ok' | 'failed' | 'pending' | 'unknown';
export interface Check {
  name: CheckName;
  state: CheckState;
  /** A machine word for the page to translate (reason of a failure or of a pending state). */
  reason: string;
  /** Extra facts to show: signer chain, block height... */
  facts?: Record<string, string | number>;
}

const ZERO = '0'.repeat(64);

/**
 * Verifies a daily seal from public data only (DESIGN.md sections 4 and 6), like the project's verify CLI:
 * - signature: the CMS signature and its certificate chain up to the authority root;
 * - content: the signed content is exactly the canonical JSON of body;
 * - chain: prev_seal_sha256 is the SHA-256 of the previous day's seal body (when that seal is known);
 * - ledger: the seal's leaf, recomputed from the leaf object, is in the block's Merkle root, and the block digest
 *   recomputes from its fields.
 */
export async function verifySeal(
  seal: StatsSeal,
  root: Certificate,
  previous: StatsSeal | null | 'none',
): Promise<Check[]> {
  const checks: Check[] = [];
  const bodyText = canonicalize(seal.body);
  const bodySha = await sha256Hex(utf8(bodyText));

  const cms = await verifyCms(seal.signature, root);
  checks.push(
    cms.ok
      ? { name: 'signature', state: 'ok', reason: 'verified', facts: { signer: cms.chain.join(' → ') } }
      : { name: 'signature', state: 'failed', reason: cms.reason },
  );
  checks.push(
    !cms.ok
      ? { name: 'content', state: 'unknown', reason: 'signature_failed' }
      : bytesEqual(cms.content, utf8(bodyText))
        ? { name: 'content', state: 'ok', reason: 'matches', facts: { body_sha256: bodySha } }
        : { name: 'content', state: 'failed', reason: 'content_differs' },
  );

  if (seal.body.prev_seal_sha256 === ZERO) {
    checks.push({ name: 'chain', state: 'ok', reason: 'first_seal' });
  } else if (previous === null || previous === 'none') {
    checks.push({ name: 'chain', state: 'unknown', reason: 'previous_unavailable' });
  } else {
    const previousSha = await sha256Hex(utf8(canonicalize(previous.body)));
    checks.push(
      previousSha === seal.body.prev_seal_sha256
        ? { name: 'chain', state: 'ok', reason: 'links_previous', facts: { previous_day: previous.day } }
        : { name: 'chain', state: 'failed', reason: 'previous_differs' },
    );
  }

  checks.push(await verifyLedger(seal, bodySha));
  return checks;
}

/**
 * What the checks add up to: every one passed; none failed but the ledger has not digested the day yet (amber: the
 * signature and content are valid, as `ooh-verify` says ok); none failed but one could not be made; or one failed.
 */
export function verdictOf(checks: Check[]): 'ok' | 'ledger_pending' | 'incomplete' | 'failed' {
  if (checks.some((c) => c.state === 'failed')) return 'failed';
  if (checks.every((c) => c.state === 'ok')) return 'ok';
  const open = checks.filter((c) => c.state !== 'ok');
  return open.every((c) => c.name === 'ledger' && c.state === 'pending') ? 'ledger_pending' : 'incomplete';
}

async function verifyLedger(seal: StatsSeal, bodySha: string): Promise<Check> {
  const ledger = seal.ledger;
  if (!ledger) return { name: 'ledger', state: 'pending', reason: 'not_digested' };
  const proof = ledger.proof;
  const fail = (reason: string): Check => ({ name: 'ledger', state: 'failed', reason });
  if (proof.leaf.kind !== 'stats_seal') return fail('leaf_kind');
  // DESIGN.md section 6: a stats_seal leaf carries manifest_sha256 = SHA-256 of the seal body's canonical JSON.
  if (proof.leaf.manifest_sha256 !== bodySha) return fail('leaf_not_this_seal');
  const leafHash = await sha256(utf8(canonicalize(proof.leaf)));
  if (hexEncode(leafHash) !== proof.leaf_sha256) return fail('leaf_hash_differs');
  const root = await rootFromProof({
    leafHash,
    index: proof.index,
    leafCount: proof.leaf_count,
    path: proof.path,
  });
  const expectedRoot = hexDecode(proof.merkle_root);
  if (!root || !expectedRoot || !bytesEqual(root, expectedRoot)) return fail('proof_does_not_reach_root');
  // DESIGN.md section 6: digest = SHA-256 of the canonical JSON of {v:1, day, block_height, leaf_count, merkle_root,
  // prev_digest}, prev_digest being the anchor (the previous block's digest).
  const digest = await sha256Hex(
    utf8(
      canonicalize({
        v: 1,
        day: proof.day,
        block_height: ledger.block_height,
        leaf_count: proof.leaf_count,
        merkle_root: proof.merkle_root,
        prev_digest: proof.anchor_sha256,
      }),
    ),
  );
  if (digest !== proof.digest || digest !== ledger.digest) return fail('digest_differs');
  return {
    name: 'ledger',
    state: 'ok',
    reason: ledger.status,
    facts: { block_height: ledger.block_height, day: ledger.day, digest },
  };
}
