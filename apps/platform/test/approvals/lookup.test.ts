import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CreativeLookupResponse } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { apiCall, createOrganisation, type TestPlatform, startTestPlatform } from '../support/platform.js';
import {
  approve,
  authorityLookupKey,
  CATEGORY_ID,
  createDraft,
  inReview,
  lookup,
  type Org,
  organisation,
  reject,
  revoke,
  structures,
  upload,
} from './helpers.js';
import { mp4, png } from './media-fixtures.js';

// Three organisations: operators A and B own structures; agency C submits on both.
let p: TestPlatform;
let dataDir: string;
let operatorA: Org;
let operatorB: Org;
let agencyC: Org;
let authorityKey: string;
let siteA: { id: string; code: string };
let siteB: { id: string; code: string };

// X: C's video, approved for December on A's structure only (B's was requested, then narrowed away).
let x: { id: string; number: string; sha256: string; approval: string };
// Y: C's image in review; Z: C's image rejected; W: A's own image, approved on A's structure.
let y: { id: string; number: string; sha256: string };
let z: { id: string; number: string; sha256: string };
let w: { id: string; number: string; sha256: string; approval: string };

const at = (instant: string) => p.clock.set(new Date(instant));
const entriesOf = async (key: string, hash: string) => {
  const res = await lookup(p, key, [hash]);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().items[0].approvals as Record<string, unknown>[];
};

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-lookup-'));
  p = await startTestPlatform({ dataDir, now: new Date('2026-11-20T06:00:00Z') });
  operatorA = await organisation(p, 'operator');
  operatorB = await organisation(p, 'operator');
  agencyC = await organisation(p, 'agency');
  authorityKey = await authorityLookupKey(p);
  [siteA] = (await structures(p, operatorA.id, 1)) as [{ id: string; code: string }];
  [siteB] = (await structures(p, operatorB.id, 1)) as [{ id: string; code: string }];

  const both = { structure_ids: [siteA.id, siteB.id] };
  const xs = await inReview(p, agencyC.key, { bytes: mp4(1920, 1080, 12_000), type: 'video/mp4' }, both);
  const xa = await approve(p, xs.id, { structure_ids: [siteA.id] });
  x = { ...xs, approval: xa.json().approval_number };
  y = await inReview(
    p,
    agencyC.key,
    { bytes: png(10, 20, 1), type: 'image/png' },
    { ...both, period_from: '2027-01-01', period_to: '2027-01-15' },
  );
  z = await inReview(p, agencyC.key, { bytes: png(10, 20, 2), type: 'image/png' }, both);
  expect((await reject(p, z.id)).statusCode).toBe(200);
  const ws = await inReview(
    p,
    operatorA.key,
    { bytes: png(30, 40, 3), type: 'image/png' },
    { structure_ids: [siteA.id], period_from: '2026-11-01', period_to: '2026-11-30' },
  );
  w = { ...ws, approval: (await approve(p, ws.id)).json().approval_number };
});
afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe('entries and visibility', () => {
  test('the submitting agency sees its approval with its submission number', async () => {
    at('2026-12-05T06:00:00Z');
    expect(await entriesOf(agencyC.key, x.sha256)).toEqual([
      {
        status: 'valid',
        approval_number: x.approval,
        submission_number: x.number,
        valid_from: '2026-12-01',
        valid_until: '2026-12-31',
        structures: [siteA.code],
        category_id: CATEGORY_ID,
        duration_ms: 12_000,
        width: 1920,
        height: 1080,
        envelope_url: `${p.ctx.config.publicUrls.api}/api/v1/approvals/${x.approval}/envelope`,
      },
    ]);
  });

  test('an operator whose structure the approval covers sees it, without the submission number', async () => {
    const [entry] = await entriesOf(operatorA.key, x.sha256);
    expect(entry).toMatchObject({ status: 'valid', approval_number: x.approval, submission_number: null });
  });

  test('an operator whose structure was narrowed away sees an empty list, not 404', async () => {
    expect(await entriesOf(operatorB.key, x.sha256)).toEqual([]);
  });

  test('the authority sees every approval; submission numbers only for its own', async () => {
    const [entry] = await entriesOf(authorityKey, x.sha256);
    expect(entry).toMatchObject({ approval_number: x.approval, submission_number: null });
    expect(await entriesOf(authorityKey, y.sha256)).toEqual([]);
  });

  test('pending and rejected are shown to the submitting organisation only, with the requested period', async () => {
    expect(await entriesOf(agencyC.key, y.sha256)).toEqual([
      {
        status: 'pending',
        approval_number: null,
        submission_number: y.number,
        valid_from: '2027-01-01',
        valid_until: '2027-01-15',
        structures: [siteA.code, siteB.code].sort(),
        category_id: CATEGORY_ID,
        duration_ms: null,
        width: 10,
        height: 20,
        envelope_url: null,
      },
    ]);
    expect(await entriesOf(agencyC.key, z.sha256)).toMatchObject([
      { status: 'rejected', submission_number: z.number },
    ]);
    // A's structure is requested, but only approvals are shown to others.
    expect(await entriesOf(operatorA.key, y.sha256)).toEqual([]);
    expect(await entriesOf(operatorA.key, z.sha256)).toEqual([]);
  });

  test('a draft with media is not shown; the same file in another submission adds its own entry', async () => {
    const draft = await createDraft(p, agencyC.key, { structure_ids: [siteA.id] });
    await upload(p, agencyC.key, draft.id, png(10, 20, 1), 'image/png');
    expect(await entriesOf(agencyC.key, y.sha256)).toHaveLength(1);
    const again = await inReview(
      p,
      agencyC.key,
      { bytes: png(30, 40, 3), type: 'image/png' },
      { structure_ids: [siteA.id] },
    );
    const entries = await entriesOf(agencyC.key, w.sha256);
    expect(entries.map((e) => [e.status, e.submission_number])).toEqual([['pending', again.number]]);
    const ownerEntries = await entriesOf(operatorA.key, w.sha256);
    expect(ownerEntries.map((e) => [e.approval_number, e.submission_number])).toEqual([
      [w.approval, w.number],
    ]);
  });
});

describe("approvals written without the copied columns (as other features' fixtures do)", () => {
  test('are answered from the joins with the same visibility', async () => {
    at('2026-12-05T06:00:00Z');
    const draft = await createDraft(p, agencyC.key, { structure_ids: [siteA.id, siteB.id] });
    const hash = createHash('sha256').update('fixture').digest('hex');
    const { rows } = await p.database.db.query(
      `INSERT INTO approvals (number, submission_id, media_sha256, valid_from, valid_until, issued_at)
       VALUES ('APR-2026-900001', $1, $2, '2026-12-01', '2026-12-31', $3) RETURNING id`,
      [draft.id, hash, new Date('2026-11-20T06:00:00Z')],
    );
    await p.database.db.query('INSERT INTO approval_structures (approval_id, structure_id) VALUES ($1, $2)', [
      rows[0].id,
      siteB.id,
    ]);
    expect(await entriesOf(agencyC.key, hash)).toMatchObject([
      {
        status: 'valid',
        approval_number: 'APR-2026-900001',
        submission_number: draft.number,
        structures: [siteB.code],
      },
    ]);
    expect(await entriesOf(operatorB.key, hash)).toMatchObject([
      { approval_number: 'APR-2026-900001', submission_number: null },
    ]);
    expect(await entriesOf(operatorA.key, hash)).toEqual([]);
  });
});

describe('statuses on the Almaty date of the clock', () => {
  test.each([
    ['2026-11-30T18:59:59Z', 'not_yet_valid'], // 23:59:59 on 30 November in Almaty
    ['2026-11-30T19:00:00Z', 'valid'], // 00:00 on 1 December in Almaty
    ['2026-12-31T18:59:59Z', 'valid'],
    ['2026-12-31T19:00:00Z', 'expired'],
  ])('at %s X is %s', async (instant, status) => {
    at(instant);
    expect((await entriesOf(agencyC.key, x.sha256))[0]!.status).toBe(status);
  });

  test('a revoked approval is revoked on any date, and the list version rises from null', async () => {
    at('2026-11-25T06:00:00Z');
    expect((await lookup(p, operatorA.key, [w.sha256])).json().revocation_list_version).toBeNull();
    expect((await entriesOf(operatorA.key, w.sha256))[0]!.status).toBe('valid');
    expect((await revoke(p, w.approval)).statusCode).toBe(200);
    for (const instant of ['2026-10-01T06:00:00Z', '2026-11-25T06:00:00Z', '2027-06-01T06:00:00Z']) {
      at(instant);
      const res = await lookup(p, operatorA.key, [w.sha256]);
      expect(res.json().items[0].approvals[0].status).toBe('revoked');
      expect(res.json().revocation_list_version).toBe(1);
    }
  });
});

describe('POST /api/v1/creatives/lookup: the request', () => {
  test('one item per hash, in the order given, without repeats; unknown hashes have empty lists', async () => {
    const unknown = createHash('sha256').update('nothing').digest('hex');
    const res = await lookup(p, agencyC.key, [y.sha256, x.sha256, y.sha256, unknown, x.sha256]);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Value.Check(CreativeLookupResponse, body)).toBe(true);
    expect(body.items.map((i: { sha256: string }) => i.sha256)).toEqual([y.sha256, x.sha256, unknown]);
    expect(body.items[2].approvals).toEqual([]);
    expect((await lookup(p, agencyC.key, [])).json()).toMatchObject({ items: [] });
  });

  test('422 names every bad hash; more than 500 is refused', async () => {
    const good = x.sha256;
    const res = await lookup(p, agencyC.key, [good, good.toUpperCase(), 'abc', 42]);
    expect(res.statusCode).toBe(422);
    expect(res.json().errors.map((e: { path: string }) => e.path)).toEqual([
      '/hashes/1',
      '/hashes/2',
      '/hashes/3',
    ]);
    const many = Array.from({ length: 501 }, (_, i) => createHash('sha256').update(String(i)).digest('hex'));
    const tooMany = await lookup(p, agencyC.key, many);
    expect(tooMany.statusCode).toBe(422);
    expect(tooMany.json().errors).toContainEqual(
      expect.objectContaining({ path: '/hashes', code: 'too_many' }),
    );
    expect((await lookup(p, agencyC.key, many.slice(0, 500))).statusCode).toBe(200);
    expect(
      (await apiCall(p.servers.api, agencyC.key, 'POST', '/api/v1/creatives/lookup', {})).statusCode,
    ).toBe(422);
    expect(
      (await apiCall(p.servers.api, agencyC.key, 'POST', '/api/v1/creatives/lookup', { hashes: 'x' }))
        .statusCode,
    ).toBe(422);
    const extra = await apiCall(p.servers.api, agencyC.key, 'POST', '/api/v1/creatives/lookup', {
      hashes: [],
      more: 1,
    });
    expect(extra.json().errors).toContainEqual(
      expect.objectContaining({ path: '/more', code: 'unknown_key' }),
    );
  });

  test('scope read:creatives is required', async () => {
    const writer = await createOrganisation(p, 'operator', ['write:submissions']);
    const res = await lookup(p, writer.key, [x.sha256]);
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('key_scope_denied');
    expect((await lookup(p, p.adminKey, [x.sha256])).json().code).toBe('key_scope_denied');
  });

  test('one database query per call, however many hashes', async () => {
    const counting = p.ctx.db as unknown as { query: (...args: unknown[]) => unknown };
    const original = counting.query;
    let calls = 0;
    counting.query = function (this: unknown, ...args: unknown[]) {
      calls += 1;
      return original.apply(this, args);
    };
    try {
      const count = async (n: number) => {
        calls = 0;
        const hashes = Array.from({ length: n }, (_, i) =>
          createHash('sha256').update(`q${i}`).digest('hex'),
        );
        hashes[0] = x.sha256;
        expect((await lookup(p, agencyC.key, hashes)).statusCode).toBe(200);
        return calls;
      };
      const one = await count(1);
      expect(await count(500)).toBe(one);
      // Authenticating the key is one query; the lookup itself is the other.
      expect(one).toBeLessThanOrEqual(2);
    } finally {
      counting.query = original;
    }
  });
});

describe('GET /api/v1/creatives/{sha256} and GET /api/v1/approvals/{number}/envelope', () => {
  test('the single lookup answers the same item', async () => {
    at('2026-12-05T06:00:00Z');
    const single = await apiCall(p.servers.api, agencyC.key, 'GET', `/api/v1/creatives/${x.sha256}`);
    expect(single.statusCode).toBe(200);
    const batch = await lookup(p, agencyC.key, [x.sha256]);
    expect(single.json()).toEqual(batch.json().items[0]);
    const invisible = await apiCall(p.servers.api, operatorB.key, 'GET', `/api/v1/creatives/${x.sha256}`);
    expect(invisible.json()).toEqual({ sha256: x.sha256, approvals: [] });
    const bad = await apiCall(
      p.servers.api,
      agencyC.key,
      'GET',
      `/api/v1/creatives/${x.sha256.toUpperCase()}`,
    );
    expect(bad.statusCode).toBe(422);
  });

  test('the envelope follows the same visibility; anything else is 404', async () => {
    const url = `/api/v1/approvals/${x.approval}/envelope`;
    for (const key of [agencyC.key, operatorA.key, authorityKey]) {
      const res = await apiCall(p.servers.api, key, 'GET', url);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json().body.approval_number).toBe(x.approval);
    }
    expect((await apiCall(p.servers.api, operatorB.key, 'GET', url)).statusCode).toBe(404);
    expect(
      (await apiCall(p.servers.api, agencyC.key, 'GET', '/api/v1/approvals/APR-2026-999999/envelope'))
        .statusCode,
    ).toBe(404);
  });
});
