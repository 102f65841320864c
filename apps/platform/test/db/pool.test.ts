import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/*
 * Db.end() resolves only once the pool's connections have closed: the platform stops an embedded PostgreSQL right
 * after it, and a backend still open then is ended by the server, which each of its clients logs as "terminating
 * connection due to administrator command" (issue "A newcomer's two commands", item 7).
 */

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await database?.drop();
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
