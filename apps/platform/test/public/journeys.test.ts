import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { en } from '../../console/src/public/i18n/en.js';
import { kk } from '../../console/src/public/i18n/kk.js';
import { ru } from '../../console/src/public/i18n/ru.js';
import { digestLedgerDay } from '../../src/ledger/index.js';
import { sealDay } from '../../src/seals/index.js';
import { approve, inReview, organisation, structures } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { expectAccessible, holdBackFrames, launchChromium, watchErrors } from '../console/browser.js';
import { agentBody, insertBatch } from '../seals/helpers.js';
import {
  ARTIFACTS,
  expectNoEnglish,
  expectReadableOnPhone,
  fingerprintOf,
  type PublicPlatform,
  screenshot,
  screenshotScreens,
  startPublicPlatform,
} from './browser.js';

/** The page's texts, read without the page's preact modules (they need the DOM's types). */
const DICTIONARIES = { en, ru, kk } as const;

/**
 * The public page of the verify host in a real Chromium against a real platform with real sealed days (issue 22,
 * item 1): in en, ru and kk, every sealed day verified green, the ledger head and a block verified, a creative
 * checked by number and by its file (which never leaves the browser); a tampered answer turns red, a pinned root that
 * differs is refused, and the page keeps working with the api host closed. Screenshots in test-artifacts/public/.
 */

type Language = 'en' | 'ru' | 'kk';
const LOCALES: Record<Language, string> = { en: 'en-GB', ru: 'ru-RU', kk: 'kk-KZ' };
const MEDIA = png(320, 160, 21);
const MEDIA_SHA256 = createHash('sha256').update(MEDIA).digest('hex');
const OTHER_FILE = png(320, 160, 22);
const DEVICE = `${'2'.repeat(8)}-2222-4222-8222-${'2'.repeat(12)}`;

let p: PublicPlatform;
let browser: Browser;
let approvalNumber = '';
let structureCodes: string[] = [];
let rootPem = '';

beforeAll(async () => {
  // Thursday 2026-11-19, 10:00 Almaty: an approval is issued, batches arrive on the 19th and the 20th.
  p = await startPublicPlatform(new Date('2026-11-19T05:00:00Z'));
  const operator = await organisation(p, 'operator');
  const sites = await structures(p, operator.id, 2);
  structureCodes = sites.map((s) => s.code).sort();
  const submission = await inReview(
    p,
    operator.key,
    { bytes: MEDIA, type: 'image/png' },
    { structure_ids: sites.map((s) => s.id), period_from: '2026-11-20', period_to: '2026-12-31' },
  );
  const approved = await approve(p, submission.id);
  expect(approved.statusCode, approved.body).toBe(201);
  approvalNumber = approved.json<{ approval_number: string }>().approval_number;
  const owner = `device:${DEVICE}`;
  await insertBatch(p.database.db, {
    owner,
    batchSeq: 1,
    body: agentBody(DEVICE, 1, 3),
    receivedAt: '2026-11-19T06:30:00.000000Z',
  });
  await insertBatch(p.database.db, {
    owner,
    batchSeq: 2,
    body: agentBody(DEVICE, 2, 4, 5),
    receivedAt: '2026-11-20T07:30:00.000000Z',
  });
  // The 21st: both days sealed. The 22nd: the ledger digested up to the 21st, the day that holds both seals.
  p.clock.set(new Date('2026-11-21T05:00:00Z'));
  await sealDay(p.ctx, '2026-11-20');
  p.clock.set(new Date('2026-11-22T05:00:00Z'));
  await digestLedgerDay(p.ctx, '2026-11-21');
  rootPem = (await p.servers.verify.inject({ method: 'GET', url: '/v1/authority-root.pem' })).body;
  browser = await launchChromium();
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await p?.close();
});

async function open(
  language: Language,
  options: { init?: string } = {},
): Promise<{ context: BrowserContext; page: Page; errors: string[]; requests: Request[] }> {
  const context = await browser.newContext({
    viewport: { width: 1366, height: 768 },
    locale: LOCALES[language],
    timezoneId: 'Asia/Almaty',
  });
  await holdBackFrames(context);
  if (options.init) await context.addInitScript(options.init);
  const page = await context.newPage();
  const errors = watchErrors(page);
  const requests: Request[] = [];
  page.on('request', (r) => requests.push(r));
  await page.goto(`${p.verifyUrl}/`);
  return { context, page, errors, requests };
}

const sealCard = (page: Page, day: string) => page.locator(`li.seal[data-day="${day}"]`);

async function expectDayVerified(page: Page, day: string, language: Language) {
  const card = sealCard(page, day);
  await card.and(page.locator('[data-verdict="ok"]')).waitFor({ timeout: 20_000 });
  expect(await card.locator('.badge').textContent()).toBe(DICTIONARIES[language]['verdict.ok']);
}

describe('the public page in Chromium', () => {
  test.each([
    'en',
    'ru',
    'kk',
  ] as const)('%s: seals verified, the ledger checked, a creative found by number and by its file (never sent)', async (language) => {
    const d = DICTIONARIES[language];
    const { context, page, errors, requests } = await open(language);
    try {
      // The verify host chose the language from Accept-Language.
      expect(await page.locator('html').getAttribute('lang')).toBe(language);
      await page.getByRole('heading', { level: 1, name: d['page.title'] }).waitFor();
      expect(await page.title()).toBe(d['page.title']);

      // The root: its fingerprint shown as openssl prints it; not pinned, and said so.
      expect(await page.getByTestId('served-fingerprint').textContent()).toBe(fingerprintOf(rootPem));
      expect(await page.getByTestId('trust-state').getAttribute('data-state')).toBe('unpinned');

      // Both sealed days green; the 21st is not sealed yet (the page knows the platform's day: the 22nd).
      await expectDayVerified(page, '2026-11-20', language);
      await expectDayVerified(page, '2026-11-19', language);
      expect(await sealCard(page, '2026-11-21').textContent()).toContain(d['seals.notSealed']);
      // The sealed days as a phone shows them, before anything is asked.
      await expectReadableOnPhone(page, `sealed days (${language})`);
      await page.setViewportSize({ width: 1366, height: 768 });
      const checks = sealCard(page, '2026-11-20').locator('li.check');
      await sealCard(page, '2026-11-20').locator('summary').click();
      expect(await checks.evaluateAll((items) => items.map((i) => i.className))).toEqual([
        'check check-ok',
        'check check-ok',
        'check check-ok',
        'check check-ok',
      ]);
      expect(await sealCard(page, '2026-11-20').locator('dd').first().textContent()).toBe('1');

      // The ledger head (block 3, the 21st) verified, digest and link to the block before.
      await page.getByTestId('head-verdict').and(page.getByText(d['verdict.ok'])).waitFor();
      expect(await page.getByTestId('ledger-head').locator('li.check-ok').count()).toBe(4);

      // A file with no approval, then the approved file: hashed here, only the hash asked for.
      const fileInput = page.getByLabel(d['creative.chooseFile']);
      await fileInput.setInputFiles({ name: 'other.png', mimeType: 'image/png', buffer: OTHER_FILE });
      await page.getByTestId('creative-message').and(page.getByText(d['creative.noneForFile'])).waitFor();
      await fileInput.setInputFiles({ name: 'creative.png', mimeType: 'image/png', buffer: MEDIA });
      const card = page.locator(`article.approval[data-approval="${approvalNumber}"]`);
      await card.and(page.locator('[data-verdict="ok"]')).waitFor({ timeout: 20_000 });
      expect(await page.getByTestId('file-hash').textContent()).toContain(MEDIA_SHA256);
      expect(await page.locator('.file-name').textContent()).toBe('creative.png');
      expect(await card.getByTestId('approval-status').textContent()).toBe(d['status.valid']);
      expect(await card.locator('ul.codes li').allTextContents()).toEqual(structureCodes);
      expect(await card.locator('li.check').count()).toBe(3);
      expect(await card.locator('li.check-ok').count()).toBe(3);

      // Never sent: every request is a GET to the verify host, with no body; the file's bytes went nowhere.
      for (const r of requests) {
        expect(r.method(), r.url()).toBe('GET');
        expect(r.postDataBuffer(), r.url()).toBeNull();
        expect(r.url().startsWith(`${p.verifyUrl}/`), r.url()).toBe(true);
      }
      expect(requests.some((r) => r.url().endsWith(`/v1/approvals?media_sha256=${MEDIA_SHA256}`))).toBe(true);

      // By number: the same approval.
      await page.locator('#approval-number').fill(approvalNumber.toLowerCase());
      await page.getByRole('button', { name: d['creative.check'], exact: true }).click();
      await page
        .locator(`article.approval[data-approval="${approvalNumber}"][data-verdict="ok"]`)
        .waitFor({ timeout: 20_000 });
      // The answer by number replaces the answer by file: no file check any more.
      await expect.poll(() => page.locator('article.approval li.check').count()).toBe(2);
      expect(await page.getByTestId('file-hash').count()).toBe(0);
      // A date that ends in an abbreviation ("2026 г.", "қар.") does not end a sentence with two full stops.
      expect(await page.locator('article.approval').textContent()).not.toMatch(/\.\./);

      // The first block, by height: the approval's entry, every check passed.
      await page.locator('#block-height').fill('1');
      await page.getByRole('button', { name: d['ledger.show'], exact: true }).click();
      const block = page.locator('article.block[data-day="2026-11-19"]');
      await block.getByTestId('block-verdict').and(page.getByText(d['verdict.ok'])).waitFor();
      expect(await block.locator('table.leaves tbody tr').count()).toBe(1);
      expect(await block.locator('table.leaves tbody').textContent()).toContain(approvalNumber);

      await expectAccessible(page, `public page (${language})`);
      if (language !== 'en') await expectNoEnglish(page, `public page (${language})`);
      await screenshot(page, language, 'page-1366x768');
      await page.evaluate('window.scrollTo(0, 0)');
      await page.screenshot({ path: path.join(ARTIFACTS, language, 'first-screen-1366x768.png') });

      // A phone: the creative checked and the block shown.
      await expectReadableOnPhone(page, `public page (${language})`);
      await screenshot(page, language, 'page-phone');
      await screenshotScreens(page, language, 'phone', 6);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  test('kk: an answer changed by one byte turns red, for a seal and for a ledger block', async () => {
    const d = DICTIONARIES.kk;
    const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, locale: 'kk-KZ' });
    await holdBackFrames(context);
    try {
      const page = await context.newPage();
      const flipHexAfter = (text: string, marker: string) => {
        const at = text.indexOf(marker) + marker.length;
        expect(at).toBeGreaterThan(marker.length - 1);
        return text.slice(0, at) + (text[at] === '0' ? '1' : '0') + text.slice(at + 1);
      };
      await page.route(`${p.verifyUrl}/v1/stats-seals/2026-11-20`, async (route) => {
        const original = await route.fetch();
        await route.fulfill({ response: original, body: flipHexAfter(await original.text(), '"root":"') });
      });
      await page.route(`${p.verifyUrl}/v1/ledger/blocks/2026-11-19`, async (route) => {
        const original = await route.fetch();
        await route.fulfill({
          response: original,
          body: flipHexAfter(await original.text(), '"manifest_sha256":"'),
        });
      });
      await page.goto(`${p.verifyUrl}/`);
      const card = sealCard(page, '2026-11-20');
      await card.and(page.locator('[data-verdict="failed"]')).waitFor({ timeout: 20_000 });
      expect(await card.locator('.badge').textContent()).toBe(d['verdict.failed']);
      // The signature still holds; the body shown is not what was signed.
      expect(await card.locator('li.check-failed[data-check="content"]').textContent()).toContain(
        d['reason.content_differs'],
      );
      // The day before is untouched and green.
      await expectDayVerified(page, '2026-11-19', 'kk');

      await page.locator('#block-day').fill('2026-11-19');
      await page.getByRole('button', { name: d['ledger.show'], exact: true }).click();
      const block = page.locator('article.block[data-day="2026-11-19"]');
      await block.getByTestId('block-verdict').and(page.getByText(d['verdict.failed'])).waitFor();
      expect(await block.locator('li.check-failed[data-check="leaves"]').count()).toBe(1);
      await expectAccessible(page, 'tampered (kk)');
      await expectNoEnglish(page, 'tampered (kk)');
      await screenshot(page, 'kk', 'tampered');
      // Its checks are open: a failure shows why at once.
      await expectReadableOnPhone(page, 'tampered (kk)');
      await screenshot(page, 'kk', 'tampered-phone');
    } finally {
      await context.close();
    }
  }, 120_000);

  test('ru: a seal whose signature does not verify says why, in Russian (the code of @ooh/verify translated)', async () => {
    const d = DICTIONARIES.ru;
    const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, locale: 'ru-RU' });
    await holdBackFrames(context);
    try {
      const page = await context.newPage();
      // One base64 character near the end of the CMS changed: the last bytes of the ECDSA signature's s, so the
      // SignedData still reads and the signature over the signed attributes no longer verifies.
      await page.route(`${p.verifyUrl}/v1/stats-seals/2026-11-20`, async (route) => {
        const original = await route.fetch();
        const seal = (await original.json()) as { signature: string };
        const at = seal.signature.replace(/=+$/, '').length - 3;
        const swapped = seal.signature[at] === 'A' ? 'B' : 'A';
        seal.signature = seal.signature.slice(0, at) + swapped + seal.signature.slice(at + 1);
        await route.fulfill({ response: original, json: seal });
      });
      await page.goto(`${p.verifyUrl}/`);
      const card = sealCard(page, '2026-11-20');
      await card.and(page.locator('[data-verdict="failed"]')).waitFor({ timeout: 20_000 });
      const signature = card.locator('li.check-failed[data-check="signature"]');
      expect(await signature.textContent()).toContain(d['code.cms_bad_signature']);
      expect(await card.locator('li[data-check="content"]').textContent()).toContain(
        d['reason.signature_failed'],
      );
      await expectAccessible(page, 'signature fails (ru)');
      await expectNoEnglish(page, 'signature fails (ru)');
      await signature.scrollIntoViewIfNeeded();
      await screenshot(page, 'ru', 'signature-fails');
      await expectReadableOnPhone(page, 'signature fails (ru)');
      await screenshot(page, 'ru', 'signature-fails-phone');
    } finally {
      await context.close();
    }
  }, 120_000);

  test('ru: a pinned root that differs is refused, plainly; the right pin is kept and verifies', async () => {
    const d = DICTIONARIES.ru;
    const other = 'ab'.repeat(32);
    const { context, page, errors } = await open('ru', {
      init: `if (!sessionStorage.getItem('seeded')) { sessionStorage.setItem('seeded', '1'); localStorage.setItem('ooh-public-root-pin', JSON.stringify({ fingerprint: '${other}' })); }`,
    });
    try {
      const state = page.getByTestId('trust-state');
      await state.and(page.locator('[data-state="differs"]')).waitFor();
      expect(await state.textContent()).toBe(d['root.pinnedDiffers']);
      await sealCard(page, '2026-11-20').and(page.locator('[data-verdict="refused"]')).waitFor();
      expect(await sealCard(page, '2026-11-20').locator('.badge').textContent()).toBe(d['verdict.refused']);
      expect(await sealCard(page, '2026-11-20').locator('li.check').count()).toBe(0);
      await expectAccessible(page, 'pin differs (ru)');
      await expectNoEnglish(page, 'pin differs (ru)');
      await screenshot(page, 'ru', 'pinned-root-differs');

      // Forget it; a fingerprint that is not one is refused; the fingerprint as openssl prints it is kept.
      await page.getByRole('button', { name: d['root.unpin'] }).click();
      await state.and(page.locator('[data-state="unpinned"]')).waitFor();
      await expectDayVerified(page, '2026-11-20', 'ru');
      await page.getByText(d['root.pinOpen']).click();
      await page.getByLabel(d['root.pinLabel']).fill('not a fingerprint');
      await page.getByRole('button', { name: d['root.pin'], exact: true }).click();
      await page.getByRole('alert').and(page.getByText(d['root.pinInvalid'])).waitFor();
      await page.getByLabel(d['root.pinLabel']).fill(`sha256 Fingerprint=${fingerprintOf(rootPem)}`);
      await page.getByRole('button', { name: d['root.pin'], exact: true }).click();
      await state.and(page.locator('[data-state="pinned"]')).waitFor();
      await expectDayVerified(page, '2026-11-20', 'ru');
      await page.reload();
      await state.and(page.locator('[data-state="pinned"]')).waitFor();
      await expectDayVerified(page, '2026-11-19', 'ru');

      // The whole certificate may be pinned instead; it is then the anchor the seals are checked against.
      await page.getByRole('button', { name: d['root.unpin'] }).click();
      await page.getByText(d['root.pinOpen']).click();
      await page.getByLabel(d['root.pinLabel']).fill(rootPem);
      await page.getByRole('button', { name: d['root.pin'], exact: true }).click();
      await state.and(page.locator('[data-state="pinned"]')).waitFor();
      await expectDayVerified(page, '2026-11-20', 'ru');
      await screenshot(page, 'ru', 'pinned-root');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  test('en: the language switch is kept; with the api host closed the page works all the same', async () => {
    const { context, page, errors, requests } = await open('en');
    try {
      await expectDayVerified(page, '2026-11-20', 'en');
      await page.getByRole('button', { name: 'Қазақша' }).click();
      expect(await page.locator('html').getAttribute('lang')).toBe('kk');
      await page.getByRole('heading', { level: 1, name: DICTIONARIES.kk['page.title'] }).waitFor();
      await page.reload();
      await page.getByRole('heading', { level: 1, name: DICTIONARIES.kk['page.title'] }).waitFor();
      await page.getByRole('button', { name: 'English' }).click();
      await page.getByRole('heading', { level: 1, name: DICTIONARIES.en['page.title'] }).waitFor();

      // The console's host stops: the public page needs none of it.
      await p.servers.api.close();
      const closed = await fetch(`${p.apiUrl}/healthz`).then(
        () => 'answered',
        () => 'refused',
      );
      expect(closed).toBe('refused');
      await page.reload();
      await expectDayVerified(page, '2026-11-20', 'en');
      await expectDayVerified(page, '2026-11-19', 'en');
      await page.getByTestId('head-verdict').and(page.getByText('Verified')).waitFor();
      await page.locator('#approval-number').fill(approvalNumber);
      await page.getByRole('button', { name: 'Check', exact: true }).click();
      await page
        .locator(`article.approval[data-approval="${approvalNumber}"][data-verdict="ok"]`)
        .waitFor({ timeout: 20_000 });
      expect(requests.filter((r) => r.url().startsWith(p.apiUrl))).toEqual([]);
      await screenshot(page, 'en', 'api-host-closed');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);
});
