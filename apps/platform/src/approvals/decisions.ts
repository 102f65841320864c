import {
  type ApprovalManifest,
  almatyDate,
  type FieldError,
  formatAlmaty,
  isCalendarDate,
} from '@ooh/protocol';
import type { Principal } from '../auth/principal.js';
import type { Authority } from '../authority/index.js';
import { type Db, withTransaction } from '../db/pool.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { recordLedgerLeaf } from '../ledger/leaves.js';
import { isUuid, notFound } from '../shared/ids.js';
import { nextSerial } from '../shared/numbers.js';
import { lockSubmission, type SubmissionRow } from '../submissions/repository.js';
import { documentText, manifestSha256, signDocument } from './envelope.js';
import {
  findSubmissionMedia,
  insertApproval,
  lockApprovalByNumber,
  markDecided,
  markRevoked,
  storeEnvelope,
  submissionStructures,
} from './repository.js';
import { publishRevocationList } from './revocations.js';

/** Approval numbers: APR-<Almaty year of issue>-<serial, at least 6 digits>, gap-free per year. */
export function approvalNumber(year: number, serial: number): string {
  return `APR-${year}-${String(serial).padStart(6, '0')}`;
}
export const APPROVAL_NUMBER_PATTERN = /^APR-\d{4}-\d{6,}$/;

export const REASON_MAX_CHARS = 2000;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const actor = (p: Principal) => `${p.type}:${p.id}`;

export interface ApprovalTerms {
  validFrom: string;
  validUntil: string;
  structureIds: string[];
}

/**
 * The approve body `{valid_from?, valid_until?, structure_ids?}`: defaults are the requested period and
 * structures; narrowing is allowed, widening refused (issue "Approvals").
 */
export function approvalTerms(
  body: unknown,
  submission: Pick<SubmissionRow, 'period_from' | 'period_to'>,
  requested: readonly { id: string; code?: string; retired_at?: Date | null }[],
): { ok: true; value: ApprovalTerms } | { ok: false; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const err = (path: string, code: string, message: string) => errors.push({ path, code, message });
  const given = body === undefined || body === null ? {} : body;
  if (!isObject(given))
    return { ok: false, errors: [{ path: '/', code: 'type', message: 'the body must be a JSON object' }] };
  for (const key of Object.keys(given)) {
    if (!['valid_from', 'valid_until', 'structure_ids'].includes(key))
      err(`/${key}`, 'unknown_key', `unknown field ${key}`);
  }
  const date = (field: 'valid_from' | 'valid_until', fallback: string | null): string | null => {
    const v = given[field];
    if (v === undefined || v === null) {
      if (fallback === null)
        err(`/${field}`, 'required', `${field} is required: the submission has no period`);
      return fallback;
    }
    if (typeof v !== 'string' || !isCalendarDate(v)) {
      err(`/${field}`, 'format', 'must be a date YYYY-MM-DD');
      return null;
    }
    return v;
  };
  const validFrom = date('valid_from', submission.period_from);
  const validUntil = date('valid_until', submission.period_to);
  if (validFrom && submission.period_from && validFrom < submission.period_from) {
    err(
      '/valid_from',
      'out_of_range',
      `the approval may not start before the requested period (${submission.period_from})`,
    );
  }
  if (validUntil && submission.period_to && validUntil > submission.period_to) {
    err(
      '/valid_until',
      'out_of_range',
      `the approval may not end after the requested period (${submission.period_to})`,
    );
  }
  if (validFrom && validUntil && validFrom > validUntil) {
    err('/valid_until', 'out_of_range', 'valid_until must not be before valid_from');
  }

  const requestedIds = new Set(requested.map((s) => s.id));
  let structureIds = requested.map((s) => s.id);
  const raw = given['structure_ids'];
  if (raw !== undefined && raw !== null) {
    if (!Array.isArray(raw)) err('/structure_ids', 'type', 'must be an array of structure ids');
    else {
      const chosen: string[] = [];
      raw.forEach((id: unknown, i) => {
        if (!isUuid(id)) err(`/structure_ids/${i}`, 'format', 'must be a uuid');
        else if (!requestedIds.has(id.toLowerCase())) {
          err(
            `/structure_ids/${i}`,
            'not_allowed',
            'not one of the structures the submission requested (no widening)',
          );
        } else chosen.push(id.toLowerCase());
      });
      structureIds = [...new Set(chosen)];
      if (raw.length === 0) err('/structure_ids', 'too_few', 'choose at least one structure');
    }
  }
  // A structure retired while the submission waited cannot be approved: an envelope naming it would let a player
  // there play the creative. The authority leaves it out (structure_ids), as create refuses it ("retired").
  const retired = new Map(requested.filter((s) => s.retired_at).map((s) => [s.id, s.code ?? s.id]));
  if (Array.isArray(raw)) {
    raw.forEach((id: unknown, i) => {
      if (isUuid(id) && retired.has(id.toLowerCase())) {
        err(`/structure_ids/${i}`, 'retired', `structure ${retired.get(id.toLowerCase())} is retired`);
      }
    });
  } else if (raw === undefined || raw === null) {
    const named = structureIds.filter((id) => retired.has(id)).map((id) => retired.get(id));
    if (named.length > 0) {
      err(
        '/structure_ids',
        'retired',
        `structure(s) ${named.join(', ')} retired since the submission was sent: approve structure_ids without them`,
      );
    }
  }
  if (errors.length > 0 || !validFrom || !validUntil) return { ok: false, errors };
  return { ok: true, value: { validFrom, validUntil, structureIds } };
}

/** A refusal or revocation reason: required, trimmed, up to 2000 characters. */
export function parseReason(body: unknown): string {
  const reason = isObject(body) ? body['reason'] : undefined;
  const errors: FieldError[] = [];
  if (isObject(body)) {
    for (const key of Object.keys(body))
      if (key !== 'reason')
        errors.push({ path: `/${key}`, code: 'unknown_key', message: `unknown field ${key}` });
  }
  if (reason === undefined || reason === null)
    errors.push({ path: '/reason', code: 'required', message: 'reason is required' });
  else if (typeof reason !== 'string' || reason.trim() === '')
    errors.push({ path: '/reason', code: 'type', message: 'must be a non-empty string' });
  else if ([...reason].length > REASON_MAX_CHARS)
    errors.push({ path: '/reason', code: 'too_long', message: `up to ${REASON_MAX_CHARS} characters` });
  if (errors.length > 0) throw validationFailed(errors);
  return (reason as string).trim();
}

function requireInReview(row: SubmissionRow | null, id: string): SubmissionRow {
  if (!row) throw notFound('submission', id);
  if (row.state !== 'in_review') {
    throw new ProblemError(
      'state_conflict',
      `submission ${row.number} is ${row.state}; only a submission in_review can be decided`,
    );
  }
  return row;
}

export interface IssuedApproval {
  approvalNumber: string;
  manifest: ApprovalManifest;
  envelope: string;
}

/**
 * Issues an approval: number, approval row, signed envelope, ledger leaf `approval`, submission moved to
 * approved, all in one transaction (a failure gives the number back).
 */
export async function approveSubmission(args: {
  db: Db;
  authority: Authority;
  principal: Principal;
  submissionId: string;
  body: unknown;
  now: Date;
}): Promise<IssuedApproval> {
  const { now } = args;
  return withTransaction(args.db, async (client) => {
    const submission = requireInReview(await lockSubmission(client, args.submissionId), args.submissionId);
    const requested = await submissionStructures(client, submission.id);
    const terms = approvalTerms(args.body, submission, requested);
    if (!terms.ok) throw validationFailed(terms.errors);
    const media = await findSubmissionMedia(client, submission.id);
    if (!media) throw new ProblemError('state_conflict', `submission ${submission.number} has no media`);

    const year = Number(almatyDate(now).slice(0, 4));
    const number = approvalNumber(year, await nextSerial(client, 'approval', year));
    const byId = new Map(requested.map((s) => [s.id, s]));
    const chosen = terms.value.structureIds.map((s) => byId.get(s)!);
    const structureCodes = chosen.map((s) => s.code).sort();
    const id = await insertApproval(client, {
      number,
      submissionId: submission.id,
      submissionNumber: submission.number,
      organisationId: submission.organisation_id,
      mediaSha256: media.media_sha256,
      validFrom: terms.value.validFrom,
      validUntil: terms.value.validUntil,
      categoryId: submission.category_id,
      durationMs: media.duration_ms,
      width: media.width,
      height: media.height,
      issuedAt: now,
      issuedBy: actor(args.principal),
      structureIds: terms.value.structureIds,
      structureCodes,
      coveredOrganisationIds: [...new Set(chosen.map((s) => s.organisation_id))].sort(),
    });
    // DESIGN.md section 4: the manifest fields, exactly.
    const manifest: ApprovalManifest = {
      kind: 'approval',
      approval_number: number,
      media_sha256: media.media_sha256,
      structures: structureCodes,
      valid_from: terms.value.validFrom,
      valid_until: terms.value.validUntil,
      category_id: submission.category_id,
      duration_ms: media.duration_ms,
      width: media.width,
      height: media.height,
      issued_at: formatAlmaty(now, { milliseconds: true }),
    };
    const envelope = documentText(await signDocument(manifest, args.authority, now));
    const digest = manifestSha256(manifest);
    await storeEnvelope(client, id, envelope, digest);
    await recordLedgerLeaf(
      client,
      { kind: 'approval', approvalNumber: number, manifestSha256: digest, signedAt: now },
      now,
    );
    await markDecided(client, submission.id, 'approved', now, null);
    return { approvalNumber: number, manifest, envelope };
  });
}

export async function rejectSubmission(args: {
  db: Db;
  submissionId: string;
  reason: string;
  now: Date;
}): Promise<void> {
  await withTransaction(args.db, async (client) => {
    const submission = requireInReview(await lockSubmission(client, args.submissionId), args.submissionId);
    await markDecided(client, submission.id, 'rejected', args.now, args.reason);
  });
}

export interface Revocation {
  approvalNumber: string;
  revokedAt: Date;
  revocationListVersion: number;
}

/**
 * Revokes an approval: marks it, records a ledger leaf `revocation` (signed_at = the approval's signing
 * time, revoked_at = now) and publishes the next revocation list, in one transaction.
 */
export async function revokeApproval(args: {
  db: Db;
  authority: Authority;
  principal: Principal;
  approvalNumber: string;
  reason: string;
  now: Date;
}): Promise<Revocation> {
  const { now } = args;
  return withTransaction(args.db, async (client) => {
    const approval = await lockApprovalByNumber(client, args.approvalNumber);
    if (!approval) throw notFound('approval', args.approvalNumber);
    if (approval.revoked_at)
      throw new ProblemError('state_conflict', `approval ${approval.number} is already revoked`);
    await markRevoked(client, approval.id, now, args.reason, actor(args.principal));
    if (approval.manifest_sha256) {
      await recordLedgerLeaf(
        client,
        {
          kind: 'revocation',
          approvalNumber: approval.number,
          manifestSha256: approval.manifest_sha256,
          signedAt: approval.issued_at,
          revokedAt: now,
        },
        now,
      );
    }
    const list = await publishRevocationList(client, args.authority, now);
    return { approvalNumber: approval.number, revokedAt: now, revocationListVersion: list.body.version };
  });
}
