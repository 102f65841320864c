import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { apiCall, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { createDraft, organisation, structures, upload } from './helpers.js';
import { png } from './media-fixtures.js';

let p: TestPlatform;
beforeAll(async () => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-media-read-'));
  p = await startTestPlatform({ dataDir });
});
afterAll(async () => {
  await p?.close();
});

test('GET .../media gives the stored bytes to the owner and the authority, 404 to anyone else', async () => {
  const operator = await organisation(p, 'operator');
  const other = await organisation(p, 'agency');
  const [structure] = await structures(p, operator.id, 1);
  const draft = await createDraft(p, operator.key, { structure_ids: [structure!.id] });
  const none = await apiCall(p.servers.api, operator.key, 'GET', `/api/v1/submissions/${draft.id}/media`);
  expect(none.statusCode).toBe(404);
  const bytes = png(64, 32, 7);
  expect((await upload(p, operator.key, draft.id, bytes, 'image/png')).statusCode).toBe(200);

  const own = await apiCall(p.servers.api, operator.key, 'GET', `/api/v1/submissions/${draft.id}/media`);
  expect(own.statusCode).toBe(200);
  expect(own.headers['content-type']).toBe('image/png');
  // An uploaded file on the console's origin: never sniffed, never run as a page, saved when navigated to
  // (issue "Trust under attack", item 6).
  expect(own.headers).toMatchObject({
    'x-content-type-options': 'nosniff',
    'content-security-policy': "sandbox; default-src 'none'",
    'content-disposition': `attachment; filename="${own.headers.etag?.toString().replaceAll('"', '')}.png"`,
  });
  expect(Buffer.compare(own.rawPayload, bytes)).toBe(0);
  const authority = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/submissions/${draft.id}/media`);
  expect(authority.statusCode).toBe(200);
  expect(authority.rawPayload.length).toBe(bytes.length);
  const stranger = await apiCall(p.servers.api, other.key, 'GET', `/api/v1/submissions/${draft.id}/media`);
  expect(stranger.statusCode).toBe(404);
  expect(stranger.json().code).toBe('not_found');
});
