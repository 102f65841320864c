import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { loadConfig, prepareEnrolment } from '@ooh/agent';
import { createRootCa, generateEs256KeyPair } from '@ooh/crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { layOutPlayer } from '../../apps/agent/test/helpers/agent-setup.js';
import { createTlsAuthority } from '../../apps/agent/test/helpers/hostile.js';
import { type AgentTestPlatform, startAgentTestPlatform } from '../../apps/agent/test/helpers/platform.js';
import { openAgentDatabase } from '../../apps/agent/src/log/database.js';
import { PlayLog } from '../../apps/agent/src/log/play-log.js';
import { LogSnapshotError, snapshotAgentLog } from '../src/truth/log-snapshot.js';

/*
 * The technician's commands where things are broken: `hardware-sim check` on folders that are not a player's, broken
 * configs and play logs, a log an agent is writing; `hardware-sim player` against a platform that cannot be reached,
 * is not trusted, refuses the key, fails or is interrupted. The real CLI as a child process, on real folders, a real
 * SQLite file and (for player) a real platform. Each answer: an exit code, one line on stderr, and for check the
 * inspected folder byte for byte as it was.
 */

const SIM_ROOT = join(import.meta.dirname, '..');

interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

function startCli(args: string[], options: { user?: 'nobody'; env?: NodeJS.ProcessEnv } = {}): ChildProcess {
  const node = [process.execPath, '--conditions=source', '--import', 'tsx', 'src/cli/main.ts', ...args];
  // A user without rights on the player's folder (this test runs as root, who reads everything).
  const command = options.user
    ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', ...node]
    : node;
  return spawn(command[0]!, command.slice(1), {
    cwd: SIM_ROOT,
    env: { ...process.env, HARDWARE_SIM_STACK: '', NODE_EXTRA_CA_CERTS: '', ...options.env },
  });
}

function finished(child: ChildProcess): Promise<CliResult> {
  const started = Date.now();
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, ms: Date.now() - started }));
  });
}

const cli = (args: string[], options: { user?: 'nobody'; env?: NodeJS.ProcessEnv } = {}) =>
  finished(startCli(args, options));

/** Every file and folder under `dir` with its bytes' SHA-256 (folders by name): equal means nothing was written. */
function contents(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (path: string, rel: string) => {
    const stat = statSync(path);
    if (stat.isDirectory()) {
      out[`${rel}/`] = `dir ${(stat.mode & 0o777).toString(8)}`;
      for (const name of readdirSync(path)) walk(join(path, name), `${rel}/${name}`);
    } else {
      out[rel] = createHash('sha256').update(readFileSync(path)).digest('hex');
    }
  };
  walk(dir, '');
  return out;
}

/** The one line a failure prints: stderr is exactly one line, no stack trace. */
function oneLine(stderr: string): string {
  expect(stderr).toMatch(/^hardware-sim: [^\n]+\n$/);
  expect(stderr).not.toMatch(/\n\s+at /);
  return stderr;
}

describe('hardware-sim check, where the folder is not what it should be', () => {
  let root: string;
  let playerDir: string;

  beforeEach(async () => {
    root = mkdtempSync(join(os.tmpdir(), 'sim-technician-'));
    chmodSync(root, 0o755);
    playerDir = join(root, 'player');
    const now = Date.now();
    const authorityRootPem = await createRootCa({
      subject: 'CN=Test Authority Root',
      keyPair: generateEs256KeyPair(),
      notBefore: new Date(now - 86_400_000),
      notAfter: new Date(now + 86_400_000),
    });
    const raw = layOutPlayer({
      dir: playerDir,
      authorityRootPem,
      serverCaPem: authorityRootPem,
      deviceId: '6f1c3a52-0d5e-4c1b-9a57-3c1f0f3e2b11',
      structure: 'ALM-0001',
      urls: {
        agents: 'https://agents.example',
        devices: 'https://devices.example',
        verify: 'https://verify.example',
      },
    });
    writeFileSync(join(playerDir, 'agent.json'), JSON.stringify(raw, null, 2));
    await prepareEnrolment(loadConfig(join(playerDir, 'agent.json')));
    // A play log as the agent leaves it when it stops: one record, closed cleanly (no -wal, no -shm).
    const db = openAgentDatabase(join(playerDir, 'data', 'agent.sqlite'));
    new PlayLog(db).appendStatus({ kind: 'tamper', at: new Date('2026-11-20T06:00:00.000Z') });
    db.close();
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const database = () => join(playerDir, 'data', 'agent.sqlite');

  /** check (text, then --json) on `target`: the exit code, the one line's code, the folder unchanged. */
  async function expectProblem(target: string, exitCode: number, problemCode: string, words: RegExp) {
    const before = contents(root);
    const text = await cli(['check', target]);
    expect(text.code).toBe(exitCode);
    expect(oneLine(text.stderr)).toMatch(new RegExp(`^hardware-sim: check: ${problemCode}: `));
    expect(text.stderr).toMatch(words);
    expect(text.stdout).toBe('');
    const json = await cli(['check', target, '--json']);
    expect(json.code).toBe(exitCode);
    oneLine(json.stderr);
    const document = JSON.parse(json.stdout) as {
      problem: { code: string; message: string; action: string };
    };
    expect(document.problem).toMatchObject({ code: problemCode });
    expect(document.problem.action.length).toBeGreaterThan(0);
    expect(contents(root)).toEqual(before);
    return text.stderr;
  }

  test('a player closed cleanly: read without writing a byte (no -wal, no -shm created)', async () => {
    const before = contents(root);
    const result = await cli(['check', playerDir]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^queue {11}1 record\(s\) not acknowledged/m);
    expect(contents(root)).toEqual(before);
    expect(readdirSync(join(playerDir, 'data')).sort()).toEqual(['agent.sqlite', 'device-key.pem']);
  });

  test('an empty folder, a random file, a path that does not exist: exit 2, what to give instead', async () => {
    mkdirSync(join(root, 'empty'));
    await expectProblem(
      join(root, 'empty'),
      2,
      'not_a_player',
      /no agent\.json in .*empty.*: give the player's folder/,
    );
    writeFileSync(join(root, 'notes.txt'), 'not a config\n');
    await expectProblem(
      join(root, 'notes.txt'),
      2,
      'not_a_player',
      /notes\.txt is not JSON, not a player's agent\.json: give the player's folder/,
    );
    // The play log itself is the wrong file, not a config to "fix".
    await expectProblem(
      database(),
      2,
      'not_a_player',
      /agent\.sqlite is a SQLite database \(the play log\?\), not a player's agent\.json: give /,
    );
    await expectProblem(join(root, 'nowhere'), 2, 'target_missing', /nowhere does not exist: check the path/);
  });

  test('a folder it may not read (a user other than the player’s): exit 2, run as the player’s user', async () => {
    chmodSync(playerDir, 0o000);
    const before = contents(root);
    const result = await cli(['check', playerDir], { user: 'nobody' });
    expect(result.code).toBe(2);
    expect(oneLine(result.stderr)).toMatch(
      /^hardware-sim: check: target_unreadable: .*EACCES.*player's user/,
    );
    const json = await cli(['check', playerDir, '--json'], { user: 'nobody' });
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({ problem: { code: 'target_unreadable' } });
    chmodSync(playerDir, 0o755);
    // The config readable, the play log not (its folder is the agent's, 0700).
    chmodSync(join(playerDir, 'agent.json'), 0o644);
    chmodSync(join(playerDir, 'authority-root.pem'), 0o644);
    const log = await cli(['check', playerDir], { user: 'nobody' });
    expect(log.code).toBe(2);
    expect(oneLine(log.stderr)).toMatch(/^hardware-sim: check: (log_unreadable|target_unreadable): .*EACCES/);
    chmodSync(playerDir, 0o000);
    expect(contents(root)).toEqual(before);
    chmodSync(playerDir, 0o755);
  });

  test('agent.json not JSON, JSON of another shape: exit 2, config_invalid, fix the file', async () => {
    writeFileSync(join(playerDir, 'agent.json'), '{"structure": "ALM-0001",');
    await expectProblem(playerDir, 2, 'config_invalid', /is not JSON: fix .*agent\.json/);
    writeFileSync(join(playerDir, 'agent.json'), JSON.stringify({ name: 'ooh-player', version: '1.2.0' }));
    await expectProblem(playerDir, 2, 'config_invalid', /platform must be an object.*: fix /);
  });

  test('a config naming a data folder that is not there: exit 2, data_dir_missing, nothing created', async () => {
    const raw = JSON.parse(readFileSync(join(playerDir, 'agent.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(join(playerDir, 'agent.json'), JSON.stringify({ ...raw, data_dir: 'data-moved' }));
    await expectProblem(playerDir, 2, 'data_dir_missing', /data-moved .*does not exist: fix data_dir/);
  });

  test('a config from a newer agent (keys this one does not know): warnings only, exit 0 (guard)', async () => {
    const raw = JSON.parse(readFileSync(join(playerDir, 'agent.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(
      join(playerDir, 'agent.json'),
      JSON.stringify({ ...raw, telemetry: { enabled: true }, shipping: { compression: 'zstd' } }),
    );
    const before = contents(root);
    const result = await cli(['check', playerDir]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('warning         unknown key "telemetry" (ignored)');
    expect(result.stdout).toContain('warning         unknown key "shipping.compression" (ignored)');
    const json = await cli(['check', playerDir, '--json']);
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as { config_warnings: string[] }).config_warnings).toHaveLength(2);
    expect(contents(root)).toEqual(before);
  });

  test('no play log: exit 1, log_missing, and no log is created', async () => {
    rmSync(database());
    await expectProblem(playerDir, 1, 'log_missing', /no play log at .*agent\.sqlite: the agent has not run/);
  });

  test('an empty play log (0 bytes): exit 1, log_empty, left empty', async () => {
    writeFileSync(database(), '');
    await expectProblem(playerDir, 1, 'log_empty', /empty \(0 bytes\)/);
    expect(statSync(database()).size).toBe(0);
  });

  test('a play log cut in half, or its header overwritten: exit 1, log_corrupt, keep it', async () => {
    truncateSync(database(), Math.floor(statSync(database()).size / 2));
    await expectProblem(playerDir, 1, 'log_corrupt', /damaged.*do not delete it/);
    const bytes = readFileSync(database());
    bytes.write('this is not SQLite', 0, 'latin1');
    writeFileSync(database(), bytes);
    await expectProblem(playerDir, 1, 'log_corrupt', /not a SQLite file.*do not delete it/);
  });

  test('a play log from a newer agent (a schema version above this build): exit 2, log_newer', async () => {
    const db = openAgentDatabase(database());
    db.pragma('user_version = 99');
    db.close();
    await expectProblem(playerDir, 2, 'log_newer', /version 99 is newer.*older than the agent/);
  });

  test('no room or no folder for the temporary copy of the play log: exit 2, log_copy_failed, set TMPDIR', async () => {
    const before = contents(root);
    // tsx keeps its cache in the temporary folder (and would make it): not here.
    const env = { TMPDIR: join(root, 'no-such-tmp'), TSX_DISABLE_CACHE: '1' };
    const text = await cli(['check', playerDir], { env });
    expect(text.code).toBe(2);
    expect(oneLine(text.stderr)).toMatch(
      /^hardware-sim: check: log_copy_failed: no copy of the play log could be made in \S+no-such-tmp \(ENOENT\): free space there, or set TMPDIR/,
    );
    expect(text.stdout).toBe('');
    const json = await cli(['check', playerDir, '--json'], { env });
    expect(json.code).toBe(2);
    oneLine(json.stderr);
    expect(JSON.parse(json.stdout)).toMatchObject({
      target: playerDir,
      problem: { code: 'log_copy_failed', action: expect.stringContaining('TMPDIR') },
    });
    expect(contents(root)).toEqual(before);
    // The copy's write failing on a full disk (/dev/full answers every write ENOSPC): a coded refusal, not an
    // ENOSPC thrown through to the CLI's last resort.
    let thrown: unknown;
    try {
      snapshotAgentLog(database(), '/dev/full');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(LogSnapshotError);
    expect(thrown).toMatchObject({ code: 'log_copy_failed', message: expect.stringMatching(/\(ENOSPC\)$/) });
  });

  test('a play log the agent is writing (its write transaction open): read at once, without waiting for it', async () => {
    // The agent: the log open as it opens it (WAL), a write transaction under way and not committed.
    const agent = openAgentDatabase(database());
    try {
      new PlayLog(agent).appendStatus({ kind: 'tamper', at: new Date('2026-11-20T06:01:00.000Z') });
      agent.exec('BEGIN IMMEDIATE');
      new PlayLog(agent).appendStatus({ kind: 'tamper', at: new Date('2026-11-20T06:02:00.000Z') });
      const files = () => {
        const all = contents(root);
        // The running agent's -shm is the shared memory every WAL reader (and the agent) uses.
        delete all['/player/data/agent.sqlite-shm'];
        return all;
      };
      const before = files();
      const result = await cli(['check', playerDir]);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      // What was committed, not what the open transaction holds.
      expect(result.stdout).toMatch(/^queue {11}2 record\(s\) not acknowledged.*last seq 2$/m);
      expect(result.ms).toBeLessThan(30_000);
      expect(files()).toEqual(before);
      agent.exec('COMMIT');
    } finally {
      agent.close();
    }
  });
});

// --- player ---------------------------------------------------------------------------------------------

const UNREACHABLE =
  'api=http://127.0.0.1:1,agents=http://127.0.0.1:1,devices=https://127.0.0.1:1,verify=http://127.0.0.1:1';

function hosts(urls: { api: string; agents: string; devices: string; verify: string }): string {
  return `api=${urls.api},agents=${urls.agents},devices=${urls.devices},verify=${urls.verify}`;
}

/** A port nothing listens on (one just given up by a server of this test). */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** `player` for structure ALM-0001 with a throwaway admin key, its api host at `api` and the other hosts unreachable. */
function playerWithApi(api: string): ReturnType<typeof cli> {
  return cli([
    'player',
    '--platform',
    UNREACHABLE.replace('api=http://127.0.0.1:1', api),
    '--admin-key',
    'k',
    '--structure',
    'ALM-0001',
  ]);
}

describe('hardware-sim player, without a platform that answers', () => {
  test('a --dir that is not empty, or not a folder: exit 2, named, before any call to the platform; nothing written', async () => {
    let requests = 0;
    const server = http.createServer((_req, res) => {
      requests += 1;
      res.end('{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const root = mkdtempSync(join(os.tmpdir(), 'sim-technician-dir-'));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const platformArg = `api=${url},agents=${url},devices=${url},verify=${url}`;
      const run = (dir: string) =>
        cli([
          'player',
          '--platform',
          platformArg,
          '--admin-key',
          'k',
          '--structure',
          'ALM-0001',
          '--dir',
          dir,
        ]);
      // A commissioned (or real) player's folder.
      const playerDir = join(root, 'player');
      mkdirSync(join(playerDir, 'data'), { recursive: true });
      writeFileSync(
        join(playerDir, 'agent.json'),
        JSON.stringify({ structure: 'ALM-0001', device_id: 'dev-1' }),
      );
      writeFileSync(join(playerDir, 'data', 'device-key.pem'), 'key');
      // Some other folder with files in it; a file.
      const other = join(root, 'other');
      mkdirSync(other);
      writeFileSync(join(other, 'notes.txt'), 'keep me');
      writeFileSync(join(root, 'a-file'), 'not a folder');
      const before = contents(root);
      const player = await run(playerDir);
      expect(player.code).toBe(2);
      expect(oneLine(player.stderr)).toMatch(
        /^hardware-sim: player: --dir \S+player already holds a player \(device dev-1\): choose another folder .*leave --dir out/,
      );
      const nonEmpty = await run(other);
      expect(nonEmpty.code).toBe(2);
      expect(oneLine(nonEmpty.stderr)).toMatch(
        /^hardware-sim: player: --dir \S+other is not empty \(notes\.txt\): /,
      );
      const file = await run(join(root, 'a-file'));
      expect(file.code).toBe(2);
      expect(oneLine(file.stderr)).toMatch(/^hardware-sim: player: --dir \S+a-file is not a folder: /);
      expect(requests).toBe(0);
      expect(contents(root)).toEqual(before);
    } finally {
      server.close();
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('two runs started at the same instant on one new empty folder: one claims it, the other is refused (exit 2)', async () => {
    // The platform holds every structures request until both runs have asked, or one has ended: a run that got past
    // the check is still running when the other makes it. Both then hear of no structure ALM-0001 (exit 1).
    let requests = 0;
    let answerAll: () => void = () => {};
    const bothAsked = new Promise<void>((resolve) => {
      answerAll = resolve;
    });
    const server = http.createServer((_req, res) => {
      requests += 1;
      if (requests >= 2) answerAll();
      void bothAsked.then(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ items: [] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const root = mkdtempSync(join(os.tmpdir(), 'sim-technician-race-'));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const dir = join(root, 'site');
      mkdirSync(dir);
      const args = [
        'player',
        '--platform',
        `api=${url},agents=${url},devices=${url},verify=${url}`,
        '--admin-key',
        'k',
        '--structure',
        'ALM-0001',
        '--dir',
        dir,
      ];
      const runs = [finished(startCli(args)), finished(startCli(args))].map((run) =>
        run.then((result) => {
          answerAll();
          return result;
        }),
      );
      const results = await Promise.all(runs);
      const refused = results.filter((r) => r.code === 2);
      const ran = results.filter((r) => r.code === 1);
      expect(refused).toHaveLength(1);
      expect(ran).toHaveLength(1);
      expect(oneLine(refused[0]!.stderr)).toMatch(
        /^hardware-sim: player: --dir \S+site is in use by another run, hardware-sim player \(pid \d+\): wait for it to end, .*nothing was done/,
      );
      expect(oneLine(ran[0]!.stderr)).toMatch(
        /^hardware-sim: player: structure failed: the platform has no structure/,
      );
      expect(requests).toBe(1);
      // The lock goes with the run that held it; the folder is left as it was given, empty.
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      server.close();
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('nothing listening: the structure step, connection refused, check the URL', async () => {
    const port = await closedPort();
    const result = await playerWithApi(`api=http://127.0.0.1:${port}`);
    expect(result.code).toBe(1);
    expect(oneLine(result.stderr)).toMatch(
      new RegExp(
        `^hardware-sim: player: structure failed: cannot reach http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\): check the --platform URL.*no device was enrolled`,
      ),
    );
  });

  test("an api URL answering 200 with a page that is not the API's (a captive portal): named, check api=", async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html><body>Welcome to the guest Wi-Fi</body></html>');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const result = await playerWithApi(`api=http://127.0.0.1:${port}`);
      expect(result.code).toBe(1);
      expect(oneLine(result.stderr)).toMatch(
        new RegExp(
          `^hardware-sim: player: structure failed: http://127\\.0\\.0\\.1:${port}/api/v1/console/structures did not answer as the platform's api host \\(HTTP 200 text/html\\): check that --platform api=http://127\\.0\\.0\\.1:${port} is the platform's api host .*; no device was enrolled\n$`,
        ),
      );
    } finally {
      server.close();
    }
  });

  test('a name that does not resolve: the structure step, the name, check DNS', async () => {
    const result = await playerWithApi('api=http://ooh-platform.invalid');
    expect(result.code).toBe(1);
    expect(oneLine(result.stderr)).toMatch(
      /^hardware-sim: player: structure failed: the name ooh-platform\.invalid does not resolve \((ENOTFOUND|EAI_AGAIN)\): .*DNS/,
    );
  });

  test('a TLS platform whose certificate this machine does not trust: named, with what to do', async () => {
    const authority = await createTlsAuthority('Some Other CA');
    const identity = await authority.issue();
    const server = https.createServer({ cert: identity.certificatePem, key: identity.keyPem }, (_req, res) =>
      res.end('{}'),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const result = await playerWithApi(`api=https://127.0.0.1:${port}`);
      expect(result.code).toBe(1);
      expect(oneLine(result.stderr)).toMatch(
        /^hardware-sim: player: structure failed: this machine does not trust the TLS certificate of https:\/\/127\.0\.0\.1:\d+ \([A-Z_]+\): .*NODE_EXTRA_CA_CERTS/,
      );
    } finally {
      server.close();
    }
  });
});

describe('hardware-sim player against a real platform', () => {
  let platform: AgentTestPlatform;
  let urls: { api: string; agents: string; devices: string; verify: string };
  let dirs: string;

  beforeAll(async () => {
    platform = await startAgentTestPlatform();
    urls = {
      api: platform.platform.urls.api,
      agents: platform.agentsUrl,
      devices: platform.devicesUrl,
      verify: platform.verifyUrl,
    };
    dirs = mkdtempSync(join(os.tmpdir(), 'sim-technician-player-'));
  });
  afterAll(async () => {
    await platform?.close();
    rmSync(dirs, { recursive: true, force: true });
  });

  async function admin<T>(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }> {
    const response = await fetch(`${urls.api}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${platform.adminKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  /** The devices enrolled on the structure, with whether each is revoked. */
  async function devices(): Promise<{ id: string; revoked_at: string | null }[]> {
    const { rows } = await platform.database.db.query<{ id: string; revoked_at: Date | null }>(
      'SELECT id, revoked_at FROM devices WHERE structure_id = $1',
      [platform.structure.id],
    );
    return rows.map((r) => ({ id: r.id, revoked_at: r.revoked_at?.toISOString() ?? null }));
  }

  /** The commissioning keys issued by runs, with whether each is revoked. */
  async function commissioningKeys(): Promise<{ id: string; revoked: boolean }[]> {
    const { rows } = await platform.database.db.query<{ id: string; revoked_at: Date | null }>(
      "SELECT id, revoked_at FROM api_keys WHERE name LIKE 'commissioning %'",
    );
    return rows.map((r) => ({ id: r.id, revoked: r.revoked_at !== null }));
  }

  const player = (platformArg: string, key: string, structure: string, extra: string[] = []) =>
    cli([
      'player',
      '--platform',
      platformArg,
      '--admin-key',
      key,
      '--structure',
      structure,
      '--dir',
      join(dirs, `${structure}-${Date.now()}`),
      ...extra,
    ]);

  test('a wrong admin key (401): the structure step, check --admin-key', async () => {
    const result = await player(hosts(urls), 'ooh_not-a-key', platform.structure.code);
    expect(result.code).toBe(1);
    expect(oneLine(result.stderr)).toMatch(
      /^hardware-sim: player: structure failed: the platform refused the admin key \(HTTP 401.*\): check --admin-key/,
    );
  });

  test("a key without the authority's scope (403): the structure step, use an administrator's key", async () => {
    const structures = await admin<{ items: { code: string; organisation_id: string }[] }>(
      'GET',
      '/api/v1/console/structures',
    );
    const operatorId = structures.body.items.find((s) => s.code === platform.structure.code)!.organisation_id;
    const key = await admin<{ key: string }>('POST', `/api/v1/console/organisations/${operatorId}/api-keys`, {
      name: 'fleet only',
      scopes: ['console:fleet'],
    });
    const result = await player(hosts(urls), key.body.key, platform.structure.code);
    expect(result.code).toBe(1);
    expect(oneLine(result.stderr)).toMatch(
      /^hardware-sim: player: structure failed: the key may not do this \(HTTP 403.*\): use an authority administrator's API key/,
    );
  });

  test('a structure code that does not exist, or a retired one: the structure step, nothing enrolled', async () => {
    const unknown = await player(hosts(urls), platform.adminKey, 'ALM-9999');
    expect(unknown.code).toBe(1);
    expect(oneLine(unknown.stderr)).toMatch(
      /^hardware-sim: player: structure failed: the platform has no structure with code ALM-9999: check the code/,
    );
    const structures = await admin<{ items: { code: string; organisation_id: string }[] }>(
      'GET',
      '/api/v1/console/structures',
    );
    const created = await admin<{ id: string }>('POST', '/api/v1/console/structures', {
      organisation_id: structures.body.items[0]!.organisation_id,
      code: 'ALM-0777',
      district: 'almaly',
      format: 'billboard',
    });
    expect(created.status).toBe(201);
    expect((await admin('POST', `/api/v1/console/structures/${created.body.id}/retire`)).status).toBe(200);
    const devicesBefore = await devices();
    const retired = await player(hosts(urls), platform.adminKey, 'ALM-0777');
    expect(retired.code).toBe(1);
    expect(oneLine(retired.stderr)).toMatch(
      /^hardware-sim: player: structure failed: structure ALM-0777 was retired/,
    );
    expect(await devices()).toEqual(devicesBefore);
  });

  test('a verify URL that is another host (404): the enrol step names verify=, and no folder that was never made', async () => {
    const result = await player(
      hosts({ ...urls, verify: urls.agents }),
      platform.adminKey,
      platform.structure.code,
    );
    expect(result.code).toBe(1);
    const line = oneLine(result.stderr);
    expect(line).toMatch(
      /^hardware-sim: player: enrol failed: \S+\/v1\/authority-root\.pem was not found \(HTTP 404[^)]*\): check that --platform verify=\S+ is the platform's verify host; no device was enrolled\n$/,
    );
    expect(line).not.toContain('files in');
  });

  /** The api host behind a proxy that answers `status` to the requests `matches` picks, and passes the rest on. */
  async function faultyApi(
    matches: (req: http.IncomingMessage) => boolean,
    status: number,
    headers: Record<string, string> = {},
  ): Promise<{ url: string; close: () => void }> {
    const target = new URL(urls.api);
    const server = http.createServer((req, res) => {
      if (matches(req)) {
        res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
        res.end(JSON.stringify({ code: status === 429 ? 'rate_limited' : 'internal_error', status }));
        return;
      }
      const upstream = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => server.close(),
    };
  }

  test('the platform answering 429 at enrolment: the enrol step, wait and run again; its key revoked', async () => {
    const api = await faultyApi(
      (req) => req.method === 'POST' && req.url === '/api/v1/console/devices',
      429,
      {
        'retry-after': '30',
      },
    );
    try {
      const before = await devices();
      const result = await player(
        hosts({ ...urls, api: api.url }),
        platform.adminKey,
        platform.structure.code,
      );
      expect(result.code).toBe(1);
      expect(oneLine(result.stderr)).toMatch(
        /^hardware-sim: player: enrol failed: the platform is limiting requests \(HTTP 429 rate_limited, retry after 30 s\): wait .*no device was enrolled/,
      );
      expect(await devices()).toEqual(before);
      expect((await commissioningKeys()).every((k) => k.revoked)).toBe(true);
    } finally {
      api.close();
    }
  });

  test('the platform answering 500 when counting: the count step; the device enrolled before is revoked and named', async () => {
    const api = await faultyApi((req) => req.url?.startsWith('/api/v1/console/pop/counts') === true, 500);
    try {
      const before = new Set((await devices()).map((d) => d.id));
      const result = await player(
        hosts({ ...urls, api: api.url }),
        platform.adminKey,
        platform.structure.code,
      );
      expect(result.code).toBe(1);
      const line = oneLine(result.stderr);
      expect(line).toMatch(
        /^hardware-sim: player: count failed: the platform failed \(HTTP 500 internal_error\): try again .*device \S+ was enrolled and is now revoked/,
      );
      const enrolled = (await devices()).filter((d) => !before.has(d.id));
      expect(enrolled).toHaveLength(1);
      expect(enrolled[0]!.revoked_at).not.toBeNull();
      expect(line).toContain(enrolled[0]!.id);
      expect((await commissioningKeys()).every((k) => k.revoked)).toBe(true);
    } finally {
      api.close();
    }
  }, 150_000);

  test("a devices host presenting another CA's certificate (a TLS-intercepting proxy): stops at the agent's first refused send, names the host", async () => {
    const authority = await createTlsAuthority('Intercepting Proxy CA');
    const identity = await authority.issue();
    let connections = 0;
    const proxy = https.createServer({ cert: identity.certificatePem, key: identity.keyPem }, (_req, res) =>
      res.end('{}'),
    );
    proxy.on('connection', () => {
      connections += 1;
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const devicesUrl = `https://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const before = new Set((await devices()).map((d) => d.id));
      const result = await player(
        hosts({ ...urls, devices: devicesUrl }),
        platform.adminKey,
        platform.structure.code,
      );
      expect(result.code).toBe(1);
      const line = oneLine(result.stderr);
      expect(line).toMatch(
        new RegExp(
          `^hardware-sim: player: send failed: the devices host ${devicesUrl.replace(/\./g, '\\.')} presents a TLS certificate that is not the platform's \\(tls_untrusted: [^;]+\\): this site's network may intercept TLS .*check --platform devices=; nothing was sent to it; device \\S+ was enrolled and is now revoked`,
        ),
      );
      expect(connections).toBeGreaterThan(0);
      // At the first refused send (a play of 5 s, then its batch), not after the 90 s for an answer.
      expect(result.ms).toBeLessThan(45_000);
      const enrolled = (await devices()).filter((d) => !before.has(d.id));
      expect(enrolled).toHaveLength(1);
      expect(enrolled[0]!.revoked_at).not.toBeNull();
    } finally {
      proxy.close();
    }
  }, 150_000);

  test.each([
    ['Ctrl-C', 'SIGINT', 130, ''],
    ['SIGTERM (a CI cancel, kill)', 'SIGTERM', 143, ' \\(SIGTERM\\)'],
  ] as const)(
    '%s while playing: stops within seconds, exit 128 + the signal, says what it left (the device revoked)',
    async (_name, signal, code, named) => {
      const before = new Set((await devices()).map((d) => d.id));
      const child = startCli([
        'player',
        '--platform',
        hosts(urls),
        '--admin-key',
        platform.adminKey,
        '--structure',
        platform.structure.code,
        '--dir',
        join(dirs, `interrupted-${signal}`),
      ]);
      const done = finished(child);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('the player never reached the play step')), 120_000);
        let seen = '';
        child.stdout!.on('data', (chunk: Buffer) => {
          seen += chunk.toString();
          if (seen.includes('3. playing')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      const interruptedAt = Date.now();
      child.kill(signal);
      const result = await done;
      expect(Date.now() - interruptedAt).toBeLessThan(5_000);
      expect(result.code).toBe(code);
      const line = oneLine(result.stderr);
      expect(line).toMatch(
        new RegExp(
          `^hardware-sim: player: interrupted${named} during (play|send); device \\S+ was enrolled and is now revoked`,
        ),
      );
      const enrolled = (await devices()).filter((d) => !before.has(d.id));
      expect(enrolled).toHaveLength(1);
      expect(enrolled[0]!.revoked_at).not.toBeNull();
      expect((await commissioningKeys()).every((k) => k.revoked)).toBe(true);
    },
    150_000,
  );
});
