import {
  canonicalize,
  cmsVerify,
  merkleRoot,
  readCertificate,
  sha256,
  sha256Hex,
  verifyInclusion,
} from '@ooh/crypto';
import type { Progress } from '@ooh/progress';
import {
  addDays,
  almatyDate,
  isCalendarDate,
  type LedgerInfo,
  type StatsSeal,
  StatsSeal as StatsSealSchema,
} from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { type LedgerBlock, LedgerBlock as LedgerBlockSchema, LedgerBlockHead } from '../ledger/schema.js';
import type { Vkey } from '../ledger/note.js';
import { checkCosignedCheckpoint } from './anchoring.js';
import type { PublicSource } from './source.js';

/*
 * The verifier anyone can run (issue "Daily stats seals, the public ledger, and a verifier anyone can run"). From
 * public data only, and recomputing everything with @ooh/crypto rather than trusting any hash it is given:
 *  - the CMS signature of the seal, against a pinned authority root; the signed content is the canonical body;
 *  - the body hash chain back through the previous seals (prev_seal_sha256);
 *  - the ledger proof of the seal's leaf (leaf hash recomputed, sides derived from index and leaf_count, never
 *    trusted: DESIGN.md section 4), the block digest, and the chain of block digests from the head down to the first;
 *  - given an export of the day's batches: each body against its body_sha256, the leaves, root, batch_count and
 *    record_count (DESIGN.md section 6).
 */

export type CheckKind = 'ok' | 'fail' | 'note';

export interface Check {
  kind: CheckKind;
  /** What was checked: 'seal 2026-11-20', 'ledger block 2026-11-21', 'batch 1234', ... */
  subject: string;
  message: string;
}

export interface VerifyReport {
  ok: boolean;
  checks: Check[];
}

export interface VerifySealOptions {
  day: string;
  source: PublicSource;
  /** The pinned authority root certificate (PEM). */
  rootPem: string;
  /**
   * pinned (default): the caller's own copy of the root. fetched: the verify host's, which proves nothing against a
   * dishonest server; the checks then never say "pinned".
   */
  rootOrigin?: 'pinned' | 'fetched';
  /** NDJSON export of the day's batches (GET /api/v1/console/seals/{day}/batches), as text. */
  batchesNdjson?: string;
  /** How many previous seals to follow back (default: all, to the first seal). */
  chainDepth?: number;
  /** Fail, rather than note, when the seal's ledger block is not digested yet. */
  requireLedger?: boolean;
  /** Where the long steps report how far they are (the command line's progress line). */
  progress?: VerifyProgress;
  /**
   * Witness cosignature keys the reader pins (c2sp.org/signed-note vkeys of type 0x04; issue 23). Their
   * cosignatures on a checkpoint at or above the seal's block are checked.
   */
  witnesses?: Vkey[];
  /** Fail unless at least this many pinned witnesses cosigned such a checkpoint (default: a note, not a failure). */
  requireAnchored?: number;
  /**
   * The ledger's checkpoint key the reader pins (a vkey of type 0x01; `--ledger-key`): every checkpoint read must be
   * signed by it, and a checkpoint at or above the seal's block must be found.
   */
  ledgerKey?: Vkey;
  /** The verifier's clock (milliseconds; default Date.now()): cosignatures dated after it, beyond a skew, are refused. */
  now?: number;
}

export type VerifyProgress = Pick<Progress, 'phase' | 'tick'>;

const NO_PROGRESS: VerifyProgress = { phase: () => {}, tick: () => {} };

const ZERO_SHA256 = '0'.repeat(64);

class Checks {
  readonly list: Check[] = [];
  ok(subject: string, message: string): void {
    this.list.push({ kind: 'ok', subject, message });
  }
  fail(subject: string, message: string): void {
    this.list.push({ kind: 'fail', subject, message });
  }
  note(subject: string, message: string): void {
    this.list.push({ kind: 'note', subject, message });
  }
  /** Records a check and returns whether it passed. */
  expect(condition: boolean, subject: string, passed: string, failed: string): boolean {
    if (condition) this.ok(subject, passed);
    else this.fail(subject, failed);
    return condition;
  }
  get passed(): boolean {
    return this.list.every((c) => c.kind !== 'fail');
  }
}

async function getJson(source: PublicSource, path: string): Promise<{ status: number; value: unknown }> {
  const { status, body } = await source.get(path);
  if (status !== 200) return { status, value: null };
  try {
    return { status, value: JSON.parse(body.toString('utf8')) as unknown };
  } catch {
    return { status: -1, value: null };
  }
}

async function fetchSeal(source: PublicSource, day: string, checks: Checks): Promise<StatsSeal | null> {
  const subject = `seal ${day}`;
  const { status, value } = await getJson(source, `/v1/stats-seals/${day}`);
  if (status === 404) {
    checks.fail(subject, `not found at ${source.origin}/v1/stats-seals/${day}`);
    return null;
  }
  if (status !== 200) {
    checks.fail(subject, status === -1 ? 'the answer is not JSON' : `answered HTTP ${status}`);
    return null;
  }
  // Parse, don't trust: nothing is read from a document that is not a StatsSeal.
  if (!Value.Check(StatsSealSchema, value)) {
    const first = [...Value.Errors(StatsSealSchema, value)][0];
    checks.fail(
      subject,
      `not a StatsSeal document (${first ? `${first.path}: ${first.message}` : 'invalid'})`,
    );
    return null;
  }
  if (value.day !== day || value.body.day !== day) {
    checks.fail(subject, `the document is for day ${value.day} (body.day ${value.body.day}), not ${day}`);
    return null;
  }
  return value;
}

/** How the checks name the root they verify against. */
const rootName = (options: VerifySealOptions) =>
  options.rootOrigin === 'fetched' ? 'the root fetched from the server (not pinned)' : 'the pinned root';

/** CMS signature against the pinned root; the signed content must be exactly the canonical JSON of body. */
async function checkSignature(seal: StatsSeal, options: VerifySealOptions, checks: Checks): Promise<boolean> {
  const subject = `seal ${seal.day}`;
  const signedAt = new Date(seal.signed_at);
  const root = rootName(options);
  const result = await cmsVerify(Buffer.from(seal.signature, 'base64'), {
    trustedRootsPem: [options.rootPem],
    at: signedAt,
  });
  if (!result.ok) {
    checks.fail(subject, `CMS signature does not verify against ${root}: ${result.reason}`);
    return false;
  }
  let signer = 'the signer';
  try {
    signer = readCertificate(result.signerCertificatePem).subject;
  } catch {
    // the subject is for the message only
  }
  checks.ok(subject, `CMS signature verifies against ${root} (signer ${signer})`);
  const canonical = canonicalize(seal.body);
  const ok = checks.expect(
    Buffer.from(result.content).toString('utf8') === canonical,
    subject,
    'the signed content is the canonical JSON of body',
    'the signed content differs from the canonical JSON of body: the body shown is not the body signed',
  );
  if (result.signingTime && result.signingTime.getTime() !== signedAt.getTime()) {
    checks.fail(
      subject,
      `signed_at ${seal.signed_at} differs from the signing time ${result.signingTime.toISOString()}`,
    );
    return false;
  }
  return ok;
}

async function checkChain(seal: StatsSeal, options: VerifySealOptions, checks: Checks): Promise<void> {
  let current = seal;
  let followed = 0;
  const progress = options.progress ?? NO_PROGRESS;
  // The first seal is not known in advance: a count, unless --depth bounds the walk.
  progress.phase('following the seal chain', {
    total: options.chainDepth,
    unit: 'seals',
    detail: () => current.day,
  });
  for (;;) {
    const prev = current.body.prev_seal_sha256;
    if (prev === ZERO_SHA256) {
      checks.ok(
        'seal chain',
        `${current.day} is the first seal (prev_seal_sha256 is 64 zeros); ${followed} previous seal(s) checked`,
      );
      return;
    }
    if (options.chainDepth !== undefined && followed >= options.chainDepth) {
      checks.note('seal chain', `stopped after ${followed} previous seal(s) (--depth)`);
      return;
    }
    const day = addDays(current.day, -1);
    const previous = await fetchSeal(options.source, day, checks);
    if (!previous) {
      checks.fail('seal chain', `seal ${current.day} names a previous seal, but seal ${day} cannot be read`);
      return;
    }
    await checkSignature(previous, options, checks);
    const actual = sha256Hex(canonicalize(previous.body));
    checks.expect(
      actual === prev,
      `seal ${day}`,
      `SHA-256 of its body is the prev_seal_sha256 of seal ${current.day}`,
      `SHA-256 of its body ${actual} differs from prev_seal_sha256 ${prev} of seal ${current.day}`,
    );
    if (previous.body.env !== seal.body.env) {
      checks.fail(`seal ${day}`, `env ${previous.body.env} differs from ${seal.body.env}`);
    }
    current = previous;
    followed += 1;
    progress.tick();
  }
}

function blockDigest(b: {
  day: string;
  block_height: number;
  leaf_count: number;
  merkle_root: string;
  prev_digest: string;
}) {
  return sha256Hex(
    canonicalize({
      v: 1,
      day: b.day,
      block_height: b.block_height,
      leaf_count: b.leaf_count,
      merkle_root: b.merkle_root,
      prev_digest: b.prev_digest,
    }),
  );
}

async function fetchBlock(source: PublicSource, day: string, checks: Checks): Promise<LedgerBlock | null> {
  const subject = `ledger block ${day}`;
  const { status, value } = await getJson(source, `/v1/ledger/blocks/${day}`);
  if (status !== 200) {
    checks.fail(subject, status === 404 ? 'not found' : `answered HTTP ${status}`);
    return null;
  }
  if (!Value.Check(LedgerBlockSchema, value) || value.day !== day) {
    checks.fail(subject, 'not a ledger block document for that day');
    return null;
  }
  return value;
}

/** A block's own consistency: every leaf hash, the merkle root over them, the leaf count and the digest. */
function checkBlock(block: LedgerBlock, checks: Checks): boolean {
  const subject = `ledger block ${block.day}`;
  let ok = true;
  block.leaves.forEach((entry, index) => {
    const recomputed = sha256Hex(canonicalize(entry.leaf));
    if (entry.index !== index || recomputed !== entry.leaf_sha256) {
      ok = false;
      checks.fail(
        `ledger leaf ${block.day}#${index}`,
        `leaf_sha256 ${entry.leaf_sha256} is not the SHA-256 of its leaf (${recomputed}) or its index is wrong`,
      );
    }
  });
  const root = Buffer.from(merkleRoot(block.leaves.map((e) => sha256(canonicalize(e.leaf))))).toString('hex');
  ok =
    checks.expect(
      block.leaves.length === block.leaf_count && root === block.merkle_root,
      subject,
      `merkle_root recomputed from its ${block.leaf_count} leaves`,
      `merkle_root ${block.merkle_root} (leaf_count ${block.leaf_count}) differs from ${root} recomputed from the ` +
        `${block.leaves.length} leaves it lists: a leaf changed after the block was digested`,
    ) && ok;
  const digest = blockDigest({ ...block, prev_digest: block.anchor_sha256 });
  ok =
    checks.expect(
      digest === block.digest,
      subject,
      'digest recomputed from {v, day, block_height, leaf_count, merkle_root, prev_digest}',
      `digest ${block.digest} differs from the recomputed ${digest}`,
    ) && ok;
  return ok;
}

async function checkLedger(seal: StatsSeal, options: VerifySealOptions, checks: Checks): Promise<void> {
  const ledger: LedgerInfo | null = seal.ledger;
  if (!ledger) {
    const message = 'ledger is null: the block holding the seal is digested the day after the seal was made';
    if (options.requireLedger) checks.fail('ledger', message);
    else checks.note('ledger', `${message}; run again later for the ledger proof`);
    return;
  }
  const { proof } = ledger;
  const subject = `ledger leaf of seal ${seal.day} (block ${proof.day}, index ${proof.index})`;
  // The leaf must say what it stands for: this seal body, made at signed_at.
  const bodySha256 = sha256Hex(canonicalize(seal.body));
  checks.expect(
    proof.leaf.kind === 'stats_seal' && proof.leaf.approval_number === null && proof.leaf.revoked_at === null,
    subject,
    'kind stats_seal',
    `kind ${proof.leaf.kind}, approval_number ${String(proof.leaf.approval_number)}: not a stats_seal leaf`,
  );
  checks.expect(
    proof.leaf.manifest_sha256 === bodySha256,
    subject,
    'manifest_sha256 is the SHA-256 of the seal body',
    `manifest_sha256 ${proof.leaf.manifest_sha256} differs from the SHA-256 of the seal body ${bodySha256}`,
  );
  checks.expect(
    new Date(proof.leaf.signed_at).getTime() === new Date(seal.signed_at).getTime(),
    subject,
    'signed_at is the seal signed_at',
    `signed_at ${proof.leaf.signed_at} differs from the seal's ${seal.signed_at}`,
  );
  const leafHash = sha256(canonicalize(proof.leaf));
  checks.expect(
    Buffer.from(leafHash).toString('hex') === proof.leaf_sha256,
    subject,
    'leaf_sha256 recomputed from the leaf',
    `leaf_sha256 ${proof.leaf_sha256} is not the SHA-256 of the leaf`,
  );
  checks.expect(
    verifyInclusion({
      leafHash,
      index: proof.index,
      leafCount: proof.leaf_count,
      path: proof.path,
      root: Buffer.from(proof.merkle_root, 'hex'),
    }),
    subject,
    `inclusion path (sides derived from index ${proof.index} of ${proof.leaf_count}) leads to merkle_root`,
    'the inclusion path does not lead to merkle_root (or its sides or length disagree with index and leaf_count)',
  );
  const digest = blockDigest({
    day: proof.day,
    block_height: ledger.block_height,
    leaf_count: proof.leaf_count,
    merkle_root: proof.merkle_root,
    prev_digest: proof.anchor_sha256,
  });
  checks.expect(
    digest === proof.digest && ledger.digest === proof.digest && ledger.day === proof.day,
    subject,
    'block digest recomputed from the proof',
    `block digest ${proof.digest} (ledger.digest ${ledger.digest}) differs from the recomputed ${digest}`,
  );

  // The block itself, and the chain of digests from the head down to the first block.
  options.progress?.phase('reading the ledger');
  const block = await fetchBlock(options.source, proof.day, checks);
  if (!block) return;
  checkBlock(block, checks);
  const listed = block.leaves[proof.index];
  checks.expect(
    block.block_height === ledger.block_height &&
      block.digest === proof.digest &&
      block.merkle_root === proof.merkle_root &&
      block.anchor_sha256 === proof.anchor_sha256 &&
      block.leaf_count === proof.leaf_count &&
      listed !== undefined &&
      listed.leaf_sha256 === proof.leaf_sha256,
    `ledger block ${block.day}`,
    `holds the seal's leaf at index ${proof.index}; height, root, anchor and digest match the proof`,
    "the published block disagrees with the seal's proof (height, root, anchor, digest or the leaf at the index)",
  );
  const digests = await checkBlockChain(block, options, checks);
  await checkAnchoring(block, digests, options, checks);
}

/**
 * Issue 23: the seal's block is anchored for this reader when a checkpoint at or above it (the one that anchored it,
 * its own, or the newest) carries cosignatures of at least the required number of pinned witnesses, and that
 * checkpoint's root is the digest of the block at its size on the chain just walked (which runs through the seal's
 * block). Cosignatures from keys the reader did not pin are ignored; one from a pinned key that does not verify fails.
 */
async function checkAnchoring(
  block: LedgerBlock,
  digests: Map<number, string> | null,
  options: VerifySealOptions,
  checks: Checks,
): Promise<void> {
  const witnesses = options.witnesses ?? [];
  const required = options.requireAnchored ?? 0;
  const ledgerKey = options.ledgerKey;
  const subject = `ledger anchoring of block ${block.day}`;
  if (witnesses.length === 0 && !ledgerKey) {
    checks.note(
      subject,
      `status ${block.status}; no witness key pinned (--witness), so no cosignature was checked`,
    );
    return;
  }
  if (!digests) {
    checks.fail(subject, 'the chain of block digests does not hold, so no checkpoint can be matched to it');
    return;
  }
  const candidates = [
    ...(block.anchored_by ? [`/v1/ledger/checkpoints/${block.anchored_by}`] : []),
    `/v1/ledger/checkpoints/${block.block_height}`,
    '/v1/ledger/checkpoint',
  ];
  let best: { size: number; names: string[] } | null = null;
  for (const path of new Set(candidates)) {
    const { status, body } = await options.source.get(path);
    if (status !== 200) continue;
    const result = checkCosignedCheckpoint(body.toString('utf8'), witnesses, {
      ...(ledgerKey ? { ledgerKey } : {}),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
    if ('error' in result) {
      checks.fail(subject, `${path}: ${result.error}`);
      continue;
    }
    for (const bad of result.invalid)
      checks.fail(subject, `${path}: the cosignature of ${bad.name} is refused (${bad.reason})`);
    if (result.invalid.length > 0) continue;
    const size = result.checkpoint.size;
    const digest = digests.get(size);
    if (size < block.block_height || digest === undefined) continue;
    if (digest !== result.checkpoint.rootHash.toString('hex')) {
      checks.fail(
        subject,
        `${path}: the checkpoint of size ${size} has root ${result.checkpoint.rootHash.toString('hex')}, not the digest of block ${size} on the chain (${digest})`,
      );
      continue;
    }
    if (!best || result.cosigned.length > best.names.length) best = { size, names: result.cosigned };
    if (result.cosigned.length >= Math.max(required, 1) || witnesses.length === 0) break;
  }
  if (witnesses.length === 0) {
    // --ledger-key alone: the checkpoint is the ledger's, on the chain; no cosignature is asked for.
    if (best) {
      checks.ok(
        subject,
        `checkpoint ${best.size} (root = digest of block ${best.size}, at or above height ${block.block_height}) is signed by the pinned ledger key; no witness key pinned (--witness), so no cosignature was checked`,
      );
    } else {
      checks.fail(
        subject,
        `no checkpoint at or above height ${block.block_height} signed by the pinned ledger key was found`,
      );
    }
    return;
  }
  const count = best?.names.length ?? 0;
  const quorum = Math.max(required, 1);
  if (best && count >= quorum) {
    checks.ok(
      subject,
      `checkpoint ${best.size} (root = digest of block ${best.size}, at or above height ${block.block_height}) is cosigned by ${count} pinned witness(es): ${best.names.join(', ')}`,
    );
    return;
  }
  const message = `no checkpoint at or above height ${block.block_height} carries ${quorum} cosignature(s) of the pinned witnesses (best: ${count})`;
  if (required > 0) checks.fail(subject, message);
  else checks.note(subject, `${message}; --require-anchored makes this a failure`);
}

/**
 * Walks the chain of block digests from the head down to the first block. Returns the digest of every block by
 * height when the chain holds, else null (the failure is recorded).
 */
async function checkBlockChain(
  sealBlock: LedgerBlock,
  options: VerifySealOptions,
  checks: Checks,
): Promise<Map<number, string> | null> {
  const { status, value } = await getJson(options.source, '/v1/ledger/head');
  if (status !== 200 || !Value.Check(LedgerBlockHead, value)) {
    checks.fail('ledger head', status === 200 ? 'not a ledger head document' : `answered HTTP ${status}`);
    return null;
  }
  if (value.block_height < sealBlock.block_height) {
    checks.fail(
      'ledger head',
      `head height ${value.block_height} is below the seal's block height ${sealBlock.block_height}`,
    );
    return null;
  }
  // Walk from the head down to the first block: each block's anchor is the digest of the one before it.
  let upper: LedgerBlock | null =
    value.day === sealBlock.day ? sealBlock : await fetchBlock(options.source, value.day, checks);
  if (!upper) return null;
  if (upper.digest !== value.digest) {
    checks.fail('ledger head', `head digest ${value.digest} differs from block ${value.day}`);
    return null;
  }
  const digests = new Map<number, string>([[upper.block_height, upper.digest]]);
  let passedSealBlock = upper.day === sealBlock.day;
  let walked = 1;
  if (upper !== sealBlock) checkBlock(upper, checks);
  const progress = options.progress ?? NO_PROGRESS;
  progress.phase('walking the ledger chain', { total: upper.block_height, unit: 'blocks' });
  progress.tick();
  while (upper.block_height > 1) {
    const day = addDays(upper.day, -1);
    const lower = day === sealBlock.day ? sealBlock : await fetchBlock(options.source, day, checks);
    if (!lower) return null;
    if (lower !== sealBlock) checkBlock(lower, checks);
    if (lower.day === sealBlock.day) {
      passedSealBlock = true;
      if (lower.digest !== sealBlock.digest) checks.fail(`ledger block ${day}`, 'differs between two reads');
    }
    if (lower.block_height !== upper.block_height - 1 || upper.anchor_sha256 !== lower.digest) {
      checks.fail(
        `ledger block ${upper.day}`,
        `anchor_sha256 ${upper.anchor_sha256} (height ${upper.block_height}) is not the digest of block ${day} ` +
          `(${lower.digest}, height ${lower.block_height})`,
      );
      return null;
    }
    upper = lower;
    digests.set(upper.block_height, upper.digest);
    walked += 1;
    progress.tick();
  }
  if (upper.anchor_sha256 !== ZERO_SHA256) {
    checks.fail(`ledger block ${upper.day}`, 'the first block does not anchor to 64 zeros');
    return null;
  }
  return checks.expect(
    passedSealBlock,
    'ledger chain',
    `${walked} block digest(s) chain from the head (${value.day}, height ${value.block_height}) down to the first block, through the seal's block ${sealBlock.day}`,
    `the seal's block ${sealBlock.day} is not on the chain from the head`,
  )
    ? digests
    : null;
}

interface ExportLine {
  batch: number;
  owner: string;
  seq: number;
  body_sha256: string;
  received_at: string;
  body: string;
}

function parseExportLine(value: unknown): ExportLine | null {
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
  return v as unknown as ExportLine;
}

/**
 * Why `ndjson` is not an export of a day's batches at all (another file given to --batches by mistake), or null when
 * it is one, or empty (a day without batches). Decided on the first line: a file whose first line is a batch line is
 * an export, and any later line that is not is reported as a failed check, as a changed export would be.
 */
export function notABatchExport(ndjson: string): string | null {
  const first = ndjson.split('\n').find((l) => l.trim() !== '');
  if (first === undefined) return null;
  let value: unknown;
  try {
    value = JSON.parse(first);
  } catch {
    return 'its first line is not JSON';
  }
  if (parseExportLine(value) !== null) return null;
  return 'its first line is not a batch line {batch, owner, seq, body_sha256, received_at, body}';
}

/** DESIGN.md section 6: "record_count counts the elements of kind play in the sealed bodies". */
function playsInBody(owner: string, body: Buffer): number | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
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

function checkBatches(seal: StatsSeal, ndjson: string, checks: Checks, progress: VerifyProgress): void {
  const lines = ndjson.split('\n').filter((l) => l.trim() !== '');
  progress.phase('checking the exported batches', { total: lines.length, unit: 'batches' });
  const leafHashes: Uint8Array[] = [];
  let plays = 0;
  let bad = 0;
  let previous: ExportLine | null = null;
  lines.forEach((text, index) => {
    progress.tick();
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      value = null;
    }
    const line = parseExportLine(value);
    if (!line) {
      bad += 1;
      checks.fail(
        `batch export line ${index + 1}`,
        'not a batch line {batch, owner, seq, body_sha256, received_at, body}',
      );
      return;
    }
    const subject = `batch ${line.batch}`;
    const body = Buffer.from(line.body, 'base64');
    const actual = sha256Hex(body);
    if (actual !== line.body_sha256) {
      bad += 1;
      checks.fail(
        subject,
        `its body does not match its body_sha256 (${line.body_sha256}; the body hashes to ${actual})`,
      );
    }
    if (almatyDate(new Date(line.received_at)) !== seal.day) {
      bad += 1;
      checks.fail(subject, `received_at ${line.received_at} is not on the Almaty day ${seal.day}`);
    }
    if (
      previous &&
      (line.received_at < previous.received_at ||
        (line.received_at === previous.received_at && line.batch <= previous.batch))
    ) {
      bad += 1;
      checks.fail(
        subject,
        `out of order after batch ${previous.batch} (leaves go by receive time, then batch number)`,
      );
    }
    const count = playsInBody(line.owner, body);
    if (count === null) {
      bad += 1;
      checks.fail(subject, 'its body is not a batch with an events or records array');
    } else {
      plays += count;
    }
    leafHashes.push(
      sha256(
        canonicalize({
          batch: line.batch,
          owner: line.owner,
          seq: line.seq,
          body_sha256: line.body_sha256,
          received_at: line.received_at,
        }),
      ),
    );
    previous = line;
  });
  if (bad === 0)
    checks.ok(
      'batch export',
      `${lines.length} batch line(s): every body matches its body_sha256, in leaf order`,
    );
  const root = Buffer.from(merkleRoot(leafHashes)).toString('hex');
  checks.expect(
    root === seal.body.root,
    `seal ${seal.day}`,
    `root recomputed from the ${lines.length} exported batches`,
    `root ${seal.body.root} differs from ${root} recomputed from the ${lines.length} exported batches: a stored batch changed`,
  );
  checks.expect(
    lines.length === seal.body.batch_count,
    `seal ${seal.day}`,
    `batch_count ${seal.body.batch_count} recounted`,
    `batch_count ${seal.body.batch_count} differs from the ${lines.length} exported batches`,
  );
  checks.expect(
    plays === seal.body.record_count,
    `seal ${seal.day}`,
    `record_count ${seal.body.record_count} recounted from the bodies`,
    `record_count ${seal.body.record_count} differs from the ${plays} plays counted in the exported bodies`,
  );
}

/** Checks the seal of `day` and everything it rests on. Never throws for bad data: a failed check says what. */
export async function verifySeal(options: VerifySealOptions): Promise<VerifyReport> {
  const checks = new Checks();
  if (!isCalendarDate(options.day)) {
    checks.fail('arguments', `${options.day} is not a calendar day YYYY-MM-DD`);
    return { ok: false, checks: checks.list };
  }
  options.progress?.phase(`reading the seal of ${options.day}`);
  const seal = await fetchSeal(options.source, options.day, checks);
  if (seal) {
    checks.ok(
      `seal ${seal.day}`,
      `read from ${options.source.origin}: ${seal.body.batch_count} batch(es), ${seal.body.record_count} play record(s), env ${seal.body.env}`,
    );
    await checkSignature(seal, options, checks);
    await checkChain(seal, options, checks);
    await checkLedger(seal, options, checks);
    if (options.batchesNdjson !== undefined) {
      checkBatches(seal, options.batchesNdjson, checks, options.progress ?? NO_PROGRESS);
    }
  }
  return { ok: checks.passed, checks: checks.list };
}
