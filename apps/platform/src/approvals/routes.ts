import {
  ApprovalEnvelope,
  CalendarDate,
  CreativeLookupItem,
  CreativeLookupRequest,
  CreativeLookupResponse,
  formatAlmaty,
  RevocationList,
  SHA256_HEX_PATTERN,
  Submission,
  Uuid,
} from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import { principalOf } from '../auth/plugin.js';
import { isAuthority, type Principal, type RouteAuth } from '../auth/principal.js';
import { loadAuthority } from '../authority/index.js';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { Nullable } from '../http/responses.js';
import { AUTHORITY_ADMIN } from '../shared/auth-grants.js';
import { notFound, pathUuid } from '../shared/ids.js';
import { findSubmission, submissionView } from '../submissions/repository.js';
import {
  approveSubmission,
  parseReason,
  REASON_MAX_CHARS,
  rejectSubmission,
  revokeApproval,
} from './decisions.js';
import { envelopeUrl } from './envelope.js';
import { lookupCreatives, type Viewer } from './lookup.js';
import { rejectReasonOf, visibleEnvelope } from './repository.js';
import { latestRevocationListText } from './revocations.js';
import { type ApprovalSettings, approvalSettings } from './settings.js';
import { registerSubmissionFlow } from './submission-flow.js';

/** spec: lookup "Scope read:creatives"; the envelope takes the same credentials. */
const READ_CREATIVES: RouteAuth = { anyOf: [{ scope: 'read:creatives' }] };

const SHA256_HEX = new RegExp(SHA256_HEX_PATTERN);
const viewerOf = (p: Principal): Viewer => ({
  organisationId: p.organisation.id,
  isAuthority: isAuthority(p),
});

const ApprovalIssued = Type.Object({ approval_number: Type.String(), envelope_url: Type.String() });
const ApprovalRevoked = Type.Object({
  approval_number: Type.String(),
  revoked_at: Type.String(),
  revocation_list_version: Type.Integer(),
});

/**
 * spec: lookup "{hashes: array of string, required; lowercase hexadecimal SHA-256 values; at most 500}"; unknown keys
 * refused. The host's ajv collects every error, so each bad hash is named in one 422.
 */
const LookupBody = Type.Object(CreativeLookupRequest.properties, { additionalProperties: false });
/** A rejection's or a revocation's reason; parseReason then refuses one of blanks only and trims it. */
const ReasonBody = Type.Object(
  { reason: Type.String({ minLength: 1, maxLength: REASON_MAX_CHARS }) },
  { additionalProperties: false },
);

/**
 * The approve body `{valid_from?, valid_until?, structure_ids?}` (decisions.ts approvalTerms, which then checks the
 * terms against the submission: no widening). Keyed by media type, so a request without a body is not validated: it
 * approves the requested period and structures.
 */
const ApproveBody = {
  content: {
    'application/json': {
      schema: Type.Object(
        {
          valid_from: Type.Optional(Nullable(CalendarDate)),
          valid_until: Type.Optional(Nullable(CalendarDate)),
          structure_ids: Type.Optional(Nullable(Type.Array(Uuid, { minItems: 1 }))),
        },
        { additionalProperties: false },
      ),
    },
  },
};

const SubmissionRejected = Type.Object({ ...Submission.properties, reject_reason: Nullable(Type.String()) });

/**
 * Approvals (issue "Approvals"): media upload and sending of submissions, the authority's decisions with
 * signed envelopes and ledger leaves, revocation lists, and creative lookups.
 */
export function createApprovalsFeature(options: Partial<ApprovalSettings> = {}): Feature {
  return {
    name: 'approvals',
    async api(app, ctx) {
      const settings = { ...approvalSettings(ctx.config.settings), ...options };
      await registerSubmissionFlow(app, ctx, settings);

      // --- the authority's console: decide and revoke ---------------------------------------------------
      app.post<{ Params: { id: string } }>(
        '/api/v1/console/submissions/:id/approve',
        {
          config: { auth: AUTHORITY_ADMIN },
          schema: { body: ApproveBody, response: { 201: ApprovalIssued } },
        },
        async (request, reply) => {
          const id = pathUuid(request.params.id, 'submission');
          const issued = await approveSubmission({
            db: ctx.db,
            authority: await loadAuthority(ctx),
            principal: principalOf(request),
            submissionId: id,
            body: request.body,
            now: ctx.clock.now(),
          });
          const url = envelopeUrl(ctx.config.publicUrls.api, issued.approvalNumber);
          reply.header('location', url);
          return reply.code(201).send({ approval_number: issued.approvalNumber, envelope_url: url });
        },
      );

      app.post<{ Params: { id: string } }>(
        '/api/v1/console/submissions/:id/reject',
        {
          config: { auth: AUTHORITY_ADMIN },
          schema: { body: ReasonBody, response: { 200: SubmissionRejected } },
        },
        async (request) => {
          const id = pathUuid(request.params.id, 'submission');
          const reason = parseReason(request.body);
          await rejectSubmission({ db: ctx.db, submissionId: id, reason, now: ctx.clock.now() });
          return {
            ...submissionView((await findSubmission(ctx.db, id))!),
            reject_reason: await rejectReasonOf(ctx.db, id),
          };
        },
      );

      app.post<{ Params: { number: string } }>(
        '/api/v1/console/approvals/:number/revoke',
        {
          config: { auth: AUTHORITY_ADMIN },
          schema: { body: ReasonBody, response: { 200: ApprovalRevoked } },
        },
        async (request) => {
          const reason = parseReason(request.body);
          const revoked = await revokeApproval({
            db: ctx.db,
            authority: await loadAuthority(ctx),
            principal: principalOf(request),
            approvalNumber: request.params.number,
            reason,
            now: ctx.clock.now(),
          });
          return {
            approval_number: revoked.approvalNumber,
            revoked_at: formatAlmaty(revoked.revokedAt, { milliseconds: true }),
            revocation_list_version: revoked.revocationListVersion,
          };
        },
      );

      // --- lookups --------------------------------------------------------------------------------------
      app.post<{ Body: CreativeLookupRequest }>(
        '/api/v1/creatives/lookup',
        {
          config: { auth: READ_CREATIVES },
          schema: { body: LookupBody, response: { 200: CreativeLookupResponse } },
        },
        async (request) =>
          lookupCreatives(
            ctx.db,
            request.body.hashes,
            viewerOf(principalOf(request)),
            ctx.clock.now(),
            ctx.config.publicUrls.api,
          ),
      );

      app.get<{ Params: { sha256: string } }>(
        '/api/v1/creatives/:sha256',
        { config: { auth: READ_CREATIVES }, schema: { response: { 200: CreativeLookupItem } } },
        async (request) => {
          const hash = request.params.sha256;
          if (!SHA256_HEX.test(hash)) {
            throw validationFailed([
              {
                path: 'params:/sha256',
                code: 'pattern',
                message: 'not a lowercase hexadecimal SHA-256 (64 characters 0-9a-f)',
              },
            ]);
          }
          const answer = await lookupCreatives(
            ctx.db,
            [hash],
            viewerOf(principalOf(request)),
            ctx.clock.now(),
            ctx.config.publicUrls.api,
          );
          return answer.items[0]!;
        },
      );

      app.get<{ Params: { number: string } }>(
        '/api/v1/approvals/:number/envelope',
        // The stored text is sent as signed, byte for byte: a string is not serialized, the schema says what it is.
        { config: { auth: READ_CREATIVES }, schema: { response: { 200: ApprovalEnvelope } } },
        async (request, reply) => {
          const number = request.params.number;
          const envelope = await visibleEnvelope(ctx.db, number, viewerOf(principalOf(request)));
          if (envelope === null) throw notFound('approval', number);
          return reply.type('application/json').send(envelope);
        },
      );
    },

    verify(app, ctx) {
      // DESIGN.md section 4: the newest signed revocation list, public.
      // The stored text is sent as signed, byte for byte: a string is not serialized, the schema says what it is.
      app.get(
        '/v1/revocations.json',
        { schema: { response: { 200: RevocationList } } },
        async (_request, reply) => {
          const text = await latestRevocationListText(ctx.db);
          if (text === null)
            throw new ProblemError(
              'not_found',
              'no approval has been revoked yet: there is no revocation list',
            );
          return reply.type('application/json').header('cache-control', 'public, max-age=60').send(text);
        },
      );
    },
  };
}

export const approvalsFeature: Feature = createApprovalsFeature();
