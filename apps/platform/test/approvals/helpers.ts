import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import {
  apiCall,
  createOrganisation,
  createStructure,
  type OrgKind,
  type TestPlatform,
} from '../support/platform.js';

/** A tier-2 category of the catalogue (Automotive Sales Applications). */
export const CATEGORY_ID = 1564;

export interface Org {
  id: string;
  key: string;
}

/** An organisation with keys for submitting and looking up. */
export async function organisation(p: TestPlatform, kind: OrgKind): Promise<Org> {
  const org = await createOrganisation(p, kind, ['write:submissions', 'read:creatives']);
  return { id: org.id, key: org.key };
}

/** The authority's key for lookups (the bootstrap admin key holds console:admin only). */
export async function authorityLookupKey(p: TestPlatform): Promise<string> {
  const { rows } = await p.database.db.query<{ id: string }>(
    "SELECT id FROM organisations WHERE kind = 'authority'",
  );
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${rows[0]!.id}/api-keys`,
    {
      name: 'authority lookups',
      scopes: ['read:creatives'],
    },
  );
  expect(res.statusCode).toBe(201);
  return res.json<{ key: string }>().key;
}

export async function structures(p: TestPlatform, organisationId: string, n: number) {
  const out: { id: string; code: string }[] = [];
  for (let i = 0; i < n; i += 1) out.push(await createStructure(p, organisationId));
  return out;
}

export async function createDraft(
  p: TestPlatform,
  key: string,
  fields: {
    structure_ids: string[];
    period_from?: string;
    period_to?: string;
    category_id?: number | null;
    fast_track?: boolean;
  },
): Promise<{ id: string; number: string }> {
  const res = await apiCall(p.servers.api, key, 'POST', '/api/v1/submissions', {
    advertiser_name: 'Acme LLP',
    period_from: fields.period_from ?? '2026-12-01',
    period_to: fields.period_to ?? '2026-12-31',
    structure_ids: fields.structure_ids,
    ...(fields.category_id === null ? {} : { category_id: fields.category_id ?? CATEGORY_ID }),
    ...(fields.fast_track ? { fast_track: true, channel: 'programmatic' } : {}),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string; number: string }>();
}

export function upload(
  p: TestPlatform,
  key: string | null,
  submissionId: string,
  bytes: Buffer,
  contentType: string,
): Promise<LightMyRequestResponse> {
  return p.servers.api.inject({
    method: 'PUT',
    url: `/api/v1/submissions/${submissionId}/media`,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), 'content-type': contentType },
    payload: bytes,
  });
}

export function send(p: TestPlatform, key: string, submissionId: string) {
  return apiCall(p.servers.api, key, 'POST', `/api/v1/submissions/${submissionId}/send`);
}

export function approve(p: TestPlatform, submissionId: string, body: Record<string, unknown> = {}) {
  return apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/submissions/${submissionId}/approve`,
    body,
  );
}

export function reject(p: TestPlatform, submissionId: string, reason = 'misleading claims') {
  return apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/submissions/${submissionId}/reject`, {
    reason,
  });
}

export function revoke(p: TestPlatform, number: string, reason = 'court order') {
  return apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/approvals/${number}/revoke`, { reason });
}

export function lookup(p: TestPlatform, key: string, hashes: unknown) {
  return apiCall(p.servers.api, key, 'POST', '/api/v1/creatives/lookup', { hashes });
}

/** Create, upload, send: a submission in review with the given media. */
export async function inReview(
  p: TestPlatform,
  key: string,
  media: { bytes: Buffer; type: string },
  fields: Parameters<typeof createDraft>[2],
): Promise<{ id: string; number: string; sha256: string }> {
  const draft = await createDraft(p, key, fields);
  const up = await upload(p, key, draft.id, media.bytes, media.type);
  expect(up.statusCode, up.body).toBe(200);
  const sent = await send(p, key, draft.id);
  expect(sent.statusCode, sent.body).toBe(200);
  return { ...draft, sha256: up.json<{ media_sha256: string }>().media_sha256 };
}
