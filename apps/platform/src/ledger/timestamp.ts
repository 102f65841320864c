import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  createTimeStampRequest,
  hexDecode,
  parseTimeStampResponse,
  readCertificate,
  readTimeStampToken,
  splitPemChain,
} from '@ooh/crypto';
import { almatyDayEnd, type BackoffPolicy, backoffDelayMs, formatAlmaty } from '@ooh/protocol';
import { ConfigError, type PlatformConfig } from '../config.js';
import type { PlatformContext } from '../context.js';
import type { Db, DbClient } from '../db/pool.js';
import { type Certificate, parsePems, verifyBlockTimestamp } from '@ooh/verify';
import { readAtMost } from '../http/read-at-most.js';
import { startTicker } from '../shared/ticker.js';

/*
 * RFC 3161 timestamps of the ledger's daily blocks (issue 23, "Optional timestamps: each day's digest may also get
 * an RFC 3161 timestamp from a configured time-stamping authority, stored and published with the block").
 *
 * After a block is digested, a background job sends its digest (already a SHA-256: the messageImprint is
 * {sha256, digest}) to the TSA as a TimeStampReq with a fresh nonce and certReq, checks the answer (granted, the
 * imprint and nonce asked for, the signature, a TSA certificate for time-stamping only that is the pinned one or
 * issued by it, a genTime between the day's end and now) and stores the token (migration 078). The verify host
 * publishes it as a TimeStampResp at /v1/ledger/blocks/{day}/timestamp.tsr. A TSA that is down or answers wrongly
 * delays the token (backoff); sealing and digesting never wait for it.
 */

export const TSA_ENV = {
  url: 'LEDGER_TSA_URL',
  cert: 'LEDGER_TSA_CERT',
  policy: 'LEDGER_TSA_POLICY',
} as const;

export interface TsaSettings {
  /** Where TimeStampReqs are POSTed (RFC 3161 §3.4, application/timestamp-query). */
  url: string;
  /** The pinned certificate(s), PEM: the TSA's own certificate or the CA that issued it. */
  trustedPem: string[];
  /** The file they were read from, for messages. */
  certFile: string;
  /** TSAPolicyId asked for, if any. */
  policy: string | null;
}

/**
 * The TSA settings (null when LEDGER_TSA_URL is unset: no timestamps), or ConfigError naming every bad value.
 * LEDGER_TSA_CERT is required with the URL: an answer is only stored once it verifies against it.
 */
export function tsaSettings(config: Pick<PlatformConfig, 'settings'>): TsaSettings | null {
  const env = config.settings;
  const urlText = env[TSA_ENV.url]?.trim();
  const certText = env[TSA_ENV.cert]?.trim();
  const policyText = env[TSA_ENV.policy]?.trim();
  if (!urlText) {
    if (certText || policyText) {
      throw new ConfigError([`${TSA_ENV.cert} and ${TSA_ENV.policy} need ${TSA_ENV.url} (the TSA to ask)`]);
    }
    return null;
  }
  const problems: string[] = [];
  let url: URL | null = null;
  try {
    url = new URL(urlText);
  } catch {
    url = null;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    problems.push(`${TSA_ENV.url}: "${urlText}" is not an http(s) URL (e.g. https://tsa.example.kz/tsr)`);
  }
  let trustedPem: string[] = [];
  const certFile = certText ? path.resolve(certText) : '';
  if (!certText) {
    problems.push(
      `${TSA_ENV.cert} is missing: the PEM file of the TSA's certificate (or of the CA that issued it) that its answers must verify against`,
    );
  } else {
    try {
      trustedPem = splitPemChain(readFileSync(certFile, 'utf8'));
      for (const pem of trustedPem) readCertificate(pem);
      if (trustedPem.length === 0) problems.push(`${TSA_ENV.cert}: ${certFile} holds no PEM certificate`);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      problems.push(
        `${TSA_ENV.cert}: ${certFile}: ${code === 'ENOENT' ? 'no such file' : code ? `cannot be read (${code})` : 'not a readable PEM certificate'}`,
      );
    }
  }
  if (policyText && !/^[0-2](\.(0|[1-9][0-9]*))+$/.test(policyText)) {
    problems.push(`${TSA_ENV.policy}: "${policyText}" is not an object identifier (e.g. 1.2.3.4.1)`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { url: url!.href, trustedPem, certFile, policy: policyText || null };
}

/** Backoff of a TSA that failed (DESIGN.md §9): from a minute, doubling, at most an hour. */
export const TSA_BACKOFF: BackoffPolicy = { baseMs: 60_000, capMs: 3_600_000 };
/** How long one request may take before it counts as failed. */
export const TSA_TIMEOUT_MS = 15_000;
/** A row being worked on is leased this long (an instance that dies mid-request leaves it to another). */
const LEASE_MS = 120_000;
/** genTime may differ this much from our clock: the TSA's clock and ours both drift a little. */
export const GEN_TIME_SKEW_MS = 5 * 60_000;
/** Blocks stamped in one pass at most (a TSA configured late has a backlog of days). */
const PER_PASS = 10;
/** A TimeStampResp is a few kilobytes; a larger answer is not one. */
const MAX_RESPONSE_BYTES = 256 * 1024;

export const DEFAULT_TIMESTAMP_INTERVAL_MS = 10_000;

export interface TimestampRow {
  day: string;
  digest: string;
  token: Buffer | null;
  gen_time: Date | null;
  tsa_subject: string | null;
  attempts: number;
  next_attempt_at: Date;
  last_error: string | null;
}

export async function findTimestamp(db: Db | DbClient, day: string): Promise<TimestampRow | null> {
  const { rows } = await db.query<TimestampRow>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, digest, token, gen_time, tsa_subject, attempts, next_attempt_at,
            last_error
       FROM ledger_block_timestamps WHERE day = $1`,
    [day],
  );
  return rows[0] ?? null;
}

/** What the block's JSON says of its timestamp (additive to the block document), or null when it has none. */
export interface BlockTimestampField {
  gen_time: string;
  tsa: string | null;
  url: string;
}

export async function blockTimestampField(
  ctx: Pick<PlatformContext, 'db' | 'config'>,
  day: string,
): Promise<BlockTimestampField | null> {
  const row = await findTimestamp(ctx.db, day);
  if (!row?.token || !row.gen_time) return null;
  return {
    gen_time: formatAlmaty(row.gen_time, { milliseconds: true }),
    tsa: row.tsa_subject,
    url: `${ctx.config.publicUrls.verify.replace(/\/+$/, '')}/v1/ledger/blocks/${day}/timestamp.tsr`,
  };
}

export type TsaFetch = (url: string, init: RequestInit) => Promise<Response>;

export class TsaError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TsaError';
  }
}

/**
 * Asks the TSA to stamp `digestHex` of the block of `day` and checks the answer; returns the token and what it
 * says. Throws TsaError with the reason for anything short of a token that verifies.
 */
export async function requestTimestamp(
  settings: TsaSettings,
  block: { day: string; digest: string },
  options: { now: () => Date; fetch?: TsaFetch },
): Promise<{ token: Uint8Array; genTime: Date; tsaSubject: string }> {
  const digest = hexDecode(block.digest);
  const request = createTimeStampRequest({ digest, ...(settings.policy ? { policy: settings.policy } : {}) });
  const sentAt = options.now();
  const doFetch = options.fetch ?? fetch;
  let response: Response;
  let body: Buffer;
  let truncated: boolean;
  try {
    response = await doFetch(settings.url, {
      method: 'POST',
      headers: { 'content-type': 'application/timestamp-query', accept: 'application/timestamp-reply' },
      body: Buffer.from(request.der),
      redirect: 'error',
      signal: AbortSignal.timeout(TSA_TIMEOUT_MS),
    });
    // Read no further than a TimeStampResp can be: a TSA cannot make the platform hold an answer of any size.
    ({ body, truncated } = await readAtMost(response, MAX_RESPONSE_BYTES));
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    throw new TsaError(`the TSA cannot be reached: ${cause ?? (error as Error).message}`, { cause: error });
  }
  if (response.status !== 200) throw new TsaError(`the TSA answered HTTP ${response.status}`);
  const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  // RFC 3161 §3.4 names application/timestamp-reply; some TSAs still send the draft's timestamp-response.
  if (type !== 'application/timestamp-reply' && type !== 'application/timestamp-response') {
    throw new TsaError(`the TSA answered ${type || 'no content type'}, not application/timestamp-reply`);
  }
  if (truncated) throw new TsaError('the TSA answer is too large to be a TimeStampResp');
  const parsed = parseTimeStampResponse(body);
  if (!parsed.ok) throw new TsaError(parsed.reason);
  let pinned: Certificate[];
  try {
    pinned = parsePems(settings.trustedPem);
  } catch (cause) {
    throw new TsaError(`the pinned TSA certificate ${settings.certFile} is unreadable`, { cause });
  }
  // The reply's token is judged by @ooh/verify (what a reader of the block checks too); the nonce is ours to match.
  const verified = await verifyBlockTimestamp(body, block.digest, pinned);
  if (!verified.ok) throw new TsaError(`the token does not verify: ${verified.reason}`);
  const claims = readTimeStampToken(parsed.token);
  if (!claims || claims.nonceHex !== request.nonceHex) {
    throw new TsaError(
      `the token's nonce ${claims?.nonceHex ?? 'is missing'}${claims?.nonceHex ? ' differs from the request' : ''}`,
    );
  }
  // genTime sane: not before the day ended (the digest did not exist before) nor before we asked, not after now.
  const genTime = verified.genTime.getTime();
  const dayEnd = almatyDayEnd(block.day).getTime();
  if (genTime < dayEnd) {
    throw new TsaError(`genTime ${verified.genTime.toISOString()} is before the end of ${block.day}`);
  }
  if (genTime < sentAt.getTime() - GEN_TIME_SKEW_MS || genTime > options.now().getTime() + GEN_TIME_SKEW_MS) {
    throw new TsaError(
      `genTime ${verified.genTime.toISOString()} is not the time of the request (${sentAt.toISOString()}): the TSA's clock or ours is off`,
    );
  }
  return {
    token: parsed.token,
    genTime: verified.genTime,
    tsaSubject: claims.signerSubject ?? (verified.tsa ? `CN=${verified.tsa}` : 'the pinned TSA'),
  };
}

export interface TimestampRun {
  stamped: { day: string; gen_time: Date }[];
  failed: { day: string; reason: string }[];
}

export interface TimestampJobState {
  /** Consecutive failed passes of the TSA, and when it may be asked again (this instance's backoff). */
  failures: number;
  retryAt: number;
}

/**
 * One pass: a row for every digested block that has none, then up to PER_PASS blocks without a token whose next
 * attempt is due, newest first (the newest digest covers the chain below it). The first failure ends the pass and
 * backs off the TSA; the failed block waits as long (every instance sees that in the database).
 */
export async function runTimestampJob(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'log'>,
  settings: TsaSettings,
  options: { fetch?: TsaFetch; state?: TimestampJobState; random?: () => number } = {},
): Promise<TimestampRun> {
  const run: TimestampRun = { stamped: [], failed: [] };
  const state = options.state ?? { failures: 0, retryAt: 0 };
  const now = ctx.clock.now();
  if (now.getTime() < state.retryAt) return run;
  await ctx.db.query(
    `INSERT INTO ledger_block_timestamps (day, digest, next_attempt_at)
     SELECT b.day, b.digest, $1 FROM ledger_blocks b
      WHERE NOT EXISTS (SELECT 1 FROM ledger_block_timestamps t WHERE t.day = b.day)
     ON CONFLICT (day) DO NOTHING`,
    [now],
  );
  for (let i = 0; i < PER_PASS; i += 1) {
    const claimedAt = ctx.clock.now();
    const { rows } = await ctx.db.query<{ day: string; digest: string; attempts: number }>(
      `UPDATE ledger_block_timestamps SET attempts = attempts + 1, next_attempt_at = $2
        WHERE day = (SELECT day FROM ledger_block_timestamps WHERE token IS NULL AND next_attempt_at <= $1
                      ORDER BY day DESC LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING to_char(day, 'YYYY-MM-DD') AS day, digest, attempts`,
      [claimedAt, new Date(claimedAt.getTime() + LEASE_MS)],
    );
    const row = rows[0];
    if (!row) break;
    try {
      const got = await requestTimestamp(settings, row, {
        now: () => ctx.clock.now(),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      });
      await ctx.db.query(
        `UPDATE ledger_block_timestamps SET token = $2, gen_time = $3, tsa_url = $4, tsa_subject = $5,
                stamped_at = $6, last_error = NULL
          WHERE day = $1 AND token IS NULL`,
        [row.day, Buffer.from(got.token), got.genTime, settings.url, got.tsaSubject, ctx.clock.now()],
      );
      state.failures = 0;
      state.retryAt = 0;
      run.stamped.push({ day: row.day, gen_time: got.genTime });
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      state.failures += 1;
      const delay = backoffDelayMs(TSA_BACKOFF, state.failures, options.random ?? Math.random);
      const failedAt = ctx.clock.now();
      state.retryAt = failedAt.getTime() + delay;
      await ctx.db.query(
        `UPDATE ledger_block_timestamps SET next_attempt_at = $2, last_error = $3 WHERE day = $1 AND token IS NULL`,
        [row.day, new Date(failedAt.getTime() + delay), reason.slice(0, 1000)],
      );
      run.failed.push({ day: row.day, reason });
      if (!(error instanceof TsaError)) throw error;
      break;
    }
  }
  return run;
}

/** Runs the timestamp job every `intervalMs` (a chain of short timers on the injected clock). */
export function startTimestampJob(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'log'>,
  settings: TsaSettings,
  options: { intervalMs?: number; fetch?: TsaFetch } = {},
): () => Promise<void> {
  const state: TimestampJobState = { failures: 0, retryAt: 0 };
  return startTicker(
    ctx,
    'ledger-timestamps',
    options.intervalMs ?? DEFAULT_TIMESTAMP_INTERVAL_MS,
    async () => {
      const run = await runTimestampJob(ctx, settings, {
        ...(options.fetch ? { fetch: options.fetch } : {}),
        state,
      });
      for (const s of run.stamped)
        ctx.log.info({ day: s.day, gen_time: s.gen_time }, 'ledger block timestamped');
      for (const f of run.failed) {
        ctx.log.warn(
          { day: f.day, tsa: settings.url, reason: f.reason, retry_at: new Date(state.retryAt) },
          'ledger block not timestamped yet: the TSA will be asked again',
        );
      }
    },
  );
}
