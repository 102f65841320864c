import { Type } from '@sinclair/typebox';
import { generateApiKey } from '../auth/api-keys.js';
import { principalOf } from '../auth/plugin.js';
import { ORGANISATION_KINDS, type OrganisationKind, SCOPES } from '../auth/principal.js';
import type { Feature } from '../context.js';
import { validationFailed } from '../http/problem.js';
import { NoBody } from '../http/responses.js';
import { AUTHORITY_ADMIN } from '../shared/auth-grants.js';
import { notFound, pathUuid } from '../shared/ids.js';

const OrganisationBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 300 }),
    kind: Type.Union(ORGANISATION_KINDS.map((k) => Type.Literal(k))),
  },
  { additionalProperties: false },
);
const Organisation = Type.Object({ id: Type.String(), name: Type.String(), kind: Type.String() });

const ApiKeyBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    // After this instant the key answers 401 invalid_api_key (migration 068).
    expires_at: Type.Optional(Type.String({ format: 'date-time' })),
    scopes: Type.Array(Type.String(), { minItems: 1, maxItems: 20, uniqueItems: true }),
    routes: Type.Optional(
      Type.Array(Type.String({ pattern: '^(GET|POST|PUT|PATCH|DELETE) /\\S*$' }), {
        maxItems: 200,
        uniqueItems: true,
      }),
    ),
  },
  { additionalProperties: false },
);

const NullableDateTime = Type.Union([Type.String(), Type.Null()]);

/** An API key as listed: never its hash (issue "Trust under attack", item 6). */
const ApiKeyView = Type.Object({
  id: Type.String(),
  name: Type.String(),
  organisation: Organisation,
  scopes: Type.Array(Type.String()),
  routes: Type.Union([Type.Array(Type.String()), Type.Null()]),
  created_at: Type.String(),
  expires_at: NullableDateTime,
  last_used_at: NullableDateTime,
  revoked_at: NullableDateTime,
  /** active, expired or revoked at the platform's now. */
  state: Type.String(),
});

interface ApiKeyRow {
  id: string;
  name: string;
  organisation_id: string;
  organisation_name: string;
  organisation_kind: string;
  scopes: string[];
  routes: string[] | null;
  created_at: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const API_KEY_COLUMNS = `k.id, k.name, k.organisation_id, o.name AS organisation_name, o.kind AS organisation_kind,
  k.scopes, k.routes, k.created_at, k.expires_at, k.last_used_at, k.revoked_at`;

function apiKeyView(row: ApiKeyRow, now: Date) {
  const iso = (d: Date | null) => (d === null ? null : d.toISOString());
  return {
    id: row.id,
    name: row.name,
    organisation: { id: row.organisation_id, name: row.organisation_name, kind: row.organisation_kind },
    scopes: row.scopes,
    routes: row.routes,
    created_at: row.created_at.toISOString(),
    expires_at: iso(row.expires_at),
    last_used_at: iso(row.last_used_at),
    revoked_at: iso(row.revoked_at),
    state:
      row.revoked_at !== null
        ? 'revoked'
        : row.expires_at !== null && row.expires_at.getTime() <= now.getTime()
          ? 'expired'
          : 'active',
  };
}

export const identityFeature: Feature = {
  name: 'identity',
  api(app, ctx) {
    app.post<{ Body: { name: string; kind: OrganisationKind } }>(
      '/api/v1/console/organisations',
      {
        config: { auth: AUTHORITY_ADMIN },
        schema: { body: OrganisationBody, response: { 201: Organisation } },
      },
      async (request, reply) => {
        const { rows } = await ctx.db.query(
          'INSERT INTO organisations (name, kind, created_at) VALUES ($1, $2, $3) RETURNING id, name, kind',
          [request.body.name, request.body.kind, ctx.clock.now()],
        );
        return reply.code(201).send(rows[0]);
      },
    );

    app.get(
      '/api/v1/console/organisations',
      {
        config: { auth: AUTHORITY_ADMIN },
        schema: { response: { 200: Type.Object({ items: Type.Array(Organisation) }) } },
      },
      async () => {
        const { rows } = await ctx.db.query(
          'SELECT id, name, kind FROM organisations ORDER BY created_at, id',
        );
        return { items: rows };
      },
    );

    // The keys of one organisation, or of all; revoked and expired ones too unless state says otherwise.
    app.get<{ Querystring: { organisation_id?: string; state?: string } }>(
      '/api/v1/console/api-keys',
      {
        config: { auth: AUTHORITY_ADMIN },
        schema: {
          querystring: Type.Object(
            {
              organisation_id: Type.Optional(Type.String({ format: 'uuid' })),
              state: Type.Optional(Type.Union(['active', 'expired', 'revoked'].map((v) => Type.Literal(v)))),
            },
            { additionalProperties: false },
          ),
          response: { 200: Type.Object({ items: Type.Array(ApiKeyView) }) },
        },
      },
      async (request) => {
        const now = ctx.clock.now();
        const { rows } = await ctx.db.query<ApiKeyRow>(
          `SELECT ${API_KEY_COLUMNS} FROM api_keys k JOIN organisations o ON o.id = k.organisation_id
            WHERE ($1::uuid IS NULL OR k.organisation_id = $1)
            ORDER BY o.name, k.created_at DESC, k.id`,
          [request.query.organisation_id?.toLowerCase() ?? null],
        );
        const items = rows.map((row) => apiKeyView(row, now));
        return { items: request.query.state ? items.filter((k) => k.state === request.query.state) : items };
      },
    );

    app.get<{ Params: { id: string } }>(
      '/api/v1/console/api-keys/:id',
      { config: { auth: AUTHORITY_ADMIN }, schema: { response: { 200: ApiKeyView } } },
      async (request) => {
        const id = pathUuid(request.params.id, 'API key');
        const { rows } = await ctx.db.query<ApiKeyRow>(
          `SELECT ${API_KEY_COLUMNS} FROM api_keys k JOIN organisations o ON o.id = k.organisation_id WHERE k.id = $1`,
          [id],
        );
        if (!rows[0]) throw notFound('API key', id);
        return apiKeyView(rows[0], ctx.clock.now());
      },
    );

    app.post<{
      Params: { id: string };
      Body: { name: string; scopes: string[]; routes?: string[]; expires_at?: string };
    }>(
      '/api/v1/console/organisations/:id/api-keys',
      {
        config: { auth: AUTHORITY_ADMIN },
        schema: {
          body: ApiKeyBody,
          response: { 201: Type.Object({ id: Type.String(), key: Type.String() }) },
        },
      },
      async (request, reply) => {
        const orgId = pathUuid(request.params.id, 'organisation');
        const unknown = request.body.scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
        if (unknown.length > 0) {
          throw validationFailed(
            unknown.map((s) => ({
              path: `/scopes/${request.body.scopes.indexOf(s)}`,
              code: 'not_allowed',
              message: `unknown scope ${s}; known: ${SCOPES.join(', ')}`,
            })),
          );
        }
        const now = ctx.clock.now();
        const expiresAt = request.body.expires_at === undefined ? null : new Date(request.body.expires_at);
        if (expiresAt !== null && expiresAt.getTime() <= now.getTime()) {
          throw validationFailed([
            { path: '/expires_at', code: 'out_of_range', message: 'an expiry must be in the future' },
          ]);
        }
        const { rows: orgs } = await ctx.db.query('SELECT id FROM organisations WHERE id = $1', [orgId]);
        if (orgs.length === 0) throw notFound('organisation', orgId);
        const { key, hash } = generateApiKey();
        const { rows } = await ctx.db.query<{ id: string }>(
          `INSERT INTO api_keys (organisation_id, name, key_hash, scopes, routes, created_at, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
          [orgId, request.body.name, hash, request.body.scopes, request.body.routes ?? null, now, expiresAt],
        );
        request.log.info(
          { keyId: rows[0]!.id, organisation: orgId, by: principalOf(request).id },
          'api key issued',
        );
        return reply.code(201).send({ id: rows[0]!.id, key });
      },
    );

    app.delete<{ Params: { id: string } }>(
      '/api/v1/console/api-keys/:id',
      { config: { auth: AUTHORITY_ADMIN }, schema: { response: { 204: NoBody } } },
      async (request, reply) => {
        const id = pathUuid(request.params.id, 'API key');
        const { rowCount } = await ctx.db.query(
          'UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL',
          [id, ctx.clock.now()],
        );
        if (rowCount === 0) throw notFound('API key', id);
        if (id === principalOf(request).id) request.log.warn({ keyId: id }, 'a key revoked itself');
        return reply.code(204).send();
      },
    );
  },
};
