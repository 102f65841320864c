import { spawn } from 'node:child_process';
import { chmod, chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { postgresUser, processAlive } from '../../src/db/embedded-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import {
  type PlatformProcess,
  processesNaming,
  runPlatformCommand,
  spawnPlatform,
} from '../support/process.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

async function database(): Promise<TestDatabase> {
  const d = await createTestDatabase({ migrate: false });
  cleanups.push(() => d.drop());
  return d;
}
const tempDir = () => mkdtemp(path.join(os.tmpdir(), 'ooh-cli-'));

/** A data directory for an embedded PostgreSQL, removed after the file with whatever still runs on it. */
async function embeddedDataDir(): Promise<string> {
  const dir = await tempDir();
  await chmod(dir, 0o755);
  cleanups.push(async () => {
    for (const pid of await processesNaming(path.join(dir, 'pgdata'))) process.kill(pid, 'SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Stops a platform left by a failed test: SIGTERM first, so its PostgreSQL is stopped too. */
function stopLater(p: PlatformProcess) {
  cleanups.push(async () => {
    const timer = setTimeout(() => p.child.kill('SIGKILL'), 20_000);
    await p.stop('SIGTERM');
    clearTimeout(timer);
  });
}

/** The pid of the PostgreSQL server running on a data directory's cluster. */
async function postmasterPid(dataDir: string): Promise<number> {
  return Number((await readFile(path.join(dataDir, 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

const keyOf = (stdout: string) => stdout.trim().split('\n').at(-1)!;

async function json(res: Response) {
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
const post = (url: string, key: string, body: unknown) =>
  fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('platform command line', () => {
  test('bootstrap is idempotent and prints the admin key alone on its last line', async () => {
    const d = await database();
    const env = { DATABASE_URL: d.url, DATA_DIR: await tempDir() };
    const first = await runPlatformCommand(['bootstrap'], env);
    expect(first.code).toBe(0);
    const key1 = first.stdout.trim().split('\n').at(-1)!;
    expect(key1).toMatch(/^ooh_[A-Za-z0-9_-]{40,}$/);
    const second = await runPlatformCommand(['bootstrap'], env);
    expect(second.code).toBe(0);
    const key2 = second.stdout.trim().split('\n').at(-1)!;
    expect(key2).not.toBe(key1);
    const { rows } = await d.db.query(
      "SELECT count(*)::int AS n FROM organisations WHERE kind = 'authority'",
    );
    expect(rows[0].n).toBe(1);
  });

  test('a bad configuration exits 2 naming the value', async () => {
    const res = await runPlatformCommand(['run'], { API_PORT: 'http', DATA_DIR: await tempDir() });
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/API_PORT: "http" is not a port/);
  });

  test('a database the migrations cannot accept stops the start with the error', async () => {
    const d = await database();
    await d.db.query(
      'CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz)',
    );
    await d.db.query("INSERT INTO schema_migrations VALUES (999, 'unknown', now())");
    const res = await runPlatformCommand(['run'], { DATABASE_URL: d.url, DATA_DIR: await tempDir() });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/migration 999 \(unknown\)/);
  });

  test('two instances on one database serve together; numbers stay gap-free; the test clock is per flag', async () => {
    const d = await database();
    const dataDir = await tempDir();
    const env = { DATABASE_URL: d.url, DATA_DIR: dataDir };
    const boot = await runPlatformCommand(['bootstrap'], env);
    const admin = boot.stdout.trim().split('\n').at(-1)!;
    const a: PlatformProcess = await spawnPlatform(['--test-clock'], env);
    cleanups.push(() => a.stop('SIGKILL'));
    const b: PlatformProcess = await spawnPlatform([], { ...env, DATA_DIR: await tempDir() });
    cleanups.push(() => b.stop('SIGKILL'));

    const org = await json(
      await post(`${a.urls.api}/api/v1/console/organisations`, admin, { name: 'Op', kind: 'operator' }),
    );
    expect(org.status).toBe(201);
    const key = await json(
      await post(`${b.urls.api}/api/v1/console/organisations/${org.body['id']}/api-keys`, admin, {
        name: 'k',
        scopes: ['write:submissions'],
      }),
    );
    const structure = await json(
      await post(`${a.urls.api}/api/v1/console/structures`, admin, {
        organisation_id: org.body['id'],
        code: 'TWIN-1',
        district: 'medeu',
        format: 'led',
      }),
    );
    const body = {
      advertiser_name: 'Twin Tea',
      period_from: '2027-01-01',
      period_to: '2027-01-31',
      structure_ids: [structure.body['id']],
    };
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        post(`${(i % 2 ? a : b).urls.api}/api/v1/submissions`, key.body['key'] as string, body).then(json),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(16).fill(201));
    const serials = results.map((r) => Number(String(r.body['number']).split('-')[2])).sort((x, y) => x - y);
    expect(serials).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));

    const set = await fetch(`${a.urls.api}/api/v1/console/clock`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ now: '2030-01-01T00:00:00Z', frozen: true }),
    });
    expect(set.status).toBe(200);
    expect(((await set.json()) as { now: string }).now).toBe('2030-01-01T00:00:00.000Z');
    const absent = await fetch(`${b.urls.api}/api/v1/console/clock`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ now: '2030-01-01T00:00:00Z' }),
    });
    expect(absent.status).toBe(404);

    expect(await a.stop('SIGTERM'), a.output()).toBe(0);
    expect(await b.stop('SIGTERM'), b.output()).toBe(0);
  });

  test('without DATABASE_URL an embedded PostgreSQL runs in the data directory and stops on SIGTERM', async () => {
    const dataDir = await tempDir();
    const boot = await runPlatformCommand(['bootstrap'], { DATA_DIR: dataDir }, 120_000);
    expect(boot.code, boot.stderr).toBe(0);
    const admin = boot.stdout.trim().split('\n').at(-1)!;
    const p = await spawnPlatform([], { DATA_DIR: dataDir });
    cleanups.push(() => p.stop('SIGKILL'));
    const res = await fetch(`${p.urls.api}/api/v1/console/organisations`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(res.status).toBe(200);
    expect(await p.stop('SIGTERM'), p.output()).toBe(0);
    // The cluster was stopped cleanly: a second start on the same folder works.
    const again = await spawnPlatform([], { DATA_DIR: dataDir });
    cleanups.push(() => again.stop('SIGKILL'));
    expect((await fetch(`${again.urls.api}/readyz`)).status).toBe(200);
    expect(await again.stop('SIGTERM'), again.output()).toBe(0);
  }, 180_000);
  test('bootstrap beside a running platform uses its PostgreSQL and prints the key id on stderr, the key last on stdout', async () => {
    const dataDir = await embeddedDataDir();
    const p = await spawnPlatform([], { DATA_DIR: dataDir });
    stopLater(p);
    const boot = await runPlatformCommand(['bootstrap'], { DATA_DIR: dataDir }, 120_000);
    expect(boot.code, boot.stderr).toBe(0);
    const lines = boot.stderr.trim().split('\n');
    expect(lines[0]).toBe(`using the embedded PostgreSQL of the platform (pid ${p.child.pid})`);
    const keyId =
      /^admin API key ([0-9a-f-]{36}) \(scope console:admin\), shown once on the next line;$/.exec(
        lines.find((l) => l.startsWith('admin API key')) ?? '',
      )?.[1];
    expect(keyId).toBeDefined();
    const key = keyOf(boot.stdout);
    expect(key).toMatch(/^ooh_[A-Za-z0-9_-]{40,}$/);
    // The running platform knows the key at once, by the id that was printed.
    const res = await fetch(`${p.urls.api}/api/v1/console/api-keys/${keyId}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: keyId, scopes: ['console:admin'] });
    // The platform and its PostgreSQL go on as before.
    expect((await fetch(`${p.urls.api}/readyz`)).status).toBe(200);
    expect(await p.stop('SIGTERM'), p.output()).toBe(0);
  }, 180_000);

  test('a second platform on a data directory a live platform serves refuses in one line naming its pid', async () => {
    const dataDir = await embeddedDataDir();
    const p = await spawnPlatform([], { DATA_DIR: dataDir });
    stopLater(p);
    const second = await runPlatformCommand(['run'], {
      DATA_DIR: dataDir,
      API_PORT: '0',
      AGENTS_PORT: '0',
      DEVICES_PORT: '0',
      VERIFY_PORT: '0',
    });
    expect(second.code).toBe(1);
    expect(second.stderr.trim().split('\n')).toEqual([
      `the embedded PostgreSQL in ${path.join(dataDir, 'pgdata')} is in use by the platform (pid ${p.child.pid}); stop it first, or use another DATA_DIR`,
    ]);
    expect((await fetch(`${p.urls.api}/readyz`)).status).toBe(200);
    expect(await p.stop('SIGTERM'), p.output()).toBe(0);
  }, 180_000);

  test('after kill -9 of the platform, the next start stops the PostgreSQL it left running and serves the same data', async () => {
    const dataDir = await embeddedDataDir();
    const boot = await runPlatformCommand(['bootstrap'], { DATA_DIR: dataDir }, 120_000);
    expect(boot.code, boot.stderr).toBe(0);
    const admin = keyOf(boot.stdout);
    const killed = await spawnPlatform([], { DATA_DIR: dataDir });
    stopLater(killed);
    const orphan = await postmasterPid(dataDir);
    killed.child.kill('SIGKILL');
    await killed.exited;
    // Its PostgreSQL is still running, with nobody to stop it.
    expect(processAlive(orphan)).toBe(true);

    const next = await spawnPlatform([], { DATA_DIR: dataDir });
    stopLater(next);
    expect(processAlive(orphan)).toBe(false);
    expect(await postmasterPid(dataDir)).not.toBe(orphan);
    expect(next.output()).toContain('stopped the embedded PostgreSQL a killed platform had left running');
    const res = await fetch(`${next.urls.api}/api/v1/console/organisations`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(res.status).toBe(200);
    expect(await next.stop('SIGTERM'), next.output()).toBe(0);
    expect(await processesNaming(path.join(dataDir, 'pgdata'))).toEqual([]);
  }, 180_000);

  test('after kill -9 of its PostgreSQL, the platform answers 503 meanwhile, starts it again and serves the same data', async () => {
    const dataDir = await embeddedDataDir();
    const boot = await runPlatformCommand(['bootstrap'], { DATA_DIR: dataDir }, 120_000);
    expect(boot.code, boot.stderr).toBe(0);
    const admin = keyOf(boot.stdout);
    const platform = await spawnPlatform([], { DATA_DIR: dataDir });
    stopLater(platform);
    const before = await post(`${platform.urls.api}/api/v1/console/organisations`, admin, {
      name: 'Before the crash LLP',
      kind: 'operator',
    });
    expect(before.status).toBe(201);

    // The out-of-memory killer, or a crash: the postmaster goes at once, its backends soon after.
    const killed = await postmasterPid(dataDir);
    process.kill(killed, 'SIGKILL');
    // Until it is started again (the log says so) and answers: every answer meanwhile is 200 (a backend not yet
    // gone) or 503 with Retry-After, never 500.
    const deadline = Date.now() + 90_000;
    for (;;) {
      const res = await fetch(`${platform.urls.api}/api/v1/console/organisations`, {
        headers: { authorization: `Bearer ${admin}` },
      });
      if (res.status !== 200) {
        expect(res.status, await res.text()).toBe(503);
        expect(res.headers.get('retry-after')).toBe('5');
      } else {
        const names = ((await res.json()) as { items: { name: string }[] }).items.map((o) => o.name);
        expect(names).toContain('Before the crash LLP');
        if (platform.output().includes('the embedded PostgreSQL was started again and serves')) break;
      }
      if (Date.now() > deadline) throw new Error(`PostgreSQL was not started again:\n${platform.output()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await postmasterPid(dataDir)).not.toBe(killed);
    const after = await post(`${platform.urls.api}/api/v1/console/organisations`, admin, {
      name: 'After the crash LLP',
      kind: 'operator',
    });
    expect(after.status).toBe(201);
    expect(platform.output()).toContain('the embedded PostgreSQL exited; requests are answered 503');
    expect(platform.output()).toContain('the embedded PostgreSQL was started again and serves');
    expect(platform.output()).not.toContain('unhandled error');
    expect(await platform.stop('SIGTERM'), platform.output()).toBe(0);
    expect(await processesNaming(path.join(dataDir, 'pgdata'))).toEqual([]);
  }, 180_000);

  test("a data directory PostgreSQL itself refuses is named with the pid and PostgreSQL's own line", async () => {
    const dataDir = await embeddedDataDir();
    const boot = await runPlatformCommand(['bootstrap'], { DATA_DIR: dataDir }, 120_000);
    expect(boot.code, boot.stderr).toBe(0);
    // A live process of PostgreSQL's user named in postmaster.pid that is no server of this directory (a pid
    // reused after a reboot, say): the platform must not stop it, and PostgreSQL refuses to start.
    const user = await postgresUser();
    const other = spawn('sleep', ['120'], { ...(user.other ? { uid: user.uid, gid: user.gid } : {}) });
    cleanups.push(async () => other.kill('SIGKILL'));
    const pgdata = path.join(dataDir, 'pgdata');
    const lockFile = path.join(pgdata, 'postmaster.pid');
    await writeFile(lockFile, `${other.pid}\n${pgdata}\n0\n5432\n\n\n0 0\nready   \n`, { mode: 0o600 });
    if (user.other) await chown(lockFile, user.uid, user.gid);

    const res = await runPlatformCommand(['run'], {
      DATA_DIR: dataDir,
      API_PORT: '0',
      AGENTS_PORT: '0',
      DEVICES_PORT: '0',
      VERIFY_PORT: '0',
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      `data directory ${pgdata} is in use by pid ${other.pid} (PostgreSQL: FATAL: lock file "postmaster.pid" ` +
        `already exists); stop that process, or, if it is no PostgreSQL of this directory, remove ${lockFile} and ` +
        'start again\n',
    );
    expect(processAlive(other.pid!)).toBe(true);
    // Doing as told: the next start works.
    await rm(lockFile);
    const next = await spawnPlatform([], { DATA_DIR: dataDir });
    stopLater(next);
    expect((await fetch(`${next.urls.api}/readyz`)).status).toBe(200);
    expect(await next.stop('SIGTERM'), next.output()).toBe(0);
  }, 180_000);

  test('Ctrl-C closes the listeners, the schedulers and the pool before PostgreSQL, quietly, and leaves no process', async () => {
    const dataDir = await embeddedDataDir();
    const p = await spawnPlatform([], { DATA_DIR: dataDir }, { processGroup: true });
    stopLater(p);
    const postgres = await postmasterPid(dataDir);
    // Connections in the pool, as a platform that served a while has them.
    for (let i = 0; i < 5; i++) {
      await Promise.all([fetch(`${p.urls.api}/readyz`), fetch(`${p.urls.verify}/readyz`)]);
    }
    // SIGINT to the whole process group, as the terminal sends it.
    expect(await p.interrupt(), p.output()).toBe(0);
    expect(p.output()).not.toMatch(
      /terminating connection|administrator command|connection lost|DatabaseError/,
    );
    expect(processAlive(postgres)).toBe(false);
    expect(await processesNaming(path.join(dataDir, 'pgdata'))).toEqual([]);
  }, 180_000);
});
