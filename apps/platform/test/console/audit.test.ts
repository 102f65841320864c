import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { en, type MessageKey } from '../../console/src/i18n/en.js';
import { kk } from '../../console/src/i18n/kk.js';
import { ru } from '../../console/src/i18n/ru.js';
import { png } from '../approvals/media-fixtures.js';
import { apiCall } from '../support/platform.js';
import {
  ARTIFACTS,
  axeViolations,
  type ConsolePlatform,
  expectNoEnglish,
  launchChromium,
  startConsolePlatform,
  watchErrors,
} from './browser.js';

/*
 * The console audited as its users meet it (issue "The console"): every page each role may open, in English, Russian
 * and Kazakh, at a desktop's 1280×800 and a phone's 390×844; the pages a role may not open; and the error paths a user
 * meets (a 422 with field errors, a session that expired, too many sign-ins, no network), keyboard alone, and Almaty
 * time in a browser set to another zone. journeys.test.ts and day-one.test.ts walk the work itself; this file looks at
 * what they do not: every role, the phone, and the errors. On the phone every page is also scanned by axe-core (WCAG
 * 2.2 target size included) and kept as a screenshot in test-artifacts/console/phone/<role>/<page>-<language>.png.
 */

// Friday 2026-11-20, 11:00 Almaty.
const NOW = new Date('2026-11-20T06:00:00Z');
const PASSWORD = 'audit journey password';
const LANGUAGES = ['en', 'ru', 'kk'] as const;
type Language = (typeof LANGUAGES)[number];
const DICTIONARIES: Record<Language, Record<MessageKey, string>> = { en, ru, kk };

/** A dictionary text with its placeholders filled (numbers as written by hand here: small ones only). */
function text(language: Language, key: MessageKey, params: Record<string, string> = {}): string {
  return DICTIONARIES[language][key].replace(/\{(\w+)\}/g, (whole, name: string) => params[name] ?? whole);
}

const USERS = {
  authorityAdmin: { email: 'admin@city.kz', org: 'authority', role: 'admin' },
  authorityMember: { email: 'reader@city.kz', org: 'authority', role: 'member' },
  operatorAdmin: { email: 'fleet@outdoor.kz', org: 'operator', role: 'admin' },
  operatorMember: { email: 'clerk@outdoor.kz', org: 'operator', role: 'member' },
  agency: { email: 'planner@agency.kz', org: 'agency', role: 'member' },
  advertiser: { email: 'brand@tea.kz', org: 'advertiser', role: 'admin' },
  // Only for the test of too many sign-ins: the account it leaves refused for 15 minutes.
  lockedOut: { email: 'locked@tea.kz', org: 'advertiser', role: 'member' },
} as const;
type User = keyof typeof USERS;

let p: ConsolePlatform;
let browser: Browser;
const orgIds: Record<string, string> = {};
const structureIds: string[] = [];
const submissions: Record<'draft' | 'review' | 'approved' | 'rejected', string> = {
  draft: '',
  review: '',
  approved: '',
  rejected: '',
};
/** The public key of an enrolled device: enrolling it again is refused with key_taken. */
let takenKey = '';
let deviceId = '';

const url = (path: string) => `${p.apiUrl}/console${path}`;

async function call(method: 'GET' | 'POST', path: string, body?: unknown) {
  const res = await apiCall(p.servers.api, p.adminKey, method, path, body);
  expect(res.statusCode, `${method} ${path}: ${res.body}`).toBeLessThan(300);
  return res.json();
}

/** A console session of `user` for seeding through HTTP (cookie and CSRF token, as the browser holds them). */
async function sessionOf(user: User) {
  const res = await apiCall(p.servers.api, null, 'POST', '/api/v1/console/session', {
    email: USERS[user].email,
    password: PASSWORD,
  });
  expect(res.statusCode, res.body).toBe(200);
  const cookie = res.cookies.find((c) => c.name === 'ooh_session')!.value;
  const csrf = res.json().csrf_token as string;
  return (method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown, file?: Buffer) =>
    p.servers.api.inject({
      method,
      url: path,
      headers: {
        cookie: `ooh_session=${cookie}`,
        'x-csrf-token': csrf,
        ...(file
          ? { 'content-type': 'image/png' }
          : body !== undefined
            ? { 'content-type': 'application/json' }
            : {}),
      },
      ...(file ? { payload: file } : body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
}

beforeAll(async () => {
  p = await startConsolePlatform(NOW);
  orgIds['authority'] = p.authorityId;
  for (const [kind, name] of [
    ['operator', 'Almaty Outdoor LLP'],
    ['agency', 'Steppe Media Agency'],
    ['advertiser', 'Tea House LLP'],
  ] as const) {
    orgIds[kind] = (await call('POST', '/api/v1/console/organisations', { name, kind })).id;
  }
  for (const [code, district, format] of [
    ['ALM-0001', 'almaly', 'billboard'],
    ['ALM-0002', 'bostandyk', 'digital'],
  ] as const) {
    const s = await call('POST', '/api/v1/console/structures', {
      organisation_id: orgIds['operator'],
      code,
      district,
      format,
      address: 'Abay Avenue 10, Almaty',
    });
    structureIds.push(s.id);
  }
  for (const u of Object.values(USERS)) {
    await call('POST', `/api/v1/console/organisations/${orgIds[u.org]}/users`, {
      email: u.email,
      password: PASSWORD,
      role: u.role,
    });
  }
  // The agency's submissions in each state: a draft, one in review, one approved, one rejected.
  const agency = await sessionOf('agency');
  const categories = (await agency('GET', '/api/v1/categories')).json().items as {
    id: number;
    name: { en: string };
  }[];
  const category = categories.find((c) => c.name.en === 'Automotive Leasing')!.id;
  const make = async (name: string, send: boolean) => {
    const res = await agency('POST', '/api/v1/submissions', {
      advertiser_name: name,
      period_from: '2026-11-21',
      period_to: '2026-12-31',
      channel: 'direct',
      category_id: category,
      structure_ids: structureIds,
    });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    if (send) {
      const up = await agency(
        'PUT',
        `/api/v1/submissions/${id}/media`,
        undefined,
        png(320, 160, name.length),
      );
      expect(up.statusCode, up.body).toBe(200);
      const sent = await agency('POST', `/api/v1/submissions/${id}/send`, {});
      expect(sent.statusCode, sent.body).toBeLessThan(300);
    }
    return id;
  };
  submissions.draft = await make('Draft Tea LLP', false);
  submissions.review = await make('Review Tea LLP', true);
  submissions.approved = await make('Approved Tea LLP', true);
  submissions.rejected = await make('Rejected Tea LLP', true);
  await call('POST', `/api/v1/console/submissions/${submissions.approved}/approve`, {});
  await call('POST', `/api/v1/console/submissions/${submissions.rejected}/reject`, {
    reason: 'Wrong category',
  });
  // A player of the operator's, enrolled.
  takenKey = exportPublicKeySpki(generateEs256KeyPair().publicKey);
  deviceId = (
    await call('POST', '/api/v1/console/devices', { structure_id: structureIds[0], public_key: takenKey })
  ).device_id;
  browser = await launchChromium();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await p?.close();
});

/** A browser of `user`, signed in, in a zone other than Almaty's unless told (times must still be Almaty's). */
async function browserOf(
  user: User | null,
  options: { timezoneId?: string; language?: Language } = {},
): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 800 },
    locale: 'en-GB',
    timezoneId: options.timezoneId ?? 'Europe/Berlin',
  });
  if (options.language) {
    await context.addInitScript(
      `window.localStorage.getItem('ooh-console-language') || window.localStorage.setItem('ooh-console-language', '${options.language}')`,
    );
  }
  if (user) {
    const res = await context.request.post(`${p.apiUrl}/api/v1/console/session`, {
      data: { email: USERS[user].email, password: PASSWORD },
    });
    expect(res.status()).toBe(200);
  }
  const page = await context.newPage();
  return { context, page, errors: watchErrors(page) };
}

/** Requests of the page still under way (set up once per page by `trackRequests`). */
const pending = new WeakMap<Page, Set<unknown>>();
function trackRequests(page: Page): void {
  const open = new Set<unknown>();
  pending.set(page, open);
  page.on('request', (r) => open.add(r));
  page.on('requestfinished', (r) => open.delete(r));
  page.on('requestfailed', (r) => open.delete(r));
}

/** The page has its heading, nothing is loading, and no request is under way. */
async function settled(page: Page): Promise<void> {
  await page.locator('main h1').first().waitFor();
  await expect
    .poll(async () => (pending.get(page)?.size ?? 0) + (await page.locator('output.loading').count()), {
      timeout: 10_000,
      interval: 50,
    })
    .toBe(0);
  // Two frames: what a finished request set in state is laid out.
  await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))');
}

/** Client-side navigation, as a click on a link of the console does (the router listens to popstate). */
async function open(page: Page, path: string): Promise<void> {
  await page.evaluate(
    `history.pushState(null, '', ${JSON.stringify(`/console${path}`)}); dispatchEvent(new PopStateEvent('popstate'))`,
  );
  await settled(page);
}

async function chooseLanguage(page: Page, language: Language): Promise<void> {
  await page.locator('#language').selectOption(language);
  await page.locator(`html[lang="${language}"]`).waitFor();
  await settled(page);
}

interface Look {
  keys: string[];
  cut: string[];
  unnamed: string[];
  emptyTables: string[];
  browserFileButtons: string[];
}

/**
 * What a reader would find wrong on the page as it is: a message key shown as text; text cut off (clipped by an
 * overflow, or past the right edge of the screen or of its panel, outside the tables that scroll in their frames, or
 * a select's chosen option or a search box's hint longer than the control);
 * a control with no accessible name; a table with no rows (an empty list must say so in words); a file input that shows
 * the browser's own button, which speaks the browser's language ("Choose File" in a Kazakh console) and on a phone
 * cuts its own text short ("No ...osen").
 */
const LOOK = `(() => {
  const out = { keys: [], cut: [], unnamed: [], emptyTables: [], browserFileButtons: [] };
  const visible = (el) => el.checkVisibility() && el.closest('.visually-hidden') === null;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' "' + (el.textContent || '').trim().slice(0, 50) + '"';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = (n.textContent || '').trim();
    if (/^[a-z][A-Za-z]*(\\.[A-Za-z_0-9]+)+$/.test(t) && !/^[a-z0-9-]+(\\.[a-z0-9-]+)+$/.test(t)) out.keys.push(t);
    if (/\\{[a-z]\\w*\\}/.test(t)) out.keys.push(t);
  }
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > width + 1)
    out.cut.push('the page is ' + (document.documentElement.scrollWidth - width) + ' px wider than the screen');
  for (const el of document.querySelectorAll('main *, header *, nav *')) {
    if (!visible(el) || el.closest('.table-wrap, pre, svg')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;
    const cs = getComputedStyle(el);
    const clips = ['hidden', 'clip'].includes(cs.overflowX) || cs.textOverflow === 'ellipsis';
    if (clips && el.scrollWidth > el.clientWidth + 1 && (el.textContent || '').trim()) out.cut.push('clipped ' + name(el));
    const parent = el.parentElement.getBoundingClientRect();
    if (r.right > width + 1 && parent.right <= width + 1) out.cut.push('past the screen ' + name(el));
    const box = el.parentElement.closest('.panel, .card, .filters, fieldset, .notice, dl, .login-card');
    if (box && r.right > box.getBoundingClientRect().right + 1 && parent.right <= box.getBoundingClientRect().right + 1)
      out.cut.push('past its ' + box.className + ' ' + name(el));
  }
  for (const el of document.querySelectorAll('a[href], button, input, select, textarea, [role="switch"], [tabindex="0"]')) {
    if (!visible(el) || (el.tagName === 'INPUT' && el.type === 'hidden')) continue;
    const labelled = el.getAttribute('aria-label') || el.getAttribute('title') ||
      (el.getAttribute('aria-labelledby') || '').split(' ').map((id) => document.getElementById(id)?.textContent || '').join('').trim() ||
      (el.labels && [...el.labels].some((l) => l.textContent.trim())) ||
      (['A', 'BUTTON'].includes(el.tagName) && (el.textContent.trim() || el.querySelector('img[alt]:not([alt=""])')));
    if (!labelled) out.unnamed.push(name(el));
  }
  for (const table of document.querySelectorAll('main table')) {
    if (visible(table) && table.tBodies.length > 0 && [...table.tBodies].every((b) => b.rows.length === 0))
      out.emptyTables.push(table.caption ? table.caption.textContent : name(table));
  }
  // What a control shows inside itself, which no overflow reveals: the chosen option of a select (narrower than the
  // same select left to its own width, holding only that option) and the hint an empty box shows (longer, in the
  // box's own font, than the room inside its padding).
  const measure = document.createElement('canvas').getContext('2d');
  for (const el of document.querySelectorAll('main select, main input[placeholder]')) {
    if (!visible(el)) continue;
    const cs = getComputedStyle(el);
    if (el.tagName === 'SELECT') {
      const chosen = el.selectedOptions[0];
      if (!chosen || !chosen.textContent.trim()) continue;
      const alone = el.cloneNode(false);
      alone.appendChild(chosen.cloneNode(true));
      alone.removeAttribute('id');
      alone.style.cssText = 'position:absolute;visibility:hidden;width:auto;min-width:0;max-width:none;flex:none';
      el.parentElement.appendChild(alone);
      const needs = alone.getBoundingClientRect().width;
      alone.remove();
      if (needs > el.getBoundingClientRect().width + 0.5)
        out.cut.push('cut short inside ' + name(el) + ': "' + chosen.textContent.trim() + '"');
    } else if (!el.value && el.placeholder.trim()) {
      measure.font = cs.fontStyle + ' ' + cs.fontWeight + ' ' + cs.fontSize + ' ' + cs.fontFamily;
      const room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
      if (measure.measureText(el.placeholder.trim()).width > room + 0.5)
        out.cut.push('cut short inside ' + name(el) + ': "' + el.placeholder.trim() + '"');
    }
  }
  for (const input of document.querySelectorAll('input[type="file"]')) {
    const r = input.getBoundingClientRect();
    if (visible(input) && getComputedStyle(input).opacity !== '0' && r.width > 1 && r.height > 1)
      out.browserFileButtons.push(name(input));
  }
  return out;
})()`;

async function look(page: Page): Promise<Look> {
  return (await page.evaluate(LOOK)) as Look;
}

/** The sections each role is offered, and the pages it may open (detail pages after the sections). */
const OFFERED: Record<Exclude<User, 'lockedOut'>, string[]> = {
  authorityAdmin: [
    '/moderation',
    '/register',
    '/check',
    '/fleet',
    '/plays',
    '/reports',
    '/transparency',
    '/organisations',
    '/structures',
  ],
  authorityMember: ['/moderation', '/register', '/check', '/plays', '/reports', '/transparency'],
  operatorAdmin: ['/submissions', '/check', '/fleet', '/plays', '/reports', '/transparency'],
  operatorMember: ['/submissions', '/check', '/plays', '/reports', '/transparency'],
  agency: ['/submissions', '/check', '/plays', '/reports', '/transparency'],
  advertiser: ['/submissions', '/check', '/plays', '/reports', '/transparency'],
};
const ALL_SECTIONS = [
  '/submissions',
  '/moderation',
  '/register',
  '/check',
  '/fleet',
  '/plays',
  '/reports',
  '/transparency',
  '/organisations',
  '/structures',
];

function pagesOf(user: Exclude<User, 'lockedOut'>): string[] {
  const detail: Record<string, string[]> = {
    authorityAdmin: [
      '/fleet/health',
      `/fleet/${deviceId}`,
      `/moderation/${submissions.review}`,
      `/moderation/${submissions.approved}`,
      `/reports/${submissions.approved}`,
    ],
    authorityMember: ['/fleet/health', `/moderation/${submissions.review}`],
    operatorAdmin: [
      '/fleet/health',
      `/fleet/${deviceId}`,
      '/submissions/new',
      `/reports/${submissions.approved}`,
    ],
    operatorMember: ['/submissions/new'],
    agency: [
      '/submissions/new',
      `/submissions/${submissions.draft}`,
      `/submissions/${submissions.draft}/edit`,
      `/submissions/${submissions.approved}`,
      `/submissions/${submissions.rejected}`,
      `/reports/${submissions.approved}`,
    ],
    advertiser: [],
  };
  return [...OFFERED[user], ...detail[user]!];
}

/** Tab until the focused element matches `selector`; fails if it is never reached. */
async function tabUntil(page: Page, selector: string, limit = 80): Promise<void> {
  for (let i = 0; i < limit; i += 1) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(`document.activeElement?.matches(${JSON.stringify(selector)}) ?? false`)) return;
  }
  throw new Error(`${selector} is not reached with Tab`);
}

/** Every control of the page's main part is reached with Tab alone (a radio group is one stop: arrows move in it). */
async function expectEveryControlReachable(page: Page): Promise<void> {
  const keyOf = `((el) => el.type === 'radio' ? 'radio:' + el.name
    : el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ':' + [...document.querySelectorAll('main *')].indexOf(el))`;
  const controls =
    (await page.evaluate(`[...new Set([...document.querySelectorAll('main a[href], main button, main input, main select, main textarea, main summary, main [tabindex="0"]')]
    .filter((el) => el.checkVisibility() && !el.disabled && el.tabIndex >= 0).map(${keyOf}))]`)) as string[];
  expect(controls.length).toBeGreaterThan(3);
  await page.locator('body').focus();
  const reached = new Set<string>();
  for (let i = 0; i < controls.length + 25; i += 1) {
    await page.keyboard.press('Tab');
    const focused = (await page.evaluate(
      `(() => { const el = document.activeElement; return el && el.closest('main') ? (${keyOf})(el) : null })()`,
    )) as string | null;
    if (focused) reached.add(focused);
  }
  expect(controls.filter((c) => !reached.has(c))).toEqual([]);
  await page.locator('body').focus();
}

/** A page's address as a file name: ids by what they name. */
function slug(path: string): string {
  const named = Object.entries({ ...submissions, device: deviceId }).reduce(
    (p, [name, id]) => p.replaceAll(id, name),
    path,
  );
  return named.replace(/^\//, '').replaceAll('/', '-');
}

async function phoneShot(page: Page, name: string): Promise<void> {
  const file = join(ARTIFACTS, 'phone', `${name}.png`);
  await mkdir(dirname(file), { recursive: true });
  await page.screenshot({ path: file, fullPage: true });
}

describe('the console audited in Chromium, role by role', () => {
  test.each(
    Object.keys(OFFERED) as Exclude<User, 'lockedOut'>[],
  )('every page %s may open reads whole in en, ru and kk, on a desktop and a phone', async (user) => {
    const { context, page, errors } = await browserOf(user);
    trackRequests(page);
    await page.goto(url('/'));
    await settled(page);
    const found: string[] = [];
    for (const path of pagesOf(user)) {
      await open(page, path);
      // What folds away (forms to register, import, subscribe; histories) is looked at unfolded.
      await page.evaluate(`document.querySelectorAll('main details').forEach((d) => { d.open = true; })`);
      for (const language of LANGUAGES) {
        await chooseLanguage(page, language);
        if (language !== 'en') await expectNoEnglish(page, `${user} ${path} (${language})`);
        for (const [width, height] of [
          [1280, 800],
          [390, 844],
        ] as const) {
          await page.setViewportSize({ width, height });
          await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))');
          const seen = await look(page);
          for (const [what, items] of Object.entries(seen))
            for (const item of items as string[])
              found.push(`${path} ${language} ${width}: ${what}: ${item}`);
          // On a phone axe-core too (the journeys scan the desktop, nothing else the phone), every page in every
          // language: 162 scans, and the file still takes about 90 s. The screenshot is for a person to look at.
          if (width === 390) {
            await phoneShot(page, `${user}/${slug(path)}-${language}`);
            for (const v of await axeViolations(page))
              found.push(
                `${path} ${language} ${width}: axe ${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
              );
          }
        }
        await page.setViewportSize({ width: 1280, height: 800 });
      }
      await chooseLanguage(page, 'en');
    }
    expect(found).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  }, 120_000);

  test('a page a role may not open is not offered, and typed in it says so in the reader’s language', async () => {
    const cases: [Exclude<User, 'lockedOut'>, Language, string][] = [
      ['operatorMember', 'ru', '/fleet'],
      ['agency', 'kk', '/organisations'],
      ['authorityMember', 'en', '/structures'],
      ['advertiser', 'ru', '/moderation'],
      ['authorityAdmin', 'kk', '/submissions/new'],
    ];
    for (const [user, language, forbidden] of cases) {
      const { context, page, errors } = await browserOf(user, { language });
      trackRequests(page);
      await page.goto(url(forbidden));
      await settled(page);
      const nav = page.getByRole('navigation', { name: text(language, 'nav.label') });
      const offered = await nav
        .getByRole('link')
        .evaluateAll((links) => links.map((a) => new URL((a as unknown as { href: string }).href).pathname));
      expect(offered, user).toEqual(
        ALL_SECTIONS.filter((s) => OFFERED[user].includes(s)).map((s) => `/console${s}`),
      );
      expect(offered).not.toContain(`/console${forbidden}`);
      const u = USERS[user];
      await page.getByRole('heading', { level: 1, name: text(language, 'notAllowed.title') }).waitFor();
      expect(await page.locator('main').textContent()).toContain(
        text(language, 'notAllowed.text', {
          kind: text(language, `kind.${u.org}` as MessageKey),
          role: text(language, `role.${u.role}` as MessageKey),
        }),
      );
      // An address that is no page at all is not blamed on the role.
      await open(page, '/no-such-page');
      await page.getByRole('heading', { level: 1, name: text(language, 'notFound.title') }).waitFor();
      expect(await page.locator('main').textContent()).not.toContain(text(language, 'notAllowed.title'));
      expect(errors).toEqual([]);
      await context.close();
    }
  }, 60_000);

  test('an authority member, who has no fleet page, finds fleet health from proof of play', async () => {
    const { context, page, errors } = await browserOf('authorityMember', { language: 'ru' });
    trackRequests(page);
    await page.goto(url('/plays'));
    await settled(page);
    await page.getByRole('link', { name: text('ru', 'reports.healthLink') }).click();
    await settled(page);
    expect(page.url()).toBe(url('/fleet/health'));
    expect(await page.locator('main h1').textContent()).not.toBe(text('ru', 'notAllowed.title'));
    expect(errors).toEqual([]);
    await context.close();
  });

  test('the sign-in and first-administrator pages read whole in en, ru and kk, on a desktop and a phone', async () => {
    const { context, page, errors } = await browserOf(null);
    trackRequests(page);
    const found: string[] = [];
    for (const path of ['/login', '/first-admin']) {
      await page.goto(url(path));
      await settled(page);
      for (const language of LANGUAGES) {
        await chooseLanguage(page, language);
        if (language !== 'en') await expectNoEnglish(page, `${path} (${language})`);
        for (const [width, height] of [
          [1280, 800],
          [390, 844],
        ] as const) {
          await page.setViewportSize({ width, height });
          await page.evaluate('new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))');
          for (const [what, items] of Object.entries(await look(page)))
            for (const item of items as string[])
              found.push(`${path} ${language} ${width}: ${what}: ${item}`);
        }
        await page.setViewportSize({ width: 1280, height: 800 });
      }
    }
    expect(found).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  });

  test('empty lists say so: an advertiser with nothing yet', async () => {
    const { context, page, errors } = await browserOf('advertiser', { language: 'kk' });
    trackRequests(page);
    await page.goto(url('/submissions'));
    await settled(page);
    await page.getByText(text('kk', 'submissions.empty'), { exact: true }).waitFor();
    await open(page, '/reports');
    await page.getByText(text('kk', 'reports.noCampaigns'), { exact: true }).waitFor();
    expect((await look(page)).emptyTables).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  });
});

describe('errors as a user meets them', () => {
  test('a 422 is shown next to its field, named by its label, in the reader’s language', async () => {
    // The authority adds a user whose address is taken (ru).
    const authority = await browserOf('authorityAdmin', { language: 'ru' });
    trackRequests(authority.page);
    await authority.page.goto(url('/organisations'));
    await settled(authority.page);
    await authority.page
      .getByRole('row', { name: /Almaty Outdoor LLP/ })
      .getByRole('button', { name: text('ru', 'organisations.users') })
      .click();
    const email = authority.page.locator('#user-email');
    await email.fill(USERS.operatorAdmin.email);
    await authority.page.locator('#user-password').fill('a long enough password');
    await authority.page.getByRole('button', { name: text('ru', 'organisations.addUserButton') }).click();
    const emailError = authority.page.locator('#user-email-error');
    await emailError.waitFor();
    expect(await emailError.textContent()).toBe(text('ru', 'fieldError.duplicate'));
    expect(await email.getAttribute('aria-invalid')).toBe('true');
    expect(await email.getAttribute('aria-describedby')).toContain('user-email-error');
    // The summary names the field as the form does, not by its JSON pointer.
    const summary = authority.page.locator('.notice-error').first();
    expect(await summary.textContent()).toContain(
      `${text('ru', 'login.email')}: ${text('ru', 'fieldError.duplicate')}`,
    );
    expect(await summary.textContent()).not.toContain('/email');
    expect(authority.errors.filter((e) => !/status of 422/.test(e))).toEqual([]);
    await authority.context.close();

    // The operator enrols a key another device holds (en): the code has its words.
    const operator = await browserOf('operatorAdmin', { language: 'en' });
    trackRequests(operator.page);
    await operator.page.goto(url('/fleet'));
    await settled(operator.page);
    await operator.page.locator('#enrol-structure').selectOption({ label: 'ALM-0002' });
    await operator.page.locator('#enrol-key').fill(takenKey);
    await operator.page.getByRole('button', { name: en['enrol.button'], exact: true }).click();
    const keyError = operator.page.locator('#enrol-key-error');
    await keyError.waitFor();
    expect(await keyError.textContent()).toBe(en['fieldError.key_taken']);
    expect(await operator.page.locator('#enrol-key').getAttribute('aria-invalid')).toBe('true');
    expect(operator.errors.filter((e) => !/status of 422/.test(e))).toEqual([]);
    await operator.context.close();

    // The agency forgets the structures (kk): said at the structure picker.
    const agency = await browserOf('agency', { language: 'kk' });
    trackRequests(agency.page);
    await agency.page.goto(url('/submissions/new'));
    await settled(agency.page);
    await agency.page.locator('#advertiser').fill('Forgetful LLP');
    await agency.page.locator('#period-from').fill('2026-12-01');
    await agency.page.locator('#period-to').fill('2026-12-31');
    await agency.page.getByRole('button', { name: text('kk', 'submissionNew.create') }).click();
    const picker = agency.page.locator('fieldset.picker.field-invalid', {
      has: agency.page.locator('legend', { hasText: text('kk', 'structures.legend') }),
    });
    await picker.waitFor();
    expect(await picker.locator('.field-error').textContent()).toBe(text('kk', 'fieldError.too_few'));
    expect(await agency.page.locator('.notice-error').first().textContent()).toContain(
      `${text('kk', 'structures.legend')}: ${text('kk', 'fieldError.too_few')}`,
    );
    expect(agency.errors.filter((e) => !/status of 422/.test(e))).toEqual([]);
    await agency.context.close();
  }, 60_000);

  test('with the network gone an action says the platform could not be reached and what to do; what was typed stays', async () => {
    const { context, page, errors } = await browserOf('agency', { language: 'kk' });
    trackRequests(page);
    await page.goto(url('/submissions/new'));
    await settled(page);
    await page.locator('#advertiser').fill('Offline Tea LLP');
    await page.locator('#period-from').fill('2026-12-01');
    await page.locator('#period-to').fill('2026-12-31');
    await page.getByRole('checkbox', { name: /ALM-0001/ }).check();
    await context.setOffline(true);
    await page.getByRole('button', { name: text('kk', 'submissionNew.create') }).click();
    const notice = page.locator('main .notice-error').first();
    await notice.waitFor();
    expect(await notice.textContent()).toBe(text('kk', 'problem.network_error'));
    expect(await page.locator('#advertiser').inputValue()).toBe('Offline Tea LLP');
    // Back online, the same click goes through.
    await context.setOffline(false);
    await page.getByRole('button', { name: text('kk', 'submissionNew.create') }).click();
    await page.getByRole('heading', { level: 1, name: /SUB-2026-\d{6}/ }).waitFor();
    expect(errors.filter((e) => !/ERR_INTERNET_DISCONNECTED|Failed to fetch/.test(e))).toEqual([]);
    await context.close();
  });

  test('too many failed sign-ins: the 429 says when to try again, in the reader’s language', async () => {
    const { context, page, errors } = await browserOf(null, { language: 'ru' });
    await page.goto(url('/'));
    const email = page.getByLabel(text('ru', 'login.email'));
    await email.waitFor();
    for (let attempt = 1; attempt <= 5; attempt += 1) {
      await email.fill(USERS.lockedOut.email);
      await page.getByLabel(text('ru', 'login.password')).fill(`wrong password ${attempt}`);
      await page.getByRole('button', { name: text('ru', 'login.signIn') }).click();
      await page.getByText(text('ru', 'login.wrong')).waitFor();
    }
    await page.getByLabel(text('ru', 'login.password')).fill(PASSWORD);
    await page.getByRole('button', { name: text('ru', 'login.signIn') }).click();
    const notice = page.locator('.notice-error');
    await notice.getByText(text('ru', 'problem.rate_limited')).waitFor();
    // The window is 15 minutes from the first failure, and the clock stood still.
    expect(await notice.textContent()).toContain(text('ru', 'problem.retryAfter', { minutes: '15' }));
    // The address typed is kept for the next attempt.
    expect(await email.inputValue()).toBe(USERS.lockedOut.email);
    expect(errors.filter((e) => !/status of (401|429)/.test(e))).toEqual([]);
    await context.close();
  });
});

describe('keyboard, time zones, sessions', () => {
  test('keyboard alone: sign in, reach a section, create a draft with a category and a structure', async () => {
    const { context, page, errors } = await browserOf(null, { language: 'en' });
    trackRequests(page);
    await page.goto(url('/'));
    await page.getByRole('heading', { name: en['login.title'] }).waitFor();
    const tabTo = (selector: string) => tabUntil(page, selector);
    await tabTo('#login-email');
    await page.keyboard.type(USERS.agency.email);
    await tabTo('#login-password');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: en['submissions.title'] }).waitFor();
    await settled(page);

    // Every control of the new submission page is reached with Tab, in order, and the draft is made with keys only.
    await tabTo(`a[href="/console/submissions/new"].button`);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: en['submissionNew.title'] }).waitFor();
    await settled(page);
    await expectEveryControlReachable(page);

    /** A date typed as this Chromium's date field orders its parts (day first or month first). */
    const typeDate = async (selector: string, day: string, month: string, year: string) => {
      await tabTo(selector);
      await page.keyboard.type(`${day}${month}${year}`);
      if ((await page.locator(selector).inputValue()) !== `${year}-${month}-${day}`) {
        await page.keyboard.press('Shift+Tab');
        await page.keyboard.press('Shift+Tab');
        await page.keyboard.type(`${month}${day}${year}`);
      }
      expect(await page.locator(selector).inputValue()).toBe(`${year}-${month}-${day}`);
    };
    await page.locator('body').focus();
    await tabTo('#advertiser');
    await page.keyboard.type('Keyboard Tea LLP');
    await typeDate('#period-from', '01', '12', '2026');
    await typeDate('#period-to', '31', '12', '2026');
    await tabTo('#category-search');
    await page.keyboard.type('Automotive Leasing');
    await tabTo('input[name="category"]');
    await page.keyboard.press('Space');
    await tabTo('#structure-search');
    await page.keyboard.type('ALM-0002');
    await tabTo('.picker-results input[type="checkbox"]');
    await page.keyboard.press('Space');
    await tabTo('button[type="submit"].button-primary');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: /SUB-2026-\d{6}/ }).waitFor();
    const facts = (await page.locator('dl.facts').first().textContent()) ?? '';
    expect(facts).toContain('Keyboard Tea LLP');
    expect(facts).toContain('Automotive Leasing');
    expect(facts).toContain('ALM-0002');
    expect(errors).toEqual([]);
    await context.close();
  }, 60_000);

  test('times are Almaty’s in a browser set to New York, written as each language writes them', async () => {
    const { context, page, errors } = await browserOf('authorityAdmin', { timezoneId: 'America/New_York' });
    trackRequests(page);
    await page.goto(url('/register'));
    await settled(page);
    // Both decisions were taken at 06:00Z: 11:00 in Almaty, 01:00 in New York.
    const expected: Record<Language, RegExp> = {
      en: /^20 Nov 2026, 11:00$/,
      ru: /^20 нояб\. 2026 г\., 11:00$/,
      kk: /^2026 ж\. 20 қар\., 11:00$/,
    };
    for (const language of LANGUAGES) {
      await chooseLanguage(page, language);
      const decided = await page.locator('details.history > summary').allTextContents();
      expect(decided.length, language).toBe(2);
      for (const shown of decided) expect(shown.trim(), language).toMatch(expected[language]);
    }
    // An API key's expiry is typed in the browser's own time; the form says which Almaty time that is, the time
    // the list of keys will show: 18:00 in New York on 31 January is 04:00 in Almaty on 1 February.
    await chooseLanguage(page, 'en');
    await open(page, '/organisations');
    await page
      .getByRole('row', { name: /Almaty Outdoor LLP/ })
      .getByRole('button', { name: en['organisations.users'] })
      .click();
    await page.locator('#key-expires').fill('2027-01-31T18:00');
    expect(await page.locator('#key-expires-hint').textContent()).toBe('In Almaty time: 1 Feb 2027, 04:00.');
    expect(await page.locator('#key-expires').getAttribute('aria-describedby')).toBe('key-expires-hint');
    expect(errors).toEqual([]);
    await context.close();
  });

  test('keyboard alone: the authority opens a submission from the queue and approves it', async () => {
    const { context, page, errors } = await browserOf('authorityAdmin', { language: 'ru' });
    trackRequests(page);
    await page.goto(url('/moderation'));
    await settled(page);
    await expectEveryControlReachable(page);
    await tabUntil(page, `main a[href="/console/moderation/${submissions.review}"]`);
    await page.keyboard.press('Enter');
    await settled(page);
    await page.locator('#valid-from').waitFor();
    await expectEveryControlReachable(page);
    await tabUntil(page, 'form.panel button[type="submit"].button-primary');
    expect(await page.evaluate('document.activeElement.textContent')).toBe(
      text('ru', 'moderationDetail.approve'),
    );
    await page.keyboard.press('Enter');
    await page
      .locator('.notice-success')
      .getByText(new RegExp(text('ru', 'moderationDetail.approved', { number: 'APR-2026-\\d{6}' })))
      .waitFor();
    expect(errors).toEqual([]);
    await context.close();
  });

  test('a session that expired leads back to sign-in, which says so, then to the page the user was on', async () => {
    const { context, page, errors } = await browserOf('operatorMember', { language: 'ru' });
    trackRequests(page);
    await page.goto(url('/check'));
    await settled(page);
    // Idle for longer than the 30 minutes a session lasts unused.
    p.clock.set(new Date(p.clock.now().getTime() + 31 * 60_000));
    await page
      .getByRole('navigation', { name: text('ru', 'nav.label') })
      .getByRole('link', { name: text('ru', 'nav.submissions') })
      .click();
    await page.getByText(text('ru', 'login.expired')).waitFor();
    expect(page.url()).toBe(url('/submissions'));
    await page.getByLabel(text('ru', 'login.email')).fill(USERS.operatorMember.email);
    await page.getByLabel(text('ru', 'login.password')).fill(PASSWORD);
    await page.getByRole('button', { name: text('ru', 'login.signIn') }).click();
    await page.getByRole('heading', { level: 1, name: text('ru', 'submissions.title') }).waitFor();
    expect(page.url()).toBe(url('/submissions'));
    expect(errors.filter((e) => !/status of 401/.test(e))).toEqual([]);
    await context.close();
  });
});
