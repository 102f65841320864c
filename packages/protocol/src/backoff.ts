/**
 * Exponential backoff with jitter and a cap (DESIGN.md §9), for every sender of the project: the agent's shipper and
 * `pop import`. "Equal jitter": half the window is fixed, half
 * random, so a fleet that lost the platform together does not come back in lockstep, yet no retry is
 * immediate.
 */
export interface BackoffPolicy {
  baseMs: number;
  capMs: number;
}

export function backoffDelayMs(policy: BackoffPolicy, failures: number, random: () => number): number {
  const exponent = Math.min(Math.max(failures - 1, 0), 30);
  const window = Math.min(policy.capMs, policy.baseMs * 2 ** exponent);
  return Math.round(window / 2 + random() * (window / 2));
}

/**
 * Retry-After as seconds or an HTTP date (RFC 9110 §10.2.3); null when absent or unreadable.
 * spec: "429 rate_limited ... Retry-After gives seconds to wait".
 */
export function retryAfterMs(header: string | undefined, now: Date): number | null {
  if (header === undefined) return null;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (!Number.isFinite(at)) return null;
  return Math.max(0, at - now.getTime());
}
