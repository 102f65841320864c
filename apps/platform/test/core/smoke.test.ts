import { afterAll, beforeAll, expect, test } from 'vitest';
import { apiCall, startTestPlatform, type TestPlatform } from '../support/platform.js';

let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform();
});
afterAll(async () => {
  await p?.close();
});

test('admin key reaches a console route; no key is 401 unauthenticated', async () => {
  const ok = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/organisations');
  expect(ok.statusCode).toBe(200);
  const no = await apiCall(p.servers.api, null, 'GET', '/api/v1/console/organisations');
  expect(no.statusCode).toBe(401);
  expect(no.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(no.json().code).toBe('unauthenticated');
});
