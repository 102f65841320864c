import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { es256Sign, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { en, type MessageKey } from '../../console/src/i18n/en.js';
import { kk } from '../../console/src/i18n/kk.js';
import { ru } from '../../console/src/i18n/ru.js';
import { AUTHORITY_NAME, bootstrap } from '../../src/bootstrap.js';
import { runSealScheduler } from '../../src/seals/index.js';
import { png } from '../approvals/media-fixtures.js';
import { apiCall } from '../support/platform.js';
import { agentCommand, agentInit } from './agent-init.js';
import {
  ARTIFACTS,
  type ConsolePlatform,
  expectAccessible,
  expectNoEnglish,
  launchChromium,
  startConsolePlatform,
  watchErrors,
  holdBackFrames,
} from './browser.js';

/**
 * The operator's first day, end to end, through the console alone (issue 17 item 3), in Chromium, once in each
 * language: the authority makes its first administrator with the key `platform bootstrap` printed, creates an
 * operator and an agency with their users, issues the operator's CMS key, revokes the bootstrap key, registers
 * structures one by one and from a CSV file of 300 (first with faults shown by line, then whole, then again with
 * nothing new); the operator enrols a player from what `agent init` printed (and is shown what to put on it),
 * registers its CMS and maps a player; the agency submits a creative with its file; the authority approves it; the
 * player and the CMS send signed plays, which show on the fleet and proof-of-play pages; the day is sealed after it
 * ends and the authority checks the seal in the browser. Every page is looked at in the language chosen (no English
 * text left in ru and kk, axe-core) and kept as a screenshot at 1366×768 in test-artifacts/console/day-one/<lang>/.
 */

const LANGUAGES = ['en', 'ru', 'kk'] as const;
type Language = (typeof LANGUAGES)[number];
const DICTIONARIES: Record<Language, Record<MessageKey, string>> = { en, ru, kk };
const LOCALES: Record<Language, string> = { en: 'en-GB', ru: 'ru-RU', kk: 'kk-KZ' };

// Friday 2026-11-20, 11:00 Almaty: the first day.
const DAY = '2026-11-20';
const NOW = new Date('2026-11-20T06:00:00Z');
const PASSWORD = 'a long first password';
const MEDIA = png(640, 320, 17);
const MEDIA_SHA256 = createHash('sha256').update(MEDIA).digest('hex');
const CSV_ROWS = 300;

let browser: Browser;
/** The players' folders `agent init` made, removed at the end. */
const onTheBench: string[] = [];

beforeAll(async () => {
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  for (const dir of onTheBench) await rm(dir, { recursive: true, force: true });
});

/** The console's text of `key` in `language`, as the page shows it (numbers in the language's format). */
function text(language: Language, key: MessageKey, params: Record<string, string | number> = {}): string {
  const numbers = new Intl.NumberFormat(LOCALES[language]);
  return DICTIONARIES[language][key].replace(/\{(\w+)\}/g, (whole, name: string) => {
    const value = params[name];
    if (value === undefined) return whole;
    return typeof value === 'number' ? numbers.format(value) : value;
  });
}

/** A pattern of the text of `key` from its start: each {placeholder} is the given pattern, or anything. */
function pattern(language: Language, key: MessageKey, params: Record<string, string> = {}): RegExp {
  const escaped = DICTIONARIES[language][key].replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped.replace(/\\\{(\w+)\\\}/g, (_w, name: string) => params[name] ?? '.+')}`);
}

/** 300 structures of the operator: ALM-0001 as registered by hand, the rest new; semicolons and decimal commas in
 * ru and kk, as spreadsheets there write them. */
function structuresCsv(language: Language, faults: boolean): Buffer {
  const separator = language === 'en' ? ',' : ';';
  const decimal = (n: number) => (language === 'en' ? String(n) : String(n).replace('.', ','));
  const districts = ['almaly', 'bostandyk', 'medeu', 'auezov', 'alatau', 'zhetysu', 'nauryzbay', 'turksib'];
  const formats = ['billboard', 'digital', 'citylight', 'supersite'];
  const lines = [['code', 'district', 'format', 'address', 'lat', 'lon'].join(separator)];
  for (let i = 1; i <= CSV_ROWS; i++) {
    const code = `ALM-${String(i).padStart(4, '0')}`;
    let row: string[];
    if (i === 1)
      row = [code, 'almaly', 'digital', '"Abay Ave 10; Almaty"', decimal(43.2389), decimal(76.8897)];
    else {
      row = [
        code,
        districts[i % districts.length]!,
        formats[i % formats.length]!,
        `"${i} Dostyk Ave${separator} Almaty"`,
        i % 3 === 0 ? decimal(43.2 + i / 10_000) : '',
        i % 3 === 0 ? decimal(76.9 + i / 10_000) : '',
      ];
    }
    if (faults && i === 4) row[1] = 'Almaly District';
    if (faults && i === 8) row[0] = 'ALM-0007';
    if (faults && i === 12) row[5] = '';
    lines.push(row.join(separator));
  }
  return Buffer.from(`${lines.join('\r\n')}\r\n`, 'utf8');
}

describe.each(LANGUAGES)('the first day through the console alone, in %s', (language) => {
  const t = (key: MessageKey, params?: Record<string, string | number>) => text(language, key, params);
  const shots = path.join(ARTIFACTS, 'day-one', language);
  const operatorName = 'Almaty Outdoor LLP';
  const agencyName = 'Steppe Media Agency';
  const authorityEmail = `admin-${language}@city.kz`;
  const operatorEmail = `fleet-${language}@almaty-outdoor.kz`;
  const agencyEmail = `planner-${language}@steppe-media.kz`;

  let p: ConsolePlatform;
  /** A key of the authority for the test's own look at what the platform stored (never for a step of the day). */
  let observerKey = '';
  const contexts: BrowserContext[] = [];
  const pages = {} as Record<'authority' | 'operator' | 'agency', Page>;
  const errors = new Map<Page, string[]>();
  let shot = 0;
  const state = {
    cmsKey: '',
    deviceId: '',
    agentKeyPem: '',
    cmsPrivateKey: generateEs256KeyPair().privateKey,
    cmsPublicKey: '',
    cmsSourceId: '',
    submissionNumber: '',
    approvalNumber: '',
  };

  const call = async (method: 'GET' | 'POST', url: string, body?: unknown) => {
    const res = await apiCall(p.servers.api, observerKey, method, url, body);
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
    return res.json();
  };

  /** The page as a person would look at it: kept as a screenshot, no English left in ru and kk, axe-core. */
  const look = async (page: Page, name: string) => {
    await page.waitForLoadState('networkidle');
    shot += 1;
    await page.screenshot({
      path: path.join(shots, `${String(shot).padStart(2, '0')}-${name}.png`),
      fullPage: true,
    });
    if (language !== 'en') await expectNoEnglish(page, `${name} (${language})`);
    await expectAccessible(page, `${name} (${language})`);
    // Debian's Chromium has no Kazakh locale data: Intl alone would write dates as "2026 M11 24" there.
    if (language === 'kk')
      expect(await page.locator('body').innerText(), name).not.toMatch(/\b\d{4} M\d{1,2} \d/);
  };

  const signIn = async (page: Page, email: string) => {
    await page.goto(`${p.apiUrl}/console/`);
    await page.locator('#language').selectOption(language);
    await page.getByRole('heading', { name: t('login.title') }).waitFor();
    await page.getByLabel(t('login.email')).fill(email);
    await page.getByLabel(t('login.password')).fill(PASSWORD);
    await page.getByRole('button', { name: t('login.signIn') }).click();
  };

  const nav = async (page: Page, key: MessageKey, heading: MessageKey) => {
    await page
      .getByRole('navigation', { name: t('nav.label') })
      .getByRole('link', { name: t(key), exact: true })
      .click();
    await page.getByRole('heading', { name: t(heading), exact: true, level: 1 }).waitFor();
  };

  beforeAll(async () => {
    await rm(shots, { recursive: true, force: true });
    await mkdir(shots, { recursive: true });
    p = await startConsolePlatform(NOW);
    observerKey = (await bootstrap(p.database.db, p.clock, { keyName: 'test observer' })).key;
    // The running platform's seal scheduler notes its first day when it starts (seals/scheduler.ts).
    await runSealScheduler(p.ctx);
    for (const actor of ['authority', 'operator', 'agency'] as const) {
      const context = await browser.newContext({
        viewport: { width: 1366, height: 768 },
        locale: LOCALES[language],
        timezoneId: 'Asia/Almaty',
        acceptDownloads: true,
      });
      await holdBackFrames(context);
      contexts.push(context);
      pages[actor] = await context.newPage();
      errors.set(pages[actor], watchErrors(pages[actor]));
    }
  }, 120_000);

  afterAll(async () => {
    for (const context of contexts) await context.close();
    await p?.close();
  });

  test('the authority makes its first administrator with the bootstrap key, without curl', async () => {
    const page = pages.authority;
    // A newcomer opens the console and finds the way from the sign-in page.
    await page.goto(`${p.apiUrl}/console/`);
    await page.locator('#language').selectOption(language);
    await page.getByRole('link', { name: t('login.firstAdmin') }).click();
    await page.getByRole('heading', { name: t('dayone.firstAdminTitle') }).waitFor();
    expect(page.url()).toBe(`${p.apiUrl}/console/first-admin`);
    await page.getByLabel(t('dayone.adminKey')).fill(p.adminKey);
    await page.getByLabel(t('login.email')).fill(authorityEmail);
    await page.getByLabel(t('dayone.password')).fill(PASSWORD);
    await look(page, 'first-admin');
    await page.getByRole('button', { name: t('dayone.firstAdminButton') }).click();
    await page.getByRole('heading', { name: t('organisations.title'), level: 1 }).waitFor();
    expect(page.url()).toBe(`${p.apiUrl}/console/organisations`);
    expect(await page.locator('.who-user').textContent()).toContain(authorityEmail);
    expect(errors.get(page)).toEqual([]);
  }, 60_000);

  test('the authority creates the operator and the agency with their users, issues and revokes keys', async () => {
    const page = pages.authority;
    const createOrganisation = async (name: string, kind: 'operator' | 'agency') => {
      await page.locator('#org-name').fill(name);
      await page.locator('#org-kind').selectOption(kind);
      await page.getByRole('button', { name: t('organisations.createButton') }).click();
      await page.getByRole('heading', { name: t('organisations.usersOf', { name }) }).waitFor();
    };
    const addUser = async (email: string, role: 'admin' | 'member') => {
      await page.locator('#user-email').fill(email);
      await page.locator('#user-password').fill(PASSWORD);
      await page.locator('#user-role').selectOption(role);
      await page.getByRole('button', { name: t('organisations.addUserButton') }).click();
      await page.getByText(t('organisations.userCreated', { email })).waitFor();
    };

    await createOrganisation(operatorName, 'operator');
    await addUser(operatorEmail, 'admin');
    // The key the operator's CMS signs in with: shown once, then only listed.
    await page.locator('#key-name').fill('Broadsign CMS');
    await page.getByRole('checkbox', { name: 'write:plays' }).check();
    await page.getByRole('button', { name: t('apiKeys.issueButton') }).click();
    const shown = page.locator('.notice-warning code.hash-full');
    await shown.waitFor();
    state.cmsKey = (await shown.textContent()) ?? '';
    expect(state.cmsKey).toMatch(/^ooh_[A-Za-z0-9_-]{43}$/);
    await page
      .getByRole('row', { name: /Broadsign CMS/ })
      .filter({ hasText: t('apiKeys.state.active') })
      .waitFor();
    await look(page, 'organisations-operator');

    await createOrganisation(agencyName, 'agency');
    await addUser(agencyEmail, 'member');

    // The bootstrap key has done its work: the authority sees it among its keys and revokes it.
    await page
      .getByRole('row', { name: new RegExp(AUTHORITY_NAME) })
      .getByRole('button', { name: t('organisations.users') })
      .click();
    const bootstrapRow = page.getByRole('row', { name: /bootstrap admin/ });
    await bootstrapRow.waitFor();
    page.once('dialog', (dialog) => void dialog.accept());
    await bootstrapRow.getByRole('button', { name: t('apiKeys.revoke') }).click();
    await page
      .getByRole('row', { name: /bootstrap admin/ })
      .filter({ hasText: t('apiKeys.state.revoked') })
      .waitFor();
    await look(page, 'organisations-authority-keys');
    const refused = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/organisations');
    expect(refused.json().code).toBe('invalid_api_key');

    const organisations = await call('GET', '/api/v1/console/organisations');
    expect(
      organisations.items.map((o: { name: string; kind: string }) => `${o.kind} ${o.name}`).sort(),
    ).toEqual([`agency ${agencyName}`, `authority ${AUTHORITY_NAME}`, `operator ${operatorName}`]);
    expect(errors.get(page)).toEqual([]);
  }, 90_000);

  test('the authority registers a structure, then 300 from a CSV file: faults by line, whole, then nothing new', async () => {
    const page = pages.authority;
    await nav(page, 'structures.nav', 'structures.title');
    await page.getByText(t('structures.noMatch')).waitFor();

    // One by hand.
    await page.getByText(t('structures.createTitle')).click();
    await page.locator('#structure-operator').selectOption({ label: operatorName });
    await page.getByLabel(t('structures.code'), { exact: true }).fill('ALM-0001');
    await page.getByLabel(t('structures.district'), { exact: true }).fill('almaly');
    await page.getByLabel(t('structures.format'), { exact: true }).fill('digital');
    await page.getByLabel(t('structures.addressOptional')).fill('Abay Ave 10; Almaty');
    await page.getByLabel(t('structures.lat')).fill('43.2389');
    await page.getByLabel(t('structures.lon')).fill('76.8897');
    await page.getByRole('button', { name: t('structures.createButton') }).click();
    await page.getByText(t('structures.createdOne', { code: 'ALM-0001' })).waitFor();
    await page.getByRole('row', { name: /ALM-0001/ }).waitFor();

    // A file with three faults: each is named by its line, and nothing is stored.
    await page.getByText(t('structures.importTitle')).click();
    await page.locator('#import-operator').selectOption({ label: operatorName });
    await page
      .locator('#import-file')
      .setInputFiles({ name: 'structures.csv', mimeType: 'text/csv', buffer: structuresCsv(language, true) });
    const problems = page.getByTestId('import-problems');
    await problems.waitFor();
    await page.getByText(t('structures.rowsWrong', { file: 'structures.csv', count: 3 })).waitFor();
    const listed = (await problems.locator('li').allTextContents()).map((s) => s.replace(/\s+/g, ' ').trim());
    expect(listed).toEqual([
      `${t('structures.atLine', { line: 5 })} district ${t('fieldError.pattern')}`,
      `${t('structures.atLine', { line: 9 })} code ${t('fieldError.duplicate')}`,
      `${t('structures.atLine', { line: 13 })} lon ${t('fieldError.required')}`,
    ]);
    await look(page, 'structures-import-faults');
    const stored = async () =>
      (await call('GET', '/api/v1/console/structures')).items as {
        code: string;
        retired_at: string | null;
      }[];
    expect((await stored()).map((s) => s.code)).toEqual(['ALM-0001']);

    // The corrected file: a preview of what it holds, then imported whole.
    await page.locator('#import-file').setInputFiles({
      name: 'structures.csv',
      mimeType: 'text/csv',
      buffer: structuresCsv(language, false),
    });
    const preview = page.getByTestId('import-preview');
    await preview.waitFor();
    await page
      .getByText(
        t('structures.previewCounts', {
          file: 'structures.csv',
          rows: CSV_ROWS,
          created: CSV_ROWS - 1,
          unchanged: 1,
        }),
      )
      .waitFor();
    expect(await preview.getByRole('row', { name: /ALM-0001/ }).textContent()).toContain(
      t('structures.alreadyThere'),
    );
    expect(await preview.getByRole('row', { name: /ALM-0003/ }).textContent()).toContain('3 Dostyk Ave');
    await look(page, 'structures-import-preview');
    await page.getByRole('button', { name: t('structures.importButton', { count: CSV_ROWS - 1 }) }).click();
    await page.getByText(t('structures.imported', { created: CSV_ROWS - 1, unchanged: 1 })).waitFor();
    await page
      .getByTestId('structures-count')
      .filter({ hasText: t('structures.showing', { from: 1, to: 50, count: CSV_ROWS, total: CSV_ROWS }) })
      .waitFor();
    const all = await stored();
    expect(all).toHaveLength(CSV_ROWS);
    const third = (await call('GET', '/api/v1/console/structures')).items.find(
      (s: { code: string }) => s.code === 'ALM-0003',
    );
    expect(third).toMatchObject({
      district: 'auezov',
      format: 'supersite',
      address: `3 Dostyk Ave${language === 'en' ? ',' : ';'} Almaty`,
      lat: 43.2 + 3 / 10_000,
      lon: 76.9 + 3 / 10_000,
    });

    // The same file again: nothing new, nothing to press.
    await page.locator('#import-file').setInputFiles({
      name: 'structures.csv',
      mimeType: 'text/csv',
      buffer: structuresCsv(language, false),
    });
    await page
      .getByText(
        t('structures.previewCounts', {
          file: 'structures.csv',
          rows: CSV_ROWS,
          created: 0,
          unchanged: CSV_ROWS,
        }),
      )
      .waitFor();
    expect(await page.getByRole('button', { name: t('structures.nothingNew') }).isDisabled()).toBe(true);
    await page
      .getByTestId('import-preview')
      .getByRole('button', { name: t('common.cancel') })
      .click();

    // Paging and search over the register; one structure retired.
    await page.getByRole('button', { name: t('structures.next') }).click();
    await page.getByText(t('structures.pageOf', { page: 2, pages: 6 })).waitFor();
    await page.getByRole('row', { name: /ALM-0051/ }).waitFor();
    await page.locator('#structures-query').fill('ALM-0300');
    await page
      .getByTestId('structures-count')
      .filter({ hasText: t('structures.showing', { from: 1, to: 1, count: 1, total: CSV_ROWS }) })
      .waitFor();
    page.once('dialog', (dialog) => void dialog.accept());
    await page
      .getByRole('row', { name: /ALM-0300/ })
      .getByRole('button', { name: t('structures.retire') })
      .click();
    await page.getByText(t('structures.retiredDone', { code: 'ALM-0300' })).waitFor();
    await page.getByText(t('structures.noMatch')).waitFor();
    await page.getByText(t('structures.showRetired')).click();
    await page
      .getByRole('row', { name: /ALM-0300/ })
      .filter({ hasText: t('structures.retired') })
      .waitFor();
    expect((await stored()).filter((s) => s.retired_at !== null).map((s) => s.code)).toEqual(['ALM-0300']);
    await page.locator('#structures-query').fill('');
    // The search began again at the first page, though page 2 was shown before it.
    await page.getByText(t('structures.pageOf', { page: 1, pages: 6 })).waitFor();
    await page.getByRole('button', { name: t('structures.next') }).click();
    await page.getByText(t('structures.pageOf', { page: 2, pages: 6 })).waitFor();
    await page.getByRole('button', { name: t('structures.previous') }).click();
    await page.getByText(t('structures.pageOf', { page: 1, pages: 6 })).waitFor();
    await look(page, 'structures');
    expect(errors.get(page)).toEqual([]);
  }, 120_000);

  test('the operator signs in, enrols a player from what agent init printed and sees what to put on it', async () => {
    const page = pages.operator;
    await signIn(page, operatorEmail);
    await page.getByRole('heading', { name: t('submissions.title'), level: 1 }).waitFor();
    await nav(page, 'nav.fleet', 'fleet.title');
    const init = await agentInit('ALM-0002', { keep: true });
    state.agentKeyPem = init.keyPem;
    onTheBench.push(init.dir!);
    const output = await page.evaluateHandle(`(() => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([${JSON.stringify(init.output)}], 'agent-init.txt', { type: 'text/plain' }));
      return transfer;
    })()`);
    await page.dispatchEvent('[data-testid="enrol-dropzone"]', 'drop', { dataTransfer: output });
    await expect.poll(() => page.locator('#enrol-structure option:checked').textContent()).toBe('ALM-0002');
    await page.getByRole('button', { name: t('enrol.button'), exact: true }).click();
    await page.getByText(t('enrol.done', { structure: 'ALM-0002' })).waitFor();
    state.deviceId = (await page.getByTestId('enrolled-device-id').textContent()) ?? '';
    expect(state.deviceId).toMatch(/^[0-9a-f-]{36}$/);

    // What goes onto the player: the configuration lines, then the files the agent reads.
    const config = JSON.parse((await page.getByTestId('enrol-agent-config').textContent()) ?? '{}');
    expect(config).toEqual({
      device_id: state.deviceId,
      structure: 'ALM-0002',
      authority_root_file: 'authority-root.pem',
      server_ca_file: 'server-ca.pem',
    });
    const download = async (key: MessageKey) => {
      const downloading = page.waitForEvent('download');
      await page.getByRole('link', { name: t(key) }).click();
      const file = await downloading;
      return { name: file.suggestedFilename(), text: await readFile((await file.path())!, 'utf8') };
    };
    const root = await download('dayone.downloadAuthorityRoot');
    expect(root.name).toBe('authority-root.pem');
    expect(root.text).toBe(await (await fetch(`${p.verifyUrl}/v1/authority-root.pem`)).text());
    // The device CA's root, which the devices host's TLS certificate chains to: the end of the device's chain.
    const serverCa = await download('dayone.downloadServerCa');
    expect(serverCa.name).toBe('server-ca.pem');
    const caRoot = new X509Certificate(serverCa.text);
    expect([caRoot.ca, caRoot.subject === caRoot.issuer]).toEqual([true, true]);
    const chain = await download('enrol.downloadChain');
    expect(chain.name).toBe('device-chain.pem');
    expect(chain.text.trim().endsWith(serverCa.text.trim())).toBe(true);
    const certificate = await download('enrol.downloadCertificate');
    expect(certificate.name).toBe('device-cert.pem');
    expect(new X509Certificate(certificate.text).subject).toContain(state.deviceId);

    // On the player: the four files into one folder, then the one install step the page shows.
    expect(await page.getByTestId('enrol-install-command').textContent()).toContain(
      'npm run agent -- install',
    );
    const downloads = path.join(init.dir!, 'downloads');
    await mkdir(downloads);
    for (const file of [root, serverCa, chain, certificate])
      await writeFile(path.join(downloads, file.name), file.text);
    const installed = await agentCommand(['install', downloads, '--config', init.config!]);
    expect(installed.code, installed.stderr).toBe(0);
    const agentJson = JSON.parse(await readFile(init.config!, 'utf8')) as { device_id?: string };
    expect(agentJson.device_id).toBe(state.deviceId);
    await look(page, 'fleet-enrolled');
    expect(errors.get(page)).toEqual([]);
  }, 90_000);

  test('the operator registers its CMS installation and maps a player to a structure', async () => {
    const page = pages.operator;
    state.cmsPublicKey = exportPublicKeySpki(
      (() => {
        const { publicKey, privateKey } = generateEs256KeyPair();
        state.cmsPrivateKey = privateKey;
        return publicKey;
      })(),
    );
    await page.getByText(t('fleet.register')).click();
    await page.getByLabel(t('fleet.installationName'), { exact: true }).fill('Broadsign Almaty');
    await page.getByLabel(t('fleet.installationKind')).fill('broadsign');
    await page.locator('#installation-key').fill(state.cmsPublicKey);
    await page.getByRole('button', { name: t('fleet.registerButton'), exact: true }).click();
    const card = page.locator('article.card', { hasText: 'Broadsign Almaty' });
    await card.getByText(t('fleet.noPlayers')).waitFor();
    await card.getByLabel(t('fleet.player')).fill('screen-17');
    await card.getByLabel(t('fleet.structure'), { exact: true }).selectOption({ label: 'ALM-0003' });
    await card.getByRole('button', { name: t('fleet.map') }).click();
    await card.getByRole('row', { name: /screen-17.*ALM-0003/ }).waitFor();
    // What the CMS must send as X-Service-Source and source_id is read off the page, as its engineer would.
    state.cmsSourceId = (
      (await card.getByTestId('cms-source-id').locator('code').textContent()) ?? ''
    ).trim();
    expect(state.cmsSourceId).toMatch(/^[0-9a-f-]{36}$/);
    await look(page, 'fleet-cms');
    expect(errors.get(page)).toEqual([]);
  }, 60_000);

  test('the agency signs in and submits a creative with its file for two structures', async () => {
    const page = pages.agency;
    await signIn(page, agencyEmail);
    await page.getByRole('heading', { name: t('submissions.title'), level: 1 }).waitFor();
    await page.getByRole('link', { name: t('submissions.new') }).click();
    await page.getByRole('heading', { name: t('submissionNew.title'), level: 1 }).waitFor();
    await page.getByLabel(t('submission.advertiser'), { exact: true }).fill('Kazakh Tea LLP');
    await page.getByLabel(t('submission.periodFrom')).fill(DAY);
    await page.getByLabel(t('submission.periodTo')).fill('2026-12-20');
    await page.getByLabel(t('category.search')).fill('лизинг автомоб');
    await page.locator('input[name="category"]').first().check();
    // 299 active structures of the operator: found by search, not by scrolling.
    for (const code of ['ALM-0002', 'ALM-0003']) {
      await page.locator('#structure-search').fill(code);
      await page.getByRole('checkbox', { name: new RegExp(code) }).check();
    }
    await page.locator('#structure-search').fill('');
    await look(page, 'submission-new');
    await page.getByRole('button', { name: t('submissionNew.create') }).click();
    const heading = page.getByRole('heading', {
      name: pattern(language, 'submissionDetail.title', { number: 'SUB-2026-\\d{6}' }),
    });
    await heading.waitFor();
    state.submissionNumber = /SUB-2026-\d{6}/.exec((await heading.textContent()) ?? '')![0];
    await page
      .getByLabel(t('media.choose'))
      .setInputFiles({ name: 'kazakh-tea.png', mimeType: 'image/png', buffer: MEDIA });
    await page.getByText(t('media.uploaded'), { exact: true }).waitFor();
    await expect.poll(() => page.getByText(MEDIA_SHA256).isVisible()).toBe(true);
    await page.getByRole('button', { name: t('submissionDetail.send') }).click();
    await page.getByText(t('submissionDetail.sent')).waitFor();
    await expect.poll(() => page.locator('dl.facts .badge').first().textContent()).toBe(t('state.in_review'));
    await look(page, 'submission-sent');
    expect(errors.get(page)).toEqual([]);
  }, 90_000);

  test('the authority reviews the creative and approves it', async () => {
    const page = pages.authority;
    await nav(page, 'nav.moderation', 'moderation.title');
    await page.getByRole('link', { name: state.submissionNumber }).click();
    await page
      .getByRole('heading', { name: t('moderationDetail.title', { number: state.submissionNumber }) })
      .waitFor();
    await page.getByRole('button', { name: t('moderationDetail.approve') }).click();
    const notice = page.getByText(
      pattern(language, 'moderationDetail.approved', { number: 'APR-2026-\\d{6}' }),
    );
    await notice.waitFor();
    state.approvalNumber = /APR-2026-\d{6}/.exec((await notice.textContent()) ?? '')![0];
    await expect.poll(() => page.locator('dl.facts .badge').first().textContent()).toBe(t('state.approved'));
    await look(page, 'moderation-approved');
    expect(errors.get(page)).toEqual([]);
  }, 60_000);

  test('the player and the CMS send signed plays; they show on the fleet and proof-of-play pages', async () => {
    const now = p.clock.now();
    const play = (seq: number, minutesAgo: number) => {
      const end = new Date(now.getTime() - minutesAgo * 60_000);
      return {
        kind: 'play',
        seq,
        play_id: `p${seq}`,
        approval_number: state.approvalNumber,
        media_sha256: MEDIA_SHA256,
        start: new Date(end.getTime() - 10_000).toISOString(),
        end: end.toISOString(),
        duration_ms: 10_000,
      };
    };
    // The enrolled player, signing with the key agent init made (spec: POST {agents_url}/s/v1/telemetry).
    const deviceBody = Buffer.from(
      JSON.stringify({
        schema: 'service.pop/1',
        device_id: state.deviceId,
        ts: now.toISOString(),
        batch_seq: 1,
        prev_sha256: '',
        events: [1, 2, 3, 4, 5].map((seq) => ({ ...play(seq, 30 - seq), structure: 'ALM-0002' })),
      }),
    );
    const fromDevice = await p.servers.agents.inject({
      method: 'POST',
      url: '/s/v1/telemetry',
      headers: {
        'content-type': 'application/json',
        'x-service-signature': es256Sign(createPrivateKey(state.agentKeyPem), deviceBody),
      },
      payload: deviceBody,
    });
    expect(fromDevice.json(), fromDevice.body).toMatchObject({ accepted: 5, refused: 0, flagged: 0 });
    // The CMS, with the key the authority issued in the console (spec: POST {base_url}/api/v1/pop/batches).
    const cmsBody = Buffer.from(
      JSON.stringify({
        schema: 'service.pop/1',
        source_id: state.cmsSourceId,
        batch_seq: 0,
        prev_sha256: '',
        records: [1, 2, 3].map((seq) => ({
          ...play(seq, 20 - seq),
          play_id: `screen-17-${seq}`,
          player: 'screen-17',
        })),
      }),
    );
    const fromCms = await p.servers.api.inject({
      method: 'POST',
      url: '/api/v1/pop/batches',
      headers: {
        authorization: `Bearer ${state.cmsKey}`,
        'content-type': 'application/json',
        'x-service-source': state.cmsSourceId,
        'x-service-signature': es256Sign(state.cmsPrivateKey, cmsBody),
      },
      payload: cmsBody,
    });
    expect(fromCms.json(), fromCms.body).toMatchObject({ accepted: 3, refused: 0, flagged: 0 });

    // The operator watches them arrive on the fleet page.
    const operator = pages.operator;
    await operator.reload();
    const row = operator.getByRole('row', { name: /ALM-0002/ });
    await row.waitFor();
    await expect.poll(() => row.textContent()).toContain(t('fleet.batchSeq', { seq: 1 }));
    await look(operator, 'fleet-plays');

    // The authority counts them on the proof-of-play page: 5 from the player, 3 attested by the CMS.
    const authority = pages.authority;
    await nav(authority, 'nav.plays', 'plays.title');
    await authority.locator('#plays-from').fill(DAY);
    await authority.locator('#plays-to').fill(DAY);
    await authority.getByRole('button', { name: t('plays.show'), exact: true }).click();
    await expect.poll(() => authority.getByTestId('plays-total').textContent()).toBe('8');
    await look(authority, 'plays');
    expect(errors.get(operator)).toEqual([]);
    expect(errors.get(authority)).toEqual([]);
  }, 90_000);

  test("after the day ends it is sealed, and the authority checks the day's seal in the browser", async () => {
    // The platform's seal scheduler, as it runs every few seconds: the morning after, the day is sealed (and the
    // first day's ledger block digested); the next morning the block holding the seal is digested too.
    p.clock.set(new Date('2026-11-21T05:00:00Z'));
    expect((await runSealScheduler(p.ctx)).seals.map((s) => s.day)).toEqual([DAY]);

    const page = pages.authority;
    const openSeals = async () => {
      // A new day: the session has ended; the authority signs in again.
      await signIn(page, authorityEmail);
      await page.getByRole('heading', { name: t('moderation.title'), level: 1 }).waitFor();
      await nav(page, 'nav.transparency', 'transparency.title');
      await page.getByLabel(t('seal.until')).fill('2026-11-21');
      await page.locator('form.inline-form button[type="submit"]').click();
    };
    // The morning after: sealed, its ledger block not yet digested. The page opens on the newest sealed day,
    // verified at once: amber, signature and content valid, ledger pending (not red: nothing failed).
    await openSeals();
    const pending = page.locator(`tr[data-day="${DAY}"]`);
    await pending.locator('.verdict-pending').waitFor();
    expect(await pending.locator('.verdict-pending').textContent()).toBe(t('seal.ledgerPending'));
    expect(await pending.locator('.verdict-bad').count()).toBe(0);
    await look(page, 'transparency-ledger-pending');

    p.clock.set(new Date('2026-11-22T05:00:00Z'));
    await runSealScheduler(p.ctx);
    await openSeals();
    const row = page.locator(`tr[data-day="${DAY}"]`);
    await row.getByRole('button', { name: t('seal.verify') }).click();
    await row.locator('.verdict-ok').waitFor();
    expect(await row.locator('.verdict-ok').textContent()).toBe(t('seal.allOk'));
    const cells = (await row.locator('td.num').allTextContents()).map((c) => c.trim());
    // Two batches (the player's and the CMS's), eight plays.
    expect(cells.slice(0, 2)).toEqual(['2', '8']);
    const checks = (await row.locator('ul.checks').textContent()) ?? '';
    for (const key of [
      'seal.check.signature',
      'seal.check.content',
      'seal.check.chain',
      'seal.check.ledger',
    ] as const)
      expect(checks).toContain(t(key));
    expect(checks).not.toContain(t('seal.state.failed'));
    await look(page, 'transparency-seal');
    const seal = (await (await fetch(`${p.verifyUrl}/v1/stats-seals/${DAY}`)).json()) as {
      body: Record<string, unknown>;
      ledger: { status: string } | null;
    };
    expect(seal.body).toMatchObject({ day: DAY, batch_count: 2, record_count: 8 });
    expect(seal.ledger?.status).toBe('digested');
    for (const page of Object.values(pages)) expect(errors.get(page)).toEqual([]);
  }, 90_000);
});
