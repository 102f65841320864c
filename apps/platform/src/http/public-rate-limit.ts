import { ProblemError } from './problem.js';

/**
 * The public rate limit of the verify host's seal and ledger routes (spec: "Rate limits of the other endpoints
 * (..., seals): not shown beyond the fact that 429 carries Retry-After"). A token bucket per client address,
 * kept in the memory of each instance: the routes are public, cheap reads, and the limit protects an instance
 * from one noisy client rather than metering anyone, so sharing the buckets through PostgreSQL (as proof of play
 * must) would cost a write per public read for nothing. Time is the process's monotonic clock, not the platform's
 * (injected, settable) clock: a limit on real request rates must refill in real time even while a test holds the
 * platform clock still, and must not jump when the wall clock is corrected.
 */
export interface PublicRateLimit {
  /** Requests a client may make at once. */
  burst: number;
  /** Tokens added per second. */
  perSecond: number;
  /** Monotonic milliseconds (default `performance.now`); tests pass their own. */
  nowMs?: () => number;
}

export const DEFAULT_PUBLIC_RATE_LIMIT: PublicRateLimit = { burst: 120, perSecond: 20 };

/** Buckets idle this long are full again and are forgotten. */
const FORGET_AFTER_MS = 10 * 60_000;
const SWEEP_EVERY = 1000;

export class PublicRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private calls = 0;

  private readonly nowMs: () => number;

  constructor(private readonly limit: PublicRateLimit) {
    this.nowMs = limit.nowMs ?? (() => performance.now());
  }

  /** Takes a token for `client`, or throws 429 rate_limited with Retry-After (whole seconds, at least 1). */
  take(client: string): void {
    const now = this.nowMs();
    this.calls += 1;
    if (this.calls % SWEEP_EVERY === 0) this.sweep(now);
    const bucket = this.buckets.get(client) ?? { tokens: this.limit.burst, at: now };
    const tokens = Math.min(
      this.limit.burst,
      bucket.tokens + (Math.max(0, now - bucket.at) / 1000) * this.limit.perSecond,
    );
    if (tokens < 1) {
      this.buckets.set(client, { tokens, at: Math.max(now, bucket.at) });
      const seconds = Math.max(1, Math.ceil((1 - tokens) / this.limit.perSecond));
      throw new ProblemError('rate_limited', `too many requests; retry in ${seconds} s`, {
        headers: { 'retry-after': String(seconds) },
      });
    }
    this.buckets.set(client, { tokens: tokens - 1, at: Math.max(now, bucket.at) });
  }

  private sweep(now: number): void {
    for (const [key, bucket] of this.buckets) if (now - bucket.at > FORGET_AFTER_MS) this.buckets.delete(key);
  }
}
