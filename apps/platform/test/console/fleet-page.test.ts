import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { createCsr, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { en, type MessageKey } from '../../console/src/i18n/en.js';
import { kk } from '../../console/src/i18n/kk.js';
import { ru } from '../../console/src/i18n/ru.js';
import { type Device, enrol, MINUTE, modeChange, play, sendBatch } from '../alerts/helpers.js';
import { apiCall, createOrganisation, createStructure } from '../support/platform.js';
import {
  ARTIFACTS,
  type ConsolePlatform,
  expectAccessible,
  holdBackFrames,
  expectNoEnglish,
  launchChromium,
  startConsolePlatform,
  watchErrors,
} from './browser.js';

/*
 * The fleet page of a city's fleet in Chromium at 1366×768, in en, ru and kk (issue 22, item 2): the fleet counted by
 * state at the top, each count a link to the list filtered on it; search, filter, sort and pages from the server, all
 * in the URL (a view can be linked, the back button returns to the one before); each device on its own page with its
 * batches and their answers, rejects, clock offset, certificate history, and the actions the rows used to carry.
 * Screenshots in test-artifacts/console/fleet/<lang>/, axe-core on each view, no English left in ru and kk.
 */

const LANGUAGES = ['en', 'ru', 'kk'] as const;
type Language = (typeof LANGUAGES)[number];
const DICTIONARIES: Record<Language, Record<MessageKey, string>> = { en, ru, kk };
const LOCALES: Record<Language, string> = { en: 'en-GB', ru: 'ru-RU', kk: 'kk-KZ' };

// Friday 2026-11-20, 11:00 Almaty.
const NOW = new Date('2026-11-20T06:00:00Z');
const PASSWORD = 'fleet page password';
const EMAIL = 'operator@almaty-screens.kz';
/** More than one page of 50. */
const DEVICES = 56;
const code = (i: number) => `CITY-${String(i).padStart(3, '0')}`;

let p: ConsolePlatform;
let browser: Browser;
const devices: Device[] = [];
/** The device with a certificate, batches, a reject and a clock running ahead: CITY-007. */
let busy: Device;

beforeAll(async () => {
  p = await startConsolePlatform(NOW);
  const operator = await createOrganisation(p, 'operator', ['console:fleet'], 'Almaty Screens LLP');
  const user = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${operator.id}/users`,
    { email: EMAIL, password: PASSWORD, role: 'admin' },
  );
  expect(user.statusCode, user.body).toBe(201);
  for (let i = 1; i <= DEVICES; i++) {
    devices.push(await enrol(p, operator.key, await createStructure(p, operator.id, { code: code(i) })));
  }
  busy = devices[6]!;
  // CITY-007 gets a certificate through a re-enrolment with a CSR: its history has two keys and one certificate.
  const keyPair = generateEs256KeyPair();
  const reEnrolled = await apiCall(
    p.servers.api,
    operator.key,
    'POST',
    `/api/v1/console/devices/${busy.id}/re-enrol`,
    {
      public_key: exportPublicKeySpki(keyPair.publicKey),
      csr: await createCsr({ subject: 'CN=player CITY-007', keyPair }),
    },
  );
  expect(reEnrolled.statusCode, reEnrolled.body).toBe(200);
  busy.privateKey = keyPair.privateKey;

  const at = (m: number) => new Date(NOW.getTime() + m * MINUTE);
  // Three silent devices (their last batch 2 hours ago), the rest of the first 40 reporting; CITY-012 lags 75 min.
  p.clock.set(at(-120));
  for (const i of [3, 4, 5]) await sendBatch(p, devices[i - 1]!, [play(devices[i - 1]!, at(-121))]);
  p.clock.set(at(-2));
  for (let i = 6; i <= 40; i++) {
    const d = devices[i - 1]!;
    await sendBatch(p, d, [play(d, at(i === 12 ? -77 : -3))]);
  }
  // CITY-020 reports its screen off.
  await sendBatch(p, devices[19]!, [modeChange(devices[19]!, at(-2), 'normal', 'screen_off')]);
  p.clock.set(at(-1));
  await sendBatch(p, busy, [play(busy, at(-2))]);
  p.clock.set(NOW);
  await p.database.db.query(
    `INSERT INTO device_handshake_refusal_counts (minute, device_id, reason, refusals) VALUES ($1, $2, 'certificate_expired', 2)`,
    [at(-10), devices[49]!.id],
  );
  await p.database.db.query(
    `INSERT INTO device_handshake_refusals_recent (key_sha256, at, reason, subject, serial, address, device_id, refusals)
     VALUES ($1, $2, 'certificate_expired', 'CN=x', 'c0ffee', '10.1.2.3', $3, 2)`,
    ['f'.repeat(64), at(-10), devices[49]!.id],
  );
  const latest = play(busy, at(-1));
  const reject = {
    kind: 'reject',
    seq: busy.nextSeq++,
    at: at(-1).toISOString(),
    code: 'NO_SIGNATURE',
    detail: {
      file: 'spring-sale.mp4',
      media_sha256: 'a'.repeat(64),
      reason: 'no signature file beside the media',
      approval_number: 'APR-2026-000042',
    },
  };
  // CITY-007's newest batch: a play and a file it refused to show.
  await sendBatch(p, busy, [latest, reject]);
  browser = await launchChromium();
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await p?.close();
});

describe.each(LANGUAGES)('the fleet page in %s', (language) => {
  const dictionary = DICTIONARIES[language];
  const t = (key: MessageKey, params: Record<string, string | number> = {}) =>
    dictionary[key].replace(/\{(\w+)\}/g, (whole, name: string) => String(params[name] ?? whole));
  const shots = path.join(ARTIFACTS, 'fleet', language);
  let context: BrowserContext;
  let page: Page;
  let errors: string[];
  let shot = 0;
  const url = (p_: string) => `${p.apiUrl}/console${p_}`;

  /** The page as a person would look at it: a screenshot, axe-core, no English left in ru and kk. */
  const look = async (name: string) => {
    await page.waitForLoadState('networkidle');
    shot += 1;
    await page.screenshot({
      path: path.join(shots, `${String(shot).padStart(2, '0')}-${name}.png`),
      fullPage: true,
    });
    if (language !== 'en') await expectNoEnglish(page, `${name} (${language})`);
    await expectAccessible(page, `${name} (${language})`);
  };
  const devicesTable = () => page.getByRole('table', { name: t('fleet.devices'), exact: true });
  const rowCodes = async () =>
    (await devicesTable().locator('tbody tr').allTextContents()).map((text) => /CITY-\d{3}/.exec(text)?.[0]);
  const range = () => page.getByTestId('fleet-range');

  beforeAll(async () => {
    await rm(shots, { recursive: true, force: true });
    await mkdir(shots, { recursive: true });
    context = await browser.newContext({
      viewport: { width: 1366, height: 768 },
      locale: LOCALES[language],
      timezoneId: 'Asia/Almaty',
    });
    // Effects late, as on a busy machine: the search box was once wiped by an effect that ran after typing began.
    await holdBackFrames(context);
    page = await context.newPage();
    errors = watchErrors(page);
    await page.goto(url('/'));
    await page.locator('#language').selectOption(language);
    await page.getByLabel(t('login.email')).fill(EMAIL);
    await page.getByLabel(t('login.password')).fill(PASSWORD);
    await page.getByRole('button', { name: t('login.signIn') }).click();
    await page.getByRole('link', { name: t('nav.fleet'), exact: true }).waitFor();
  }, 60_000);
  afterAll(async () => {
    await context?.close();
  });

  test('the summary counts the whole fleet; a count opens the list of its devices; back returns', async () => {
    // The page's reads, in the order they were sent.
    const reads: string[] = [];
    const listen = (request: { url: () => string }) => reads.push(new URL(request.url()).pathname);
    page.on('request', listen);
    await page.goto(url('/fleet'));
    await expect
      .poll(() => range().textContent())
      .toBe(t('fleet.range', { first: '1', last: '50', total: '56' }));
    // The structures (every one of a city, for the enrolment form and the CMS mapping) are read once, after the
    // list, when the enrolment form below its 50 rows comes near the screen: the list does not wait for them
    // (apps/platform/bench/fleet-page.bench.ts).
    const isStructures = (r: string) => /^\/api\/v1\/(console\/)?structures$/.test(r);
    await page.waitForLoadState('networkidle');
    expect(reads.filter(isStructures)).toEqual([]);
    await page.locator('#enrol-structure').scrollIntoViewIfNeeded();
    await page.locator('#enrol-structure option', { hasText: 'CITY-056' }).waitFor({ state: 'attached' });
    await page.evaluate('window.scrollTo(0, 0)');
    page.off('request', listen);
    const structureReads = reads.filter(isStructures);
    expect(structureReads).toHaveLength(1);
    expect(reads.indexOf(structureReads[0]!)).toBeGreaterThan(reads.indexOf('/api/v1/console/devices'));
    const count = (state: string) => page.getByTestId(`fleet-count-${state}`).textContent();
    // Each language before this one revoked one device that never reported (the actions test below).
    const revoked = LANGUAGES.indexOf(language);
    expect(await count('reporting')).toBe('35');
    expect(await count('silent')).toBe('3');
    expect(await count('never_reported')).toBe(String(18 - revoked));
    expect(await count('revoked')).toBe(String(revoked));
    expect(await count('screen_off')).toBe('1');
    expect(await count('refused')).toBe('1');
    expect(await rowCodes()).toHaveLength(50);
    // At 1366 pixels the list fits its frame in every language: no column pushed out of sight behind a scroll.
    const fit = (await page.evaluate(
      `(() => {
        const frame = document.querySelector('table.fleet-devices').parentElement;
        const widths = [...frame.querySelectorAll('thead th')].map((th) => th.textContent + ' ' + th.offsetWidth);
        return { overflow: frame.scrollWidth - frame.clientWidth, widths: widths.join(', ') };
      })()`,
    )) as { overflow: number; widths: string };
    expect(fit.overflow, fit.widths).toBeLessThanOrEqual(1);
    await look('list');

    const summary = page.getByRole('navigation', { name: t('fleet.summary.label') });
    await summary.getByRole('link', { name: new RegExp(t('fleet.summary.silent')) }).click();
    await expect.poll(() => rowCodes()).toEqual(['CITY-003', 'CITY-004', 'CITY-005']);
    expect(new URL(page.url()).search).toBe('?state=silent');
    expect(await page.locator('#fleet-state').inputValue()).toBe('silent');
    await look('silent');

    // The back button returns to the whole list, and forward to the filtered one.
    await page.goBack();
    await expect.poll(() => rowCodes()).toHaveLength(50);
    expect(new URL(page.url()).search).toBe('');
    await page.goForward();
    await expect.poll(() => rowCodes()).toHaveLength(3);
    // A linked view opens as it was sent.
    await page.goto(url('/fleet?state=screen_off'));
    await expect.poll(() => rowCodes()).toEqual(['CITY-020']);
    expect(errors).toEqual([]);
  });

  test('search, sort and pages come from the server and stay in the URL', async () => {
    await page.goto(url('/fleet'));
    await page.getByLabel(t('fleet.filter.search')).fill('city-05');
    await page.getByRole('button', { name: t('fleet.filter.searchButton'), exact: true }).click();
    await expect.poll(() => rowCodes()).toEqual(Array.from({ length: 7 }, (_, i) => code(50 + i)));
    expect(new URL(page.url()).searchParams.get('q')).toBe('city-05');
    await look('search');

    await page.getByLabel(t('fleet.filter.search')).fill('');
    await page.getByRole('button', { name: t('fleet.filter.searchButton'), exact: true }).click();
    await page.locator('#fleet-sort').selectOption('-queue_lag');
    await expect.poll(async () => (await rowCodes())[0]).toBe('CITY-012');
    expect(new URL(page.url()).searchParams.get('sort')).toBe('-queue_lag');
    await look('by-queue-lag');

    await page.locator('#fleet-sort').selectOption('structure');
    await page.getByRole('button', { name: t('fleet.next'), exact: true }).click();
    await expect
      .poll(() => range().textContent())
      .toBe(t('fleet.range', { first: '51', last: '56', total: '56' }));
    expect(await rowCodes()).toEqual(Array.from({ length: 6 }, (_, i) => code(51 + i)));
    expect(new URL(page.url()).searchParams.get('page')).toBe('2');
    expect(await page.getByText(t('fleet.pageOf', { page: '2', pages: '2' })).isVisible()).toBe(true);
    await look('page-2');
    await page.goBack();
    await expect
      .poll(() => range().textContent())
      .toBe(t('fleet.range', { first: '1', last: '50', total: '56' }));
    expect(errors).toEqual([]);
  });

  test("a device's own page: batches and answers, rejects, clock offset, certificate history", async () => {
    await page.goto(url('/fleet?q=CITY-007'));
    await devicesTable()
      .getByRole('link', { name: busy.id.slice(0, 8) })
      .click();
    await page
      .getByRole('heading', { name: t('fleet.device.title', { structure: 'CITY-007' }), level: 1 })
      .waitFor();
    expect(new URL(page.url()).pathname).toBe(`/console/fleet/${busy.id}`);
    const batches = page.getByRole('table', { name: t('fleet.device.batches') });
    await batches.waitFor();
    expect(await batches.locator('tbody tr').count()).toBe(3);
    expect(await batches.locator('tbody tr').first().textContent()).toContain(
      t('fleet.device.answerCounts', { received: '2', accepted: '2', refused: '0' }),
    );
    const rejects = page.getByRole('table', { name: t('fleet.device.rejects') });
    expect(await rejects.getByRole('row', { name: /NO_SIGNATURE/ }).textContent()).toMatch(
      /spring-sale\.mp4.*APR-2026-000042.*no signature file beside the media/,
    );
    expect(await page.getByTestId('clock-offset').textContent()).toContain(t('fleet.device.offsetNone'));
    const certificates = page.getByRole('table', { name: t('fleet.device.certificates') });
    expect(await certificates.getByText(t('fleet.device.certState.current')).isVisible()).toBe(true);
    expect(await certificates.getByText(t('fleet.device.issuedBy.re-enrolment')).isVisible()).toBe(true);
    await look('device');
    // The back link returns to the list.
    await page.getByRole('link', { name: t('fleet.device.back') }).click();
    await devicesTable().waitFor();
    expect(errors).toEqual([]);
  });

  test("the device page's actions: forced renewal, re-enrolment, revocation", async () => {
    // Each language acts on a device of its own: CITY-050 (refused handshakes), 051, 052.
    const device = devices[49 + LANGUAGES.indexOf(language)]!;
    await page.goto(url(`/fleet/${device.id}`));
    await page.getByRole('heading', { level: 1 }).waitFor();
    await page.getByRole('button', { name: t('fleet.allowForce') }).click();
    await page.getByText(t('fleet.forceDone')).waitFor();
    await expect
      .poll(() => page.getByTestId('device-facts').textContent())
      .toContain(t('fleet.allowedUntil', { at: '' }).trim());
    await page.getByRole('button', { name: t('fleet.reEnrol'), exact: true }).click();
    await page.locator('#re-enrol-key').waitFor();
    if (language === 'en') {
      const refusals = page.getByRole('table', { name: t('fleet.device.refusals') });
      expect(await refusals.getByRole('row', { name: /certificate_expired/ }).textContent()).toContain(
        '10.1.2.3',
      );
    }
    await look('device-actions');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: t('fleet.revoke'), exact: true }).click();
    await page.getByText(t('fleet.revokedDone')).waitFor();
    await expect
      .poll(() => page.getByRole('button', { name: t('fleet.revoke'), exact: true }).count())
      .toBe(0);
    const view = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/devices/${device.id}`);
    expect(view.json<{ revoked_at: string | null }>().revoked_at).not.toBeNull();
    // The forced renewal allowed above allows nothing any more, and the page no longer says it does.
    await expect
      .poll(() => page.getByTestId('device-facts').textContent())
      .not.toContain(t('fleet.allowedUntil', { at: '' }).trim());
    await look('device-revoked');
    expect(errors).toEqual([]);
  });
});
