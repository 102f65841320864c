import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createPool, type Db } from '../../src/db/pool.js';

export interface TestDatabase {
  url: string;
  db: Db;
  drop(): Promise<void>;
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A fresh, empty database on the run's PostgreSQL server; migrated unless told otherwise. */
export async function createTestDatabase(
  options: { migrate?: boolean; upTo?: number } = {},
): Promise<TestDatabase> {
  const admin = inject('pgAdminUrl');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = withDatabase(admin, name);
  const db = createPool(url, { max: 10, applicationName: 'ooh-test' });
  if (options.migrate !== false) await migrate(db, options.upTo === undefined ? {} : { upTo: options.upTo });
  return {
    url,
    db,
    drop: async () => {
      await db.end();
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
