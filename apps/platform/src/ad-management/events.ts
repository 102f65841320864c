import { almatyDate, formatAlmaty } from '@ooh/protocol';
import { randomUUID } from 'node:crypto';
import { insertEvent } from '../city-events/repository.js';
import type { PlatformContext } from '../context.js';
import { withTransaction } from '../db/pool.js';
import { type AdRow, queryAds, subscribedOrganisations } from './repository.js';
import { adOf } from './view.js';

/*
 * Ad Management API webhooks ("the exchange will POST a collection of ads to the bidder's webhook URL upon status
 * change"): every change of an ad's audit status or of its audit lastmod is one ad_audit_changed city event of the
 * submitting organisation, delivered by the signed webhooks of src/city-events to that organisation's subscriptions
 * (and to the authority's, if it subscribed to the type). The event body is a collection of one ad with the event's
 * id, type, day and created_at beside it, so a receiver reads it as it reads GET /api/v1/ads.
 *
 * Changes are found by looking, not by hooks in the review code: a status can change with no write at all (an
 * approval expires at midnight). The subject of an event is ad id + audit status + audit lastmod, so each change is
 * stored, and so delivered, once however often it is seen. Only the ads of organisations someone receives are looked
 * at (a subscription of the organisation, or the authority's to the type): a new subscriber receives the changes
 * from its subscription on (and, the first time anyone subscribes, each ad's present status once); what came before
 * is read with GET /api/v1/ads.
 */

export const AD_EVENT_TYPE = 'ad_audit_changed';

/** Changes stamped this long before the newest event are looked at again (a decision committed late). */
export const RESCAN_MS = 15 * 60_000;
const PAGE = 500;

export interface AdEventBody {
  id: string;
  type: typeof AD_EVENT_TYPE;
  day: string;
  created_at: string;
  count: 1;
  ads: [ReturnType<typeof adOf>];
}

export function subjectOf(row: AdRow): string {
  return `${row.id}:${adOf(row).audit.status}:${Math.floor(row.audit_lastmod.getTime())}`;
}

/** Raises the events of the changes up to `now`; returns how many were new. */
export async function raiseAdAuditEvents(
  ctx: Pick<PlatformContext, 'db' | 'clock'>,
  now: Date = ctx.clock.now(),
): Promise<number> {
  const { rows } = await ctx.db.query<{ newest: Date | null }>(
    'SELECT max(created_at) AS newest FROM city_events WHERE type = $1',
    [AD_EVENT_TYPE],
  );
  const newest = rows[0]?.newest ?? null;
  const since = newest ? new Date(newest.getTime() - RESCAN_MS) : null;
  const today = almatyDate(now);
  let raised = 0;
  for (const organisationId of await subscribedOrganisations(ctx.db, AD_EVENT_TYPE)) {
    let auditStart = since;
    let afterId: string | null = null;
    for (;;) {
      const page = await queryAds(ctx.db, {
        organisationId,
        today,
        auditStart,
        afterId,
        auditEnd: now,
        limit: PAGE,
      });
      for (const row of page) {
        const id = randomUUID();
        const body: AdEventBody = {
          id,
          type: AD_EVENT_TYPE,
          day: almatyDate(now),
          created_at: formatAlmaty(now),
          count: 1,
          ads: [adOf(row)],
        };
        const stored = await withTransaction(ctx.db, (client) =>
          insertEvent(client, {
            id,
            type: AD_EVENT_TYPE,
            subjectKey: subjectOf(row),
            day: body.day,
            payload: body.ads[0],
            body: JSON.stringify(body),
            createdAt: now,
            organisationId,
          }),
        );
        if (stored) raised += 1;
      }
      if (page.length < PAGE) break;
      const last = page[page.length - 1]!;
      auditStart = new Date(Math.floor(last.audit_lastmod.getTime()));
      afterId = last.id;
    }
  }
  return raised;
}
