import { Type } from '@sinclair/typebox';
import type { FieldError } from '@ooh/protocol';
import { principalOf } from '../auth/plugin.js';
import { isUniqueViolation, withTransaction } from '../db/pool.js';
import type { Feature } from '../context.js';
import { validationFailed } from '../http/problem.js';
import { ItemsOf, Nullable } from '../http/responses.js';
import { AUTHORITY_ADMIN } from '../shared/auth-grants.js';
import { isUuid, notFound, pathUuid } from '../shared/ids.js';
import { patchIdentifiers, screenIdErrors, screenIdViolation } from './identifiers.js';
import { importStructures, operatorErrors } from './import.js';
import { STRUCTURE_COLUMNS, type StructureRow, structuresByIds, structureView } from './repository.js';
import {
  coordinateErrors,
  StructureBody,
  STRUCTURE_IMPORT_MAX_BYTES,
  StructureIdentifiersPatch,
  StructureImportBody,
  venueTypeErrors,
} from './schema.js';
import { venueTaxonomy } from './venue-taxonomy.js';

const SetBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    structure_ids: Type.Array(Type.String({ format: 'uuid' }), {
      minItems: 1,
      maxItems: 2000,
      uniqueItems: true,
    }),
  },
  { additionalProperties: false },
);

/** A structure as the console and submitters see it (repository.ts structureView). */
const StructureView = Type.Object({
  id: Type.String(),
  organisation_id: Type.String(),
  code: Type.String(),
  district: Type.String(),
  format: Type.String(),
  address: Nullable(Type.String()),
  lat: Nullable(Type.Number()),
  lon: Nullable(Type.Number()),
  retired_at: Nullable(Type.String()),
  venue_type_id: Nullable(Type.Integer()),
  openooh_screen_id: Nullable(Type.String()),
  geopath_spot_id: Nullable(Type.String()),
});

/** The answer of an import (import.ts ImportAnswer). */
const ImportAnswer = Type.Object({
  dry_run: Type.Boolean(),
  created: Type.Integer(),
  unchanged: Type.Integer(),
  items: Type.Array(
    Type.Object({
      index: Type.Integer(),
      code: Type.String(),
      status: Type.String(),
      id: Nullable(Type.String()),
    }),
  ),
});

const StructureSet = Type.Object({
  id: Type.String(),
  name: Type.String(),
  structure_ids: Type.Array(Type.String()),
});

const VenueTypes = Type.Object({
  taxonomy: Type.String(),
  version: Type.String(),
  source: Type.String(),
  items: Type.Array(
    Type.Object({
      id: Type.Integer(),
      parent_id: Nullable(Type.Integer()),
      name: Type.String(),
      deprecated: Type.Boolean(),
    }),
  ),
});

const SUBMITTERS = {
  anyOf: [{ scope: 'write:submissions', kinds: ['operator', 'agency', 'advertiser'] }],
} as const;
const SUBMITTER_READ = {
  anyOf: [
    { scope: 'write:submissions', kinds: ['operator', 'agency', 'advertiser'] },
    { scope: 'read:submissions', kinds: ['operator', 'agency', 'advertiser'] },
  ],
} as const;

export const structuresFeature: Feature = {
  name: 'structures',
  // The OpenOOH Venue Taxonomy shipped with the platform: public reference data, as the IAB categories are.
  apiPublic(app) {
    app.get('/api/v1/venue-types', { schema: { response: { 200: VenueTypes } } }, async (_request, reply) => {
      const taxonomy = venueTaxonomy();
      reply.header('cache-control', 'public, max-age=3600');
      return {
        taxonomy: 'OpenOOH Venue Taxonomy',
        version: taxonomy.version,
        source: taxonomy.source,
        items: taxonomy.all.map((v) => ({
          id: v.id,
          parent_id: v.parent_id,
          name: v.name,
          deprecated: v.deprecated,
        })),
      };
    });
  },
  api(app, ctx) {
    // Read at startup, as a missing or broken taxonomy file is a fault of the installation, not of a request.
    venueTaxonomy();

    app.post<{ Body: StructureBody }>(
      '/api/v1/console/structures',
      {
        config: { auth: AUTHORITY_ADMIN },
        schema: { body: StructureBody, response: { 201: StructureView } },
      },
      async (request, reply) => {
        const b = request.body;
        const errors: FieldError[] = [
          ...(await operatorErrors(ctx.db, b.organisation_id)),
          ...coordinateErrors(b),
          ...venueTypeErrors(b.venue_type_id),
          ...(await screenIdErrors(ctx.db, b)),
        ];
        if (errors.length > 0) throw validationFailed(errors);
        try {
          const { rows } = await ctx.db.query<StructureRow>(
            `INSERT INTO structures (organisation_id, code, district, format, address, lat, lon, created_at,
                                     venue_type_id, openooh_screen_id, geopath_spot_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${STRUCTURE_COLUMNS}`,
            [
              b.organisation_id,
              b.code,
              b.district,
              b.format,
              b.address ?? null,
              b.lat ?? null,
              b.lon ?? null,
              ctx.clock.now(),
              b.venue_type_id ?? null,
              b.openooh_screen_id ?? null,
              b.geopath_spot_id ?? null,
            ],
          );
          return reply.code(201).send(structureView(rows[0]!));
        } catch (error) {
          const screenId = screenIdViolation(error);
          if (screenId) throw validationFailed([screenId]);
          if (isUniqueViolation(error)) {
            throw validationFailed([
              { path: '/code', code: 'duplicate', message: `structure code ${b.code} is taken` },
            ]);
          }
          throw error;
        }
      },
    );

    // Many structures of one operator at once (the console's CSV import): all or nothing, safe to send again
    // (import.ts says how each row is judged).
    app.post<{ Body: StructureImportBody }>(
      '/api/v1/console/structures/import',
      {
        config: { auth: AUTHORITY_ADMIN },
        bodyLimit: STRUCTURE_IMPORT_MAX_BYTES,
        schema: { body: StructureImportBody, response: { 200: ImportAnswer } },
      },
      async (request) => importStructures(ctx, request.body),
    );

    // The venue type and screen identifiers of one structure (identifiers.ts says what may change and when).
    app.patch<{ Params: { id: string }; Body: StructureIdentifiersPatch }>(
      '/api/v1/console/structures/:id',
      {
        config: { auth: AUTHORITY_ADMIN },
        schema: { body: StructureIdentifiersPatch, response: { 200: StructureView } },
      },
      async (request) => patchIdentifiers(ctx, pathUuid(request.params.id, 'structure'), request.body),
    );

    app.post<{ Params: { id: string } }>(
      '/api/v1/console/structures/:id/retire',
      { config: { auth: AUTHORITY_ADMIN }, schema: { response: { 200: StructureView } } },
      async (request) => {
        const id = pathUuid(request.params.id, 'structure');
        const { rows } = await ctx.db.query<StructureRow>(
          `UPDATE structures SET retired_at = COALESCE(retired_at, $2) WHERE id = $1 RETURNING ${STRUCTURE_COLUMNS}`,
          [id, ctx.clock.now()],
        );
        if (!rows[0]) throw notFound('structure', id);
        return structureView(rows[0]);
      },
    );

    app.get<{ Querystring: { organisation_id?: string } }>(
      '/api/v1/console/structures',
      { config: { auth: AUTHORITY_ADMIN }, schema: { response: { 200: ItemsOf(StructureView) } } },
      async (request) => {
        const org = request.query.organisation_id;
        const { rows } = await ctx.db.query<StructureRow>(
          `SELECT ${STRUCTURE_COLUMNS} FROM structures WHERE ($1::uuid IS NULL OR organisation_id = $1) ORDER BY code`,
          [isUuid(org) ? org : null],
        );
        return { items: rows.map(structureView) };
      },
    );

    // Structures a submitter may choose: an operator its own, agencies and advertisers every active one.
    app.get(
      '/api/v1/structures',
      { config: { auth: SUBMITTER_READ }, schema: { response: { 200: ItemsOf(StructureView) } } },
      async (request) => {
        const principal = principalOf(request);
        const { rows } = await ctx.db.query<StructureRow>(
          `SELECT ${STRUCTURE_COLUMNS} FROM structures
          WHERE retired_at IS NULL AND ($1::uuid IS NULL OR organisation_id = $1) ORDER BY code`,
          [principal.organisation.kind === 'operator' ? principal.organisation.id : null],
        );
        return { items: rows.map(structureView) };
      },
    );

    app.get(
      '/api/v1/structure-sets',
      { config: { auth: SUBMITTER_READ }, schema: { response: { 200: ItemsOf(StructureSet) } } },
      async (request) => {
        const { rows } = await ctx.db.query(
          `SELECT s.id, s.name, ARRAY(SELECT m.structure_id FROM structure_set_members m WHERE m.set_id = s.id
                 ORDER BY m.position) AS structure_ids
           FROM structure_sets s WHERE s.organisation_id = $1 ORDER BY s.name, s.id`,
          [principalOf(request).organisation.id],
        );
        return { items: rows };
      },
    );

    app.post<{ Body: { name: string; structure_ids: string[] } }>(
      '/api/v1/structure-sets',
      { config: { auth: SUBMITTERS }, schema: { body: SetBody, response: { 201: StructureSet } } },
      async (request, reply) => {
        const principal = principalOf(request);
        const ids = request.body.structure_ids.map((s) => s.toLowerCase());
        const found = await structuresByIds(ctx.db, ids);
        const errors: FieldError[] = [];
        ids.forEach((id, i) => {
          const s = found.get(id);
          if (!s)
            errors.push({ path: `/structure_ids/${i}`, code: 'not_found', message: `no structure ${id}` });
          else if (s.retired_at)
            errors.push({
              path: `/structure_ids/${i}`,
              code: 'retired',
              message: `structure ${s.code} is retired`,
            });
          else if (
            principal.organisation.kind === 'operator' &&
            s.organisation_id !== principal.organisation.id
          ) {
            errors.push({
              path: `/structure_ids/${i}`,
              code: 'not_allowed',
              message: `structure ${s.code} is not yours`,
            });
          }
        });
        if (errors.length > 0) throw validationFailed(errors);
        const set = await withTransaction(ctx.db, async (client) => {
          const { rows } = await client.query<{ id: string; name: string }>(
            'INSERT INTO structure_sets (organisation_id, name, created_at) VALUES ($1, $2, $3) RETURNING id, name',
            [principal.organisation.id, request.body.name, ctx.clock.now()],
          );
          await client.query(
            `INSERT INTO structure_set_members (set_id, structure_id, position)
             SELECT $1, s.id, s.ord FROM unnest($2::uuid[]) WITH ORDINALITY AS s(id, ord)`,
            [rows[0]!.id, ids],
          );
          return rows[0]!;
        });
        return reply.code(201).send({ id: set.id, name: set.name, structure_ids: ids });
      },
    );
  },
};
