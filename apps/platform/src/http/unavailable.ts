import type { Logger } from 'pino';
import { errorFields, isConnectionError, isDatabaseConnectionLoss, reportInBursts } from '../logging.js';

/*
 * A request the platform cannot serve for now, through no fault of the caller's and no bug of ours: its database
 * does not answer (stopped, restarting, out of connections, its disk full) or the disk of the media files is full.
 * It is answered 503 service_unavailable with Retry-After, which players and CMS systems read as "send the same
 * again later", rather than 500 internal_error, which reads as a bug; nothing was stored (the transaction, or the
 * temporary file, went with the error). The operator reads it in the log once per burst, not once per request.
 */

export type Unavailable = 'database' | 'storage';

/** How long a caller is asked to wait (Retry-After, seconds): a restart takes seconds, a full disk an operator. */
export const RETRY_AFTER_SECONDS: Readonly<Record<Unavailable, number>> = { database: 5, storage: 60 };

/** What a caller is told. */
export const UNAVAILABLE_DETAIL: Readonly<Record<Unavailable, string>> = {
  database: 'the platform cannot reach its database for now; send the same request again shortly',
  storage: 'the platform cannot store files for now (its disk is full); send the same request again later',
};

/** Why `error` means the request cannot be served for now, or null. */
export function unavailableBecause(error: unknown): Unavailable | null {
  const e = error as { code?: unknown; syscall?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  // A file the platform writes (media) on a full disk or over its quota.
  if ((code === 'ENOSPC' || code === 'EDQUOT') && typeof e?.syscall === 'string') return 'storage';
  // PostgreSQL's class 53, insufficient resources: disk_full (53100), out_of_memory, too_many_connections, ...
  if (/^53[0-9A-Z]{3}$/.test(code)) return 'database';
  // A connection lost under a query, ended by PostgreSQL (a restart), or one it would not take yet (starting).
  if (isDatabaseConnectionLoss(error)) return 'database';
  // A connection that could not be made: in a request, the only connection the platform opens is to its database.
  if (isConnectionError(error) && e?.syscall === 'connect') return 'database';
  if (typeof e?.message === 'string' && e.message.startsWith('timeout exceeded when trying to connect')) {
    return 'database';
  }
  return null;
}

/** How long after a report further ones of the same kind are only counted. */
export const UNAVAILABLE_BURST_MS = 10_000;

/**
 * Logs a request refused because `what` is unavailable: one error line for a burst (with the cause's code and
 * message), then, UNAVAILABLE_BURST_MS later, how many more requests were refused in it.
 */
export function reportUnavailable(log: Logger, what: Unavailable, error: unknown): void {
  reportInBursts(
    log,
    `unavailable ${what}`,
    UNAVAILABLE_BURST_MS,
    () =>
      log.error(
        { ...errorFields(error), unavailable: what },
        what === 'database'
          ? 'requests answered 503: the database does not answer or cannot take writes'
          : 'requests answered 503: the disk of the media files is full',
      ),
    (count) =>
      log.error({ requests: count, unavailable: what }, 'more requests answered 503 for the same reason'),
  );
}
