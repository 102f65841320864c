import { CampaignList, CampaignReport, FleetHealth, PlaysAnswer } from '@ooh/protocol';
import { principalOf } from '../auth/plugin.js';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { TextBody } from '../http/responses.js';
import { pathUuid } from '../shared/ids.js';
import { READ_FLEET_HEALTH, READ_REPORTS, viewerOf } from './access.js';
import { campaignReport, type Gate, loadCampaign } from './campaign.js';
import { campaignCsv, csvFileName } from './csv.js';
import { parseZone } from './days.js';
import { fleetHealth, parseFleetHealthQuery } from './fleet-health.js';
import { listCampaigns } from './list.js';
import { parsePlaysQuery, playsReport } from './plays.js';

/**
 * A few reports at once per process, a few more waiting, the rest 503 service_unavailable with Retry-After: a
 * campaign report reads the play records of its months (README "Cost"), and one console user must not be able to
 * queue a hundred of them.
 */
export function reportGate(size: number, maxWaiting: number): Gate {
  let running = 0;
  const waiting: (() => void)[] = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else running -= 1;
  };
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (running >= size) {
      if (waiting.length >= maxWaiting) {
        throw new ProblemError(
          'service_unavailable',
          'too many reports are being prepared; ask again shortly',
          {
            headers: { 'retry-after': '5' },
          },
        );
      }
      await new Promise<void>((resolve) => waiting.push(resolve));
    } else running += 1;
    try {
      return await work();
    } finally {
      release();
    }
  };
}

function onlyKeys(query: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(query).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) {
    throw validationFailed(
      unknown.map((k) => ({
        path: `querystring:/${k}`,
        code: 'unknown_key',
        message: `unknown parameter ${k}`,
      })),
    );
  }
  for (const k of allowed) {
    if (query[k] !== undefined && typeof query[k] !== 'string')
      throw validationFailed([{ path: `querystring:/${k}`, code: 'type', message: 'given once' }]);
  }
}

/**
 * Reports for people who would rather look than read (issue 17 item 4): plays per day against the declared plays,
 * the proof-of-play report of a campaign (JSON for the console's printable page, and CSV), and fleet health over
 * time. src/reports/README.md describes them.
 */
export const reportsFeature: Feature = {
  name: 'reports',
  api(app, ctx) {
    const gate = reportGate(2, 4);
    const noStore = { 'cache-control': 'private, no-store' };

    app.get(
      '/api/v1/console/reports/campaigns',
      { config: { auth: READ_REPORTS }, schema: { response: { 200: CampaignList } } },
      async (request, reply) => {
        onlyKeys(request.query as Record<string, unknown>, []);
        reply.headers(noStore);
        return { items: await listCampaigns(ctx.db, viewerOf(principalOf(request))) };
      },
    );

    const report = async (
      request: { params: unknown; query: unknown },
      principal: ReturnType<typeof principalOf>,
    ) => {
      const id = pathUuid((request.params as { id?: string }).id, 'campaign');
      const query = request.query as Record<string, unknown>;
      onlyKeys(query, ['tz']);
      const zone = parseZone(query['tz'] as string | undefined);
      const viewer = viewerOf(principal);
      const campaign = await loadCampaign(ctx.db, id, viewer);
      return campaignReport(ctx, campaign, zone, viewer, gate);
    };

    app.get<{ Params: { id: string } }>(
      '/api/v1/console/reports/campaigns/:id',
      { config: { auth: READ_REPORTS }, schema: { response: { 200: CampaignReport } } },
      async (request, reply) => {
        const answer = await report(request, principalOf(request));
        reply.headers(noStore);
        return answer;
      },
    );

    app.get<{ Params: { id: string } }>(
      '/api/v1/console/reports/campaigns/:id/plays.csv',
      { config: { auth: READ_REPORTS }, schema: { response: { 200: TextBody('text/csv') } } },
      async (request, reply) => {
        const answer = await report(request, principalOf(request));
        return reply
          .headers(noStore)
          .type('text/csv; charset=utf-8')
          .header('content-disposition', `attachment; filename="${csvFileName(answer)}"`)
          .send(campaignCsv(answer));
      },
    );

    app.get(
      '/api/v1/console/reports/plays',
      { config: { auth: READ_REPORTS }, schema: { response: { 200: PlaysAnswer } } },
      async (request, reply) => {
        const q = parsePlaysQuery(request.query as Record<string, unknown>, ctx.clock.now());
        reply.headers(noStore);
        return playsReport(ctx.db, viewerOf(principalOf(request)), q, ctx.clock.now(), gate);
      },
    );

    app.get(
      '/api/v1/console/reports/fleet-health',
      { config: { auth: READ_FLEET_HEALTH }, schema: { response: { 200: FleetHealth } } },
      async (request, reply) => {
        const q = parseFleetHealthQuery(request.query as Record<string, unknown>);
        reply.headers(noStore);
        return fleetHealth(ctx.db, viewerOf(principalOf(request)), q, ctx.clock.now());
      },
    );
  },
};
