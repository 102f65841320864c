/**
 * Builds the console into apps/platform/console/dist (or the folder given as the first argument), the folder the
 * platform serves under /console/. Used by `npm run build`; the same as
 * `npx vite build --config apps/platform/console/vite.config.ts`.
 */
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

export async function buildConsole(outDir?: string): Promise<void> {
  await build({
    configFile: fileURLToPath(new URL('./vite.config.ts', import.meta.url)),
    ...(outDir ? { build: { outDir, emptyOutDir: true } } : {}),
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  buildConsole(process.argv[2]).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
