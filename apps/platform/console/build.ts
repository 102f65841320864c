/**
 * Builds the console into apps/platform/console/dist (or the folder given as the first argument), the folder the
 * platform serves under /console/, and the public verification page (src/public) into apps/platform/dist/public-web
 * (or the second argument), the folder the verify host serves at `/` (src/public-page). Used by `npm run build`;
 * the console alone is `npx vite build --config apps/platform/console/vite.config.ts`.
 */
import { fileURLToPath } from 'node:url';
import { build, defaultClientConditions } from 'vite';

export async function buildConsole(outDir?: string): Promise<void> {
  await build({
    configFile: fileURLToPath(new URL('./vite.config.ts', import.meta.url)),
    ...(outDir ? { build: { outDir, emptyOutDir: true } } : {}),
  });
}

/** Where the verify host looks for the public page by default (DEFAULT_PUBLIC_PAGE_DIST in src/public-page). */
export const PUBLIC_PAGE_DIST = fileURLToPath(new URL('../dist/public-web/', import.meta.url));

/**
 * The public page of the verify host (issue 22, item 1): a bundle of its own, served from the verify host's root, so
 * it needs neither the console nor the api host. It imports the console's verifier (src/verify) and its date and
 * number formats, nothing else of the console.
 */
export async function buildPublicPage(outDir: string = PUBLIC_PAGE_DIST): Promise<void> {
  await build({
    configFile: false,
    root: fileURLToPath(new URL('./src/public/', import.meta.url)),
    base: '/',
    publicDir: fileURLToPath(new URL('./public/', import.meta.url)),
    oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
    resolve: {
      alias: { react: 'preact/compat', 'react-dom': 'preact/compat' },
      // As the console (vite.config.ts): workspace packages from their sources.
      conditions: ['source', ...defaultClientConditions],
    },
    build: {
      outDir,
      emptyOutDir: true,
      target: 'es2022',
      sourcemap: false,
      assetsInlineLimit: 0,
      reportCompressedSize: false,
    },
    logLevel: 'warn',
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  (async () => {
    await buildConsole(process.argv[2]);
    await buildPublicPage(process.argv[3]);
  })().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
