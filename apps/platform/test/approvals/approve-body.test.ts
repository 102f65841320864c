import { afterAll, beforeAll, expect, test } from 'vitest';
import { apiCall, type TestPlatform, startTestPlatform } from '../support/platform.js';
import { approve, inReview, type Org, organisation, structures } from './helpers.js';
import { png } from './media-fixtures.js';

// Issue 18: the approve body is checked by a schema keyed by media type, so a request with no body at all still
// approves the requested period and structures, and a JSON body is refused field by field before any work.

let p: TestPlatform;
let operator: Org;
let site: { id: string; code: string }[];
let seed = 900;

beforeAll(async () => {
  p = await startTestPlatform({ now: new Date('2026-11-20T06:00:00Z') });
  operator = await organisation(p, 'operator');
  site = await structures(p, operator.id, 2);
});
afterAll(async () => {
  await p?.close();
});

const submitted = () => {
  seed += 1;
  return inReview(
    p,
    operator.key,
    { bytes: png(32, 18, seed), type: 'image/png' },
    {
      structure_ids: site.map((s) => s.id),
    },
  );
};

test('an approve request without a body approves the requested terms', async () => {
  const s = await submitted();
  const res = await p.servers.api.inject({
    method: 'POST',
    url: `/api/v1/console/submissions/${s.id}/approve`,
    headers: { authorization: `Bearer ${p.adminKey}` },
  });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json()).toEqual({ approval_number: expect.any(String), envelope_url: expect.any(String) });
});

test('a JSON approve body is refused by its schema: every fault in one 422, nothing issued', async () => {
  const s = await submitted();
  const res = await approve(p, s.id, { valid_from: 'soon', structure_ids: 'all', extra: true });
  expect(res.statusCode).toBe(422);
  expect(res.json().errors).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ path: '/valid_from', code: 'format' }),
      expect.objectContaining({ path: '/extra', code: 'unknown_key' }),
      expect.objectContaining({ path: '/structure_ids' }),
    ]),
  );
  const still = await apiCall(p.servers.api, operator.key, 'GET', `/api/v1/submissions/${s.id}`);
  expect(still.json()).toMatchObject({ state: 'in_review', approval_number: null });
});
