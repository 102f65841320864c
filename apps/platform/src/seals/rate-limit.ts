import type { Clock } from '../clock.js';
import { ProblemError } from '../http/problem.js';

/**
 * The public rate limit of the verify host's seal and ledger routes (spec: "Rate limits of the other endpoints
 * (..., seals): not shown beyond the fact that 429 carries Retry-After"). A token bucket per client address,
 * kept in the memory of each instance: the routes are public, cheap reads, and the limit protects an instance
 * from one noisy client rather than metering anyone, so sharing the buckets through PostgreSQL (as proof of play
 * must) would cost a write per public read for nothing. Time comes from the injected clock.
 */
export interface PublicRateLimit {
  /** Requests a client may make at once. */
  burst: number;
  /** Tokens added per second. */
  perSecond: number;
}

export const DEFAULT_PUBLIC_RATE_LIMIT: PublicRateLimit = { burst: 120, perSecond: 20 };

/** Buckets idle this long are full again and are forgotten. */
const FORGET_AFTER_MS = 10 * 60_000;
const SWEEP_EVERY = 1000;

export class PublicRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private calls = 0;

  constructor(
    private readonly limit: PublicRateLimit,
    private readonly clock: Clock,
  ) {}

  /** Takes a token for `client`, or throws 429 rate_limited with Retry-After (whole seconds, at least 1). */
  take(client: string): void {
    const now = this.clock.now().getTime();
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
