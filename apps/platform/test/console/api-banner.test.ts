import type { Browser, Page, Route } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { en } from '../../console/src/i18n/en.js';
import { kk } from '../../console/src/i18n/kk.js';
import { ru } from '../../console/src/i18n/ru.js';
import { apiCall } from '../support/platform.js';
import {
  type ConsolePlatform,
  expectAccessible,
  expectNoEnglish,
  launchChromium,
  newContext,
  screenshot,
  startConsolePlatform,
  watchErrors,
} from './browser.js';

/*
 * Issue "What a newcomer tripped over", item 7: "a console banner when the API cannot be reached (today it silently
 * shows the sign-in page)". The console page itself loads; its API calls and /readyz are cut off in Chromium, as a
 * stopped platform behind a proxy, or a network gone, would.
 */

const NOW = new Date('2026-11-20T06:00:00Z');
const EMAIL = 'duty@city.kz';
const PASSWORD = 'banner journey password';

let p: ConsolePlatform;
let browser: Browser;

beforeAll(async () => {
  p = await startConsolePlatform(NOW);
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${p.authorityId}/users`,
    {
      email: EMAIL,
      password: PASSWORD,
      role: 'admin',
    },
  );
  expect(res.statusCode, res.body).toBe(201);
  browser = await launchChromium();
}, 180_000);
afterAll(async () => {
  await browser?.close();
  await p?.close();
});

const url = (path: string) => `${p.apiUrl}/console${path}`;
/** Everything the console asks the api host, but not the page and its files. */
const API = (u: URL) => u.pathname === '/readyz' || u.pathname.startsWith('/api/');
const cutOff = (route: Route) => route.abort('connectionrefused');
const banner = (page: Page) => page.getByRole('alert').filter({ hasText: en['apiBanner.retry'] });

/** Browser errors other than the refused requests themselves. */
const realErrors = (errors: string[]) =>
  errors.filter((e) => !/ERR_CONNECTION_REFUSED|Failed to fetch/.test(e));

describe('the console when the API cannot be reached', () => {
  test('says so above the sign-in page, in en, ru and kk, and goes once the API answers', async () => {
    const context = await newContext(browser);
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.route(API, cutOff);
    await page.goto(url('/'));
    await expect.poll(() => page.getByRole('heading', { name: 'Sign in' }).isVisible()).toBe(true);
    await expect
      .poll(() => page.getByRole('alert').first().textContent())
      .toContain(en['apiBanner.unreachable']);
    await screenshot(page, 'api-banner-en');
    await expectAccessible(page, 'api banner');

    for (const [language, texts] of [
      ['ru', ru],
      ['kk', kk],
    ] as const) {
      await page.evaluate(`localStorage.setItem('ooh-console-language', '${language}')`);
      await page.reload();
      await expect
        .poll(() => page.getByRole('alert').first().textContent())
        .toBe(`${texts['apiBanner.unreachable']}${texts['apiBanner.retry']}`);
      await expectNoEnglish(page, `api banner ${language}`);
    }
    await screenshot(page, 'api-banner-kk');
    await page.evaluate(`localStorage.setItem('ooh-console-language', 'en')`);

    // The platform answers but its database does not: its own 503 problem document.
    await page.unroute(API, cutOff);
    await page.route(API, (route) =>
      new URL(route.request().url()).pathname === '/readyz'
        ? route.fulfill({
            status: 503,
            contentType: 'application/problem+json',
            body: JSON.stringify({ code: 'service_unavailable', status: 503, detail: 'not ready' }),
          })
        : route.continue(),
    );
    await page.reload();
    await expect
      .poll(() => page.getByRole('alert').first().textContent())
      .toContain(en['apiBanner.notReady']);

    // Back: the banner goes.
    await page.unrouteAll();
    await banner(page).getByRole('button', { name: en['apiBanner.retry'] }).click();
    await expect.poll(() => banner(page).count()).toBe(0);
    expect(realErrors(errors)).toEqual([]);
    await context.close();
  });

  test('a signed-in user cut off sees the banner, not a silent sign-in page, and is back in once the API answers', async () => {
    const context = await newContext(browser);
    const page = await context.newPage();
    const errors = watchErrors(page);
    await page.goto(url('/'));
    await page.getByLabel('Email address').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('button', { name: 'Sign out' }).isVisible()).toBe(true);
    expect(await banner(page).count()).toBe(0);

    // The platform goes away; the page is opened again (a new tab, a reload).
    await page.route(API, cutOff);
    await page.reload();
    await expect.poll(() => banner(page).count()).toBe(1);
    expect(await banner(page).textContent()).toContain(en['apiBanner.unreachable']);

    // It comes back: the console finds the session it had, without signing in again.
    await page.unroute(API, cutOff);
    await banner(page).getByRole('button', { name: en['apiBanner.retry'] }).click();
    await expect.poll(() => page.getByRole('button', { name: 'Sign out' }).isVisible()).toBe(true);
    expect(await banner(page).count()).toBe(0);
    expect(realErrors(errors)).toEqual([]);
    await context.close();
  });
});
