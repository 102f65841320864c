import {
  canonicalize,
  parseTimeStampResponse,
  readCertificate,
  sha256Hex,
  splitPemChain,
  verifyTimeStampToken,
} from '@ooh/crypto';
import { almatyDayEnd, isCalendarDate } from '@ooh/protocol';
import type { PublicSource } from '../verifier/source.js';
import type { Check, VerifyReport } from '../verifier/verify-seal.js';

/*
 * The verifier's side of the ledger timestamps (issue 23: "the verify CLI ... checks ... timestamps against a pinned
 * TSA certificate"). `ooh-verify seal ... --tsa-cert tsa.pem`: every ledger block the seal check reads (the seal's
 * block and the chain from the head down to the first) must have a published RFC 3161 token
 * (/v1/ledger/blocks/{day}/timestamp.tsr) that stamps the block's digest, recomputed here from the block itself, and
 * verifies against the pinned TSA certificate (or the CA that issued it), with a genTime after the day ended.
 * Only public routes are read; nothing the server says about the token is trusted.
 */

interface SeenBlock {
  day: string;
  /** The digest recomputed from the block's fields, as the seal check recomputes it. */
  digest: string;
  /** What the block document says of its timestamp, if anything. */
  genTime: string | null;
}

/** Why `text` cannot be the pinned TSA certificate, or null. */
export function tsaPemProblem(text: string): string | null {
  const blocks = splitPemChain(text);
  if (blocks.length === 0) return 'not a PEM certificate (-----BEGIN CERTIFICATE-----)';
  try {
    for (const block of blocks) readCertificate(block);
  } catch (error) {
    return `not a readable certificate (${(error as Error).message})`;
  }
  return null;
}

function blockOf(value: unknown): SeenBlock | null {
  const b = value as Record<string, unknown> | null;
  if (typeof b !== 'object' || b === null || typeof b['day'] !== 'string' || !isCalendarDate(b['day']))
    return null;
  const { block_height, leaf_count, merkle_root, anchor_sha256 } = b;
  if (!Number.isSafeInteger(block_height) || !Number.isSafeInteger(leaf_count)) return null;
  if (typeof merkle_root !== 'string' || typeof anchor_sha256 !== 'string') return null;
  const digest = sha256Hex(
    canonicalize({
      v: 1,
      day: b['day'],
      block_height: block_height as number,
      leaf_count: leaf_count as number,
      merkle_root,
      prev_digest: anchor_sha256,
    }),
  );
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

/** Checks the token of one block; the checks say what passed or failed. */
export async function checkBlockTimestamp(
  source: PublicSource,
  block: { day: string; digest: string; genTime?: string | null },
  trustedTsaPem: string[],
): Promise<Check> {
  const subject = `ledger block ${block.day}`;
  const path = `/v1/ledger/blocks/${block.day}/timestamp.tsr`;
  const fail = (message: string): Check => ({ kind: 'fail', subject, message });
  const { status, body } = await source.get(path);
  if (status === 404) {
    return fail(
      `no RFC 3161 timestamp at ${source.origin}${path} (the platform asks its TSA after the block is digested: run again later if the block is new)`,
    );
  }
  if (status !== 200) return fail(`the timestamp ${path} answered HTTP ${status}`);
  const reply = parseTimeStampResponse(body);
  if (!reply.ok) return fail(`the timestamp is not a granted RFC 3161 reply: ${reply.reason}`);
  const verified = await verifyTimeStampToken(reply.token, {
    digest: Buffer.from(block.digest, 'hex'),
    trustedTsaPem,
  });
  if (!verified.ok) return fail(`RFC 3161 timestamp refused: ${verified.reason}`);
  if (verified.genTime.getTime() < almatyDayEnd(block.day).getTime()) {
    return fail(
      `RFC 3161 genTime ${verified.genTime.toISOString()} is before the day ended: not a stamp of this block`,
    );
  }
  if (block.genTime && new Date(block.genTime).getTime() !== verified.genTime.getTime()) {
    return fail(
      `the block says its timestamp is of ${block.genTime}, the token says ${verified.genTime.toISOString()}`,
    );
  }
  return {
    kind: 'ok',
    subject,
    message: `RFC 3161 timestamp of its digest by ${verified.tsaSubject} at ${verified.genTime.toISOString()} verifies against the pinned TSA certificate`,
  };
}

/**
 * Wraps `source` so that the seal check's block reads are noted, then checks each noted block's timestamp against
 * `tsaPem` (one or more PEM certificates: the TSA's own, or the CA that issued it).
 */
export function timestampChecker(source: PublicSource, tsaPem: string): TimestampChecker {
  const trusted = splitPemChain(tsaPem);
  const seen = new Map<string, SeenBlock>();
  const recording: PublicSource = {
    origin: source.origin,
    async get(path) {
      const answer = await source.get(path);
      if (answer.status === 200 && /^\/v1\/ledger\/blocks\/\d{4}-\d\d-\d\d$/.test(path)) {
        try {
          const block = blockOf(JSON.parse(answer.body.toString('utf8')));
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
      const checks: Check[] = [];
      for (const block of [...seen.values()].sort((a, b) => (a.day < b.day ? 1 : -1))) {
        checks.push(await checkBlockTimestamp(source, block, trusted));
      }
      if (seen.size === 0) {
        checks.push({
          kind: 'note',
          subject: 'timestamps',
          message: 'no ledger block was read (the seal has no ledger proof yet), so no timestamp was checked',
        });
      }
      report.checks.push(...checks);
      if (checks.some((c) => c.kind === 'fail')) report.ok = false;
    },
  };
}
