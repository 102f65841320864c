import { importPublicKey } from '@ooh/crypto';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { principalOf } from '../auth/plugin.js';
import { isAuthority } from '../auth/principal.js';
import { withTransaction } from '../db/pool.js';
import type { Feature } from '../context.js';
import { validationFailed } from '../http/problem.js';
import { ItemsOf, NoBody, Nullable } from '../http/responses.js';
import { FLEET_ADMIN } from '../shared/auth-grants.js';
import { notFound, pathUuid } from '../shared/ids.js';

/** Grace of a rotated-out key (spec: "A key rotated out stays accepted for 24 hours"). */
export const CMS_KEY_GRACE_MS = 24 * 3600 * 1000;

const PublicKey = Type.String({ minLength: 40, maxLength: 400 });
const InstallationBody = Type.Object(
  {
    organisation_id: Type.String({ format: 'uuid' }),
    name: Type.String({ minLength: 1, maxLength: 200 }),
    kind: Type.String({ minLength: 1, maxLength: 100 }),
    public_key: PublicKey,
  },
  { additionalProperties: false },
);
const KeyBody = Type.Object({ public_key: PublicKey }, { additionalProperties: false });
const PlayerBody = Type.Object(
  { structure_id: Type.String({ format: 'uuid' }) },
  { additionalProperties: false },
);
const InstallationView = Type.Object({
  id: Type.String(),
  organisation_id: Type.String(),
  name: Type.String(),
  kind: Type.String(),
  created_at: Type.String(),
});
/** One installation with its keys (never the key itself: it is public, but nobody reads it back) and players. */
const InstallationDetails = Type.Object({
  ...InstallationView.properties,
  keys: Type.Array(
    Type.Object({ id: Type.String(), registered_at: Type.String(), accepted_until: Nullable(Type.String()) }),
  ),
  players: Type.Array(
    Type.Object({
      external_id: Type.String(),
      structure_id: Type.String(),
      structure_code: Type.String(),
      mapped_at: Type.String(),
    }),
  ),
});
const KeyRegistered = Type.Object({
  key_id: Type.String(),
  registered_at: Type.String(),
  previous_keys_accepted_until: Type.String(),
});
const PlayerMapping = Type.Object({
  installation_id: Type.String(),
  external_id: Type.String(),
  structure_id: Type.String(),
  mapped_at: Type.String(),
});

const EXTERNAL_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

function checkP256(publicKey: string, path: string): void {
  try {
    importPublicKey(publicKey);
  } catch (error) {
    throw validationFailed([
      {
        path,
        code: 'invalid_key',
        message: `not an ECDSA P-256 public key as base64 SPKI: ${(error as Error).message}`,
      },
    ]);
  }
}

export const cmsFeature: Feature = {
  name: 'cms',
  api(app, ctx) {
    /** The installation, if the caller may manage it (authority: any; operator: its own). */
    const installationFor = async (request: FastifyRequest, rawId: string | undefined) => {
      const id = pathUuid(rawId, 'CMS installation');
      const principal = principalOf(request);
      const { rows } = await ctx.db.query<{ id: string; organisation_id: string }>(
        'SELECT id, organisation_id FROM cms_installations WHERE id = $1',
        [id],
      );
      const row = rows[0];
      if (!row || (!isAuthority(principal) && row.organisation_id !== principal.organisation.id)) {
        throw notFound('CMS installation', id);
      }
      return row;
    };

    app.post<{ Body: { organisation_id: string; name: string; kind: string; public_key: string } }>(
      '/api/v1/console/cms-installations',
      {
        config: { auth: FLEET_ADMIN },
        schema: { body: InstallationBody, response: { 201: Type.Object({ id: Type.String() }) } },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const b = request.body;
        checkP256(b.public_key, '/public_key');
        const { rows: orgs } = await ctx.db.query<{ kind: string }>(
          'SELECT kind FROM organisations WHERE id = $1',
          [b.organisation_id],
        );
        const org = orgs[0];
        if (!org || (!isAuthority(principal) && b.organisation_id !== principal.organisation.id)) {
          throw validationFailed([
            { path: '/organisation_id', code: 'not_found', message: 'no such organisation' },
          ]);
        }
        if (org.kind !== 'operator') {
          throw validationFailed([
            {
              path: '/organisation_id',
              code: 'not_allowed',
              message: 'CMS installations belong to operators',
            },
          ]);
        }
        const now = ctx.clock.now();
        const id = await withTransaction(ctx.db, async (client) => {
          const { rows } = await client.query<{ id: string }>(
            'INSERT INTO cms_installations (organisation_id, name, kind, created_at) VALUES ($1, $2, $3, $4) RETURNING id',
            [b.organisation_id, b.name, b.kind, now],
          );
          await client.query(
            'INSERT INTO cms_keys (installation_id, public_key_spki, registered_at) VALUES ($1, $2, $3)',
            [rows[0]!.id, b.public_key, now],
          );
          return rows[0]!.id;
        });
        return reply.code(201).send({ id });
      },
    );

    app.get(
      '/api/v1/console/cms-installations',
      { config: { auth: FLEET_ADMIN }, schema: { response: { 200: ItemsOf(InstallationView) } } },
      async (request) => {
        const principal = principalOf(request);
        const { rows } = await ctx.db.query(
          `SELECT id, organisation_id, name, kind, created_at FROM cms_installations
          WHERE $1::uuid IS NULL OR organisation_id = $1 ORDER BY name, id`,
          [isAuthority(principal) ? null : principal.organisation.id],
        );
        return { items: rows };
      },
    );

    app.get<{ Params: { id: string } }>(
      '/api/v1/console/cms-installations/:id',
      { config: { auth: FLEET_ADMIN }, schema: { response: { 200: InstallationDetails } } },
      async (request) => {
        const inst = await installationFor(request, request.params.id);
        const { rows: details } = await ctx.db.query(
          'SELECT id, organisation_id, name, kind, created_at FROM cms_installations WHERE id = $1',
          [inst.id],
        );
        const { rows: keys } = await ctx.db.query<{
          id: string;
          registered_at: Date;
          superseded_at: Date | null;
        }>(
          'SELECT id, registered_at, superseded_at FROM cms_keys WHERE installation_id = $1 ORDER BY registered_at',
          [inst.id],
        );
        const { rows: players } = await ctx.db.query(
          `SELECT p.external_id, p.structure_id, s.code AS structure_code, p.mapped_at
             FROM cms_players p JOIN structures s ON s.id = p.structure_id
            WHERE p.installation_id = $1 AND p.removed_at IS NULL ORDER BY p.external_id`,
          [inst.id],
        );
        return {
          ...details[0],
          keys: keys.map((k) => ({
            id: k.id,
            registered_at: k.registered_at.toISOString(),
            accepted_until: k.superseded_at
              ? new Date(k.superseded_at.getTime() + CMS_KEY_GRACE_MS).toISOString()
              : null,
          })),
          players,
        };
      },
    );

    app.post<{ Params: { id: string }; Body: { public_key: string } }>(
      '/api/v1/console/cms-installations/:id/keys',
      { config: { auth: FLEET_ADMIN }, schema: { body: KeyBody, response: { 201: KeyRegistered } } },
      async (request, reply) => {
        const inst = await installationFor(request, request.params.id);
        checkP256(request.body.public_key, '/public_key');
        const now = ctx.clock.now();
        const key = await withTransaction(ctx.db, async (client) => {
          // Serialise rotations of one installation.
          await client.query('SELECT id FROM cms_installations WHERE id = $1 FOR UPDATE', [inst.id]);
          await client.query(
            'UPDATE cms_keys SET superseded_at = $2 WHERE installation_id = $1 AND superseded_at IS NULL',
            [inst.id, now],
          );
          const { rows } = await client.query<{ id: string }>(
            'INSERT INTO cms_keys (installation_id, public_key_spki, registered_at) VALUES ($1, $2, $3) RETURNING id',
            [inst.id, request.body.public_key, now],
          );
          return rows[0]!;
        });
        return reply.code(201).send({
          key_id: key.id,
          registered_at: now.toISOString(),
          previous_keys_accepted_until: new Date(now.getTime() + CMS_KEY_GRACE_MS).toISOString(),
        });
      },
    );

    app.put<{ Params: { id: string; external_id: string }; Body: { structure_id: string } }>(
      '/api/v1/console/cms-installations/:id/players/:external_id',
      { config: { auth: FLEET_ADMIN }, schema: { body: PlayerBody, response: { 200: PlayerMapping } } },
      async (request) => {
        const inst = await installationFor(request, request.params.id);
        const externalId = request.params.external_id;
        if (!EXTERNAL_ID.test(externalId)) {
          throw validationFailed([
            {
              path: 'params:/external_id',
              code: 'pattern',
              message: 'characters A-Za-z0-9._:@- , up to 128',
            },
          ]);
        }
        const structureId = request.body.structure_id.toLowerCase();
        const { rows: structures } = await ctx.db.query<{ organisation_id: string; retired_at: Date | null }>(
          'SELECT organisation_id, retired_at FROM structures WHERE id = $1',
          [structureId],
        );
        const s = structures[0];
        if (!s || s.organisation_id !== inst.organisation_id) {
          throw validationFailed([
            {
              path: '/structure_id',
              code: 'not_allowed',
              message: "not a structure of the installation's organisation",
            },
          ]);
        }
        if (s.retired_at)
          throw validationFailed([
            { path: '/structure_id', code: 'retired', message: 'structure is retired' },
          ]);
        const now = ctx.clock.now();
        await ctx.db.query(
          `INSERT INTO cms_players (installation_id, external_id, structure_id, mapped_at)
           VALUES ($1, $2, $3, $4)
           ON CONFLICT (installation_id, external_id)
           DO UPDATE SET structure_id = EXCLUDED.structure_id, mapped_at = EXCLUDED.mapped_at, removed_at = NULL`,
          [inst.id, externalId, structureId, now],
        );
        return {
          installation_id: inst.id,
          external_id: externalId,
          structure_id: structureId,
          mapped_at: now.toISOString(),
        };
      },
    );

    app.delete<{ Params: { id: string; external_id: string } }>(
      '/api/v1/console/cms-installations/:id/players/:external_id',
      { config: { auth: FLEET_ADMIN }, schema: { response: { 204: NoBody } } },
      async (request, reply) => {
        const inst = await installationFor(request, request.params.id);
        const { rowCount } = await ctx.db.query(
          'UPDATE cms_players SET removed_at = $3 WHERE installation_id = $1 AND external_id = $2 AND removed_at IS NULL',
          [inst.id, request.params.external_id, ctx.clock.now()],
        );
        if (rowCount === 0) throw notFound('player mapping', request.params.external_id);
        return reply.code(204).send();
      },
    );
  },
};
