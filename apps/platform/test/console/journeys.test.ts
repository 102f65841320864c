import { createHash, createPublicKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createCsr, es256Sign, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { digestLedgerDay } from '../../src/ledger/index.js';
import { png } from '../approvals/media-fixtures.js';
import { apiCall } from '../support/platform.js';
import { agentInit } from './agent-init.js';
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

/**
 * The console's main journeys in a real Chromium against a real, listening platform (issue "The console", Tests):
 * sign in, create and send a submission with media, approve it as the authority, check the creative by dropping the
 * file, see a simulated player's plays, verify a seal, and switch to Russian and Kazakh with no English left. Every
 * page is checked with axe-core and kept as a screenshot in test-artifacts/console/.
 */

// Friday 2026-11-20, 11:00 Almaty.
const NOW = new Date('2026-11-20T06:00:00Z');
const PASSWORD = 'console journey password';
const OPERATOR_EMAIL = 'planner@almaty-outdoor.kz';
const AUTHORITY_EMAIL = 'reviewer@city.kz';
const MEDIA = png(320, 160, 11);
const MEDIA_SHA256 = createHash('sha256').update(MEDIA).digest('hex');

let p: ConsolePlatform;
let browser: Browser;
let operatorContext: BrowserContext;
let authorityContext: BrowserContext;
let operatorPage: Page;
let authorityPage: Page;
const browserErrors = new WeakMap<Page, string[]>();
const structures: { id: string; code: string }[] = [];
let operatorId = '';
let submissionId = '';
let submissionNumber = '';
let approvalNumber = '';

async function call(method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) {
  const res = await apiCall(p.servers.api, p.adminKey, method, url, body);
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  return res.json();
}

async function signIn(page: Page, email: string): Promise<void> {
  await page.getByLabel('Email address').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

const url = (path: string) => `${p.apiUrl}/console${path}`;

beforeAll(async () => {
  p = await startConsolePlatform(NOW);
  const operator = await call('POST', '/api/v1/console/organisations', {
    name: 'Almaty Outdoor LLP',
    kind: 'operator',
  });
  operatorId = operator.id;
  for (const [code, district, format] of [
    ['ALM-0001', 'almaly', 'billboard'],
    ['ALM-0002', 'bostandyk', 'digital'],
    ['ALM-0003', 'medeu', 'citylight'],
  ] as const) {
    structures.push(
      await call('POST', '/api/v1/console/structures', {
        organisation_id: operatorId,
        code,
        district,
        format,
      }),
    );
  }
  await call('POST', `/api/v1/console/organisations/${operatorId}/users`, {
    email: OPERATOR_EMAIL,
    password: PASSWORD,
    role: 'admin',
  });
  await call('POST', `/api/v1/console/organisations/${p.authorityId}/users`, {
    email: AUTHORITY_EMAIL,
    password: PASSWORD,
    role: 'admin',
  });
  browser = await launchChromium();
  operatorContext = await newContext(browser);
  authorityContext = await newContext(browser);
  operatorPage = await operatorContext.newPage();
  authorityPage = await authorityContext.newPage();
  for (const page of [operatorPage, authorityPage]) browserErrors.set(page, watchErrors(page));
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await p?.close();
});

const pageErrors = (page: Page): string[] => browserErrors.get(page) ?? [];

describe('console journeys in Chromium', () => {
  test('an operator signs in, creates a submission with structures, a saved set and media, and sends it', async () => {
    const page = operatorPage;
    await page.goto(url('/'));
    await expect.poll(() => page.getByRole('heading', { name: 'Sign in' }).isVisible()).toBe(true);
    await screenshot(page, 'login');
    await expectAccessible(page, 'login');

    await signIn(page, OPERATOR_EMAIL);
    await page.getByRole('heading', { name: 'Submissions' }).waitFor();
    expect(page.url()).toBe(url('/submissions'));
    await expectAccessible(page, 'submissions (empty)');

    await page.getByRole('link', { name: 'New submission' }).click();
    await page.getByRole('heading', { name: 'New submission' }).waitFor();
    await page.getByLabel('Advertiser', { exact: true }).fill('Tea House LLP');
    await page.getByLabel('First campaign day').fill('2026-11-20');
    await page.getByLabel('Last campaign day').fill('2026-12-31');
    // Categories are searchable in all three languages whatever the page's language.
    await page.getByLabel('Search the categories (English, Russian or Kazakh)').fill('лизинг автомоб');
    await page.getByRole('radio', { name: /Automotive Leasing/ }).check();
    await expect.poll(() => page.getByText('Chosen: Vehicles › Automotive Leasing').isVisible()).toBe(true);
    await page.getByRole('checkbox', { name: /ALM-0001/ }).check();
    await page.getByRole('checkbox', { name: /ALM-0002/ }).check();
    await page.getByLabel('Name of a new saved set').fill('City centre');
    await page.getByRole('button', { name: 'Save the chosen structures as a set' }).click();
    await page.getByRole('checkbox', { name: /City centre/ }).waitFor();
    await page.getByText('Declared plays per day').click();
    await page.getByLabel('ALM-0001', { exact: true }).fill('12');
    await screenshot(page, 'submission-new');
    await expectAccessible(page, 'new submission');
    await page.getByRole('button', { name: 'Create the draft' }).click();

    await page.getByRole('heading', { name: /^Submission SUB-2026-\d{6}$/ }).waitFor();
    submissionId = page.url().split('/').pop()!;
    submissionNumber = (await page.getByRole('heading', { level: 1 }).textContent())!.replace(
      'Submission ',
      '',
    );

    // The draft is edited before its media is uploaded: the advertiser's name changes, the rest stays.
    await page.getByRole('link', { name: 'Edit the draft' }).click();
    await page.getByRole('heading', { name: `Edit ${submissionNumber}` }).waitFor();
    const advertiser = page.getByLabel('Advertiser', { exact: true });
    expect(await advertiser.inputValue()).toBe('Tea House LLP');
    expect(await page.getByRole('checkbox', { name: /ALM-0002/ }).isChecked()).toBe(true);
    await advertiser.fill('Tea House Almaty LLP');
    await screenshot(page, 'submission-edit');
    await expectAccessible(page, 'edit draft');
    await page.getByRole('button', { name: 'Save the draft' }).click();
    await page.getByText('The draft was saved.').waitFor();
    const facts = (await page.locator('dl.facts').first().textContent()) ?? '';
    expect(facts).toContain('Tea House Almaty LLP');
    expect(facts).toContain('Automotive Leasing');
    expect(facts).toContain('ALM-0001: 12');
    const saved = await call('GET', `/api/v1/submissions/${submissionId}`);
    expect(saved).toMatchObject({
      advertiser_name: 'Tea House Almaty LLP',
      structure_ids: [structures[0]!.id, structures[1]!.id],
      declared_daily_plays: { [structures[0]!.id]: 12 },
    });
    await page
      .getByLabel('Choose or drop the media file')
      .setInputFiles({ name: 'tea-house.png', mimeType: 'image/png', buffer: MEDIA });
    await page.getByText('Uploaded', { exact: true }).waitFor();
    await expect.poll(() => page.getByText(MEDIA_SHA256).isVisible()).toBe(true);
    await expect.poll(() => page.getByText('320 × 160 pixels').isVisible()).toBe(true);
    await screenshot(page, 'submission-draft');
    await expectAccessible(page, 'draft with media');

    await page.getByRole('button', { name: 'Send for review' }).click();
    await page.getByText('The submission was sent for review.').waitFor();
    await expect.poll(() => page.locator('dl.facts .badge').first().textContent()).toBe('In review');

    await page.getByRole('link', { name: 'All submissions' }).click();
    const row = page.getByRole('row', { name: new RegExp(submissionNumber) });
    await row.waitFor();
    expect(await row.textContent()).toContain('In review');
    await screenshot(page, 'submissions');
    await expectAccessible(page, 'submissions');
    expect(pageErrors(page)).toEqual([]);
  }, 120_000);

  test('the authority reviews it from the queue, previews the media and approves a narrowed period', async () => {
    const page = authorityPage;
    await page.goto(url('/moderation'));
    await signIn(page, AUTHORITY_EMAIL);
    await page.getByRole('heading', { name: 'Moderation' }).waitFor();
    await page.getByRole('link', { name: submissionNumber }).waitFor();
    await screenshot(page, 'moderation-queue');
    await expectAccessible(page, 'moderation queue');

    await page.getByRole('link', { name: submissionNumber }).click();
    await page.getByRole('heading', { name: `Review of ${submissionNumber}` }).waitFor();
    const preview = page.getByRole('img', { name: `Media file of submission ${submissionNumber}` });
    await preview.waitFor();
    await expect
      .poll(() => preview.evaluate((img: unknown) => (img as { naturalWidth: number }).naturalWidth))
      .toBe(320);
    await page.getByLabel('Valid until').fill('2026-12-15');
    await screenshot(page, 'moderation-detail');
    await expectAccessible(page, 'moderation detail');

    await page.getByRole('button', { name: 'Approve and sign' }).click();
    const notice = page.getByText(/^Approval APR-2026-\d{6} was issued\./);
    await notice.waitFor();
    approvalNumber = /APR-2026-\d{6}/.exec((await notice.textContent())!)![0];
    await expect.poll(() => page.locator('dl.facts .badge').first().textContent()).toBe('Approved');
    await screenshot(page, 'moderation-approved');
    expect(pageErrors(page)).toEqual([]);
  }, 120_000);

  test('the creative check hashes a dropped file in the browser and shows its approval as valid', async () => {
    const page = operatorPage;
    await page.getByRole('link', { name: 'Creative check' }).click();
    await page.getByRole('heading', { name: 'Creative check' }).waitFor();
    const dataTransfer = await page.evaluateHandle(`(() => {
      const bytes = Uint8Array.from(atob(${JSON.stringify(MEDIA.toString('base64'))}), (c) => c.charCodeAt(0));
      const transfer = new DataTransfer();
      transfer.items.add(new File([bytes], 'tea-house.png', { type: 'image/png' }));
      return transfer;
    })()`);
    await page.dispatchEvent('[data-testid="check-dropzone"]', 'drop', { dataTransfer });
    await page.getByRole('heading', { name: 'tea-house.png' }).waitFor();
    const result = page.getByRole('row', { name: new RegExp(approvalNumber) });
    await result.waitFor();
    const text = (await result.textContent()) ?? '';
    expect(text).toContain('Valid');
    expect(text).toContain(submissionNumber);
    expect(text).toContain('ALM-0001, ALM-0002');
    expect(await page.getByText(MEDIA_SHA256).isVisible()).toBe(true);
    await screenshot(page, 'creative-check');
    await expectAccessible(page, 'creative check');
    expect(pageErrors(page)).toEqual([]);
  }, 120_000);

  test('an operator enrols a player by dropping what agent init printed, downloads its certificate, re-enrols it', async () => {
    const page = operatorPage;
    const init = await agentInit('ALM-0003');
    await page.getByRole('link', { name: 'Fleet' }).click();
    await page.getByRole('heading', { name: 'Enrol a device' }).waitFor();
    const output = await page.evaluateHandle(`(() => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([${JSON.stringify(init.output)}], 'agent-init.txt', { type: 'text/plain' }));
      return transfer;
    })()`);
    await page.dispatchEvent('[data-testid="enrol-dropzone"]', 'drop', { dataTransfer: output });
    // The structure agent init names is chosen; the key and the CSR are filled in.
    await expect.poll(() => page.locator('#enrol-structure option:checked').textContent()).toBe('ALM-0003');
    expect(await page.locator('#enrol-key').inputValue()).toMatch(/^MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE/);
    expect(await page.locator('#enrol-csr').inputValue()).toMatch(/^-----BEGIN CERTIFICATE REQUEST-----/);
    await page.getByRole('button', { name: 'Enrol the device', exact: true }).click();
    await page.getByText('The device at ALM-0003 is enrolled.').waitFor();
    const deviceId = (await page.getByTestId('enrolled-device-id').textContent())!;
    expect(deviceId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await page.getByText(/^valid until 20 Nov 2027/).isVisible()).toBe(true);
    await screenshot(page, 'fleet-enrolled');
    await expectAccessible(page, 'fleet after enrolment');

    // The certificate downloads as the file the agent reads, and is the one the platform issued for the key.
    const view = await call('GET', `/api/v1/console/devices/${deviceId}`);
    expect(view.certificates).toHaveLength(1);
    const downloading = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Download the certificate' }).click();
    const download = await downloading;
    expect(download.suggestedFilename()).toBe('device-cert.pem');
    expect(await readFile((await download.path())!, 'utf8')).toBe(view.certificates[0].certificate_pem);
    expect(view.keys[0].public_key).toBe(exportPublicKeySpki(createPublicKey(init.keyPem)));

    // The device is in the list; on its own page (issue 22, item 2), re-enrolled with a new key (no CSR), it keeps
    // its id.
    const row = page.getByRole('row', { name: /ALM-0003/ });
    await row.waitFor();
    await row.getByRole('link', { name: deviceId.slice(0, 8) }).click();
    await page.getByRole('heading', { name: 'Device at ALM-0003', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Re-enrol' }).click();
    await page.getByRole('heading', { name: 'Re-enrol the device at ALM-0003' }).waitFor();
    const next = generateEs256KeyPair();
    await page.locator('#re-enrol-key').fill(exportPublicKeySpki(next.publicKey));
    await page.getByRole('button', { name: 'Re-enrol the device', exact: true }).click();
    await page.getByText('None issued (no CSR was given)').waitFor();
    expect(await page.getByTestId('enrolled-device-id').first().textContent()).toBe(deviceId);
    const after = await call('GET', `/api/v1/console/devices/${deviceId}`);
    expect(after.re_enrolled_at).not.toBeNull();
    expect(after.keys.map((k: { public_key: string }) => k.public_key)).toContain(
      exportPublicKeySpki(next.publicKey),
    );
    // Its first certificate ended with the re-enrolment, and no new one was asked for.
    await expect.poll(() => page.getByTestId('device-facts').textContent()).toContain('No certificate');
    expect(
      await page
        .getByRole('table', { name: 'Certificate history' })
        .getByText('Replaced')
        .first()
        .isVisible(),
    ).toBe(true);
    await expectAccessible(page, 'fleet re-enrolment');
    // Back to the list, where the CMS installations are.
    await page.getByRole('link', { name: '← All devices' }).click();
    await page.getByRole('heading', { name: 'Fleet', level: 1 }).waitFor();
    expect(pageErrors(page)).toEqual([]);
  }, 120_000);

  test('an operator registers its CMS, maps a player to a structure and rotates the signing key', async () => {
    const page = operatorPage;
    await page.getByText('No CMS installations.').waitFor();
    await page.getByText('Register a CMS installation').click();
    await page.getByLabel('Name', { exact: true }).fill('Broadsign Almaty');
    await page.getByLabel('Kind (product)').fill('broadsign');
    const first = generateEs256KeyPair();
    await page.locator('#installation-key').fill(exportPublicKeySpki(first.publicKey));
    await page.getByRole('button', { name: 'Register', exact: true }).click();
    const card = page.locator('article.card', { hasText: 'Broadsign Almaty' });
    await card.waitFor();
    await card.getByText('No players are mapped.').waitFor();
    await card.getByLabel('Player (external id)').fill('screen-17');
    await card.getByLabel('Structure').selectOption({ label: 'ALM-0002' });
    await card.getByRole('button', { name: 'Map the player' }).click();
    await card.getByRole('row', { name: /screen-17.*ALM-0002/ }).waitFor();
    const second = generateEs256KeyPair();
    await card.getByLabel('New public key').fill(exportPublicKeySpki(second.publicKey));
    await card.getByRole('button', { name: 'Rotate the key' }).click();
    await card.getByText('The new key is registered.').waitFor();
    // The first key stays accepted for 24 hours after the rotation; the new one is current.
    await card.getByText(/accepted until 21 Nov 2026, 11:00/).waitFor();
    expect(await card.getByText('Current', { exact: true }).count()).toBe(1);
    const listed = await call('GET', '/api/v1/console/cms-installations');
    expect(listed.items).toEqual([
      expect.objectContaining({ name: 'Broadsign Almaty', organisation_id: operatorId }),
    ]);
    await screenshot(page, 'fleet-cms');
    await expectAccessible(page, 'fleet with a CMS installation');
    expect(pageErrors(page)).toEqual([]);
  }, 120_000);

  test("a simulated player's plays appear in proof of play, its device in the fleet", async () => {
    const { publicKey, privateKey } = generateEs256KeyPair();
    const csr = await createCsr({ subject: 'CN=player ALM-0001', keyPair: { publicKey, privateKey } });
    const device = await call('POST', '/api/v1/console/devices', {
      structure_id: structures[0]!.id,
      public_key: exportPublicKeySpki(publicKey),
      csr,
    });
    const now = p.clock.now();
    const play = (seq: number, fields: Record<string, unknown> = {}) => {
      const end = new Date(now.getTime() - 60_000 * (20 - seq));
      return {
        kind: 'play',
        seq,
        play_id: `p${seq}`,
        approval_number: approvalNumber,
        media_sha256: MEDIA_SHA256,
        start: new Date(end.getTime() - 15_000).toISOString(),
        end: end.toISOString(),
        duration_ms: 15_000,
        ...fields,
      };
    };
    const events = [1, 2, 3, 4, 5, 6].map((seq) => play(seq));
    events.push(play(7, { approval_number: 'APR-2026-999999' }));
    events.push(play(8, { duration_ms: 500 }));
    const body = Buffer.from(
      JSON.stringify({
        schema: 'service.pop/1',
        device_id: device.device_id,
        ts: now.toISOString(),
        batch_seq: 1,
        prev_sha256: '',
        events,
      }),
    );
    const sent = await p.servers.agents.inject({
      method: 'POST',
      url: '/s/v1/telemetry',
      headers: { 'content-type': 'application/json', 'x-service-signature': es256Sign(privateKey, body) },
      payload: body,
    });
    expect(sent.statusCode, sent.body).toBe(200);
    expect(sent.json(), sent.body).toMatchObject({ accepted: 7, refused: 1, flagged: 1 });

    const page = authorityPage;
    await page.getByRole('link', { name: 'Proof of play' }).click();
    await page.getByLabel('From').fill('2026-11-20');
    await page.getByLabel('To', { exact: true }).fill('2026-11-20');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await expect.poll(() => page.getByTestId('plays-total').textContent()).toBe('7');
    await page.getByRole('img', { name: /Plays per day by structure/ }).waitFor();
    await page.getByRole('row', { name: /Unknown approval/ }).waitFor();
    await page.getByRole('row', { name: /Shorter than a second/ }).waitFor();
    await screenshot(page, 'plays');
    await expectAccessible(page, 'proof of play');

    await page.getByRole('link', { name: 'Fleet' }).click();
    const deviceRow = page.getByRole('row', { name: /ALM-0001/ });
    await deviceRow.waitFor();
    // Queue lag: the batch arrived 13 minutes after the end of its newest counted play (seq 7; seq 8 was refused).
    expect(await deviceRow.textContent()).toContain('13 min');
    await screenshot(page, 'fleet');
    await expectAccessible(page, 'fleet');
    // The device's actions are on its own page (issue 22, item 2).
    await deviceRow.getByRole('link', { name: device.device_id.slice(0, 8) }).click();
    await page.getByRole('button', { name: 'Allow forced renewal' }).click();
    await page.getByText('Forced renewal is allowed for 24 hours.').waitFor();
    const facts = page.getByTestId('device-facts');
    await expect.poll(() => facts.textContent()).toContain('allowed until');
    // Its batch and the answer it got: 8 read, 7 taken, 1 refused as shorter than a second.
    const batch = page.getByRole('table', { name: 'Recent batches and their answers' }).locator('tbody tr');
    expect(await batch.textContent()).toContain('8 read: 7 taken, 1 refused');
    expect(await batch.textContent()).toContain('Shorter than a second');
    await screenshot(page, 'fleet-device');
    await expectAccessible(page, 'fleet device');
    await page.getByRole('link', { name: 'Fleet' }).click();
    await deviceRow.waitFor();

    // Trouble, as the platform records it (migrations 069, 070): the device's next batch answered 500 twice, and a
    // handshake with an expired certificate of it refused. The fleet page shows the device stuck and why.
    const at = (minutes: number) => new Date(p.clock.now().getTime() + minutes * 60_000);
    await p.database.db.query(
      `INSERT INTO device_server_errors (device_id, since, last_at, answers, batch_seq, status, code, route)
       VALUES ($1, $2, $3, 2, 2, 500, 'internal_error', 'POST /s/v1/telemetry')`,
      [device.device_id, at(1), at(2)],
    );
    const minute = new Date(Math.floor(at(3).getTime() / 60_000) * 60_000);
    await p.database.db.query(
      `INSERT INTO device_handshake_refusal_counts (minute, device_id, reason, refusals) VALUES ($1, $2, 'certificate_expired', 1)`,
      [minute, device.device_id],
    );
    await p.database.db.query(
      `INSERT INTO device_handshake_refusals_recent (key_sha256, at, reason, subject, serial, address, device_id, refusals)
       VALUES ($1, $2, 'certificate_expired', $3, 'abc123', '10.20.30.40', $4, 1)`,
      ['f'.repeat(64), at(3), `CN=${device.device_id}, OU=Devices, O=OOH Platform`, device.device_id],
    );
    p.clock.set(at(4));
    await page.reload();
    await page.getByText('1 device(s) are stuck').waitFor();
    await expect.poll(() => deviceRow.textContent()).toContain('Stuck');
    expect(await deviceRow.textContent()).toContain('2 answers “internal_error” to batch 2');
    expect(await deviceRow.textContent()).toContain('Refused connections in 24 h: 1');
    await page.getByText('Refused connections in the last 24 hours: 1').click();
    await page.getByRole('row', { name: /Certificate expired.*certificate_expired/ }).waitFor();
    await screenshot(page, 'fleet-stuck');
    await expectAccessible(page, 'fleet (stuck)');
    expect(pageErrors(page)).toEqual([]);
  }, 120_000);

  test('the authority sets the declared-versus-actual band and subscribes a webhook whose secret is shown once', async () => {
    const page = authorityPage;
    await page.getByRole('link', { name: 'Proof of play' }).click();
    await page.getByRole('heading', { name: 'City events: band and delivery' }).waitFor();
    await expect.poll(() => page.getByLabel('Band (percent)').inputValue()).toBe('30');
    await page.getByLabel('Band (percent)').fill('25');
    await page.getByRole('button', { name: 'Save the band' }).click();
    await page.getByText('The band is saved; it applies to the days compared from now on.').waitFor();
    expect(await call('GET', '/api/v1/console/events/settings')).toEqual({ declared_band_pct: 25 });

    await page.getByText('No subscriptions.').waitFor();
    await page.getByLabel('Address (URL)').fill('https://events.city.kz/ooh');
    await page.getByRole('button', { name: 'Add the subscription' }).click();
    const once = page.getByText(/^The subscription of https:\/\/events\.city\.kz\/ooh was added\./);
    await once.waitFor();
    const secret = (await page.locator('.notice-warning code.hash-full').textContent()) ?? '';
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const row = page.getByRole('row', { name: /events\.city\.kz/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('0 delivered, 0 pending');
    const listed = await call('GET', '/api/v1/console/webhooks');
    expect(listed.items).toEqual([expect.objectContaining({ url: 'https://events.city.kz/ooh' })]);
    // The secret is nowhere in what the platform lists.
    expect(JSON.stringify(listed)).not.toContain(secret);
    await screenshot(page, 'plays-webhooks');
    await expectAccessible(page, 'webhooks');

    await row.getByRole('button', { name: 'Show deliveries' }).click();
    await page.getByText('Nothing delivered yet.').waitFor();
    // Shown once: after a reload the secret is gone for good.
    await page.reload();
    await page.getByRole('row', { name: /events\.city\.kz/ }).waitFor();
    expect(await page.getByText(secret).count()).toBe(0);
    page.once('dialog', (dialog) => void dialog.accept());
    await page
      .getByRole('row', { name: /events\.city\.kz/ })
      .getByRole('button', { name: 'Remove' })
      .click();
    await page.getByText('The subscription was removed.').waitFor();
    await page.getByText('No subscriptions.').waitFor();
    expect((await call('GET', '/api/v1/console/webhooks')).items).toEqual([]);
    expect(pageErrors(page)).toEqual([]);
  }, 120_000);

  test('a daily seal is verified in the browser: signature chain, content, chain of seals and ledger proof', async () => {
    p.clock.set(new Date('2026-11-21T05:00:00Z'));
    await call('POST', '/api/v1/console/seals/2026-11-20');
    p.clock.set(new Date('2026-11-22T05:00:00Z'));
    await digestLedgerDay(p.ctx, '2026-11-21');

    const page = authorityPage;
    // Two days without activity: the session has expired and the console says so.
    await page.getByRole('link', { name: 'Transparency' }).click();
    await page
      .getByText('Your session has expired after a period of inactivity. Please sign in again.')
      .waitFor();
    await screenshot(page, 'session-expired');
    await signIn(page, AUTHORITY_EMAIL);
    await page.getByRole('heading', { name: 'Transparency' }).waitFor();
    await page.getByLabel('Show the 14 days up to').fill('2026-11-21');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    const row = page.locator('tr[data-day="2026-11-20"]');
    await row.getByRole('button', { name: 'Verify' }).click();
    await row.getByText('Every check passed.', { exact: true }).waitFor();
    const checks = (await row.locator('ul.checks').textContent()) ?? '';
    for (const name of ['Signature', 'Signed content', 'Chain of seals', 'Public ledger'])
      expect(checks).toContain(`${name}: passed`);
    // Signed at 10:00 Almaty time on the 21st.
    expect(await row.textContent()).toContain('21 Nov 2026, 10:00');
    // Before publication the rules in force are the ones the next release would be built with.
    await page
      .getByText('Open data is not published: these are the rules the next release would be built with.')
      .waitFor();
    const rules = page.getByTestId('disclosure-rules');
    expect(await rules.textContent()).toBe(
      'Minimum operators per cell3Minimum advertisers per cell3Largest share of one party70 %Release lag (months)1',
    );
    // The switch turns once the platform has answered: click, then wait for the state (check() would not wait).
    await page.getByRole('switch', { name: 'Publish open data' }).click();
    await expect.poll(() => page.locator('.switch-row').textContent()).toMatch(/^Publish open dataPublished/);
    expect(await page.getByRole('switch', { name: 'Publish open data' }).isChecked()).toBe(true);
    // Published: read from the public dictionary, with its text on disclosure.
    await page.getByText('As published in the open data dictionary, version 3:').waitFor();
    expect(await rules.textContent()).toContain('Largest share of one party70 %');
    await page
      .getByText(/^A published value needs plays of at least min_operators \(3\) operators/)
      .waitFor();
    await screenshot(page, 'transparency');
    await expectAccessible(page, 'transparency');
    expect(pageErrors(page)).toEqual([]);
  }, 120_000);

  test("the authority issues an operator's API key with an expiry, sees it once, finds it listed and revokes it", async () => {
    const page = authorityPage;
    await page.goto(url('/organisations'));
    await page
      .getByRole('row', { name: /Almaty Outdoor LLP/ })
      .getByRole('button', { name: 'Users' })
      .click();
    await page.getByRole('heading', { name: 'API keys of Almaty Outdoor LLP' }).waitFor();
    await page.locator('#key-name').fill('Xibo CMS');
    await page.getByLabel('Expires (optional, your local time)').fill('2027-01-31T18:00');
    await page.getByRole('checkbox', { name: 'write:plays' }).check();
    await page.getByRole('button', { name: 'Issue the key' }).click();
    const shown = page.locator('.notice-warning code.hash-full');
    await shown.waitFor();
    const key = (await shown.textContent()) ?? '';
    expect(key).toMatch(/^ooh_[A-Za-z0-9_-]{43}$/);
    const row = page.getByRole('row', { name: /Xibo CMS/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('Active');
    const listed = await call('GET', `/api/v1/console/api-keys?organisation_id=${operatorId}`);
    const issued = listed.items.find((k: { name: string }) => k.name === 'Xibo CMS');
    expect(issued).toMatchObject({ scopes: ['write:plays'], state: 'active', revoked_at: null });
    expect(issued.expires_at).toMatch(/^2027-01-31T/);
    // The key itself is nowhere in what the platform lists.
    expect(JSON.stringify(listed)).not.toContain(key);
    await screenshot(page, 'organisations-api-keys');
    await expectAccessible(page, 'API keys');

    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page
      .getByRole('row', { name: /Xibo CMS/ })
      .filter({ hasText: 'Revoked' })
      .waitFor();
    const refused = await apiCall(p.servers.api, key, 'POST', '/api/v1/pop/batches', {});
    expect(refused.json().code).toBe('invalid_api_key');
    expect(pageErrors(page)).toEqual([]);
  });

  test('switched to Russian and Kazakh, no page shows an English text of the console', async () => {
    const authorityPages: [string, (page: Page) => Promise<void>][] = [
      ['moderation', async (page) => void (await page.goto(url('/moderation')))],
      ['moderation-detail', async (page) => void (await page.goto(url(`/moderation/${submissionId}`)))],
      ['fleet', async (page) => void (await page.goto(url('/fleet')))],
      [
        'plays',
        async (page) => {
          await page.goto(url('/plays'));
          await page.locator('#plays-from').fill('2026-11-20');
          await page.locator('#plays-to').fill('2026-11-20');
          await page.locator('form.filters button[type="submit"]').click();
          await page.getByTestId('plays-total').filter({ hasText: '7' }).waitFor();
        },
      ],
      [
        'transparency',
        async (page) => {
          await page.goto(url('/transparency'));
          await page.locator('#seal-until').fill('2026-11-21');
          await page.locator('form.inline-form button[type="submit"]').click();
          await page.locator('tr[data-day="2026-11-20"] button').click();
          await page.locator('tr[data-day="2026-11-20"] .verdict-ok').waitFor();
        },
      ],
      [
        'organisations',
        async (page) => {
          await page.goto(url('/organisations'));
          // An organisation opened: its users and its API keys.
          await page
            .getByRole('row', { name: /Almaty Outdoor LLP/ })
            .getByRole('button')
            .click();
          await page.locator('form h3').nth(1).waitFor();
        },
      ],
    ];
    const operatorPages: [string, (page: Page) => Promise<void>][] = [
      ['submissions', async (page) => void (await page.goto(url('/submissions')))],
      [
        'submission-new',
        async (page) => {
          await page.goto(url('/submissions/new'));
          await page.locator('#category-search').fill('көлік');
          await page.locator('input[name="category"]').first().waitFor();
        },
      ],
      ['submission-detail', async (page) => void (await page.goto(url(`/submissions/${submissionId}`)))],
      ['submission-edit', async (page) => void (await page.goto(url(`/submissions/${submissionId}/edit`)))],
      [
        'fleet-operator',
        async (page) => {
          await page.goto(url('/fleet'));
          await page.getByRole('row', { name: /ALM-0003/ }).waitFor();
        },
      ],
      [
        'creative-check',
        async (page) => {
          await page.goto(url('/check'));
          await page.locator('#check-hashes').fill(MEDIA_SHA256);
          await page.locator('form.inline-form button[type="submit"]').click();
          await page.locator('article.result table').waitFor();
        },
      ],
    ];
    // The operator's session ran out while the clock moved on to seal the day: its sign-in page, in both languages.
    await operatorPage.goto(url('/submissions'));
    for (const language of ['ru', 'kk'] as const) {
      await operatorPage.locator('#language').selectOption(language);
      await operatorPage.locator('main h1').waitFor();
      await expectNoEnglish(operatorPage, `login (${language})`);
      await screenshot(operatorPage, `login-${language}`);
    }
    await operatorPage.locator('#language').selectOption('en');
    await signIn(operatorPage, OPERATOR_EMAIL);
    await operatorPage.getByRole('heading', { name: 'Submissions' }).waitFor();

    for (const language of ['ru', 'kk'] as const) {
      for (const [page, pages] of [
        [authorityPage, authorityPages],
        [operatorPage, operatorPages],
      ] as const) {
        await page.locator('#language').selectOption(language);
        for (const [name, open] of pages) {
          await open(page);
          await page.locator('main h1').waitFor();
          await page.waitForLoadState('networkidle');
          expect(await page.evaluate('document.documentElement.lang')).toBe(language);
          await expectNoEnglish(page, `${name} (${language})`);
          await screenshot(page, `${name}-${language}`);
          if (language === 'kk') await expectAccessible(page, `${name} (${language})`);
        }
      }
    }
    expect(pageErrors(operatorPage)).toEqual([]);
    expect(pageErrors(authorityPage)).toEqual([]);
  }, 240_000);
});
