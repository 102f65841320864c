import { almatyDayEnd, isCalendarDate } from '@ooh/protocol';
import { blockDigest, type Certificate, parsePem, verifyBlockTimestamp } from '@ooh/verify';
import type { PublicSource } from './source.js';
import type { SealCheck, VerifyReport } from './verify-seal.js';

/*
 * The verifier's side of the ledger timestamps (issue 23: "the verify CLI ... checks ... timestamps against a pinned
 * TSA certificate"). `ooh-verify seal ... --tsa-cert tsa.pem`: every ledger block the seal check reads (the seal's
 * block and the chain from the head down to the first) must have a published RFC 3161 token
 * (/v1/ledger/blocks/{day}/timestamp.tsr) that stamps the block's digest, recomputed from the block itself, and
 * verifies against the pinned TSA certificate (or the CA that issued it), with a genTime after the day ended: the
 * rules are @ooh/verify's verifyBlockTimestamp, the browser's. Only public routes are read; nothing the server says
 * about the token is trusted.
 */

interface SeenBlock {
  day: string;
  /** The digest recomputed from the block's fields. */
  digest: string;
  /** What the block document says of its timestamp, if anything. */
  genTime: string | null;
}

/** Why `text` cannot be the pinned TSA certificate, or null. */
export function tsaPemProblem(text: string): string | null {
  try {
    if (parsePem(text).length === 0) return 'not a PEM certificate (-----BEGIN CERTIFICATE-----)';
  } catch (error) {
    return `not a readable certificate (${(error as Error).message})`;
  }
  return null;
}

async function blockOf(value: unknown): Promise<SeenBlock | null> {
  const b = value as Record<string, unknown> | null;
  if (typeof b !== 'object' || b === null || typeof b['day'] !== 'string' || !isCalendarDate(b['day']))
    return null;
  const { block_height, leaf_count, merkle_root, anchor_sha256 } = b;
  if (!Number.isSafeInteger(block_height) || !Number.isSafeInteger(leaf_count)) return null;
  if (typeof merkle_root !== 'string' || typeof anchor_sha256 !== 'string') return null;
  const digest = await blockDigest({
    day: b['day'],
    block_height: block_height as number,
    leaf_count: leaf_count as number,
    merkle_root,
    anchor_sha256,
  });
  const timestamp = b['timestamp'] as { gen_time?: unknown } | undefined;
  return {
    day: b['day'],
    digest,
    genTime: typeof timestamp?.gen_time === 'string' ? timestamp.gen_time : null,
  };
}

export interface TimestampChecker {
  /** The source to give the seal check: it notes every ledger block read through it. */
  source: PublicSource;
  /** Checks the timestamp of every block seen; adds its checks to the report (a failure fails it). */
  check(report: VerifyReport): Promise<void>;
}

/** Checks the token of one block, as a check of the report. */
export async function checkBlockTimestamp(
  source: PublicSource,
  block: { day: string; digest: string; genTime?: string | null },
  pinned: Certificate[],
): Promise<SealCheck> {
  const path = `/v1/ledger/blocks/${block.day}/timestamp.tsr`;
  const check = (
    state: 'ok' | 'failed',
    reason: string,
    facts: Record<string, string | number>,
  ): SealCheck => ({
    name: 'ledger',
    state,
    reason,
    subject: `ledger block ${block.day}`,
    facts: { path, origin: source.origin, ...facts },
  });
  const { status, body } = await source.get(path);
  if (status === 404) return check('failed', 'no_timestamp', {});
  if (status !== 200) return check('failed', 'timestamp_unreadable', { status });
  const verified = await verifyBlockTimestamp(
    new Uint8Array(body),
    block.digest,
    pinned,
    almatyDayEnd(block.day),
  );
  if (!verified.ok) return check('failed', verified.code, { detail: verified.reason });
  const genTime = verified.genTime.toISOString();
  if (block.genTime && new Date(block.genTime).getTime() !== verified.genTime.getTime()) {
    return check('failed', 'gen_time_differs', { said: block.genTime, gen_time: genTime });
  }
  return check('ok', 'timestamped', {
    gen_time: genTime,
    tsa: verified.tsa ? `CN=${verified.tsa}` : 'the TSA',
  });
}

/**
 * Wraps `source` so that the seal check's block reads are noted, then checks each noted block's timestamp against
 * `tsaPem` (one or more PEM certificates: the TSA's own, or the CA that issued it).
 */
export function timestampChecker(source: PublicSource, tsaPem: string): TimestampChecker {
  const pinned = parsePem(tsaPem);
  const seen = new Map<string, SeenBlock>();
  const recording: PublicSource = {
    origin: source.origin,
    async get(path) {
      const answer = await source.get(path);
      if (answer.status === 200 && /^\/v1\/ledger\/blocks\/\d{4}-\d\d-\d\d$/.test(path)) {
        try {
          const block = await blockOf(JSON.parse(answer.body.toString('utf8')));
          if (block) seen.set(block.day, block);
        } catch {
          // Not JSON: the seal check reports it.
        }
      }
      return answer;
    },
  };
  return {
    source: recording,
    async check(report) {
      const checks: SealCheck[] = [];
      for (const block of [...seen.values()].sort((a, b) => (a.day < b.day ? 1 : -1))) {
        checks.push(await checkBlockTimestamp(source, block, pinned));
      }
      if (seen.size === 0) {
        checks.push({ name: 'ledger', state: 'unknown', reason: 'no_block_read', subject: 'timestamps' });
      }
      report.checks.push(...checks);
      if (checks.some((c) => c.state === 'failed')) report.ok = false;
    },
  };
}
