import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PlatformUrls } from './console-client.js';

/**
 * A platform the simulator starts for itself (`hardware-sim run --spawn`, `npm start`): `platform bootstrap` then
 * `platform run` from this repository, as child processes, on free ports. The simulator still talks to it over HTTP
 * only. Without DATABASE_URL the platform runs its embedded PostgreSQL in `dataDir`.
 */

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PLATFORM_MAIN = join(REPO_ROOT, 'apps', 'platform', 'src', 'main.ts');

export interface SpawnedPlatform {
  urls: PlatformUrls;
  adminKey: string;
  restart(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface SpawnOptions {
  dataDir: string;
  testClock?: boolean;
  /** Extra environment (DATABASE_URL, DEVICES_TLS_TERMINATION=proxy, ...). */
  env?: Record<string, string>;
  logFile?: string;
  /** Fixed ports; free ones otherwise. */
  ports?: Partial<Record<keyof PlatformUrls, number>>;
}

export function platformAvailable(): boolean {
  return existsSync(PLATFORM_MAIN);
}

/** `count` distinct free ports, each held open until all are found (one after another they may repeat). */
export async function freePorts(count: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      server.unref();
      servers.push(server);
      ports.push(
        await new Promise<number>((resolve, reject) => {
          server.on('error', reject);
          server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
        }),
      );
    }
    return ports;
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}

function platformProcess(
  args: string[],
  env: NodeJS.ProcessEnv,
  log: NodeJS.WritableStream | null,
): ChildProcess {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', PLATFORM_MAIN, ...args], {
    cwd: REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (log) {
    child.stdout!.pipe(log, { end: false });
    child.stderr!.pipe(log, { end: false });
  }
  return child;
}

/** The platform started by {@link spawnPlatform} exited before it was ready. */
export class PlatformStartError extends Error {
  constructor(
    readonly exitCode: number,
    /** The platform's own last line on stderr: why it did not start (empty if it said nothing). */
    readonly reason: string,
    readonly logFile: string,
  ) {
    super(`the platform exited with ${exitCode}${reason ? `: ${reason}` : ''}; see ${logFile}`);
    this.name = 'PlatformStartError';
  }
}

/** The last non-empty line a stream has carried so far (read as it goes; at most the last 64 KiB kept). */
function lastLineOf(stream: NodeJS.ReadableStream): () => string {
  let tail = '';
  stream.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-65_536);
  });
  return () =>
    tail
      .split('\n')
      .map((line) => line.trim())
      .filter(Boolean)
      .pop() ?? '';
}

export async function spawnPlatform(options: SpawnOptions): Promise<SpawnedPlatform> {
  if (!platformAvailable()) throw new Error(`no platform sources at ${PLATFORM_MAIN}`);
  mkdirSync(options.dataDir, { recursive: true });
  const [api, agents, devices, verify] = (await freePorts(4)) as [number, number, number, number];
  const ports = {
    api: options.ports?.api ?? api,
    agents: options.ports?.agents ?? agents,
    devices: options.ports?.devices ?? devices,
    verify: options.ports?.verify ?? verify,
  };
  const log = createWriteStream(options.logFile ?? join(options.dataDir, 'platform.log'), { flags: 'a' });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOG_LEVEL: process.env['LOG_LEVEL'] ?? 'warn',
    DATA_DIR: options.dataDir,
    API_PORT: String(ports.api),
    AGENTS_PORT: String(ports.agents),
    DEVICES_PORT: String(ports.devices),
    VERIFY_PORT: String(ports.verify),
    ...options.env,
  };

  // bootstrap: the authority organisation and an admin key (printed on stdout).
  const bootstrap = platformProcess(['bootstrap'], env, null);
  let keyOut = '';
  let bootErr = '';
  bootstrap.stdout!.on('data', (c: Buffer) => {
    keyOut += c;
  });
  bootstrap.stderr!.on('data', (c: Buffer) => {
    bootErr += c;
  });
  const code = await new Promise<number | null>((resolve) => bootstrap.on('close', resolve));
  const adminKey = keyOut.trim().split('\n').pop() ?? '';
  if (code !== 0 || !adminKey) throw new Error(`platform bootstrap failed (${code}): ${bootErr}`);

  const direct = env['DEVICES_TLS_TERMINATION'] !== 'proxy';
  const urls: PlatformUrls = {
    api: `http://127.0.0.1:${ports.api}`,
    agents: `http://127.0.0.1:${ports.agents}`,
    devices: `${direct ? 'https' : 'http'}://127.0.0.1:${ports.devices}`,
    verify: `http://127.0.0.1:${ports.verify}`,
  };
  let child: ChildProcess;
  const start = async () => {
    child = platformProcess(['run', ...(options.testClock ? ['--test-clock'] : [])], env, log);
    // A platform that cannot start says why in its last line on stderr (its start-errors.ts): the end of a log that
    // may hold thousands of lines before it.
    const lastLine = lastLineOf(child.stderr!);
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (child.exitCode !== null) {
        // The pipe may still hold the last line when the exit is seen.
        await new Promise((resolve) =>
          child.stderr!.closed ? resolve(null) : child.stderr!.once('close', resolve),
        );
        const reason = lastLine();
        throw new PlatformStartError(child.exitCode, reason, String(log.path));
      }
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`the platform did not become ready; see ${log.path}`);
      }
      try {
        const [api, verify] = await Promise.all([
          fetch(`${urls.api}/readyz`),
          fetch(`${urls.verify}/readyz`),
        ]);
        if (api.ok && verify.ok) return;
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  };
  await start();
  return {
    urls,
    adminKey,
    restart: async (downMs = 0) => {
      await stop();
      if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
      await start();
    },
    stop: async () => {
      await stop();
      log.end();
    },
  };
}
