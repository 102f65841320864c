import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { onTestFailed, onTestFinished } from 'vitest';
import { bootstrap } from '../../apps/platform/src/bootstrap.js';
import { TestClock } from '../../apps/platform/src/clock.js';
import { loadConfig, type PlatformConfig } from '../../apps/platform/src/config.js';
import { freeHostPorts } from '../../apps/platform/src/db/embedded.js';
import { type Platform, startPlatform } from '../../apps/platform/src/platform.js';
import { createTestDatabase, type TestDatabase } from '../../apps/platform/test/support/database.js';
import type { PlatformClock, PlatformUrls } from '../../hardware-sim/src/index.js';

/**
 * One platform per end-to-end test: its own database on the run's PostgreSQL (the global setup's server), a
 * data directory in the test's temp folder, fixed free ports (so it can be restarted in place), a frozen test
 * clock moved by the simulator, and its log in the temp folder.
 */

export interface E2ePlatform {
  urls: PlatformUrls;
  adminKey: string;
  clock: TestClock;
  /** The clock as the fleet's time driver moves it. */
  platformClock: PlatformClock;
  config: PlatformConfig;
  database: TestDatabase;
  platform: () => Platform;
  /** Stops the platform (the database stays) and starts it again on the same ports and data. */
  restart(options?: { downMs?: number }): Promise<void>;
  close(): Promise<void>;
}

/**
 * A temp folder for one test, on tmpfs when the machine has one (the agents' SQLite files use synchronous FULL;
 * fsync on a disk would dominate the run). Removed after a passing test, kept (and named) after a failing one.
 */
export function testDir(name: string): string {
  const base = existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const dir = mkdtempSync(path.join(base, `ooh-e2e-${name}-`));
  onTestFailed((context) => {
    if (!context.task.fails) console.error(`test failed: its files and logs are kept in ${dir}`);
  });
  onTestFinished((context) => {
    // A failure is kept for a look; an expected failure (test.fails, a known bug) is not.
    const failed = context.task.result?.state === 'fail' && !context.task.fails;
    if (failed || process.env['KEEP_E2E_DIRS'] === '1') return;
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

export async function startE2ePlatform(args: {
  dir: string;
  now: Date;
  /** Environment for the devices host (e.g. DEVICES_TLS_TERMINATION=proxy behind the simulator's proxy). */
  env?: Record<string, string>;
  /** The clock runs on from `now` at real speed (a real site) instead of standing still between steps. */
  running?: boolean;
}): Promise<E2ePlatform> {
  const database = await createTestDatabase();
  const clock = new TestClock(args.now, { frozen: args.running !== true });
  const ports = await freeHostPorts();
  const dataDir = path.join(args.dir, 'platform');
  mkdirSync(dataDir, { recursive: true });
  const config = loadConfig({
    env: {
      ...process.env,
      ...args.env,
      API_PORT: String(ports.api),
      AGENTS_PORT: String(ports.agents),
      DEVICES_PORT: String(ports.devices),
      VERIFY_PORT: String(ports.verify),
    },
    overrides: { env: 'test', logLevel: 'warn', databaseUrl: database.url, dataDir },
  });
  const log = pino(
    { level: 'warn' },
    pino.destination({ dest: path.join(args.dir, 'platform.log'), sync: false }),
  );
  let platform = await startPlatform({ config, clock, log });
  const { key } = await bootstrap(platform.ctx.db, clock, { keyName: 'e2e admin' });
  return {
    urls: platform.urls,
    adminKey: key,
    clock,
    platformClock: {
      set: async (at) => {
        clock.set(at, { frozen: true });
      },
    },
    config,
    database,
    platform: () => platform,
    restart: async (options = {}) => {
      await platform.close();
      if (options.downMs) await new Promise((resolve) => setTimeout(resolve, options.downMs));
      platform = await startPlatform({ config, clock, log });
    },
    close: async () => {
      await platform.close();
      await database.drop();
      log.flush();
    },
  };
}
