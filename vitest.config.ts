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
    // the whole suite, every test passing (November 2026); three: 949 s against 875 s for two, the test files' own time
    // 2 803 s against 1 699 (28 November 2026). Larger machines keep the default.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // A worker keeps its modules from one test file to the next: the platform's import graph (Fastify, pg, pkijs,
    // pino) was loaded anew for each of 194 files, 235 s of the suite's 1 016 in CI. Files share nothing else: each
    // makes its own database, platform and folders, and what a platform keeps is on its context (issue 18), not in a
    // module. Whole suite, 2 workers: 849 s against 1 016 to 1 125 s, every test passing (28 November 2026).
    isolate: false,
    globalSetup: ['apps/platform/test/support/global-setup.ts'],
  },
});
