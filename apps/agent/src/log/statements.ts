import type { Database, Statement } from 'better-sqlite3';

/**
 * Prepared statements kept per database connection, by their SQL text. Preparing parses and plans the SQL (tens of
 * microseconds each); the agent runs the same few dozen statements for ever, on a board that may be weak, and a
 * simulator runs thousands of agents in one process, so each is prepared once per connection. SQLite prepares a
 * kept statement again by itself after a schema change (a migration). Statement options (pluck, raw, expand,
 * safeIntegers) stay as prepared: callers of this cache set none.
 */
const cache = new WeakMap<Database, Map<string, Statement>>();

export function prepared<P extends unknown[] = unknown[], R = unknown>(
  db: Database,
  sql: string,
): Statement<P, R> {
  let statements = cache.get(db);
  if (!statements) {
    statements = new Map();
    cache.set(db, statements);
  }
  let statement = statements.get(sql);
  if (!statement) {
    statement = db.prepare(sql);
    statements.set(sql, statement);
  }
  return statement as unknown as Statement<P, R>;
}

const runners = new WeakMap<Database, (work: () => unknown) => unknown>();

/**
 * Runs `work` in one transaction of `db` (a savepoint when one is open already), as `db.transaction(work)()` does,
 * without making a new transaction function (four wrappers and their properties) for every call.
 */
export function inTransaction<T>(db: Database, work: () => T): T {
  let run = runners.get(db);
  if (!run) {
    run = db.transaction((next: () => unknown) => next());
    runners.set(db, run);
  }
  return run(work) as T;
}
