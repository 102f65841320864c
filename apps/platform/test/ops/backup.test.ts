import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parsePem, verifySignedDocument } from '@ooh/verify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openEmbeddedCluster } from '../../src/db/embedded.js';
import { readMigrations } from '../../src/db/migrate.js';
import { createTestDatabase } from '../support/database.js';
import { png } from '../approvals/media-fixtures.js';
import {
  MAIN,
  type PlatformProcess,
  processesNaming,
  REPO_ROOT,
  runPlatformCommand,
  spawnPlatform,
} from '../support/process.js';

/*
 * `platform backup` and `platform restore` through the real command line, on real embedded PostgreSQL clusters and
 * real files: a backup taken while the platform takes writes restores into a platform that serves them, signs with
 * the same authority and serves the same media; a damaged, interrupted or misplaced backup is refused; WAL recycled
 * by checkpoints during the copy is still in the backup (the replication slot).
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

const tempDir = async (prefix = 'ooh-backup-') => {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  // PostgreSQL's user (when the tests run as root) reaches the cluster through it.
  await chmod(dir, 0o755);
  cleanups.push(async () => {
    for (const pid of await processesNaming(dir)) process.kill(pid, 'SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
};

function stopLater(p: PlatformProcess) {
  cleanups.push(async () => {
    const timer = setTimeout(() => p.child.kill('SIGKILL'), 20_000);
    await p.stop('SIGTERM');
    clearTimeout(timer);
  });
}

const sha256 = (bytes: Buffer | Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function call(
  base: string,
  key: string,
  method: string,
  pathname: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<{ status: number; json: () => Promise<Record<string, unknown>>; bytes: () => Promise<Buffer> }> {
  const res = await fetch(`${base}${pathname}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined ? { 'content-type': contentType } : {}),
    },
    ...(body !== undefined
      ? { body: Buffer.isBuffer(body) ? new Uint8Array(body) : JSON.stringify(body) }
      : {}),
  });
  const buffer = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    json: async () => JSON.parse(buffer.toString('utf8')) as Record<string, unknown>,
    bytes: async () => buffer,
  };
}

/** A superuser session on the cluster a running platform serves on `dataDir`. */
async function superuser(dataDir: string): Promise<pg.Client> {
  const cluster = await openEmbeddedCluster({
    dir: path.join(dataDir, 'pgdata'),
    use: 'command',
    what: 'the backup test',
  });
  expect(cluster.owner).not.toBeNull();
  const client = new pg.Client({ connectionString: cluster.superuserUrl });
  client.on('error', () => {});
  await client.connect();
  cleanups.push(() => client.end());
  return client;
}

/**
 * `platform backup TARGET` or `platform restore BACKUP` as a child process that the test may kill, with the copy
 * held half-way when `hold` is given.
 */
function startCommand(command: 'backup' | 'restore', dataDir: string, folder: string, hold?: string) {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', MAIN, command, folder], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      ...(hold ? { PLATFORM_BACKUP_TEST_HOLD: hold } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => {
    stderr += c;
  });
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, stderr: () => stderr };
}

/** Waits for the command to hold at `file`; fails at once if it ended instead. */
async function waitForHold(
  file: string,
  backup: { child: { exitCode: number | null }; stderr: () => string },
  timeoutMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(file)) {
    if (Date.now() > deadline || backup.child.exitCode !== null) {
      throw new Error(`the command did not hold at ${file}: ${backup.stderr()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const isoDay = (offsetDays: number) =>
  new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);

/** The state of the first platform, made through its API before any backup. */
interface World {
  dataDir: string;
  admin: string;
  operatorKey: string;
  /** Sent for review before the backup; approved after the restore. */
  pending: { id: string; mediaSha256: string; media: Buffer };
  approved: { id: string; approvalNumber: string; envelope: string };
  rootPem: string;
}

let world: World;
let platform: PlatformProcess;
let latestMigration: string;

async function submission(base: string, key: string, structureId: string, seed: number) {
  const created = await call(base, key, 'POST', '/api/v1/submissions', {
    advertiser_name: 'Steppe Tea LLP',
    period_from: isoDay(10),
    period_to: isoDay(40),
    structure_ids: [structureId],
    category_id: 1564,
  });
  expect(created.status).toBe(201);
  const id = (await created.json())['id'] as string;
  const media = png(640, 320, seed);
  const uploaded = await call(base, key, 'PUT', `/api/v1/submissions/${id}/media`, media, 'image/png');
  expect(uploaded.status).toBe(200);
  expect((await call(base, key, 'POST', `/api/v1/submissions/${id}/send`)).status).toBe(200);
  return { id, mediaSha256: sha256(media), media };
}

async function approve(base: string, admin: string, operatorKey: string, id: string) {
  const approved = await call(base, admin, 'POST', `/api/v1/console/submissions/${id}/approve`, {});
  expect(approved.status).toBe(201);
  const body = await approved.json();
  const url = new URL(body['envelope_url'] as string);
  const envelope = await call(base, operatorKey, 'GET', url.pathname);
  expect(envelope.status).toBe(200);
  return {
    approvalNumber: body['approval_number'] as string,
    envelope: (await envelope.bytes()).toString('utf8'),
  };
}

/** Verifies an envelope against a root certificate read before any backup. */
async function verifiesAgainst(envelope: string, rootPem: string) {
  const result = await verifySignedDocument(envelope, null, parsePem(rootPem), new Date());
  return result.ok ? { ok: true } : { ok: false, code: result.error.code };
}

beforeAll(async () => {
  const migrations = await readMigrations();
  const last = migrations.at(-1)!;
  latestMigration = `${String(last.version).padStart(3, '0')}_${last.name}`;
  const dataDir = path.join(await tempDir(), 'data');
  const boot = await runPlatformCommand(['bootstrap'], { DATA_DIR: dataDir }, 120_000);
  expect(boot.code, boot.stderr).toBe(0);
  const admin = boot.stdout.trim().split('\n').at(-1)!;
  platform = await spawnPlatform([], { DATA_DIR: dataDir });
  stopLater(platform);
  // bootstrap and a started platform leave no mark of their start (restore.ts, markStart).
  expect((await readdir(dataDir)).filter((name) => name.startsWith('.starting-'))).toEqual([]);
  const api = platform.urls.api;
  const operator = await call(api, admin, 'POST', '/api/v1/console/organisations', {
    name: 'Outdoor Media LLP',
    kind: 'operator',
  });
  expect(operator.status).toBe(201);
  const operatorId = (await operator.json())['id'] as string;
  const key = await call(api, admin, 'POST', `/api/v1/console/organisations/${operatorId}/api-keys`, {
    name: 'submissions',
    scopes: ['write:submissions', 'read:creatives'],
  });
  expect(key.status).toBe(201);
  const operatorKey = (await key.json())['key'] as string;
  const structure = await call(api, admin, 'POST', '/api/v1/console/structures', {
    organisation_id: operatorId,
    code: 'ALM-BK-1',
    district: 'almaly',
    format: 'billboard',
  });
  expect(structure.status).toBe(201);
  const structureId = (await structure.json())['id'] as string;
  const first = await submission(api, operatorKey, structureId, 1);
  const issued = await approve(api, admin, operatorKey, first.id);
  const pending = await submission(api, operatorKey, structureId, 2);
  world = {
    dataDir,
    admin,
    operatorKey,
    pending,
    approved: { id: first.id, ...issued },
    rootPem: await readFile(path.join(dataDir, 'authority', 'root-ca.pem'), 'utf8'),
  };
  expect(await verifiesAgainst(issued.envelope, world.rootPem)).toEqual({ ok: true });
}, 300_000);

/** Organisations created one after another through the API until stopped; the names answered 201, in order. */
function writeLoop(base: string, admin: string, prefix: string) {
  const answered: string[] = [];
  let running = true;
  const done = (async () => {
    for (let n = 0; running; n++) {
      const name = `${prefix} ${n}`;
      const res = await call(base, admin, 'POST', '/api/v1/console/organisations', {
        name,
        kind: 'advertiser',
      });
      if (res.status === 201) answered.push(name);
    }
  })();
  return {
    answered,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

async function restoreAndStart(
  backup: string,
): Promise<{ dataDir: string; p: PlatformProcess; db: pg.Client }> {
  const dataDir = path.join(await tempDir('ooh-restored-'), 'data');
  const restored = await runPlatformCommand(['restore', backup], { DATA_DIR: dataDir }, 120_000);
  expect(restored.code, restored.stderr).toBe(0);
  const p = await spawnPlatform([], { DATA_DIR: dataDir });
  stopLater(p);
  return { dataDir, p, db: await superuser(dataDir) };
}

describe('platform backup and restore', () => {
  test('a backup taken while the platform takes writes restores every write answered before it, the same authority and the media', async () => {
    const target = path.join(await tempDir(), 'backup');
    const loop = writeLoop(platform.urls.api, world.admin, 'during backup');
    while (loop.answered.length < 5) await new Promise((r) => setTimeout(r, 50));
    const answeredBefore = [...loop.answered];
    const backup = await runPlatformCommand(['backup', target], { DATA_DIR: world.dataDir }, 240_000);
    await loop.stop();
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout.trim()).toBe(target);
    expect(backup.stderr).toContain(
      `using the embedded PostgreSQL of the platform (pid ${platform.child.pid})`,
    );
    expect(existsSync(`${target}.partial`)).toBe(false);
    // Writes went on while it copied.
    expect(loop.answered.length).toBeGreaterThan(answeredBefore.length);

    const manifest = JSON.parse(await readFile(path.join(target, 'manifest.json'), 'utf8'));
    expect(manifest).toMatchObject({
      format: 'ooh-platform-backup/1',
      platform: { latest_migration: latestMigration },
      database: { kind: 'embedded', timeline: 1, latest_migration: latestMigration },
    });
    const files = new Map<string, { kind: string; mode: number; sha256: string }>(
      manifest.files.map((f: { path: string }) => [f.path, f]),
    );
    expect(files.get('pgdata-credentials.json')).toMatchObject({ kind: 'secret', mode: 0o600 });
    expect(files.get('authority/envelope-signer.key')).toMatchObject({ kind: 'secret', mode: 0o600 });
    expect(files.get(`media/${world.pending.mediaSha256}`)).toMatchObject({
      kind: 'media',
      sha256: world.pending.mediaSha256,
    });
    expect(files.has('pgdata/backup_label')).toBe(true);
    expect(files.has('pgdata/postmaster.pid')).toBe(false);
    expect([...files.keys()].filter((f) => f.startsWith('pgdata/pg_wal/'))).toEqual(
      manifest.database.wal_segments.map((s: string) => `pgdata/pg_wal/${s}`),
    );
    // The platform goes on serving.
    expect((await fetch(`${platform.urls.api}/readyz`)).status).toBe(200);

    const restored = await restoreAndStart(target);
    // PostgreSQL replayed the WAL from the backup_label and finished recovery.
    expect(existsSync(path.join(restored.dataDir, 'pgdata', 'backup_label'))).toBe(false);
    const names = new Set(
      (await restored.db.query<{ name: string }>('SELECT name FROM organisations')).rows.map((r) => r.name),
    );
    for (const name of answeredBefore) expect(names.has(name), name).toBe(true);
    // What it holds of the loop is what was answered, in order, up to some point: never a gap.
    const kept = loop.answered.filter((n) => names.has(n));
    expect(kept).toEqual(loop.answered.slice(0, kept.length));
    expect(
      (
        await restored.db.query<{ label: string }>(
          "SELECT lpad(version::text, 3, '0') || '_' || name AS label FROM schema_migrations ORDER BY version DESC LIMIT 1",
        )
      ).rows[0]!.label,
    ).toBe(latestMigration);
    const counts = (
      await restored.db.query<{ submissions: number; approvals: number; keys: number }>(
        `SELECT (SELECT count(*)::int FROM submissions) AS submissions,
                (SELECT count(*)::int FROM approvals) AS approvals,
                (SELECT count(*)::int FROM api_keys) AS keys`,
      )
    ).rows[0]!;
    expect(counts).toEqual({ submissions: 2, approvals: 1, keys: 2 });

    const api = restored.p.urls.api;
    // The authority's keys still sign: an approval made after the restore verifies against the root read before.
    const issued = await approve(api, world.admin, world.operatorKey, world.pending.id);
    expect(issued.approvalNumber).not.toBe(world.approved.approvalNumber);
    expect(await verifiesAgainst(issued.envelope, world.rootPem)).toEqual({ ok: true });
    expect(await readFile(path.join(restored.dataDir, 'authority', 'root-ca.pem'), 'utf8')).toBe(
      world.rootPem,
    );
    // The media file is served, byte for byte.
    const media = await call(api, world.operatorKey, 'GET', `/api/v1/submissions/${world.pending.id}/media`);
    expect(media.status).toBe(200);
    expect(sha256(await media.bytes())).toBe(world.pending.mediaSha256);
    expect(await restored.p.stop('SIGTERM'), restored.p.output()).toBe(0);
  }, 600_000);

  test('a target that exists, a damaged file, a newer backup, a DATA_DIR that is not empty and one being restored are refused, each named; nothing is written', async () => {
    const folder = await tempDir();
    const target = path.join(folder, 'backup');
    const backup = await runPlatformCommand(['backup', target], { DATA_DIR: world.dataDir }, 240_000);
    expect(backup.code, backup.stderr).toBe(0);

    const again = await runPlatformCommand(['backup', target], { DATA_DIR: world.dataDir });
    expect(again.code).toBe(2);
    expect(again.stderr.trim()).toBe(
      `platform backup: ${target} exists; name a new folder (a backup never writes over anything)`,
    );

    const occupied = await runPlatformCommand(['restore', target], { DATA_DIR: world.dataDir });
    expect(occupied.code).toBe(2);
    expect(occupied.stderr.trim()).toMatch(
      new RegExp(
        `^platform restore: DATA_DIR ${world.dataDir} is not empty \\(.*\\); a restore writes into an empty or absent folder only, never over data$`,
      ),
    );

    // A restore that was interrupted left its claim (its staging folder): named, with what to do; and no platform
    // command starts on that DATA_DIR.
    const interrupted = path.join(folder, 'interrupted');
    await mkdir(path.join(interrupted, '.restoring'), { recursive: true });
    const leftover = await runPlatformCommand(['restore', target], { DATA_DIR: interrupted });
    expect(leftover.code).toBe(2);
    expect(leftover.stderr).toContain(
      `holds only .restoring: a restore is under way, or was interrupted; if no restore runs, remove ${path.join(interrupted, '.restoring')} and run the restore again`,
    );
    for (const command of [['run'], ['bootstrap'], ['backup', path.join(folder, 'from-interrupted')]]) {
      const refused = await runPlatformCommand(command, { DATA_DIR: interrupted });
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr.trim()).toBe(
        `platform ${command[0]}: ${path.join(interrupted, '.restoring')} exists: a restore into this DATA_DIR is under way, or was interrupted; wait for it to finish, or, if no restore runs, remove the DATA_DIR's contents and run the restore again`,
      );
    }
    expect(await readdir(interrupted)).toEqual(['.restoring']);

    // A restore under way (held half-way): a platform started on its DATA_DIR refuses, and so does a second
    // restore; a file written into DATA_DIR meanwhile (as by a platform that was starting) stops the restore before
    // anything is moved into place, and DATA_DIR is left as it was found.
    const restoring = path.join(folder, 'restoring');
    const hold = path.join(folder, 'restore-hold');
    const running = startCommand('restore', restoring, target, hold);
    await waitForHold(hold, running);
    const meanwhile = await runPlatformCommand(['run'], { DATA_DIR: restoring });
    expect(meanwhile.code, meanwhile.stderr).toBe(2);
    expect(meanwhile.stderr).toContain('a restore into this DATA_DIR is under way, or was interrupted');
    // Refused, it took its own mark away again.
    expect(await readdir(restoring)).toEqual(['.restoring']);
    const second = await runPlatformCommand(['restore', target], { DATA_DIR: restoring });
    expect(second.code).toBe(2);
    expect(second.stderr).toContain('holds only .restoring: a restore is under way');
    await writeFile(path.join(restoring, 'platform.json'), '{}');
    await rm(hold);
    expect(await running.exited).toBe(2);
    expect(running.stderr().trim().split('\n').at(-1)).toBe(
      `platform restore: platform.json appeared in DATA_DIR ${restoring} while the restore ran (a platform started on it?); nothing was moved into place: stop it, empty DATA_DIR and run the restore again`,
    );
    expect(await readdir(restoring)).toEqual(['platform.json']);

    // A platform that found no claim, so goes on starting, but has written nothing yet (held there): a restore
    // into its DATA_DIR stops, naming it, and leaves the folder as it was; the platform then starts as if nothing
    // happened. Before the marks, that restore found the folder empty and moved its files in, and the platform's
    // first files came after them: two platforms' data mixed.
    const racing = path.join(folder, 'racing');
    const startHold = path.join(folder, 'start-hold');
    const starting = spawnPlatform([], { DATA_DIR: racing, PLATFORM_START_TEST_HOLD: startHold });
    const deadline = Date.now() + 60_000;
    while (!existsSync(startHold) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const pid = (await readFile(startHold, 'utf8')).trim();
    expect(await readdir(racing)).toEqual([`.starting-${pid}`]);
    const refusedRestore = await runPlatformCommand(['restore', target], { DATA_DIR: racing });
    expect(refusedRestore.code, refusedRestore.stderr).toBe(2);
    expect(refusedRestore.stderr.trim()).toBe(
      `platform restore: a platform command (process ${pid}) is starting on DATA_DIR ${racing}: stop it and run the restore again (if no such process runs, remove ${path.join(racing, `.starting-${pid}`)})`,
    );
    expect(await readdir(racing)).toEqual([`.starting-${pid}`]);
    await rm(startHold);
    const started = await starting;
    stopLater(started);
    // Its mark goes once it has started (just after its listeners answer).
    await expect
      .poll(async () => (await readdir(racing)).includes(`.starting-${pid}`), { timeout: 10_000 })
      .toBe(false);
    expect(await readdir(racing)).toContain('pgdata');
    await started.stop();
    // A command killed while starting left its mark: the next start on the folder removes it (its process is gone).
    await writeFile(path.join(racing, '.starting-999999999'), '999999999\n');
    const restarted = await spawnPlatform([], { DATA_DIR: racing });
    stopLater(restarted);
    await expect
      .poll(async () => (await readdir(racing)).filter((name) => name.startsWith('.starting-')), {
        timeout: 10_000,
      })
      .toEqual([]);
    await restarted.stop();

    // A backup of a newer platform (its database at a migration this code does not have) is refused before any
    // copy: this platform would refuse the database it restored.
    const newer = path.join(folder, 'newer');
    await cp(target, newer, { recursive: true });
    const manifestFile = path.join(newer, 'manifest.json');
    const manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as {
      platform: { version: string };
      database: { latest_migration: string };
    };
    manifest.database.latest_migration = '999_from_the_future';
    await writeFile(manifestFile, JSON.stringify(manifest));
    const newerDir = path.join(folder, 'restored-newer');
    const tooNew = await runPlatformCommand(['restore', newer], { DATA_DIR: newerDir });
    expect(tooNew.code).toBe(2);
    expect(tooNew.stderr.trim()).toMatch(
      new RegExp(
        `^platform restore: the backup's database is at migration 999_from_the_future, newer than this platform's \\d{3}_\\w+; restore it with platform ${manifest.platform.version.replaceAll('.', '\\.')} or later$`,
      ),
    );
    expect(existsSync(newerDir)).toBe(false);

    for (const damaged of [
      'authority/seal-signer.key',
      'pgdata-credentials.json',
      `media/${world.pending.mediaSha256}`,
    ]) {
      const copy = path.join(folder, `damaged-${damaged.replaceAll('/', '-')}`);
      await cp(target, copy, { recursive: true });
      const file = path.join(copy, 'data', damaged);
      const bytes = await readFile(file);
      bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
      await writeFile(file, bytes);
      const dataDir = path.join(folder, `restored-${damaged.replaceAll('/', '-')}`);
      const refused = await runPlatformCommand(['restore', copy], { DATA_DIR: dataDir });
      expect(refused.code).toBe(1);
      expect(refused.stderr.trim()).toBe(
        `platform restore: the backup's ${damaged} does not have the SHA-256 of its manifest: the backup is damaged; nothing was restored`,
      );
      expect(existsSync(dataDir)).toBe(false);
    }
  }, 600_000);

  test('a backup killed mid-copy leaves only TARGET.partial, which restore refuses; its replication slot goes with it', async () => {
    const folder = await tempDir();
    const target = path.join(folder, 'backup');
    const hold = path.join(folder, 'hold');
    const running = startCommand('backup', world.dataDir, target, hold);
    await waitForHold(hold, running);
    const db = await superuser(world.dataDir);
    const pid = running.child.pid!;
    expect((await db.query('SELECT slot_name, temporary FROM pg_replication_slots')).rows).toEqual([
      { slot_name: `ooh_backup_${pid}`, temporary: true },
    ]);
    running.child.kill('SIGKILL');
    await running.exited;

    expect(existsSync(target)).toBe(false);
    expect(existsSync(`${target}.partial`)).toBe(true);
    expect(existsSync(path.join(`${target}.partial`, 'manifest.json'))).toBe(false);
    const partial = await runPlatformCommand(['restore', `${target}.partial`], {
      DATA_DIR: path.join(folder, 'a'),
    });
    expect(partial.code).toBe(2);
    expect(partial.stderr.trim()).toBe(
      `platform restore: ${target}.partial is a backup that was interrupted (a .partial folder), not a backup; restore from a complete one`,
    );
    expect(existsSync(path.join(folder, 'a'))).toBe(false);
    const absent = await runPlatformCommand(['restore', target], { DATA_DIR: path.join(folder, 'b') });
    expect(absent.code).toBe(2);
    expect(absent.stderr.trim()).toBe(`platform restore: ${target} does not exist`);
    // Renamed by hand, it is still no backup: it has no manifest.
    const renamed = path.join(folder, 'renamed');
    await cp(`${target}.partial`, renamed, { recursive: true });
    const noManifest = await runPlatformCommand(['restore', renamed], { DATA_DIR: path.join(folder, 'c') });
    expect(noManifest.code).toBe(2);
    expect(noManifest.stderr.trim()).toMatch(/^.* is no complete backup: it has no manifest\.json/);
    // The next backup to that target names what is left.
    const next = await runPlatformCommand(['backup', target], { DATA_DIR: world.dataDir });
    expect(next.code).toBe(2);
    expect(next.stderr.trim()).toBe(
      `platform backup: ${target}.partial is left from a backup that was interrupted; remove it and run the backup again`,
    );
    // The killed session's temporary slot and backup ended with it: nothing holds WAL back.
    const deadline = Date.now() + 10_000;
    while ((await db.query('SELECT 1 FROM pg_replication_slots')).rowCount !== 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await db.query('SELECT slot_name FROM pg_replication_slots')).rows).toEqual([]);
    await rm(`${target}.partial`, { recursive: true });
    const after = await runPlatformCommand(['backup', target], { DATA_DIR: world.dataDir }, 240_000);
    expect(after.code, after.stderr).toBe(0);
  }, 600_000);

  test('WAL written and recycled by checkpoints while the copy runs is kept for the backup, which restores with those writes', async () => {
    const folder = await tempDir();
    const target = path.join(folder, 'backup');
    const hold = path.join(folder, 'hold');
    const running = startCommand('backup', world.dataDir, target, hold);
    await waitForHold(hold, running);
    const db = await superuser(world.dataDir);
    const start = (
      await db.query<{ restart: string }>('SELECT restart_lsn::text AS restart FROM pg_replication_slots')
    ).rows[0]!.restart;
    const segmentAtHold = (
      await db.query<{ name: string }>('SELECT pg_walfile_name(pg_current_wal_lsn()) AS name')
    ).rows[0]!.name;
    // Writes through the API, a new WAL segment and a checkpoint, three times: without the slot the checkpoints
    // recycle the segments from the backup's start on, and replay could not reach its end.
    const written: string[] = [];
    for (let round = 0; round < 3; round++) {
      for (let n = 0; n < 5; n++) {
        const name = `during the hold ${round}.${n}`;
        const res = await call(platform.urls.api, world.admin, 'POST', '/api/v1/console/organisations', {
          name,
          kind: 'agency',
        });
        expect(res.status).toBe(201);
        written.push(name);
      }
      await db.query('SELECT pg_switch_wal()');
      await db.query('CHECKPOINT');
    }
    const now = (await db.query<{ name: string }>('SELECT pg_walfile_name(pg_current_wal_lsn()) AS name'))
      .rows[0]!.name;
    expect(now > segmentAtHold).toBe(true);
    await rm(hold);
    expect(await running.exited, running.stderr()).toBe(0);

    const manifest = JSON.parse(await readFile(path.join(target, 'manifest.json'), 'utf8'));
    // The slot reserved WAL from before the backup's start; the copy holds every segment from the start's on.
    const reserved = await db.query<{ before: boolean }>('SELECT $1::pg_lsn <= $2::pg_lsn AS before', [
      start,
      manifest.database.start_lsn,
    ]);
    expect(reserved.rows[0]!.before).toBe(true);
    expect(manifest.database.wal_segments[0] <= segmentAtHold).toBe(true);
    expect(manifest.database.wal_segments.length).toBeGreaterThanOrEqual(4);

    const restored = await restoreAndStart(target);
    const names = new Set(
      (await restored.db.query<{ name: string }>('SELECT name FROM organisations')).rows.map((r) => r.name),
    );
    for (const name of written) expect(names.has(name), name).toBe(true);
    expect(await restored.p.stop('SIGTERM'), restored.p.output()).toBe(0);
  }, 600_000);

  test('with DATABASE_URL the backup holds the secrets and media only and says how to back the server up', async () => {
    const database = await createTestDatabase({ migrate: false });
    cleanups.push(() => database.drop());
    const folder = await tempDir();
    const dataDir = path.join(folder, 'data');
    const env = { DATABASE_URL: database.url, DATA_DIR: dataDir };
    const boot = await runPlatformCommand(['bootstrap'], env, 120_000);
    expect(boot.code, boot.stderr).toBe(0);
    // The authority and the device CA are made on a platform's first start.
    const p = await spawnPlatform([], env);
    stopLater(p);
    const target = path.join(folder, 'backup');
    const backup = await runPlatformCommand(['backup', target], env, 120_000);
    expect(backup.code, backup.stderr).toBe(0);
    const url = new URL(database.url);
    expect(backup.stderr).toContain(
      'the database is NOT in this backup: DATABASE_URL names a PostgreSQL server, whose data is backed up with its own',
    );
    const hint = backup.stderr.split('\n').find((l) => l.trim().startsWith('pg_basebackup'))!;
    expect(hint.trim()).toBe(
      `pg_basebackup --host=${url.searchParams.get('host') ?? url.hostname} --port=${url.port || '5432'} ` +
        `--username=${decodeURIComponent(url.username)} --pgdata=${target}-database --wal-method=stream ` +
        '--checkpoint=fast --progress',
    );
    // The password of DATABASE_URL is never printed.
    if (url.password) expect(backup.stderr).not.toContain(decodeURIComponent(url.password));
    const manifest = JSON.parse(await readFile(path.join(target, 'manifest.json'), 'utf8'));
    expect(manifest.database).toEqual({ kind: 'external' });
    const paths = manifest.files.map((f: { path: string }) => f.path) as string[];
    expect(paths.some((f) => f.startsWith('pgdata'))).toBe(false);
    expect(paths).toContain('authority/root-ca.key');
    expect(await p.stop('SIGTERM'), p.output()).toBe(0);

    const restoredDir = path.join(folder, 'restored');
    const restored = await runPlatformCommand(['restore', target], { ...env, DATA_DIR: restoredDir });
    expect(restored.code, restored.stderr).toBe(0);
    expect(await readFile(path.join(restoredDir, 'authority', 'root-ca.key'))).toEqual(
      await readFile(path.join(dataDir, 'authority', 'root-ca.key')),
    );
  }, 300_000);
});
