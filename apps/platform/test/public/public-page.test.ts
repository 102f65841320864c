import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FEATURES } from '../../src/features.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createPublicPageFeature, languageFromAcceptLanguage } from '../../src/public-page/index.js';
import { approve, inReview, organisation, revoke, structures } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * The public page's routes on the verify host (issue 22, item 1): the page and its assets with their headers, the
 * language chosen from Accept-Language, /v1/ leading to the page while the spec's routes keep their answers, and the
 * public lookup of a file's approvals (only what the ledger already publishes; rate-limited; no 5xx on hostile input).
 */

const ASSET = 'index-AbCdEf12.js';
const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta name="ooh-today" content="" />
    <script type="module" crossorigin src="/assets/${ASSET}"></script>
  </head>
  <body><div id="app"></div></body>
</html>`;

let p: TestPlatform;
let work: string;
let verify: FastifyInstance;
let unbuilt: Servers;
let servers: Servers;
let approved: { number: string; sha256: string; code: string };
let revoked: { number: string; sha256: string };
let pending: { sha256: string };

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'ooh-public-page-'));
  const dist = path.join(work, 'dist');
  await mkdir(path.join(dist, 'assets'), { recursive: true });
  await writeFile(path.join(dist, 'index.html'), PAGE);
  await writeFile(path.join(dist, 'assets', ASSET), 'console.log("page")');
  await writeFile(path.join(dist, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  await writeFile(path.join(work, 'secret.txt'), 'not for the public');

  // Friday 2026-11-20, 11:00 Almaty.
  p = await startTestPlatform({ now: new Date('2026-11-20T06:00:00Z'), dataDir: path.join(work, 'data') });
  const withPage = (options: Parameters<typeof createPublicPageFeature>[0]) =>
    FEATURES.map((f) => (f.name === 'public-page' ? createPublicPageFeature(options) : f));
  servers = await buildServers(
    p.ctx,
    withPage({ distDir: dist, lookupRateLimit: { burst: 200, perSecond: 100 } }),
  );
  verify = servers.verify;
  unbuilt = await buildServers(p.ctx, withPage({ distDir: path.join(work, 'nothing-built') }));

  const operator = await organisation(p, 'operator');
  const [site] = (await structures(p, operator.id, 1)) as [{ id: string; code: string }];
  const fields = { structure_ids: [site.id], period_from: '2026-11-01', period_to: '2026-12-31' };
  const a = await inReview(p, operator.key, { bytes: png(64, 32, 1), type: 'image/png' }, fields);
  const aNumber = (await approve(p, a.id)).json<{ approval_number: string }>().approval_number;
  approved = { number: aNumber, sha256: a.sha256, code: site.code };
  const r = await inReview(p, operator.key, { bytes: png(64, 32, 2), type: 'image/png' }, fields);
  const rNumber = (await approve(p, r.id)).json<{ approval_number: string }>().approval_number;
  expect((await revoke(p, rNumber)).statusCode).toBe(200);
  revoked = { number: rNumber, sha256: r.sha256 };
  pending = await inReview(p, operator.key, { bytes: png(64, 32, 3), type: 'image/png' }, fields);
}, 120_000);

afterAll(async () => {
  for (const set of [servers, unbuilt])
    if (set) await Promise.all(Object.values(set).map((s: FastifyInstance) => s.close()));
  await p?.close();
  await rm(work, { recursive: true, force: true });
});

const get = (url: string, headers: Record<string, string> = {}, remoteAddress?: string) =>
  verify.inject({ method: 'GET', url, headers, ...(remoteAddress ? { remoteAddress } : {}) });

describe('the page on the verify host', () => {
  test('/ is the page: strict CSP with no inline script, no-cache, the platform’s Almaty day', async () => {
    const res = await get('/');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['vary']).toContain('Accept-Language');
    // No script without a src: the CSP would refuse it, and the page needs none.
    expect(res.body).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
    expect(res.body).toContain('<meta name="ooh-today" content="2026-11-20">');
    expect((await verify.inject({ method: 'HEAD', url: '/' })).statusCode).toBe(200);
  });

  test.each([
    ['ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7', 'ru'],
    ['kk-KZ', 'kk'],
    ['en;q=0.5, kk;q=0.8', 'kk'],
    ['de-DE,de;q=0.9', 'en'],
    ['*', 'en'],
    ['ru;q=0', 'en'],
    ['ru;q=abc, kk;q=0.2', 'ru'],
    [';;;,,,q=', 'en'],
  ])('Accept-Language %j gives the page in %s', async (header, language) => {
    const res = await get('/', { 'accept-language': header });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain(`<html lang="${language}">`);
    expect(res.headers['content-language']).toBe(language);
  });

  test('without Accept-Language, or with one too long to read, the page is in English', async () => {
    expect(languageFromAcceptLanguage(undefined)).toBe('en');
    expect(languageFromAcceptLanguage(`ru,${'x'.repeat(2000)}`)).toBe('en');
    expect((await get('/')).body).toContain('<html lang="en">');
  });

  test('/v1 and /v1/ lead to the page; /index.html too', async () => {
    for (const url of ['/v1', '/v1/', '/index.html']) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(308);
      expect(res.headers['location']).toBe('/');
    }
  });

  test('hashed assets are cached for a year; anything else under /assets is 404, never a file outside', async () => {
    const res = await get(`/assets/${ASSET}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(res.body).toBe('console.log("page")');
    for (const url of [
      '/assets/index-ZZZZZZZZ.js',
      '/assets/..%2Fsecret.txt',
      '/assets/..%2F..%2Fsecret.txt',
      '/assets/%2e%2e/secret.txt',
      '/assets/../../secret.txt',
      '/assets/index.html',
      `/assets/${'a'.repeat(300)}-12345678.js`,
      '/assets/%00-12345678.js',
      '/assets/%E0%A4%A-12345678.js',
    ]) {
      const r = await get(url);
      expect([404], `${url}: ${r.body}`).toContain(r.statusCode);
      expect(r.headers['content-type']).toContain('application/problem+json');
      expect(r.json().code).toBe('not_found');
    }
    const icon = await get('/favicon.svg');
    expect(icon.statusCode).toBe(200);
    expect(icon.headers['content-type']).toBe('image/svg+xml');
  });

  test('the spec’s routes under /v1 keep their answers', async () => {
    const seal = await get('/v1/stats-seals/2026-11-19');
    expect(seal.statusCode).toBe(404);
    expect(seal.json()).toMatchObject({ code: 'not_found' });
    const dictionary = await get('/v1/open/dictionary.json');
    expect(dictionary.statusCode).toBe(404);
    expect(dictionary.json()).toMatchObject({ code: 'not_published' });
    const root = await get('/v1/authority-root.pem');
    expect(root.statusCode).toBe(200);
    expect(root.body).toContain('-----BEGIN CERTIFICATE-----');
  });

  test('a verify host without the built page says how to build it (503), the spec routes still answer', async () => {
    const res = await unbuilt.verify.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'service_unavailable' });
    expect(res.json().detail).toContain('npm run build');
    expect((await unbuilt.verify.inject({ method: 'GET', url: '/v1/authority-root.pem' })).statusCode).toBe(
      200,
    );
  });
});

describe('GET /v1/approvals?media_sha256=: the public lookup of a file', () => {
  test('an approved file: number, status, dates and structure codes, nothing else', async () => {
    const res = await get(`/v1/approvals?media_sha256=${approved.sha256}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.json()).toEqual({
      media_sha256: approved.sha256,
      items: [
        {
          approval_number: approved.number,
          status: 'valid',
          valid_from: '2026-11-01',
          valid_until: '2026-12-31',
          structures: [approved.code],
        },
      ],
    });
    // The same facts as the public status of that number.
    const single = (await get(`/v1/approvals/${approved.number}`)).json();
    expect(single).toMatchObject({
      status: 'valid',
      media_sha256: approved.sha256,
      structures: [approved.code],
    });
  });

  test('a revoked approval is answered revoked', async () => {
    const res = await get(`/v1/approvals?media_sha256=${revoked.sha256}`);
    expect(res.json().items).toEqual([
      expect.objectContaining({ approval_number: revoked.number, status: 'revoked' }),
    ]);
  });

  test('a file in review and an unknown file are both answered with no approval', async () => {
    for (const hash of [pending.sha256, 'f'.repeat(64)]) {
      const res = await get(`/v1/approvals?media_sha256=${hash}`);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ media_sha256: hash, items: [] });
    }
  });

  test('a missing or malformed hash is 422 validation_failed, never 5xx', async () => {
    for (const query of [
      '',
      '?media_sha256=',
      `?media_sha256=${approved.sha256.toUpperCase()}`,
      `?media_sha256=${approved.sha256.slice(1)}`,
      `?media_sha256=${approved.sha256}0`,
      `?media_sha256=${approved.sha256}&media_sha256=${approved.sha256}`,
      '?media_sha256=%00',
      `?media_sha256=${'a'.repeat(5000)}`,
      '?media_sha256[]=x',
      "?media_sha256=' OR 1=1 --",
    ]) {
      const res = await get(`/v1/approvals${query}`);
      expect(res.statusCode, `${query}: ${res.body}`).toBe(422);
      expect(res.json()).toMatchObject({ code: 'validation_failed' });
      expect(res.json().errors[0].path).toBe('querystring:/media_sha256');
    }
    expect((await verify.inject({ method: 'POST', url: '/v1/approvals' })).statusCode).toBe(405);
  });

  test('over its rate a client gets 429 rate_limited with Retry-After; another client is not affected', async () => {
    const limited = await buildServers(
      p.ctx,
      FEATURES.map((f) =>
        f.name === 'public-page'
          ? createPublicPageFeature({ distDir: work, lookupRateLimit: { burst: 3, perSecond: 0.01 } })
          : f,
      ),
    );
    try {
      const ask = (remoteAddress: string) =>
        limited.verify.inject({
          method: 'GET',
          url: `/v1/approvals?media_sha256=${approved.sha256}`,
          remoteAddress,
        });
      for (let i = 0; i < 3; i += 1) expect((await ask('203.0.113.7')).statusCode).toBe(200);
      const refused = await ask('203.0.113.7');
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({ code: 'rate_limited' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      // A malformed request counts too: no free probing.
      const malformed = await limited.verify.inject({
        method: 'GET',
        url: '/v1/approvals?media_sha256=x',
        remoteAddress: '203.0.113.7',
      });
      expect(malformed.statusCode).toBe(429);
      expect((await ask('203.0.113.8')).statusCode).toBe(200);
      // The page itself is not limited by the lookup's bucket.
      expect(
        (
          await limited.verify.inject({
            method: 'GET',
            url: '/v1/authority-root.pem',
            remoteAddress: '203.0.113.7',
          })
        ).statusCode,
      ).toBe(200);
    } finally {
      await Promise.all(Object.values(limited).map((s: FastifyInstance) => s.close()));
    }
  });
});
