import { fileURLToPath } from 'node:url';
import { defaultClientConditions, defineConfig } from 'vite';

/**
 * The console web application (issue "The console"). Build: `npx vite build --config apps/platform/console/vite.config.ts`
 * (or `node --import tsx apps/platform/console/build.ts`); the platform serves dist/ under /console/ on the api host.
 * Vite 8 transforms TSX with oxc: JSX goes to Preact's automatic runtime (no plugin needed).
 * Workspace packages (@ooh/protocol) resolve to their TypeScript sources through the "source" export condition, as
 * in vitest.config.ts, so the console builds without their dist.
 */
const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/console/',
  publicDir: 'public',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  resolve: {
    alias: { react: 'preact/compat', 'react-dom': 'preact/compat' },
    conditions: ['source', ...defaultClientConditions],
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
  logLevel: 'warn',
});
