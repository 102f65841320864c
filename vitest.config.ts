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
    globalSetup: ['apps/platform/test/support/global-setup.ts'],
  },
});
