import { addDays, almatyDate } from '@ooh/protocol';
import { base64Decode, bytesEqual, hexEncode, sha256, sha256Hex } from './bytes.js';
import { type LedgerInfo, verifyLedgerInfo } from './block.js';
import { verifyCms } from './cms.js';
import { canonicalBytes } from './jcs.js';
import { MerkleRootBuilder } from './merkle.js';
import type { Certificate } from './x509.js';

/*
 * The one verifier of a daily stats seal (DESIGN.md sections 4 and 6), from public data only, recomputing every hash
 * it is given: the console's public pages and the `verify` CLI both report with its Check list. What needs fetching
 * (the previous seal, the ledger blocks, the batch export) is the caller's; these functions check what they are given.
 */

/** A stats seal as the verify host serves it: structurally the spec's StatsSeal (@ooh/protocol), read loosely. */
export interface SealDocument {
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
  ledger: LedgerInfo | null;
}

/** The checks of verifySeal. */
export type SealCheckName = 'signature' | 'content' | 'chain' | 'ledger';
/** The checks of verifySealBatches (`ooh-verify --batches`). */
export type BatchCheckName = 'batches' | 'root' | 'batch_count' | 'record_count';
export type CheckName = SealCheckName | BatchCheckName;
export type CheckState = 'ok' | 'failed' | 'pending' | 'unknown';

/** One check of a seal: the console shows it translated, the CLI prints it. */
export interface Check<Name extends CheckName = SealCheckName> {
  name: Name;
  state: CheckState;
  /**
   * A stable machine word: the reason of a failure or of a pending state (a VerificationError code for a signature
   * that does not verify), or what an ok check established.
   */
  reason: string;
  /** What was checked, when not the seal itself: 'batch 1234', 'batch export line 3'. */
  subject?: string;
  /** Facts to show: signer chain, block height, recomputed values. */
  facts?: Record<string, string | number>;
}

/** The day before a calendar day. */
const ZERO = '0'.repeat(64);

/**
 * Verifies a daily seal:
 * - signature: the CMS signature and its certificate chain up to one of `roots`, every certificate valid at signed_at;
 *   the signingTime attribute, when there is one, is signed_at (reasons: a VerificationError code, signed_at_differs);
 * - content: the signed content is exactly the canonical JSON of body;
 * - chain: prev_seal_sha256 is the SHA-256 of the previous day's seal body, of the same env (when that seal is given;
 *   `previous` null: it could not be read, 'none': there is none to read);
 * - ledger: the seal's stats_seal leaf names this body and signed_at, its hash recomputed is in the block's Merkle
 *   root, and the block digest recomputes from its fields (pending while the day is not digested).
 */
export async function verifySeal(
  seal: SealDocument,
  roots: readonly Certificate[],
  previous: SealDocument | null | 'none',
): Promise<Check[]> {
  const checks: Check[] = [];
  const bodyBytes = canonicalBytes(seal.body);
  const bodySha = await sha256Hex(bodyBytes);
  const signedAt = new Date(seal.signed_at);

  const cms = await verifyCms(seal.signature, {
    roots,
    at: Number.isNaN(signedAt.getTime()) ? null : signedAt,
  });
  if (!cms.ok) {
    checks.push({
      name: 'signature',
      state: 'failed',
      reason: cms.error.code,
      facts: { detail: cms.error.message },
    });
  } else if (cms.signingTime && cms.signingTime.getTime() !== signedAt.getTime()) {
    checks.push({
      name: 'signature',
      state: 'failed',
      reason: 'signed_at_differs',
      facts: { signing_time: cms.signingTime.toISOString() },
    });
  } else {
    const signer = cms.chain.map((c) => c.subjectCommonName ?? '?').join(' → ');
    checks.push({ name: 'signature', state: 'ok', reason: 'verified', facts: { signer } });
  }
  checks.push(
    !cms.ok
      ? { name: 'content', state: 'unknown', reason: 'signature_failed' }
      : bytesEqual(cms.content, bodyBytes)
        ? { name: 'content', state: 'ok', reason: 'matches', facts: { body_sha256: bodySha } }
        : { name: 'content', state: 'failed', reason: 'content_differs' },
  );
  checks.push(await chainCheck(seal, previous));
  checks.push(await ledgerCheck(seal, bodySha));
  return checks;
}

async function chainCheck(seal: SealDocument, previous: SealDocument | null | 'none'): Promise<Check> {
  if (seal.body.prev_seal_sha256 === ZERO) return { name: 'chain', state: 'ok', reason: 'first_seal' };
  if (previous === null || previous === 'none')
    return { name: 'chain', state: 'unknown', reason: 'previous_unavailable' };
  if (previous.day !== addDays(seal.day, -1))
    return { name: 'chain', state: 'failed', reason: 'previous_not_day_before' };
  const previousSha = await sha256Hex(canonicalBytes(previous.body));
  if (previousSha !== seal.body.prev_seal_sha256)
    return {
      name: 'chain',
      state: 'failed',
      reason: 'previous_differs',
      facts: { previous_sha256: previousSha },
    };
  if (previous.body.env !== seal.body.env) return { name: 'chain', state: 'failed', reason: 'env_differs' };
  return { name: 'chain', state: 'ok', reason: 'links_previous', facts: { previous_day: previous.day } };
}

async function ledgerCheck(seal: SealDocument, bodySha: string): Promise<Check> {
  const ledger = seal.ledger;
  if (!ledger) return { name: 'ledger', state: 'pending', reason: 'not_digested' };
  const leaf = ledger.proof.leaf;
  const fail = (reason: string): Check => ({ name: 'ledger', state: 'failed', reason });
  // DESIGN.md section 6: a stats_seal leaf carries manifest_sha256 = SHA-256 of the seal body's canonical JSON,
  // approval_number and revoked_at null, signed_at the seal's.
  if (leaf['kind'] !== 'stats_seal' || leaf['approval_number'] !== null || leaf['revoked_at'] !== null)
    return fail('leaf_kind');
  if (leaf['manifest_sha256'] !== bodySha) return fail('leaf_not_this_seal');
  if (
    typeof leaf['signed_at'] !== 'string' ||
    new Date(leaf['signed_at']).getTime() !== new Date(seal.signed_at).getTime()
  )
    return fail('leaf_signed_at_differs');
  const reason = await verifyLedgerInfo(ledger, { kind: 'stats_seal', manifest_sha256: bodySha });
  if (reason) return fail(reason === 'leaf_not_this_manifest' ? 'leaf_not_this_seal' : reason);
  return {
    name: 'ledger',
    state: 'ok',
    reason: ledger.status,
    facts: { block_height: ledger.block_height, day: ledger.day, digest: ledger.digest },
  };
}

/**
 * What the checks add up to: every one passed; none failed but the ledger has not digested the day yet (amber: the
 * signature and content are valid, as `ooh-verify` says ok); none failed but one could not be made; or one failed.
 */
export function verdictOf(
  checks: readonly Check<CheckName>[],
): 'ok' | 'ledger_pending' | 'incomplete' | 'failed' {
  if (checks.some((c) => c.state === 'failed')) return 'failed';
  if (checks.every((c) => c.state === 'ok')) return 'ok';
  const open = checks.filter((c) => c.state !== 'ok');
  return open.every((c) => c.name === 'ledger' && c.state === 'pending') ? 'ledger_pending' : 'incomplete';
}

/** One line of a day's batch export (GET /api/v1/console/seals/{day}/batches, NDJSON). */
export interface BatchExportLine {
  batch: number;
  owner: string;
  seq: number;
  body_sha256: string;
  received_at: string;
  /** base64 of the stored body. */
  body: string;
}

/** The line when `value` is exactly a batch export line, else null. */
export function parseBatchExportLine(value: unknown): BatchExportLine | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  const keys = Object.keys(v).sort().join(',');
  if (keys !== 'batch,body,body_sha256,owner,received_at,seq') return null;
  if (!Number.isSafeInteger(v['batch']) || !Number.isSafeInteger(v['seq'])) return null;
  if (typeof v['owner'] !== 'string' || !/^(device|source):[0-9a-f-]{36}$/.test(v['owner'])) return null;
  if (typeof v['body_sha256'] !== 'string' || !/^[0-9a-f]{64}$/.test(v['body_sha256'])) return null;
  if (
    typeof v['received_at'] !== 'string' ||
    !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(v['received_at'])
  ) {
    return null;
  }
  if (typeof v['body'] !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v['body'])) return null;
  return v as unknown as BatchExportLine;
}

/** DESIGN.md section 6: "record_count counts the elements of kind play in the sealed bodies". */
function playsInBody(owner: string, body: Uint8Array): number | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  // Agent channels send `events`, the CMS channel `records`.
  const list = (parsed as Record<string, unknown>)[owner.startsWith('device:') ? 'events' : 'records'];
  if (!Array.isArray(list)) return null;
  return list.filter((r) => typeof r === 'object' && r !== null && (r as { kind?: unknown }).kind === 'play')
    .length;
}

/**
 * Recomputes a seal's body from the export of its day's batches (`ooh-verify --batches`, DESIGN.md section 6): each
 * body against its body_sha256, each batch received on the seal's Almaty day, the leaves in order (receive time, then
 * batch number), the Merkle root over the leaves {batch, owner, seq, body_sha256, received_at}, batch_count, and
 * record_count recounted from the bodies. Lines are read one at a time and the root is streamed, so a day of many
 * batches is never held twice. `onLine` is told of each line (a progress line).
 */
export async function verifySealBatches(
  seal: Pick<SealDocument, 'day' | 'body'>,
  lines: Iterable<string> | AsyncIterable<string>,
  onLine: () => void = () => {},
): Promise<Check<BatchCheckName>[]> {
  const checks: Check<BatchCheckName>[] = [];
  const builder = new MerkleRootBuilder();
  let plays = 0;
  let bad = 0;
  let count = 0;
  let previous: BatchExportLine | null = null;
  const fail = (subject: string, reason: string, facts?: Check<BatchCheckName>['facts']) => {
    bad += 1;
    checks.push({ name: 'batches', state: 'failed', reason, subject, ...(facts ? { facts } : {}) });
  };
  for await (const text of lines) {
    if (text.trim() === '') continue;
    count += 1;
    onLine();
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      value = null;
    }
    const line = parseBatchExportLine(value);
    if (!line) {
      fail(`batch export line ${count}`, 'not_a_batch_line');
      // Keep the leaf count honest: a line that cannot be read is still a line of the export.
      continue;
    }
    const subject = `batch ${line.batch}`;
    const body = base64Decode(line.body) ?? new Uint8Array(0);
    const actual = await sha256Hex(body);
    if (actual !== line.body_sha256) fail(subject, 'body_sha256_differs', { body_sha256: actual });
    if (almatyDate(new Date(line.received_at)) !== seal.day) fail(subject, 'received_another_day');
    if (
      previous &&
      (line.received_at < previous.received_at ||
        (line.received_at === previous.received_at && line.batch <= previous.batch))
    ) {
      fail(subject, 'out_of_order', { after_batch: previous.batch });
    }
    const counted = playsInBody(line.owner, body);
    if (counted === null) fail(subject, 'body_not_a_batch');
    else plays += counted;
    await builder.add(
      await sha256(
        canonicalBytes({
          batch: line.batch,
          owner: line.owner,
          seq: line.seq,
          body_sha256: line.body_sha256,
          received_at: line.received_at,
        }),
      ),
    );
    previous = line;
  }
  if (bad === 0)
    checks.push({ name: 'batches', state: 'ok', reason: 'bodies_match', facts: { batches: count } });
  const root = hexEncode(await builder.root());
  checks.push(
    root === seal.body.root
      ? { name: 'root', state: 'ok', reason: 'root_recomputed', facts: { batches: count } }
      : {
          name: 'root',
          state: 'failed',
          reason: 'root_differs',
          facts: { recomputed: root, batches: count },
        },
  );
  checks.push(
    count === seal.body.batch_count
      ? { name: 'batch_count', state: 'ok', reason: 'batch_count_recounted' }
      : { name: 'batch_count', state: 'failed', reason: 'batch_count_differs', facts: { batches: count } },
  );
  checks.push(
    plays === seal.body.record_count
      ? { name: 'record_count', state: 'ok', reason: 'record_count_recounted' }
      : { name: 'record_count', state: 'failed', reason: 'record_count_differs', facts: { plays } },
  );
  return checks;
}
