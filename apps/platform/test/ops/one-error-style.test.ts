import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { freePort } from '../../src/db/embedded.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { REPO_ROOT, runPlatformCommand, spawnPlatform } from '../support/process.js';

/*
 * Issue "What a newcomer tripped over", item 6: one error style. Each failure of `npm run platform` and `npm start`
 * is one plain line naming the problem and what to do, without a stack; exit 2 for bad arguments and configuration,
 * 1 for a failure at run time. The real commands run as child processes.
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

const tempDir = async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-ops-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
};

async function database(): Promise<TestDatabase> {
  const d = await createTestDatabase({ migrate: false });
  cleanups.push(() => d.drop());
  return d;
}

/** A port some other program holds. */
async function takenPort(): Promise<number> {
  const port = await freePort();
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return port;
}

const START = path.join(REPO_ROOT, 'scripts/start.ts');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `npm start` (its script, as npm runs it) to completion. */
function runStart(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', START, ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => {
      stdout += c;
    });
    child.stderr.on('data', (c) => {
      stderr += c;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`npm start ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** No stack frame, no Node error dump. */
const NO_STACK = /^\s+at |node:internal|\{\n\s+code:|TypeError|errno:/m;

describe('the platform command', () => {
  test('--help prints the usage on stdout and exits 0', async () => {
    const res = await runPlatformCommand(['--help'], { DATA_DIR: await tempDir() });
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^usage: platform \[run\]/);
    expect(res.stdout).toMatch(/LOG_FORMAT/);
    expect(res.stderr).toBe('');
  });

  test('an unknown option or command is one line and exit 2', async () => {
    const dir = await tempDir();
    const option = await runPlatformCommand(['--verbose'], { DATA_DIR: dir });
    expect(option.code).toBe(2);
    expect(option.stderr).toBe("platform: Unknown option '--verbose' (platform --help lists the options)\n");
    const command = await runPlatformCommand(['serve'], { DATA_DIR: dir });
    expect(command.code).toBe(2);
    expect(command.stderr).toBe(
      'platform: unknown command "serve"; the commands are run, bootstrap, backup and restore (platform --help)\n',
    );
    expect(await readdir(dir)).toEqual([]);
  });

  test('a bad API_PORT is named, exit 2, no stack', async () => {
    const res = await runPlatformCommand(['run'], { API_PORT: '80800', DATA_DIR: await tempDir() });
    expect(res.code).toBe(2);
    expect(res.stderr).toBe('invalid configuration:\n  - API_PORT: "80800" is not a port number (0-65535)\n');
  });

  test('a port in use names the host and the variable and stops before the database is migrated', async () => {
    const d = await database();
    const dir = await tempDir();
    const port = await takenPort();
    const res = await runPlatformCommand(['run'], {
      DATABASE_URL: d.url,
      DATA_DIR: dir,
      API_PORT: '0',
      AGENTS_PORT: '0',
      DEVICES_PORT: '0',
      VERIFY_PORT: String(port),
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      `VERIFY_PORT: 127.0.0.1:${port} is already in use by another program: stop it, or set VERIFY_PORT to a free port\n`,
    );
    // Nothing was done to the database: no migration ran, not even the table that records them.
    const { rows } = await d.db.query("SELECT to_regclass('schema_migrations') AS t");
    expect(rows).toEqual([{ t: null }]);
    expect(await readdir(dir)).toEqual([]);
  });

  test('a HOST that is not an address of this machine is one line', async () => {
    const res = await runPlatformCommand(['run'], { HOST: '192.0.2.1', DATA_DIR: await tempDir() });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      'HOST: 192.0.2.1 is not an address of this machine: set HOST to one of its addresses (127.0.0.1, or 0.0.0.0 for all)\n',
    );
  });

  test('a DATABASE_URL nobody answers is one line naming it', async () => {
    const port = await freePort();
    const res = await runPlatformCommand(['run'], {
      DATABASE_URL: `postgres://u:p@127.0.0.1:${port}/db`,
      DATA_DIR: await tempDir(),
      API_PORT: '0',
      AGENTS_PORT: '0',
      DEVICES_PORT: '0',
      VERIFY_PORT: '0',
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      `cannot reach the database of DATABASE_URL (ECONNREFUSED 127.0.0.1:${port}): is PostgreSQL running there? Unset DATABASE_URL for the embedded one\n`,
    );
  });

  test('a DATA_DIR that is a file is one line naming it, exit 2, and the file is left as it was', async () => {
    const file = path.join(await tempDir(), 'data');
    await writeFile(file, 'not a folder');
    for (const command of [['run'], ['bootstrap']]) {
      const res = await runPlatformCommand(command, { DATA_DIR: file });
      expect(res.code, res.stderr).toBe(2);
      expect(res.stderr).toBe(
        `DATA_DIR ${file} is not a folder (a file has its name, or a part of its path): set DATA_DIR to a folder\n`,
      );
    }
    expect(await readFile(file, 'utf8')).toBe('not a folder');
  });

  test('npm start on a DATA_DIR a restore has claimed is one line, exit 2, and writes nothing', async () => {
    const dir = await tempDir();
    await mkdir(path.join(dir, '.restoring'));
    const res = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', START, '--no-fleet'], {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          DATA_DIR: dir,
          API_PORT: '0',
          AGENTS_PORT: '0',
          DEVICES_PORT: '0',
          VERIFY_PORT: '0',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (c) => {
        output += c;
      });
      child.stderr.on('data', (c) => {
        output += c;
      });
      child.on('exit', (code) => resolve({ code, output }));
    });
    expect(res.code, res.output).toBe(2);
    expect(res.output).toBe(
      `npm start: ${path.join(dir, '.restoring')} exists: a restore into this DATA_DIR is under way, or was interrupted; wait for it to finish, or, if no restore runs, remove the DATA_DIR's contents and run the restore again\n`,
    );
    expect(await readdir(dir)).toEqual(['.restoring']);
  });

  test('connections the database ends are one short line for the pool, not a stack each', async () => {
    const d = await database();
    const p = await spawnPlatform([], { DATABASE_URL: d.url, DATA_DIR: await tempDir() });
    cleanups.push(() => p.stop('SIGKILL'));
    // Connections in the pool, as a platform that served a while has them.
    for (let i = 0; i < 4; i++) {
      await Promise.all([1, 2, 3, 4].map(() => fetch(`${p.urls.api}/readyz`)));
    }
    const before = p.output().length;
    // What a restart of PostgreSQL does to them: "terminating connection due to administrator command".
    const { rows } = await d.db.query<{ n: number }>(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'ooh-platform'`,
    );
    expect(rows[0]!.n).toBeGreaterThan(1);
    // The pool hears of it asynchronously: wait for the line (a busy machine may take a while), then a moment for
    // any further line the other connections might still write.
    await expect
      .poll(() => p.output().slice(before), { timeout: 10_000 })
      .toContain('database connection lost; the next query reconnects');
    await new Promise((resolve) => setTimeout(resolve, 500));
    const said = p.output().slice(before);
    const lines = said.trim().split('\n');
    expect(lines, said).toHaveLength(1);
    // One line for the burst, whichever lost connection came first: an idle one of the pool (57P01), a scheduler's
    // whose query was running (57P01, or EPIPE when it wrote to the terminated backend), or a scheduler's next query
    // on a client already lost (pg: "not queryable", no code). A run once began the burst with the last, and had the
    // EPIPE add an error line of its own, before db/pool.ts kept the errors that end its connections.
    const line = JSON.parse(lines[0]!) as { level: number; msg: string; code?: string; reason: string };
    expect(line).toMatchObject({ level: 40, msg: 'database connection lost; the next query reconnects' });
    expect(
      line.code === '57P01' ||
        line.code === 'EPIPE' ||
        (line.code === undefined && /^Client has encountered a connection error/.test(line.reason)),
      said,
    ).toBe(true);
    expect(said).not.toMatch(/stack|parser\.ts/);
    // The next query reconnects.
    expect((await fetch(`${p.urls.api}/readyz`)).status).toBe(200);
    expect(await p.stop('SIGTERM'), p.output()).toBe(0);
  });
});

describe('npm start', () => {
  test('--help prints its usage and exits 0', async () => {
    const res = await runStart(['--help'], { DATA_DIR: await tempDir() });
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^usage: npm start/);
    expect(res.stderr).toBe('');
  });

  test('an unknown option, a bad --players and a bad API_PORT are one line each, exit 2', async () => {
    const dir = await tempDir();
    const option = await runStart(['--fleet'], { DATA_DIR: dir });
    expect(option.code).toBe(2);
    expect(option.stderr).toBe(
      "npm start: Unknown option '--fleet' (npm start -- --help lists the options)\n",
    );
    const players = await runStart(['--players', 'many'], { DATA_DIR: dir });
    expect(players.code).toBe(2);
    expect(players.stderr).toBe('npm start: --players must be a whole number from 0 to 2000, not "many"\n');
    const port = await runStart([], { DATA_DIR: dir, API_PORT: 'http' });
    expect(port.code).toBe(2);
    expect(port.stderr).toBe('invalid configuration:\n  - API_PORT: "http" is not a port number (0-65535)\n');
    expect(await readdir(dir)).toEqual([]);
  });

  test('a port in use stops it before the database is opened, naming host and variable', async () => {
    const dir = await tempDir();
    const port = await takenPort();
    const res = await runStart([], {
      DATA_DIR: dir,
      API_PORT: String(port),
      AGENTS_PORT: '0',
      DEVICES_PORT: '0',
      VERIFY_PORT: '0',
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      `API_PORT: 127.0.0.1:${port} is already in use by another program: stop it, or set API_PORT to a free port\n`,
    );
    expect(res.stdout).toBe('');
    // No embedded PostgreSQL was made.
    expect(await readdir(dir)).toEqual([]);
  });

  test('Ctrl-C during the demo enrolment stops quietly: no stack, no "did not start"', async () => {
    const d = await database();
    const child = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', START, '--players', '40'],
      {
        cwd: REPO_ROOT,
        detached: true,
        env: {
          ...process.env,
          DATABASE_URL: d.url,
          DATA_DIR: await tempDir(),
          API_PORT: '0',
          AGENTS_PORT: '0',
          DEVICES_PORT: '0',
          VERIFY_PORT: '0',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    cleanups.push(async () => {
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
    });
    let output = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const enrolling = new Promise<void>((resolve) => {
      const take = (chunk: Buffer) => {
        output += chunk;
        if (output.includes('demo fleet: enrolling')) resolve();
      };
      child.stdout.on('data', take);
      child.stderr.on('data', take);
    });
    await enrolling;
    // SIGINT at once: 40 players take seconds to enrol, so this lands in the middle of it on any machine.
    // SIGINT to the whole process group, as the terminal sends it.
    process.kill(-child.pid!, 'SIGINT');
    expect(await exited, output).toBe(0);
    expect(output).toMatch(/stopping \.\.\.\n$/);
    // Stopped during the enrolment, not after it.
    expect(output).not.toContain('players playing and shipping');
    expect(output).not.toMatch(/did not start|keeps running alone|fetch failed/);
    expect(output).not.toMatch(NO_STACK);
  }, 120_000);
});
