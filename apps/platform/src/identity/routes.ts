import { Type } from '@sinclair/typebox';
import { generateApiKey } from '../auth/api-keys.js';
import { principalOf } from '../auth/plugin.js';
import { ORGANISATION_KINDS, type OrganisationKind, SCOPES } from '../auth/principal.js';
import type { Feature } from '../features.js';
import { validationFailed } from '../http/problem.js';
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

    app.get('/api/v1/console/organisations', { config: { auth: AUTHORITY_ADMIN } }, async () => {
      const { rows } = await ctx.db.query('SELECT id, name, kind FROM organisations ORDER BY created_at, id');
      return { items: rows };
    });

    app.post<{ Params: { id: string }; Body: { name: string; scopes: string[]; routes?: string[] } }>(
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
        const { rows: orgs } = await ctx.db.query('SELECT id FROM organisations WHERE id = $1', [orgId]);
        if (orgs.length === 0) throw notFound('organisation', orgId);
        const { key, hash } = generateApiKey();
        const { rows } = await ctx.db.query<{ id: string }>(
          `INSERT INTO api_keys (organisation_id, name, key_hash, scopes, routes, created_at)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
          [orgId, request.body.name, hash, request.body.scopes, request.body.routes ?? null, ctx.clock.now()],
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
      { config: { auth: AUTHORITY_ADMIN } },
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
