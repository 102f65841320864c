import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { buildConsole } from '../../console/build.js';
import { en } from '../../console/src/i18n/en.js';
import { bootstrap } from '../../src/bootstrap.js';
import { TestClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { createConsoleWebFeature } from '../../src/console-web/index.js';
import { type PlatformContext, platformContext } from '../../src/context.js';
import { FEATURES } from '../../src/features.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

export const ARTIFACTS = fileURLToPath(new URL('../../../../test-artifacts/console/', import.meta.url));
const AXE = fileURLToPath(new URL('../../../../node_modules/axe-core/axe.min.js', import.meta.url));

/** A platform listening on real sockets (api and verify hosts), serving a fresh build of the console. */
export interface ConsolePlatform {
  ctx: PlatformContext;
  servers: Servers;
  clock: TestClock;
  database: TestDatabase;
  adminKey: string;
  authorityId: string;
  apiUrl: string;
  verifyUrl: string;
  close(): Promise<void>;
}

export async function startConsolePlatform(now: Date): Promise<ConsolePlatform> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'ooh-console-e2e-'));
  const distDir = path.join(work, 'dist');
  // The console is built once per run, with Vite's JS API, into a folder of its own.
  await buildConsole(distDir);
  const database = await createTestDatabase();
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
  const features = FEATURES.map((f) => (f.name === 'console-web' ? createConsoleWebFeature({ distDir }) : f));
  const servers = await buildServers(ctx, features);
  await servers.api.listen({ host: '127.0.0.1', port: 0 });
  await servers.verify.listen({ host: '127.0.0.1', port: 0 });
  const portOf = (s: FastifyInstance) => (s.server.address() as { port: number }).port;
  const apiUrl = `http://127.0.0.1:${portOf(servers.api)}`;
  const verifyUrl = `http://127.0.0.1:${portOf(servers.verify)}`;
  // The public URLs are known only once listening: envelope links and the console's verify address use them.
  config.publicUrls = { ...config.publicUrls, api: apiUrl, verify: verifyUrl };
  const { key, organisationId } = await bootstrap(database.db, clock);
  return {
    ctx,
    servers,
    clock,
    database,
    adminKey: key,
    authorityId: organisationId,
    apiUrl,
    verifyUrl,
    close: async () => {
      await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
      await database.drop();
      await rm(work, { recursive: true, force: true });
    },
  };
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
  });
}

/** A desktop context in English, Almaty's time zone, its pages' effects late (holdBackFrames). */
export async function newContext(browser: Browser): Promise<BrowserContext> {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 900 },
    locale: 'en-GB',
    timezoneId: 'Asia/Almaty',
  });
  await holdBackFrames(context);
  return context;
}

/**
 * Animation frames come 150 ms late in the context's pages, as on a busy machine or in a tab out of sight: Preact runs
 * effects after the next frame or after 100 ms, so every effect comes about 100 ms after its render, and a test that
 * types as soon as a box appears does so before the page's effects have run. Finds what a slow effect breaks (a box's
 * text replaced by an effect that set it from the view) every time, not once in a full run. The journeys' contexts
 * all have it; the audit's not, since it waits for two frames on every view it measures (2.5 times as long).
 */
export async function holdBackFrames(context: BrowserContext): Promise<void> {
  // A string: the type-check has no DOM library.
  await context.addInitScript(`(() => {
    const frame = window.requestAnimationFrame.bind(window);
    window.requestAnimationFrame = (callback) => frame(() => setTimeout(() => callback(performance.now()), 150));
  })()`);
}

/** Browser errors fail the journey: a console that logs errors or throws is broken. */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text()))
      errors.push(`console: ${message.text()}`);
  });
  return errors;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

let axeSource: string | null = null;

/**
 * axe-core's serious and critical violations on the page as it is. WCAG 2.2's target size (2.5.8, 24×24 CSS px or
 * spaced as far apart) is one of them: axe ships that rule switched off, and a console used on a phone needs it.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated rather than added as a script tag: the console's Content-Security-Policy (script-src 'self') stays on.
  axeSource ??= await readFile(AXE, 'utf8');
  await page.evaluate(axeSource);
  // Runs in the page (a string: the type-check has no DOM library).
  const violations = (await page.evaluate(`(async () => {
    const result = await axe.run(document, { resultTypes: ['violations'], rules: { 'target-size': { enabled: true } } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 3).map((n) => ({ target: n.target })) }));
  })()`)) as AxeViolation[];
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** axe-core on the page as it is; serious and critical violations fail. */
export async function expectAccessible(page: Page, name: string): Promise<void> {
  const serious = await axeViolations(page);
  expect(serious, `${name}: ${JSON.stringify(serious, null, 2)}`).toEqual([]);
}

/** Keys whose text is the same in every language (language names, a bare number). */
const SAME_IN_EVERY_LANGUAGE = new Set(['language.en', 'language.ru', 'language.kk', 'plays.percent']);

/** Every English text as a whole-text pattern ({placeholders} match anything). */
const ENGLISH_PATTERNS = Object.entries(en)
  .filter(([key]) => !SAME_IN_EVERY_LANGUAGE.has(key))
  .map(([key, text]) => ({
    key,
    source: `^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\\\{\w+\\\}/g, '.+')}$`,
  }));

/**
 * No visible text (nor accessible name, placeholder or title) of the page is an English text of the console: every
 * string is translated (issue "The console": "no English left in ru/kk").
 */
export async function expectNoEnglish(page: Page, name: string): Promise<void> {
  // Runs in the page (a string: the type-check has no DOM library).
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
    const hits = [];
    for (const text of texts) {
      const hit = compiled.find((p) => p.re.test(text));
      if (hit) hits.push(hit.key + ': "' + text + '"');
    }
    return [...new Set(hits)];
  })(${JSON.stringify(ENGLISH_PATTERNS)})`)) as string[];
  expect(found, `${name}: English text left`).toEqual([]);
}
