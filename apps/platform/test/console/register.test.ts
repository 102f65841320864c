import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { png } from '../approvals/media-fixtures.js';
import { ADVERTISER, buildReportFixture, FIRST_DAY, type ReportFixture } from '../reports/fixture.js';
import { apiCall } from '../support/platform.js';
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
} from './browser.js';

/*
 * Issue 25 item 3 in a real Chromium at 1366 x 768, in English, Russian and Kazakh: an agency sees, on its approved
 * submission's page, the creative, the approval envelope (what it says, and the file to download) and its plays
 * with the way to their report; the authority has a register of decided submissions (search, outcome, organisation,
 * history). Screenshots: test-artifacts/console/register-*.png.
 */

const LATER = new Date('2026-11-21T05:00:00Z');
const PASSWORD = 'register journey password';
const REJECTED_ADVERTISER = 'Coffee House LLP';

let p: ConsolePlatform;
let f: ReportFixture;
let browser: Browser;
let rejectedNumber: string;
const contexts: BrowserContext[] = [];
const errors = new WeakMap<Page, string[]>();
const url = (to: string) => `${p.apiUrl}/console${to}`;

async function user(organisationId: string, email: string): Promise<void> {
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${organisationId}/users`,
    { email, password: PASSWORD, role: 'admin' },
  );
  expect(res.statusCode, res.body).toBe(201);
}

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
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  return page;
}

async function setLanguage(page: Page, language: 'en' | 'ru' | 'kk'): Promise<void> {
  await page.locator('#language').selectOption(language);
  await expect.poll(() => page.evaluate('document.documentElement.lang')).toBe(language);
}

let authority: Page;
let agency: Page;

beforeAll(async () => {
  p = await startConsolePlatform(FIRST_DAY);
  f = await buildReportFixture(p);
  // A second submission of the agency, rejected.
  const draft = await apiCall(p.servers.api, f.keys.agency, 'POST', '/api/v1/submissions', {
    advertiser_name: REJECTED_ADVERTISER,
    period_from: '2026-11-23',
    period_to: '2026-11-30',
    structure_ids: [f.structures.s1.id],
    category_id: 1564,
  });
  expect(draft.statusCode, draft.body).toBe(201);
  const id = draft.json<{ id: string; number: string }>().id;
  rejectedNumber = draft.json<{ number: string }>().number;
  const upload = await p.servers.api.inject({
    method: 'PUT',
    url: `/api/v1/submissions/${id}/media`,
    headers: { authorization: `Bearer ${f.keys.agency}`, 'content-type': 'image/png' },
    payload: png(200, 100, 77),
  });
  expect(upload.statusCode, upload.body).toBe(200);
  expect(
    (await apiCall(p.servers.api, f.keys.agency, 'POST', `/api/v1/submissions/${id}/send`)).statusCode,
  ).toBe(200);
  p.clock.set(LATER);
  const rejected = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/submissions/${id}/reject`,
    {
      reason: 'The phone number is not readable from the road.',
    },
  );
  expect(rejected.statusCode, rejected.body).toBe(200);
  await user(p.authorityId, 'registrar@city.kz');
  await user(f.agencyId, 'planner@media-agency.kz');
  browser = await launchChromium();
  authority = await signedIn('registrar@city.kz');
  agency = await signedIn('planner@media-agency.kz');
}, 240_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await p?.close();
});

describe('issue 25 item 3 in Chromium', () => {
  test("an agency's approved submission: the creative, the envelope (read and downloaded), its plays and report", async () => {
    const page = agency;
    await page.goto(url(`/submissions/${f.submissionId}`));
    await page.locator('main h1').waitFor();
    expect(await page.locator('main').textContent()).toContain(f.submissionNumber);
    // The creative as uploaded, really drawn.
    const image = page.locator('figure.preview img');
    await expect
      .poll(() => image.evaluate((i) => (i as unknown as { naturalWidth: number }).naturalWidth))
      .toBe(320);
    // The envelope: what the authority signed.
    const envelope = page.getByTestId('approval-envelope');
    await envelope.getByText(f.approvalNumber).waitFor();
    expect(await envelope.locator('.chips li').allTextContents()).toEqual([
      'ALM-R001',
      'ALM-R002',
      'ALM-R003',
    ]);
    expect(await envelope.locator('.hash').textContent()).toMatch(/^[0-9a-f]{64}$/);
    const downloading = page.waitForEvent('download');
    await envelope.getByRole('link', { name: 'Download the envelope' }).click();
    const download = await downloading;
    expect(download.suggestedFilename()).toBe(`${f.approvalNumber}.envelope.json`);
    const document = JSON.parse(await readFile((await download.path())!, 'utf8')) as {
      v: number;
      body: { approval_number: string; structures: string[] };
      signature: string;
    };
    expect(document.v).toBe(1);
    expect(document.body.approval_number).toBe(f.approvalNumber);
    expect(document.signature.length).toBeGreaterThan(100);
    // Its plays so far (14: fixture.ts) and the way to the report.
    expect(await page.getByTestId('approval-plays-total').textContent()).toBe('14');
    await page.screenshot({ path: path.join(ARTIFACTS, 'register-agency-submission-viewport.png') });
    await screenshot(page, 'register-agency-submission');
    await expectAccessible(page, 'approved submission');
    for (const language of ['ru', 'kk'] as const) {
      await setLanguage(page, language);
      await page.getByTestId('approval-plays-total').waitFor();
      await expectNoEnglish(page, `approved submission (${language})`);
      await expectAccessible(page, `approved submission (${language})`);
      await screenshot(page, `register-agency-submission-${language}`);
    }
    await setLanguage(page, 'en');
    await page.getByRole('link', { name: 'Open the plays report' }).click();
    await page.getByRole('heading', { name: `${ADVERTISER} · ${f.submissionNumber}` }).waitFor();
    // The register is the authority's: an agency reaching for it gets the page for what does not exist.
    await page.goto(url('/register'));
    await page.locator('main h1').waitFor();
    expect(await page.locator('main h1').textContent()).not.toBe('Register of decisions');
    expect(await page.getByRole('link', { name: 'Register', exact: true }).count()).toBe(0);
    expect(errors.get(page)).toEqual([]);
  }, 120_000);

  test("the authority's register: search, outcome, organisation, each decision's history", async () => {
    const page = authority;
    await page.getByRole('link', { name: 'Register', exact: true }).click();
    await page.getByRole('heading', { name: 'Register of decisions' }).waitFor();
    const rows = page.locator('main table tbody tr');
    await expect.poll(() => rows.count()).toBe(2);
    expect(await page.getByTestId('register-count').textContent()).toBe('1–2 of 2');
    // Latest decision first: the rejection of the 21st, then the approval of the 18th.
    expect(await rows.nth(0).locator('th').textContent()).toBe(rejectedNumber);
    expect(await rows.nth(1).locator('th').textContent()).toBe(f.submissionNumber);
    // The rejection's history: created, sent, rejected with its reason.
    await rows.nth(0).locator('details summary').click();
    expect(await rows.nth(0).locator('details li strong').allTextContents()).toEqual([
      'Created',
      'Sent for review',
      'Rejected',
    ]);
    await rows.nth(0).getByText('Reason: The phone number is not readable from the road.').waitFor();
    await rows.nth(1).locator('details summary').click();
    await rows
      .nth(1)
      .getByText(/API key “/)
      .waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'register-authority-viewport.png') });
    await screenshot(page, 'register-authority');
    await expectAccessible(page, 'register');

    // Search by advertiser, then by outcome, then by organisation.
    await page.getByLabel('Search').fill('coffee');
    await page.getByRole('button', { name: 'Show' }).click();
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.nth(0).locator('th').textContent()).toBe(rejectedNumber);
    await page.getByLabel('Search').fill('');
    await page.locator('#register-state').selectOption('approved');
    await page.getByRole('button', { name: 'Show' }).click();
    await expect.poll(() => rows.first().locator('th').textContent()).toBe(f.submissionNumber);
    expect(await rows.count()).toBe(1);
    await page.locator('#register-state').selectOption('');
    await page.locator('#register-organisation').selectOption(f.operatorAId);
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByTestId('register-empty').waitFor();
    expect(await page.getByTestId('register-empty').textContent()).toBe('No decided submission matches.');
    await page.locator('#register-organisation').selectOption(f.agencyId);
    await page.getByRole('button', { name: 'Show' }).click();
    await expect.poll(() => rows.count()).toBe(2);

    for (const language of ['ru', 'kk'] as const) {
      await setLanguage(page, language);
      await page.evaluate(`document.querySelectorAll('main details').forEach((d) => { d.open = true; })`);
      await rows.nth(0).locator('details li').first().waitFor();
      await expectNoEnglish(page, `register (${language})`);
      await expectAccessible(page, `register (${language})`);
      await screenshot(page, `register-authority-${language}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `register-authority-${language}-viewport.png`) });
    }
    await setLanguage(page, 'en');
    expect(errors.get(page)).toEqual([]);
  }, 120_000);
});
