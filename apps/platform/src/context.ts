import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { AuthorityCache } from './authority/cache.js';
import type { Clock, TestClock } from './clock.js';
import type { PlatformConfig } from './config.js';
import type { Db } from './db/pool.js';
import { DeviceCaches } from './devices/caches.js';
import { PopCaches } from './pop/caches.js';
import { BackgroundRuns } from './shared/background-runs.js';

/** What every feature gets: configuration, the database, the injected clock, a logger, and the platform's caches. */
export interface PlatformContext {
  config: PlatformConfig;
  db: Db;
  clock: Clock;
  /** Present only with --test-clock. */
  testClock: TestClock | null;
  log: Logger;
  /**
   * What this platform loads once and keeps between requests (issue 18: on the context, not in a module-level map,
   * so two platforms in one process share nothing and close() leaves nothing behind). One object per concern.
   */
  caches: PlatformCaches;
}

export interface PlatformCaches {
  /** The device identity settings, the device CA, verified proxied chains and certificate serials. */
  devices: DeviceCaches;
  /** The authority's PKI (root, issuing CA, envelope and seal signers). */
  authority: AuthorityCache;
  /** Proof of play: the agent channels' shared lookup, the group committer, the known record partitions. */
  pop: PopCaches;
  /** What the background work (src/shared/ticker.ts) did, for /metrics: kept for the process's life, never emptied. */
  background: BackgroundRuns;
}

/** The caches of a new platform: empty, each filled on first need. */
export function platformCaches(
  ctx: Pick<PlatformContext, 'config' | 'db' | 'clock' | 'log'>,
): PlatformCaches {
  return {
    devices: new DeviceCaches(ctx),
    authority: new AuthorityCache(ctx),
    pop: new PopCaches(ctx),
    background: new BackgroundRuns(),
  };
}

/** A platform's context with fresh caches (startPlatform, and tests that build their servers themselves). */
export function platformContext(parts: Omit<PlatformContext, 'caches'>): PlatformContext {
  return { ...parts, caches: platformCaches(parts) };
}

/**
 * Empties every cache of a platform: its close() calls this once the listeners and schedulers have stopped, before
 * the pool ends (a cache that holds work, not only values, would finish it here).
 */
export async function closePlatformCaches(caches: PlatformCaches): Promise<void> {
  caches.devices.clear();
  caches.authority.clear();
  caches.pop.clear();
}

/**
 * A feature registers its routes on the hosts it serves. `api` routes are
 * registered inside the authenticated context and must declare `config.auth`;
 * `apiPublic` routes take no credentials.
 */
export interface Feature {
  name: string;
  api?: (app: FastifyInstance, ctx: PlatformContext) => Promise<void> | void;
  apiPublic?: (app: FastifyInstance, ctx: PlatformContext) => Promise<void> | void;
  agents?: (app: FastifyInstance, ctx: PlatformContext) => Promise<void> | void;
  devices?: (app: FastifyInstance, ctx: PlatformContext) => Promise<void> | void;
  verify?: (app: FastifyInstance, ctx: PlatformContext) => Promise<void> | void;
  /** Background work (schedulers); returns a stop function. */
  start?: (ctx: PlatformContext) => Promise<() => Promise<void>> | (() => Promise<void>);
}
