import { mkdir } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { authenticateRoutes } from './auth/plugin.js';
import { type Clock, systemClock, TestClock } from './clock.js';
import type { PlatformConfig } from './config.js';
import type { PlatformContext } from './context.js';
import { type EmbeddedDatabase, startEmbeddedPostgres } from './db/embedded.js';
import { migrate } from './db/migrate.js';
import { createPool, type Db } from './db/pool.js';
import { type DevicesHttpsOptions, devicesHttpsOptions } from './devices/tls.js';
import { FEATURES, type Feature } from './features.js';
import { createHostServer, type HostName } from './http/server.js';
import { consoleSessionResolver } from './sessions/index.js';

export interface Servers {
  api: FastifyInstance;
  agents: FastifyInstance;
  devices: FastifyInstance;
  verify: FastifyInstance;
}

/**
 * Builds the four host servers with every feature's routes, without
 * listening. Tests use this with `inject()`; `startPlatform` listens.
 */
export async function buildServers(
  ctx: PlatformContext,
  features: Feature[] = FEATURES,
  options: { devicesHttps?: DevicesHttpsOptions | null } = {},
): Promise<Servers> {
  const ready = async () => {
    await ctx.db.query('SELECT 1');
  };
  // The devices host is HTTPS with client certificates when given its TLS options (src/devices/tls.ts).
  const https = (name: HostName) =>
    name === 'devices' && options.devicesHttps ? { https: options.devicesHttps } : {};
  const make = (name: HostName) =>
    createHostServer({ name, logger: ctx.log, ready, now: () => ctx.clock.now(), ...https(name) });
  const servers: Servers = {
    api: make('api'),
    agents: make('agents'),
    devices: make('devices'),
    verify: make('verify'),
  };

  await servers.api.register(async (publicScope) => {
    for (const f of features) await f.apiPublic?.(publicScope, ctx);
  });
  await servers.api.register(async (authScope) => {
    authenticateRoutes(authScope, { db: ctx.db, sessions: consoleSessionResolver(ctx) });
    for (const f of features) await f.api?.(authScope, ctx);
  });
  for (const host of ['agents', 'devices', 'verify'] as const) {
    await servers[host].register(async (scope) => {
      for (const f of features) await f[host]?.(scope, ctx);
    });
  }
  await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.ready()));
  return servers;
}

export interface Platform {
  ctx: PlatformContext;
  servers: Servers;
  /** Listening addresses, e.g. { api: 'http://127.0.0.1:8080', ... }. */
  urls: Record<HostName, string>;
  close(): Promise<void>;
}

export interface StartOptions {
  config: PlatformConfig;
  log?: Logger;
  clock?: Clock;
  features?: Feature[];
  /** Run the features' background work (schedulers). Off in all but one process of a cluster (src/cluster.ts). */
  schedulers?: boolean;
  /** PostgreSQL application_name of the connections (default ooh-platform). */
  applicationName?: string;
}

export interface PlatformDatabase {
  db: Db;
  url: string;
  close(): Promise<void>;
}

/** Opens the database (embedded unless DATABASE_URL) and applies migrations. */
export async function openDatabase(
  config: PlatformConfig,
  log: Logger,
  options: { applicationName?: string } = {},
): Promise<PlatformDatabase> {
  await mkdir(config.dataDir, { recursive: true });
  let embedded: EmbeddedDatabase | null = null;
  let url = config.databaseUrl;
  if (!url) {
    embedded = await startEmbeddedPostgres({
      dir: `${config.dataDir}/pgdata`,
      port: config.embeddedPgPort,
      onLog: (line) => log.debug({ pg: line.trim() }, 'postgres'),
    });
    url = embedded.url;
    log.info({ dir: `${config.dataDir}/pgdata` }, 'embedded PostgreSQL started');
  }
  const db = createPool(url, {
    onIdleError: (error) => log.warn({ err: error }, 'idle database connection lost'),
    ...(options.applicationName ? { applicationName: options.applicationName } : {}),
  });
  const close = async () => {
    await db.end();
    await embedded?.stop();
  };
  try {
    const applied = await migrate(db, { log: (m) => log.info(m) });
    if (applied.length > 0) log.info({ applied }, 'migrations applied');
  } catch (error) {
    await close().catch(() => {});
    throw error;
  }
  return { db, url, close };
}

export function createLogger(config: PlatformConfig): Logger {
  return pino({ level: config.logLevel, base: { service: 'ooh-platform' } });
}

/** Opens the database, migrates, builds the four hosts and listens on them. */
export async function startPlatform(options: StartOptions): Promise<Platform> {
  const { config } = options;
  const log = options.log ?? createLogger(config);
  const database = await openDatabase(
    config,
    log,
    options.applicationName ? { applicationName: options.applicationName } : {},
  );
  const { db } = database;
  const cleanup: (() => Promise<void>)[] = [database.close];
  try {
    const testClock = config.testClock ? new TestClock() : null;
    const clock = options.clock ?? testClock ?? systemClock;
    const ctx: PlatformContext = { config, db, clock, testClock, log };
    const servers = await buildServers(ctx, options.features, {
      devicesHttps: await devicesHttpsOptions(ctx),
    });
    cleanup.unshift(async () => {
      await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
    });
    const features = options.features ?? FEATURES;
    for (const f of features) {
      if (f.start && options.schedulers !== false) cleanup.unshift(await f.start(ctx));
    }
    const ports: Record<HostName, number> = {
      api: config.apiPort,
      agents: config.agentsPort,
      devices: config.devicesPort,
      verify: config.verifyPort,
    };
    const urls = {} as Record<HostName, string>;
    for (const host of ['api', 'agents', 'devices', 'verify'] as const) {
      await servers[host].listen({ host: config.host, port: ports[host] });
      const address = servers[host].server.address();
      const port = typeof address === 'object' && address ? address.port : ports[host];
      const scheme = host === 'devices' && servers.devices.initialConfig.https ? 'https' : 'http';
      const shownHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
      urls[host] = `${scheme}://${shownHost}:${port}`;
    }
    log.info({ urls }, 'platform listening');
    let closed = false;
    return {
      ctx,
      servers,
      urls,
      close: async () => {
        if (closed) return;
        closed = true;
        for (const step of cleanup)
          await step().catch((error) => log.error({ err: error }, 'error while closing'));
      },
    };
  } catch (error) {
    for (const step of cleanup) await step().catch(() => {});
    throw error;
  }
}

export type { Db };
