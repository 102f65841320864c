import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createTimeStampRequest, parseTimeStampResponse, timeStampReply } from '@ooh/crypto';
import { addDays, almatyDate, almatyDayStart } from '@ooh/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { OpensslTsa, serveTsa } from '../../../../packages/crypto/test/helpers/tsa.js';
import { loadAuthority } from '../../src/authority/index.js';
import { ConfigError } from '../../src/config.js';
import { digestLedgerDay } from '../../src/ledger/index.js';
import { createLedgerTimestampFeature } from '../../src/ledger/timestamp-routes.js';
import {
  findTimestamp,
  runTimestampJob,
  type TimestampJobState,
  tsaSettings,
} from '../../src/ledger/timestamp.js';
import { runSealScheduler } from '../../src/seals/index.js';
import { checkFeatureSettings } from '../../src/settings-check.js';
import { main } from '../../src/verifier/cli.js';
import {
  checkBlockTimestamp,
  describeCheck,
  httpSource,
  type PublicSource,
  timestampChecker,
  verifySeal,
} from '../../src/verifier/index.js';
import { parsePem } from '@ooh/verify';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

// Issue 23, "Optional timestamps": `openssl ts -reply` is the time-stamping authority, over HTTP. openssl stamps with
// the machine's clock, so the platform's clock is set near it: the ledger days are the two days before today.

const run = promisify(execFile);

let p: TestPlatform;
let dataDir: string;
let tsa: OpensslTsa;
let otherTsa: OpensslTsa;
let server: Awaited<ReturnType<typeof serveTsa>>;
let verifyUrl = '';
let rootFile = '';
let tsaCaFile = '';
let otherCaFile = '';
/** The ledger days: D (a seal is made on D+1 and so is a leaf of block D+1) and D+1, both ended. */
const D = addDays(almatyDate(new Date()), -2);
const D1 = addDays(D, 1);

const realNow = () => new Date();

async function block(
  day: string,
): Promise<{ digest: string; timestamp?: { gen_time: string; url: string } }> {
  const res = await p.servers.verify.inject({ method: 'GET', url: `/v1/ledger/blocks/${day}` });
  expect(res.statusCode).toBe(200);
  return res.json();
}

async function tsr(day: string) {
  return p.servers.verify.inject({ method: 'GET', url: `/v1/ledger/blocks/${day}/timestamp.tsr` });
}

beforeAll(async () => {
  tsa = new OpensslTsa({ name: 'City TSA' });
  otherTsa = new OpensslTsa({ name: 'Unpinned TSA' });
  server = await serveTsa(tsa);
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-timestamps-'));
  tsaCaFile = path.join(dataDir, 'tsa-ca.pem');
  otherCaFile = path.join(dataDir, 'other-tsa-ca.pem');
  await writeFile(tsaCaFile, tsa.caPem);
  await writeFile(otherCaFile, otherTsa.caPem);
  p = await startTestPlatform({
    now: new Date(almatyDayStart(D).getTime() + 10 * 3_600_000),
    dataDir,
    config: { settings: { LEDGER_TSA_URL: server.url, LEDGER_TSA_CERT: tsaCaFile } },
  });
  await runSealScheduler(p.ctx);
  // D+1 10:00: the seal of D is made (a leaf of D+1) and the block of D digested.
  p.clock.set(new Date(almatyDayStart(D1).getTime() + 10 * 3_600_000));
  await runSealScheduler(p.ctx);
  // Now: the block of D+1 (holding the seal of D) is digested too.
  p.clock.set(realNow());
  await digestLedgerDay(p.ctx, D1);
  await p.servers.verify.listen({ host: '127.0.0.1', port: 0 });
  const address = p.servers.verify.server.address();
  verifyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  rootFile = path.join(dataDir, 'authority-root.pem');
  await writeFile(rootFile, (await loadAuthority(p.ctx)).rootPem);
});

afterAll(async () => {
  await server?.close();
  await p?.close();
  tsa?.dispose();
  otherTsa?.dispose();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe('RFC 3161 timestamps of the ledger blocks', () => {
  test('a TSA that is down delays the timestamps, never the ledger; the job backs off, then stamps once it is up', async () => {
    const settings = tsaSettings(p.ctx.config)!;
    expect(settings.url).toBe(server.url);
    server.setDown(true);
    const state: TimestampJobState = { failures: 0, retryAt: 0 };
    p.clock.set(realNow());
    const first = await runTimestampJob(p.ctx, settings, { state, random: () => 0 });
    expect(first.stamped).toEqual([]);
    expect(first.failed).toEqual([{ day: D1, reason: 'the TSA answered HTTP 503' }]);
    expect(server.queries()).toBe(1);
    // Backing off: the next passes within the delay (30 s for a first failure with this jitter) ask nothing.
    await runTimestampJob(p.ctx, settings, { state, random: () => 0 });
    p.clock.set(new Date(p.clock.now().getTime() + 29_000));
    expect(await runTimestampJob(p.ctx, settings, { state, random: () => 0 })).toEqual({
      stamped: [],
      failed: [],
    });
    expect(server.queries()).toBe(1);
    const row = await findTimestamp(p.ctx.db, D1);
    expect(row).toMatchObject({ token: null, attempts: 1, last_error: 'the TSA answered HTTP 503' });
    // Nothing waited for it: both blocks are digested and public, only without a timestamp.
    expect((await block(D)).timestamp).toBeUndefined();
    expect((await tsr(D1)).statusCode).toBe(404);
    expect((await tsr(D1)).headers['content-type']).toContain('application/problem+json');

    // Unreachable altogether (nothing listening) is the same.
    const closed = { ...settings, url: 'http://127.0.0.1:9/tsa' };
    p.clock.set(new Date(p.clock.now().getTime() + 2_000));
    const refused = await runTimestampJob(p.ctx, closed, { random: () => 0 });
    expect(refused.failed[0]?.reason).toMatch(/cannot be reached/);

    // Up again: the feature's own job (as the platform starts it) stamps both blocks, newest first.
    server.setDown(false);
    p.clock.set(new Date(realNow().getTime() + 61_000));
    const stop = await createLedgerTimestampFeature({ intervalMs: 50 }).start!(p.ctx);
    try {
      for (let i = 0; i < 200 && !(await findTimestamp(p.ctx.db, D))?.token; i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await stop();
    }
    for (const day of [D, D1]) {
      const stamped = await findTimestamp(p.ctx.db, day);
      expect(stamped?.token).toBeInstanceOf(Buffer);
      expect(stamped).toMatchObject({ tsa_subject: 'CN=City TSA', last_error: null });
    }
  });

  test('the token is published with the block, and openssl ts -verify accepts it for the block digest', async () => {
    for (const day of [D, D1]) {
      const res = await tsr(day);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/timestamp-reply');
      const { digest, timestamp } = await block(day);
      expect(timestamp).toMatchObject({
        url: expect.stringMatching(new RegExp(`/v1/ledger/blocks/${day}/timestamp.tsr$`)),
      });
      const file = path.join(tsa.ws.dir, `ledger-${day}.tsr`);
      await writeFile(file, res.rawPayload);
      const verified = await run(
        'openssl',
        ['ts', '-verify', '-digest', digest, '-in', file, '-CAfile', 'ca.pem'],
        {
          cwd: tsa.ws.dir,
        },
      );
      expect(verified.stdout).toContain('Verification: OK');
      // The block's own digest, not another: openssl refuses the token for the other day's digest.
      const other = (await block(day === D ? D1 : D)).digest;
      await expect(
        run('openssl', ['ts', '-verify', '-digest', other, '-in', file, '-CAfile', 'ca.pem'], {
          cwd: tsa.ws.dir,
        }),
      ).rejects.toThrow();
      // What the block says of the time is what the token says.
      const text = await run('openssl', ['ts', '-reply', '-in', file, '-text'], { cwd: tsa.ws.dir });
      const genTime = /Time stamp: (.*)/.exec(text.stdout)?.[1];
      expect(new Date(genTime!).getTime()).toBe(new Date(timestamp!.gen_time).getTime());
    }
    // No timestamp for a day without a block; a malformed day is 404 as well (the public routes' rule).
    for (const day of [addDays(D, -10), 'not-a-day']) {
      const res = await tsr(day);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: 'not_found' });
    }
  });

  test('a stored token is kept: the database refuses to change or remove it', async () => {
    await expect(
      p.ctx.db.query(`UPDATE ledger_block_timestamps SET token = '\\x00'::bytea WHERE day = $1`, [D]),
    ).rejects.toMatchObject({
      code: '23514',
      where: expect.stringContaining('ledger_block_timestamps_kept'),
    });
    await expect(
      p.ctx.db.query('DELETE FROM ledger_block_timestamps WHERE day = $1', [D]),
    ).rejects.toMatchObject({
      code: '23514',
      where: expect.stringContaining('ledger_block_timestamps_kept'),
    });
  });

  test('ooh-verify --tsa-cert checks the token of every block it verifies', async () => {
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(`ERR ${l}`), env: {} };
    const args = ['seal', D, '--from', verifyUrl, '--root', rootFile, '--no-progress'];
    expect(await main([...args, '--tsa-cert', tsaCaFile], io)).toBe(0);
    const text = lines.join('\n');
    for (const day of [D, D1]) {
      expect(text).toMatch(
        new RegExp(
          `ok {3}ledger block ${day}: RFC 3161 timestamp of its digest by CN=City TSA at .* verifies against the pinned TSA certificate`,
        ),
      );
    }
    // The TSA's own certificate pinned instead of its CA works the same.
    const own = path.join(dataDir, 'tsa.pem');
    await writeFile(own, tsa.tsaPem);
    lines.length = 0;
    expect(await main([...args, '--tsa-cert', own], io)).toBe(0);
    // Another TSA pinned: every block's timestamp fails, and so does the run.
    lines.length = 0;
    expect(await main([...args, '--tsa-cert', otherCaFile], io)).toBe(1);
    expect(
      lines.filter((l) =>
        /^FAIL ledger block .*: RFC 3161 timestamp refused: the TSA is not the pinned one/.test(l),
      ),
    ).toHaveLength(2);
    // Not a certificate, no such file: bad arguments (2), said in one line.
    lines.length = 0;
    expect(await main([...args, '--tsa-cert', rootFile.replace('.pem', '.missing')], io)).toBe(2);
    expect(lines).toEqual([
      expect.stringMatching(/^ERR ooh-verify: --tsa-cert .*: no such file; it should be/),
    ]);
    lines.length = 0;
    const notPem = path.join(dataDir, 'not.pem');
    await writeFile(notPem, 'hello');
    expect(await main([...args, '--tsa-cert', notPem], io)).toBe(2);
    expect(lines).toEqual([expect.stringMatching(/^ERR ooh-verify: --tsa-cert .*: not a PEM certificate/)]);
  });

  test('the verifier refuses a token for another digest, a tampered token and a missing one from a dishonest host', async () => {
    const honest = httpSource(verifyUrl);
    const tokenOf = async (day: string) => {
      const res = await tsr(day);
      const parsed = parseTimeStampResponse(res.rawPayload);
      if (!parsed.ok) throw new Error(parsed.reason);
      return parsed.token;
    };
    /** The verify host, but answering `body` (or 404) for the timestamp of `day`. */
    const serving = (day: string, body: Uint8Array | null): PublicSource => ({
      origin: honest.origin,
      async get(p) {
        if (p === `/v1/ledger/blocks/${day}/timestamp.tsr`) {
          return body === null
            ? { status: 404, body: Buffer.alloc(0) }
            : { status: 200, body: Buffer.from(body) };
        }
        return honest.get(p);
      },
    });
    const { digest } = await block(D1);
    // As the CLI says it: ok/fail and the message.
    const check = async (source: PublicSource) =>
      describeCheck(await checkBlockTimestamp(source, { day: D1, digest }, parsePem(tsa.caPem)));
    expect(await check(honest)).toMatchObject({ kind: 'ok' });

    // The token of the other day served for this one: it stamps another digest.
    const swapped = await check(serving(D1, timeStampReply(await tokenOf(D))));
    expect(swapped).toMatchObject({ kind: 'fail', message: expect.stringMatching(/stamps another digest/) });
    // A token the pinned TSA made for another digest (a rewritten block) the same.
    const forged = await tsa.reply(createTimeStampRequest({ digest: Buffer.alloc(32, 7) }).der);
    expect(await check(serving(D1, forged))).toMatchObject({
      kind: 'fail',
      message: expect.stringMatching(/stamps another digest/),
    });
    // A token for the right digest from a TSA the reader did not pin.
    const unpinned = await otherTsa.reply(createTimeStampRequest({ digest: Buffer.from(digest, 'hex') }).der);
    expect(await check(serving(D1, unpinned))).toMatchObject({
      kind: 'fail',
      message: expect.stringMatching(/not the pinned one/),
    });
    // Tampered: a digit of the stamped time changed.
    const tampered = Buffer.from(await tokenOf(D1));
    const at = tampered.toString('latin1').search(/\d{14}(\.\d+)?Z/);
    tampered[at + 13] = tampered[at + 13] === 0x30 ? 0x31 : 0x30;
    expect(await check(serving(D1, timeStampReply(tampered)))).toMatchObject({
      kind: 'fail',
      message: expect.stringMatching(/RFC 3161 timestamp refused: .*(messageDigest|signature)/),
    });
    expect(await check(serving(D1, null))).toMatchObject({
      kind: 'fail',
      message: expect.stringMatching(/no RFC 3161 timestamp/),
    });

    // Through the whole seal check: the dishonest host's report fails on that block only.
    const checker = timestampChecker(serving(D1, timeStampReply(tampered)), tsa.caPem);
    const report = await verifySeal({
      day: D,
      source: checker.source,
      rootPem: (await loadAuthority(p.ctx)).rootPem,
    });
    expect(report.ok).toBe(true);
    await checker.check(report);
    expect(report.ok).toBe(false);
    expect(report.checks.filter((c) => c.state === 'failed').map((c) => c.subject)).toEqual([
      `ledger block ${D1}`,
    ]);
  });

  test('settings: the TSA URL needs a pinned certificate that can be read; every bad value is named at start', async () => {
    const problems = (settings: NodeJS.ProcessEnv) => {
      try {
        checkFeatureSettings({ ...p.ctx.config, settings });
        return [];
      } catch (error) {
        return (error as ConfigError).problems;
      }
    };
    expect(tsaSettings({ settings: {} })).toBeNull();
    expect(problems({ LEDGER_TSA_URL: server.url })).toEqual([
      expect.stringMatching(/^LEDGER_TSA_CERT is missing/),
    ]);
    expect(
      problems({ LEDGER_TSA_URL: 'ftp://tsa', LEDGER_TSA_CERT: path.join(dataDir, 'nope.pem') }),
    ).toEqual([
      expect.stringMatching(/^LEDGER_TSA_URL: "ftp:\/\/tsa" is not an http\(s\) URL/),
      expect.stringMatching(/^LEDGER_TSA_CERT: .*nope\.pem: no such file/),
    ]);
    expect(problems({ LEDGER_TSA_URL: server.url, LEDGER_TSA_CERT: path.join(dataDir, 'not.pem') })).toEqual([
      expect.stringMatching(/holds no PEM certificate/),
    ]);
    expect(problems({ LEDGER_TSA_CERT: tsaCaFile })).toEqual([expect.stringMatching(/need LEDGER_TSA_URL/)]);
    expect(
      problems({ LEDGER_TSA_URL: server.url, LEDGER_TSA_CERT: tsaCaFile, LEDGER_TSA_POLICY: 'x' }),
    ).toEqual([expect.stringMatching(/LEDGER_TSA_POLICY: "x" is not an object identifier/)]);
    expect(() => tsaSettings({ settings: { LEDGER_TSA_URL: server.url } })).toThrow(ConfigError);
    expect(
      tsaSettings({ settings: { LEDGER_TSA_URL: server.url, LEDGER_TSA_CERT: tsaCaFile } }),
    ).toMatchObject({
      url: server.url,
      trustedPem: [expect.stringContaining('BEGIN CERTIFICATE')],
      policy: null,
    });
  });
});
