import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Db } from './pool.js';

/** Numbered, forward-only migrations: `NNN_name.sql`, applied in order, each in its own transaction. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** SHA-256 (hex) of the file's text: recorded when applied, so a file changed afterwards is noticed. */
  sha256: string;
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
    const sql = await readFile(new URL(file, `file://${dir}/`), 'utf8');
    migrations.push({
      version,
      name: match[2]!,
      sql,
      sha256: createHash('sha256').update(sql).digest('hex'),
    });
  }
  return migrations;
}

const label = (m: { version: number; name: string }) => `${String(m.version).padStart(3, '0')}_${m.name}`;

/**
 * Applies pending migrations under an advisory lock, so several instances
 * starting together apply each migration once. Refuses, rather than guessing:
 * a database whose history holds a migration this code does not know (an
 * out-of-order or newer history); a pending migration numbered below the
 * highest applied one (it would run after migrations written later than it);
 * and an applied migration whose file has changed since (its SHA-256 is kept
 * in schema_migrations; rows from before checksums were kept take the file's
 * as it is then).
 */
export async function migrate(
  db: Db,
  options: { dir?: string; upTo?: number; log?: (msg: string) => void } = {},
): Promise<number[]> {
  const every = await readMigrations(options.dir);
  const migrations = every.filter((m) => options.upTo === undefined || m.version <= options.upTo);
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
    await client.query('ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS sha256 text');
    const { rows } = await client.query<{ version: number; name: string; sha256: string | null }>(
      'SELECT version, name, sha256 FROM schema_migrations ORDER BY version',
    );
    const known = new Map(migrations.map((m) => [m.version, m]));
    const all = new Map(every.map((m) => [m.version, m]));
    for (const row of rows) {
      const m = all.get(row.version);
      if (!m || m.name !== row.name) {
        throw new MigrationError(
          `database has migration ${row.version} (${row.name}) that this code does not know; refusing to start`,
        );
      }
      if (row.sha256 === null) {
        await client.query('UPDATE schema_migrations SET sha256 = $2 WHERE version = $1', [
          row.version,
          m.sha256,
        ]);
      } else if (row.sha256 !== m.sha256) {
        throw new MigrationError(
          `migration ${label(m)} has changed since it was applied (its SHA-256 was ${row.sha256.slice(0, 12)}..., ` +
            `the file's is ${m.sha256.slice(0, 12)}...): restore the file as it was, and put the change in a new ` +
            'migration; refusing to start',
          m.name,
        );
      }
    }
    const done = new Set(rows.map((r) => r.version));
    const highest = rows.length === 0 ? 0 : rows[rows.length - 1]!.version;
    for (const m of known.values()) {
      if (!done.has(m.version) && m.version < highest) {
        throw new MigrationError(
          `migration ${label(m)} is not applied, but the database already has migration ${highest}: a migration ` +
            `numbered below the highest applied one would run after those written later; renumber it above ${highest}; ` +
            'refusing to start',
          m.name,
        );
      }
    }
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      try {
        await client.query('BEGIN');
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, name, sha256) VALUES ($1, $2, $3)', [
          m.version,
          m.name,
          m.sha256,
        ]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw new MigrationError(`migration ${label(m)} failed: ${(error as Error).message}`, m.name, {
          cause: error,
        });
      }
      options.log?.(`applied migration ${label(m)}`);
      applied.push(m.version);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    client.release();
  }
  return applied;
}
