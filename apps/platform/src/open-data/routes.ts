import { isCalendarMonth, formatAlmaty } from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RouteAuth } from '../auth/principal.js';
import type { PlatformContext } from '../context.js';
import type { Feature } from '../context.js';
import { ProblemError } from '../http/problem.js';
import { NoBody, Nullable, TextBody } from '../http/responses.js';
import { AUTHORITY_ADMIN } from '../shared/auth-grants.js';
import { buildDictionary, PublishedDictionary } from './dictionary.js';
import { buildDueReleases } from './release.js';
import {
  listReleases,
  readSettings,
  releaseFile,
  type ReleaseFile,
  type ReleaseSummary,
  setPublished,
  setRules,
  structureCodes,
} from './repository.js';
import { startTicker } from '../shared/ticker.js';

const CONSOLE_READ: RouteAuth = {
  anyOf: [
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
  ],
};

const PublicationBody = Type.Object({ enabled: Type.Boolean() }, { additionalProperties: false });
type PublicationBody = { enabled: boolean };

const Override = (minimum: number, maximum: number) =>
  Type.Optional(Type.Union([Type.Integer({ minimum, maximum }), Type.Null()]));
/** The disclosure values; null returns a value to the spec's default. */
const DisclosureBody = Type.Object(
  {
    min_operators: Override(1, 1000),
    min_advertisers: Override(1, 1000),
    max_party_share_pct: Override(1, 100),
    lag_months: Override(0, 24),
  },
  { additionalProperties: false },
);
type DisclosureBody = {
  min_operators?: number | null;
  min_advertisers?: number | null;
  max_party_share_pct?: number | null;
  lag_months?: number | null;
};

const ReleaseView = Type.Object({
  month: Type.String(),
  built_at: Type.String(),
  sha256: Type.String(),
  files: Type.Array(
    Type.Object({ name: Type.String(), url: Type.String(), sha256: Type.String(), bytes: Type.Integer() }),
  ),
});
const Publication = Type.Object({ enabled: Type.Boolean(), changed_at: Nullable(Type.String()) });
const Disclosure = Type.Object({
  min_operators: Type.Integer(),
  min_advertisers: Type.Integer(),
  max_party_share_pct: Type.Number(),
  lag_months: Type.Integer(),
});
const OpenDataView = Type.Object({
  publication: Publication,
  disclosure: Disclosure,
  releases: Type.Array(ReleaseView),
});

/** spec: "While publication is switched off the answer is 404 with code not_published". */
async function requirePublished(ctx: PlatformContext): Promise<void> {
  const settings = await readSettings(ctx.db);
  if (!settings.published) throw new ProblemError('not_published', 'open data publication is switched off');
}

/** spec Errors: "404 not_found: month or file not published or not existing (open data)". */
function monthParam(value: string | undefined): string {
  if (value === undefined || !isCalendarMonth(value)) {
    throw new ProblemError('not_found', `no open data release ${value ?? ''}: months are YYYY-MM`);
  }
  return value;
}

function releaseView(ctx: PlatformContext, release: ReleaseSummary) {
  const base = `${ctx.config.publicUrls.verify}/v1/open/releases/${release.month}`;
  return {
    month: release.month,
    built_at: formatAlmaty(release.builtAt),
    // SHA-256 of plays.csv, which is also its ETag.
    sha256: release.csvSha256,
    files: [
      {
        name: `plays-${release.month}.csv`,
        url: `${base}/plays.csv`,
        sha256: release.csvSha256,
        bytes: release.csvBytes,
      },
      {
        name: 'dictionary.json',
        url: `${base}/dictionary.json`,
        sha256: release.dictionarySha256,
        bytes: release.dictionaryBytes,
      },
    ],
  };
}

async function sendReleaseFile(
  ctx: PlatformContext,
  request: FastifyRequest<{ Params: { month: string } }>,
  reply: FastifyReply,
  file: ReleaseFile,
) {
  await requirePublished(ctx);
  const month = monthParam(request.params.month);
  const found = await releaseFile(ctx.db, month, file);
  if (!found) throw new ProblemError('not_found', `open data for ${month} is not released`);
  // The bytes never change once built: the ETag is their SHA-256.
  const etag = `"${found.sha256}"`;
  reply.header('etag', etag).header('cache-control', 'public, max-age=300');
  const ifNoneMatch = request.headers['if-none-match'];
  if (typeof ifNoneMatch === 'string' && ifNoneMatch.split(',').some((tag) => tag.trim() === etag)) {
    return reply.code(304).send();
  }
  if (file === 'csv') {
    return reply
      .type('text/csv; charset=utf-8; header=present')
      .header('content-disposition', `attachment; filename="plays-${month}.csv"`)
      .send(found.bytes);
  }
  return reply.type('application/json; charset=utf-8').send(found.bytes);
}

export interface OpenDataFeatureOptions {
  /** Interval of the release builder's loop. */
  tickMs?: number;
}

/** Open data (issue "Open data with disclosure control"; DESIGN.md section 7; docs/open-data.md). */
export function createOpenDataFeature(options: OpenDataFeatureOptions = {}): Feature {
  const tickMs = options.tickMs ?? 60_000;
  return {
    name: 'open-data',
    verify(app, ctx) {
      // spec: GET {verify_url}/v1/open/dictionary.json — "Public, no credentials. Response 200: OpenDataDictionary".
      app.get(
        '/v1/open/dictionary.json',
        // The spec's OpenDataDictionary, with the OpenOOH venue type of each format code added (issue 20 item 3).
        { schema: { response: { 200: PublishedDictionary } } },
        async (_request, reply) => {
          const settings = await readSettings(ctx.db);
          if (!settings.published)
            throw new ProblemError('not_published', 'open data publication is switched off');
          const codes = await structureCodes(ctx.db);
          reply.header('cache-control', 'public, max-age=300');
          return buildDictionary({ rules: settings.rules, ...codes, csvName: 'plays-YYYY-MM.csv' });
        },
      );

      app.get(
        '/v1/open/releases',
        { schema: { response: { 200: Type.Object({ releases: Type.Array(ReleaseView) }) } } },
        async () => {
          await requirePublished(ctx);
          const releases = await listReleases(ctx.db);
          return { releases: releases.map((release) => releaseView(ctx, release)) };
        },
      );

      // The files are sent as built, byte for byte (their SHA-256 is their ETag): the schemas say what they are.
      app.get<{ Params: { month: string } }>(
        '/v1/open/releases/:month/plays.csv',
        { schema: { response: { 200: TextBody('text/csv'), 304: NoBody } } },
        (request, reply) => sendReleaseFile(ctx, request, reply, 'csv'),
      );
      app.get<{ Params: { month: string } }>(
        '/v1/open/releases/:month/dictionary.json',
        { schema: { response: { 200: PublishedDictionary, 304: NoBody } } },
        (request, reply) => sendReleaseFile(ctx, request, reply, 'dictionary'),
      );
    },

    api(app, ctx) {
      const view = async () => {
        const settings = await readSettings(ctx.db);
        return {
          publication: {
            enabled: settings.published,
            changed_at: settings.publishedChangedAt ? formatAlmaty(settings.publishedChangedAt) : null,
          },
          disclosure: {
            min_operators: settings.rules.minOperators,
            min_advertisers: settings.rules.minAdvertisers,
            max_party_share_pct: settings.rules.maxPartySharePct,
            lag_months: settings.rules.lagMonths,
          },
          releases: (await listReleases(ctx.db)).map((release) => releaseView(ctx, release)),
        };
      };

      app.get(
        '/api/v1/console/open-data',
        { config: { auth: CONSOLE_READ }, schema: { response: { 200: OpenDataView } } },
        view,
      );

      // Publication switch; off until the city opts in (docs/open-data.md).
      app.put<{ Body: PublicationBody }>(
        '/api/v1/console/open-data/publication',
        {
          config: { auth: AUTHORITY_ADMIN },
          schema: { body: PublicationBody, response: { 200: Publication } },
        },
        async (request) => {
          await setPublished(ctx.db, request.body.enabled, ctx.clock.now());
          return (await view()).publication;
        },
      );

      // The disclosure values in force (spec: "values as published in the dictionary"). A release keeps the values it
      // was built with.
      app.put<{ Body: DisclosureBody }>(
        '/api/v1/console/open-data/disclosure',
        {
          config: { auth: AUTHORITY_ADMIN },
          schema: { body: DisclosureBody, response: { 200: Disclosure } },
        },
        async (request) => {
          const b = request.body;
          await setRules(
            ctx.db,
            {
              ...('min_operators' in b ? { minOperators: b.min_operators ?? null } : {}),
              ...('min_advertisers' in b ? { minAdvertisers: b.min_advertisers ?? null } : {}),
              ...('max_party_share_pct' in b ? { maxPartySharePct: b.max_party_share_pct ?? null } : {}),
              ...('lag_months' in b ? { lagMonths: b.lag_months ?? null } : {}),
            },
            ctx.clock.now(),
          );
          return (await view()).disclosure;
        },
      );
    },

    // The release builder: every tick builds the months that are due (release.ts).
    start(ctx) {
      return startTicker(ctx, 'open-data releases', tickMs, async (now) => {
        await buildDueReleases(ctx, now);
      });
    },
  };
}

export const openDataFeature: Feature = createOpenDataFeature();
