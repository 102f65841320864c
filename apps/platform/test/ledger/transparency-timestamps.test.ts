import { generateKeyPairSync } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createTimeStampRequest, parseTimeStampResponse, timeStampReply } from '@ooh/crypto';
import { addDays, almatyDate, almatyDayStart } from '@ooh/protocol';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { OpensslTsa, serveTsa } from '../../../../packages/crypto/test/helpers/tsa.js';
import { ru } from '../../console/src/i18n/ru.js';
import { makeCheckpoints } from '../../src/ledger/checkpoint.js';
import { digestLedgerDay } from '../../src/ledger/digest.js';
import { formatVkey, rawEd25519PublicKey, SIG_ED25519 } from '../../src/ledger/note.js';
import { runTimestampJob, tsaSettings } from '../../src/ledger/timestamp.js';
import { sealDay } from '../../src/seals/index.js';
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
import { agentBody, insertBatch } from '../seals/helpers.js';
import { apiCall } from '../support/platform.js';

/*
 * Issue 23 in the browser: the reader pins a TSA certificate on the Transparency page (pasted or from a file), and
 * each seal's ledger block is checked for an RFC 3161 timestamp of its digest (@ooh/verify, src/timestamp.ts, in
 * Chromium) from `openssl ts -reply` acting as the TSA. openssl stamps with the machine's clock, so the ledger days
 * are the days before today: the block of A+1 (holding the seal of A) is stamped, the block of A+2 (holding the seal
 * of A+1) is not.
 */

const EMAIL = 'auditor@authority.test';
const PASSWORD = 'transparency timestamp password';
const TODAY = almatyDate(new Date());
/** Batches are received on A and A+1; the seal of A is a leaf of block A+1, the seal of A+1 of block A+2. */
const A = addDays(TODAY, -3);
const B = addDays(A, 1);
const C = addDays(A, 2);
const at = (day: string, hour: number) => new Date(almatyDayStart(day).getTime() + hour * 3_600_000);

let p: ConsolePlatform;
let tsa: OpensslTsa;
let other: OpensslTsa;
let server: Awaited<ReturnType<typeof serveTsa>>;
let browser: Browser;
let page: Page;
let errors: string[];

beforeAll(async () => {
  tsa = new OpensslTsa({ name: 'City TSA' });
  other = new OpensslTsa({ name: 'Other TSA' });
  server = await serveTsa(tsa);
  p = await startConsolePlatform(at(A, 10));
  const caFile = path.join(p.ctx.config.dataDir, 'tsa-ca.pem');
  await writeFile(caFile, tsa.caPem);
  p.ctx.config.settings['LEDGER_TSA_URL'] = server.url;
  p.ctx.config.settings['LEDGER_TSA_CERT'] = caFile;
  const device = `device:${'3'.repeat(8)}-3333-4333-8333-${'3'.repeat(12)}`;
  for (const [seq, day] of [
    [1, A],
    [2, B],
  ] as const) {
    await insertBatch(p.database.db, {
      owner: device,
      batchSeq: seq,
      body: agentBody(device.slice(7), seq, 2, seq * 10),
      receivedAt: at(day, 11).toISOString().replace('Z', '123Z'),
    });
  }
  p.clock.set(at(B, 10));
  await sealDay(p.ctx, A);
  p.clock.set(at(C, 10));
  await digestLedgerDay(p.ctx, B);
  await sealDay(p.ctx, B);
  // The TSA stamps block B (the only block so far) with the real clock; block C is digested after, unstamped.
  p.clock.set(new Date());
  const stamped = await runTimestampJob(p.ctx, tsaSettings(p.ctx.config)!);
  expect(stamped).toMatchObject({ stamped: [{ day: B }], failed: [] });
  await digestLedgerDay(p.ctx, C);
  // Checkpoints of both blocks, signed by the ledger key (no witness is configured): for the ledger key pin.
  expect(await makeCheckpoints(p.ctx)).toEqual([1, 2]);
  const user = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${p.authorityId}/users`,
    { email: EMAIL, password: PASSWORD, role: 'admin' },
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
  await server?.close();
  await p?.close();
  tsa?.dispose();
  other?.dispose();
});

const rowOf = (day: string) => page.locator(`tr[data-day="${day}"]`);
const stampOf = (day: string) => rowOf(day).getByTestId('timestamp-check');

async function pinPem(pem: string): Promise<void> {
  const panel = page.getByTestId('tsa');
  await panel.getByLabel('TSA certificate you trust (PEM)').fill(pem);
  await panel.getByRole('button', { name: 'Check timestamps with this certificate' }).click();
}

describe('the Transparency page with a pinned TSA certificate', () => {
  test('a stamped block verifies against the pinned CA, with the time it states; an unstamped block says so', async () => {
    const panel = page.getByTestId('tsa');
    await panel.getByText('No TSA certificate pinned: timestamps are not checked.').waitFor();
    // The newest seal (of B, in block C) is verified as the page opens: no timestamp line while nothing is pinned.
    await rowOf(B).getByText('Every check passed.', { exact: true }).waitFor();
    expect(await stampOf(B).count()).toBe(0);

    await pinPem(tsa.caPem);
    await page.getByTestId('tsa-pinned').getByText('Pinned: City TSA Root CA').waitFor();
    // Pinning checks the rows already verified again: block C has no timestamp, so not every check could be made.
    await stampOf(B)
      .getByText('Timestamp: not checked — this ledger block has no RFC 3161 timestamp (yet).')
      .waitFor();
    await rowOf(B).getByText('No check failed, but not every check could be made.').waitFor();

    await rowOf(A).getByRole('button', { name: 'Verify' }).click();
    const line = stampOf(A).getByText(
      /^Timestamp: passed — the block’s digest was stamped at .+ by City TSA; verified against the pinned certificate\.$/,
    );
    await line.waitFor();
    // The time it states is the token's genTime (the block document states the same), in Almaty time.
    const block = (await (await fetch(`${p.verifyUrl}/v1/ledger/blocks/${B}`)).json()) as {
      timestamp: { gen_time: string };
    };
    const shown = await page.evaluate(
      `new Intl.DateTimeFormat('en-GB', { timeZone: 'Asia/Almaty', year: 'numeric', month: 'short', day: 'numeric',
        hour: '2-digit', minute: '2-digit' }).format(new Date(${JSON.stringify(block.timestamp.gen_time)}))`,
    );
    expect(await line.textContent()).toContain(`stamped at ${shown as string} by City TSA`);
    expect(await stampOf(A).locator('li').getAttribute('class')).toBe('check check-ok');
    await rowOf(A).getByText('Every check passed.', { exact: true }).waitFor();
    await screenshot(page, 'transparency-timestamps');
    await expectAccessible(page, 'transparency-timestamps');
  }, 120_000);

  test('another TSA pinned from a file: the token is red with the reason, and so is the verdict', async () => {
    await page
      .getByTestId('tsa')
      .getByLabel('Or choose a certificate file')
      .setInputFiles({
        name: 'other-tsa.pem',
        mimeType: 'application/x-pem-file',
        buffer: Buffer.from(other.caPem),
      });
    await page.getByTestId('tsa-pinned').getByText('Pinned: Other TSA Root CA').waitFor();
    // The pasted text is replaced by the file's.
    expect(await page.getByLabel('TSA certificate you trust (PEM)').inputValue()).toBe(other.caPem);
    await stampOf(A)
      .getByText('Timestamp: failed — the token is signed by another TSA than the pinned one.')
      .waitFor();
    expect(await stampOf(A).locator('li').getAttribute('class')).toBe('check check-failed');
    // Red: the line's colour is the console's --bad colour (the type-check has no DOM library: strings).
    const colours = (await page.evaluate(`(() => {
      const li = document.querySelector('tr[data-day="${A}"] [data-testid="timestamp-check"] li');
      const bad = getComputedStyle(document.documentElement).getPropertyValue('--bad').trim();
      const probe = document.createElement('span');
      probe.style.color = bad;
      document.body.append(probe);
      const expected = getComputedStyle(probe).color;
      probe.remove();
      return { bad, line: getComputedStyle(li).color, expected };
    })()`)) as { bad: string; line: string; expected: string };
    expect(colours.bad).not.toBe('');
    expect(colours.line).toBe(colours.expected);
    await rowOf(A).getByText('Not every check passed.').waitFor();

    // A text that is not a certificate is named, and the pin stays as it was.
    await pinPem('not a certificate');
    await page.getByText('Not a PEM certificate (-----BEGIN CERTIFICATE-----).').waitFor();
    await page.getByTestId('tsa-pinned').getByText('Pinned: Other TSA Root CA').waitFor();
    // Unpinned: no timestamp line any more.
    await page.getByTestId('tsa').getByRole('button', { name: 'Unpin' }).click();
    await page.getByTestId('tsa-pinned').getByText('No TSA certificate pinned').waitFor();
    await rowOf(A).getByText('Every check passed.', { exact: true }).waitFor();
    expect(await stampOf(A).count()).toBe(0);
  }, 120_000);

  test('a dishonest verify host: a changed token, or a token of another digest, is refused in the browser', async () => {
    const good = await fetch(`${p.verifyUrl}/v1/ledger/blocks/${B}/timestamp.tsr`);
    expect(good.status).toBe(200);
    const reply = Buffer.from(await good.arrayBuffer());
    const parsed = parseTimeStampResponse(reply);
    if (!parsed.ok) throw new Error(parsed.reason);
    // A digit of the stamped time changed: the messageDigest attribute no longer matches.
    const changed = Buffer.from(parsed.token);
    const where = changed.toString('latin1').search(/\d{14}(\.\d+)?Z/);
    changed[where + 13] = changed[where + 13] === 0x30 ? 0x31 : 0x30;
    // The pinned TSA's genuine token, for another digest (a rewritten block).
    const forged = await tsa.reply(createTimeStampRequest({ digest: Buffer.alloc(32, 7) }).der);
    await pinPem(tsa.caPem);
    for (const [body, text] of [
      [Buffer.from(timeStampReply(changed)), 'the token was changed after the TSA signed it.'],
      [forged, 'the token stamps another digest than this block’s.'],
    ] as const) {
      await page.route(`**/v1/ledger/blocks/${B}/timestamp.tsr`, (route) =>
        route.fulfill({ status: 200, contentType: 'application/timestamp-reply', body }),
      );
      await rowOf(A).getByRole('button', { name: 'Verify' }).click();
      await stampOf(A).getByText(`Timestamp: failed — ${text}`).waitFor();
      await rowOf(A).getByText('Not every check passed.').waitFor();
      await page.unroute(`**/v1/ledger/blocks/${B}/timestamp.tsr`);
    }
    // Honest again.
    await rowOf(A).getByRole('button', { name: 'Verify' }).click();
    await stampOf(A)
      .getByText(/^Timestamp: passed/)
      .waitFor();
  }, 120_000);

  test('in Russian and Kazakh: the TSA panel and the timestamp lines, with no English left', async () => {
    await rowOf(A).getByRole('button', { name: 'Verify' }).click();
    await stampOf(A)
      .getByText(/^Timestamp: passed/)
      .waitFor();
    await stampOf(B)
      .getByText(/^Timestamp: not checked/)
      .waitFor();
    const expected = {
      ru: ['Метка времени: пройдено — дайджест блока заверен', 'Метка времени: не проверено — у этого блока'],
      kk: ['Уақыт белгісі: өтті — блок дайджесіне', 'Уақыт белгісі: тексерілмеді — бұл тізілім блогында'],
    } as const;
    for (const language of ['ru', 'kk'] as const) {
      await page.locator('#language').selectOption(language);
      await stampOf(A).getByText(expected[language][0]).waitFor();
      await stampOf(B).getByText(expected[language][1]).waitFor();
      await expectNoEnglish(page, `transparency timestamps (${language})`);
      await screenshot(page, `transparency-timestamps-${language}`);
    }
    await page.locator('#language').selectOption('en');
    expect(errors).toEqual([]);
  }, 120_000);
});

describe('the ledger key pin on the same page', () => {
  test('the ledger key pinned alone: the seal passes on its signed checkpoint; another key under its name fails', async () => {
    const listed = (await (await fetch(`${p.verifyUrl}/v1/ledger/witnesses`)).json()) as {
      ledger_vkey: string;
    };
    const panel = page.getByTestId('witnesses');
    const field = panel.getByLabel('Ledger key you trust (optional)');
    await field.fill('not a key');
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await panel.getByText('Not a ledger checkpoint key: not a key').waitFor();

    await field.fill(listed.ledger_vkey);
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await page.getByTestId('pinned').getByText('0 witness key(s) pinned · ledger key pinned').waitFor();
    await rowOf(A).getByRole('button', { name: 'Verify' }).click();
    // The seal of A is in block B (height 1); the checkpoints of sizes 1 and 2 are signed by the ledger key.
    await rowOf(A)
      .getByTestId('anchor-check')
      .getByText(
        'Witnesses: passed — checkpoint 1 is signed by the pinned ledger key; no witness key is pinned.',
      )
      .waitFor();
    await rowOf(A).getByText('Every check passed.', { exact: true }).waitFor();

    const origin = listed.ledger_vkey.split('+')[0]!;
    const impostor = formatVkey(
      origin,
      SIG_ED25519,
      rawEd25519PublicKey(generateKeyPairSync('ed25519').privateKey),
    );
    await field.fill(impostor);
    await panel.getByRole('button', { name: 'Check seals with these keys' }).click();
    await rowOf(A)
      .getByTestId('anchor-check')
      .getByText('Witnesses: failed — a checkpoint is not signed by the pinned ledger key.')
      .waitFor();
    await rowOf(A).getByText('Not every check passed.').waitFor();
    for (const language of ['ru', 'kk'] as const) {
      await page.locator('#language').selectOption(language);
      await expectNoEnglish(page, `transparency ledger key (${language})`);
    }
    await page.locator('#language').selectOption('en');
    expect(errors).toEqual([]);
  }, 120_000);
});

describe('a seal whose signature does not verify', () => {
  test('the Transparency page says why in Russian: the code of @ooh/verify as a sentence, no English left', async () => {
    // One base64 character near the end of the CMS changed: the last bytes of the ECDSA signature's s, so the
    // SignedData still reads and the signature over the signed attributes no longer verifies.
    await page.route(`**/v1/stats-seals/${A}`, async (route) => {
      const original = await route.fetch();
      const seal = (await original.json()) as { signature: string };
      const at = seal.signature.replace(/=+$/, '').length - 3;
      seal.signature =
        seal.signature.slice(0, at) + (seal.signature[at] === 'A' ? 'B' : 'A') + seal.signature.slice(at + 1);
      await route.fulfill({ response: original, json: seal });
    });
    try {
      await page.reload();
      await page.locator('#language').selectOption('ru');
      await rowOf(A).getByRole('button', { name: ru['seal.verify'] }).click();
      await rowOf(A)
        .getByText(
          `${ru['seal.check.signature']}: ${ru['seal.state.failed']} — ${ru['verify.code.cms_bad_signature']}`,
        )
        .waitFor();
      await rowOf(A)
        .getByText(
          `${ru['seal.check.content']}: ${ru['seal.state.unknown']} — ${ru['seal.reason.signature_failed']}`,
        )
        .waitFor();
      await expectNoEnglish(page, 'transparency, a signature that fails (ru)');
      await screenshot(page, 'transparency-signature-fails-ru');
    } finally {
      await page.unroute(`**/v1/stats-seals/${A}`);
      await page.locator('#language').selectOption('en');
    }
    expect(errors).toEqual([]);
  }, 120_000);
});
