import type { FieldError } from '@ooh/protocol';
import { principalOf } from '../auth/plugin.js';
import type { RouteAuth } from '../auth/principal.js';
import type { Feature } from '../context.js';
import { validationFailed } from '../http/problem.js';
import { FLEET_ADMIN } from '../shared/auth-grants.js';
import { isUuid, notFound, pathUuid } from '../shared/ids.js';
import { startTicker } from '../shared/ticker.js';
import { evaluateAlerts } from './evaluate.js';
import { type AlertFilter, findAlert, listAlerts } from './repository.js';
import { ALERT_KINDS, type AlertKind, AlertList, AlertView } from './schema.js';
import { alertSettings } from './settings.js';
import { alertView } from './view.js';

/** Who reads alerts: whoever sees the fleet (an operator its own), and the authority's readers. */
const ALERTS_READ: RouteAuth = {
  anyOf: [...FLEET_ADMIN.anyOf, { scope: 'console:read', kinds: ['authority'] }],
};

const LIMIT_DEFAULT = 100;
const LIMIT_MAX = 500;
const STATES = ['open', 'resolved', 'all'] as const;

/** Query parameters arrive as text: parsed here, refused with field errors (422 validation_failed). */
function parseAlertQuery(query: Record<string, unknown>): Omit<AlertFilter, 'organisationId'> {
  const errors: FieldError[] = [];
  for (const name of Object.keys(query)) {
    if (!['state', 'kind', 'device_id', 'limit', 'offset'].includes(name)) {
      errors.push({ path: `querystring:/${name}`, code: 'unknown_key', message: 'unknown parameter' });
    }
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
  const oneOf = <T extends string>(name: string, allowed: readonly T[]): T | null => {
    const value = text(name);
    if (value === null) return null;
    if (!(allowed as readonly string[]).includes(value)) {
      errors.push({
        path: `querystring:/${name}`,
        code: 'not_allowed',
        message: `one of ${allowed.join(', ')}`,
      });
      return null;
    }
    return value as T;
  };
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
  const state = oneOf('state', STATES) ?? 'open';
  const kind = oneOf<AlertKind>('kind', ALERT_KINDS);
  const deviceId = text('device_id');
  if (deviceId !== null && !isUuid(deviceId)) {
    errors.push({ path: 'querystring:/device_id', code: 'format', message: 'a device id (uuid)' });
  }
  const limit = integer('limit', 1, LIMIT_MAX, LIMIT_DEFAULT);
  const offset = integer('offset', 0, 1_000_000_000, 0);
  if (errors.length > 0) throw validationFailed(errors);
  return { state, kind, deviceId: deviceId?.toLowerCase() ?? null, limit, offset };
}

export interface AlertsFeatureOptions {
  /** Interval of the evaluation loop; default ALERT_INTERVAL_SECONDS. */
  tickMs?: number;
}

/** Fleet alerts (docs/alerts.md): the console's reading routes and the evaluation loop. */
export function createAlertsFeature(options: AlertsFeatureOptions = {}): Feature {
  return {
    name: 'alerts',
    api(app, ctx) {
      // Alerts the caller may see, newest first: open ones unless ?state= says otherwise.
      app.get(
        '/api/v1/console/alerts',
        { config: { auth: ALERTS_READ }, schema: { response: { 200: AlertList } } },
        async (request) => {
          const filter = parseAlertQuery(request.query as Record<string, unknown>);
          const principal = principalOf(request);
          const organisationId =
            principal.organisation.kind === 'authority' ? null : principal.organisation.id;
          const rows = await listAlerts(ctx.db, { ...filter, organisationId });
          return { items: rows.map(alertView) };
        },
      );

      app.get<{ Params: { id: string } }>(
        '/api/v1/console/alerts/:id',
        { config: { auth: ALERTS_READ }, schema: { response: { 200: AlertView } } },
        async (request) => {
          const id = pathUuid(request.params.id, 'alert');
          const principal = principalOf(request);
          const organisationId =
            principal.organisation.kind === 'authority' ? null : principal.organisation.id;
          // Another operator's alert is not found, as if it did not exist.
          const row = await findAlert(ctx.db, id, organisationId);
          if (!row) throw notFound('alert', id);
          return alertView(row);
        },
      );
    },

    // The evaluation, in the process that runs the schedulers (one per cluster: src/cluster.ts); several platform
    // instances on one database take turns under the evaluation's advisory lock. The deliveries are the city events'
    // loop's (src/city-events/routes.ts).
    start(ctx) {
      const settings = alertSettings(ctx.config.settings);
      return startTicker(ctx, 'alerts', options.tickMs ?? settings.intervalMs, async (now) => {
        await evaluateAlerts(ctx, now, settings);
      });
    },
  };
}

export const alertsFeature: Feature = createAlertsFeature();
