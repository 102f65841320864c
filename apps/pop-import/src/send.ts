import type { KeyObject } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { es256Sign } from '@ooh/crypto';
import {
  backoffDelayMs,
  compiledCheck,
  LIMITS,
  PopAnswer,
  retryAfterMs as retryAfterHeaderMs,
} from '@ooh/protocol';

/*
 * Shipping one batch to POST {base_url}/api/v1/pop/batches (spec "CMS batch for many players"): the API key, the
 * installation id in X-Service-Source, ES256 over the body before compression in X-Service-Signature, gzip on the
 * wire. Until the batch is answered the same bytes are sent again, never other ones (spec rule 4: "Same batch_seq
 * with the same bytes: answered duplicate true and counted once. With other bytes: 409 batch_conflict"):
 *  - 429 rate_limited and 503: wait Retry-After ("Retry-After gives seconds to wait"), send again;
 *  - other 5xx, a timeout, a connection lost: back off (exponential, jitter, a cap), send again;
 *  - any other answer is final: the run stops and says why (the batch stays pending for the next run).
 */

export interface Pacing {
  /** Waits until a batch of `records` may be sent within the spec's CMS rates, then takes its tokens. */
  take(records: number): Promise<void>;
}

/** A token bucket: `capacity` tokens, refilled at `perSecond`. */
class Bucket {
  private tokens: number;
  private at: number;
  constructor(
    private readonly capacity: number,
    private readonly perSecond: number,
    now: number,
  ) {
    this.tokens = capacity;
    this.at = now;
  }
  /** Milliseconds until `cost` tokens are there. */
  waitFor(cost: number, now: number): number {
    this.refill(now);
    const missing = Math.min(cost, this.capacity) - this.tokens;
    return missing <= 0 ? 0 : Math.ceil((missing / this.perSecond) * 1000);
  }
  take(cost: number, now: number): void {
    this.refill(now);
    this.tokens -= Math.min(cost, this.capacity);
  }
  private refill(now: number): void {
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.at) / 1000) * this.perSecond);
    this.at = now;
  }
}

/**
 * At most `limit` in any `minutes` minutes, kept per minute as the platform keeps it (its migration 082): a take in
 * minute m counts the minutes m - minutes to m, so room comes when the oldest of them leaves.
 */
class Window {
  private readonly used = new Map<number, number>();
  constructor(
    private readonly limit: number,
    private readonly minutes: number,
  ) {}
  /** Milliseconds until `cost` fits. */
  waitFor(cost: number, now: number): number {
    const minute = Math.floor(now / 60_000);
    for (const m of this.used.keys()) if (m < minute - this.minutes) this.used.delete(m);
    const need = Math.min(cost, this.limit);
    let total = 0;
    for (const n of this.used.values()) total += n;
    if (total + need <= this.limit) return 0;
    for (const m of [...this.used.keys()].sort((a, b) => a - b)) {
      total -= this.used.get(m)!;
      if (total + need <= this.limit) return (m + this.minutes + 1) * 60_000 - now;
    }
    return this.minutes * 60_000;
  }
  take(cost: number, now: number): void {
    const minute = Math.floor(now / 60_000);
    this.used.set(minute, (this.used.get(minute) ?? 0) + Math.min(cost, this.limit));
  }
}

/**
 * The importer keeps under the spec's CMS rates by itself ("2 batches a second per installation (burst 10) ...
 * 2 000 000 records an hour per organisation", the latter in any hour, as the platform counts it), so a large export
 * does not meet 429 batch after batch; other senders of the same key or organisation can still make the platform
 * answer 429, which is waited out.
 */
export function specPacing(clock: { now: () => number; sleep: (ms: number) => Promise<void> }): Pacing {
  const start = clock.now();
  const batches = new Bucket(LIMITS.cmsInstallationBurst, LIMITS.cmsBatchesPerSecondPerInstallation, start);
  const records = new Window(LIMITS.cmsRecordsPerHourPerOrganisation, 60);
  return {
    async take(count) {
      for (;;) {
        const now = clock.now();
        const wait = Math.max(batches.waitFor(1, now), records.waitFor(count, now));
        if (wait === 0) break;
        await clock.sleep(wait);
      }
      const now = clock.now();
      batches.take(1, now);
      records.take(count, now);
    },
  };
}

export interface SendOptions {
  /** {base_url}, e.g. https://api.example.kz (without /api/v1). */
  apiUrl: string;
  apiKey: string;
  sourceId: string;
  privateKey: KeyObject;
  fetch?: typeof fetch;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  pacing?: Pacing;
  /** One request's time limit; default 60 s. */
  timeoutMs?: number;
  /** How long one batch may keep failing before the run stops (it is sent again by the next run); default 15 min. */
  giveUpAfterMs?: number;
  /** Told of every wait, for the progress line. */
  onWait?: (why: string, ms: number) => void;
}

export type SendResult =
  | { kind: 'answered'; answer: PopAnswer }
  /** A final refusal (or giving up): nothing more is sent this run. */
  | { kind: 'stopped'; status: number | null; code: string; detail: string };

/** The agent shipper's backoff (@ooh/protocol backoffDelayMs): "equal jitter", 1 s doubling up to a minute. */
const BACKOFF = { baseMs: 1000, capMs: 60_000 };
const backoffMs = (failures: number, random: () => number) => backoffDelayMs(BACKOFF, failures, random);

/** Retry-After as seconds or an HTTP date (RFC 9110 section 10.2.3); null when absent or unreadable. */
export function retryAfterMs(header: string | null, now: number): number | null {
  return retryAfterHeaderMs(header ?? undefined, new Date(now));
}

/**
 * The wire bytes: gzip at level 1 unless that breaks the spec's "a compressed body may not inflate to more than 20
 * times its size" (repetitive JSON gzips past 20:1 at the default level, apps/platform/docs/cms-integration.md), in
 * which case the body goes uncompressed (it is under 4 MB: plan.ts BODY_MAX_BYTES).
 */
export function wireOf(body: Buffer): { wire: Buffer; gzip: boolean } {
  const gzipped = gzipSync(body, { level: 1 });
  if (body.length <= gzipped.length * LIMITS.cmsInflateRatioMax) return { wire: gzipped, gzip: true };
  return { wire: body, gzip: false };
}

const checkAnswer = compiledCheck(PopAnswer);

/** The problem document's code and detail, if the answer is one. */
async function problemOf(response: Response): Promise<{ code: string; detail: string }> {
  const text = await response.text().catch(() => '');
  try {
    const doc = JSON.parse(text) as { code?: unknown; detail?: unknown; title?: unknown };
    return {
      code: typeof doc.code === 'string' ? doc.code : `http_${response.status}`,
      detail: typeof doc.detail === 'string' ? doc.detail : typeof doc.title === 'string' ? doc.title : '',
    };
  } catch {
    return { code: `http_${response.status}`, detail: text.slice(0, 200) };
  }
}

export async function sendBatch(
  batch: { batchSeq: number; body: Buffer; records: number },
  options: SendOptions,
): Promise<SendResult> {
  const fetchImpl = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const random = options.random ?? Math.random;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const giveUpAfterMs = options.giveUpAfterMs ?? 15 * 60_000;
  const url = `${options.apiUrl.replace(/\/+$/, '')}/api/v1/pop/batches`;
  const { wire, gzip } = wireOf(batch.body);
  const started = now();
  let failures = 0;
  for (;;) {
    await options.pacing?.take(batch.records);
    let wait: number | null = null;
    let why = '';
    try {
      const response = await fetchImpl(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          'content-type': 'application/json',
          ...(gzip ? { 'content-encoding': 'gzip' } : {}),
          'x-service-source': options.sourceId,
          // spec: "ES256 over the body after decompression, raw r||s, base64url, no padding".
          'x-service-signature': es256Sign(options.privateKey, batch.body),
        },
        body: wire,
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (response.status === 200) {
        const text = await response.text();
        let answer: unknown;
        try {
          answer = JSON.parse(text);
        } catch {
          answer = undefined;
        }
        if (checkAnswer.Check(answer) && answer.batch_seq === batch.batchSeq)
          return { kind: 'answered', answer };
        // Not the batch answer: the batch may be stored; sending it again gets the stored answer.
        failures += 1;
        wait = backoffMs(failures, random);
        why = 'an answer that is not a batch answer';
      } else if (response.status === 429 || response.status === 503) {
        const retryAfter = retryAfterMs(response.headers.get('retry-after'), now());
        await response.body?.cancel().catch(() => undefined);
        failures += 1;
        wait = retryAfter ?? backoffMs(failures, random);
        why = response.status === 429 ? 'rate limited' : 'the platform is busy';
      } else if (response.status >= 500) {
        await response.body?.cancel().catch(() => undefined);
        failures += 1;
        wait = backoffMs(failures, random);
        why = `HTTP ${response.status}`;
      } else {
        const problem = await problemOf(response);
        return { kind: 'stopped', status: response.status, ...problem };
      }
    } catch (error) {
      failures += 1;
      wait = backoffMs(failures, random);
      why =
        (error as Error).name === 'TimeoutError'
          ? 'no answer in time'
          : `no connection (${(error as Error).message})`;
    }
    if (now() + wait - started > giveUpAfterMs) {
      return {
        kind: 'stopped',
        status: null,
        code: 'gave_up',
        detail: `batch ${batch.batchSeq} kept failing (${why}) for ${Math.round((now() - started) / 1000)} s`,
      };
    }
    options.onWait?.(why, wait);
    await sleep(wait);
  }
}
