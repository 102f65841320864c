import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { en } from '../../console/src/i18n/en.js';
import { kk } from '../../console/src/i18n/kk.js';
import { ru } from '../../console/src/i18n/ru.js';
import {
  type ConsolePlatform,
  expectAccessible,
  expectNoEnglish,
  launchChromium,
  newContext,
  screenshot,
  startConsolePlatform,
  watchErrors,
} from '../console/browser.js';
import { seedApproval } from '../open-data/helpers.js';
import { apiCall } from '../support/platform.js';

/**
 * Issue 20 item 3 in the console, in Chromium: the register shows each structure's OpenOOH venue type and screen
 * ids; a structure is registered with them; a CSV file carries them; the identifiers are edited, and a venue type
 * that an approval relies on is refused in words. Looked at in en, ru and kk (no English left, axe-core).
 */

const NOW = new Date('2026-11-20T06:00:00Z');
const PASSWORD = 'venue console password';
const ADMIN_EMAIL = 'registry@city.kz';

let p: ConsolePlatform;
let browser: Browser;
let page: Page;
let errors: string[] = [];
let operatorId = '';
let usedId = '';

async function call(method: 'GET' | 'POST', url: string, body?: unknown) {
  const res = await apiCall(p.servers.api, p.adminKey, method, url, body);
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  return res.json();
}
const stored = async (code: string) =>
  (
    await p.database.db.query(
      'SELECT venue_type_id, openooh_screen_id, geopath_spot_id FROM structures WHERE code = $1',
      [code],
    )
  ).rows[0];
const url = (path: string) => `${p.apiUrl}/console${path}`;

beforeAll(async () => {
  p = await startConsolePlatform(NOW);
  operatorId = (
    await call('POST', '/api/v1/console/organisations', { name: 'Almaty Outdoor LLP', kind: 'operator' })
  ).id;
  const used = await call('POST', '/api/v1/console/structures', {
    organisation_id: operatorId,
    code: 'ALM-0001',
    district: 'almaly',
    format: 'billboard',
    venue_type_id: 301,
  });
  usedId = used.id;
  const advertiser = await call('POST', '/api/v1/console/organisations', {
    name: 'Tea House LLP',
    kind: 'advertiser',
  });
  await seedApproval(p.database.db, advertiser.id, [usedId]);
  await call('POST', `/api/v1/console/organisations/${p.authorityId}/users`, {
    email: ADMIN_EMAIL,
    password: PASSWORD,
    role: 'admin',
  });
  browser = await launchChromium();
  page = await (await newContext(browser)).newPage();
  errors = watchErrors(page);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await p?.close();
});

describe('venue type and screen ids on the Structures page', () => {
  test('register with a venue type, import a CSV with the columns, edit the ids; immutability said in words', async () => {
    await page.goto(url('/'));
    await page.getByLabel('Email address').fill(ADMIN_EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page
      .getByRole('navigation', { name: en['nav.label'] })
      .getByRole('link', { name: en['structures.nav'], exact: true })
      .click();
    await page.getByRole('heading', { name: en['structures.title'], exact: true, level: 1 }).waitFor();

    // The register shows the venue type in OpenOOH's words.
    const used = page.getByRole('row', { name: /ALM-0001/ });
    await expect.poll(() => used.textContent()).toContain('301 Billboard');

    // One structure, with a venue type and both screen ids.
    await page.getByText(en['structures.createTitle']).click();
    await page.locator('#structure-operator').selectOption({ label: 'Almaty Outdoor LLP' });
    await page.getByLabel(en['structures.code'], { exact: true }).fill('ALM-0002');
    await page.locator('#structure-district').fill('medeu');
    await page.locator('#structure-format').fill('citylight');
    await page.getByLabel(en['structures.venueTypeOptional']).selectOption({ label: '302 Urban Panel' });
    await page.getByLabel(en['structures.openoohScreenId']).fill('kz.almaty-outdoor.scr-0002');
    await page.getByLabel(en['structures.geopathSpotId']).fill('30045678');
    await page.getByRole('button', { name: en['structures.createButton'] }).click();
    await page.getByText('Structure ALM-0002 is registered.').waitFor();
    expect(await stored('ALM-0002')).toEqual({
      venue_type_id: 302,
      openooh_screen_id: 'kz.almaty-outdoor.scr-0002',
      geopath_spot_id: '30045678',
    });
    const created = page.getByRole('row', { name: /ALM-0002/ });
    await expect
      .poll(() => created.textContent())
      .toContain('OpenOOH kz.almaty-outdoor.scr-0002 · Geopath 30045678');
    // Deprecated venue types are not offered for a new structure.
    expect(await page.locator('#structure-venue-type option[value="104"]').count()).toBe(0);

    // A CSV file with the optional columns: an unknown venue type is shown at its line, then the right file imports.
    await page.getByText(en['structures.importTitle']).click();
    await page.locator('#import-operator').selectOption({ label: 'Almaty Outdoor LLP' });
    const csv = (venue: string) =>
      Buffer.from(
        'code,district,format,venue_type_id,openooh_screen_id,geopath_spot_id\r\n' +
          `ALM-0003,almaly,supersite,${venue},kz.almaty-outdoor.scr-0003,\r\n` +
          'ALM-0004,almaly,led,,,30045679\r\n',
      );
    await page
      .locator('#import-file')
      .setInputFiles({ name: 'venues.csv', mimeType: 'text/csv', buffer: csv('999') });
    const problems = page.getByTestId('import-problems');
    await problems.waitFor();
    expect(await problems.textContent()).toContain('venue_type_id');
    await page
      .locator('#import-file')
      .setInputFiles({ name: 'venues.csv', mimeType: 'text/csv', buffer: csv('304') });
    const preview = page.getByTestId('import-preview');
    await preview.waitFor();
    expect(await preview.textContent()).toContain('304 Spectacular');
    await page.getByRole('button', { name: /Import 2/ }).click();
    // The answer of the import, not the button's "Import 2 structures", which is there before it is clicked.
    await page
      .getByText(en['structures.imported'].replace('{created}', '2').replace('{unchanged}', '0'))
      .waitFor();
    expect(await stored('ALM-0003')).toEqual({
      venue_type_id: 304,
      openooh_screen_id: 'kz.almaty-outdoor.scr-0003',
      geopath_spot_id: null,
    });
    expect(await stored('ALM-0004')).toMatchObject({ venue_type_id: null, geopath_spot_id: '30045679' });

    // Editing: a venue type an approval relies on is refused in words; the screen ids are saved.
    await used.getByRole('button', { name: en['structures.editIdentifiers'] }).click();
    const form = page.getByRole('form', { name: 'Venue type and screen ids of ALM-0001' });
    await form.getByLabel(en['structures.venueTypeOptional']).selectOption({ label: '304 Spectacular' });
    await form.getByRole('button', { name: en['structures.saveIdentifiers'] }).click();
    await form.getByText(/The venue type of ALM-0001 is fixed/).waitFor();
    await screenshot(page, 'structures-venue-immutable');
    await expectAccessible(page, 'structures: venue type refused');
    await form.getByLabel(en['structures.venueTypeOptional']).selectOption({ label: '301 Billboard' });
    await form.getByLabel(en['structures.geopathSpotId']).fill('30045680');
    await form.getByRole('button', { name: en['structures.saveIdentifiers'] }).click();
    await page.getByText('Venue type and screen ids of ALM-0001 are saved.').waitFor();
    expect(await stored('ALM-0001')).toEqual({
      venue_type_id: 301,
      openooh_screen_id: null,
      geopath_spot_id: '30045680',
    });
    await expect.poll(() => used.textContent()).toContain('Geopath 30045680');
    expect(errors.filter((e) => !/status of 422/.test(e))).toEqual([]);
  });

  test.each([
    ['ru', ru],
    ['kk', kk],
  ] as const)('in %s: the columns, the forms and the refusal are translated', async (language, dictionary) => {
    await page.locator('#language').selectOption(language);
    await expect.poll(() => page.evaluate('document.documentElement.lang')).toBe(language);
    await page.getByRole('columnheader', { name: dictionary['structures.venueType'] }).waitFor();
    const used = page.getByRole('row', { name: /ALM-0001/ });
    await used.getByRole('button', { name: dictionary['structures.editIdentifiers'] }).click();
    const form = page.locator('form.structures-edit');
    await form.locator('#edit-venue-type').selectOption('302');
    await form.getByRole('button', { name: dictionary['structures.saveIdentifiers'] }).click();
    await form.getByText(dictionary['structures.venueImmutable'].replace('{code}', 'ALM-0001')).waitFor();
    await expectNoEnglish(page, `structures with identifiers (${language})`);
    await expectAccessible(page, `structures with identifiers (${language})`);
    await screenshot(page, `structures-venue-${language}`);
    await form.getByRole('button', { name: dictionary['common.cancel'] }).click();
  });
});
