import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadAuthority } from '../../src/authority/index.js';
import { freePort } from '../../src/db/embedded.js';
import { FEATURES } from '../../src/features.js';
import { createLedgerFeature } from '../../src/ledger/routes.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createSealsFeature, runSealScheduler } from '../../src/seals/index.js';
import { httpSource, reportLines, type VerifyReport, verifySeal } from '../../src/verifier/index.js';
import { apiCall } from '../support/platform.js';
import {
  agentBody,
  approveThenSealDay,
  cmsBody,
  insertBatch,
  newDevice,
  newSource,
  startSealPlatform,
} from './helpers.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../../../', import.meta.url));
const UNLIMITED = { burst: 1_000_000, perSecond: 1_000_000 };

type P = Awaited<ReturnType<typeof startSealPlatform>>;
let p: P;
let servers: Servers;
let verifyUrl = '';
let rootPem = '';
let rootFile = '';
let exportFile = '';
const DAY = '2026-11-19';

/** Fails listed by subject, for readable assertions. */
const failures = (report: VerifyReport) =>
  reportLines(report.checks)
    .filter((c) => c.kind === 'fail')
    .map((c) => `${c.subject}: ${c.message}`);

/** The authority's export as it is now (after any tampering), then the verifier over public data. */
async function verify(): Promise<VerifyReport> {
  const res = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/seals/${DAY}/batches`);
  expect(res.statusCode).toBe(200);
  return verifySeal({ day: DAY, source: httpSource(verifyUrl), rootPem, batchesNdjson: res.body });
}

beforeAll(async () => {
  // Day one: 2026-11-18, 10:00 Almaty (near the machine's clock: openssl checks certificate dates against it).
  p = await startSealPlatform(new Date('2026-11-18T05:00:00Z'));
  servers = await buildServers(
    p.ctx,
    FEATURES.map((f) =>
      f.name === 'seals'
        ? createSealsFeature({ rateLimit: UNLIMITED })
        : f.name === 'ledger'
          ? createLedgerFeature({ rateLimit: UNLIMITED })
          : f,
    ),
  );
  await servers.verify.listen({ host: '127.0.0.1', port: 0 });
  const address = servers.verify.server.address();
  verifyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

  await runSealScheduler(p.ctx);
  const device = newDevice();
  const source = newSource();
  let seq = 0;
  for (const day of ['2026-11-18', '2026-11-19', '2026-11-20', '2026-11-21']) {
    const utc = new Date(`${day}T00:00:00Z`).getTime();
    for (let i = 0; i < 4; i += 1) {
      const receivedAt = new Date(utc + (i + 1) * 3_600_000).toISOString().replace('Z', '123Z');
      seq += 1;
      await insertBatch(p.database.db, {
        owner: i % 2 === 0 ? device : source,
        batchSeq: seq,
        body: i % 2 === 0 ? agentBody(device.slice(7), seq, i + 1) : cmsBody(source.slice(7), seq, i + 2),
        receivedAt,
      });
    }
    // An approval leaf beside the seal leaves (a block holds approvals, revocations and seals).
    // 01:00 Almaty the next day: the day is sealed and its block digested.
    await approveThenSealDay(p, day, seq);
  }
  // Now 2026-11-22 01:00 Almaty: seals of the 18th..21st; blocks of the 18th..21st digested; the seal of the 19th
  // is a leaf of the block of the 20th.
  const res = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/seals/${DAY}/batches`);
  expect(res.statusCode).toBe(200);
  exportFile = path.join(p.dataDir, 'export.ndjson');
  await writeFile(exportFile, res.body);
  rootPem = (await loadAuthority(p.ctx)).rootPem;
  rootFile = path.join(p.dataDir, 'authority-root.pem');
  await writeFile(rootFile, rootPem);
});
afterAll(async () => {
  if (servers) await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
  await p?.close();
});

describe('the verifier on an honest platform', () => {
  test('every check passes: signature, chain to the first seal, ledger proof and block chain, batches', async () => {
    const report = await verify();
    expect(failures(report)).toEqual([]);
    expect(report.ok).toBe(true);
    const text = reportLines(report.checks)
      .map((c) => `${c.kind} ${c.subject}: ${c.message}`)
      .join('\n');
    expect(text).toContain(`ok seal ${DAY}: CMS signature verifies against the pinned root`);
    expect(text).toContain(
      'ok seal 2026-11-18: SHA-256 of its body is the prev_seal_sha256 of seal 2026-11-19',
    );
    expect(text).toContain('ok seal chain: 2026-11-18 is the first seal');
    expect(text).toMatch(/ok ledger leaf of seal 2026-11-19 \(block 2026-11-20, index \d\): inclusion path/);
    expect(text).toMatch(/ok ledger chain: 4 block digest\(s\) chain from the head \(2026-11-21, height 4\)/);
    expect(text).toContain(`ok seal ${DAY}: root recomputed from the 4 exported batches`);
    expect(text).toContain(`ok seal ${DAY}: record_count`);
  });

  test('the CLI prints what it checked and exits 0, 1 on a failed check, 2 on bad arguments', async () => {
    const cli = path.join(REPO, 'apps/platform/src/verifier/cli.ts');
    const args = [
      '--conditions=source',
      '--import',
      'tsx',
      cli,
      'seal',
      DAY,
      '--from',
      verifyUrl,
      '--root',
      rootFile,
    ];
    const { stdout } = await run('node', [...args, '--batches', exportFile], { cwd: REPO });
    expect(stdout).toContain(`seal ${DAY}: every check passed`);
    expect(stdout).toMatch(/^ok +seal 2026-11-19: CMS signature verifies/m);
    // The seal of the 21st was made on the 22nd: its block is not digested yet; --require-ledger makes that a failure.
    await expect(
      run('node', [...args.slice(0, 5), '2026-11-21', ...args.slice(6), '--require-ledger'], { cwd: REPO }),
    ).rejects.toMatchObject({ code: 1, stdout: expect.stringMatching(/^FAIL ledger: ledger is null/m) });
    await expect(run('node', [...args.slice(0, 5)], { cwd: REPO })).rejects.toMatchObject({ code: 2 });
  });

  test('the CLI names every argument problem in one line, exit 2, and never calls a slip tampering', async () => {
    const cli = [
      '--conditions=source',
      '--import',
      'tsx',
      path.join(REPO, 'apps/platform/src/verifier/cli.ts'),
    ];
    /** The CLI's exit status and output, whether it failed or not. */
    const verifyCli = async (...args: string[]) => {
      try {
        const { stdout, stderr } = await run('node', [...cli, ...args], {
          cwd: REPO,
          env: { ...process.env, CI: '1' },
        });
        return { code: 0, stdout, stderr };
      } catch (error) {
        const e = error as { code: number; stdout: string; stderr: string };
        return { code: e.code, stdout: e.stdout, stderr: e.stderr };
      }
    };
    const seal = ['seal', DAY, '--from', verifyUrl];

    expect(await verifyCli('check', DAY, '--from', verifyUrl)).toEqual({
      code: 2,
      stdout: '',
      stderr: 'ooh-verify: unknown command "check"; the commands are seal and approval (ooh-verify --help)\n',
    });
    expect(await verifyCli('seal', '19.11.2026', '--from', verifyUrl)).toMatchObject({
      code: 2,
      stderr: 'ooh-verify: seal: "19.11.2026" is not a day YYYY-MM-DD (ooh-verify --help)\n',
    });
    expect(await verifyCli('seal', DAY)).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^ooh-verify: seal: --from <verify_url> is missing/),
    });
    expect(await verifyCli(...seal, '--depht', '2')).toMatchObject({
      code: 2,
      stderr: "ooh-verify: Unknown option '--depht' (ooh-verify --help lists the options)\n",
    });

    const missing = path.join(p.dataDir, 'no-such-root.pem');
    expect(await verifyCli(...seal, '--root', missing)).toEqual({
      code: 2,
      stdout: '',
      stderr: `ooh-verify: --root ${missing}: no such file; it should be the authority's root certificate (PEM), obtained from the authority; or, unpinned, ${verifyUrl}/v1/authority-root.pem\n`,
    });
    expect(await verifyCli(...seal, '--root', exportFile)).toMatchObject({
      code: 2,
      stderr: `ooh-verify: --root ${exportFile}: not a PEM certificate (-----BEGIN CERTIFICATE-----)\n`,
    });

    const closed = `http://127.0.0.1:${await freePort()}`;
    expect(await verifyCli('seal', DAY, '--from', closed, '--root', rootFile)).toEqual({
      code: 2,
      stdout: '',
      stderr: `ooh-verify: cannot reach the verify host ${closed}: nothing answers at ${closed.slice(7)} (connection refused); check --from (the public verify URL) and the network\n`,
    });

    // Another file given as the export (here the root certificate): the caller's slip, not a changed batch.
    const slip = await verifyCli(...seal, '--root', rootFile, '--batches', rootFile);
    expect(slip).toEqual({
      code: 2,
      stdout: '',
      stderr: `ooh-verify: --batches ${rootFile}: not an export of a day's batches (its first line is not JSON); export it with GET {base_url}/api/v1/console/seals/${DAY}/batches\n`,
    });
    const json = path.join(p.dataDir, 'seal.json');
    await writeFile(json, `${JSON.stringify({ day: DAY, note: 'the seal itself, not the export' })}\n`);
    expect(await verifyCli(...seal, '--root', rootFile, '--batches', json)).toMatchObject({
      code: 2,
      stdout: '',
      stderr: expect.stringContaining('(its first line is not a batch line {batch, owner, seq'),
    });

    // Without --root: "not pinned", and no check afterwards claims the pinned root.
    const unpinned = await verifyCli(...seal);
    expect(unpinned.code, unpinned.stdout).toBe(0);
    expect(unpinned.stdout).toMatch(
      /^note authority root: fetched from .* \(not pinned: pass --root to pin it\)$/m,
    );
    expect(unpinned.stdout).toMatch(
      /^ok +seal 2026-11-19: CMS signature verifies against the root fetched from the server \(not pinned\)/m,
    );
    expect(unpinned.stdout).not.toMatch(/pinned root/);
  });

  test('the long steps report their progress: batches and ledger blocks against their totals, the seal chain counted', async () => {
    const events: string[] = [];
    let current = '';
    const counts = new Map<string, number>();
    const res = await apiCall(p.servers.api, p.adminKey, 'GET', `/api/v1/console/seals/${DAY}/batches`);
    const report = await verifySeal({
      day: DAY,
      source: httpSource(verifyUrl),
      rootPem,
      batchesNdjson: res.body,
      progress: {
        phase: (name, options) => {
          current = name;
          events.push(`${name} / ${options?.total ?? '?'}`);
        },
        tick: (n = 1) => counts.set(current, (counts.get(current) ?? 0) + n),
      },
    });
    expect(report.ok).toBe(true);
    expect(events).toEqual([
      `reading the seal of ${DAY} / ?`,
      'following the seal chain / ?',
      'reading the ledger / ?',
      'walking the ledger chain / 4',
      'checking the exported batches / 4',
    ]);
    // One previous seal (the 18th, the first); blocks 21st..18th; the 4 batches of the day.
    expect(Object.fromEntries(counts)).toEqual({
      'following the seal chain': 1,
      'walking the ledger chain': 4,
      'checking the exported batches': 4,
    });
  });

  test('the CLI draws progress on a terminal (stderr), nothing in a pipe, in CI or with --no-progress; stdout the same', async () => {
    const command = [
      'node',
      '--conditions=source',
      '--import',
      'tsx',
      path.join(REPO, 'apps/platform/src/verifier/cli.ts'),
      'seal',
      DAY,
      '--from',
      verifyUrl,
      '--root',
      rootFile,
      '--batches',
      exportFile,
    ];
    // Whatever runs this test (a CI service sets CI=true): a terminal with no CI variable, no colour.
    const env: NodeJS.ProcessEnv = { ...process.env, TERM: 'xterm', NO_COLOR: '1' };
    for (const name of [
      'CI',
      'CONTINUOUS_INTEGRATION',
      'GITHUB_ACTIONS',
      'GITLAB_CI',
      'BUILDKITE',
      'OOH_PROGRESS',
    ]) {
      delete env[name];
    }
    // A pipe: stdout as it always was, not one byte on stderr.
    const piped = await run(command[0]!, command.slice(1), { cwd: REPO, env });
    expect(piped.stderr).toBe('');
    expect(piped.stdout).toMatch(/^ok +seal 2026-11-19: CMS signature verifies/m);
    expect(piped.stdout).toContain(`seal ${DAY}: every check passed\n`);
    // A pseudo-terminal from util-linux `script` (in bsdutils, which Debian always installs): stdout and stderr are
    // both the terminal, so what it shows is both, with \r\n for \n.
    const onTerminal = async (extra: string[], extraEnv: NodeJS.ProcessEnv = {}) => {
      const shell = [...command, ...extra].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
      const { stdout } = await run('script', ['-qfec', shell, '/dev/null'], {
        cwd: REPO,
        env: { ...env, ...extraEnv },
      });
      return stdout.replaceAll('\r\n', '\n');
    };
    // A progress line is drawn as "\r<line>\x1b[K" and taken off as "\r\x1b[K".
    const FRAME = /\r[^\r\n]*?\x1b\[K/g;
    const shown = await onTerminal([]);
    const frames = shown.match(FRAME) ?? [];
    expect(frames.some((f) => /^\r. reading the batch export {2}0:00\x1b\[K$/.test(f))).toBe(true);
    // Every line drawn is taken off before the output, which is exactly what the pipe got.
    expect(frames.at(-1)).toBe('\r\x1b[K');
    expect(shown).not.toMatch(/\r[^\r\n]+?\x1b\[K[^\r]/);
    expect(shown.replace(FRAME, '')).toBe(piped.stdout);
    for (const [extra, extraEnv] of [
      [['--no-progress'], {}],
      [[], { CI: 'true' }],
      [[], { TERM: 'dumb' }],
      [[], { OOH_PROGRESS: '0' }],
    ] as const) {
      const quiet = await onTerminal([...extra], extraEnv);
      expect(quiet, JSON.stringify({ extra, extraEnv })).toBe(piped.stdout);
    }
    // --progress draws even into a pipe (for a terminal the program cannot see), on stderr only.
    const forced = await run(command[0]!, [...command.slice(1), '--progress'], { cwd: REPO, env });
    expect(forced.stdout).toBe(piped.stdout);
    expect(forced.stderr).toMatch(/reading the batch export/);
  });

  test('a seal whose ledger is not digested yet is a note; a day never sealed fails', async () => {
    const pending = await verifySeal({ day: '2026-11-21', source: httpSource(verifyUrl), rootPem });
    expect(pending.ok).toBe(true);
    expect(pending.checks).toContainEqual(
      expect.objectContaining({ state: 'pending', reason: 'not_digested', subject: 'ledger' }),
    );
    const missing = await verifySeal({ day: '2026-11-30', source: httpSource(verifyUrl), rootPem });
    expect(missing.ok).toBe(false);
    expect(failures(missing)).toEqual([expect.stringMatching(/^seal 2026-11-30: not found/)]);
  });

  test('a root that is not the authority fails the signature', async () => {
    const other = await startSealPlatform(new Date('2026-11-18T05:00:00Z'));
    try {
      const otherRoot = (await loadAuthority(other.ctx)).rootPem;
      const report = await verifySeal({ day: DAY, source: httpSource(verifyUrl), rootPem: otherRoot });
      expect(report.ok).toBe(false);
      expect(failures(report).join('\n')).toMatch(/^seal 2026-11-19: CMS signature does not verify/m);
    } finally {
      await other.close();
    }
  });
});

/**
 * Changes stored rows, runs the verifier, puts the rows back. The tamperer has the database's owner rights: it turns
 * off the triggers that keep a sealed day's batches as they were sealed (migration 064) while it works.
 */
async function whileTampered(
  change: string,
  restore: string,
  params: unknown[],
  restoreParams: unknown[] = params,
): Promise<string[]> {
  const db = p.database.db;
  await db.query('ALTER TABLE pop_batches DISABLE TRIGGER USER');
  await db.query(change, params);
  try {
    const report = await verify();
    expect(report.ok).toBe(false);
    return failures(report);
  } finally {
    await db.query(restore, restoreParams);
    await db.query('ALTER TABLE pop_batches ENABLE TRIGGER USER');
    // Put back exactly: the honest platform verifies again.
    expect(failures(await verify())).toEqual([]);
  }
}

describe('tampering makes the verifier fail, naming what changed', () => {
  const batchOf = async (n: number) =>
    (
      await p.database.db.query<{ id: number }>(
        `SELECT id FROM pop_batches WHERE receive_day = $1 ORDER BY received_at, id OFFSET $2 LIMIT 1`,
        [DAY, n],
      )
    ).rows[0]!.id;
  const sealLeafOf = async (day: string) =>
    (
      await p.database.db.query<{ ledger_leaf_id: number }>(
        'SELECT ledger_leaf_id FROM stats_seals WHERE day = $1',
        [day],
      )
    ).rows[0]!.ledger_leaf_id;

  test('a stored batch body (one play turned into a reject)', async () => {
    const id = await batchOf(1);
    const failed = await whileTampered(
      `UPDATE pop_batches SET body = convert_to(replace(convert_from(body, 'UTF8'), '"kind":"play"', '"kind":"nope"'), 'UTF8') WHERE id = $1`,
      `UPDATE pop_batches SET body = convert_to(replace(convert_from(body, 'UTF8'), '"kind":"nope"', '"kind":"play"'), 'UTF8') WHERE id = $1`,
      [id],
    );
    expect(failed.join('\n')).toMatch(
      new RegExp(`^batch ${id}: its body does not match its body_sha256`, 'm'),
    );
    expect(failed.join('\n')).toMatch(/^seal 2026-11-19: record_count \d+ differs/m);
  });

  test('a stored batch body with a matching body_sha256', async () => {
    const id = await batchOf(2);
    const failed = await whileTampered(
      `UPDATE pop_batches SET body = body || '\\x20'::bytea, body_sha256 = encode(sha256(body || '\\x20'::bytea), 'hex') WHERE id = $1`,
      `UPDATE pop_batches SET body = substring(body from 1 for octet_length(body) - 1),
         body_sha256 = encode(sha256(substring(body from 1 for octet_length(body) - 1)), 'hex') WHERE id = $1`,
      [id],
    );
    expect(failed).toEqual([
      expect.stringMatching(
        /^seal 2026-11-19: root [0-9a-f]{64} differs from [0-9a-f]{64} recomputed from the 4 exported batches: a stored batch changed/,
      ),
    ]);
  });

  test('a stored batch receive time', async () => {
    const id = await batchOf(0);
    const failed = await whileTampered(
      `UPDATE pop_batches SET received_at = received_at + interval '1 microsecond' WHERE id = $1`,
      `UPDATE pop_batches SET received_at = received_at - interval '1 microsecond' WHERE id = $1`,
      [id],
    );
    expect(failed.join('\n')).toMatch(/^seal 2026-11-19: root .* a stored batch changed/m);
  });

  test('the stored seal body', async () => {
    const failed = await whileTampered(
      `UPDATE stats_seals SET body = convert_to(replace(convert_from(body, 'UTF8'), '"batch_count":4', '"batch_count":5'), 'UTF8') WHERE day = $1`,
      `UPDATE stats_seals SET body = convert_to(replace(convert_from(body, 'UTF8'), '"batch_count":5', '"batch_count":4'), 'UTF8') WHERE day = $1`,
      [DAY],
    );
    expect(failed.join('\n')).toMatch(
      /^seal 2026-11-19: the signed content differs from the canonical JSON of body/m,
    );
    expect(failed.join('\n')).toMatch(
      /^ledger leaf of seal 2026-11-19 .*: manifest_sha256 .* differs from the SHA-256 of the seal body/m,
    );
    expect(failed.join('\n')).toMatch(/^seal 2026-11-19: batch_count 5 differs from the 4 exported batches/m);
  });

  test('a previous seal body', async () => {
    const failed = await whileTampered(
      `UPDATE stats_seals SET body = convert_to(replace(convert_from(body, 'UTF8'), '"env":"test"', '"env":"prod"'), 'UTF8') WHERE day = $1`,
      `UPDATE stats_seals SET body = convert_to(replace(convert_from(body, 'UTF8'), '"env":"prod"', '"env":"test"'), 'UTF8') WHERE day = $1`,
      ['2026-11-18'],
    );
    expect(failed.join('\n')).toMatch(/^seal 2026-11-18: the signed content differs/m);
    expect(failed.join('\n')).toMatch(
      /^seal 2026-11-18: SHA-256 of its body [0-9a-f]{64} differs from prev_seal_sha256 [0-9a-f]{64} of seal 2026-11-19/m,
    );
  });

  test('the stored signature', async () => {
    const failed = await whileTampered(
      // Every bit of one byte flipped, so the seal always changes (a fixed byte may already be there).
      `UPDATE stats_seals
          SET signature = set_byte(signature, octet_length(signature) - 11, get_byte(signature, octet_length(signature) - 11) # 255)
        WHERE day = $1`,
      `UPDATE stats_seals SET signature = $2 WHERE day = $1`,
      [DAY],
      [
        DAY,
        await p.database.db
          .query('SELECT signature FROM stats_seals WHERE day = $1', [DAY])
          .then((r) => r.rows[0].signature),
      ],
    );
    expect(failed.join('\n')).toMatch(/^seal 2026-11-19: CMS signature does not verify/m);
  });

  test("the seal's ledger leaf", async () => {
    const leaf = await sealLeafOf(DAY);
    const failed = await whileTampered(
      `UPDATE ledger_leaves SET signed_at = signed_at + interval '1 second' WHERE id = $1`,
      `UPDATE ledger_leaves SET signed_at = signed_at - interval '1 second' WHERE id = $1`,
      [leaf],
    );
    const text = failed.join('\n');
    // The leaf's first broken rule is named (@ooh/verify stops there); the block's root names the rest.
    expect(text).toMatch(
      /^ledger leaf of seal 2026-11-19 \(block 2026-11-20, index \d\): signed_at .* differs/m,
    );
    expect(text).toMatch(
      /^ledger block 2026-11-20: merkle_root .* a leaf changed after the block was digested/m,
    );
  });

  test('another leaf of the same ledger block', async () => {
    const { rows } = await p.database.db.query<{ id: number }>(
      `SELECT l.id FROM ledger_leaves l JOIN ledger_block_leaves b ON b.leaf_id = l.id
        WHERE b.day = '2026-11-20' AND l.kind = 'approval'`,
    );
    const failed = await whileTampered(
      `UPDATE ledger_leaves SET manifest_sha256 = 'd' || substring(manifest_sha256 from 2) WHERE id = $1`,
      `UPDATE ledger_leaves SET manifest_sha256 = 'c' || substring(manifest_sha256 from 2) WHERE id = $1`,
      [rows[0]!.id],
    );
    const text = failed.join('\n');
    expect(text).toMatch(
      /^ledger leaf of seal 2026-11-19 .*: the inclusion path does not lead to merkle_root/m,
    );
    expect(text).toMatch(/^ledger block 2026-11-20: merkle_root/m);
  });

  test('an earlier ledger block digest', async () => {
    const failed = await whileTampered(
      `UPDATE ledger_blocks SET digest = 'e' || substring(digest from 2) WHERE day = $1`,
      `UPDATE ledger_blocks SET digest = $2 WHERE day = $1`,
      ['2026-11-18'],
      [
        '2026-11-18',
        await p.database.db
          .query(`SELECT digest FROM ledger_blocks WHERE day = '2026-11-18'`)
          .then((r) => r.rows[0].digest),
      ],
    );
    const text = failed.join('\n');
    expect(text).toMatch(/^ledger block 2026-11-18: digest e[0-9a-f]{63} differs from the recomputed/m);
    expect(text).toMatch(/^ledger block 2026-11-19: anchor_sha256 .* is not the digest of block 2026-11-18/m);
  });
});
