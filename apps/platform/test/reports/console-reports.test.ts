import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { digestLedgerDay } from '../../src/ledger/index.js';
import {
  ARTIFACTS,
  type ConsolePlatform,
  expectAccessible,
  expectNoEnglish,
  launchChromium,
  screenshot,
  startConsolePlatform,
  watchErrors,
  holdBackFrames,
} from '../console/browser.js';
import { parseCsvStrict } from '../open-data/helpers.js';
import { apiCall } from '../support/platform.js';
import { ADVERTISER, buildReportFixture, FIRST_DAY, type ReportFixture } from './fixture.js';

/*
 * The reports in a real Chromium at 1366 x 768 (issue 17 item 4): the proof-of-play charts, a campaign's printable
 * report in Almaty time and in UTC with its CSV and its seals checked in the browser, and fleet health over time, in
 * English, Russian and Kazakh. The data are the signed batches of fixture.ts; screenshots go to
 * test-artifacts/console/reports-*.png.
 */

// Saturday 21 November 2026, 10:00 in Almaty: the 19th and the 20th are over and sealed.
const LATER = new Date('2026-11-21T05:00:00Z');
const PASSWORD = 'reports journey password';

let p: ConsolePlatform;
let f: ReportFixture;
let browser: Browser;
const contexts: BrowserContext[] = [];
const errors = new WeakMap<Page, string[]>();

const url = (path: string) => `${p.apiUrl}/console${path}`;

async function user(organisationId: string, email: string): Promise<void> {
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${organisationId}/users`,
    {
      email,
      password: PASSWORD,
      role: 'admin',
    },
  );
  expect(res.statusCode, res.body).toBe(201);
}

/** A signed-in page at 1366 x 768 in Almaty time. */
async function signedIn(email: string): Promise<Page> {
  const context = await browser.newContext({
    viewport: { width: 1366, height: 768 },
    locale: 'en-GB',
    timezoneId: 'Asia/Almaty',
    acceptDownloads: true,
  });
  await holdBackFrames(context);
  contexts.push(context);
  const page = await context.newPage();
  errors.set(page, watchErrors(page));
  await page.goto(url('/'));
  await page.getByLabel('Email address').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('main h1').waitFor();
  return page;
}

/** The whole page, what a 1366 x 768 screen shows of it, and each chart at its real size (to look at). */
async function shots(page: Page, name: string): Promise<void> {
  await screenshot(page, name);
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}-viewport.png`) });
  const charts = page.locator('figure.chart:has(svg)');
  const count = Math.min(await charts.count(), 3);
  for (let i = 0; i < count; i += 1) {
    await charts.nth(i).screenshot({ path: path.join(ARTIFACTS, `${name}-chart-${i + 1}.png`) });
  }
}

async function setLanguage(page: Page, language: 'en' | 'ru' | 'kk'): Promise<void> {
  await page.locator('#language').selectOption(language);
  await expect.poll(() => page.evaluate('document.documentElement.lang')).toBe(language);
}

let authority: Page;
let agency: Page;
let operator: Page;

beforeAll(async () => {
  p = await startConsolePlatform(FIRST_DAY);
  f = await buildReportFixture(p);
  // The next morning: the 20th is over; both days are sealed, the ledger day holding the 19th's seal is digested.
  p.clock.set(LATER);
  for (const day of ['2026-11-20']) {
    const sealed = await apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/seals/${day}`);
    expect(sealed.statusCode, sealed.body).toBeLessThan(300);
  }
  await digestLedgerDay(p.ctx, '2026-11-20');
  await user(p.authorityId, 'reader@city.kz');
  await user(f.agencyId, 'planner@media-agency.kz');
  await user(f.operatorAId, 'ops@almaty-outdoor.kz');
  browser = await launchChromium();
  authority = await signedIn('reader@city.kz');
  agency = await signedIn('planner@media-agency.kz');
  operator = await signedIn('ops@almaty-outdoor.kz');
}, 240_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await p?.close();
});

async function showPlays(page: Page): Promise<void> {
  await page.goto(url('/plays'));
  await page.locator('#plays-from').fill('2026-11-18');
  await page.locator('#plays-to').fill('2026-11-21');
  await page.locator('form.filters button[type="submit"]').click();
  await page.getByTestId('plays-total').filter({ hasText: '15' }).waitFor();
}

describe('reports in Chromium', () => {
  test('proof of play: plays per day by structure and by campaign against the declared plays, with their numbers', async () => {
    const page = authority;
    await showPlays(page);
    expect(await page.getByTestId('plays-flagged').textContent()).toBe('3');
    // 19 and 20 November are over: 9 + 9 declared, against 2 + 12 of the campaign's plays.
    expect(await page.getByTestId('plays-declared').textContent()).toBe('18');
    const byStructure = page.getByRole('img', { name: /^Plays per day by structure\./ });
    const label = (await byStructure.getAttribute('aria-label')) ?? '';
    expect(label).toContain('19 Nov 2026: 2 (Declared: 9)');
    expect(label).toContain('20 Nov 2026: 13 (Declared: 9)');
    // Axis titles with their unit, legend, and the numbers behind a disclosure.
    const figure = page.locator('figure.chart').first();
    expect(await figure.locator('.chart-axis-title').allTextContents()).toEqual([
      'Plays',
      'Day (Almaty time)',
    ]);
    expect(await figure.locator('.legend li').allTextContents()).toEqual([
      'ALM-R001',
      'ALM-R003',
      'ALM-R002',
      'Declared',
    ]);
    await figure.getByText('Show the numbers').click();
    const row20 = figure.getByRole('row', { name: /^20 Nov 2026/ });
    expect((await row20.locator('td').allTextContents()).map((s) => s.trim())).toEqual([
      '8',
      '3',
      '2',
      '13',
      '9',
    ]);
    // Text is drawn at 13 px whatever the width: the SVG is not scaled.
    const box = await byStructure.boundingBox();
    expect(Math.abs((box?.width ?? 0) - Number(await byStructure.getAttribute('width')))).toBeLessThan(1);
    // The campaign's own chart: flagged plays hatched, declared marks, a link to its report.
    const campaign = page.getByRole('img', {
      name: new RegExp(`^Plays per day of campaign ${f.submissionNumber}`),
    });
    expect(await campaign.getAttribute('aria-label')).toContain('20 Nov 2026: 12 (Declared: 9)');
    await page.getByRole('row', { name: /Unknown approval/ }).waitFor();
    await page.getByRole('row', { name: /Approval numbers the platform never issued\s*1/ }).waitFor();
    await shots(page, 'reports-plays');
    await expectAccessible(page, 'proof of play charts');

    // An empty period says so instead of drawing an empty frame.
    await page.locator('#plays-from').fill('2026-10-01');
    await page.locator('#plays-to').fill('2026-10-05');
    await page.locator('form.filters button[type="submit"]').click();
    await page.getByTestId('plays-total').filter({ hasText: '0' }).waitFor();
    expect(await page.locator('figure.chart').first().locator('.chart-empty').textContent()).toBe(
      'No plays in this period.',
    );
    expect(await page.locator('figure.chart svg').count()).toBe(0);
    await screenshot(page, 'reports-plays-empty');
    expect(errors.get(page)).toEqual([]);
  }, 120_000);

  test("a campaign's report: printable, in Almaty time or UTC, its CSV, its seals checked in the browser", async () => {
    const page = agency;
    await page.getByRole('link', { name: 'Reports', exact: true }).click();
    await page.getByRole('heading', { name: 'Campaign reports' }).waitFor();
    await page.getByRole('link', { name: f.submissionNumber }).click();
    await page.getByRole('heading', { name: `${ADVERTISER} · ${f.submissionNumber}` }).waitFor();
    expect(await page.getByTestId('report-plays').textContent()).toBe('14');
    expect(await page.getByTestId('report-flagged').textContent()).toBe('2');
    // Compared: the 19th and the 20th, 9 declared each, 2 + 12 played.
    expect(await page.getByTestId('report-declared').textContent()).toBe('18');
    expect(await page.getByTestId('report-deviation').textContent()).toBe('-22.22 %');
    const day19 = page.locator('table.report-days tr[data-day="2026-11-19"]');
    expect((await day19.locator('td').allTextContents()).slice(0, 3)).toEqual(['9', '2', '0']);
    const chart = page.getByRole('img', { name: /^Plays per day\./ });
    expect(await chart.getAttribute('aria-label')).toContain('20 Nov 2026: 12 (Declared: 9)');
    // Flagged plays apart, by flag.
    await page.getByRole('row', { name: /Media differs from the approval.*media_mismatch.*1/ }).waitFor();
    await page.getByRole('row', { name: /Screen off.*screen_off.*1/ }).waitFor();
    // The seal of the 19th, checked here from public data only: signature, content, chain and ledger.
    const seal19 = page.locator('table.report-seals tr[data-day="2026-11-19"]');
    await seal19.getByRole('button', { name: 'Verify' }).click();
    await seal19.getByText('Every check passed.', { exact: true }).waitFor();
    await page.getByText('The 14 plays of this report are the platform’s running counts').waitFor();
    await shots(page, 'reports-campaign-almaty');
    await expectAccessible(page, 'campaign report');

    // UTC: the four plays begun between 20:00 and 24:00 UTC on the 19th move back to the 19th.
    await page.getByRole('radio', { name: 'UTC' }).check();
    await page.getByText('Days and times in UTC.').waitFor();
    expect(page.url()).toContain('?tz=utc');
    await expect
      .poll(async () => (await day19.locator('td').allTextContents()).slice(0, 2))
      .toEqual(['9', '6']);
    const day18 = page.locator('table.report-days tr[data-day="2026-11-18"]');
    expect(await day18.locator('th').textContent()).toContain('campaign ran 5 h of this day');
    await shots(page, 'reports-campaign-utc');

    // The CSV of what is shown: UTC, a BOM, parsed as RFC 4180.
    const downloading = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Download CSV' }).click();
    const download = await downloading;
    expect(download.suggestedFilename()).toBe(`${f.submissionNumber}-plays-utc.csv`);
    const bytes = await readFile((await download.path())!);
    expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    const rows = parseCsvStrict(bytes.subarray(3).toString('utf8'));
    const s1On19 = rows.find((r) => r[0] === 'day' && r[4] === '2026-11-19' && r[6] === 'ALM-R001');
    expect(s1On19?.[5]).toBe('UTC');
    expect(s1On19?.[11]).toBe('6');

    // On paper: no navigation, no buttons, the whole table.
    await page.emulateMedia({ media: 'print' });
    expect(await page.locator('.sidenav').isVisible()).toBe(false);
    expect(await page.locator('.topbar').isVisible()).toBe(false);
    expect(await page.locator('.report-toolbar').isVisible()).toBe(false);
    expect(await page.locator('.report-cells-table').isVisible()).toBe(true);
    await screenshot(page, 'reports-campaign-print');
    await page.emulateMedia({ media: 'screen' });
    expect(errors.get(page)).toEqual([]);
  }, 120_000);

  test('an operator sees its own structures in the report, and fleet health over time from the fleet page', async () => {
    const page = operator;
    await page.goto(url(`/reports/${f.submissionId}`));
    await page.getByText('Only the plays on your organisation’s structures are included.').waitFor();
    expect(await page.getByTestId('report-plays').textContent()).toBe('11');

    await page.getByRole('link', { name: 'Fleet', exact: true }).click();
    await page.getByRole('link', { name: /^Charts over time/ }).click();
    await page.getByRole('heading', { name: 'Fleet health' }).waitFor();
    // D1 and D2 are the operator's; D2 never sent anything.
    expect(await page.getByTestId('health-devices').textContent()).toBe('2');
    const reporting = page.getByRole('img', { name: /^Devices that sent a batch\./ });
    expect(await reporting.getAttribute('aria-label')).toContain('19 Nov 2026: 1');
    const lag = page.getByRole('img', { name: /^Queue lag\./ });
    // D1's last batch of the 20th: received 06:00 UTC, newest record 05:20:15: 39.8 minutes.
    expect(await lag.getAttribute('aria-label')).toContain('20 Nov 2026 39.8 min');
    const screen = page.getByRole('img', { name: /^Screens reported off\./ });
    expect(await screen.getAttribute('aria-label')).toContain('20 Nov 2026: 100 %');
    await shots(page, 'reports-fleet-health');
    await expectAccessible(page, 'fleet health');
    await page.locator('#health-period').selectOption({ label: 'Last 24 hours, by hour' });
    // Each hour of the last 24 is a bar: the axis says so once the hours have arrived.
    await expect
      .poll(() => page.locator('figure.chart').first().locator('.chart-axis-title').allTextContents())
      .toEqual(['Devices', 'Hour (Almaty time)']);
    await shots(page, 'reports-fleet-health-hours');
    expect(errors.get(page)).toEqual([]);
  }, 120_000);

  test('in Russian and Kazakh every report page is translated, accessible and shows its numbers', async () => {
    const pages: [string, Page, () => Promise<void>][] = [
      ['plays', authority, () => showPlays(authority)],
      [
        'reports-list',
        agency,
        async () => {
          await agency.goto(url('/reports'));
          await agency.getByRole('link', { name: f.submissionNumber }).waitFor();
        },
      ],
      [
        'campaign',
        agency,
        async () => {
          await agency.goto(url(`/reports/${f.submissionId}`));
          await agency.getByTestId('report-plays').filter({ hasText: '14' }).waitFor();
        },
      ],
      [
        'campaign-utc',
        agency,
        async () => {
          await agency.goto(url(`/reports/${f.submissionId}?tz=utc`));
          await agency.locator('table.report-days tr[data-day="2026-11-18"]').waitFor();
        },
      ],
      [
        'fleet-health',
        operator,
        async () => {
          await operator.goto(url('/fleet/health'));
          await operator.getByTestId('health-devices').filter({ hasText: '2' }).waitFor();
        },
      ],
    ];
    for (const language of ['ru', 'kk'] as const) {
      for (const page of [authority, agency, operator]) await setLanguage(page, language);
      for (const [name, page, open] of pages) {
        await open();
        await page.locator('main h1').waitFor();
        await page.waitForLoadState('networkidle');
        await expectNoEnglish(page, `${name} (${language})`);
        await expectAccessible(page, `${name} (${language})`);
        await shots(page, `reports-${name}-${language}`);
      }
    }
    // The charts speak the page's language: axis titles and the declared mark.
    expect(
      await operator.locator('figure.chart').first().locator('.chart-axis-title').allTextContents(),
    ).toEqual(['Құрылғылар', 'Күн (Алматы уақыты)']);
    for (const page of [authority, agency, operator]) {
      await setLanguage(page, 'en');
      expect(errors.get(page)).toEqual([]);
    }
  }, 240_000);
});
