import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { freePort } from '../../src/db/embedded.js';
import { HEAP_GROWING_PERCENT } from '../../src/heap.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { type Answer, agentBody, insertDevice, play, sign, type TestDevice } from './helpers.js';

/*
 * PLATFORM_WORKERS=2 (src/cluster.ts): two server processes on the same ports and one database. Real processes,
 * real sockets: batches are answered by both, counted once, a dead worker is replaced, SIGTERM stops everything.
 */
const REPO = path.resolve(import.meta.dirname, '../../../..');
const HEAP_FLAG = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
let database: TestDatabase;
let dataDir: string;
let primary: ChildProcess | null = null;
let output = '';

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-pop-processes-'));
});
afterAll(async () => {
  if (primary && primary.exitCode === null) primary.kill('SIGKILL');
  await database?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** PIDs of the live child processes of `pid` running the platform (its workers). */
function workersOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((child) => {
      try {
        const stat = readFileSync(`/proc/${child}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return (
          Number(fields[1]) === pid &&
          fields[0] !== 'Z' &&
          readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('apps/platform/src/main.ts')
        );
      } catch {
        return false;
      }
    });
}

/** CPU time (ms) a process has used. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

test('--test-clock needs one process: the clock is set per process', () => {
  expect(() => loadConfig({ env: { PLATFORM_WORKERS: '2' }, testClock: true })).toThrow(ConfigError);
  expect(loadConfig({ env: { PLATFORM_WORKERS: '3' } }).workers).toBe(3);
  expect(loadConfig({ env: { PLATFORM_WORKERS: 'auto' } }).workers).toBe(os.availableParallelism());
  expect(loadConfig({ env: {} }).workers).toBe(1);
  expect(() => loadConfig({ env: { PLATFORM_WORKERS: '0' } })).toThrow(/PLATFORM_WORKERS/);
});

test.skipIf(!existsSync('/proc'))(
  'two processes serve the ports: batches answered by both and counted once; a dead worker is replaced',
  async () => {
    const db = database.db;
    const at = new Date();
    const { rows: orgs } = await db.query<{ id: string }>(
      "INSERT INTO organisations (name, kind, created_at) VALUES ('Operator', 'operator', $1) RETURNING id",
      [at],
    );
    const { rows: structures } = await db.query<{ id: string; code: string }>(
      "INSERT INTO structures (organisation_id, code, district, format, created_at) VALUES ($1, 'PROC-1', 'almaly', 'billboard', $2) RETURNING id, code",
      [orgs[0]!.id, at],
    );
    const devices: TestDevice[] = [];
    for (let d = 0; d < 60; d += 1) devices.push(await insertDevice(db, structures[0]!, at));

    const ports = {
      api: await freePort(),
      agents: await freePort(),
      devices: await freePort(),
      verify: await freePort(),
    };
    primary = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'apps/platform/src/main.ts'],
      {
        cwd: REPO,
        env: {
          ...process.env,
          PLATFORM_WORKERS: '2',
          DATABASE_URL: database.url,
          API_PORT: String(ports.api),
          AGENTS_PORT: String(ports.agents),
          DEVICES_PORT: String(ports.devices),
          VERIFY_PORT: String(ports.verify),
          DATA_DIR: dataDir,
          LOG_LEVEL: 'warn',
          PLATFORM_ENV: 'test',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    primary.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    primary.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const pid = primary.pid!;
    await until('the platform to listen', () =>
      output.includes('platform running (2 processes)') ? true : undefined,
    );
    const workers = workersOf(pid);
    expect(workers).toHaveLength(2);
    // Each worker runs with the old generation's growth (src/heap.ts), which the primary was not started with.
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).not.toContain(HEAP_FLAG);
    for (const worker of workers) {
      expect(readFileSync(`/proc/${worker}/cmdline`, 'utf8').split('\0')).toContain(HEAP_FLAG);
    }
    const cpuBefore = workers.map(cpuMs);

    // Each batch on a connection of its own: the primary hands connections to the workers in turn.
    const send = async (device: TestDevice, batchSeq: number, from: number): Promise<Answer> => {
      const now = new Date();
      const events = Array.from({ length: 20 }, (_, i) =>
        play(from + i, {}, new Date(now.getTime() - 60_000)),
      );
      const body = agentBody(device, batchSeq, events, { ts: now });
      const res = await fetch(`http://127.0.0.1:${ports.agents}/s/v1/telemetry`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          connection: 'close',
          'x-service-signature': sign(device.privateKey, body),
        },
        body,
      });
      expect(res.status, await res.clone().text()).toBe(200);
      return (await res.json()) as Answer;
    };
    const first = await Promise.all(devices.map((device) => send(device, 0, 1)));
    expect(first.every((a) => a.accepted === 20 && !a.duplicate)).toBe(true);
    // Both processes did the work (each a share of 60 signed batches), each with its own connections.
    const cpuAfter = workers.map(cpuMs);
    for (const [i, before] of cpuBefore.entries()) expect(cpuAfter[i]! - before).toBeGreaterThan(30);
    const { rows: names } = await db.query<{ name: string }>(
      `SELECT DISTINCT application_name AS name FROM pg_stat_activity
        WHERE datname = current_database() AND application_name LIKE 'ooh-platform-w%' ORDER BY 1`,
    );
    expect(names.map((n) => n.name)).toEqual(['ooh-platform-w0', 'ooh-platform-w1']);

    // A worker dies: the primary starts another; meanwhile and afterwards every batch is answered.
    process.kill(workers[1]!, 'SIGKILL');
    const replaced = await until('a new worker', () => {
      const now = workersOf(pid);
      return now.length === 2 && !now.includes(workers[1]!) ? now : undefined;
    });
    expect(replaced).toContain(workers[0]);
    const second = await Promise.all(devices.map((device) => send(device, 1, 21)));
    expect(second.every((a) => a.accepted === 20)).toBe(true);

    const { rows: counted } = await db.query<{ plays: number; batches: number }>(
      `SELECT (SELECT sum(plays)::int FROM play_counts) AS plays, (SELECT count(*)::int FROM pop_batches) AS batches`,
    );
    expect(counted[0]).toEqual({ plays: 60 * 40, batches: 120 });

    // SIGTERM: the workers stop, then the primary, with code 0; no process is left behind.
    const live = workersOf(pid);
    const exited = new Promise<number | null>((resolve) => primary!.once('exit', (code) => resolve(code)));
    primary.kill('SIGTERM');
    expect(await exited).toBe(0);
    for (const worker of live) expect(existsSync(`/proc/${worker}`) && !isZombie(worker)).toBe(false);
  },
  180_000,
);

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}
