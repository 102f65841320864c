import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Db } from './pool.js';

/** Numbered, forward-only migrations: `NNN_name.sql`, applied in order, each in its own transaction. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export class MigrationError extends Error {
  constructor(
    message: string,
    readonly migration?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

// Any fixed 64-bit number shared by every platform instance.
const MIGRATION_LOCK = 0x00_0f_f0_0d_01;

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = /^(\d{3})_([a-z0-9_]+)\.sql$/.exec(file);
    if (!match) throw new MigrationError(`migration file name "${file}" is not NNN_name.sql`, file);
    const version = Number(match[1]);
    if (migrations.some((m) => m.version === version)) {
      throw new MigrationError(`two migrations share number ${match[1]}`, file);
    }
    migrations.push({
      version,
      name: match[2]!,
      sql: await readFile(new URL(file, `file://${dir}/`), 'utf8'),
    });
  }
  return migrations;
}

/**
 * Applies pending migrations under an advisory lock, so several instances
 * starting together apply each migration once. Refuses a database whose
 * history holds a migration this code does not know (an out-of-order or newer
 * history) rather than guessing.
 */
export async function migrate(
  db: Db,
  options: { dir?: string; upTo?: number; log?: (msg: string) => void } = {},
): Promise<number[]> {
  const migrations = (await readMigrations(options.dir)).filter(
    (m) => options.upTo === undefined || m.version <= options.upTo,
  );
  const client = await db.connect();
  const applied: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
       )`,
    );
    const { rows } = await client.query<{ version: number; name: string }>(
      'SELECT version, name FROM schema_migrations ORDER BY version',
    );
    const known = new Map(migrations.map((m) => [m.version, m]));
    for (const row of rows) {
      const m = known.get(row.version);
      if (!m || m.name !== row.name) {
        throw new MigrationError(
          `database has migration ${row.version} (${row.name}) that this code does not know; refusing to start`,
        );
      }
    }
    const done = new Set(rows.map((r) => r.version));
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      try {
        await client.query('BEGIN');
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [
          m.version,
          m.name,
        ]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw new MigrationError(
          `migration ${String(m.version).padStart(3, '0')}_${m.name} failed: ${(error as Error).message}`,
          m.name,
          { cause: error },
        );
      }
      options.log?.(`applied migration ${String(m.version).padStart(3, '0')}_${m.name}`);
      applied.push(m.version);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    client.release();
  }
  return applied;
}
