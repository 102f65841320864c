import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  approve,
  CATEGORY_ID,
  createDraft,
  type Org,
  organisation,
  reject,
  revoke,
  send,
  structures,
  upload,
} from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { apiCall, type TestPlatform, startTestPlatform } from '../support/platform.js';

/**
 * PATCH /api/v1/submissions/{id}: editing a draft (docs/decisions.md "Submissions"), and the review facts that
 * GET /api/v1/submissions/{id} adds for the console.
 */

let p: TestPlatform;
let dataDir: string;
let operator: Org;
let other: Org;
let site: { id: string; code: string }[];

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-edit-'));
  p = await startTestPlatform({ dataDir, now: new Date('2026-11-20T06:00:00Z') });
  operator = await organisation(p, 'operator');
  other = await organisation(p, 'operator');
  site = await structures(p, operator.id, 4);
});
afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const patch = (id: string, body: unknown, key: string | null = operator.key) =>
  p.servers.api.inject({
    method: 'PATCH',
    url: `/api/v1/submissions/${id}`,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });

const read = async (id: string, key = operator.key) => {
  const res = await apiCall(p.servers.api, key, 'GET', `/api/v1/submissions/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<Record<string, unknown>>();
};

const stored = async (id: string) =>
  (await p.database.db.query<{ updated_at: Date }>('SELECT updated_at FROM submissions WHERE id = $1', [id]))
    .rows[0]!;

const fieldErrors = (res: { statusCode: number; body: string; json: () => unknown }) => {
  expect(res.statusCode, res.body).toBe(422);
  const doc = res.json() as { code: string; errors: { path: string; code: string }[] };
  expect(doc.code).toBe('validation_failed');
  return doc.errors.map((e) => `${e.path} ${e.code}`);
};

describe('PATCH /api/v1/submissions/{id}', () => {
  test('changes the fields sent and keeps the rest, structures included', async () => {
    const draft = await createDraft(p, operator.key, {
      structure_ids: [site[0]!.id, site[1]!.id],
      category_id: null,
    });
    expect((await patch(draft.id, { advertiser_bin: '123456789012' })).statusCode).toBe(200);
    expect((await read(draft.id))['advertiser_bin']).toBe('123456789012');
    p.clock.set(new Date('2026-11-20T07:00:00Z'));
    const res = await patch(draft.id, {
      advertiser_name: 'Acme Tea LLP',
      period_to: '2027-01-15',
      category_id: CATEGORY_ID,
      declared_daily_plays: { [site[1]!.id]: 40 },
      advertiser_bin: null,
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<Record<string, unknown>>();
    // The spec's Submission resource, nothing else (external_refs left out: a direct submission has none).
    expect(Object.keys(body).sort()).toEqual(
      [
        'advertiser_name',
        'category',
        'category_id',
        'channel',
        'declared_daily_plays',
        'fast_track',
        'id',
        'number',
        'period_from',
        'period_to',
        'review_due_at',
        'state',
      ].sort(),
    );
    expect(body).toMatchObject({
      id: draft.id,
      number: draft.number,
      state: 'draft',
      advertiser_name: 'Acme Tea LLP',
      period_from: '2026-12-01',
      period_to: '2027-01-15',
      category_id: CATEGORY_ID,
      declared_daily_plays: { [site[1]!.id]: 40 },
    });
    const got = await read(draft.id);
    expect(got).toMatchObject({
      advertiser_name: 'Acme Tea LLP',
      advertiser_bin: null,
      structure_ids: [site[0]!.id, site[1]!.id],
    });
    const row = await stored(draft.id);
    expect(row.updated_at.toISOString()).toBe('2026-11-20T07:00:00.000Z');
  });

  test('structure_ids or structure_set_ids replace the whole list; declared figures of dropped ones go', async () => {
    const draft = await createDraft(p, operator.key, { structure_ids: [site[0]!.id, site[1]!.id] });
    expect(
      (await patch(draft.id, { declared_daily_plays: { [site[0]!.id]: 5, [site[1]!.id]: 6 } })).statusCode,
    ).toBe(200);
    let res = await patch(draft.id, { structure_ids: [site[2]!.id, site[1]!.id] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<{ declared_daily_plays: unknown }>().declared_daily_plays).toEqual({ [site[1]!.id]: 6 });
    expect((await read(draft.id))['structure_ids']).toEqual([site[2]!.id, site[1]!.id]);

    const set = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/structure-sets', {
      name: 'North',
      structure_ids: [site[3]!.id, site[0]!.id],
    });
    expect(set.statusCode, set.body).toBe(201);
    // Sets alone: no explicit ids are left.
    res = await patch(draft.id, { structure_set_ids: [set.json<{ id: string }>().id] });
    expect(res.statusCode, res.body).toBe(200);
    expect([...((await read(draft.id))['structure_ids'] as string[])].sort()).toEqual(
      [site[3]!.id, site[0]!.id].sort(),
    );
    // Every declared figure went with its structure: a field that holds nothing is left out (docs/decisions.md).
    expect(res.json()).not.toHaveProperty('declared_daily_plays');

    // A declared figure sent with the edit must name a chosen structure.
    expect(fieldErrors(await patch(draft.id, { declared_daily_plays: { [site[2]!.id]: 1 } }))).toEqual([
      `/declared_daily_plays/${site[2]!.id} not_allowed`,
    ]);
  });

  test('the rules of create apply to the result; a refused edit changes nothing', async () => {
    const draft = await createDraft(p, operator.key, { structure_ids: [site[0]!.id] });
    const before = await read(draft.id);
    expect(fieldErrors(await patch(draft.id, { period_from: '2027-02-01' }))).toEqual([
      '/period_to out_of_range',
    ]);
    expect(fieldErrors(await patch(draft.id, { color: 'red', advertiser_name: null }))).toEqual(
      expect.arrayContaining(['/color unknown_key', '/advertiser_name type']),
    );
    expect(fieldErrors(await patch(draft.id, { external_refs: { crid: 'x' } }))).toEqual([
      '/external_refs not_allowed',
    ]);
    expect(fieldErrors(await patch(draft.id, { structure_ids: [] }))).toEqual(['/structure_ids too_few']);
    expect(fieldErrors(await patch(draft.id, { category_id: 999_999 }))).toEqual(['/category_id not_found']);
    const foreign = await structures(p, other.id, 1);
    expect(fieldErrors(await patch(draft.id, { structure_ids: [foreign[0]!.id] }))).toEqual([
      '/structure_ids/0 not_allowed',
    ]);
    expect(fieldErrors(await patch(draft.id, ['advertiser_name']))).toEqual(['/ type']);
    expect(await read(draft.id)).toEqual(before);

    // Programmatic with its references, then back to direct: the references must be cleared with it.
    const programmatic = await patch(draft.id, {
      channel: 'programmatic',
      fast_track: true,
      external_refs: { crid: 'cr-1', adomain: ['tea.kz'] },
    });
    expect(programmatic.statusCode, programmatic.body).toBe(200);
    expect(fieldErrors(await patch(draft.id, { channel: 'direct' }))).toEqual(
      expect.arrayContaining(['/external_refs not_allowed', '/fast_track not_allowed']),
    );
    const direct = await patch(draft.id, { channel: 'direct', fast_track: false, external_refs: null });
    expect(direct.statusCode, direct.body).toBe(200);
    expect(direct.json()).toMatchObject({ channel: 'direct', fast_track: false });
    // Left out when there is none: the resource can be sent back (issue "The spec to the letter, second pass", 4).
    expect(direct.json()).not.toHaveProperty('external_refs');
  });

  test('a draft made without a category is completed by an edit, then sent; afterwards it cannot change', async () => {
    const draft = await createDraft(p, operator.key, { structure_ids: [site[0]!.id], category_id: null });
    expect((await upload(p, operator.key, draft.id, png(40, 20, 71), 'image/png')).statusCode).toBe(200);
    const refused = await send(p, operator.key, draft.id);
    expect(refused.statusCode).toBe(422);
    expect((await patch(draft.id, { category_id: CATEGORY_ID })).statusCode).toBe(200);
    const sent = await send(p, operator.key, draft.id);
    expect(sent.statusCode, sent.body).toBe(200);

    const late = await patch(draft.id, { advertiser_name: 'Too late' });
    expect(late.statusCode).toBe(409);
    expect(late.headers['content-type']).toContain('application/problem+json');
    expect(late.json<{ code: string }>().code).toBe('state_conflict');
    expect((await read(draft.id))['advertiser_name']).toBe('Acme LLP');
  });

  test('only the owner edits: another organisation and unknown ids get 404, the authority 403', async () => {
    const draft = await createDraft(p, operator.key, { structure_ids: [site[0]!.id] });
    const theirs = await patch(draft.id, { advertiser_name: 'Hijack' }, other.key);
    expect(theirs.statusCode).toBe(404);
    expect(theirs.json<{ code: string }>().code).toBe('not_found');
    expect((await patch(draft.id, { advertiser_name: 'Authority' }, p.adminKey)).statusCode).toBe(403);
    expect((await patch(draft.id, { advertiser_name: 'Nobody' }, null)).statusCode).toBe(401);
    expect((await patch('00000000-0000-4000-8000-000000000000', { advertiser_name: 'x' })).statusCode).toBe(
      404,
    );
    expect((await patch('not-a-uuid', { advertiser_name: 'x' })).statusCode).toBe(404);
    expect((await read(draft.id))['advertiser_name']).toBe('Acme LLP');
  });
});

describe('GET /api/v1/submissions/{id}: media, approval and rejection', () => {
  test('a draft without media has none; the uploaded file is described once uploaded', async () => {
    p.clock.set(new Date('2026-11-20T07:00:00Z'));
    const draft = await createDraft(p, operator.key, { structure_ids: [site[0]!.id] });
    expect(await read(draft.id)).toMatchObject({ media: null, approval_number: null, reject_reason: null });
    const bytes = png(64, 48, 72);
    expect((await upload(p, operator.key, draft.id, bytes, 'image/png')).statusCode).toBe(200);
    expect((await read(draft.id))['media']).toEqual({
      sha256: createHash('sha256').update(bytes).digest('hex'),
      media_type: 'image/png',
      size_bytes: bytes.length,
      width: 64,
      height: 48,
      duration_ms: null,
      uploaded_at: '2026-11-20T12:00:00+05:00',
    });
  });

  test('an approved submission names its approval and whether it is revoked; a rejected one its reason', async () => {
    p.clock.set(new Date('2026-11-20T06:00:00Z'));
    const approved = await createDraft(p, operator.key, { structure_ids: [site[0]!.id] });
    await upload(p, operator.key, approved.id, png(20, 20, 73), 'image/png');
    await send(p, operator.key, approved.id);
    const issued = await approve(p, approved.id);
    expect(issued.statusCode, issued.body).toBe(201);
    const number = issued.json<{ approval_number: string }>().approval_number;
    expect(await read(approved.id)).toMatchObject({
      state: 'approved',
      approval_number: number,
      approval_revoked_at: null,
    });
    // The authority reads the same.
    expect(await read(approved.id, p.adminKey)).toMatchObject({ approval_number: number });
    expect((await revoke(p, number)).statusCode).toBe(200);
    expect((await read(approved.id))['approval_revoked_at']).toBe('2026-11-20T11:00:00+05:00');

    const rejected = await createDraft(p, operator.key, { structure_ids: [site[0]!.id] });
    await upload(p, operator.key, rejected.id, png(20, 20, 74), 'image/png');
    await send(p, operator.key, rejected.id);
    expect((await reject(p, rejected.id, 'claims not substantiated')).statusCode).toBe(200);
    expect(await read(rejected.id)).toMatchObject({
      state: 'rejected',
      approval_number: null,
      reject_reason: 'claims not substantiated',
    });
  });
});
