import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { evaluateAlerts } from '../../src/alerts/evaluate.js';
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
import { apiCall, createOrganisation, createStructure } from '../support/platform.js';
import {
  type Cms,
  cmsPlay,
  enrol,
  MINUTE,
  modeChange,
  play,
  registerCms,
  sendBatch,
  sendCms,
} from './helpers.js';

/*
 * The fleet page in a real Chromium (issue "an operator's first day", item 5: alerts "shown on the fleet page"): open
 * alerts at the top, each on its device's or CMS player's row, in en, ru and kk; an operator adds its alert webhook
 * there.
 */

// Friday 2026-11-20, 11:00 Almaty.
const NOW = new Date('2026-11-20T06:00:00Z');
const PASSWORD = 'alerts page password';
const EMAIL = 'fleet@almaty-screens.kz';

let p: ConsolePlatform;
let browser: Browser;
let page: Page;
let errors: string[];
let silentDevice = '';
let cms: Cms;

const url = (path: string) => `${p.apiUrl}/console${path}`;

beforeAll(async () => {
  p = await startConsolePlatform(NOW);
  const operator = await createOrganisation(
    p,
    'operator',
    ['console:fleet', 'write:plays'],
    'Almaty Screens LLP',
  );
  const user = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${operator.id}/users`,
    {
      email: EMAIL,
      password: PASSWORD,
      role: 'admin',
    },
  );
  expect(user.statusCode, user.body).toBe(201);
  const silent = await enrol(p, operator.key, await createStructure(p, operator.id, { code: 'PAGE-0001' }));
  const screen = await enrol(p, operator.key, await createStructure(p, operator.id, { code: 'PAGE-0002' }));
  await enrol(p, operator.key, await createStructure(p, operator.id, { code: 'PAGE-0003' }));
  cms = await registerCms(p, operator.id, operator.key, {
    'hall-7': await createStructure(p, operator.id, { code: 'PAGE-0101' }),
  });
  silentDevice = silent.id;

  // The fleet reports; then the silent device and the CMS player go quiet, while the screen device reports its screen
  // off during operating hours and keeps sending.
  await evaluateAlerts(p.ctx);
  const t = p.clock.now();
  await sendBatch(p, silent, [play(silent, new Date(t.getTime() - MINUTE))]);
  // Its agent also reports a disk running low (mode_change detail.storage, apps/agent/README.md).
  const screenOff = modeChange(screen, new Date(t.getTime() - MINUTE), 'normal', 'screen_off');
  (screenOff['detail'] as Record<string, unknown>)['storage'] = { state: 'low', free_bytes: 300 * 1_048_576 };
  await sendBatch(p, screen, [screenOff]);
  await sendCms(p, cms, [cmsPlay(cms, 'hall-7', new Date(t.getTime() - MINUTE))]);
  for (let m = 5; m <= 65; m += 5) {
    p.clock.set(new Date(t.getTime() + m * MINUTE));
    if (m % 10 === 0) await sendBatch(p, screen, [play(screen, new Date(p.clock.now().getTime() - MINUTE))]);
    if (m === 65) await sendCms(p, cms, []);
    await evaluateAlerts(p.ctx);
  }

  browser = await launchChromium();
  page = await (await newContext(browser)).newPage();
  errors = watchErrors(page);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await p?.close();
});

describe('alerts on the fleet page', () => {
  test('an operator sees its open alerts at the top, and on the rows of its devices and players', async () => {
    await page.goto(url('/'));
    await page.getByLabel('Email address').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Signed in once the navigation offers the fleet.
    await page.getByRole('link', { name: 'Fleet' }).waitFor();
    await page.goto(url('/fleet'));
    const panel = page.getByRole('region', { name: 'Alerts' });
    await panel.getByRole('table').waitFor();
    await expect.poll(() => panel.getByText('3 open alert(s)', { exact: false }).isVisible()).toBe(true);
    const row = (name: RegExp) => panel.getByRole('row', { name });
    expect(await row(/Silent/).textContent()).toMatch(/PAGE-0001.*No batch for 30 min or more/);
    expect(await row(/Silent/).textContent()).toContain(silentDevice.slice(0, 8));
    expect(await row(/Screen off/).textContent()).toMatch(/PAGE-0002.*operating hours \(07:00-23:00\)/);
    expect(await row(/No plays/).textContent()).toMatch(/hall-7.*PAGE-0101.*for 60 min or more/);

    // Per device and per player: the badge on its own row, none on the device that never sent anything.
    const devices = page.getByRole('table', { name: 'Devices' });
    expect(
      await devices
        .getByRole('row', { name: /PAGE-0001/ })
        .getByText('Silent')
        .isVisible(),
    ).toBe(true);
    expect(
      await devices
        .getByRole('row', { name: /PAGE-0002/ })
        .getByText('Screen off')
        .isVisible(),
    ).toBe(true);
    expect(
      await devices
        .getByRole('row', { name: /PAGE-0003/ })
        .locator('.alert-badges')
        .count(),
    ).toBe(0);
    // The disk its agent reported: low, with what is free; nothing on the others.
    expect(
      await devices
        .getByRole('row', { name: /PAGE-0002/ })
        .getByTestId('disk-state')
        .textContent(),
    ).toMatch(/^Disk low 300 MiB free, since 20 Nov 2026, \d\d:\d\d$/);
    expect(await devices.getByTestId('disk-state').count()).toBe(1);
    const players = page.getByRole('table', { name: 'Player mappings' });
    await players.waitFor();
    expect(
      await players
        .getByRole('row', { name: /hall-7/ })
        .getByText('No plays')
        .isVisible(),
    ).toBe(true);
    await screenshot(page, 'fleet-alerts');
    await expectAccessible(page, 'fleet with alerts');
  });

  test('the operator adds an alert webhook on the page; the platform’s secret is shown once', async () => {
    await page.getByText('Add an alert webhook').click();
    await page.getByLabel('Address (URL)').fill('https://hooks.almaty-screens.kz/alerts');
    await page.getByRole('button', { name: 'Add the webhook' }).click();
    await expect.poll(() => page.getByText(/Its signing secret is shown only now/).isVisible()).toBe(true);
    const table = page.getByRole('table', { name: 'Alert webhooks' });
    expect(await table.getByRole('row', { name: /hooks\.almaty-screens\.kz/ }).textContent()).toContain(
      'Alert opened, Alert resolved',
    );
    const res = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/webhooks');
    expect(res.json<{ items: { url: string; organisation_id: string | null }[] }>().items).toMatchObject([
      { url: 'https://hooks.almaty-screens.kz/alerts' },
    ]);
    await screenshot(page, 'fleet-alert-webhook');
  });

  test('on a narrow screen a table wider than the page scrolls by keyboard too, and only then takes focus', async () => {
    // A phone's width: the device list is narrow since its actions moved to each device's page (issue 22, item 2).
    await page.setViewportSize({ width: 480, height: 900 });
    try {
      await page.goto(url('/fleet'));
      const devices = page.locator('.table-wrap', { has: page.getByRole('table', { name: 'Devices' }) });
      await devices.waitFor();
      await expect.poll(() => devices.getAttribute('tabindex')).toBe('0');
      expect(await devices.getAttribute('aria-label')).toBe('Devices');
      await expectAccessible(page, 'fleet, narrow');
      await page.setViewportSize({ width: 2400, height: 900 });
      await expect.poll(() => devices.getAttribute('tabindex')).toBeNull();
    } finally {
      await page.setViewportSize({ width: 1366, height: 768 });
    }
  });

  test('in Russian and Kazakh, with no English left', async () => {
    for (const language of ['ru', 'kk'] as const) {
      await page.locator('#language').selectOption(language);
      await page.goto(url('/fleet'));
      await page.locator('.alerts-panel table').waitFor();
      await page.waitForLoadState('networkidle');
      await expectNoEnglish(page, `fleet alerts (${language})`);
      await screenshot(page, `fleet-alerts-${language}`);
    }
    await page.locator('#language').selectOption('en');
    expect(errors).toEqual([]);
  });
});
