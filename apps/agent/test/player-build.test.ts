/**
 * The Electron player's build, as CI can check it without Electron's binary: the real `npm run player:build`; its
 * bundles loaded as they are in the player (main and the CLI run by Node with the real better-sqlite3 and agent core,
 * `electron` alone being a recording fake; the preload in a sandbox-like scope that offers only `electron`; the page
 * in Chromium from file://); electron-builder.json validated by electron-builder's own schema and packed by
 * electron-builder into the unpacked player (a stand-in for Electron's executable, no native rebuild: the one part
 * that needs Electron's headers); `npm run player:package` stopping at once without the binary; and the install of
 * electron and electron-builder downloading nothing.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runInNewContext } from 'node:vm';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_DIR, PLAYER_APP_DIR } from '../scripts/player-build.js';
import { BUILDER_CONFIG_FILE, findElectronBinary } from '../scripts/player-package.js';
import { createTestPki } from './helpers/pki.js';
import { tempDir } from './helpers/temp.js';

const ROOT = join(AGENT_DIR, '..', '..');
const CHROMIUM = '/usr/bin/chromium';
const requireFromAgent = createRequire(join(AGENT_DIR, 'package.json'));
const BUNDLES = [
  'main.mjs',
  'preload.cjs',
  'cli.mjs',
  'renderer/index.html',
  'renderer/renderer.js',
  'package.json',
];

/** `electron` for main.mjs under Node: records every call main makes as a JSON line; quits soon after start. */
const FAKE_ELECTRON = `
import { appendFileSync } from 'node:fs';
const record = (event, data = {}) =>
  appendFileSync(process.env.FAKE_ELECTRON_LOG, JSON.stringify({ event, ...data }) + '\\n');
export const app = {
  isPackaged: false,
  commandLine: { appendSwitch: (name, value) => record('appendSwitch', { name, value }) },
  whenReady: async () => record('whenReady'),
  on(name, listener) {
    record('app.on', { name });
    // Electron emits before-quit when the app is asked to quit: here, once main is fully started.
    if (name === 'before-quit') setTimeout(() => listener({ preventDefault: () => record('preventDefault') }), 300);
    return app;
  },
  quit() { record('quit'); process.exit(0); },
  exit(code) { record('exit', { code }); process.exit(code ?? 0); },
};
export class BrowserWindow {
  constructor(options) {
    record('BrowserWindow', { options });
    this.webContents = {
      id: 1,
      send: (channel) => record('send', { channel }),
      on(name) { record('webContents.on', { name }); return this; },
      setWindowOpenHandler: (handler) => record('setWindowOpenHandler', { answer: handler({ url: 'https://example.com/' }) }),
    };
  }
  async loadFile(path) { record('loadFile', { path }); }
  on() { return this; }
  once() { return this; }
  show() {}
  isDestroyed() { return false; }
}
export const ipcMain = { on(channel) { record('ipcMain.on', { channel }); return ipcMain; } };
export const powerSaveBlocker = { start(type) { record('powerSaveBlocker.start', { type }); return 1; } };
`;
const HOOKS = `
export async function resolve(specifier, context, next) {
  if (specifier === 'electron') return { url: new URL('./fake-electron.mjs', import.meta.url).href, shortCircuit: true };
  return next(specifier, context);
}
`;
const REGISTER = `import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n`;

/** A 1×1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);

interface Recorded {
  event: string;
  [key: string]: unknown;
}

function run(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  const result = spawnSync(command, args, {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, ...options.env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

beforeAll(() => {
  const build = run('npm', ['run', 'player:build']);
  expect(build.stderr).not.toMatch(/error/i);
  expect(build.code).toBe(0);
}, 60_000);

describe('npm run player:build', () => {
  const work = tempDir('player-build-');
  afterAll(() => work.cleanup());

  it('writes the bundles electron-builder packs, with only electron and better-sqlite3 left outside', () => {
    for (const file of BUNDLES) expect(statSync(join(PLAYER_APP_DIR, file)).size).toBeGreaterThan(0);
    const manifest = JSON.parse(readFileSync(join(PLAYER_APP_DIR, 'package.json'), 'utf8'));
    const agent = JSON.parse(readFileSync(join(AGENT_DIR, 'package.json'), 'utf8'));
    expect(manifest.main).toBe('main.mjs');
    expect(manifest.dependencies).toEqual({ 'better-sqlite3': agent.dependencies['better-sqlite3'] });
    for (const bundle of ['main.mjs', 'cli.mjs']) {
      const text = readFileSync(join(PLAYER_APP_DIR, bundle), 'utf8');
      const imports = [...text.matchAll(/^import .* from "([^"]+)";$/gm)].map((match) => match[1]);
      expect(imports.filter((name) => !isBuiltin(name!)).sort()).toEqual(
        bundle === 'main.mjs' ? ['better-sqlite3', 'electron'] : ['better-sqlite3'],
      );
    }
  });

  it('main.mjs starts the real agent core and the kiosk window, and closes it on quit', () => {
    const dir = work.path;
    writeFileSync(join(dir, 'fake-electron.mjs'), FAKE_ELECTRON);
    writeFileSync(join(dir, 'hooks.mjs'), HOOKS);
    writeFileSync(join(dir, 'register.mjs'), REGISTER);
    // A player as a technician lays it out: config, authority root, `agent init` by the bundled CLI.
    const player = join(dir, 'player');
    mkdirSync(player);
    return createTestPki().then((pki) => {
      writeFileSync(join(player, 'authority-root.pem'), pki.authorityRootPem);
      const configPath = join(player, 'agent.json');
      const config = {
        structure: 'ALM-0001',
        platform: {
          agents_url: 'http://127.0.0.1:9',
          devices_url: 'http://127.0.0.1:9',
          verify_url: 'http://127.0.0.1:9',
        },
        authority_root_file: 'authority-root.pem',
      };
      writeFileSync(configPath, JSON.stringify(config));
      const cli = join(PLAYER_APP_DIR, 'cli.mjs');
      const init = run(process.execPath, [cli, 'init', '--config', configPath]);
      expect(init.code).toBe(0);
      expect(init.stdout).toMatch(/Created device key .*device-key\.pem \(mode 0600\)/);

      const deviceId = randomUUID();
      writeFileSync(configPath, JSON.stringify({ ...config, device_id: deviceId }));
      const log = join(dir, 'electron.ndjson');
      const main = run(
        process.execPath,
        ['--import', join(dir, 'register.mjs'), join(PLAYER_APP_DIR, 'main.mjs'), '--config', configPath],
        { env: { FAKE_ELECTRON_LOG: log } },
      );
      const recorded = readFileSync(log, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Recorded);
      expect(main.stdout + main.stderr).not.toMatch(/player failed to start/);
      expect(main.code).toBe(0);
      const window = recorded.find((r) => r.event === 'BrowserWindow')!.options as {
        kiosk: boolean;
        fullscreen: boolean;
        webPreferences: Record<string, unknown>;
      };
      expect(window).toMatchObject({ kiosk: true, fullscreen: true });
      expect(window.webPreferences).toMatchObject({
        contextIsolation: true,
        nodeIntegration: false,
        sandbox: true,
      });
      expect(window.webPreferences['preload']).toBe(join(PLAYER_APP_DIR, 'preload.cjs'));
      expect(existsSync(window.webPreferences['preload'] as string)).toBe(true);
      const page = recorded.find((r) => r.event === 'loadFile')!.path as string;
      expect(page).toBe(join(PLAYER_APP_DIR, 'renderer', 'index.html'));
      expect(recorded.find((r) => r.event === 'setWindowOpenHandler')!.answer).toEqual({ action: 'deny' });
      expect(recorded.map((r) => r.event)).toEqual(
        expect.arrayContaining([
          'whenReady',
          'powerSaveBlocker.start',
          'ipcMain.on',
          'preventDefault',
          'quit',
        ]),
      );
      expect(recorded.at(-1)!.event).toBe('quit');
      // The agent opened its play log through the bundle's external better-sqlite3.
      expect(existsSync(join(player, 'data', 'agent.sqlite'))).toBe(true);
      const status = run(process.execPath, [cli, 'status', '--config', configPath]);
      expect(status.stdout).toContain(`device:          ${deviceId}`);
      expect(status.code).toBe(0);
      // The kiosk package's `ooh-agent`, with Node standing in for the player's Electron and this build's CLI for
      // the unpacked one: it runs the CLI as Node and takes the config from AGENT_CONFIG.
      const wrapper = join(dir, 'ooh-agent');
      writeFileSync(
        wrapper,
        readFileSync(join(AGENT_DIR, 'electron', 'kiosk', 'ooh-agent'), 'utf8')
          .replace('/opt/ooh-player/ooh-player', process.execPath)
          .replace('/opt/ooh-player/resources/app.asar.unpacked/cli.mjs', cli),
      );
      chmodSync(wrapper, 0o755);
      const viaWrapper = run(wrapper, ['status'], { env: { AGENT_CONFIG: configPath } });
      expect(viaWrapper.stdout).toContain(`device:          ${deviceId}`);
      expect(viaWrapper.code).toBe(0);
    });
  }, 60_000);

  it('preload.cjs needs nothing but electron and exposes window.player, passing on only well-formed messages', () => {
    const exposed: Record<string, unknown> = {};
    const handlers = new Map<string, (event: unknown, ...args: unknown[]) => void>();
    const sent: unknown[][] = [];
    const electron = {
      contextBridge: {
        exposeInMainWorld: (key: string, api: unknown) => {
          exposed[key] = api;
        },
      },
      ipcRenderer: {
        on: (channel: string, handler: (event: unknown, ...args: unknown[]) => void) =>
          handlers.set(channel, handler),
        send: (...args: unknown[]) => sent.push(args),
      },
    };
    const module = { exports: {} };
    runInNewContext(readFileSync(join(PLAYER_APP_DIR, 'preload.cjs'), 'utf8'), {
      module,
      exports: module.exports,
      require: (name: string) => {
        if (name !== 'electron') throw new Error(`a sandboxed preload cannot require ${name}`);
        return electron;
      },
    });
    expect(Object.keys(exposed)).toEqual(['player']);
    const player = exposed['player'] as {
      onPlay(listener: (command: unknown) => void): void;
      report(report: unknown): void;
    };
    const plays: unknown[] = [];
    player.onPlay((command) => plays.push(command));
    const good = { playId: 'p1', url: 'file:///media/a.png', kind: 'image', durationMs: 1000 };
    handlers.get('player:play')!({}, good);
    handlers.get('player:play')!({}, { ...good, kind: 'audio' });
    expect(plays).toEqual([good]);
    player.report({ type: 'playing', playId: 'p1' });
    expect(sent).toEqual([['player:report', { type: 'playing', playId: 'p1' }]]);
  });

  it('the page loads from file:// in Chromium under its CSP and plays an image through window.player', async () => {
    for (let i = 0; i < 120 && !existsSync(CHROMIUM); i++) await new Promise((r) => setTimeout(r, 1000));
    writeFileSync(join(work.path, 'image.png'), PNG);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--allow-file-access-from-files'],
    });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(message.text());
      });
      // Stands in for the preload: the same window.player, recording the reports.
      await page.addInitScript({
        content: `(() => {
          const listeners = [];
          window.__reports = [];
          window.player = {
            onPlay: (listener) => listeners.push(listener),
            onStop: () => {},
            report: (report) => window.__reports.push(report),
          };
          window.__play = (command) => listeners.forEach((listener) => listener(command));
        })();`,
      });
      await page.goto(pathToFileURL(join(PLAYER_APP_DIR, 'renderer', 'index.html')).href);
      const command = {
        playId: 'i1',
        url: pathToFileURL(join(work.path, 'image.png')).href,
        kind: 'image',
        durationMs: 300,
      };
      await page.evaluate(`window.__play(${JSON.stringify(command)})`);
      await page.waitForFunction(
        () => ((globalThis as unknown as { __reports: { type: string }[] }).__reports ?? []).length >= 2,
        undefined,
        { timeout: 10_000 },
      );
      const reports = await page.evaluate<{ type: string; playId: string }[]>('window.__reports');
      expect(reports.map((r) => [r.type, r.playId])).toEqual([
        ['playing', 'i1'],
        ['ended', 'i1'],
      ]);
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});

describe('electron-builder.json', () => {
  const scratch = tempDir('player-pack-');
  const work = () => scratch.path;
  afterAll(() => scratch.cleanup());
  const config = JSON.parse(readFileSync(BUILDER_CONFIG_FILE, 'utf8'));
  // electron-builder's own check, as `electron-builder` runs it before building (its JSON schema).
  const { validateConfiguration } = requireFromAgent('app-builder-lib/out/util/config/config.js') as {
    validateConfiguration(config: unknown, debugLogger: { isEnabled: boolean; add(): void }): Promise<void>;
  };
  const logger = { isEnabled: false, add: () => {} };

  it("passes electron-builder's validation, which refuses a misspelt or mistyped option", async () => {
    await expect(validateConfiguration(config, logger)).resolves.toBeUndefined();
    await expect(validateConfiguration({ ...config, asarUnpak: config.asarUnpack }, logger)).rejects.toThrow(
      /unknown property 'asarUnpak'/,
    );
    await expect(validateConfiguration({ ...config, npmRebuild: 'yes' }, logger)).rejects.toThrow(
      /npmRebuild should be a boolean/,
    );
  });

  it('makes a deb and an AppImage of the bundles, with better-sqlite3 rebuilt for Electron and unpacked', () => {
    expect(config.linux.target).toEqual(['deb', 'AppImage']);
    expect(join(AGENT_DIR, config.directories.app)).toBe(PLAYER_APP_DIR);
    expect(config.npmRebuild).toBe(true);
    expect(config.asar).toBe(true);
    expect(config.asarUnpack).toEqual(
      expect.arrayContaining(['**/*.node', 'node_modules/better-sqlite3/**']),
    );
    for (const file of config.files.filter((pattern: string) => !pattern.startsWith('!'))) {
      expect(BUNDLES.some((bundle) => bundle === file || bundle.startsWith(file.replace('**', '')))).toBe(
        true,
      );
    }
    // The kiosk files and the deb's scripts exist; the scripts use only the names electron-builder fills in.
    for (const file of config.extraFiles[0].filter) {
      expect(existsSync(join(AGENT_DIR, config.extraFiles[0].from, file))).toBe(true);
    }
    for (const script of [config.deb.afterInstall, config.deb.afterRemove]) {
      const macros = [...readFileSync(join(AGENT_DIR, script), 'utf8').matchAll(/\$\{([a-zA-Z]+)\}/g)].map(
        (m) => m[1],
      );
      expect(macros.length).toBeGreaterThan(0);
      expect(macros.filter((name) => !['executable', 'sanitizedProductName'].includes(name!))).toEqual([]);
      const filled = join(scratch.path, 'script.sh');
      writeFileSync(
        filled,
        readFileSync(join(AGENT_DIR, script), 'utf8').replace(/\$\{([a-zA-Z]+)\}/g, 'ooh-player'),
      );
      expect(run('bash', ['-n', filled]).stderr).toBe('');
    }
    for (const script of ['kiosk-session', 'ooh-agent']) {
      const checked = run('sh', ['-n', join(AGENT_DIR, 'electron', 'kiosk', script)]);
      expect(checked.stderr).toBe('');
      expect(checked.code).toBe(0);
    }
  });

  it('electron-builder packs the unpacked player: asar with the bundles, the native module and the CLI unpacked, the kiosk files', async () => {
    // Electron's executable stands in as a script: electron-builder copies and renames it, nothing more.
    const fakeDist = join(work(), 'electron-dist');
    mkdirSync(join(fakeDist, 'resources'), { recursive: true });
    writeFileSync(join(fakeDist, 'electron'), '#!/bin/sh\n');
    chmodSync(join(fakeDist, 'electron'), 0o755);
    writeFileSync(join(fakeDist, 'chrome-sandbox'), '');
    writeFileSync(join(fakeDist, 'resources', 'default_app.asar'), '');
    const version = findElectronBinary().version;
    writeFileSync(join(fakeDist, 'version'), version);
    const appDir = join(work(), 'app');
    cpSync(PLAYER_APP_DIR, appDir, { recursive: true });
    // What @electron/rebuild would leave (this one is built for Node; only where it lands is checked here).
    const release = join('node_modules', 'better-sqlite3', 'build', 'Release');
    mkdirSync(join(appDir, release), { recursive: true });
    cpSync(
      join(
        requireFromAgent.resolve('better-sqlite3/package.json'),
        '..',
        'build',
        'Release',
        'better_sqlite3.node',
      ),
      join(appDir, release, 'better_sqlite3.node'),
    );
    const output = join(work(), 'release');
    const driver = join(work(), 'pack.mts');
    writeFileSync(
      driver,
      `import { packagePlayer } from ${JSON.stringify(join(AGENT_DIR, 'scripts', 'player-package.ts'))};
await packagePlayer({
  electron: { version: ${JSON.stringify(version)}, dist: ${JSON.stringify(fakeDist)}, present: true },
  targets: ['dir'], appDir: ${JSON.stringify(appDir)}, outputDir: ${JSON.stringify(output)}, rebuild: false,
});`,
    );
    const pack = run(process.execPath, ['--import', 'tsx', driver], { cwd: AGENT_DIR, env: { CI: 'true' } });
    expect(pack.stderr).not.toMatch(/Error/);
    expect(pack.code).toBe(0);

    const unpacked = join(output, 'linux-unpacked');
    expect(statSync(join(unpacked, 'ooh-player')).mode & 0o111).not.toBe(0);
    const asar = requireFromAgent('@electron/asar') as {
      listPackage(path: string, options: object): string[];
    };
    const inAsar = asar.listPackage(join(unpacked, 'resources', 'app.asar'), {});
    for (const file of [
      '/main.mjs',
      '/preload.cjs',
      '/renderer/index.html',
      '/renderer/renderer.js',
      '/package.json',
    ]) {
      expect(inAsar).toContain(file);
    }
    expect(inAsar).toContain('/node_modules/better-sqlite3/lib/index.js');
    expect(inAsar.some((file) => file.startsWith('/node_modules/better-sqlite3/deps/'))).toBe(false);
    const outside = join(unpacked, 'resources', 'app.asar.unpacked');
    expect(existsSync(join(outside, 'cli.mjs'))).toBe(true);
    expect(
      existsSync(join(outside, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node')),
    ).toBe(true);
    expect(existsSync(join(outside, 'node_modules', 'bindings', 'bindings.js'))).toBe(true);
    for (const file of ['kiosk-session', 'ooh-agent']) {
      expect(statSync(join(unpacked, 'kiosk', file)).mode & 0o111).not.toBe(0);
    }
    expect(readFileSync(join(unpacked, 'kiosk', 'ooh-player-session.desktop'), 'utf8')).toContain(
      'Exec=/opt/ooh-player/kiosk/kiosk-session',
    );
  }, 60_000);
});

describe('npm run player:package without Electron binary', () => {
  it('stops at once, builds nothing and says how to get the binary', () => {
    const started = Date.now();
    const result = run('npm', ['run', 'player:package'], {
      env: { ELECTRON_OVERRIDE_DIST_PATH: join(ROOT, 'no-such-dir') },
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('binary is not at');
    expect(result.stderr).toContain('nothing was built');
    expect(result.stderr).toContain('npx --no install-electron');
    expect(Date.now() - started).toBeLessThan(20_000);
  }, 30_000);
});

describe('installing electron and electron-builder downloads nothing', () => {
  it('pins them, and nothing in their dependency trees has an install script', () => {
    const agent = JSON.parse(readFileSync(join(AGENT_DIR, 'package.json'), 'utf8'));
    const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<
        string,
        {
          version: string;
          dependencies?: Record<string, string>;
          optionalDependencies?: Record<string, string>;
          hasInstallScript?: boolean;
        }
      >;
    };
    const tops = ['electron', 'electron-builder', '@electron/rebuild'];
    for (const name of tops) expect(agent.devDependencies[name]).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Number(agent.devDependencies.electron.split('.')[0])).toBeGreaterThanOrEqual(42);
    // Walk each tree through the lockfile as npm resolves it (nested node_modules first, then up).
    const resolve = (name: string, from: string): string | null => {
      for (let at = from; ; at = at.slice(0, Math.max(0, at.lastIndexOf('/node_modules/')))) {
        const key = `${at ? `${at}/` : ''}node_modules/${name}`;
        if (lock.packages[key]) return key;
        if (!at) return null;
      }
    };
    const seen = new Set<string>();
    const walk = (key: string) => {
      if (seen.has(key)) return;
      seen.add(key);
      const entry = lock.packages[key]!;
      for (const dependency of Object.keys(entry.dependencies ?? {})) {
        const found = resolve(dependency, key);
        expect(found, `${dependency} (from ${key})`).not.toBeNull();
        walk(found!);
      }
      // Optional ones for another platform (macOS signing tools) may be absent: nothing installs them here.
      for (const dependency of Object.keys(entry.optionalDependencies ?? {})) {
        const found = resolve(dependency, key);
        if (found) walk(found);
      }
    };
    for (const name of tops) walk(resolve(name, 'apps/agent')!);
    expect(seen.size).toBeGreaterThan(100);
    expect([...seen].filter((key) => lock.packages[key]!.hasInstallScript)).toEqual([]);
    expect(Object.keys(root.allowScripts).filter((name) => /electron|app-builder/.test(name))).toEqual([]);
    const electron = JSON.parse(readFileSync(requireFromAgent.resolve('electron/package.json'), 'utf8'));
    expect(Object.keys(electron.scripts ?? {}).filter((s) => /install/.test(s))).toEqual([]);
  });
});
