/**
 * Benchmark of sealing (issue "Daily stats seals, the public ledger, and a verifier anyone can run", Performance):
 * a day of 1,000,000 accepted batches, leaves read from PostgreSQL through the cursor, tree built, body signed and
 * stored. Goal: under 10 s on this machine, memory under 500 MB.
 *
 * Runs on an embedded PostgreSQL with fsync ON in a temporary folder (or DATABASE_URL: a fresh database on it).
 * Memory is the resident size of this process, sampled during the seal (PostgreSQL's own processes excluded).
 *
 *   node --conditions=source --import tsx apps/platform/bench/seal.bench.ts      (or: npm run bench -- seal)
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { createProgress, type Progress } from '@ooh/progress';
import pg from 'pg';
import pino from 'pino';
import { loadAuthority } from '../src/authority/index.js';
import { TestClock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { platformCaches } from '../src/context.js';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { sealDay } from '../src/seals/index.js';

const BATCHES = Number(process.env['SEAL_BENCH_BATCHES'] ?? 1_000_000);
const INSERT_CHUNK = 100_000;
const DAY = '2026-11-19';
// The setup's progress on stderr, on a terminal only (@ooh/progress); the figures on stdout are untouched.
let progress: Progress = createProgress({ mode: 'never' });
const log = (message: string) =>
  progress.print(`  [seal] ${message}\n`, (text) => process.stderr.write(text));

/** A day of accepted batches: 5 000 devices and 50 CMS installations, spread over the Almaty day. */
export async function seedDay(db: pg.Pool): Promise<void> {
  progress.phase('seeding batches', { total: BATCHES, unit: 'batches' });
  for (let from = 1; from <= BATCHES; from += INSERT_CHUNK) {
    const to = Math.min(BATCHES, from + INSERT_CHUNK - 1);
    await db.query(
      `INSERT INTO pop_batches (owner, batch_seq, channel, body, body_sha256, received_at, receive_day, record_count,
         answer)
       SELECT owner, g, channel, body, encode(sha256(body), 'hex'),
              -- 2026-11-19 00:00 Almaty is 2026-11-18 19:00 UTC; 86 399 microseconds apart, a little out of order.
              timestamptz '2026-11-18 19:00:00+00' + ((g * 86399 - (g % 7) * 5) * interval '1 microsecond'),
              $3::date, plays, '{}'::jsonb
         FROM (SELECT g,
                      CASE WHEN g % 10 = 0 THEN 'source:' || md5('s' || (g % 50))::uuid
                           ELSE 'device:' || md5('d' || (g % 5000))::uuid END AS owner,
                      CASE WHEN g % 10 = 0 THEN 'cms' ELSE 'agent' END AS channel,
                      (g % 4) AS plays,
                      convert_to(format('{"schema":"service.pop/1","batch_seq":%s,"events":[%s]}', g,
                        array_to_string(array_fill('{"kind":"play","seq":1,"duration_ms":15000}'::text,
                          ARRAY[(g % 4)::int]), ',')), 'UTF8') AS body
                 FROM generate_series($1::int8, $2::int8) AS g) AS rows`,
      [from, to, DAY],
    );
    progress.tick(to - from + 1);
    log(`seeded ${to.toLocaleString('en-US')} batches`);
  }
  progress.phase('VACUUM ANALYZE pop_batches');
  await db.query('VACUUM ANALYZE pop_batches');
}

/** utime + stime of a local process in seconds, from /proc (Linux); -1 when it cannot be read. */
function backendCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of stat (utime, stime), in clock ticks of 1/100 s.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return -1;
  }
}

async function openDatabase(dir: string): Promise<{ url: string; stop(): Promise<void> }> {
  const given = process.env['DATABASE_URL'];
  if (!given) return startEmbeddedPostgres({ dir: path.join(dir, 'pg'), fsync: true });
  const name = `seal_bench_${randomBytes(4).toString('hex')}`;
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
  progress = createProgress();
  progress.phase('starting PostgreSQL');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-seal-bench-'));
  const database = await openDatabase(dir);
  const db = createPool(database.url, { max: 4, applicationName: 'ooh-seal-bench' });
  // The seal itself on one connection, so the CPU time of its PostgreSQL backend can be read.
  const sealDb = createPool(database.url, { max: 1, applicationName: 'ooh-seal-bench-seal' });
  try {
    progress.phase('migrating');
    await migrate(db);
    const seedStarted = performance.now();
    await seedDay(db);
    // The seal is measured with nothing else of ours running (the CPU time of this process is a figure).
    progress.done();
    log(`seeded in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`);

    const clock = new TestClock(new Date('2026-11-20T00:30:00Z'), { frozen: true });
    const config = loadConfig({
      env: {},
      overrides: { env: 'test', dataDir: path.join(dir, 'data'), logLevel: 'silent' },
    });
    const ctx = {
      db: sealDb,
      clock,
      config,
      caches: platformCaches({ config, db: sealDb, clock, log: pino({ level: 'silent' }) }),
    };
    await loadAuthority(ctx);
    const backendPid = (await sealDb.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    global.gc?.();
    const pgCpuBefore = backendCpuSeconds(backendPid);
    const nodeCpuBefore = process.cpuUsage();

    const rssBefore = process.memoryUsage().rss;
    let peakRss = rssBefore;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
    }, 20);
    const started = performance.now();
    const { seal, created } = await sealDay(ctx, DAY);
    const elapsed = performance.now() - started;
    const nodeCpu = process.cpuUsage(nodeCpuBefore);
    const pgCpuAfter = backendCpuSeconds(backendPid);
    clearInterval(sampler);
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    const body = JSON.parse(seal.body.toString('utf8')) as { batch_count: number; record_count: number };
    if (!created || body.batch_count !== BATCHES) {
      throw new Error(`sealed ${body.batch_count} batches, expected ${BATCHES} (created ${created})`);
    }
    log(
      `sealed ${body.batch_count.toLocaleString('en-US')} batches, ${body.record_count} plays, in ${(elapsed / 1000).toFixed(2)} s`,
    );
    return {
      'seal.batches': BATCHES,
      'seal.seconds': elapsed / 1000,
      'seal.batches_per_s': Math.round((BATCHES * 1000) / elapsed),
      // CPU time spent, whatever else the machine is running: this process and the PostgreSQL backend of the seal
      // (-1 when PostgreSQL is not on this machine). On an idle machine the wall time is about the larger of the two.
      'seal.node_cpu_seconds': (nodeCpu.user + nodeCpu.system) / 1e6,
      'seal.pg_backend_cpu_seconds': pgCpuBefore >= 0 && pgCpuAfter >= 0 ? pgCpuAfter - pgCpuBefore : -1,
      'seal.peak_rss_mb': Math.round(peakRss / 1048576),
      'seal.rss_growth_mb': Math.round((peakRss - rssBefore) / 1048576),
      'seal.goal_met': elapsed < 10_000 && peakRss < 500 * 1048576 ? 1 : 0,
    };
  } finally {
    progress.done();
    await sealDb.end();
    await db.end();
    await database.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

// As a program: print the figures.
if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  run().then(
    (figures) => {
      for (const [key, value] of Object.entries(figures)) console.log(`${key}\t${value}`);
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
