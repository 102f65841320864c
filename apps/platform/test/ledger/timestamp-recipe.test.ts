import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { canonicalize } from '@ooh/crypto';
import { addDays, almatyDate, almatyDayStart } from '@ooh/protocol';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { OpensslTsa, serveTsa } from '../../../../packages/crypto/test/helpers/tsa.js';
import { digestLedgerDay } from '../../src/ledger/index.js';
import { runTimestampJob, tsaSettings } from '../../src/ledger/timestamp.js';
import { runSealScheduler } from '../../src/seals/index.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

// The openssl recipe of docs/seals.md ("RFC 3161 timestamps"), run exactly as written against a verify host whose
// ledger block was stamped by `openssl ts -reply`; and refused when the reader pins another TSA or the host serves
// another block's token.

const run = promisify(execFile);
const DOC = readFileSync(new URL('../../docs/seals.md', import.meta.url), 'utf8');

function recipe(): string {
  const blocks = [...DOC.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const found = blocks.find((b) => b.startsWith('# timestamp-recipe'));
  if (!found) throw new Error('docs/seals.md has no timestamp-recipe block');
  return found;
}

/** Two ended days before today (openssl stamps with the machine's clock). */
const D = addDays(almatyDate(new Date()), -2);
const D1 = addDays(D, 1);

let p: TestPlatform;
let dir: string;
let tsa: OpensslTsa;
let other: OpensslTsa;
let server: Awaited<ReturnType<typeof serveTsa>>;
let verifyUrl = '';

beforeAll(async () => {
  tsa = new OpensslTsa({ name: 'Recipe TSA' });
  other = new OpensslTsa({ name: 'Other TSA' });
  server = await serveTsa(tsa);
  dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-timestamp-recipe-'));
  const caFile = path.join(dir, 'platform-tsa-ca.pem');
  await writeFile(caFile, tsa.caPem);
  p = await startTestPlatform({
    now: new Date(almatyDayStart(D).getTime() + 10 * 3_600_000),
    dataDir: path.join(dir, 'data'),
    config: { settings: { LEDGER_TSA_URL: server.url, LEDGER_TSA_CERT: caFile } },
  });
  await runSealScheduler(p.ctx);
  p.clock.set(new Date(almatyDayStart(D1).getTime() + 10 * 3_600_000));
  await runSealScheduler(p.ctx);
  p.clock.set(new Date());
  await digestLedgerDay(p.ctx, D1);
  const stamped = await runTimestampJob(p.ctx, tsaSettings(p.ctx.config)!);
  expect(stamped.stamped.map((s) => s.day).sort()).toEqual([D, D1]);
  await p.servers.verify.listen({ host: '127.0.0.1', port: 0 });
  const address = p.servers.verify.server.address();
  verifyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});

afterAll(async () => {
  await server?.close();
  await p?.close();
  tsa?.dispose();
  other?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function runRecipe(caPem: string, env: Record<string, string> = {}) {
  await writeFile(path.join(dir, 'tsa-ca.pem'), caPem);
  return run('bash', ['-euo', 'pipefail', '-c', recipe()], {
    cwd: dir,
    env: { ...process.env, VERIFY_URL: verifyUrl, DAY: D1, ...env },
  });
}

test('the openssl recipe of docs/seals.md recomputes the digest and verifies the token as written', async () => {
  const block = (await p.servers.verify.inject({ method: 'GET', url: `/v1/ledger/blocks/${D1}` })).json();
  const { stdout, stderr } = await runRecipe(tsa.caPem);
  expect(stdout).toContain(`digest ok: ${block.digest}`);
  expect(stdout).toContain('Verification: OK');
  // The header jq wrote is the canonical JSON the digest is the SHA-256 of.
  expect(await readFile(path.join(dir, 'block-header.json'), 'utf8')).toBe(
    canonicalize({
      v: 1,
      day: block.day,
      block_height: block.block_height,
      leaf_count: block.leaf_count,
      merkle_root: block.merkle_root,
      prev_digest: block.anchor_sha256,
    }),
  );
  // The time printed is the one the block document states.
  const time = /Time stamp: (.*)/.exec(stdout)?.[1];
  expect(new Date(time!).getTime()).toBe(new Date(block.timestamp.gen_time).getTime());
  expect(stderr).not.toMatch(/error/i);
});

test('the recipe fails for a TSA the reader did not pin, and for another block’s token', async () => {
  await expect(runRecipe(other.caPem)).rejects.toMatchObject({
    stdout: expect.stringContaining('Verification: FAILED'),
    stderr: expect.stringMatching(/unable to get local issuer certificate/),
  });
  // The day before's token served for this day: openssl refuses it for this block's digest.
  const tokenOfD = (
    await p.servers.verify.inject({ method: 'GET', url: `/v1/ledger/blocks/${D}/timestamp.tsr` })
  ).rawPayload;
  const swapped = `${recipe()}`.replace(
    'curl -fsS "$VERIFY_URL/v1/ledger/blocks/$DAY/timestamp.tsr" -o block.tsr',
    'cp other-day.tsr block.tsr',
  );
  expect(swapped).not.toBe(recipe());
  await writeFile(path.join(dir, 'other-day.tsr'), tokenOfD);
  await writeFile(path.join(dir, 'tsa-ca.pem'), tsa.caPem);
  await expect(
    run('bash', ['-euo', 'pipefail', '-c', swapped], {
      cwd: dir,
      env: { ...process.env, VERIFY_URL: verifyUrl, DAY: D1 },
    }),
  ).rejects.toMatchObject({
    stdout: expect.stringContaining('Verification: FAILED'),
    stderr: expect.stringMatching(/message imprint mismatch/i),
  });
});
