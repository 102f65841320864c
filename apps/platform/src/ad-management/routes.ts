import { almatyDate, type FieldError, formatAlmaty } from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import { principalOf } from '../auth/plugin.js';
import type { RouteAuth } from '../auth/principal.js';
import {
  deleteSubscription,
  insertOperatorSubscription,
  listSubscriptions,
  PARTNER_EVENT_TYPES,
} from '../city-events/repository.js';
import { subscriptionUrl } from '../city-events/subscription-url.js';
import { generateSecret } from '../city-events/webhooks.js';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { ItemsOf, NoBody } from '../http/responses.js';
import { isUuid, notFound, pathUuid } from '../shared/ids.js';
import { startTicker } from '../shared/ticker.js';
import { raiseAdAuditEvents } from './events.js';
import { queryAds } from './repository.js';
import { type AdCollection, AdCollectionSchema, adOf } from './view.js';

/*
 * A read-only IAB Tech Lab Ad Management API 1.1 view of an exchange partner's own programmatic submissions
 * (./README.md). Routes, under /api/v1 like every caller route, without the spec's "/bidder/{bidderId}" segment: the
 * API key names the organisation, so a bidder id in the path could only repeat it or name someone else's.
 *
 *   GET    /api/v1/ads?auditStart=&auditEnd=&id=&limit=   collection of ads whose audit changed in the window
 *   GET    /api/v1/ads/{id}                                collection of the one ad
 *   POST   /api/v1/ads/webhooks                            subscribe to ad_audit_changed (signed city-event webhooks)
 *   GET    /api/v1/ads/webhooks                            the organisation's subscriptions
 *   DELETE /api/v1/ads/webhooks/{id}                       end one
 *
 * Submitting, PUT and PATCH stay with POST /api/v1/submissions: the view is read-only.
 */

/** Scope read:ads, for the organisations that submit (the authority decides, it has no ads of its own). */
const READ_ADS: RouteAuth = { anyOf: [{ scope: 'read:ads', kinds: ['operator', 'agency', 'advertiser'] }] };

export const LIMIT_DEFAULT = 100;
export const LIMIT_MAX = 500;
/** Live subscriptions a partner may hold (each one is a delivery of every change). */
export const MAX_PARTNER_SUBSCRIPTIONS = 10;
/** Epoch milliseconds accepted in a query: up to 9999-12-31. */
const MAX_MS = 253_402_300_799_999;

const PARAMS = ['auditStart', 'auditEnd', 'id', 'limit'];

export function parseAdsQuery(query: Record<string, unknown>, now: Date) {
  const errors: FieldError[] = [];
  for (const name of Object.keys(query)) {
    if (!PARAMS.includes(name))
      errors.push({ path: `querystring:/${name}`, code: 'unknown_key', message: 'unknown parameter' });
  }
  const text = (name: string): string | null => {
    const value = query[name];
    if (value === undefined) return null;
    if (typeof value !== 'string') {
      errors.push({ path: `querystring:/${name}`, code: 'type', message: 'give the parameter once' });
      return null;
    }
    return value;
  };
  const integer = (name: string, min: number, max: number): number | null => {
    const value = text(name);
    if (value === null) return null;
    const n = /^[0-9]{1,15}$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      errors.push({
        path: `querystring:/${name}`,
        code: 'out_of_range',
        message: `an integer ${min}..${max}`,
      });
      return null;
    }
    return n;
  };
  const auditStart = integer('auditStart', 0, MAX_MS);
  if (auditStart === null && query['auditStart'] === undefined) {
    errors.push({
      path: 'querystring:/auditStart',
      code: 'required',
      message: 'epoch milliseconds; ads whose audit changed after it (0 for all)',
    });
  }
  const auditEndGiven = integer('auditEnd', 0, MAX_MS);
  const limit = integer('limit', 1, LIMIT_MAX) ?? LIMIT_DEFAULT;
  const id = text('id');
  if (id !== null && !isUuid(id)) {
    errors.push({
      path: 'querystring:/id',
      code: 'format',
      message: 'the id of the last ad of the previous page',
    });
  }
  const auditEnd = auditEndGiven ?? Math.floor(now.getTime());
  if (auditStart !== null && auditEnd < auditStart) {
    errors.push({ path: 'querystring:/auditEnd', code: 'out_of_range', message: 'not before auditStart' });
  }
  if (errors.length > 0) throw validationFailed(errors);
  return { auditStart: auditStart!, auditEnd, id: id?.toLowerCase() ?? null, limit };
}

const WebhookBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2000, pattern: '^https?://' }),
    secret: Type.Optional(Type.String({ minLength: 16, maxLength: 256 })),
  },
  { additionalProperties: false },
);
type WebhookBody = { url: string; secret?: string };

const PartnerSubscription = Type.Object({
  id: Type.String(),
  url: Type.String(),
  types: Type.Array(Type.String()),
  created_at: Type.String(),
  deliveries: Type.Object({ pending: Type.Integer(), delivered: Type.Integer(), failed: Type.Integer() }),
});
/** A new subscription; `secret` only when the platform made it (shown once). */
const PartnerSubscriptionCreated = Type.Object({
  id: Type.String(),
  url: Type.String(),
  types: Type.Array(Type.String()),
  created_at: Type.String(),
  secret: Type.Optional(Type.String()),
});

export function createAdManagementFeature(options: { tickMs?: number } = {}): Feature {
  const tickMs = options.tickMs ?? 5_000;
  return {
    name: 'ad-management',
    api(app, ctx) {
      const json = (collection: AdCollection): AdCollection => collection;

      app.get(
        '/api/v1/ads',
        { config: { auth: READ_ADS }, schema: { response: { 200: AdCollectionSchema } } },
        async (request) => {
          const now = ctx.clock.now();
          const q = parseAdsQuery(request.query as Record<string, unknown>, now);
          // One more than asked for: whether there is a next page, without counting.
          const rows = await queryAds(ctx.db, {
            organisationId: principalOf(request).organisation.id,
            today: almatyDate(now),
            auditStart: new Date(q.auditStart),
            afterId: q.id,
            auditEnd: new Date(q.auditEnd),
            limit: q.limit + 1,
          });
          const more = rows.length > q.limit;
          const ads = rows.slice(0, q.limit).map(adOf);
          const last = ads[ads.length - 1];
          const nextPage =
            more && last
              ? `${ctx.config.publicUrls.api}/api/v1/ads?auditStart=${last.audit.lastmod}&id=${last.id}` +
                `&auditEnd=${q.auditEnd}&limit=${q.limit}`
              : null;
          return json({ count: ads.length, more: more ? 1 : 0, nextPage, ads });
        },
      );

      // Static segments win over the parameter: /api/v1/ads/webhooks is never an ad id (ids are uuids).
      app.get<{ Params: { id: string } }>(
        '/api/v1/ads/:id',
        { config: { auth: READ_ADS }, schema: { response: { 200: AdCollectionSchema } } },
        async (request) => {
          const id = pathUuid(request.params.id, 'ad');
          const now = ctx.clock.now();
          // Another organisation's submission, a direct one or a draft is not found, as if it did not exist.
          const rows = await queryAds(ctx.db, {
            organisationId: principalOf(request).organisation.id,
            today: almatyDate(now),
            id,
            auditEnd: new Date(8.64e15),
            limit: 1,
          });
          if (rows.length === 0) throw notFound('ad', id);
          return json({ count: 1, ads: rows.map(adOf) });
        },
      );

      const subscriptionView = (row: Awaited<ReturnType<typeof listSubscriptions>>[number]) => ({
        id: row.id,
        url: row.url,
        types: row.types,
        created_at: formatAlmaty(row.created_at),
        deliveries: { pending: row.pending, delivered: row.delivered, failed: row.failed },
      });

      app.post<{ Body: WebhookBody }>(
        '/api/v1/ads/webhooks',
        {
          config: { auth: READ_ADS },
          schema: { body: WebhookBody, response: { 201: PartnerSubscriptionCreated } },
        },
        async (request, reply) => {
          const owner = principalOf(request).organisation.id;
          const url = await subscriptionUrl(request.body.url, ctx.config.settings);
          const generated = request.body.secret === undefined ? generateSecret() : null;
          const row = await insertOperatorSubscription(
            ctx.db,
            {
              url: url.toString(),
              secret: request.body.secret ?? generated!,
              types: [...PARTNER_EVENT_TYPES],
              organisationId: owner,
            },
            ctx.clock.now(),
            MAX_PARTNER_SUBSCRIPTIONS,
          );
          if (!row) {
            throw new ProblemError(
              'state_conflict',
              `an organisation holds at most ${MAX_PARTNER_SUBSCRIPTIONS} webhook subscriptions: remove one first`,
            );
          }
          reply.header('location', `/api/v1/ads/webhooks/${row.id}`);
          return reply.code(201).send({
            id: row.id,
            url: url.toString(),
            types: [...PARTNER_EVENT_TYPES],
            created_at: formatAlmaty(row.created_at),
            // Shown once, only when the platform made it.
            ...(generated ? { secret: generated } : {}),
          });
        },
      );

      app.get(
        '/api/v1/ads/webhooks',
        { config: { auth: READ_ADS }, schema: { response: { 200: ItemsOf(PartnerSubscription) } } },
        async (request) => ({
          items: (await listSubscriptions(ctx.db, null, principalOf(request).organisation.id))
            .filter((row) => row.types.some((t) => PARTNER_EVENT_TYPES.includes(t as never)))
            .map(subscriptionView),
        }),
      );

      app.delete<{ Params: { id: string } }>(
        '/api/v1/ads/webhooks/:id',
        { config: { auth: READ_ADS }, schema: { response: { 204: NoBody } } },
        async (request, reply) => {
          const id = pathUuid(request.params.id, 'webhook');
          const owner = principalOf(request).organisation.id;
          // Only a subscription made here: an operator's alert subscriptions are ended where they were made.
          const [mine] = await listSubscriptions(ctx.db, id, owner);
          if (!mine?.types.some((t) => PARTNER_EVENT_TYPES.includes(t as never)))
            throw notFound('webhook', id);
          if (!(await deleteSubscription(ctx.db, id, ctx.clock.now(), owner))) throw notFound('webhook', id);
          return reply.code(204).send();
        },
      );
    },

    // Every tick: store an event for each audit change up to now (delivered by the city-events ticker).
    start(ctx) {
      return startTicker(ctx, 'ad audit events', tickMs, async (now) => {
        await raiseAdAuditEvents(ctx, now);
      });
    },
  };
}

export const adManagementFeature: Feature = createAdManagementFeature();
