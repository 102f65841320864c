import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TestClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { createConsoleWebFeature } from '../../src/console-web/index.js';
import { platformContext } from '../../src/context.js';
import { FEATURES } from '../../src/features.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let dist: string;
let database: TestDatabase;
let servers: Servers;
let unbuilt: Servers;

async function build(distDir: string): Promise<Servers> {
  const config = loadConfig({
    env: {},
    overrides: { env: 'test', testClock: true, logLevel: 'silent', databaseUrl: database.url },
  });
  config.publicUrls = { ...config.publicUrls, verify: 'https://verify.example.kz' };
  const clock = new TestClock(new Date('2026-11-20T06:00:00Z'), { frozen: true });
  const ctx = platformContext({
    config,
    db: database.db,
    clock,
    testClock: clock,
    log: pino({ level: 'silent' }),
  });
  const features = FEATURES.map((f) => (f.name === 'console-web' ? createConsoleWebFeature({ distDir }) : f));
  return buildServers(ctx, features);
}

beforeAll(async () => {
  dist = await mkdtemp(path.join(os.tmpdir(), 'ooh-console-dist-'));
  await mkdir(path.join(dist, 'assets'));
  await writeFile(
    path.join(dist, 'index.html'),
    '<!doctype html><html><head><meta name="ooh-verify-url" content=""><script type="module" src="/console/assets/index-AbCd1234.js"></script></head><body></body></html>',
  );
  await writeFile(path.join(dist, 'assets', 'index-AbCd1234.js'), 'console.log(1)');
  await writeFile(path.join(dist, 'assets', 'index-Zz9_8-7q.css'), 'body{}');
  await writeFile(path.join(dist, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  await writeFile(path.join(os.tmpdir(), 'secret.txt'), 'outside');
  database = await createTestDatabase();
  servers = await build(dist);
  unbuilt = await build(path.join(dist, 'no-such-build'));
});
afterAll(async () => {
  for (const s of [servers, unbuilt])
    if (s) await Promise.all(Object.values(s).map((x: FastifyInstance) => x.close()));
  await database?.drop();
  await rm(dist, { recursive: true, force: true });
});

const get = (s: Servers, url: string) => s.api.inject({ method: 'GET', url });

describe('the console on the api host under /console/', () => {
  test('index.html with the verify URL filled in, a content security policy and no caching', async () => {
    const res = await get(servers, '/console/');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.body).toContain('<meta name="ooh-verify-url" content="https://verify.example.kz">');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self' https://verify.example.kz");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  test('/console redirects to /console/; unknown pages get index.html (client-side routing)', async () => {
    const redirect = await get(servers, '/console');
    expect(redirect.statusCode).toBe(308);
    expect(redirect.headers.location).toBe('/console/');
    for (const page of [
      '/console/submissions',
      '/console/moderation/0b6f6c1e-0000-4000-8000-000000000000',
      '/console/index.html',
    ]) {
      const res = await get(servers, page);
      expect(res.statusCode, page).toBe(200);
      expect(res.headers['content-type']).toContain('text/html');
      expect(res.body).toContain('index-AbCd1234.js');
    }
  });

  test('hashed assets with their content types and immutable caching; other files revalidate', async () => {
    const js = await get(servers, '/console/assets/index-AbCd1234.js');
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(js.body).toBe('console.log(1)');
    const css = await get(servers, '/console/assets/index-Zz9_8-7q.css');
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    const svg = await get(servers, '/console/favicon.svg');
    expect(svg.headers['content-type']).toBe('image/svg+xml');
    expect(svg.headers['cache-control']).toBe('no-cache');
  });

  test('a missing asset is 404 not_found; paths that would leave the build folder name nothing', async () => {
    const missing = await get(servers, '/console/assets/index-00000000.js');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().code).toBe('not_found');
    for (const url of [
      '/console/../secret.txt',
      '/console/%2e%2e/secret.txt',
      '/console/assets/%2e%2e%2f%2e%2e%2fsecret.txt',
    ]) {
      const res = await get(servers, url);
      expect(res.body, url).not.toContain('outside');
      expect([200, 404], url).toContain(res.statusCode);
    }
  });

  test('without a build, /console/ is a problem document saying how to build it', async () => {
    const res = await get(unbuilt, '/console/fleet');
    expect(res.statusCode).toBe(503);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ code: 'service_unavailable' });
    expect(res.json().detail).toContain('npm run build');
  });

  test('the verify host lets any origin read its public GET answers (seal checks in the browser)', async () => {
    const root = await servers.verify.inject({ method: 'GET', url: '/v1/authority-root.pem' });
    expect(root.headers['access-control-allow-origin']).toBe('*');
    const missing = await servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-01-01' });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['access-control-allow-origin']).toBe('*');
    const apiHost = await get(servers, '/api/v1/categories');
    expect(apiHost.headers['access-control-allow-origin']).toBeUndefined();
  });
});
