/**
 * `npm run player:build`: the Electron player's bundles, in the folder electron-builder packages (the "app" folder
 * of electron-builder.json), apps/agent/dist-player/app:
 *
 *   main.mjs             electron/main.ts: the main process with the agent core (ESM)
 *   preload.cjs          electron/preload.ts: one CommonJS file, as a sandboxed preload must be
 *   renderer/index.html  electron/renderer/index.html, as it is
 *   renderer/renderer.js electron/renderer/renderer.ts for the page (IIFE)
 *   cli.mjs              src/cli/main.ts: `agent init | install | status | run`, run on the player by Electron's
 *                        own Node (ELECTRON_RUN_AS_NODE, the `ooh-agent` command of the kiosk package)
 *   package.json         the app's manifest: main = main.mjs, the one runtime dependency left outside the bundles
 *
 * Everything is bundled but `electron` (the runtime itself) and `better-sqlite3` (a native module: it is rebuilt
 * for Electron's ABI at packaging time and loaded from node_modules, unpacked from the asar). Nothing here needs
 * Electron's binary; `npm run player:package` (scripts/player-package.ts) makes the installers from this folder.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build, type BuildOptions } from 'esbuild';

export const AGENT_DIR = join(import.meta.dirname, '..');
export const ELECTRON_DIR = join(AGENT_DIR, 'electron');
/** electron-builder's `directories.app` (electron-builder.json): what goes into app.asar. */
export const PLAYER_APP_DIR = join(AGENT_DIR, 'dist-player', 'app');

/** Left out of the bundles, loaded at run time: Electron's own module, and the one native module. */
export const EXTERNAL = ['electron', 'better-sqlite3'] as const;

/** The Node and Chromium of Electron 42 are newer than these; the targets only bound the syntax esbuild emits. */
const NODE_TARGET = 'node22';
const CHROME_TARGET = 'chrome120';

/**
 * An ES module bundle that contains CommonJS code (undici, chokidar's dependencies) calls `require` for Node's
 * built-ins; ESM has none, so the bundle makes one.
 */
const ESM_REQUIRE_BANNER =
  "import { createRequire as __playerCreateRequire } from 'node:module';\n" +
  'const require = __playerCreateRequire(import.meta.url);';

export interface PlayerBuild {
  appDir: string;
  files: string[];
}

interface AgentManifest {
  version: string;
  dependencies: Record<string, string>;
}

export async function buildPlayer(appDir: string = PLAYER_APP_DIR): Promise<PlayerBuild> {
  rmSync(appDir, { recursive: true, force: true });
  mkdirSync(join(appDir, 'renderer'), { recursive: true });

  const common: BuildOptions = {
    bundle: true,
    logLevel: 'warning',
    legalComments: 'none',
    absWorkingDir: AGENT_DIR,
  };
  const node: BuildOptions = {
    ...common,
    platform: 'node',
    target: NODE_TARGET,
    // The workspace packages (@ooh/protocol, @ooh/crypto, ...) are bundled from their TypeScript sources.
    conditions: ['source'],
    external: [...EXTERNAL],
  };
  await Promise.all([
    build({
      ...node,
      entryPoints: [join(ELECTRON_DIR, 'main.ts')],
      format: 'esm',
      banner: { js: ESM_REQUIRE_BANNER },
      outfile: join(appDir, 'main.mjs'),
    }),
    build({
      ...node,
      entryPoints: [join(ELECTRON_DIR, 'preload.ts')],
      format: 'cjs',
      // A sandboxed preload may require `electron` and nothing else.
      external: ['electron'],
      outfile: join(appDir, 'preload.cjs'),
    }),
    build({
      ...node,
      entryPoints: [join(AGENT_DIR, 'src', 'cli', 'main.ts')],
      format: 'esm',
      banner: { js: ESM_REQUIRE_BANNER },
      outfile: join(appDir, 'cli.mjs'),
    }),
    build({
      ...common,
      entryPoints: [join(ELECTRON_DIR, 'renderer', 'renderer.ts')],
      platform: 'browser',
      format: 'iife',
      target: CHROME_TARGET,
      outfile: join(appDir, 'renderer', 'renderer.js'),
    }),
  ]);
  copyFileSync(join(ELECTRON_DIR, 'renderer', 'index.html'), join(appDir, 'renderer', 'index.html'));

  const agent = JSON.parse(readFileSync(join(AGENT_DIR, 'package.json'), 'utf8')) as AgentManifest;
  const manifest = {
    name: 'ooh-player',
    version: agent.version,
    description:
      'Display player of the outdoor advertising approval service: plays approved media, proves each play',
    main: 'main.mjs',
    private: true,
    dependencies: Object.fromEntries(
      EXTERNAL.filter((name) => name !== 'electron').map((name) => [name, dep(agent, name)]),
    ),
  };
  writeFileSync(join(appDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

  return {
    appDir,
    files: [
      'main.mjs',
      'preload.cjs',
      'cli.mjs',
      'renderer/index.html',
      'renderer/renderer.js',
      'package.json',
    ],
  };
}

function dep(agent: AgentManifest, name: string): string {
  const version = agent.dependencies[name];
  if (!version) throw new Error(`apps/agent/package.json has no dependency ${name}`);
  return version;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  buildPlayer(process.argv[2]).then(
    (result) => console.log(`player bundles in ${result.appDir}: ${result.files.join(', ')}`),
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
