import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { digestLedgerDay } from '../../src/ledger/digest.js';
import { ledgerVkey, loadLedgerKey } from '../../src/ledger/key.js';
import { formatVkey, SIG_COSIGNATURE_V1, SIG_ED25519 } from '../../src/ledger/note.js';
import { runWitnessJob } from '../../src/ledger/witnesses.js';
import { sealDay } from '../../src/seals/index.js';
import {
  type ConsolePlatform,
  expectAccessible,
  launchChromium,
  newContext,
  screenshot,
  startConsolePlatform,
  watchErrors,
} from '../console/browser.js';
import { agentBody, insertBatch } from '../seals/helpers.js';
import { apiCall } from '../support/platform.js';
import { startWitness, type WitnessProcess } from '../witness/process.js';

/*
 * Issue 23 in the browser: the Transparency page lists the ledger's witnesses and how far the ledger is anchored; a
 * reader pins witness keys and each seal is then checked for a quorum of their cosignatures (@ooh/verify, src/
 * anchoring.ts), in Chromium, against a real platform and the test witness process.
 */

const EMAIL = 'auditor@authority.test';
const PASSWORD = 'transparency witness password';
const ORIGIN = 'verify.test.kz/ledger';
const W1 = 'witness.test/w1';

let p: ConsolePlatform;
let witness: WitnessProcess;
let browser: Browser;
let page: Page;
let errors: string[];

beforeAll(async () => {
  p = await startConsolePlatform(new Date('2026-11-19T05:00:00Z'));
  p.ctx.config.settings['LEDGER_ORIGIN'] = ORIGIN;
  const logVkey = ledgerVkey(ORIGIN, await loadLedgerKey(p.ctx));
  witness = await startWitness({
    name: W1,
    keyFile: path.join(p.ctx.config.dataDir, 'w1.key'),
    stateFile: path.join(p.ctx.config.dataDir, 'w1.json'),
    logVkeys: [logVkey],
    now: p.clock.now(),
  });
  p.ctx.config.settings['LEDGER_WITNESSES'] = `${witness.vkey} ${witness.url}`;
  const device = `device:${'2'.repeat(8)}-2222-4222-8222-${'2'.repeat(12)}`;
  for (const [seq, at] of [
    [1, '2026-11-19T05:30:00.000000Z'],
    [2, '2026-11-20T05:30:00.000000Z'],
  ] as const) {
    await insertBatch(p.database.db, {
      owner: device,
      batchSeq: seq,
      body: agentBody(device.slice(7), seq, 2, seq * 10),
      receivedAt: at,
    });
  }
  p.clock.set(new Date('2026-11-21T05:00:00Z'));
  await sealDay(p.ctx, '2026-11-19');
  await sealDay(p.ctx, '2026-11-20');
  p.clock.set(new Date('2026-11-22T05:00:00Z'));
  await digestLedgerDay(p.ctx, '2026-11-21');
  const run = await runWitnessJob(p.ctx);
  // The ledger starts on the first day with a leaf (the seals made on the 21st): one block, height 1.
  expect(run).toMatchObject({ anchored: [1] });
  const user = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${p.authorityId}/users`,
    {
      email: EMAIL,
      password: PASSWORD,
      role: 'admin',
    },
  );
  expect(user.statusCode, user.body).toBe(201);
  browser = await launchChromium();
  page = await (await newContext(browser)).newPage();
  errors = watchErrors(page);
  await page.goto(`${p.apiUrl}/console/transparency`);
  await page.getByLabel('Email address').fill(EMAIL);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Transparency' }).waitFor();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await witness?.stop();
  await p?.close();
});

describe('the Transparency page with witnesses', () => {
  test('lists the witness and the anchored height; with its key pinned a seal passes the witness check', async () => {
    const panel = page.getByTestId('witnesses');
    await panel.getByText(W1).waitFor();
    expect(await panel.getByRole('table').textContent()).toContain('up to date');
    expect(await page.getByTestId('anchored-size').textContent()).toBe('1');
    expect(await panel.textContent()).toContain(ORIGIN);

    await page.getByLabel('Show the 14 days up to').fill('2026-11-21');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    const row = page.locator('tr[data-day="2026-11-20"]');
    await row.getByText('Anchored', { exact: true }).waitFor();

    await panel.getByRole('button', { name: 'Use the listed keys' }).click();
    await page.getByTestId('pinned').getByText('1 witness key(s) pinned').waitFor();
    await row.getByRole('button', { name: 'Verify' }).click();
    await row
      .getByTestId('anchor-check')
      .getByText(`Witnesses: passed — checkpoint 1 is cosigned by ${W1}.`)
      .waitFor();
    await row.getByText('Every check passed.', { exact: true }).waitFor();
    await screenshot(page, 'transparency-witnesses');
    await expectAccessible(page, 'transparency-witnesses');
  }, 120_000);

  test('a key the platform never got a cosignature from refuses the seal; a refused key is named with why', async () => {
    const panel = page.getByTestId('witnesses');
    const keys = panel.getByLabel('Witness keys you trust, one a line');
    await keys.fill('not a key');
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await panel
      .getByText(
        'Not a witness cosignature key: not a key — the key is not a verifier key (<name>+<key ID>+<base64 key>).',
      )
      .waitFor();

    // Why a key is refused is said (readVkey's code): a key ID that is not the one its name and key give ...
    const w3 = formatVkey('witness.test/w3', SIG_COSIGNATURE_V1, Buffer.alloc(32, 8));
    const [w3Name, w3Id, w3Key] = w3.split('+') as [string, string, string];
    const otherId = `${w3Name}+${w3Id === '00000000' ? '00000001' : '00000000'}+${w3Key}`;
    await keys.fill(otherId);
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await panel
      .getByText(
        `Not a witness cosignature key: ${otherId} — the key ID does not match the key’s name and key: one of them was changed.`,
        { exact: true },
      )
      .waitFor();
    // ... a name with a space, on the second line (the line refused is the one named) ...
    await keys.fill(`${w3}\nwitness test+${w3Id}+${w3Key}`);
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await panel
      .getByText(
        `Not a witness cosignature key: witness test+${w3Id}+${w3Key} — the key’s name is empty or holds a space or “+”.`,
        { exact: true },
      )
      .waitFor();
    // ... and a key that is not base64, as the ledger's key.
    const ledgerKey = panel.getByLabel('Ledger key you trust (optional)');
    await ledgerKey.fill(`${w3Name}+${w3Id}+not*base64`);
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await panel
      .getByText(
        `Not a ledger checkpoint key: ${w3Name}+${w3Id}+not*base64 — the key after the second “+” is not standard base64.`,
        { exact: true },
      )
      .waitFor();
    await ledgerKey.fill('');
    // A well-formed key of the other type (a ledger key pasted as a witness's) keeps the plain message.
    const ed25519 = formatVkey('witness.test/w4', SIG_ED25519, Buffer.alloc(32, 7));
    await keys.fill(ed25519);
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await panel.getByText(`Not a witness cosignature key: ${ed25519}`, { exact: true }).waitFor();

    await keys.fill(w3);
    await panel.getByLabel('Cosignatures required').fill('2');
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await panel.getByText('Cosignatures required: a whole number from 1 to the 1 key(s) pinned.').waitFor();
    await panel.getByLabel('Cosignatures required').fill('1');

    const stranger = formatVkey('witness.test/w2', SIG_COSIGNATURE_V1, Buffer.alloc(32, 9));
    await keys.fill(stranger);
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    const row = page.locator('tr[data-day="2026-11-20"]');
    await row.getByRole('button', { name: 'Verify' }).click();
    await row
      .getByTestId('anchor-check')
      .getByText(/^Witnesses: failed — no checkpoint at or above this block/)
      .waitFor();
    await row.getByText('Not every check passed.').waitFor();
    expect(errors).toEqual([]);
  }, 120_000);
});
