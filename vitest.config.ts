import { availableParallelism } from 'node:os';
import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

// One runner for every workspace. Workspace packages resolve to their TypeScript
// sources through the "source" export condition, so tests never need a build.
export default defineConfig({
  resolve: { conditions: ['source', ...defaultServerConditions] },
  ssr: { resolve: { conditions: ['source', ...defaultServerConditions], externalConditions: ['source'] } },
  test: {
    include: [
      'packages/*/test/**/*.test.ts',
      'apps/*/test/**/*.test.ts',
      'hardware-sim/test/**/*.test.ts',
      'test/**/*.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Vitest's default is one worker fewer than the cores: one worker on a 2-core machine, where the suite waits on
    // PostgreSQL, child processes and Chromium as much as it computes. Two workers there: 23 minutes against 36 for
    // the whole suite, every test passing (November 2026). Larger machines keep the default.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    globalSetup: ['apps/platform/test/support/global-setup.ts'],
  },
});
