import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { apiCall, createOrganisation, type TestPlatform, startTestPlatform } from '../support/platform.js';
import { createDraft, type Org, organisation, send, structures, upload } from './helpers.js';
import { jpeg, mp4, png, webp } from './media-fixtures.js';

const LIMIT = 64 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let p: TestPlatform;
let dataDir: string;
let operator: Org;
let other: Org;
let site: { id: string; code: string }[];

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-flow-'));
  // The limit is configurable (MEDIA_MAX_BYTES); a small one keeps the 413 cases cheap.
  p = await startTestPlatform({
    dataDir,
    now: new Date('2026-11-20T16:30:00+05:00'),
    config: { settings: { MEDIA_MAX_BYTES: String(LIMIT) } },
  });
  operator = await organisation(p, 'operator');
  other = await organisation(p, 'operator');
  site = await structures(p, operator.id, 2);
});
afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const draft = (fields: Partial<Parameters<typeof createDraft>[2]> = {}) =>
  createDraft(p, operator.key, { structure_ids: site.map((s) => s.id), ...fields });

describe('PUT /api/v1/submissions/{id}/media', () => {
  test.each([
    ['image/png', png(48, 32), { width: 48, height: 32, duration_ms: null }],
    ['image/jpeg', jpeg(1920, 1080), { width: 1920, height: 1080, duration_ms: null }],
    ['image/webp', webp(640, 360), { width: 640, height: 360, duration_ms: null }],
    ['video/mp4', mp4(1280, 720, 15_000), { width: 1280, height: 720, duration_ms: 15_000 }],
    [
      'video/mp4',
      mp4(1080, 1920, 6_500, { moovLast: true, mdatBytes: 40_000 }),
      { width: 1080, height: 1920, duration_ms: 6_500 },
    ],
  ])('%s: answers the hash and the facts, and keeps the file by its hash', async (type, bytes, facts) => {
    const d = await draft();
    const res = await upload(p, operator.key, d.id, bytes, type);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ media_sha256: sha(bytes), ...facts });
    expect(await readFile(path.join(dataDir, 'media', sha(bytes)))).toEqual(bytes);
  });

  test("a parameter on the media type is allowed; a new upload replaces the draft's file", async () => {
    const d = await draft();
    expect((await upload(p, operator.key, d.id, png(10, 10), 'image/png; charset=binary')).statusCode).toBe(
      200,
    );
    const second = png(20, 10, 7);
    const res = await upload(p, operator.key, d.id, second, 'image/png');
    expect(res.json()).toMatchObject({ media_sha256: sha(second), width: 20 });
    const { rows } = await p.database.db.query(
      'SELECT media_sha256 FROM submission_media WHERE submission_id = $1',
      [d.id],
    );
    expect(rows).toEqual([{ media_sha256: sha(second) }]);
  });

  test.each([
    ['text/plain'],
    ['application/json'],
    ['image/gif'],
    ['application/octet-stream'],
  ])('415 unsupported_media_type for %s', async (type) => {
    const d = await draft();
    const res = await upload(p, operator.key, d.id, Buffer.from('{"a":1}'), type);
    expect(res.statusCode).toBe(415);
    expect(res.json().code).toBe('unsupported_media_type');
  });

  test.each([
    ['a PNG sent as JPEG', png(8, 8), 'image/jpeg'],
    ['a JPEG sent as WebP', jpeg(8, 8), 'image/webp'],
    ['an image sent as MP4', png(8, 8), 'video/mp4'],
    ['random bytes as PNG', Buffer.from('not an image at all'), 'image/png'],
    ['an empty body', Buffer.alloc(0), 'image/png'],
    ['an MP4 without a video track header', Buffer.concat([mp4(8, 8, 1000).subarray(0, 32)]), 'video/mp4'],
  ])('422 validation_failed for %s, nothing kept', async (_name, bytes, type) => {
    const d = await draft();
    const res = await upload(p, operator.key, d.id, bytes, type);
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().code).toBe('validation_failed');
    expect(res.json().errors[0]).toMatchObject({ path: '/', code: 'media_mismatch' });
    const { rows } = await p.database.db.query('SELECT 1 FROM submission_media WHERE submission_id = $1', [
      d.id,
    ]);
    expect(rows).toHaveLength(0);
    expect(await readdir(path.join(dataDir, 'media', 'tmp'))).toEqual([]);
  });

  test('413 body_too_large past the limit, by Content-Length and while streaming', async () => {
    const d = await draft();
    const big = png(400, 400, 3); // well over 64 KB once the rows are random enough
    const large = Buffer.concat([big, Buffer.alloc(LIMIT)]);
    const res = await upload(p, operator.key, d.id, large, 'image/png');
    expect(res.statusCode).toBe(413);
    expect(res.json().code).toBe('body_too_large');
    // Without Content-Length the limit is enforced on the streamed bytes.
    const streamed = await p.servers.api.inject({
      method: 'PUT',
      url: `/api/v1/submissions/${d.id}/media`,
      headers: {
        authorization: `Bearer ${operator.key}`,
        'content-type': 'image/png',
        'transfer-encoding': 'chunked',
      },
      payload: Readable.from([large.subarray(0, LIMIT), large.subarray(LIMIT)]),
    });
    expect(streamed.statusCode, streamed.body).toBe(413);
    expect(streamed.json().code).toBe('body_too_large');
    expect(await readdir(path.join(dataDir, 'media', 'tmp'))).toEqual([]);
    // Exactly at the limit is accepted (as far as the size goes).
    const atLimit = Buffer.concat([png(4, 4), Buffer.alloc(LIMIT - png(4, 4).length)]);
    expect((await upload(p, operator.key, d.id, atLimit, 'image/png')).statusCode).toBe(200);
  });
});

describe('who may upload', () => {
  test('another organisation gets 404, no key 401, a key without write:submissions 403', async () => {
    const d = await draft();
    const foreign = await upload(p, other.key, d.id, png(4, 4), 'image/png');
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json().code).toBe('not_found');
    expect((await upload(p, null, d.id, png(4, 4), 'image/png')).statusCode).toBe(401);
    const reader = await createOrganisation(p, 'operator', ['read:creatives']);
    const denied = await upload(p, reader.key, d.id, png(4, 4), 'image/png');
    expect(denied.statusCode).toBe(403);
    expect(denied.json().code).toBe('key_scope_denied');
    expect((await upload(p, operator.key, 'not-a-uuid', png(4, 4), 'image/png')).statusCode).toBe(404);
  });
});

describe('POST /api/v1/submissions/{id}/send', () => {
  test('refuses 422 without media and without category_id, naming both', async () => {
    const d = await draft({ category_id: null });
    const res = await send(p, operator.key, d.id);
    expect(res.statusCode).toBe(422);
    expect(res.json().errors.map((e: { path: string; code: string }) => [e.path, e.code])).toEqual([
      ['/media', 'required'],
      ['/category_id', 'required'],
    ]);
  });

  test('moves draft to in_review; review_due_at null without fast_track; a second send is 409', async () => {
    const d = await draft();
    await upload(p, operator.key, d.id, png(16, 9), 'image/png');
    const res = await send(p, operator.key, d.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id: d.id, number: d.number, state: 'in_review', review_due_at: null });
    const again = await send(p, operator.key, d.id);
    expect(again.statusCode).toBe(409);
    expect(again.json().code).toBe('state_conflict');
    // The media is fixed once sent.
    const late = await upload(p, operator.key, d.id, png(16, 9, 1), 'image/png');
    expect(late.statusCode).toBe(409);
    expect(late.json().code).toBe('state_conflict');
    expect((await send(p, other.key, d.id)).statusCode).toBe(404);
  });

  test('fast_track sets review_due_at 4 working hours ahead, in +05:00', async () => {
    // Friday 16:30 Almaty: 1.5 hours on Friday, 2.5 on Monday.
    const d = await draft({ fast_track: true });
    await upload(p, operator.key, d.id, png(16, 9, 2), 'image/png');
    const res = await send(p, operator.key, d.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().review_due_at).toBe('2026-11-23T11:30:00+05:00');
    const read = await apiCall(p.servers.api, operator.key, 'GET', `/api/v1/submissions/${d.id}`);
    expect(read.json()).toMatchObject({ state: 'in_review', review_due_at: '2026-11-23T11:30:00+05:00' });
  });
});

describe('over a real socket', () => {
  test('413 over a real socket: the answer arrives although the body was not read', async () => {
    // Listening is the last thing this file does with the server; afterAll closes it.
    const address = await p.servers.api.listen({ port: 0, host: '127.0.0.1' });
    const d = await draft();
    const res = await fetch(`${address}/api/v1/submissions/${d.id}/media`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${operator.key}`, 'content-type': 'video/mp4' },
      body: Buffer.alloc(LIMIT * 4),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { code: string }).code).toBe('body_too_large');
    // Chunked, without Content-Length: refused while streaming, the answer still arrives.
    const chunks = [
      Buffer.alloc(LIMIT / 2, 1),
      Buffer.alloc(LIMIT / 2, 2),
      Buffer.alloc(LIMIT, 3),
      Buffer.alloc(LIMIT, 4),
    ];
    const chunked = await fetch(`${address}/api/v1/submissions/${d.id}/media`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${operator.key}`, 'content-type': 'video/mp4' },
      body: Readable.toWeb(Readable.from(chunks)) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(((await chunked.json()) as { code: string }).code).toBe('body_too_large');
  });
});
