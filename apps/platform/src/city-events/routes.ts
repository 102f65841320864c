import { type FieldError, formatAlmaty, isCalendarDate } from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import { principalOf } from '../auth/plugin.js';
import type { Principal, RouteAuth } from '../auth/principal.js';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { ItemsOf, NoBody, Nullable } from '../http/responses.js';
import { startTicker } from '../shared/ticker.js';
import { AUTHORITY_ADMIN, FLEET_ADMIN } from '../shared/auth-grants.js';
import { notFound, pathUuid } from '../shared/ids.js';
import { checkDeclaredVsActual } from './declared-vs-actual.js';
import {
  deleteSubscription,
  EVENT_TYPES,
  type EventType,
  insertOperatorSubscription,
  liveOperatorSubscriptions,
  insertSubscription,
  listDeliveries,
  listEvents,
  listSubscriptions,
  OPERATOR_EVENT_TYPES,
  readBandPct,
  setBandPct,
} from './repository.js';
import { subscriptionUrl } from './subscription-url.js';
import { generateSecret, startDeliveries } from './webhooks.js';

const CONSOLE_READ: RouteAuth = {
  anyOf: [
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
  ],
};

/**
 * Events and webhooks: the authority sees and manages all of them; an operator (console:fleet) its own, that is the
 * alerts about its devices and CMS players (docs/alerts.md, docs/city-events.md "Who subscribes").
 */
const EVENTS_READ: RouteAuth = {
  anyOf: [...CONSOLE_READ.anyOf, { scope: 'console:fleet', kinds: ['operator'] }],
};

/** Live subscriptions an operator may hold: each one is a delivery of every event of its organisation. */
export const MAX_OPERATOR_SUBSCRIPTIONS = 10;

/** null: the authority, which sees everything; otherwise the organisation whose events and subscriptions it sees. */
const viewerOf = (principal: Principal): string | null =>
  principal.organisation.kind === 'authority' ? null : principal.organisation.id;

const WebhookBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2000, pattern: '^https?://' }),
    secret: Type.Optional(Type.String({ minLength: 16, maxLength: 256 })),
    types: Type.Array(Type.Union(EVENT_TYPES.map((t) => Type.Literal(t))), {
      minItems: 1,
      uniqueItems: true,
    }),
  },
  { additionalProperties: false },
);
type WebhookBody = { url: string; secret?: string; types: EventType[] };

const SettingsBody = Type.Object(
  { declared_band_pct: Type.Union([Type.Integer({ minimum: 0, maximum: 1000 }), Type.Null()]) },
  { additionalProperties: false },
);
type SettingsBody = { declared_band_pct: number | null };

/**
 * An event as stored and delivered (docs/city-events.md): the route sends the stored documents as they are, so this
 * says what they hold without rewriting them.
 */
const CityEvent = Type.Object(
  {
    id: Type.String(),
    type: Type.String(),
    created_at: Type.String(),
    data: Type.Object({}, { additionalProperties: true }),
  },
  { additionalProperties: true },
);
const BandSettings = Type.Object({ declared_band_pct: Type.Number() });
const SubscriptionView = Type.Object({
  id: Type.String(),
  organisation_id: Nullable(Type.String()),
  url: Type.String(),
  types: Type.Array(Type.String()),
  created_at: Type.String(),
  deliveries: Type.Object({ pending: Type.Integer(), delivered: Type.Integer(), failed: Type.Integer() }),
});
/** A new subscription; `secret` only when the platform made it (shown once). */
const SubscriptionCreated = Type.Object({
  id: Type.String(),
  organisation_id: Nullable(Type.String()),
  url: Type.String(),
  types: Type.Array(Type.String()),
  created_at: Type.String(),
  secret: Type.Optional(Type.String()),
});
const DeliveryView = Type.Object({
  event_id: Type.String(),
  attempts: Type.Integer(),
  next_attempt_at: Type.String(),
  delivered_at: Nullable(Type.String()),
  failed_at: Nullable(Type.String()),
  last_status: Nullable(Type.Integer()),
  last_error: Nullable(Type.String()),
});

const LIMIT_DEFAULT = 100;
const LIMIT_MAX = 500;

/** Query parameters arrive as text: parsed here, refused with field errors. */
function parseEventQuery(query: Record<string, unknown>) {
  const errors: FieldError[] = [];
  const text = (name: string): string | null => {
    const value = query[name];
    if (value === undefined) return null;
    if (typeof value !== 'string') {
      errors.push({ path: `querystring:/${name}`, code: 'type', message: 'give the parameter once' });
      return null;
    }
    return value;
  };
  for (const name of Object.keys(query)) {
    if (!['type', 'day', 'limit', 'offset'].includes(name)) {
      errors.push({ path: `querystring:/${name}`, code: 'unknown_key', message: 'unknown parameter' });
    }
  }
  const type = text('type');
  if (type !== null && !(EVENT_TYPES as readonly string[]).includes(type)) {
    errors.push({
      path: 'querystring:/type',
      code: 'not_allowed',
      message: `one of ${EVENT_TYPES.join(', ')}`,
    });
  }
  const day = text('day');
  if (day !== null && !isCalendarDate(day)) {
    errors.push({ path: 'querystring:/day', code: 'format', message: 'a date YYYY-MM-DD' });
  }
  const integer = (name: string, min: number, max: number, fallback: number): number => {
    const value = text(name);
    if (value === null) return fallback;
    const n = /^[0-9]{1,9}$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isInteger(n) || n < min || n > max) {
      errors.push({
        path: `querystring:/${name}`,
        code: 'out_of_range',
        message: `an integer ${min}..${max}`,
      });
      return fallback;
    }
    return n;
  };
  const limit = integer('limit', 1, LIMIT_MAX, LIMIT_DEFAULT);
  const offset = integer('offset', 0, 1_000_000_000, 0);
  if (errors.length > 0) throw validationFailed(errors);
  return { type: type as EventType | null, day, limit, offset };
}

export interface CityEventsFeatureOptions {
  /** Interval of the background loop (day comparison and webhook deliveries). */
  tickMs?: number;
}

/** City events and their webhooks (docs/city-events.md). */
export function createCityEventsFeature(options: CityEventsFeatureOptions = {}): Feature {
  const tickMs = options.tickMs ?? 5_000;
  return {
    name: 'city-events',
    api(app, ctx) {
      // Events as stored, newest first; each item is the exact document delivered by webhook.
      // The stored documents are joined as they are: a string is not serialized.
      app.get(
        '/api/v1/console/events',
        { config: { auth: EVENTS_READ }, schema: { response: { 200: ItemsOf(CityEvent) } } },
        async (request, reply) => {
          const filter = parseEventQuery(request.query as Record<string, unknown>);
          const viewer = viewerOf(principalOf(request));
          // An operator's fleet key reads the alerts of its organisation (docs/city-events.md), not the other events
          // the organisation may have as an exchange partner (ad_audit_changed: read:ads, through /api/v1/ads).
          const bodies = await listEvents(ctx.db, {
            ...filter,
            organisationId: viewer,
            types: viewer === null ? null : OPERATOR_EVENT_TYPES,
          });
          return reply.type('application/json; charset=utf-8').send(`{"items":[${bodies.join(',')}]}`);
        },
      );

      app.get(
        '/api/v1/console/events/settings',
        { config: { auth: CONSOLE_READ }, schema: { response: { 200: BandSettings } } },
        async () => {
          const { bandPct } = await readBandPct(ctx.db);
          return { declared_band_pct: bandPct };
        },
      );
      // null returns to the spec's default band (30 %).
      app.put<{ Body: SettingsBody }>(
        '/api/v1/console/events/settings',
        {
          config: { auth: AUTHORITY_ADMIN },
          schema: { body: SettingsBody, response: { 200: BandSettings } },
        },
        async (request) => {
          await setBandPct(ctx.db, request.body.declared_band_pct, ctx.clock.now());
          const { bandPct } = await readBandPct(ctx.db);
          return { declared_band_pct: bandPct };
        },
      );

      const subscriptionView = (row: Awaited<ReturnType<typeof listSubscriptions>>[number]) => ({
        id: row.id,
        organisation_id: row.organisation_id,
        url: row.url,
        types: row.types,
        created_at: formatAlmaty(row.created_at),
        deliveries: { pending: row.pending, delivered: row.delivered, failed: row.failed },
      });

      app.post<{ Body: WebhookBody }>(
        '/api/v1/console/webhooks',
        {
          config: { auth: FLEET_ADMIN },
          schema: { body: WebhookBody, response: { 201: SubscriptionCreated } },
        },
        async (request, reply) => {
          const b = request.body;
          const owner = viewerOf(principalOf(request));
          // An operator subscribes to the events about its own devices and players, nothing city-wide.
          if (owner !== null) {
            const refused = b.types
              .map((type, index) => ({ type, index }))
              .filter(({ type }) => !OPERATOR_EVENT_TYPES.includes(type));
            if (refused.length > 0) {
              throw validationFailed(
                refused.map(({ index }) => ({
                  path: `/types/${index}`,
                  code: 'not_allowed',
                  message: `an operator subscribes to ${OPERATOR_EVENT_TYPES.join(', ')}`,
                })),
              );
            }
          }
          // The limit first, before any name lookup: an operator at its limit starts none (checked again, under
          // the organisation's lock, when the row is written).
          if (
            owner !== null &&
            (await liveOperatorSubscriptions(ctx.db, owner)) >= MAX_OPERATOR_SUBSCRIPTIONS
          ) {
            throw new ProblemError(
              'state_conflict',
              `an organisation holds at most ${MAX_OPERATOR_SUBSCRIPTIONS} webhook subscriptions: remove one first`,
            );
          }
          const url = await subscriptionUrl(b.url, ctx.config.settings);
          const generated = b.secret === undefined ? generateSecret() : null;
          const fields = { url: url.toString(), secret: b.secret ?? generated!, types: [...b.types] };
          const row =
            owner === null
              ? await insertSubscription(ctx.db, { ...fields, organisationId: null }, ctx.clock.now())
              : await insertOperatorSubscription(
                  ctx.db,
                  { ...fields, organisationId: owner },
                  ctx.clock.now(),
                  MAX_OPERATOR_SUBSCRIPTIONS,
                );
          if (!row) {
            throw new ProblemError(
              'state_conflict',
              `an organisation holds at most ${MAX_OPERATOR_SUBSCRIPTIONS} webhook subscriptions: remove one first`,
            );
          }
          reply.header('location', `/api/v1/console/webhooks/${row.id}`);
          return reply.code(201).send({
            id: row.id,
            organisation_id: owner,
            url: url.toString(),
            types: b.types,
            created_at: formatAlmaty(row.created_at),
            // Shown once, only when the platform made it; a secret given by the caller is never echoed.
            ...(generated ? { secret: generated } : {}),
          });
        },
      );

      app.get(
        '/api/v1/console/webhooks',
        { config: { auth: EVENTS_READ }, schema: { response: { 200: ItemsOf(SubscriptionView) } } },
        async (request) => ({
          items: (await listSubscriptions(ctx.db, null, viewerOf(principalOf(request)))).map(
            subscriptionView,
          ),
        }),
      );

      app.get<{ Params: { id: string } }>(
        '/api/v1/console/webhooks/:id/deliveries',
        { config: { auth: EVENTS_READ }, schema: { response: { 200: ItemsOf(DeliveryView) } } },
        async (request) => {
          const id = pathUuid(request.params.id, 'webhook');
          // Another organisation's subscription is not found, as if it did not exist.
          if ((await listSubscriptions(ctx.db, id, viewerOf(principalOf(request)))).length === 0)
            throw notFound('webhook', id);
          const rows = await listDeliveries(ctx.db, id, 100);
          return {
            items: rows.map((d) => ({
              event_id: d.event_id,
              attempts: d.attempts,
              next_attempt_at: formatAlmaty(d.next_attempt_at),
              delivered_at: d.delivered_at ? formatAlmaty(d.delivered_at) : null,
              failed_at: d.failed_at ? formatAlmaty(d.failed_at) : null,
              last_status: d.last_status,
              last_error: d.last_error,
            })),
          };
        },
      );

      app.delete<{ Params: { id: string } }>(
        '/api/v1/console/webhooks/:id',
        { config: { auth: FLEET_ADMIN }, schema: { response: { 204: NoBody } } },
        async (request, reply) => {
          const id = pathUuid(request.params.id, 'webhook');
          const owner = viewerOf(principalOf(request));
          if (!(await deleteSubscription(ctx.db, id, ctx.clock.now(), owner))) throw notFound('webhook', id);
          return reply.code(204).send();
        },
      );
    },

    // Every tick: compare the full days not yet compared, then claim the due deliveries there is room for. The sends
    // run on their own (webhooks.ts startDeliveries): a receiver that never answers holds neither the tick nor the
    // other subscriptions' deliveries.
    start(ctx) {
      const deliveries = startDeliveries(ctx);
      const stopTicker = startTicker(ctx, 'city events', tickMs, async (now) => {
        await checkDeclaredVsActual(ctx, now);
        await deliveries.pump();
      });
      return async () => {
        await stopTicker();
        await deliveries.stop();
      };
    },
  };
}

export const cityEventsFeature: Feature = createCityEventsFeature();
