import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, SET_GENERIC_PLANS, withTransaction } from '../../src/db/pool.js';
import { isDatabaseConnectionLoss } from '../../src/logging.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/*
 * The platform's pool (src/db/pool.ts). Db.end() resolves only once the pool's connections have closed: the platform
 * stops an embedded PostgreSQL right after it, and a backend still open then is ended by the server, which each of its
 * clients logs as "terminating connection due to administrator command" (issue "A newcomer's two commands", item 7).
 */

const POOL_MODULE = fileURLToPath(new URL('../../src/db/pool.ts', import.meta.url));

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await database?.drop();
});

test('a new connection is set up before the pool hands it out: no query waits behind another on one client', async () => {
  // pg 8 warns when a query is queued behind another on one client, and pg 9 drops that queue: the pool's own set-up
  // (DateStyle) once made every new connection's first query wait behind it. The warning comes once a process, and
  // test files share their worker's modules, so the pool is used in a process of its own.
  const script = `
    const { createPool } = await import(${JSON.stringify(POOL_MODULE)});
    const pool = createPool(process.env.TEST_DATABASE_URL, { max: 4 });
    await Promise.all(Array.from({ length: 8 }, () => pool.query('SELECT 1')));
    const client = await pool.connect();
    await client.query('SELECT 1');
    client.release();
    await pool.end();
    console.log('done');
  `;
  const child = spawnSync(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', '--input-type=module', '-e', script],
    {
      env: { ...process.env, TEST_DATABASE_URL: database.url },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  expect(child.stdout.trim(), child.stderr).toBe('done');
  expect(child.stderr).not.toContain('DeprecationWarning');
});

test('end() resolves after every connection of the pool has closed on the server', async () => {
  const name = `pool-end-${process.pid}`;
  const errors: Error[] = [];
  const pool = createPool(database.url, {
    max: 8,
    applicationName: name,
    onIdleError: (e) => errors.push(e),
  });
  // Eight connections at once, all idle in the pool afterwards.
  await Promise.all(Array.from({ length: 8 }, () => pool.query('SELECT pg_sleep(0.05)')));
  expect(pool.totalCount).toBe(8);

  // Connected beforehand, so that it looks the moment end() resolves.
  const observer = new pg.Client({ connectionString: database.url });
  await observer.connect();
  try {
    await pool.end();
    const { rows } = await observer.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
      [name],
    );
    expect(rows).toEqual([{ n: 0 }]);
  } finally {
    await observer.end();
  }
  expect(errors).toEqual([]);
});

/*
 * withTransaction, which the agent channel's lookup runs through for every batch, and connections lost under the pool:
 * none may end the process, and a client that cannot be rolled back is not handed out again.
 */
test('a connection lost inside the transaction is not given back to the pool; the next transaction works', async () => {
  const db = createPool(database.url, { max: 10 });
  let lostPid = 0;
  await expect(
    withTransaction(db, async (client) => {
      lostPid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      // The server ends this very connection: the statement fails and so does the ROLLBACK after it.
      await client.query('SELECT pg_terminate_backend(pg_backend_pid())');
    }),
  ).rejects.toThrow();
  // Every connection the pool hands out from now on answers (one given back after its ROLLBACK failed would fail
  // the transaction it is handed to).
  const pids = await Promise.all(
    Array.from({ length: 10 }, () =>
      withTransaction(
        db,
        async (client) =>
          (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid,
      ),
    ),
  );
  expect(pids).not.toContain(lostPid);
  await db.end();
});

test('the generic-plan setting holds inside its transaction only', async () => {
  const db = createPool(database.url, { max: 10 });
  const inside = await withTransaction(
    db,
    async (client) =>
      (await client.query<{ mode: string }>("SELECT current_setting('plan_cache_mode') AS mode")).rows[0]!
        .mode,
    `BEGIN; ${SET_GENERIC_PLANS}`,
  );
  expect(inside).toBe('force_generic_plan');
  // Afterwards the pool's connections, the one just used among them, plan as configured.
  const after = await Promise.all(
    Array.from({ length: 10 }, () =>
      withTransaction(
        db,
        async (client) =>
          (await client.query<{ mode: string }>("SELECT current_setting('plan_cache_mode') AS mode")).rows[0]!
            .mode,
      ),
    ),
  );
  expect(new Set(after)).toEqual(new Set(['auto']));
  await db.end();
});

test('an idle connection lost is reported once through onIdleError; the pool opens another', async () => {
  const name = `pool-idle-${process.pid}`;
  const errors: Error[] = [];
  const pool = createPool(database.url, {
    max: 2,
    applicationName: name,
    onIdleError: (e) => errors.push(e),
  });
  await pool.query('SELECT 1');
  const observer = new pg.Client({ connectionString: database.url });
  await observer.connect();
  try {
    await observer.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1',
      [name],
    );
  } finally {
    await observer.end();
  }
  for (let i = 0; i < 100 && errors.length === 0; i += 1)
    await new Promise((resolve) => setTimeout(resolve, 20));
  expect(errors).toHaveLength(1);
  expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  await pool.end();
});

test('a socket error that ends a connection under its query counts as a lost database connection; the same code elsewhere does not', async () => {
  const db = createPool(database.url, { max: 2 });
  const client = await db.connect();
  try {
    // What writing to a backend PostgreSQL has just terminated gives: the connection's socket fails with EPIPE, and
    // the query running on it is rejected with that very error (CI saw a scheduler log it as an error of its own).
    const running = client.query('SELECT pg_sleep(5)');
    const epipe = Object.assign(new Error('write EPIPE'), { code: 'EPIPE', errno: -32, syscall: 'write' });
    (client as unknown as { connection: { stream: import('node:net').Socket } }).connection.stream.destroy(
      epipe,
    );
    const error = await running.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBe(epipe);
    expect(isDatabaseConnectionLoss(error)).toBe(true);
    // An EPIPE of any other socket (a witness, a webhook target) is not the database's.
    expect(isDatabaseConnectionLoss(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }))).toBe(false);
  } finally {
    client.release(true);
    await db.end();
  }
});

test("dates read as ISO whatever the database's DateStyle", async () => {
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  const { rows: names } = await admin.query<{ db: string }>('SELECT current_database() AS db');
  await admin.query(`ALTER DATABASE "${names[0]!.db}" SET DateStyle = 'SQL, DMY'`);
  const pool = createPool(database.url, { max: 1 });
  try {
    // A plain client of this database now gets the server's non-ISO form (the failure the pool guards against).
    const plain = new pg.Client({ connectionString: database.url });
    await plain.connect();
    const { rows: raw } = await plain.query<{ s: string }>("SELECT '2026-11-20'::date::text AS s");
    await plain.end();
    expect(raw[0]!.s).toBe('20/11/2026');
    const { rows } = await pool.query<{ s: string; d: Date; t: Date }>(
      "SELECT '2026-11-20'::date::text AS s, '2026-11-20'::date AS d, '2026-11-20T06:00:00Z'::timestamptz AS t",
    );
    expect(rows[0]!.s).toBe('2026-11-20');
    expect(rows[0]!.t.toISOString()).toBe('2026-11-20T06:00:00.000Z');
    expect(rows[0]!.d).toBeInstanceOf(Date);
  } finally {
    await pool.end();
    await admin.query(`ALTER DATABASE "${names[0]!.db}" RESET DateStyle`);
    await admin.end();
  }
});
