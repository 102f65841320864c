import { addDays, almatyDate, almatyDayEnd, isCalendarDate } from '@ooh/protocol';
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

const ZERO = '0'.repeat(64);

/** What the caller knows of the seal it asked for. */
export interface SealExpectations {
  /**
   * The Asia/Almaty day the caller asked for (the day a page shows, the day in the URL it fetched): the seal must be
   * of that day, signed (body.day), not only labelled (day).
   */
  day?: string;
}

/**
 * Verifies a daily seal. Every field outside `body` is unsigned, so each is held to its signed twin:
 * - signature: the CMS signature and its certificate chain up to one of `roots`, every certificate valid at signed_at,
 *   signed by the authority's seal signer (signer-role.ts: not the envelope signer); the signingTime attribute
 *   (DESIGN.md section 4 signs one) is signed_at; and signed_at is after the Almaty day body.day ended (DESIGN.md
 *   section 6: a seal is "made once, after D ends"). Reasons: a VerificationError code, signed_at_differs,
 *   signed_before_day_end;
 * - content: the signed content is exactly the canonical JSON of body, and body.day (signed) is the document's day
 *   and the day `expected` names (another_day: a genuine seal shown under another day);
 * - chain: prev_seal_sha256 is the SHA-256 of the previous seal's body, whose signed day is the day before body.day,
 *   of the same env (when that seal is given; `previous` null: it could not be read, 'none': there is none to read);
 * - ledger: the seal's stats_seal leaf names this body and signed_at, its hash recomputed is in the block's Merkle
 *   root, the block digest recomputes from its fields, and the block is of a day after body.day (the leaf is recorded
 *   when the seal is made; leaf_before_day_end). Pending while the block is not digested: whether a null ledger is
 *   still pending or withheld depends on the ledger head, which the caller reads (the CLI does).
 */
export async function verifySeal(
  seal: SealDocument,
  roots: readonly Certificate[],
  previous: SealDocument | null | 'none',
  expected: SealExpectations = {},
): Promise<Check[]> {
  const checks: Check[] = [];
  const bodyBytes = canonicalBytes(seal.body);
  const bodySha = await sha256Hex(bodyBytes);
  const signedAt = new Date(seal.signed_at);
  const signedDay = isCalendarDate(seal.body.day) ? seal.body.day : null;

  const cms = await verifyCms(seal.signature, {
    roots,
    at: Number.isNaN(signedAt.getTime()) ? null : signedAt,
    role: 'seal',
  });
  if (!cms.ok) {
    checks.push({
      name: 'signature',
      state: 'failed',
      reason: cms.error.code,
      facts: { detail: cms.error.message },
    });
  } else if (!cms.signingTime || cms.signingTime.getTime() !== signedAt.getTime()) {
    // signed_at is outside the signature: its twin is the signed signingTime attribute.
    checks.push({
      name: 'signature',
      state: 'failed',
      reason: 'signed_at_differs',
      facts: { signing_time: cms.signingTime ? cms.signingTime.toISOString() : 'none' },
    });
  } else if (signedDay !== null && signedAt.getTime() < almatyDayEnd(signedDay).getTime()) {
    checks.push({
      name: 'signature',
      state: 'failed',
      reason: 'signed_before_day_end',
      facts: { signed_at: seal.signed_at, day_end: almatyDayEnd(signedDay).toISOString() },
    });
  } else {
    const signer = cms.chain.map((c) => c.subjectCommonName ?? '?').join(' → ');
    checks.push({ name: 'signature', state: 'ok', reason: 'verified', facts: { signer } });
  }
  const dayShown = expected.day ?? seal.day;
  checks.push(
    !cms.ok
      ? { name: 'content', state: 'unknown', reason: 'signature_failed' }
      : !bytesEqual(cms.content, bodyBytes)
        ? { name: 'content', state: 'failed', reason: 'content_differs' }
        : signedDay === null || seal.body.day !== seal.day || seal.body.day !== dayShown
          ? {
              name: 'content',
              state: 'failed',
              reason: 'another_day',
              facts: { day: dayShown, body_day: String(seal.body.day), document_day: String(seal.day) },
            }
          : { name: 'content', state: 'ok', reason: 'matches', facts: { body_sha256: bodySha } },
  );
  checks.push(await chainCheck(seal, previous));
  checks.push(await ledgerCheck(seal, bodySha));
  return checks;
}

async function chainCheck(seal: SealDocument, previous: SealDocument | null | 'none'): Promise<Check> {
  if (seal.body.prev_seal_sha256 === ZERO) return { name: 'chain', state: 'ok', reason: 'first_seal' };
  if (previous === null || previous === 'none')
    return { name: 'chain', state: 'unknown', reason: 'previous_unavailable' };
  // The signed days: the previous body's day (covered by prev_seal_sha256) is the day before this body's.
  if (
    !isCalendarDate(seal.body.day) ||
    previous.body.day !== addDays(seal.body.day, -1) ||
    previous.day !== previous.body.day
  )
    return {
      name: 'chain',
      state: 'failed',
      reason: 'previous_not_day_before',
      facts: { previous_day: String(previous.body.day) },
    };
  const previousSha = await sha256Hex(canonicalBytes(previous.body));
  if (previousSha !== seal.body.prev_seal_sha256)
    return {
      name: 'chain',
      state: 'failed',
      reason: 'previous_differs',
      facts: { previous_sha256: previousSha },
    };
  if (previous.body.env !== seal.body.env) return { name: 'chain', state: 'failed', reason: 'env_differs' };
  return {
    name: 'chain',
    state: 'ok',
    reason: 'links_previous',
    facts: { previous_day: previous.body.day },
  };
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
  // The leaf is recorded when the seal is made, after its day ended: in the block of a later day.
  if (!isCalendarDate(seal.body.day) || !(ledger.proof.day > seal.body.day))
    return {
      name: 'ledger',
      state: 'failed',
      reason: 'leaf_before_day_end',
      facts: { block_day: ledger.proof.day, day: String(seal.body.day) },
    };
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

/** A stored batch body as JSON, or null when it is not a JSON object. */
function parseBody(body: Uint8Array): Record<string, unknown> | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    return null;
  }
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
    ? (parsed as Record<string, unknown>)
    : null;
}

/** DESIGN.md section 6: "record_count counts the elements of kind play in the sealed bodies". */
function playsInBody(owner: string, parsed: Record<string, unknown>): number | null {
  // Agent channels send `events`, the CMS channel `records`.
  const list = parsed[owner.startsWith('device:') ? 'events' : 'records'];
  if (!Array.isArray(list)) return null;
  return list.filter((r) => typeof r === 'object' && r !== null && (r as { kind?: unknown }).kind === 'play')
    .length;
}

/**
 * Which field of the body disagrees with the leaf it is sealed under, or null. The spec's batch bodies carry their own
 * number (batch_seq, "taken once") and their sender (device_id on the signed device channel, source_id in the CMS
 * body), so the leaf's seq and owner are the body's own.
 */
function bodyDiffersFromLeaf(line: BatchExportLine, parsed: Record<string, unknown>): string | null {
  if (parsed['batch_seq'] !== line.seq) return 'batch_seq';
  const [kind, id] = line.owner.split(':') as [string, string];
  const field = kind === 'device' ? 'device_id' : 'source_id';
  // device_id is in the body on the signed channel; a body without it names no other sender.
  if (field in parsed && parsed[field] !== id) return field;
  return null;
}

/**
 * Recomputes a seal's body from the export of its day's batches (`ooh-verify --batches`, DESIGN.md section 6): each
 * body against its body_sha256, each batch received on the seal's Almaty day, the leaves in order (receive time, then
 * batch number), the Merkle root over the leaves {batch, owner, seq, body_sha256, received_at}, batch_count, and
 * record_count recounted from the bodies. A batch is in one leaf only: a batch number, an owner's batch_seq or a
 * body listed twice fails (listed_twice: its plays would be counted twice), and each body's own batch_seq and
 * device_id or source_id must be its leaf's seq and owner (body_differs_from_leaf). Lines are read one at a time and the root is streamed, so a day of many
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
  // What each earlier line was listed as: one entry per batch, so a day's export is held once as keys, not bodies.
  const batchNumbers = new Set<number>();
  const ownerSeqs = new Map<string, number>();
  const bodies = new Map<string, number>();
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
    const parsed = parseBody(body);
    const counted = parsed === null ? null : playsInBody(line.owner, parsed);
    if (parsed === null || counted === null) fail(subject, 'body_not_a_batch');
    else {
      plays += counted;
      const field = bodyDiffersFromLeaf(line, parsed);
      if (field !== null)
        fail(subject, 'body_differs_from_leaf', { field, owner: line.owner, seq: line.seq });
    }
    const ownerSeq = `${line.owner} ${line.seq}`;
    const twice = batchNumbers.has(line.batch)
      ? { same: 'batch number', as_batch: line.batch }
      : ownerSeqs.has(ownerSeq)
        ? { same: 'owner and batch_seq', as_batch: ownerSeqs.get(ownerSeq)! }
        : bodies.has(line.body_sha256)
          ? { same: 'body', as_batch: bodies.get(line.body_sha256)! }
          : null;
    if (twice) fail(subject, 'listed_twice', twice);
    batchNumbers.add(line.batch);
    if (!ownerSeqs.has(ownerSeq)) ownerSeqs.set(ownerSeq, line.batch);
    if (!bodies.has(line.body_sha256)) bodies.set(line.body_sha256, line.batch);
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
