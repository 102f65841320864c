import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import type { PlatformConfig } from './config.js';
import { endedDatabaseConnection } from './db/pool.js';

/*
 * The platform's log: pino, JSON lines with a request id (LOG_FORMAT=json, the default, for collectors), or one
 * readable line per entry (LOG_FORMAT=pretty) for a person at a terminal. pretty is a small formatter here rather
 * than pino-pretty: it needs no worker thread and no dependency, and only has to read pino's own flat objects.
 */

/** Errors of a database connection that went away or could not be made: their stack says nothing more. */
const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOENT',
  'EPIPE',
  'ETIMEDOUT',
  '57P01', // admin_shutdown: "terminating connection due to administrator command"
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: the server is starting or stopping
  '08006', // connection_failure
  '08003', // connection_does_not_exist
]);

/** pg's messages for a connection lost under a query, or before the next query of a checked-out client. */
const LOST_MESSAGE = /^(Connection terminated|Client has encountered a connection error)/;

/** Whether `error` is a lost or refused database (or socket) connection. */
export function isConnectionError(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string' && CONNECTION_ERROR_CODES.has(e.code)) return true;
  return typeof e?.message === 'string' && LOST_MESSAGE.test(e.message);
}

/** PostgreSQL's own codes for a connection it ended or lost (not a socket error, which other work may also meet). */
const DATABASE_LOSS_CODES = new Set(['57P01', '57P02', '57P03', '08006', '08003']);

/**
 * Whether `error` is a database connection PostgreSQL ended or pg found closed under a query, the next query of a
 * checked-out client whose connection was lost between two of its queries (pg: "Client has encountered a connection
 * error and is not queryable"), or a socket error that ended a connection of the platform's pools (EPIPE, when a
 * query is written to a backend just terminated: db/pool.ts, endedDatabaseConnection).
 */
export function isDatabaseConnectionLoss(error: unknown): boolean {
  if (endedDatabaseConnection(error)) return true;
  const e = error as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string' && DATABASE_LOSS_CODES.has(e.code)) return true;
  return typeof e?.message === 'string' && LOST_MESSAGE.test(e.message);
}

/** How long after a lost database connection further losses are only counted: a restart of PostgreSQL ends them all. */
export const CONNECTION_LOSS_BURST_MS = 10_000;

const bursts = new WeakMap<Logger, Map<string, { more: number }>>();

/**
 * One report for a burst of the same event on `log` (`kind` tells events apart): the first calls `first`; those that
 * follow within `windowMs` are only counted, and `more` is then called once with their number (if any).
 */
export function reportInBursts(
  log: Logger,
  kind: string,
  windowMs: number,
  first: () => void,
  more: (count: number) => void,
): void {
  let kinds = bursts.get(log);
  if (!kinds) {
    kinds = new Map();
    bursts.set(log, kinds);
  }
  const burst = kinds.get(kind);
  if (burst) {
    burst.more += 1;
    return;
  }
  const started = { more: 0 };
  kinds.set(kind, started);
  first();
  setTimeout(() => {
    kinds.delete(kind);
    if (started.more > 0) more(started.more);
  }, windowMs).unref();
}

/** An error's code and message as a log line shows them, without its stack. */
export function errorFields(error: unknown): { code: unknown; reason: string } {
  const e = error as { code?: unknown; message?: unknown } | null;
  return { code: e?.code, reason: typeof e?.message === 'string' ? e.message : String(error) };
}

/**
 * Reports a database connection that went away: one warning for a burst, then, 10 s later, one line with how many
 * more were lost in it. The pool's idle connections and background work whose query was running when its connection
 * ended (a restart of PostgreSQL ends every connection at once) share the burst, so a restart is one line, not one per
 * connection or per scheduler (issue "What a newcomer tripped over", item 6). `source` says where the first was lost.
 */
export function reportConnectionLoss(log: Logger, error: unknown, source: string): void {
  reportInBursts(
    log,
    'connection lost',
    CONNECTION_LOSS_BURST_MS,
    () => log.warn({ ...errorFields(error), source }, 'database connection lost; the next query reconnects'),
    (count) => log.warn({ connections: count }, 'more database connections were lost'),
  );
}

/**
 * pino's error serializer, except for lost connections: their type, code and message, without a stack or the
 * protocol fields (a stopped PostgreSQL used to write about 500 bytes a pooled connection, 9 kB for a pool).
 */
function serializeError(error: unknown): unknown {
  if (isConnectionError(error)) {
    const e = error as { name?: string; code?: string; message?: string };
    return { type: e.name ?? 'Error', code: e.code, message: e.message };
  }
  return pino.stdSerializers.err(error as Error);
}

const LEVEL_NAMES: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO ',
  40: 'WARN ',
  50: 'ERROR',
  60: 'FATAL',
};

/** Keys every entry has, or that the line shows in its own place. */
const SHOWN_APART = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname', 'host', 'reqId', 'err']);

function value(v: unknown): string {
  if (typeof v === 'string') return /[\s"=]/.test(v) || v === '' ? JSON.stringify(v) : v;
  return JSON.stringify(v) ?? String(v);
}

/**
 * One pino JSON line as a readable line: `09:15:02.113 INFO  [api] request completed reqId=… responseTime=3`. An
 * error's stack, when it has one, follows on indented lines. A line that is not JSON is written as it came.
 */
export function prettyLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const time = typeof entry['time'] === 'number' ? new Date(entry['time']).toISOString().slice(11, 23) : '';
  const level = LEVEL_NAMES[entry['level'] as number] ?? String(entry['level']);
  const parts = [time, level];
  if (typeof entry['host'] === 'string') parts.push(`[${entry['host']}]`);
  parts.push(String(entry['msg'] ?? ''));
  if (entry['reqId'] !== undefined) parts.push(`reqId=${value(entry['reqId'])}`);
  for (const [key, v] of Object.entries(entry)) {
    if (SHOWN_APART.has(key) || v === undefined) continue;
    if (key === 'req' || key === 'res') {
      const r = v as Record<string, unknown>;
      if (key === 'req') parts.push(`${String(r['method'])} ${String(r['url'])}`);
      else parts.push(`status=${String(r['statusCode'])}`);
      continue;
    }
    parts.push(`${key}=${value(v)}`);
  }
  let line = parts.filter((p) => p !== '').join(' ');
  const err = entry['err'] as { type?: string; message?: string; code?: string; stack?: string } | undefined;
  if (err) {
    line += ` err=${value(`${err.type ?? 'Error'}${err.code ? ` ${err.code}` : ''}: ${err.message ?? ''}`)}`;
    const stack = err.stack?.split('\n').slice(1).join('\n');
    if (stack) line += `\n${stack}`;
  }
  return `${line}\n`;
}

/** A destination that writes each pino line to `out` as prettyLine. */
export function prettyDestination(out: { write(text: string): unknown } = process.stdout): Writable {
  let pending = '';
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      pending += chunk.toString('utf8');
      let end = pending.indexOf('\n');
      while (end >= 0) {
        out.write(prettyLine(pending.slice(0, end)));
        pending = pending.slice(end + 1);
        end = pending.indexOf('\n');
      }
      done();
    },
  });
}

export function createLogger(config: Pick<PlatformConfig, 'logLevel'> & Partial<PlatformConfig>): Logger {
  const options = {
    level: config.logLevel,
    base: { service: 'ooh-platform' },
    serializers: { err: serializeError },
  };
  return config.logFormat === 'pretty' ? pino(options, prettyDestination()) : pino(options);
}
