/**
 * "Years in minutes", the full run (issue "A player that runs for years on a small disk"; wired into `npm run bench --
 * years` by the root runner): scenarios/years-on-a-small-disk.json, one real agent core through three years of virtual
 * time at a play a minute (1440 a day), outages of four to six weeks, a 2 GB volume that other software all but fills
 * during the longest. It prints the player's database size over time and the reconciliation, and fails unless every
 * play shown is counted once. hardware-sim/test/years-on-a-small-disk.test.ts is the shorter version npm test runs (a
 * play every 30 minutes).
 *
 * The platform runs in this process, on an embedded PostgreSQL (or DATABASE_URL), with a test clock the time driver
 * sets directly: over HTTP (`hardware-sim run`) that is one more request per virtual minute, 1.6 million of them.
 * BENCH_YEARS_DAYS shortens the run (the scenario's steps after it are left out).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createProgress } from '@ooh/progress';
import pg from 'pg';
import pino from 'pino';
import { bootstrap } from '../../apps/platform/src/bootstrap.js';
import { TestClock } from '../../apps/platform/src/clock.js';
import { loadConfig } from '../../apps/platform/src/config.js';
import { freeHostPorts, startEmbeddedPostgres } from '../../apps/platform/src/db/embedded.js';
import { startPlatform } from '../../apps/platform/src/platform.js';
import { loadScenario, parseDuration, parseScenario } from '../src/scenario/load.js';
import { formatDatabaseReport, runScenario } from '../src/scenario/run.js';
import { formatReconciliation } from '../src/truth/reconcile.js';

const SCENARIO = fileURLToPath(new URL('../scenarios/years-on-a-small-disk.json', import.meta.url));
const DAY = 86_400_000;
const MB = 1024 * 1024;

async function openDatabase(dir: string): Promise<{ url: string; stop(): Promise<void> }> {
  const given = process.env['DATABASE_URL'];
  if (!given) return startEmbeddedPostgres({ dir: path.join(dir, 'pg'), fsync: false });
  const name = `years_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: given });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(given);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    stop: async () => {
      const c = new pg.Client({ connectionString: given });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export async function run(): Promise<Record<string, number>> {
  const full = loadScenario(SCENARIO);
  const days = Number(process.env['BENCH_YEARS_DAYS'] ?? parseDuration(full.time.duration) / DAY);
  const scenario = parseScenario({
    ...full,
    time: { ...full.time, duration: `${days}d` },
    steps: (full.steps ?? []).filter((step) => parseDuration(step.at) <= days * DAY),
  });
  // tmpfs when there is one: the agent writes with synchronous FULL (README "Virtual time").
  const base = existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const dir = mkdtempSync(path.join(base, 'ooh-years-bench-'));
  // An embedded PostgreSQL started by root runs as another user: it must reach its folder.
  chmodSync(dir, 0o755);
  const progress = createProgress();
  progress.phase('starting PostgreSQL and the platform');
  const database = await openDatabase(dir);
  const start = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
  const clock = new TestClock(start, { frozen: true });
  const ports = await freeHostPorts();
  const config = loadConfig({
    env: {
      ...process.env,
      API_PORT: String(ports.api),
      AGENTS_PORT: String(ports.agents),
      DEVICES_PORT: String(ports.devices),
      VERIFY_PORT: String(ports.verify),
    },
    overrides: {
      env: 'test',
      logLevel: 'warn',
      databaseUrl: database.url,
      dataDir: path.join(dir, 'platform'),
    },
  });
  const log = pino(
    { level: 'warn' },
    pino.destination({ dest: path.join(dir, 'platform.log'), sync: false }),
  );
  const platform = await startPlatform({ config, clock, log });
  let ok = false;
  try {
    const { key } = await bootstrap(platform.ctx.db, clock, { keyName: 'years bench' });
    const began = performance.now();
    progress.phase(`running ${scenario.name} (${days} virtual days)`, { total: 1, count: false });
    const result = await runScenario(
      { ...scenario, time: { ...scenario.time, start: start.toISOString() } },
      {
        dir: path.join(dir, 'fleet'),
        platform: {
          urls: platform.urls,
          adminKey: key,
          clock: { set: async (at) => clock.set(at, { frozen: true }) },
        },
        onProgress: (p) => progress.update(p.fraction),
      },
    );
    const seconds = (performance.now() - began) / 1000;
    progress.done();
    console.log(formatDatabaseReport(result.database));
    console.log(formatReconciliation(result.reconciliation));
    if (!result.ok)
      throw new Error(`not reconciled: ${result.reconciliation.problems.slice(0, 5).join('; ')}`);
    ok = true;
    const samples = result.database.samples;
    return {
      'years.virtual_days': days,
      'years.real_seconds': seconds,
      'years.steps': result.steps,
      'years.plays_shown': result.reconciliation.totals.played,
      'years.plays_counted': result.reconciliation.totals.counted,
      'years.plays_per_real_second': Math.round(result.reconciliation.totals.played / seconds),
      'years.largest_database_mb': (result.database.largest?.bytes ?? 0) / MB,
      'years.largest_records_kept': Math.max(0, ...samples.map((s) => s.recordsKept)),
      'years.samples_disk_full': samples.filter((s) => s.disk === 'full').length,
    };
  } finally {
    progress.done();
    await platform.close();
    log.flush();
    await database.stop();
    // A failed run's files stay for a look (the players' logs, agent.sqlite, ground truth).
    if (ok) rmSync(dir, { recursive: true, force: true });
    else console.error(`files kept in ${dir}`);
  }
}
