/**
 * `npm run player:package`: the kiosk player's installers (deb and AppImage, electron-builder.json) in
 * apps/agent/dist-player/release. It needs Electron's own binary, which `npm ci` never downloads: when it is absent
 * this stops at once and says how to get it, instead of letting electron-builder download it.
 *
 *   npm run player:package -- --maintainer "Name <email>" --homepage https://…   deb and AppImage
 *   npm run player:package -- … --dir                                            only the unpacked folder
 *
 * Steps: the bundles (scripts/player-build.ts), then better-sqlite3 and its runtime dependencies copied from the
 * workspace into the app folder (with a lockfile there, so @electron/rebuild looks no further up: it rebuilds every
 * copy of a module it finds between the app folder and the nearest lockfile, and the workspace's own copy must stay
 * built for Node), then electron-builder: @electron/rebuild rebuilds better-sqlite3 for Electron's ABI (npmRebuild;
 * it fetches Electron's headers or better-sqlite3's prebuilt binary for Electron), asar with the native module
 * unpacked, the deb (fpm) and the AppImage (appimagetool), which electron-builder fetches on first use.
 */
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { AGENT_DIR, buildPlayer, PLAYER_APP_DIR } from './player-build.js';

export const BUILDER_CONFIG_FILE = join(AGENT_DIR, 'electron-builder.json');

export interface ElectronBinary {
  version: string;
  /** The folder with Electron's executable: electron-builder's `electronDist`. */
  dist: string;
  present: boolean;
}

/**
 * Where Electron's binary is for the pinned `electron` package: node_modules/electron/dist, filled by the package's
 * own `install-electron` command, or $ELECTRON_OVERRIDE_DIST_PATH (Electron's convention for a binary kept
 * elsewhere). Present only with the executable and a `version` file naming the pinned version. Reads package.json
 * only: requiring `electron` itself from Node would start the download.
 */
export function findElectronBinary(env: NodeJS.ProcessEnv = process.env): ElectronBinary {
  const manifestPath = createRequire(join(AGENT_DIR, 'package.json')).resolve('electron/package.json');
  const { version } = JSON.parse(readFileSync(manifestPath, 'utf8')) as { version: string };
  const dist = env['ELECTRON_OVERRIDE_DIST_PATH'] || join(dirname(manifestPath), 'dist');
  let distVersion: string | null = null;
  try {
    distVersion = readFileSync(join(dist, 'version'), 'utf8').trim().replace(/^v/, '');
  } catch {
    distVersion = null;
  }
  return { version, dist, present: distVersion === version && existsSync(join(dist, 'electron')) };
}

export function missingBinaryMessage(binary: ElectronBinary): string {
  return [
    `player:package: Electron ${binary.version}'s binary is not at ${binary.dist}; nothing was built.`,
    '`npm ci` installs the electron package without it, and this script does not download it. On a machine with',
    'internet, from the repository root:',
    '',
    '  (cd apps/agent && npx --no install-electron)    # downloads it into node_modules/electron/dist',
    '',
    `or unpack electron-v${binary.version}-linux-x64.zip from Electron's releases into a folder and set`,
    'ELECTRON_OVERRIDE_DIST_PATH to it. Then run `npm run player:package` again (apps/agent/README.md).',
  ].join('\n');
}

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/**
 * Copies `names` and their runtime dependencies, as the workspace has them installed, into `appDir/node_modules`
 * (flat), without their build output (rebuilt for Electron), and writes `appDir/package-lock.json` for them.
 */
export function stageNativeDependencies(appDir: string, names: string[]): Manifest[] {
  const staged = new Map<string, Manifest>();
  const visit = (name: string, from: string) => {
    const manifestPath = createRequire(join(from, 'package.json')).resolve(`${name}/package.json`);
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as Manifest;
    const seen = staged.get(name);
    if (seen) {
      if (seen.version !== manifest.version) {
        throw new Error(
          `${name} is installed as ${seen.version} and ${manifest.version}: cannot stage it flat`,
        );
      }
      return;
    }
    staged.set(name, manifest);
    const source = dirname(manifestPath);
    cpSync(source, join(appDir, 'node_modules', name), {
      recursive: true,
      dereference: true,
      filter: (path) => path !== join(source, 'build') && path !== join(source, 'node_modules'),
    });
    for (const dependency of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) {
      visit(dependency, source);
    }
  };
  for (const name of names) visit(name, AGENT_DIR);

  const app = JSON.parse(readFileSync(join(appDir, 'package.json'), 'utf8')) as Manifest;
  const packages: Record<string, unknown> = {
    '': { name: app.name, version: app.version, dependencies: app.dependencies ?? {} },
  };
  for (const [name, manifest] of staged) {
    packages[`node_modules/${name}`] = {
      version: manifest.version,
      ...(manifest.dependencies ? { dependencies: manifest.dependencies } : {}),
    };
  }
  writeFileSync(
    join(appDir, 'package-lock.json'),
    `${JSON.stringify({ name: app.name, version: app.version, lockfileVersion: 3, requires: true, packages }, null, 2)}\n`,
  );
  return [...staged.values()];
}

export interface PackageOptions {
  electron: ElectronBinary;
  /** electron-builder's Linux targets; null: the config's (deb, AppImage). */
  targets: string[] | null;
  /** The bundles (scripts/player-build.ts); better-sqlite3 is staged into it. */
  appDir: string;
  /** Default: the config's (dist-player/release). */
  outputDir?: string;
  maintainer?: string;
  homepage?: string;
  /**
   * false only to check the package's layout where Electron's headers cannot be fetched: the player it makes has
   * better-sqlite3 built for Node, which Electron refuses to load.
   */
  rebuild?: boolean;
}

/** electron-builder with electron-builder.json, on the bundles in `appDir`; returns the artifacts' paths. */
export async function packagePlayer(options: PackageOptions): Promise<string[]> {
  mkdirSync(join(options.appDir, 'node_modules'), { recursive: true });
  stageNativeDependencies(options.appDir, ['better-sqlite3']);
  const config = JSON.parse(readFileSync(BUILDER_CONFIG_FILE, 'utf8')) as { linux: { target: string[] } };
  const { build } = await import('electron-builder');
  // electron-builder reads electron-builder.json from projectDir itself; `config` is merged into it (objects key by
  // key), so it holds only what this run sets.
  return build({
    projectDir: AGENT_DIR,
    linux: options.targets ?? config.linux.target,
    config: {
      directories: { app: options.appDir, ...(options.outputDir ? { output: options.outputDir } : {}) },
      electronVersion: options.electron.version,
      electronDist: options.electron.dist,
      ...(options.rebuild === false ? { npmRebuild: false } : {}),
      ...(options.maintainer ? { linux: { maintainer: options.maintainer } } : {}),
      ...(options.homepage ? { extraMetadata: { homepage: options.homepage } } : {}),
    },
  });
}

const USAGE = `usage: npm run player:package -- --maintainer "Name <email>" --homepage <url> [--dir]

  The kiosk player's deb and AppImage in apps/agent/dist-player/release (apps/agent/README.md).
  --maintainer  the deb's Maintainer (or PLAYER_MAINTAINER)
  --homepage    the deb's Homepage (or PLAYER_HOMEPAGE)
  --dir         only the unpacked player (dist-player/release/linux-unpacked), no installers
`;

async function main(argv: string[]): Promise<number> {
  let values: {
    maintainer?: string | undefined;
    homepage?: string | undefined;
    dir?: boolean | undefined;
    help?: boolean | undefined;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        maintainer: { type: 'string' },
        homepage: { type: 'string' },
        dir: { type: 'boolean' },
        help: { type: 'boolean' },
      },
    }));
  } catch (error) {
    process.stderr.write(`player:package: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  // First, before anything is built: without Electron's binary electron-builder would download it.
  const binary = findElectronBinary();
  if (!binary.present) {
    process.stderr.write(`${missingBinaryMessage(binary)}\n`);
    return 1;
  }
  const maintainer = values.maintainer ?? process.env['PLAYER_MAINTAINER'];
  const homepage = values.homepage ?? process.env['PLAYER_HOMEPAGE'];
  if (!values.dir && (!maintainer || !homepage)) {
    process.stderr.write(`player:package: the deb needs --maintainer and --homepage\n${USAGE}`);
    return 2;
  }

  const { appDir } = await buildPlayer(PLAYER_APP_DIR);
  const artifacts = await packagePlayer({
    electron: binary,
    targets: values.dir ? ['dir'] : null,
    appDir,
    ...(maintainer ? { maintainer } : {}),
    ...(homepage ? { homepage } : {}),
  });
  for (const artifact of artifacts) process.stdout.write(`${artifact}\n`);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
