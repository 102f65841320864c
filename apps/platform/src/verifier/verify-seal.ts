import type { Progress } from '@ooh/progress';
import {
  addDays,
  almatyDate,
  isCalendarDate,
  type StatsSeal,
  StatsSeal as StatsSealSchema,
} from '@ooh/protocol';
import {
  type AnchorSource,
  type Block,
  type BlockCheck,
  type BlockFields,
  blockDigest,
  type Certificate,
  type Check,
  type CheckName,
  parseBatchExportLine,
  parsePems,
  parseVkey,
  type Vkey,
  verifyAnchoring,
  verifyBlock,
  verifySealBatches,
  verifySeal as verifySealDocument,
} from '@ooh/verify';
import { Value } from '@sinclair/typebox/value';
import {
  type LedgerBlock,
  LedgerBlock as LedgerBlockSchema,
  LedgerBlockHead,
  type LedgerBlockHead as LedgerBlockHeadValue,
} from '../ledger/schema.js';
import type { PublicSource } from './source.js';

/*
 * The verifier anyone can run (issue "Daily stats seals, the public ledger, and a verifier anyone can run"), from
 * public data only. Every rule is @ooh/verify's, the one the console's public pages apply (issue 18): the seal's
 * signature, content and link to the previous seal (verifySeal), the seal's ledger proof, each ledger block (leaf
 * hashes, Merkle root, digest, anchor: verifyBlock), the anchoring of the seal's block (verifyAnchoring) and the
 * recomputation from a day's batch export (verifySealBatches). This file fetches what they check, walks the chains
 * (the previous seals, the blocks from the head down to the first) and reports with the package's Check; the CLI
 * words each check (describeCheck).
 */

/** A check as @ooh/verify reports it; `subject` names what was checked ('seal 2026-11-19', 'ledger block ...'). */
export type SealCheck = Check<CheckName>;

export interface VerifyReport {
  /** No check failed. */
  ok: boolean;
  checks: SealCheck[];
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
   * Witness cosignature keys the reader pins (c2sp.org/signed-note vkeys of type 0x04; issue 23), as vkey text or
   * a parsed vkey. Their cosignatures on a checkpoint at or above the seal's block are checked.
   */
  witnesses?: readonly (string | { text: string })[];
  /** Fail unless at least this many pinned witnesses cosigned such a checkpoint (default: a note, not a failure). */
  requireAnchored?: number;
  /** The ledger's checkpoint key the reader pins (a vkey of type 0x01; `--ledger-key`). */
  ledgerKey?: string | { text: string };
  /** The verifier's clock (milliseconds; default Date.now()): cosignatures dated after it, beyond a skew, are refused. */
  now?: number;
}

export type VerifyProgress = Pick<Progress, 'phase' | 'tick'>;

const NO_PROGRESS: VerifyProgress = { phase: () => {}, tick: () => {} };

const ZERO_SHA256 = '0'.repeat(64);

/** The checks of one run, in order. */
export class Checks {
  readonly list: SealCheck[] = [];
  add(check: SealCheck): SealCheck {
    this.list.push(check);
    return check;
  }
  get passed(): boolean {
    return this.list.every((c) => c.state !== 'failed');
  }
}

export async function getJson(
  source: PublicSource,
  path: string,
): Promise<{ status: number; value: unknown }> {
  const { status, body } = await source.get(path);
  if (status !== 200) return { status, value: null };
  try {
    return { status, value: JSON.parse(body.toString('utf8')) as unknown };
  } catch {
    return { status: -1, value: null };
  }
}

/** The seal of `day` as the verify host serves it (the 'content' check of a document that cannot be read). */
async function fetchSeal(source: PublicSource, day: string, checks: Checks): Promise<StatsSeal | null> {
  const subject = `seal ${day}`;
  const failed = (reason: string, facts: Record<string, string | number>) =>
    checks.add({ name: 'content', state: 'failed', reason, subject, facts }) && null;
  const { status, value } = await getJson(source, `/v1/stats-seals/${day}`);
  if (status === 404) return failed('seal_not_found', { url: `${source.origin}/v1/stats-seals/${day}` });
  if (status !== 200) return failed(status === -1 ? 'not_json' : 'http_status', { status });
  // Parse, don't trust: nothing is read from a document that is not a StatsSeal.
  if (!Value.Check(StatsSealSchema, value)) {
    const first = [...Value.Errors(StatsSealSchema, value)][0];
    return failed('not_a_seal', { detail: first ? `${first.path}: ${first.message}` : 'invalid' });
  }
  if (value.day !== day || value.body.day !== day)
    return failed('another_day', { day: value.day, body_day: value.body.day });
  return value;
}

/**
 * The seal and the seals before it: @ooh/verify's verifySeal for each, with the one before it, so every seal's
 * signature and content are checked once and every link of prev_seal_sha256. Returns the ledger check of `seal`.
 */
async function checkSealChain(
  seal: StatsSeal,
  roots: Certificate[],
  options: VerifySealOptions,
  checks: Checks,
): Promise<SealCheck> {
  let current = seal;
  let followed = 0;
  let ledger: SealCheck | null = null;
  const progress = options.progress ?? NO_PROGRESS;
  // The first seal is not known in advance: a count, unless --depth bounds the walk.
  progress.phase('following the seal chain', {
    total: options.chainDepth,
    unit: 'seals',
    detail: () => current.day,
  });
  for (;;) {
    const first = current.body.prev_seal_sha256 === ZERO_SHA256;
    const stop = !first && options.chainDepth !== undefined && followed >= options.chainDepth;
    const day = addDays(current.day, -1);
    const previous = first || stop ? null : await fetchSeal(options.source, day, checks);
    const own = await verifySealDocument(current, roots, previous ?? 'none', { day: current.day });
    const subject = `seal ${current.day}`;
    for (const check of own) {
      if (check.name === 'ledger') {
        ledger ??= { ...check, subject: 'ledger' };
      } else if (check.name === 'chain') {
        if (first) {
          checks.add({ ...check, subject: 'seal chain', facts: { day: current.day, followed } });
        } else if (stop) {
          checks.add({
            name: 'chain',
            state: 'unknown',
            reason: 'depth',
            subject: 'seal chain',
            facts: { followed },
          });
        } else if (!previous) {
          checks.add({
            name: 'chain',
            state: 'failed',
            reason: 'previous_unreadable',
            subject: 'seal chain',
            facts: { day: current.day, previous_day: day },
          });
        } else {
          checks.add({
            ...check,
            subject: `seal ${day}`,
            facts: { ...check.facts, seal: current.day, prev_seal_sha256: current.body.prev_seal_sha256 },
          });
        }
      } else {
        checks.add({ ...check, subject, facts: { ...check.facts, signed_at: current.signed_at } });
      }
    }
    if (!previous) return ledger!;
    current = previous;
    followed += 1;
    progress.tick();
  }
}

export async function fetchBlock(
  source: PublicSource,
  day: string,
  checks: Checks,
): Promise<LedgerBlock | null> {
  const subject = `ledger block ${day}`;
  const { status, value } = await getJson(source, `/v1/ledger/blocks/${day}`);
  if (status !== 200) {
    checks.add({ name: 'ledger', state: 'failed', reason: 'block_unreadable', subject, facts: { status } });
    return null;
  }
  if (!Value.Check(LedgerBlockSchema, value) || value.day !== day) {
    checks.add({ name: 'ledger', state: 'failed', reason: 'not_a_block', subject });
    return null;
  }
  return value;
}

/** @ooh/verify's block checks, as the report's checks; true when none failed. */
async function checkBlock(
  block: LedgerBlock,
  previous: LedgerBlock | 'none' | null,
  checks: Checks,
): Promise<{ ok: boolean; linked: boolean }> {
  const subject = `ledger block ${block.day}`;
  // previous null: the block in itself, without its link (reported by the block above).
  const found = (await verifyBlock(block as Block, previous)).filter(
    (c) => previous !== null || c.name !== 'link',
  );
  const facts = (check: BlockCheck): Record<string, string | number> => {
    switch (check.name) {
      case 'leaves':
        return { leaf_count: block.leaf_count, listed: block.leaves.length };
      case 'root':
        return { merkle_root: block.merkle_root, leaf_count: block.leaf_count, listed: block.leaves.length };
      case 'digest':
        return { digest: block.digest };
      case 'link':
        return {
          anchor_sha256: block.anchor_sha256,
          block_height: block.block_height,
          ...(previous === 'none' || previous === null
            ? {}
            : {
                previous_day: previous.day,
                previous_digest: previous.digest,
                previous_height: previous.block_height,
              }),
        };
    }
  };
  for (const check of found) {
    const added: SealCheck = {
      name: 'ledger',
      state: check.state,
      reason: check.reason,
      subject,
      facts: { ...facts(check), ...check.facts },
    };
    if (check.name === 'digest' && check.state === 'failed')
      added.facts!['recomputed'] = await blockDigest(block);
    checks.add(added);
  }
  return {
    ok: found.every((c) => c.state !== 'failed'),
    linked: found.find((c) => c.name === 'link')?.state === 'ok',
  };
}

/** The ledger head as the verify host serves it: null when there is none yet (404: no block digested). */
async function readHead(
  source: PublicSource,
): Promise<{ head: LedgerBlockHeadValue | null } | { failed: string; status: number }> {
  const { status, value } = await getJson(source, '/v1/ledger/head');
  if (status === 404) return { head: null };
  // getJson's -1: an answer that is not JSON.
  if (status !== 200 && status !== -1) return { failed: 'head_unreadable', status };
  if (!Value.Check(LedgerBlockHead, value)) return { failed: 'not_a_head', status };
  return { head: value };
}

/**
 * A leaf recorded on `leafDay` is in the block of that day, or of the next one when it committed as that block was
 * being digested (ledger/repository.ts unblockedLeavesUpTo). Once the head is past that day's block, a null ledger
 * position is withheld, not pending (DESIGN.md section 6: "ledger stays null until the block holding the seal is
 * digested", and no longer). Adds the failed check and returns true then; false while it may still be pending.
 */
export async function ledgerWithheld(
  source: PublicSource,
  leafDay: string,
  subject: string,
  facts: Record<string, string | number>,
  checks: Checks,
): Promise<boolean> {
  const read = await readHead(source);
  if ('failed' in read) {
    checks.add({
      name: 'ledger',
      state: 'failed',
      reason: read.failed,
      subject: 'ledger head',
      facts: { status: read.status },
    });
    return true;
  }
  if (read.head === null || read.head.day <= leafDay) return false;
  checks.add({
    name: 'ledger',
    state: 'failed',
    reason: 'ledger_withheld',
    subject,
    facts: { ...facts, leaf_day: leafDay, head_day: read.head.day, head_height: read.head.block_height },
  });
  return true;
}

async function checkLedger(
  seal: StatsSeal,
  ledgerCheck: SealCheck,
  options: VerifySealOptions,
  checks: Checks,
): Promise<void> {
  const ledger = seal.ledger;
  if (!ledger) {
    // The seal's leaf is recorded when it is signed: on the Almaty day of signed_at.
    const leafDay = almatyDate(new Date(seal.signed_at));
    if (await ledgerWithheld(options.source, leafDay, 'ledger', { leaf_kind: 'stats_seal' }, checks)) return;
    checks.add({
      ...ledgerCheck,
      state: options.requireLedger ? 'failed' : ledgerCheck.state,
      facts: { required: options.requireLedger ? 1 : 0 },
    });
    return;
  }
  const { proof } = ledger;
  checks.add({
    ...ledgerCheck,
    subject: `ledger leaf of seal ${seal.day} (block ${proof.day}, index ${proof.index})`,
    facts: {
      ...ledgerCheck.facts,
      index: proof.index,
      leaf_count: proof.leaf_count,
      manifest_sha256: proof.leaf.manifest_sha256,
      leaf_signed_at: proof.leaf.signed_at,
      signed_at: seal.signed_at,
      leaf_kind: proof.leaf.kind,
    },
  });

  // The block itself, and the chain of digests from the head down to the first block.
  options.progress?.phase('reading the ledger');
  const block = await fetchBlock(options.source, proof.day, checks);
  if (!block) return;
  const listed = block.leaves[proof.index];
  const holds =
    block.block_height === ledger.block_height &&
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
    facts: { index: proof.index },
  });
  const chained = await checkBlockChain([block], "the seal's", options, checks);
  await checkAnchoring(block, chained, options, checks);
}

/**
 * The most ledger blocks the verifier walks: a hundred years of daily blocks. A head that claims more is refused
 * before any block is fetched, so a hostile host cannot keep the verifier walking (and fetching) without end.
 */
export const MAX_LEDGER_BLOCKS = 36_525;

const DAY_MS = 86_400_000;
/** Whole days from `from` to `to` (calendar days YYYY-MM-DD). */
const daysBetween = (from: string, to: string): number =>
  Math.round((Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / DAY_MS);

/**
 * Walks the chain of blocks from the head down to the first, each checked by @ooh/verify's verifyBlock against the
 * one below it. True when the chain holds through every block of `targets` (the blocks holding the leaves checked:
 * the seal's, or an approval's issue and revocation); a failure is recorded. `of` names whose blocks they are.
 * `onBlock` is given every block read (the approval verifier reads their leaves). The walk is bounded: the head's
 * height must be at most MAX_LEDGER_BLOCKS and fit its day (one block a day, heights consecutive: DESIGN.md
 * section 6), else it is refused without walking.
 */
export async function checkBlockChain(
  targets: readonly LedgerBlock[],
  of: string,
  options: Pick<VerifySealOptions, 'source' | 'progress'>,
  checks: Checks,
  onBlock: (block: LedgerBlock) => void = () => {},
): Promise<boolean> {
  const byDay = new Map(targets.map((b) => [b.day, b]));
  const highest = targets.reduce((a, b) => (b.block_height > a.block_height ? b : a));
  const targetDays = [...byDay.keys()].sort().join(', ');
  const head = (reason: string, facts?: Record<string, string | number>) =>
    checks.add({
      name: 'ledger',
      state: 'failed',
      reason,
      subject: 'ledger head',
      ...(facts ? { facts } : {}),
    }) && false;
  const { status, value } = await getJson(options.source, '/v1/ledger/head');
  if (status !== 200 || !Value.Check(LedgerBlockHead, value))
    return head(status === 200 ? 'not_a_head' : 'head_unreadable', { status });
  if (value.block_height < highest.block_height)
    return head('head_below_seal_block', {
      block_height: value.block_height,
      seal_height: highest.block_height,
      of,
    });
  if (value.block_height > MAX_LEDGER_BLOCKS)
    return head('head_beyond_bound', { block_height: value.block_height, bound: MAX_LEDGER_BLOCKS });
  // One block a day: the head is as many blocks above the highest target as it is days after it.
  const gap = daysBetween(highest.day, value.day);
  if (value.block_height - highest.block_height !== gap)
    return head('head_height_not_its_day', {
      block_height: value.block_height,
      day: value.day,
      seal_height: highest.block_height,
      seal_day: highest.day,
      of,
    });
  let upper: LedgerBlock | null =
    byDay.get(value.day) ?? (await fetchBlock(options.source, value.day, checks));
  if (!upper) return false;
  onBlock(upper);
  if (upper.digest !== value.digest) return head('head_differs', { digest: value.digest, day: value.day });
  const passed = new Set<string>(byDay.has(upper.day) ? [upper.day] : []);
  let walked = 1;
  const progress = options.progress ?? NO_PROGRESS;
  progress.phase('walking the ledger chain', { total: upper.block_height, unit: 'blocks' });
  progress.tick();
  for (;;) {
    const day = addDays(upper.day, -1);
    const lower: LedgerBlock | 'none' | null =
      upper.block_height <= 1 ? 'none' : (byDay.get(day) ?? (await fetchBlock(options.source, day, checks)));
    if (lower === null) return false;
    const { linked } = await checkBlock(upper, lower, checks);
    if (!linked) {
      // The block below is still checked in itself: its own digest may be what changed.
      if (lower !== 'none') await checkBlock(lower, null, checks);
      return false;
    }
    if (lower === 'none') break;
    onBlock(lower);
    if (byDay.has(lower.day)) passed.add(lower.day);
    upper = lower;
    walked += 1;
    progress.tick();
  }
  const holds = passed.size === byDay.size;
  return (
    checks.add({
      name: 'ledger',
      state: holds ? 'ok' : 'failed',
      reason: holds ? 'chain_holds' : 'seal_block_not_on_chain',
      subject: 'ledger chain',
      facts: { walked, head_day: value.day, head_height: value.block_height, seal_block: targetDays, of },
    }).state === 'ok'
  );
}

async function parseVkeys(given: readonly (string | { text: string })[]): Promise<Vkey[]> {
  const keys: Vkey[] = [];
  for (const key of given) {
    const parsed = await parseVkey(typeof key === 'string' ? key : key.text);
    if (parsed) keys.push(parsed);
  }
  return keys;
}

/**
 * Issue 23: the seal's block is anchored for this reader when a checkpoint at or above it carries cosignatures of
 * enough pinned witnesses and its root is the digest of the block at its size, on the chain (@ooh/verify's
 * verifyAnchoring). Without --require-anchored, too few cosignatures is a note, not a failure.
 */
export async function checkAnchoring(
  block: LedgerBlock,
  chained: boolean,
  options: Pick<VerifySealOptions, 'source' | 'witnesses' | 'requireAnchored' | 'ledgerKey' | 'now'>,
  checks: Checks,
): Promise<void> {
  const witnesses = await parseVkeys(options.witnesses ?? []);
  const required = options.requireAnchored ?? 0;
  const ledgerKey = options.ledgerKey ? ((await parseVkeys([options.ledgerKey]))[0] ?? null) : null;
  const subject = `ledger anchoring of block ${block.day}`;
  const base = { block_height: block.block_height, status: block.status, quorum: Math.max(required, 1) };
  if (witnesses.length === 0 && !ledgerKey) {
    checks.add({ name: 'ledger', state: 'unknown', reason: 'no_witnesses', subject, facts: base });
    return;
  }
  if (!chained) {
    checks.add({ name: 'ledger', state: 'failed', reason: 'chain_broken', subject, facts: base });
    return;
  }
  const source: AnchorSource = {
    async checkpoint(path) {
      const { status, body } = await options.source.get(path);
      return status === 200 ? body.toString('utf8') : null;
    },
    async block(day) {
      const { status, value } = await getJson(options.source, `/v1/ledger/blocks/${day}`);
      return status === 200 && Value.Check(LedgerBlockSchema, value) ? (value as BlockFields) : null;
    },
  };
  const result = await verifyAnchoring(
    {
      day: block.day,
      block_height: block.block_height,
      digest: block.digest,
      anchored_by: block.anchored_by,
    },
    witnesses,
    Math.max(required, 1),
    source,
    { ...(options.now === undefined ? {} : { now: options.now }), ledgerKey },
  );
  // Too few cosignatures is a failure only when the reader asked for a quorum.
  const state = result.reason === 'not_anchored' && required === 0 ? 'unknown' : result.state;
  checks.add({
    name: 'ledger',
    state,
    reason: result.reason,
    subject,
    facts: {
      ...base,
      ...(result.size === undefined ? {} : { size: result.size }),
      ...(result.witnesses
        ? { witnesses: result.witnesses.join(', '), cosigned: result.witnesses.length }
        : {}),
      ...(ledgerKey ? { ledger_key: `${ledgerKey.name}+${ledgerKey.id}` } : {}),
    },
  });
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
  if (parseBatchExportLine(value) !== null) return null;
  return 'its first line is not a batch line {batch, owner, seq, body_sha256, received_at, body}';
}

async function checkBatches(seal: StatsSeal, ndjson: string, checks: Checks, progress: VerifyProgress) {
  const lines = ndjson.split('\n').filter((l) => l.trim() !== '');
  progress.phase('checking the exported batches', { total: lines.length, unit: 'batches' });
  for (const check of await verifySealBatches(seal, lines, () => progress.tick())) {
    checks.add({
      ...check,
      subject: check.subject ?? (check.name === 'batches' ? 'batch export' : `seal ${seal.day}`),
      facts: {
        ...check.facts,
        day: seal.day,
        root: seal.body.root,
        batch_count: seal.body.batch_count,
        record_count: seal.body.record_count,
        lines: lines.length,
      },
    });
  }
}

/** Checks the seal of `day` and everything it rests on. Never throws for bad data: a failed check says what. */
export async function verifySeal(options: VerifySealOptions): Promise<VerifyReport> {
  const checks = new Checks();
  if (!isCalendarDate(options.day)) {
    checks.add({
      name: 'content',
      state: 'failed',
      reason: 'not_a_day',
      subject: 'arguments',
      facts: { day: options.day },
    });
    return { ok: false, checks: checks.list };
  }
  options.progress?.phase(`reading the seal of ${options.day}`);
  const seal = await fetchSeal(options.source, options.day, checks);
  if (seal) {
    checks.add({
      name: 'content',
      state: 'ok',
      reason: 'read',
      subject: `seal ${seal.day}`,
      facts: {
        origin: options.source.origin,
        batch_count: seal.body.batch_count,
        record_count: seal.body.record_count,
        env: seal.body.env,
      },
    });
    let roots: Certificate[] = [];
    try {
      roots = parsePems([options.rootPem]);
    } catch {
      // No root that parses: every signature fails as untrusted.
    }
    const ledgerCheck = await checkSealChain(seal, roots, options, checks);
    await checkLedger(seal, ledgerCheck, options, checks);
    if (options.batchesNdjson !== undefined) {
      await checkBatches(seal, options.batchesNdjson, checks, options.progress ?? NO_PROGRESS);
    }
  }
  return { ok: checks.passed, checks: checks.list };
}
