import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Clock, TestClock } from './clock.js';
import type { PlatformConfig } from './config.js';
import type { Db } from './db/pool.js';

/** What every feature gets: configuration, the database, the injected clock, a logger. */
export interface PlatformContext {
  config: PlatformConfig;
  db: Db;
  clock: Clock;
  /** Present only with --test-clock. */
  testClock: TestClock | null;
  log: Logger;
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
