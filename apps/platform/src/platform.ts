import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { authenticateRoutes } from './auth/plugin.js';
import { type Clock, systemClock, TestClock } from './clock.js';
import type { PlatformConfig } from './config.js';
import { closePlatformCaches, type Feature, type PlatformContext, platformContext } from './context.js';
import {
  credentialsFile,
  type EmbeddedCluster,
  openEmbeddedCluster,
  type ServerEvent,
} from './db/embedded.js';
import { migrate } from './db/migrate.js';
import { createPool, type Db } from './db/pool.js';
import { type DevicesHttpsOptions, devicesHttpsOptions } from './devices/tls.js';
import { FEATURES } from './features.js';
import { listenMetrics, type MetricsListener, PlatformMetrics, renderMetrics } from './http/metrics.js';
import { createHostServer, type HostName } from './http/server.js';
import { createLogger, reportConnectionLoss } from './logging.js';
import { mediaDir } from './media/store.js';
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
  options: { devicesHttps?: DevicesHttpsOptions | null; metrics?: PlatformMetrics } = {},
): Promise<Servers> {
  const ready = async () => {
    await ctx.db.query('SELECT 1');
  };
  // The devices host is HTTPS with client certificates when given its TLS options (src/devices/tls.ts).
  const https = (name: HostName) =>
    name === 'devices' && options.devicesHttps ? { https: options.devicesHttps } : {};
  const make = (name: HostName) =>
    createHostServer({
      name,
      logger: ctx.log,
      ready,
      now: () => ctx.clock.now(),
      trustProxy: ctx.config.trustProxy,
      ...(options.metrics ? { metrics: options.metrics } : {}),
      ...https(name),
    });
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
    authenticateRoutes(authScope, {
      db: ctx.db,
      now: () => ctx.clock.now(),
      sessions: consoleSessionResolver(ctx),
    });
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
  /** This process's metrics (served on METRICS_PORT, or gathered by a cluster's primary). */
  metrics: PlatformMetrics;
  /** The metrics listener's URL, when this process serves one. */
  metricsUrl: string | null;
  close(): Promise<void>;
  /**
   * For a process that exits without waiting for close() (`npm start`'s second Ctrl-C): stops the embedded
   * PostgreSQL this process started at once (immediate shutdown, waited for synchronously), so that it is not left
   * running in its own process group. Nothing with DATABASE_URL.
   */
  stopDatabaseNow(): void;
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
  /** Serve config.metrics on its own listener (default true; a cluster's workers leave it to the primary). */
  metricsListener?: boolean;
}

export interface PlatformDatabase {
  db: Db;
  url: string;
  /** The embedded cluster; null with DATABASE_URL. */
  embedded: EmbeddedCluster | null;
  /** Ends the pool, then stops the embedded cluster if this process started it. */
  close(): Promise<void>;
  /** Stops the embedded cluster at once if this process started it (EmbeddedCluster.stopNow). */
  stopNow(): void;
}

export interface OpenDatabaseOptions {
  /** PostgreSQL application_name of the connections. */
  applicationName?: string;
  /**
   * serve (default): the platform; an embedded cluster another platform serves is refused. command: a command
   * (bootstrap) that uses the cluster a running platform serves, or starts one of its own for as long as it runs.
   */
  use?: 'serve' | 'command';
  /** What this process is, as another process names it ("platform run"). */
  what?: string;
}

/**
 * A line the embedded PostgreSQL wrote, in the platform's log: PANIC (it stops: a full disk under its WAL, say) as
 * an error, FATAL (a session or a start refused) as a warning, the rest (its ordinary LOG lines, the errors of
 * statements the platform handles) for debugging only.
 */
function postgresLine(log: Logger, line: string): void {
  const pg = line.trim();
  if (/\bPANIC:/.test(pg)) log.error({ pg }, 'postgres');
  else if (/\bFATAL:/.test(pg)) log.warn({ pg }, 'postgres');
  else log.debug({ pg }, 'postgres');
}

function reportServerEvent(log: Logger, event: ServerEvent): void {
  switch (event.kind) {
    case 'exited':
      log.error(
        { code: event.code, signal: event.signal, pg: event.lastLine, restart_in_ms: event.restartInMs },
        'the embedded PostgreSQL exited; requests are answered 503 until it is started again',
      );
      return;
    case 'restart_failed':
      log.error(
        { attempts: event.attempts, reason: event.reason, restart_in_ms: event.restartInMs },
        'the embedded PostgreSQL could not be started again; trying again',
      );
      return;
    case 'restarted':
      log.warn(
        { attempts: event.attempts, down_ms: event.downMs },
        'the embedded PostgreSQL was started again and serves',
      );
      return;
  }
}

/** Opens the database (embedded unless DATABASE_URL) and applies migrations. */
export async function openDatabase(
  config: PlatformConfig,
  log: Logger,
  options: OpenDatabaseOptions = {},
): Promise<PlatformDatabase> {
  await mkdir(config.dataDir, { recursive: true });
  let embedded: EmbeddedCluster | null = null;
  let url = config.databaseUrl;
  if (!url) {
    const dir = path.join(config.dataDir, 'pgdata');
    embedded = await openEmbeddedCluster({
      dir,
      port: config.embeddedPgPort,
      use: options.use ?? 'serve',
      what: options.what ?? 'the platform',
      onLog: (line) => postgresLine(log, line),
      onServerEvent: (event) => reportServerEvent(log, event),
    });
    // The platform role, never the superuser (issue "Trust under attack", item 2).
    url = embedded.url;
    if (embedded.stoppedOrphan !== null) {
      log.warn(
        { dir, pid: embedded.stoppedOrphan },
        'stopped the embedded PostgreSQL a killed platform had left running; started it again',
      );
    }
    if (embedded.setUp === 'moved') {
      log.warn(
        { dir, credentials: credentialsFile(dir) },
        'moved the embedded PostgreSQL over: random passwords, role ooh_platform owns the schema, Unix socket only',
      );
    }
    if (embedded.owner) {
      log.info({ dir, pid: embedded.owner.pid }, `using the embedded PostgreSQL of ${embedded.owner.what}`);
    } else {
      log.info({ dir, socket: embedded.socketDir }, 'embedded PostgreSQL started');
    }
  }
  const db = createPool(url, {
    onIdleError: (error) => reportConnectionLoss(log, error, 'an idle connection of the pool'),
    ...(options.applicationName ? { applicationName: options.applicationName } : {}),
  });
  const cluster = embedded;
  let closing: Promise<void> | null = null;
  // The pool first: PostgreSQL stopped under open connections ends them ("terminating connection due to
  // administrator command", issue "A newcomer's two commands", item 7).
  const close = () => {
    closing ??= (async () => {
      try {
        await db.end();
      } finally {
        await cluster?.stop();
      }
    })();
    return closing;
  };
  try {
    const applied = await migrate(db, { log: (m) => log.info(m) });
    if (applied.length > 0) log.info({ applied }, 'migrations applied');
  } catch (error) {
    await close().catch(() => {});
    throw error;
  }
  return { db, url, embedded, close, stopNow: () => cluster?.stopNow() };
}

export { createLogger };

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
  // Closed in this order (issue "A newcomer's two commands", item 7: "listeners, schedulers, pools, then the
  // database"): the listeners answer what is in flight and take nothing new, the schedulers stop (the newest
  // first), the caches are emptied, then the pool ends and the embedded PostgreSQL, if this process started it,
  // stops.
  let listeners: (() => Promise<void>) | null = null;
  let metricsListener: MetricsListener | null = null;
  const schedulers: (() => Promise<void>)[] = [];
  const testClock = config.testClock ? new TestClock() : null;
  const clock = options.clock ?? testClock ?? systemClock;
  const ctx = platformContext({ config, db, clock, testClock, log });
  const metrics = new PlatformMetrics({
    db,
    now: () => clock.now(),
    background: ctx.caches.background,
    volumes: { data: config.dataDir, media: mediaDir(config.dataDir) },
  });
  const cleanup = () => [
    ...(listeners ? [listeners] : []),
    ...[...schedulers].reverse(),
    async () => {
      await metricsListener?.close();
      metrics.close();
    },
    // Nothing reads the caches once the listeners and schedulers have stopped.
    () => closePlatformCaches(ctx.caches),
    database.close,
  ];
  try {
    const servers = await buildServers(ctx, options.features, {
      devicesHttps: await devicesHttpsOptions(ctx),
      metrics,
    });
    listeners = async () => {
      await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
    };
    const features = options.features ?? FEATURES;
    for (const f of features) {
      if (f.start && options.schedulers !== false) schedulers.push(await f.start(ctx));
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
    if (config.metrics && options.metricsListener !== false) {
      metricsListener = await listenMetrics(config.metrics, async () =>
        renderMetrics([{ labels: {}, families: await metrics.collect() }]),
      );
    }
    log.info({ urls, metrics: metricsListener?.url }, 'platform listening');
    let closed = false;
    return {
      ctx,
      servers,
      urls,
      metrics,
      metricsUrl: metricsListener?.url ?? null,
      close: async () => {
        if (closed) return;
        closed = true;
        for (const step of cleanup())
          await step().catch((error) => log.error({ err: error }, 'error while closing'));
      },
      stopDatabaseNow: () => database.stopNow(),
    };
  } catch (error) {
    for (const step of cleanup()) await step().catch(() => {});
    throw error;
  }
}

export type { Db };
