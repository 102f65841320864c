import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { Database } from 'better-sqlite3';
import { AgentError } from '../errors.js';
import { migrate } from './migrations.js';

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
