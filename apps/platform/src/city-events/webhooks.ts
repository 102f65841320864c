import { createHmac, randomBytes } from 'node:crypto';
import type { PlatformContext } from '../context.js';
import { isDatabaseConnectionLoss, reportConnectionLoss } from '../logging.js';
import { type ClaimedDelivery, claimDueDeliveries, recordDelivered, recordFailure } from './repository.js';
import { postToTarget, resolveTarget, type TargetPolicy, targetPolicy } from './targets.js';

/*
 * Outbound delivery of city events (spec Events: "Outbound event delivery to callers (webhooks or similar): not
 * shown"; docs/city-events.md). POST of the event's exact JSON body to the subscription's URL with
 *   X-Event-Id       the event id (the same on every retry: receivers deduplicate by it)
 *   X-Event-Type     the event type
 *   X-Signature      lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the subscription secret
 *   X-Delivery-Attempt  1, 2, ...
 * Only to public addresses unless WEBHOOK_ALLOWED_TARGETS names the target (targets.ts); at most 4 kB of an answer
 * is read. A 2xx answer delivers; anything else (another status, a redirect, a timeout, no connection, a target
 * refused) is retried with
 * exponential backoff until MAX_ATTEMPTS, then the delivery is given up (failed_at). At least once, never in a
 * guaranteed order.
 *
 * A receiver never holds up the others: the background loop (startDeliveries) keeps up to MAX_IN_FLIGHT sends going
 * and claims more as each one ends, instead of waiting for a whole batch, and a subscription has at most
 * MAX_IN_FLIGHT_PER_SUBSCRIPTION of them at a time, so one that never answers takes that many for the send timeout
 * (name lookup included) and the deliveries queued behind its own go to the others.
 */

export const MAX_ATTEMPTS = 15;
export const FIRST_RETRY_MS = 30_000;
export const MAX_RETRY_MS = 6 * 3_600_000;
export const SEND_TIMEOUT_MS = 10_000;
/** Longer than a send can take: a lease that runs out means the sender died. */
export const LEASE_MS = 60_000;

/** Wait before attempt `attempts + 1` after `attempts` failed ones: 30 s, 1 min, 2 min, ... capped at 6 hours. */
export function retryDelayMs(attempts: number): number {
  return Math.min(FIRST_RETRY_MS * 2 ** Math.max(0, attempts - 1), MAX_RETRY_MS);
}

export function signatureOf(body: string, secret: string): string {
  return createHmac('sha256', secret).update(body, 'utf8').digest('hex');
}

/** A secret for a subscription that gave none: 32 random bytes, hex. */
export function generateSecret(): string {
  return randomBytes(32).toString('hex');
}

/** Sends going at once in one process (the background loop's; deliverDueWebhooks claims this many a round). */
export const MAX_IN_FLIGHT = 50;
/** Sends of one subscription going at once (per instance, as a claim sees the leases). */
export const MAX_IN_FLIGHT_PER_SUBSCRIPTION = 4;

export interface DeliveryRun {
  attempted: number;
  delivered: number;
}

type DeliveryContext = Pick<PlatformContext, 'db' | 'clock' | 'config' | 'log'>;

/** `work`, or a TimeoutError once `ms` have passed (the work itself is left to end on its own). */
async function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | null = null;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { name: 'TimeoutError' })), ms);
      }),
    ]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

/** One attempt of a claimed delivery, its outcome stored. Returns whether it was delivered. */
async function attempt(
  ctx: DeliveryContext,
  policy: TargetPolicy,
  delivery: ClaimedDelivery,
  timeoutMs: number,
): Promise<boolean> {
  let status: number | null = null;
  let error = '';
  let host = '';
  try {
    const deadline = performance.now() + timeoutMs;
    const url = new URL(delivery.url);
    host = url.host;
    // The target is checked at every delivery (DNS may have changed since registration) and the connection goes
    // to the address checked (src/city-events/targets.ts). The send timeout covers the name lookup too: a name
    // server that never answers holds a delivery no longer than a receiver that never answers, and never past its
    // lease.
    const target = await within(resolveTarget(url, policy), timeoutMs);
    if (!target.ok) throw new Error(`target refused: ${target.reason}`);
    const remainingMs = Math.max(1, Math.round(deadline - performance.now()));
    // postToTarget ends within its timeout whatever the receiver does; `within` holds this attempt to it all the
    // same, so that no receiver can keep a send (and a place of MAX_IN_FLIGHT) beyond its lease.
    const response = await within(
      postToTarget(
        url,
        target,
        delivery.body,
        {
          'content-type': 'application/json',
          'user-agent': 'ooh-platform-webhooks/1',
          'x-event-id': delivery.eventId,
          'x-event-type': delivery.eventType,
          'x-signature': signatureOf(delivery.body, delivery.secret),
          'x-delivery-attempt': String(delivery.attempts),
        },
        remainingMs,
      ),
      remainingMs + 1000,
    );
    status = response.status;
    if (status >= 200 && status < 300) {
      await recordDelivered(ctx.db, delivery.id, status, ctx.clock.now());
      return true;
    }
    error = `HTTP ${status}`;
  } catch (caught) {
    error = (caught as Error).name === 'TimeoutError' ? 'timeout' : String((caught as Error).message);
  }
  const after = ctx.clock.now();
  const giveUp = delivery.attempts >= MAX_ATTEMPTS;
  await recordFailure(ctx.db, delivery.id, {
    attempt: delivery.attempts,
    status,
    error,
    nextAttemptAt: giveUp ? null : new Date(after.getTime() + retryDelayMs(delivery.attempts)),
    now: after,
  });
  // The subscription and the receiver's host, never its URL: a path or a query may carry the receiver's own token.
  if (giveUp)
    ctx.log.warn(
      { delivery: delivery.id, subscription: delivery.subscriptionId, host, error },
      'webhook delivery given up',
    );
  return false;
}

function claim(ctx: DeliveryContext, limit: number): Promise<ClaimedDelivery[]> {
  const now = ctx.clock.now();
  return claimDueDeliveries(
    ctx.db,
    now,
    new Date(now.getTime() + LEASE_MS),
    limit,
    MAX_IN_FLIGHT_PER_SUBSCRIPTION,
  );
}

/**
 * Sends every delivery due now once (one attempt each) and stores the outcomes: rounds of claims, each sent and
 * awaited, until nothing due is left to claim. For tests and tools; the platform's loop is startDeliveries.
 */
export async function deliverDueWebhooks(
  ctx: DeliveryContext,
  options: { limit?: number; timeoutMs?: number } = {},
): Promise<DeliveryRun> {
  const policy = targetPolicy(ctx.config.settings);
  const run: DeliveryRun = { attempted: 0, delivered: 0 };
  for (;;) {
    const claimed = await claim(ctx, options.limit ?? MAX_IN_FLIGHT);
    if (claimed.length === 0) return run;
    const results = await Promise.all(
      claimed.map((delivery) => attempt(ctx, policy, delivery, options.timeoutMs ?? SEND_TIMEOUT_MS)),
    );
    run.attempted += claimed.length;
    run.delivered += results.filter(Boolean).length;
  }
}

export interface Deliveries {
  /** Claims what there is room for and starts sending it; resolves once claimed (not once sent). */
  pump(): Promise<void>;
  /** Claims no more and waits for the sends going. */
  stop(): Promise<void>;
}

/**
 * The background delivery of a platform process: up to MAX_IN_FLIGHT sends at once, a new claim whenever one ends
 * (and whenever `pump` is called, by the loop's tick), never waiting for the slowest of a batch.
 */
export function startDeliveries(
  ctx: DeliveryContext,
  options: { capacity?: number; timeoutMs?: number } = {},
): Deliveries {
  const capacity = options.capacity ?? MAX_IN_FLIGHT;
  const timeoutMs = options.timeoutMs ?? SEND_TIMEOUT_MS;
  const policy = targetPolicy(ctx.config.settings);
  const going = new Set<Promise<void>>();
  let stopped = false;
  let claiming: Promise<void> | null = null;
  let again = false;

  const fill = async () => {
    do {
      again = false;
      while (!stopped && going.size < capacity) {
        const claimed = await claim(ctx, capacity - going.size);
        if (claimed.length === 0) break;
        for (const delivery of claimed) {
          const send: Promise<void> = attempt(ctx, policy, delivery, timeoutMs)
            .then(() => undefined)
            .catch((error: unknown) => {
              if (isDatabaseConnectionLoss(error)) reportConnectionLoss(ctx.log, error, 'webhook delivery');
              else ctx.log.error({ err: error, delivery: delivery.id }, 'webhook delivery failed');
            })
            .finally(() => {
              going.delete(send);
              // Room for another: claim at once rather than at the next tick.
              if (!stopped) pump().catch(() => {});
            });
          going.add(send);
        }
      }
    } while (again && !stopped);
  };

  const pump = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    if (claiming) {
      // A claim is under way: it goes round once more when it is done.
      again = true;
      return claiming;
    }
    claiming = fill().finally(() => {
      claiming = null;
    });
    return claiming;
  };

  return {
    pump,
    stop: async () => {
      stopped = true;
      await claiming?.catch(() => {});
      // Every send ends within its timeout; a stop never waits longer than that (a send still going then is
      // abandoned: its lease runs out and another instance, or the next start, sends it again).
      await within(Promise.all([...going]), timeoutMs + 5000).catch(() => {});
    },
  };
}
