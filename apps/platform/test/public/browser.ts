import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import { buildPublicPage } from '../../console/build.js';
import { en } from '../../console/src/public/i18n/en.js';
import { kk } from '../../console/src/public/i18n/kk.js';
import { ru } from '../../console/src/public/i18n/ru.js';
import { bootstrap } from '../../src/bootstrap.js';
import { TestClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { platformContext } from '../../src/context.js';
import { FEATURES } from '../../src/features.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createPublicPageFeature } from '../../src/public-page/index.js';
import { expectAccessible } from '../console/browser.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import type { TestPlatform } from '../support/platform.js';

export const ARTIFACTS = fileURLToPath(new URL('../../../../test-artifacts/public/', import.meta.url));

/** A platform listening on real sockets (api and verify hosts); the verify host serves a fresh build of the page. */
export interface PublicPlatform extends TestPlatform {
  apiUrl: string;
  verifyUrl: string;
  close(): Promise<void>;
}

export async function startPublicPlatform(now: Date): Promise<PublicPlatform> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'ooh-public-e2e-'));
  const distDir = path.join(work, 'public-web');
  // The page is built once per run, with Vite's JS API, into a folder of its own.
  await buildPublicPage(distDir);
  const database: TestDatabase = await createTestDatabase();
  const clock = new TestClock(now, { frozen: true });
  const config = loadConfig({
    env: {},
    overrides: {
      env: 'test',
      testClock: true,
      logLevel: 'silent',
      databaseUrl: database.url,
      dataDir: path.join(work, 'data'),
    },
  });
  await mkdir(config.dataDir, { recursive: true });
  const ctx = platformContext({
    config,
    db: database.db,
    clock,
    testClock: clock,
    log: pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' }),
  });
  const features = FEATURES.map((f) => (f.name === 'public-page' ? createPublicPageFeature({ distDir }) : f));
  const servers: Servers = await buildServers(ctx, features);
  await servers.api.listen({ host: '127.0.0.1', port: 0 });
  await servers.verify.listen({ host: '127.0.0.1', port: 0 });
  const portOf = (s: FastifyInstance) => (s.server.address() as { port: number }).port;
  const apiUrl = `http://127.0.0.1:${portOf(servers.api)}`;
  const verifyUrl = `http://127.0.0.1:${portOf(servers.verify)}`;
  config.publicUrls = { ...config.publicUrls, api: apiUrl, verify: verifyUrl };
  const { key } = await bootstrap(database.db, clock);
  return {
    ctx,
    servers,
    clock,
    database,
    adminKey: key,
    apiUrl,
    verifyUrl,
    close: async () => {
      await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
      await database.drop();
      await rm(work, { recursive: true, force: true });
    },
  };
}

export async function screenshot(page: Page, language: string, name: string): Promise<void> {
  const folder = path.join(ARTIFACTS, language);
  await mkdir(folder, { recursive: true });
  await page.screenshot({ path: path.join(folder, `${name}.png`), fullPage: true });
}

/** The page as a phone shows it, screen by screen (the first `count` screens), to look at without zooming. */
export async function screenshotScreens(
  page: Page,
  language: string,
  name: string,
  count: number,
): Promise<void> {
  const folder = path.join(ARTIFACTS, language);
  await mkdir(folder, { recursive: true });
  const height = page.viewportSize()?.height ?? 800;
  for (let i = 0; i < count; i += 1) {
    await page.evaluate(`window.scrollTo(0, ${i * height})`);
    await page.screenshot({ path: path.join(folder, `${name}-${i + 1}.png`) });
  }
  await page.evaluate('window.scrollTo(0, 0)');
}

/**
 * The page as it is, on a phone's 390×844: nothing wider than the screen, and axe-core's serious and critical
 * violations none (WCAG 2.2 target size among them); the page is left at that size.
 */
export async function expectReadableOnPhone(page: Page, name: string): Promise<void> {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))');
  expect(await page.evaluate('document.documentElement.scrollWidth'), name).toBeLessThanOrEqual(390);
  await expectAccessible(page, `${name} on a phone`);
}

/** Texts that are the same in every language (language names, a bare sign). */
const SAME_IN_EVERY_LANGUAGE = new Set(
  (Object.keys(en) as (keyof typeof en)[]).filter((k) => en[k] === ru[k] || en[k] === kk[k]),
);

const ENGLISH_PATTERNS = Object.entries(en)
  .filter(([key]) => !SAME_IN_EVERY_LANGUAGE.has(key as keyof typeof en))
  .map(([key, text]) => ({
    key,
    source: `^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\\\{\w+\\\}/g, '.+')}$`,
  }));

/** No visible text, accessible name, placeholder or title of the page is one of the page's English texts. */
export async function expectNoEnglish(page: Page, name: string): Promise<void> {
  const found = (await page.evaluate(`((patterns) => {
    const compiled = patterns.map((p) => ({ key: p.key, re: new RegExp(p.source, 's') }));
    const texts = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      const text = (node.textContent || '').replace(/\\s+/g, ' ').trim();
      if (!parent || text === '') continue;
      if (parent.closest('.visually-hidden') === null && !parent.checkVisibility()) continue;
      texts.push(text);
    }
    for (const element of document.querySelectorAll('[aria-label],[placeholder],[title],[alt]')) {
      for (const attribute of ['aria-label', 'placeholder', 'title', 'alt']) {
        const value = element.getAttribute(attribute);
        if (value) texts.push(value.replace(/\\s+/g, ' ').trim());
      }
    }
    texts.push(document.title);
    const hits = [];
    for (const text of texts) {
      const hit = compiled.find((p) => p.re.test(text));
      if (hit) hits.push(hit.key + ': "' + text + '"');
    }
    return [...new Set(hits)];
  })(${JSON.stringify(ENGLISH_PATTERNS)})`)) as string[];
  expect(found, `${name}: English text left`).toEqual([]);
}

/** openssl's spelling of a certificate's SHA-256 fingerprint. */
export function fingerprintOf(pem: string): string {
  const der = Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return (createHash('sha256').update(der).digest('hex').toUpperCase().match(/.{2}/g) ?? []).join(':');
}
