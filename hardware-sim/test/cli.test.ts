import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { loadConfig, prepareEnrolment } from '@ooh/agent';
import { createRootCa, generateEs256KeyPair } from '@ooh/crypto';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { openAgentDatabase } from '../../apps/agent/src/log/database.js';
import { PlayLog } from '../../apps/agent/src/log/play-log.js';
import { BatchStore } from '../../apps/agent/src/shipping/batch-store.js';
import pino from 'pino';
import { bootstrap } from '../../apps/platform/src/bootstrap.js';
import { systemClock } from '../../apps/platform/src/clock.js';
import { loadConfig as loadPlatformConfig } from '../../apps/platform/src/config.js';
import { type Platform, startPlatform } from '../../apps/platform/src/platform.js';
import { createTestDatabase } from '../../apps/platform/test/support/database.js';
import { PlatformStartError, platformAvailable, spawnPlatform } from '../src/platform/spawn.js';
import { type CliIo, main, parsePlatform } from '../src/cli/main.js';

const SIM_ROOT = join(import.meta.dirname, '..');
const SMOKE = join(SIM_ROOT, 'scenarios', 'smoke.json');
const URLS =
  'api=http://127.0.0.1:1,agents=http://127.0.0.1:2,devices=https://127.0.0.1:3,verify=http://127.0.0.1:4';

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const result = { out: '', err: '' };
  const io: CliIo = {
    out: (text) => {
      result.out += text;
    },
    err: (text) => {
      result.err += text;
    },
    isTty: false,
  };
  const code = await main(args, io);
  return { code, ...result };
}

describe('hardware-sim command line: bad input gets the problem and the usage, exit 2', () => {
  test('an unknown option or a missing value', async () => {
    const unknown = await run(['check', '/opt/player', '--verbose']);
    expect(unknown).toMatchObject({ code: 2, out: '' });
    expect(unknown.err).toMatch(
      /^hardware-sim: Unknown option '--verbose'.*\n\nusage: hardware-sim <command>/s,
    );
    const missing = await run(['player', '--structure']);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/^hardware-sim: Option '--structure <value>' argument missing\n\nusage:/);
  });

  test('a malformed --platform, for player and for run (before anything starts)', async () => {
    const cases: [string, RegExp][] = [
      ['api', /--platform: "api" is not name=URL \(names: api, agents, devices, verify\)/],
      [`${URLS},web=http://x`, /--platform: "web=http:\/\/x" is not name=URL/],
      [
        URLS.replace('verify=http://127.0.0.1:4', 'verify=127.0.0.1:4'),
        /--platform: verify=127\.0\.0\.1:4 is not an http\(s\) URL/,
      ],
      [URLS.replace(',verify=http://127.0.0.1:4', ''), /--platform: verify=URL is missing/],
    ];
    for (const [platform, problem] of cases) {
      const player = await run([
        'player',
        '--platform',
        platform,
        '--admin-key',
        'k',
        '--structure',
        'ALM-0001',
      ]);
      expect(player).toMatchObject({ code: 2, out: '' });
      expect(player.err).toMatch(
        new RegExp(`^hardware-sim: ${problem.source}[^\\n]*\\n\\nusage: hardware-sim`),
      );
      const scenario = await run(['run', SMOKE, '--platform', platform, '--admin-key', 'k']);
      expect(scenario).toMatchObject({ code: 2, out: '' });
      expect(scenario.err).toMatch(problem);
    }
    const noKey = await run(['run', SMOKE, '--platform', URLS]);
    expect(noKey).toMatchObject({ code: 2, out: '' });
    expect(noKey.err).toMatch(/^hardware-sim: --platform needs --admin-key\n/);
  });

  test('run: --spawn and --platform are alternatives, not both (before anything starts)', async () => {
    const both = await run(['run', SMOKE, '--spawn', '--platform', URLS, '--admin-key', 'k']);
    expect(both).toMatchObject({ code: 2, out: '' });
    expect(both.err).toMatch(
      /^hardware-sim: --spawn and --platform exclude each other\n\nusage: hardware-sim/,
    );
  });

  test('a URL in --platform may itself hold "="', () => {
    const urls = parsePlatform(URLS.replace('api=http://127.0.0.1:1', 'api=http://127.0.0.1:1/?a=b'));
    expect(urls.api).toBe('http://127.0.0.1:1/?a=b');
    expect(urls.verify).toBe('http://127.0.0.1:4');
  });

  test('as a program: an unknown option prints no stack trace', () => {
    const result = spawnSync(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'src/cli/main.ts', 'player', '--platfrom', URLS],
      { cwd: SIM_ROOT, encoding: 'utf8', timeout: 60_000 },
    );
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^hardware-sim: Unknown option '--platfrom'/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});

test('as a program: a platform it cannot reach is named with the cause, exit 1, no stack trace', () => {
  const result = spawnSync(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      'src/cli/main.ts',
      'player',
      '--platform',
      URLS,
      '--admin-key',
      'k',
      '--structure',
      'ALM-0001',
    ],
    { cwd: SIM_ROOT, encoding: 'utf8', timeout: 60_000, env: { ...process.env, HARDWARE_SIM_STACK: '' } },
  );
  expect(result.status).toBe(1);
  // The step, and the cause behind "fetch failed" (here undici refusing port 1), are named (technician.test.ts: more).
  expect(result.stderr).toMatch(
    /^hardware-sim: player: structure failed: cannot reach http:\/\/127\.0\.0\.1:1 \(\S/,
  );
  expect(result.stderr).not.toMatch(/\n\s+at /);
});

/** The processes whose parent is `pid` (Linux /proc). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // "pid (comm) state ppid ...": comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) children.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test.skipIf(!platformAvailable() || process.platform !== 'linux')(
  'as a program: SIGTERM to run (a CI cancel, kill) stops the platform it started and its PostgreSQL, exit 143',
  async () => {
    const dir = mkdtempSync(join(os.tmpdir(), 'sim-run-sigterm-'));
    // The embedded PostgreSQL started by root runs as another user, who must reach the folder.
    chmodSync(dir, 0o755);
    let child: ReturnType<typeof spawn> | null = null;
    try {
      child = spawnNormalDayRun(dir);
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const exited = new Promise<number | null>((resolve) => child!.on('close', (code) => resolve(code)));
      // Until the platform's PostgreSQL runs (its postmaster.pid: the PostgreSQL's pid on its first line).
      const postmaster = join(dir, 'platform', 'pgdata', 'postmaster.pid');
      const deadline = Date.now() + 120_000;
      while (!existsSync(postmaster) && child.exitCode === null && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(stderr).toBe('');
      const postgresPid = Number(readFileSync(postmaster, 'utf8').split('\n')[0]);
      const platformPids = childrenOf(child.pid!);
      expect(platformPids.length).toBeGreaterThan(0);
      child.kill('SIGTERM');
      expect(await exited).toBe(143);
      expect(stderr).toMatch(
        /^hardware-sim: run: stopped by SIGTERM; the platform it started was stopped; files in \S+\n$/,
      );
      expect(platformPids.filter(alive)).toEqual([]);
      expect(alive(postgresPid)).toBe(false);
    } finally {
      // A failed test leaves no run of its own behind.
      if (child?.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  },
  180_000,
);

/** `run` of the normal-day scenario on `dir`, as a program left running (tsx). */
function spawnNormalDayRun(dir: string): ReturnType<typeof spawn> {
  return spawn(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      'src/cli/main.ts',
      'run',
      join(SIM_ROOT, 'scenarios', 'normal-day.json'),
      '--dir',
      dir,
    ],
    { cwd: SIM_ROOT, env: { ...process.env, HARDWARE_SIM_STACK: '' } },
  );
}

/** The CLI as a program (tsx), to its end: exit code and output. */
async function program(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  const child = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', 'src/cli/main.ts', ...args],
    {
      cwd: SIM_ROOT,
      env: { ...process.env, HARDWARE_SIM_STACK: '', ...env },
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, stdout, stderr, ms: Date.now() - started };
}

describe('run --platform with a platform it cannot use: the host, what to do, no folder left', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = mkdtempSync(join(os.tmpdir(), 'sim-run-given-'));
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  /** `run smoke.json --platform <api=api,...>` with its temporary folder in `tmp`, which must stay empty. */
  async function runAgainst(api: string, adminKey = 'k') {
    const platform = URLS.replace('api=http://127.0.0.1:1', `api=${api}`);
    // tsx keeps its cache in the temporary folder (and would make it): not here.
    const result = await program(['run', SMOKE, '--platform', platform, '--admin-key', adminKey], {
      TMPDIR: tmp,
      TSX_DISABLE_CACHE: '1',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^hardware-sim: run: [^\n]+\n$/);
    expect(result.stdout).toBe('');
    expect(readdirSync(tmp)).toEqual([]);
    return result.stderr;
  }

  test('nothing listening, or a port that takes the connection and never answers', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    expect(await runAgainst(`http://127.0.0.1:${closedPort}`)).toMatch(
      new RegExp(
        `^hardware-sim: run: the platform at --platform api=http://127\\.0\\.0\\.1:${closedPort}: cannot reach http://127\\.0\\.0\\.1:${closedPort} \\(ECONNREFUSED\\): check the --platform URL, that the platform runs.*, or leave --platform out \\(run then starts a platform of its own\\); nothing was run\n$`,
      ),
    );
    const sockets: net.Socket[] = [];
    const silent = net.createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const port = (silent.address() as net.AddressInfo).port;
      expect(await runAgainst(`http://127.0.0.1:${port}`)).toMatch(
        new RegExp(
          `^hardware-sim: run: the platform at --platform api=http://127\\.0\\.0\\.1:${port}: the platform did not answer in time: no answer from http://127\\.0\\.0\\.1:${port} within 15 s: check that the platform runs`,
        ),
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  }, 90_000);

  test('a platform started without --test-clock: named, start it with `platform run --test-clock`', async () => {
    const database = await createTestDatabase();
    const config = loadPlatformConfig({
      env: {},
      overrides: {
        env: 'test',
        testClock: false,
        logLevel: 'silent',
        databaseUrl: database.url,
        dataDir: mkdtempSync(join(os.tmpdir(), 'sim-run-no-test-clock-')),
        host: '127.0.0.1',
        apiPort: 0,
        agentsPort: 0,
        devicesPort: 0,
        verifyPort: 0,
        metrics: null,
      },
    });
    let platform: Platform | null = null;
    try {
      platform = await startPlatform({ config, log: pino({ level: 'silent' }), schedulers: false });
      const { key } = await bootstrap(database.db, systemClock);
      const api = platform.urls.api;
      expect(await runAgainst(api, key)).toMatch(
        new RegExp(
          `^hardware-sim: run: the platform at --platform api=${api.replace(/\./g, '\\.')} does not run with --test-clock \\(GET /api/v1/console/clock: HTTP 404 not_found\\): start it with \`platform run --test-clock\``,
        ),
      );
    } finally {
      await platform?.close();
      await database.drop();
      rmSync(config.dataDir, { recursive: true, force: true });
    }
  }, 90_000);
});

test.skipIf(!platformAvailable() || process.platform !== 'linux')(
  'a second run on a --dir another run uses: refused at once, naming that run; a platform on its PostgreSQL says why it exited',
  async () => {
    const dir = mkdtempSync(join(os.tmpdir(), 'sim-run-twice-'));
    // The embedded PostgreSQL started by root runs as another user, who must reach the folder.
    chmodSync(dir, 0o755);
    let first: ReturnType<typeof spawn> | null = null;
    try {
      first = spawnNormalDayRun(dir);
      first.stdout!.resume();
      first.stderr!.resume();
      const exited = new Promise<number | null>((resolve) => first!.on('close', (code) => resolve(code)));
      // Until the first run's platform serves (its line on stderr goes to platform.log).
      const log = join(dir, 'platform', 'platform.log');
      const deadline = Date.now() + 120_000;
      const serving = () => existsSync(log) && readFileSync(log, 'utf8').includes('platform running');
      while (!serving() && first.exitCode === null && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(serving()).toBe(true);

      const second = await program(['run', SMOKE, '--dir', dir]);
      expect(second.code).toBe(1);
      expect(second.stderr).toBe(
        `hardware-sim: run: another run uses this --dir ${dir}: hardware-sim run (pid ${first.pid}): wait for it to end, or give another --dir; nothing was started\n`,
      );
      expect(second.ms).toBeLessThan(30_000);

      // A platform started on that folder without the run's lock (by hand, or by a run whose own process was killed):
      // its own last line, not only "see platform.log".
      const started = spawnPlatform({
        dataDir: join(dir, 'platform'),
        testClock: true,
        logFile: join(dir, 'second-platform.log'),
      });
      await expect(started).rejects.toBeInstanceOf(PlatformStartError);
      const error = (await started.catch((e: unknown) => e)) as PlatformStartError;
      expect(error.reason).toMatch(/the embedded PostgreSQL in \S+pgdata is in use by .*\(pid \d+\)/);
      expect(error.message).toBe(
        `the platform exited with 1: ${error.reason}; see ${join(dir, 'second-platform.log')}`,
      );

      first.kill('SIGTERM');
      expect(await exited).toBe(143);
    } finally {
      // A failed test leaves no run of its own behind, nor its platform: SIGTERM (run stops its platform), then
      // SIGKILL if it does not end.
      if (first?.exitCode === null && first.signalCode === null) {
        const ended = new Promise((resolve) => first!.once('close', resolve));
        first.kill('SIGTERM');
        const timer = setTimeout(() => first!.kill('SIGKILL'), 30_000);
        await ended;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    }
  },
  240_000,
);

describe('hardware-sim check', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(os.tmpdir(), 'sim-cli-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function player(extra: Record<string, unknown>): Promise<string> {
    const keyPair = generateEs256KeyPair();
    const now = Date.now();
    writeFileSync(
      join(dir, 'authority-root.pem'),
      await createRootCa({
        subject: 'CN=Test Authority Root',
        keyPair,
        notBefore: new Date(now - 86_400_000),
        notAfter: new Date(now + 86_400_000),
      }),
    );
    const configFile = join(dir, 'agent.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        structure: 'ALM-0001',
        platform: {
          agents_url: 'https://agents.example',
          devices_url: 'https://devices.example',
          verify_url: 'https://verify.example',
        },
        authority_root_file: 'authority-root.pem',
        ...extra,
      }),
    );
    await prepareEnrolment(loadConfig(configFile));
    return configFile;
  }

  test('names a stuck batch as a problem and lists the records set aside', async () => {
    const configFile = await player({ device_id: '6f1c3a52-0d5e-4c1b-9a57-3c1f0f3e2b11' });
    const db = openAgentDatabase(join(dirname(configFile), 'data', 'agent.sqlite'));
    const log = new PlayLog(db);
    log.appendStatus({ kind: 'tamper', at: new Date('2026-11-20T06:00:00.000Z') });
    log.appendStatus({ kind: 'tamper', at: new Date('2026-11-20T06:00:01.000Z') });
    const batches = new BatchStore(db);
    const first = batches.pendingOrCut({ deviceId: 'd', now: new Date(), maxEvents: 1 })!;
    batches.setAside(first.batchSeq, new Date('2026-11-20T06:05:00.000Z'), 'http 500 internal_error');
    const second = batches.pendingOrCut({ deviceId: 'd', now: new Date() })!;
    for (let i = 0; i < 3; i++) {
      batches.noteFailure(second.batchSeq, {
        at: new Date('2026-11-20T06:10:00.000Z'),
        serverError: false,
        what: 'network: connect ECONNREFUSED',
      });
    }
    db.close();
    const text = await run(['check', dir]);
    expect(text.code).toBe(1);
    expect(text.out).toContain('set aside       1 record(s) the platform could not take');
    expect(text.out).toContain(
      'set aside       seq 1 tamper (2026-11-20T06:05:00.000Z): http 500 internal_error',
    );
    expect(text.out).toContain(
      'PROBLEM         batch 2 stuck since 2026-11-20T06:10:00.000Z: 3 failed sends, last network: connect ECONNREFUSED',
    );
  });

  test('shows the database, the disk and the oldest unacknowledged record; a full disk is a problem', async () => {
    const configFile = await player({
      device_id: '6f1c3a52-0d5e-4c1b-9a57-3c1f0f3e2b11',
      // Every real volume is below a threshold this high: full.
      disk: { warn_free_bytes: 2 ** 52, hard_free_bytes: 2 ** 52 },
    });
    const db = openAgentDatabase(join(dirname(configFile), 'data', 'agent.sqlite'));
    new PlayLog(db).appendStatus({ kind: 'tamper', at: new Date('2026-11-20T06:00:00.000Z') });
    db.close();
    const text = await run(['check', dir]);
    expect(text.code).toBe(1);
    expect(text.out).toMatch(
      /^storage {9}database \d+\.\d MiB \+ wal \d+\.\d MiB; disk full, \d+\.\d MiB free \(warning below 4294967296\.0 MiB, hard below 4294967296\.0 MiB\); oldest unacknowledged seq 1, logged \S+; 1 records kept$/m,
    );
    expect(text.out).toMatch(
      /^PROBLEM {9}the disk is full \(\d+ bytes free, hard threshold 4503599627370496\): only slot content plays$/m,
    );
  });

  test('shows the unknown config keys as warnings, without failing the check', async () => {
    const configFile = await player({ shiping: { min_interval_ms: 1000 } });
    openAgentDatabase(join(dirname(configFile), 'data', 'agent.sqlite')).close();
    const text = await run(['check', dir]);
    expect(text.err).toBe('');
    expect(text.code).toBe(0);
    expect(text.out).toContain(`player          ${configFile}`);
    expect(text.out).toContain('warning         unknown key "shiping" (ignored; did you mean "shipping"?)');
    const json = await run(['check', dir, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.out)).toMatchObject({
      config: configFile,
      config_warnings: ['unknown key "shiping" (ignored; did you mean "shipping"?)'],
      problems: [],
    });
  });

  test('a folder that is not a player, or a broken config: a clear answer, exit 2', async () => {
    const missing = await run(['check', join(dir, 'nowhere')]);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(
      /^hardware-sim: check: target_missing: .*nowhere does not exist: check the path/,
    );
    const empty = await run(['check', dir]);
    expect(empty.code).toBe(2);
    expect(empty.err).toMatch(/^hardware-sim: check: not_a_player: no agent\.json in /);
    writeFileSync(join(dir, 'agent.json'), JSON.stringify({ structure: 'ALM-0001' }));
    const broken = await run(['check', dir]);
    expect(broken).toMatchObject({ code: 2, out: '' });
    expect(broken.err).toMatch(
      /^hardware-sim: check: config_invalid: invalid agent config: platform must be an object/,
    );
  });
});
