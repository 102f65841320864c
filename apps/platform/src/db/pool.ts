import pg from 'pg';

export type Db = pg.Pool;
export type DbClient = pg.PoolClient;

// int8 (bigint) columns come back as strings by default; our counters stay far below 2^53.
pg.types.setTypeParser(20, (value: string) => Number(value));

/**
 * Errors that ended a connection of a pool made here. pg hands a socket error of its connection (EPIPE when a query
 * is written to a backend PostgreSQL has just terminated, say) to that connection's queries as it is, code and all:
 * the same code any other socket (a witness's, a webhook target's) may give. It first reports it as the client's
 * 'error' event, before those queries are rejected, so the pool keeps the error here and a catch can tell a lost
 * database connection from another socket's error (src/logging.ts, isDatabaseConnectionLoss).
 */
const lostConnectionErrors = new WeakSet<object>();

/** Whether `error` is one that ended a database connection of a pool made by createPool. */
export function endedDatabaseConnection(error: unknown): boolean {
  return typeof error === 'object' && error !== null && lostConnectionErrors.has(error);
}

const keepLost = (error: unknown) => {
  if (typeof error === 'object' && error !== null) lostConnectionErrors.add(error);
};

export function createPool(
  url: string,
  options: { max?: number; applicationName?: string; onIdleError?: (error: Error) => void } = {},
): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 20,
    application_name: options.applicationName ?? 'ooh-platform',
    // node-postgres reads dates and timestamps in ISO output only, and the platform reads date::text as YYYY-MM-DD
    // (pop/batch-context.ts, migration 081, pop/queries.ts, http/metrics.ts): a server or database whose DateStyle
    // is, say, 'SQL, DMY' made those reads null and the routes 500. Set before the pool hands the client out (a
    // query queued behind another on one client is deprecated in pg 8 and goes in pg 9).
    onConnect: async (client) => {
      // A connection lost while its client is checked out (PostgreSQL restarted, the backend terminated) is reported
      // as the client's 'error' event once no query of it is running, and pg-pool listens for that only while the
      // client is idle: with no listener the event ended the process (found by test/db/pool.test.ts). The error
      // reaches the query that was running (rejected) or the next one ("not queryable"), and the pool drops the
      // client when it is released; an idle client's loss still goes to the pool's 'error' below.
      client.on('error', keepLost);
      await client.query("SET DateStyle = 'ISO, YMD'").catch((error: unknown) => {
        keepLost(error);
        throw error;
      });
    },
  });
  // An idle client whose server went away (restart, shutdown) must not crash the process:
  // the pool drops it and the next query opens a new connection.
  pool.on('error', (error) => {
    keepLost(error);
    options.onIdleError?.(error);
  });
  // pg-pool's end() resolves once it has asked its idle clients to end, before their connections have closed; a
  // PostgreSQL stopped right after would end them itself ("terminating connection due to administrator command").
  // So end() here also waits for every connection of the pool to close (at most END_WAIT_MS).
  const open = new Set<Promise<void>>();
  pool.on('connect', (client) => {
    const closed = new Promise<void>((resolve) => client.once('end', () => resolve()));
    open.add(closed);
    void closed.then(() => open.delete(closed));
  });
  const end = pool.end.bind(pool);
  pool.end = (async () => {
    await end();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(open),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, END_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }) as typeof pool.end;
  return pool;
}

/** How long Db.end() waits for the pool's connections to close after asking them to. */
const END_WAIT_MS = 5000;

/**
 * The transaction's named statements run on their generic plans (a statement of the transaction, after BEGIN).
 * PostgreSQL plans a named statement anew at every execution for as long as its custom plans look cheaper than the
 * generic one, which they do for the agent channels' group statement when a group holds one or two batches
 * (docs/pop-ingestion.md, "Plans"). Only for statements whose generic plan is the plan wanted whatever the
 * parameters.
 */
export const SET_GENERIC_PLANS = 'SET LOCAL plan_cache_mode = force_generic_plan';

/** Runs `work` in one transaction, begun by `begin`; rolls back on any error and rethrows it. */
export async function withTransaction<T>(
  db: Db,
  work: (client: DbClient) => Promise<T>,
  begin = 'BEGIN',
): Promise<T> {
  const client = await db.connect();
  // A connection whose ROLLBACK failed may still be inside the transaction (or gone): it is not given back.
  let broken = false;
  try {
    await client.query(begin);
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}

/** True when `error` is a PostgreSQL unique violation (optionally of a given constraint). */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: string; constraint?: string };
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}
