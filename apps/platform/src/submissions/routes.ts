import { Submission } from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import { principalOf } from '../auth/plugin.js';
import { isAuthority, type RouteAuth } from '../auth/principal.js';
import { categories } from '../categories/catalogue.js';
import { withTransaction } from '../db/pool.js';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { ItemsOf, Nullable } from '../http/responses.js';
import { expandStructureSets, structuresByIds } from '../structures/repository.js';
import { notFound, pathUuid } from '../shared/ids.js';
import {
  findSubmission,
  insertSubmission,
  lockSubmission,
  SUBMISSION_COLUMNS,
  type SubmissionRow,
  submissionReview,
  submissionStructureIds,
  submissionView,
  updateDraft,
} from './repository.js';
import { registerDecidedRoute } from './register.js';
import { validateSubmission } from './validate.js';

const CREATE: RouteAuth = {
  anyOf: [{ scope: 'write:submissions', kinds: ['operator', 'agency', 'advertiser'] }],
};
const READ: RouteAuth = {
  anyOf: [
    // Submitters only, as for media and reports: an authority key given write:submissions (which submits nothing)
    // read every organisation's submissions, since the authority sees them all.
    { scope: 'write:submissions', kinds: ['operator', 'agency', 'advertiser'] },
    { scope: 'read:submissions' },
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
  ],
};

/** A submission as listed: the resource of the spec and when it was created. */
const SubmissionListed = Type.Object({ ...Submission.properties, created_at: Type.String() });

/** One submission with what its owner and the authority see of its review (repository.ts submissionReview). */
const SubmissionDetails = Type.Object({
  ...Submission.properties,
  advertiser_bin: Nullable(Type.String()),
  structure_ids: Type.Array(Type.String()),
  media: Nullable(
    Type.Object({
      sha256: Type.String(),
      media_type: Type.String(),
      size_bytes: Type.Integer(),
      width: Type.Integer(),
      height: Type.Integer(),
      duration_ms: Nullable(Type.Integer()),
      uploaded_at: Type.String(),
    }),
  ),
  approval_number: Nullable(Type.String()),
  approval_revoked_at: Nullable(Type.String()),
  reject_reason: Nullable(Type.String()),
});

/** Optional fields of a submission that an edit clears with null. */
const CLEARABLE = new Set(['advertiser_bin', 'category_id', 'external_refs', 'declared_daily_plays']);

/** The draft as a create body, with the edit laid over it (validated afterwards with the rules of create). */
function mergeDraft(
  current: SubmissionRow,
  patch: Record<string, unknown>,
  replaceStructures: boolean,
): Record<string, unknown> {
  // Without a prototype: a key of the patch is a field like any other, never __proto__'s setter (the body's keys
  // are refused before this anyway: src/http/server.ts).
  const merged: Record<string, unknown> = Object.assign(Object.create(null) as Record<string, unknown>, {
    advertiser_name: current.advertiser_name,
    period_from: current.period_from,
    period_to: current.period_to,
    channel: current.channel,
    fast_track: current.fast_track,
  });
  if (current.advertiser_bin !== null) merged['advertiser_bin'] = current.advertiser_bin;
  if (current.category_id !== null) merged['category_id'] = current.category_id;
  if (current.external_refs !== null) merged['external_refs'] = current.external_refs;
  if (current.declared_daily_plays !== null) merged['declared_daily_plays'] = current.declared_daily_plays;
  for (const [key, value] of Object.entries(patch)) {
    if (value === null && CLEARABLE.has(key)) delete merged[key];
    else merged[key] = value;
  }
  // spec structure_ids: "Together with structure_set_ids this is the whole list": sets alone mean no explicit ids.
  if (replaceStructures && !('structure_ids' in patch)) merged['structure_ids'] = [];
  return merged;
}

export const submissionsFeature: Feature = {
  name: 'submissions',
  api(app, ctx) {
    // The authority's register of decided submissions (issue 25 item 3; register.ts).
    registerDecidedRoute(app, ctx);

    // spec: POST {base_url}/api/v1/submissions — create a draft.
    app.post(
      '/api/v1/submissions',
      { config: { auth: CREATE, jsonBody: true }, schema: { response: { 201: Submission } } },
      async (request, reply) => {
        const principal = principalOf(request);
        const result = await validateSubmission(request.body, {
          kind: principal.organisation.kind,
          organisationId: principal.organisation.id,
          expandSets: (ids) => expandStructureSets(ctx.db, principal.organisation.id, ids),
          structures: (ids) => structuresByIds(ctx.db, ids),
          categoryExists: (id) => categories().get(id) !== undefined,
        });
        if (!result.ok) throw validationFailed(result.errors);
        const row = await withTransaction(ctx.db, (client) =>
          insertSubmission(client, principal.organisation.id, result.value, ctx.clock.now()),
        );
        reply.header('location', `/api/v1/submissions/${row.id}`);
        return reply.code(201).send(submissionView(row));
      },
    );

    // The caller's submissions (the authority: everyone's), optionally by state; newest first.
    app.get<{ Querystring: { state?: string; limit?: string } }>(
      '/api/v1/submissions',
      { config: { auth: READ }, schema: { response: { 200: ItemsOf(SubmissionListed) } } },
      async (request) => {
        const principal = principalOf(request);
        const state = typeof request.query.state === 'string' ? request.query.state : null;
        // The states a submission can be in (migration 030); anything else is a mistake, not an empty list.
        if (state !== null && !['draft', 'in_review', 'approved', 'rejected'].includes(state)) {
          throw validationFailed([
            {
              path: 'querystring:/state',
              code: 'not_allowed',
              message: 'one of draft, in_review, approved, rejected',
            },
          ]);
        }
        const limit = Math.min(Math.max(Math.trunc(Number(request.query.limit)) || 500, 1), 2000);
        const { rows } = await ctx.db.query<SubmissionRow>(
          `SELECT ${SUBMISSION_COLUMNS} FROM submissions
            WHERE ($1::uuid IS NULL OR organisation_id = $1) AND ($2::text IS NULL OR state = $2)
            ORDER BY created_at DESC, number DESC LIMIT $3`,
          [isAuthority(principal) ? null : principal.organisation.id, state, limit],
        );
        return { items: rows.map((r) => ({ ...submissionView(r), created_at: r.created_at.toISOString() })) };
      },
    );

    app.get<{ Params: { id: string } }>(
      '/api/v1/submissions/:id',
      { config: { auth: READ }, schema: { response: { 200: SubmissionDetails } } },
      async (request) => {
        const principal = principalOf(request);
        const id = pathUuid(request.params.id, 'submission');
        const row = await findSubmission(ctx.db, id);
        // The owner organisation and the authority see a submission; anyone else gets 404.
        if (!row || (!isAuthority(principal) && row.organisation_id !== principal.organisation.id)) {
          throw notFound('submission', id);
        }
        const [structureIds, review] = await Promise.all([
          submissionStructureIds(ctx.db, id),
          submissionReview(ctx.db, id),
        ]);
        return {
          ...submissionView(row),
          advertiser_bin: row.advertiser_bin,
          structure_ids: structureIds,
          ...review,
        };
      },
    );

    // Edits a draft (docs/decisions.md "Submissions": the spec's create rules presuppose it). The body holds the
    // fields to change, with the rules of create; null clears an optional field. Sending structure_ids or
    // structure_set_ids replaces the whole list; sending neither keeps it.
    app.patch<{ Params: { id: string } }>(
      '/api/v1/submissions/:id',
      { config: { auth: CREATE, jsonBody: true }, schema: { response: { 200: Submission } } },
      async (request) => {
        const principal = principalOf(request);
        const id = pathUuid(request.params.id, 'submission');
        const body = request.body;
        if (typeof body !== 'object' || body === null || Array.isArray(body)) {
          throw validationFailed([{ path: '/', code: 'type', message: 'the body must be a JSON object' }]);
        }
        const patch = body as Record<string, unknown>;
        const row = await withTransaction(ctx.db, async (client) => {
          // Locked: a send (which locks the same row) cannot pass between the check and the write.
          const current = await lockSubmission(client, id);
          if (!current || current.organisation_id !== principal.organisation.id)
            throw notFound('submission', id);
          if (current.state !== 'draft') {
            throw new ProblemError(
              'state_conflict',
              `submission ${current.number} is ${current.state}; only a draft can change`,
            );
          }
          const replaceStructures = 'structure_ids' in patch || 'structure_set_ids' in patch;
          const result = await validateSubmission(mergeDraft(current, patch, replaceStructures), {
            kind: principal.organisation.kind,
            organisationId: principal.organisation.id,
            expandSets: (ids) => expandStructureSets(client, principal.organisation.id, ids),
            structures: (ids) => structuresByIds(client, ids),
            categoryExists: (cid) => categories().get(cid) !== undefined,
            keptStructureIds: await submissionStructureIds(client, id),
            pruneDeclared: replaceStructures && !('declared_daily_plays' in patch),
          });
          if (!result.ok) throw validationFailed(result.errors);
          return updateDraft(client, id, result.value, replaceStructures, ctx.clock.now());
        });
        return submissionView(row);
      },
    );
  },
};
