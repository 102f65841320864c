import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { Database } from 'better-sqlite3';
import { AgentError } from '../errors.js';
import { migrate } from './migrations.js';

export type { Database } from 'better-sqlite3';

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
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    migrate(db, options.targetVersion);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}
