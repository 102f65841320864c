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
