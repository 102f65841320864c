import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, mkdtemp, readdir, readlink, realpath, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { DEMO_USER_EMAIL } from '../../src/bootstrap.js';
import { freePort } from '../../src/db/embedded.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { REPO_ROOT } from '../support/process.js';

/*
 * Issue "The public can check, and the console and simulator hold a city's fleet", item 3: `npm start` lands a
 * newcomer in the console: it prints the console's address and a demo sign-in (an authority administrator made for
 * the demo, its password generated and shown once), and that sign-in works. The real script runs as a child process
 * (without its demo fleet) against a test database.
 */

const START = path.join(REPO_ROOT, 'scripts/start.ts');
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

interface Started {
  child: ChildProcess;
  banner: string;
  api: string;
  port: number;
  /** Everything it printed on stdout so far. */
  output: () => string;
}

/**
 * Runs `npm start -- --no-fleet ...` until its banner is printed: on `db`, or on its embedded PostgreSQL in
 * `dataDir` when `db` is null. With `processGroup` it runs in a process group of its own, as at a terminal.
 */
async function start(
  db: TestDatabase | null,
  dataDir: string,
  args: string[] = [],
  options: { processGroup?: boolean } = {},
): Promise<Started> {
  const ports = {
    API_PORT: await freePort(),
    AGENTS_PORT: await freePort(),
    DEVICES_PORT: await freePort(),
    VERIFY_PORT: await freePort(),
  };
  const child = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', START, '--no-fleet', ...args],
    {
      cwd: REPO_ROOT,
      env: {
        ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'DATABASE_URL')),
        ...(db ? { DATABASE_URL: db.url } : {}),
        DATA_DIR: dataDir,
        ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: options.processGroup === true,
    },
  );
  cleanups.push(() => stop(child));
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (c) => {
    stderr += c;
  });
  const banner = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`npm start printed no banner\n${stdout}\n${stderr}`)),
      90_000,
    );
    child.stdout!.on('data', (c) => {
      stdout += c;
      if (stdout.includes('Ctrl-C stops')) {
        clearTimeout(timer);
        resolve(stdout);
      }
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited ${code}\n${stdout}\n${stderr}`));
    });
  });
  return {
    child,
    banner,
    api: `http://127.0.0.1:${ports.API_PORT}`,
    port: ports.API_PORT,
    output: () => stdout,
  };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const closed = new Promise((resolve) => child.once('close', resolve));
  child.kill('SIGINT');
  await closed;
}

const signIn = (api: string, email: string, password: string) =>
  fetch(`${api}/api/v1/console/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });

describe('npm start: the console and a demo sign-in', () => {
  test('the first start makes the sign-in and shows its password once; it signs in; a new one can be asked for', async () => {
    const db = await createTestDatabase({ migrate: false });
    cleanups.push(() => db.drop());
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-start-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));

    // First start: the console's address, the sign-in and its password.
    const first = await start(db, dataDir);
    expect(first.banner).toContain(`console  ${first.api}/console/`);
    const shown = new RegExp(
      `sign in  ${DEMO_USER_EMAIL.replace('.', '\\.')}  password (\\S+)  \\(shown this once`,
    ).exec(first.banner);
    expect(shown, first.banner).not.toBeNull();
    const password = shown![1]!;
    expect(password.length).toBeGreaterThanOrEqual(16);
    const session = await signIn(first.api, DEMO_USER_EMAIL, password);
    expect(session.status).toBe(200);
    const view = (await session.json()) as { user: { email: string; role: string } };
    expect(view.user).toMatchObject({ email: DEMO_USER_EMAIL, role: 'admin' });
    expect(session.headers.get('set-cookie')).toBeTruthy();
    await stop(first.child);

    // Second start: the password is not shown again (only its hash is kept), and says how to get a new one.
    const second = await start(db, dataDir);
    expect(second.banner).toContain(`sign in  ${DEMO_USER_EMAIL}  (its password was shown when it was made`);
    expect(second.banner).toContain('--new-demo-password');
    expect(second.banner).not.toContain(password);
    expect((await signIn(second.api, DEMO_USER_EMAIL, password)).status).toBe(200);
    await stop(second.child);

    // --new-demo-password: a new one, shown once; the old one no longer signs in.
    const third = await start(db, dataDir, ['--new-demo-password']);
    const renewed = /password (\S+) {2}\(shown this once/.exec(third.banner);
    expect(renewed, third.banner).not.toBeNull();
    expect(renewed![1]).not.toBe(password);
    expect((await signIn(third.api, DEMO_USER_EMAIL, password)).status).toBe(401);
    expect((await signIn(third.api, DEMO_USER_EMAIL, renewed![1]!)).status).toBe(200);
    await stop(third.child);
  }, 240_000);
});

/** The processes whose working directory is `dir`: a PostgreSQL server and each of its backends run in its cluster. */
async function processesIn(dir: string): Promise<number[]> {
  const real = await realpath(dir);
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    // A process gone meanwhile, or a zombie (no working directory): not running.
    const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => null);
    if (cwd === real) pids.push(Number(entry));
  }
  return pids;
}

const waitFor = (check: () => boolean, ms: number) =>
  new Promise<boolean>((resolve) => {
    const deadline = Date.now() + ms;
    const poll = () => {
      if (check()) resolve(true);
      else if (Date.now() > deadline) resolve(false);
      else setTimeout(poll, 50);
    };
    poll();
  });

describe('npm start: Ctrl-C with the embedded PostgreSQL', () => {
  test('a second Ctrl-C exits at once and still stops PostgreSQL: no process of its data directory is left', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-start-'));
    // PostgreSQL's user (postgres, when the tests run as root) must reach the cluster through this folder.
    await chmod(dataDir, 0o755);
    const pgdata = path.join(dataDir, 'pgdata');
    cleanups.push(async () => {
      // What the old code left running, so that the run leaves nothing behind either way.
      for (const pid of await processesIn(pgdata).catch(() => [])) process.kill(pid, 'SIGKILL');
      await rm(dataDir, { recursive: true, force: true });
    });
    const started = await start(null, dataDir, [], { processGroup: true });
    const { child } = started;
    expect(await processesIn(pgdata)).not.toEqual([]);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // A request whose body is still arriving holds the first Ctrl-C's clean stop (the listeners answer what is in
    // flight), as a slow client would: the second Ctrl-C comes while PostgreSQL still runs.
    const slow = connect(started.port, '127.0.0.1');
    cleanups.push(async () => slow.destroy());
    await new Promise<void>((resolve) => slow.once('connect', () => resolve()));
    slow.write(
      'POST /api/v1/console/session HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        'Content-Length: 100\r\n\r\n{"email":',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));

    // Ctrl-C at the terminal: SIGINT to the process group (PostgreSQL has a group of its own).
    process.kill(-child.pid!, 'SIGINT');
    expect(await waitFor(() => started.output().includes('stopping ...'), 10_000), started.output()).toBe(
      true,
    );
    // Still stopping cleanly, held by the slow request.
    expect(await waitFor(() => child.exitCode !== null, 1_000)).toBe(false);
    expect(await processesIn(pgdata)).not.toEqual([]);

    process.kill(-child.pid!, 'SIGINT');
    expect(await exited, started.output()).toBe(130);
    // Nothing of the cluster runs once npm start has exited.
    expect(await processesIn(pgdata)).toEqual([]);
    expect(started.output()).toContain('stopping at once');
    slow.destroy();

    // The next start finds no server to stop (it recovers from the WAL) and serves.
    const again = await start(null, dataDir, [], { processGroup: true });
    expect((await fetch(`${again.api}/readyz`)).status).toBe(200);
    await stop(again.child);
    expect(await processesIn(pgdata)).toEqual([]);
  }, 240_000);
});
