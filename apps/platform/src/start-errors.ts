import net from 'node:net';
import { ConfigError, type PlatformConfig } from './config.js';
import { EmbeddedDatabaseError } from './db/embedded.js';

/*
 * One error style for the platform's commands (issue "What a newcomer tripped over", item 6): every failure is one
 * plain line naming the problem and what to do, never a stack; exit 2 for bad arguments or configuration, 1 for a
 * failure at run time (a port taken, a database out of reach).
 */

/** A start that cannot go on, with the line that says why and the exit status. */
export class StartError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StartError';
  }
}

/** The listeners of a configuration, by the variable that sets each port. */
export function listenersOf(config: PlatformConfig): { variable: string; host: string; port: number }[] {
  const list = [
    { variable: 'API_PORT', host: config.host, port: config.apiPort },
    { variable: 'AGENTS_PORT', host: config.host, port: config.agentsPort },
    { variable: 'DEVICES_PORT', host: config.host, port: config.devicesPort },
    { variable: 'VERIFY_PORT', host: config.host, port: config.verifyPort },
  ];
  if (config.metrics) {
    list.push({ variable: 'METRICS_PORT', host: config.metrics.host, port: config.metrics.port });
  }
  return list;
}

/** The line for a listener that cannot listen, naming the host and the variable to change. */
function listenProblem(
  error: NodeJS.ErrnoException,
  listener: { variable: string; host: string; port: number },
): string {
  const at = `${listener.host}:${listener.port}`;
  const hostVariable = listener.variable === 'METRICS_PORT' ? 'METRICS_HOST' : 'HOST';
  switch (error.code) {
    case 'EADDRINUSE':
      return `${listener.variable}: ${at} is already in use by another program: stop it, or set ${listener.variable} to a free port`;
    case 'EACCES':
      return `${listener.variable}: this user may not listen on ${at} (ports below 1024 need privileges): set ${listener.variable} to a port above 1023`;
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${hostVariable}: ${listener.host} is not an address of this machine: set ${hostVariable} to one of its addresses (127.0.0.1, or 0.0.0.0 for all)`;
    default:
      return `${listener.variable}: cannot listen on ${at} (${error.code ?? error.message})`;
  }
}

function tryListen(host: string, port: number): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(null)));
  });
}

/**
 * Checks that every listener of `config` can listen, before the database is opened and migrated: a port another
 * program holds stops the start at once, naming the host and the variable, with nothing changed. (A port taken in
 * the moment between this check and the real listen is reported the same way by `startFailure`.)
 */
export async function checkListeners(config: PlatformConfig): Promise<void> {
  const problems: string[] = [];
  for (const listener of listenersOf(config)) {
    if (listener.port === 0) continue;
    const error = await tryListen(listener.host, listener.port);
    if (error) problems.push(listenProblem(error, listener));
  }
  if (problems.length > 0) throw new StartError([...new Set(problems)].join('\n'), 1);
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOENT',
]);

/**
 * What to print for an error that stopped a command, and the exit status. Known failures get their own line; any
 * other error its message only (the platform has no debug switch that would print stacks).
 */
export function startFailure(
  error: unknown,
  config: PlatformConfig | null,
  what = 'platform',
  help = `${what} --help`,
): { line: string; exitCode: 1 | 2 } {
  if (error instanceof StartError) return { line: error.message, exitCode: error.exitCode };
  if (error instanceof ConfigError) return { line: error.message, exitCode: 2 };
  if (error instanceof EmbeddedDatabaseError) return { line: error.message, exitCode: 1 };
  const e = error as NodeJS.ErrnoException & { port?: number; address?: string; syscall?: string };
  const code = typeof e?.code === 'string' ? e.code : '';
  if (code.startsWith('ERR_PARSE_ARGS_')) {
    // Node's text goes on about positionals after '--': its first sentence names the option.
    return { line: `${what}: ${e.message.split('. ')[0]} (${help} lists the options)`, exitCode: 2 };
  }
  if (e?.syscall === 'listen' && config) {
    const listener = listenersOf(config).find((l) => l.port === e.port) ?? {
      variable: 'a port variable',
      host: e.address ?? config.host,
      port: e.port ?? 0,
    };
    return { line: listenProblem(e, listener), exitCode: 1 };
  }
  if (e?.syscall === 'connect' && CONNECTION_CODES.has(code) && config?.databaseUrl) {
    return {
      line: `cannot reach the database of DATABASE_URL (${code} ${e.address ?? ''}${e.port ? `:${e.port}` : ''}): is PostgreSQL running there? Unset DATABASE_URL for the embedded one`,
      exitCode: 1,
    };
  }
  // PostgreSQL's refusal of the login named in DATABASE_URL (invalid_password, invalid_authorization_specification,
  // invalid_catalog_name).
  if (['28P01', '28000', '3D000'].includes(code) && config?.databaseUrl) {
    return { line: `the database of DATABASE_URL refused the connection: ${e.message}`, exitCode: 1 };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { line: `${what} failed to start: ${message}`, exitCode: 1 };
}
