import { Submission } from '@ooh/protocol';
import { principalOf } from '../auth/plugin.js';
import { isAuthority, type RouteAuth } from '../auth/principal.js';
import { categories } from '../categories/catalogue.js';
import { withTransaction } from '../db/pool.js';
import type { Feature } from '../features.js';
import { validationFailed } from '../http/problem.js';
import { expandStructureSets, structuresByIds } from '../structures/repository.js';
import { notFound, pathUuid } from '../shared/ids.js';
import {
  findSubmission,
  insertSubmission,
  SUBMISSION_COLUMNS,
  type SubmissionRow,
  submissionStructureIds,
  submissionView,
} from './repository.js';
import { validateSubmission } from './validate.js';

const CREATE: RouteAuth = {
  anyOf: [{ scope: 'write:submissions', kinds: ['operator', 'agency', 'advertiser'] }],
};
const READ: RouteAuth = {
  anyOf: [
    { scope: 'write:submissions' },
    { scope: 'read:submissions' },
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
  ],
};

export const submissionsFeature: Feature = {
  name: 'submissions',
  api(app, ctx) {
    // spec: POST {base_url}/api/v1/submissions — create a draft.
    app.post(
      '/api/v1/submissions',
      { config: { auth: CREATE }, schema: { response: { 201: Submission } } },
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
      { config: { auth: READ } },
      async (request) => {
        const principal = principalOf(request);
        const state = typeof request.query.state === 'string' ? request.query.state : null;
        const limit = Math.min(Math.max(Number(request.query.limit) || 500, 1), 2000);
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
      { config: { auth: READ } },
      async (request) => {
        const principal = principalOf(request);
        const id = pathUuid(request.params.id, 'submission');
        const row = await findSubmission(ctx.db, id);
        // The owner organisation and the authority see a submission; anyone else gets 404.
        if (!row || (!isAuthority(principal) && row.organisation_id !== principal.organisation.id)) {
          throw notFound('submission', id);
        }
        return { ...submissionView(row), structure_ids: await submissionStructureIds(ctx.db, id) };
      },
    );
  },
};
