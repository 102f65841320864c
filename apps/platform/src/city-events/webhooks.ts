import { createHmac, randomBytes } from 'node:crypto';
import type { PlatformContext } from '../context.js';
import { claimDueDeliveries, recordDelivered, recordFailure } from './repository.js';
import { postToTarget, resolveTarget, targetPolicy } from './targets.js';

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

export interface DeliveryRun {
  attempted: number;
  delivered: number;
}

/** Sends every due delivery once (one attempt each) and stores the outcome. */
export async function deliverDueWebhooks(
  ctx: PlatformContext,
  options: { limit?: number; timeoutMs?: number } = {},
): Promise<DeliveryRun> {
  const now = ctx.clock.now();
  const claimed = await claimDueDeliveries(
    ctx.db,
    now,
    new Date(now.getTime() + LEASE_MS),
    options.limit ?? 50,
  );
  let delivered = 0;
  const policy = targetPolicy(ctx.config.settings);
  await Promise.all(
    claimed.map(async (delivery) => {
      let status: number | null = null;
      let error = '';
      try {
        // The target is checked at every delivery (DNS may have changed since registration) and the connection
        // goes to the address checked (src/city-events/targets.ts).
        const url = new URL(delivery.url);
        const target = await resolveTarget(url, policy);
        if (!target.ok) throw new Error(`target refused: ${target.reason}`);
        const response = await postToTarget(
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
          options.timeoutMs ?? SEND_TIMEOUT_MS,
        );
        status = response.status;
        if (status >= 200 && status < 300) {
          await recordDelivered(ctx.db, delivery.id, status, ctx.clock.now());
          delivered += 1;
          return;
        }
        error = `HTTP ${status}`;
      } catch (caught) {
        error = (caught as Error).name === 'TimeoutError' ? 'timeout' : String((caught as Error).message);
      }
      const after = ctx.clock.now();
      const giveUp = delivery.attempts >= MAX_ATTEMPTS;
      await recordFailure(ctx.db, delivery.id, {
        status,
        error,
        nextAttemptAt: giveUp ? null : new Date(after.getTime() + retryDelayMs(delivery.attempts)),
        now: after,
      });
      if (giveUp)
        ctx.log.warn({ delivery: delivery.id, url: delivery.url, error }, 'webhook delivery given up');
    }),
  );
  return { attempted: claimed.length, delivered };
}
