import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { canonicalize, sha256Hex } from '@ooh/crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { loadAuthority } from '../../src/authority/index.js';
import { runSealScheduler } from '../../src/seals/index.js';
import { agentBody, insertBatch, newDevice, startSealPlatform } from './helpers.js';

const run = promisify(execFile);
const DOC = readFileSync(new URL('../../docs/seals.md', import.meta.url), 'utf8');

/** The outsider's recipe exactly as docs/seals.md shows it. */
function recipe(): string {
  const blocks = [...DOC.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const found = blocks.find((b) => b.startsWith('# outsider-recipe'));
  if (!found) throw new Error('docs/seals.md has no outsider-recipe block');
  return found;
}

let p: Awaited<ReturnType<typeof startSealPlatform>>;
let dir: string;
let verifyUrl: string;

beforeAll(async () => {
  // Near the machine's clock: openssl checks the certificates' dates against it.
  p = await startSealPlatform(new Date('2026-11-19T05:00:00Z'));
  await runSealScheduler(p.ctx);
  const device = newDevice();
  await insertBatch(p.database.db, {
    owner: device,
    batchSeq: 1,
    body: agentBody(device.slice(7), 1, 4),
    receivedAt: '2026-11-19T05:00:00.000001Z',
  });
  p.clock.set(new Date('2026-11-21T05:00:00Z'));
  await runSealScheduler(p.ctx);
  await p.servers.verify.listen({ host: '127.0.0.1', port: 0 });
  const address = p.servers.verify.server.address();
  verifyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-seal-recipe-'));
  await writeFile(path.join(dir, 'authority-root.pem'), (await loadAuthority(p.ctx)).rootPem);
});
afterAll(async () => {
  await p?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('the openssl + sha256sum recipe of docs/seals.md works as written', async () => {
  const { stdout, stderr } = await run('bash', ['-euo', 'pipefail', '-c', recipe()], {
    cwd: dir,
    env: { ...process.env, VERIFY_URL: verifyUrl, DAY: '2026-11-19', NEXT: '2026-11-20' },
  });
  expect(stderr.match(/CMS Verification successful/g)).toHaveLength(2);
  expect(stdout).toContain('chain ok: 2026-11-20 follows 2026-11-19');
  const seal = (await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-19' })).json();
  const body = await readFile(path.join(dir, 'body.json'), 'utf8');
  expect(body).toBe(canonicalize(seal.body));
  expect(stdout).toContain(`${sha256Hex(body)}  body.json`);
  expect(JSON.parse(body)).toMatchObject({ day: '2026-11-19', batch_count: 1, record_count: 4 });
});

test('the recipe fails on a seal whose stored signature was changed', async () => {
  const { rows } = await p.database.db.query('SELECT signature FROM stats_seals WHERE day = $1', [
    '2026-11-19',
  ]);
  await p.database.db.query(
    // Flip every bit of a byte inside the signature value: writing a fixed byte left the seal unchanged
    // whenever the byte already held it (one run in 256; CI met it).
    `UPDATE stats_seals
        SET signature = set_byte(signature, octet_length(signature) - 6, get_byte(signature, octet_length(signature) - 6) # 255)
      WHERE day = '2026-11-19'`,
  );
  try {
    await expect(
      run('bash', ['-euo', 'pipefail', '-c', recipe()], {
        cwd: dir,
        env: { ...process.env, VERIFY_URL: verifyUrl, DAY: '2026-11-19', NEXT: '2026-11-20' },
      }),
    ).rejects.toMatchObject({ stderr: expect.stringMatching(/Verification failure/) });
  } finally {
    await p.database.db.query('UPDATE stats_seals SET signature = $1 WHERE day = $2', [
      rows[0].signature,
      '2026-11-19',
    ]);
  }
});
