import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { Database } from 'better-sqlite3';
import { AgentError } from '../errors.js';
import { LATEST_SCHEMA_VERSION, migrate } from './migrations.js';

export type { Database } from 'better-sqlite3';

/** What the -wal file is cut back to after a checkpoint (PRAGMA journal_size_limit). */
export const WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024;

/**
 * Opens (creating if needed) the agent's SQLite file in WAL mode with synchronous FULL: a transaction that
 * returned is on disk, so a power cut loses no acknowledged record (DESIGN.md §9).
 */
export function openAgentDatabase(path: string, options: { targetVersion?: number } = {}): Database {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  let db: Database;
  try {
    db = new BetterSqlite3(path);
  } catch (cause) {
    throw new AgentError('database_invalid', `cannot open database ${path}`, { cause });
  }
  try {
    // Before anything else: a new file takes it from its first page; an existing one records it for the one VACUUM
    // that applies it (migration 5, storage/retention.ts vacuumOnce).
    db.pragma('auto_vacuum = INCREMENTAL');
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    // The -wal file is cut back to this after each checkpoint that empties it (wal_autocheckpoint, every 1000 pages,
    // and the one after a retention pass), so it stays a few MB however much was written or removed.
    db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    migrate(db, options.targetVersion);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * Opens the agent's SQLite file to read only (`agent status`, `hardware-sim check`): never creates a missing or empty
 * file, never migrates, never checkpoints; a file of another schema version than this build's is refused, since its
 * tables may not be what the queries read (an older one is migrated by the agent at its next start). A running agent
 * may be writing meanwhile: the reader sees its last commit (WAL).
 */
export function openAgentDatabaseReadOnly(path: string): Database {
  if (!existsSync(path)) throw new AgentError('database_missing', `no play log at ${path}`);
  if (statSync(path).size === 0) throw new AgentError('database_invalid', `the play log ${path} is empty`);
  let db: Database;
  try {
    db = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  } catch (cause) {
    throw new AgentError('database_invalid', `cannot open database ${path}`, { cause });
  }
  try {
    db.pragma('busy_timeout = 5000');
    let version: number;
    try {
      version = db.pragma('user_version', { simple: true }) as number;
    } catch (cause) {
      throw new AgentError('database_invalid', `${path} is not a readable play log`, { cause });
    }
    if (version > LATEST_SCHEMA_VERSION) {
      throw new AgentError(
        'database_newer',
        `database schema version ${version} is newer than this agent knows (${LATEST_SCHEMA_VERSION})`,
      );
    }
    if (version < LATEST_SCHEMA_VERSION) {
      throw new AgentError(
        'database_older',
        `database schema version ${version} is older than this agent's (${LATEST_SCHEMA_VERSION}): the agent upgrades it when it starts`,
      );
    }
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}
