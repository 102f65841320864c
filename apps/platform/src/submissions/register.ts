import {
  formatAlmaty,
  type OrganisationKind,
  type RegisterEvent,
  type RegisterItem,
  RegisterPage,
  RegisterState,
} from '@ooh/protocol';
import type { FastifyInstance } from 'fastify';
import type { RouteAuth } from '../auth/principal.js';
import type { PlatformContext } from '../context.js';
import type { Db } from '../db/pool.js';
import { validationFailed } from '../http/problem.js';
import { isUuid } from '../shared/ids.js';

/**
 * The authority's register of decided submissions (issue 25 item 3): every submission the authority approved or
 * rejected, searchable by number, approval number, advertiser, BIN or organisation, filtered by outcome and
 * organisation, paged on the server, each with its history (created, sent, approved, rejected, revoked: when, and
 * who where the platform stored it).
 *
 * GET /api/v1/console/submissions/decided?q&state=approved|rejected|revoked&organisation_id&limit&offset
 */

/** The authority only: operators and agencies have their own lists (GET /api/v1/submissions). */
export const REGISTER_READ: RouteAuth = {
  anyOf: [
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
  ],
};

const PARAMS = ['q', 'state', 'organisation_id', 'limit', 'offset'] as const;
const STATES = RegisterState.anyOf.map((literal) => literal.const);
export const REGISTER_MAX_LIMIT = 100;
/** Deeper than this, a search narrows better than paging (offset paging reads the skipped rows). */
export const REGISTER_MAX_OFFSET = 10_000;
const MAX_QUERY = 200;

export interface RegisterQuery {
  q: string | null;
  state: RegisterState | null;
  organisationId: string | null;
  limit: number;
  offset: number;
}

function integer(value: string | undefined, name: string, min: number, max: number, fallback: number) {
  if (value === undefined || value === '') return fallback;
  if (!/^\d{1,9}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw validationFailed([
      { path: `querystring:/${name}`, code: 'range', message: `a whole number from ${min} to ${max}` },
    ]);
  }
  return Number(value);
}

/** The query string, refused whole (422 validation_failed) when a parameter is unknown, repeated or out of range. */
export function parseRegisterQuery(query: Record<string, unknown>): RegisterQuery {
  const unknown = Object.keys(query).filter((k) => !(PARAMS as readonly string[]).includes(k));
  if (unknown.length > 0) {
    throw validationFailed(
      unknown.map((k) => ({
        path: `querystring:/${k}`,
        code: 'unknown_key',
        message: `unknown parameter ${k}`,
      })),
    );
  }
  for (const k of PARAMS) {
    if (query[k] !== undefined && typeof query[k] !== 'string')
      throw validationFailed([{ path: `querystring:/${k}`, code: 'type', message: 'given once' }]);
  }
  const s = query as Partial<Record<(typeof PARAMS)[number], string>>;
  const q = (s.q ?? '').trim();
  // A NUL cannot be in a PostgreSQL text parameter; refused rather than a 500.
  if (q.length > MAX_QUERY || q.includes('\u0000')) {
    throw validationFailed([
      { path: 'querystring:/q', code: 'max_length', message: `at most ${MAX_QUERY} characters, no NUL` },
    ]);
  }
  const state = s.state ?? '';
  if (state !== '' && !(STATES as readonly string[]).includes(state)) {
    throw validationFailed([
      { path: 'querystring:/state', code: 'not_allowed', message: `one of ${STATES.join(', ')}` },
    ]);
  }
  const organisation = s.organisation_id ?? '';
  if (organisation !== '' && !isUuid(organisation)) {
    throw validationFailed([
      { path: 'querystring:/organisation_id', code: 'format', message: 'an organisation id (uuid)' },
    ]);
  }
  return {
    q: q === '' ? null : q,
    state: state === '' ? null : (state as RegisterState),
    organisationId: organisation === '' ? null : organisation.toLowerCase(),
    limit: integer(s.limit, 'limit', 1, REGISTER_MAX_LIMIT, 50),
    offset: integer(s.offset, 'offset', 0, REGISTER_MAX_OFFSET, 0),
  };
}

/* The answer (RegisterPage, RegisterItem, RegisterEvent) is @ooh/protocol's schemas/console.ts. */
export type { RegisterEvent, RegisterItem };

/** `%`, `_` and `\` of a search text matched literally by ILIKE. */
const likeLiteral = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

// The outcome of a decided submission: rejected, or approved with its newest approval revoked or not.
const OUTCOME = `CASE WHEN s.state = 'rejected' THEN 'rejected'
                      WHEN la.revoked_at IS NOT NULL THEN 'revoked' ELSE 'approved' END`;
const FROM = `FROM submissions s
  JOIN organisations o ON o.id = s.organisation_id
  LEFT JOIN LATERAL (SELECT number, revoked_at FROM approvals WHERE submission_id = s.id
                      ORDER BY issued_at DESC LIMIT 1) la ON true
 WHERE s.state IN ('approved', 'rejected')
   AND ($1::uuid IS NULL OR s.organisation_id = $1)
   AND ($2::text IS NULL OR ${OUTCOME} = $2)
   AND ($3::text IS NULL
        OR s.number ILIKE '%' || $3 || '%' OR s.advertiser_name ILIKE '%' || $3 || '%'
        OR o.name ILIKE '%' || $3 || '%' OR s.advertiser_bin = $4
        OR EXISTS (SELECT 1 FROM approvals ap WHERE ap.submission_id = s.id AND ap.number ILIKE '%' || $3 || '%'))`;

/** Who an `issued_by` / `revoked_by` ('api_key:<id>' or 'session:<id>') was, where the platform still knows. */
async function actors(db: Db, refs: string[]): Promise<Map<string, RegisterEvent['by']>> {
  const keyIds = refs
    .filter((r) => r.startsWith('api_key:'))
    .map((r) => r.slice(8))
    .filter(isUuid);
  const sessionIds = refs.filter((r) => r.startsWith('session:')).map((r) => r.slice(8));
  const found = new Map<string, RegisterEvent['by']>();
  if (keyIds.length > 0) {
    const { rows } = await db.query<{ id: string; name: string }>(
      'SELECT id, name FROM api_keys WHERE id = ANY($1::uuid[])',
      [keyIds],
    );
    for (const r of rows) found.set(`api_key:${r.id}`, { kind: 'api_key', name: r.name });
  }
  if (sessionIds.length > 0) {
    const { rows } = await db.query<{ id: string; email: string }>(
      `SELECT cs.id, u.email FROM console_sessions cs JOIN console_users u ON u.id = cs.user_id
        WHERE cs.id = ANY($1::text[])`,
      [sessionIds],
    );
    for (const r of rows) found.set(`session:${r.id}`, { kind: 'console_user', name: r.email });
  }
  // A session that has ended no longer names its user (the platform keeps no sign-in history): said as such.
  for (const r of refs) {
    if (!found.has(r) && r.startsWith('session:'))
      found.set(r, { kind: 'console_session', name: r.slice(8, 20) });
  }
  return found;
}

export async function readRegister(
  db: Db,
  query: RegisterQuery,
): Promise<{ items: RegisterItem[]; total: number }> {
  const params = [query.organisationId, query.state, query.q === null ? null : likeLiteral(query.q), query.q];
  const [page, count] = await Promise.all([
    db.query<{
      id: string;
      number: string;
      state: RegisterState;
      advertiser_name: string;
      advertiser_bin: string | null;
      organisation_id: string;
      organisation_name: string;
      organisation_kind: OrganisationKind;
      period_from: string | null;
      period_to: string | null;
      created_at: Date;
      sent_at: Date | null;
      decided_at: Date | null;
      reject_reason: string | null;
    }>(
      `SELECT s.id, s.number, ${OUTCOME} AS state, s.advertiser_name, s.advertiser_bin, s.organisation_id,
              o.name AS organisation_name, o.kind AS organisation_kind,
              to_char(s.period_from, 'YYYY-MM-DD') AS period_from, to_char(s.period_to, 'YYYY-MM-DD') AS period_to,
              s.created_at, s.sent_at, s.decided_at, s.reject_reason
         ${FROM}
        ORDER BY s.decided_at DESC NULLS LAST, s.number DESC
        LIMIT $5 OFFSET $6`,
      [...params, query.limit, query.offset],
    ),
    db.query<{ total: string }>(`SELECT count(*)::bigint AS total ${FROM}`, params),
  ]);
  const ids = page.rows.map((r) => r.id);
  const approvals =
    ids.length === 0
      ? []
      : (
          await db.query<{
            submission_id: string;
            number: string;
            valid_from: string;
            valid_until: string;
            issued_at: Date;
            issued_by: string | null;
            revoked_at: Date | null;
            revoked_by: string | null;
            revoke_reason: string | null;
          }>(
            `SELECT submission_id, number, to_char(valid_from, 'YYYY-MM-DD') AS valid_from,
                    to_char(valid_until, 'YYYY-MM-DD') AS valid_until, issued_at, issued_by, revoked_at, revoked_by,
                    revoke_reason
               FROM approvals WHERE submission_id = ANY($1::uuid[]) ORDER BY issued_at`,
            [ids],
          )
        ).rows;
  const who = await actors(db, [
    ...new Set(approvals.flatMap((a) => [a.issued_by, a.revoked_by]).filter((r): r is string => r !== null)),
  ]);
  const items = page.rows.map((r): RegisterItem => {
    const own = approvals.filter((a) => a.submission_id === r.id);
    const latest = own[own.length - 1] ?? null;
    const submitter = { kind: 'organisation' as const, name: r.organisation_name };
    const history: RegisterEvent[] = [{ event: 'created', at: formatAlmaty(r.created_at), by: submitter }];
    if (r.sent_at) history.push({ event: 'sent', at: formatAlmaty(r.sent_at), by: submitter });
    if (r.state === 'rejected' && r.decided_at) {
      // Who rejected is not stored (migration 030 keeps the time and the reason only).
      history.push({
        event: 'rejected',
        at: formatAlmaty(r.decided_at),
        by: null,
        reason: r.reject_reason ?? '',
      });
    }
    for (const a of own) {
      history.push({
        event: 'approved',
        at: formatAlmaty(a.issued_at),
        by: a.issued_by ? (who.get(a.issued_by) ?? null) : null,
        approval_number: a.number,
      });
      if (a.revoked_at) {
        history.push({
          event: 'revoked',
          at: formatAlmaty(a.revoked_at),
          by: a.revoked_by ? (who.get(a.revoked_by) ?? null) : null,
          approval_number: a.number,
          reason: a.revoke_reason ?? '',
        });
      }
    }
    history.sort((x, y) => Date.parse(x.at) - Date.parse(y.at));
    return {
      submission_id: r.id,
      number: r.number,
      state: r.state,
      advertiser_name: r.advertiser_name,
      advertiser_bin: r.advertiser_bin,
      organisation: { id: r.organisation_id, name: r.organisation_name, kind: r.organisation_kind },
      period_from: r.period_from,
      period_to: r.period_to,
      decided_at: r.decided_at ? formatAlmaty(r.decided_at) : null,
      approval: latest
        ? {
            number: latest.number,
            valid_from: latest.valid_from,
            valid_until: latest.valid_until,
            issued_at: formatAlmaty(latest.issued_at),
            revoked_at: latest.revoked_at ? formatAlmaty(latest.revoked_at) : null,
            revoke_reason: latest.revoke_reason,
          }
        : null,
      reject_reason: r.reject_reason,
      history,
    };
  });
  return { items, total: Number(count.rows[0]?.total ?? 0) };
}

export function registerDecidedRoute(app: FastifyInstance, ctx: PlatformContext): void {
  app.get(
    '/api/v1/console/submissions/decided',
    { config: { auth: REGISTER_READ }, schema: { response: { 200: RegisterPage } } },
    async (request, reply) => {
      const query = parseRegisterQuery((request.query ?? {}) as Record<string, unknown>);
      const { items, total } = await readRegister(ctx.db, query);
      reply.header('cache-control', 'private, no-store');
      return { items, total, limit: query.limit, offset: query.offset };
    },
  );
}
