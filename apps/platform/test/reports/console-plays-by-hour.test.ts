import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type ConsolePlatform,
  expectAccessible,
  expectNoEnglish,
  launchChromium,
  screenshot,
  startConsolePlatform,
  watchErrors,
  holdBackFrames,
} from '../console/browser.js';
import { apiCall } from '../support/platform.js';
import { ADVERTISER, buildReportFixture, FIRST_DAY, type ReportFixture } from './fixture.js';

/*
 * Proof of play per hour in a real Chromium at 1366 x 768 (issue 25 item 4: "one bar per day only (add hourly)"; item
 * 3: charts named by the bare number): the Day/Hour switch draws the 24 Almaty hours of a day with their numbers in
 * the table, and the campaign charts name the advertiser beside the submission number, in English, Russian and
 * Kazakh. The data are the signed batches of fixture.ts; screenshots go to test-artifacts/console/plays-hours-*.png.
 */

// Saturday 21 November 2026, 10:00 in Almaty.
const LATER = new Date('2026-11-21T05:00:00Z');
const PASSWORD = 'plays by hour password';

let p: ConsolePlatform;
let f: ReportFixture;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let errors: string[];

const url = (path: string) => `${p.apiUrl}/console${path}`;

beforeAll(async () => {
  p = await startConsolePlatform(FIRST_DAY);
  f = await buildReportFixture(p);
  p.clock.set(LATER);
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${p.authorityId}/users`,
    { email: 'hours@city.kz', password: PASSWORD, role: 'admin' },
  );
  expect(res.statusCode, res.body).toBe(201);
  browser = await launchChromium();
  context = await browser.newContext({
    viewport: { width: 1366, height: 768 },
    locale: 'en-GB',
    timezoneId: 'Asia/Almaty',
  });
  await holdBackFrames(context);
  page = await context.newPage();
  errors = watchErrors(page);
  await page.goto(url('/'));
  await page.getByLabel('Email address').fill('hours@city.kz');
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#login-password').waitFor({ state: 'detached' });
  await page.locator('main h1').waitFor();
}, 240_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await p?.close();
});

async function setLanguage(language: 'en' | 'ru' | 'kk'): Promise<void> {
  await page.locator('#language').selectOption(language);
  await expect.poll(() => page.evaluate('document.documentElement.lang')).toBe(language);
}

/** The rows of the first chart's numbers table: [row header, ...cells]. */
async function numberRows(): Promise<string[][]> {
  const figure = page.locator('figure.chart').first();
  const details = figure.locator('details.chart-numbers');
  if ((await details.getAttribute('open')) === null) await details.locator('summary').click();
  return figure
    .locator('tbody tr')
    .evaluateAll((rows) => rows.map((r) => [...r.children].map((c) => (c.textContent ?? '').trim())));
}

describe('proof of play per hour in Chromium', () => {
  test('the switch draws the 24 Almaty hours of a day, numbers in the table; the charts name the advertiser', async () => {
    await page.goto(url('/plays'));
    await page.locator('#plays-from').fill('2026-11-20');
    await page.locator('#plays-to').fill('2026-11-20');
    await page.locator('form.filters button[type="submit"]').click();
    // The 20th: 12 of the campaign and 1 under an approval number never issued (the gov slot play is apart).
    await page.getByTestId('plays-total').filter({ hasText: '13' }).waitFor();
    const dayCampaign = page.getByRole('img', {
      name: `Plays per day of campaign ${f.submissionNumber} (${ADVERTISER}). 20 Nov 2026: 12 (Declared: 9)`,
    });
    await dayCampaign.waitFor();

    await page.getByRole('radio', { name: 'Per hour' }).check();
    const chart = page.getByRole('img', { name: /^Plays per hour by structure\./ });
    await chart.waitFor();
    await page.getByRole('heading', { name: 'Plays per hour by structure' }).waitFor();
    await page.getByRole('heading', { name: 'Plays per hour by campaign' }).waitFor();
    expect(await page.getByTestId('plays-hours-hint').textContent()).toContain(
      'Hours in Almaty time from 20 Nov 2026 to 20 Nov 2026',
    );
    const label = (await chart.getAttribute('aria-label')) ?? '';
    const entries = label.replace(/^Plays per hour by structure\. /, '').split('; ');
    expect(entries).toHaveLength(24);
    expect(entries[0]).toBe('20 Nov, 00:00: 0');
    // 20:00Z on the 19th is 01:00 on the 20th in Almaty.
    expect(entries[1]).toBe('20 Nov, 01:00: 1');
    expect(entries[4]).toBe('20 Nov, 04:00: 2');
    expect(entries[10]).toBe('20 Nov, 10:00: 5');
    // Tick labels: the day at midnight, hours after it; axis titles say hours in Almaty time.
    const figure = page.locator('figure.chart').first();
    const ticks = await figure.locator('svg text.chart-axis').allTextContents();
    expect(ticks).toContain('20 Nov');
    expect(ticks).toContain('12:00');
    expect(await figure.locator('.chart-axis-title').allTextContents()).toEqual([
      'Plays',
      'Hour (Almaty time)',
    ]);
    // The numbers: 24 rows, one per hour, their totals the chart's.
    const rows = await numberRows();
    expect(rows).toHaveLength(24);
    expect(rows.map((r) => r[0])).toEqual(
      Array.from({ length: 24 }, (_, h) => `20 Nov, ${String(h).padStart(2, '0')}:00`),
    );
    const totalAt = (hour: number) => rows[hour]!.at(-1);
    expect([totalAt(0), totalAt(1), totalAt(2), totalAt(4), totalAt(8), totalAt(9), totalAt(10)]).toEqual([
      '0',
      '1',
      '1',
      '2',
      '1',
      '3',
      '5',
    ]);
    // The campaign's chart per hour, named with its advertiser.
    const campaign = page.getByRole('img', {
      name: new RegExp(
        `^Plays per hour of campaign ${f.submissionNumber} \\(${ADVERTISER.replace(/[()".,=]/g, '\\$&')}\\)\\.`,
      ),
    });
    const campaignLabel = (await campaign.getAttribute('aria-label')) ?? '';
    expect(campaignLabel).toContain('20 Nov, 09:00: 3');
    expect(campaignLabel).toContain('20 Nov, 10:00: 4');
    // The period's figures stay the days'.
    expect(await page.getByTestId('plays-total').textContent()).toBe('13');
    await screenshot(page, 'plays-hours-en');
    await expectAccessible(page, 'plays per hour (en)');

    for (const language of ['ru', 'kk'] as const) {
      await setLanguage(language);
      await page.waitForLoadState('networkidle');
      await expect.poll(async () => (await numberRows()).length).toBe(24);
      const perHour = page.getByRole('radio', { name: language === 'ru' ? 'По часам' : 'Сағаттар бойынша' });
      expect(await perHour.isChecked()).toBe(true);
      await expectNoEnglish(page, `plays per hour (${language})`);
      await expectAccessible(page, `plays per hour (${language})`);
      await screenshot(page, `plays-hours-${language}`);
    }
    // Kazakh as CLDR writes it, whether or not the browser has Kazakh data.
    expect((await numberRows())[10]![0]).toBe('20 қар., 10:00');
    expect(await page.getByRole('heading', { level: 2 }).first().textContent()).toBe(
      'Конструкциялар бойынша сағаттық көрсетілімдер',
    );
    await page.getByRole('img', { name: new RegExp(`^${f.submissionNumber} \\(`) }).waitFor();

    await setLanguage('ru');
    await page.getByRole('radio', { name: 'По дням' }).check();
    await page.getByRole('img', { name: /^Показы в день по конструкциям\./ }).waitFor();
    expect(await numberRows()).toHaveLength(1);
    await setLanguage('en');
    expect(errors).toEqual([]);
  }, 180_000);

  test("a campaign's report per hour: the 24 hours of a day in Almaty time or UTC, en/ru/kk", async () => {
    await page.goto(url(`/reports/${f.submissionId}`));
    await page.getByRole('heading', { name: `${ADVERTISER} · ${f.submissionNumber}` }).waitFor();
    await page.getByRole('radio', { name: 'Per hour' }).check();
    await page.getByRole('heading', { name: 'Plays per hour', exact: true }).waitFor();
    // The last day with plays first.
    expect(await page.locator('#report-hour-day').inputValue()).toBe('2026-11-20');
    const chart = page.getByRole('img', { name: /^Plays per hour on 20 Nov 2026\./ });
    const entries = ((await chart.getAttribute('aria-label')) ?? '').split('. ')[1]!.split('; ');
    expect(entries).toHaveLength(24);
    expect(entries[4]).toBe('20 Nov 2026, 04:00: 2');
    expect(entries[10]).toBe('20 Nov 2026, 10:00: 4');
    const rows = await numberRows();
    expect(rows).toHaveLength(24);
    // Not flagged, flagged, total.
    expect(rows[10]).toEqual(['20 Nov 2026, 10:00', '3', '1', '4']);
    expect(await page.locator('figure.chart').first().locator('.chart-axis-title').allTextContents()).toEqual(
      ['Plays', 'Hour (Almaty time)'],
    );
    await page.locator('#report-hour-day').selectOption('2026-11-19');
    await expect.poll(async () => (await numberRows())[14]).toEqual(['19 Nov 2026, 14:00', '2', '0', '2']);
    await screenshot(page, 'plays-hours-report-en');
    await expectAccessible(page, 'campaign report per hour (en)');

    // UTC: the plays of 23:30Z and 23:40Z on the 19th are in its hour 23.
    await page.getByRole('radio', { name: 'UTC' }).check();
    await page.getByText('Days and times in UTC.').waitFor();
    await expect.poll(async () => (await numberRows())[23]).toEqual(['19 Nov 2026, 23:00', '1', '1', '2']);
    expect(await page.locator('figure.chart').first().locator('.chart-axis-title').allTextContents()).toEqual(
      ['Plays', 'Hour (UTC)'],
    );

    for (const language of ['ru', 'kk'] as const) {
      await setLanguage(language);
      await page.waitForLoadState('networkidle');
      await expect.poll(async () => (await numberRows()).length).toBe(24);
      await expectNoEnglish(page, `campaign report per hour (${language})`);
      await expectAccessible(page, `campaign report per hour (${language})`);
      await screenshot(page, `plays-hours-report-${language}`);
    }
    // Kazakh instants as CLDR writes them, never '2026 M11 21' where the browser has no Kazakh data.
    const head = (await page.locator('.report-head').textContent()) ?? '';
    expect(head).toContain('2026 ж. 21 қар., 05:00 UTC');
    expect(head).not.toMatch(/ M\d{1,2} /);
    await setLanguage('en');
    await page.getByRole('radio', { name: 'Per day' }).check();
    await page.getByRole('img', { name: /^Plays per day\./ }).waitFor();
    expect(errors).toEqual([]);
  }, 180_000);
});
