import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freeHostPorts } from '../../src/db/embedded.js';

export const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

export interface PlatformProcess {
  child: ChildProcess;
  urls: { api: string; agents: string; devices: string; verify: string };
  output: () => string;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** A Ctrl-C at its terminal: SIGINT to its process group (started with processGroup). */
  interrupt(): Promise<number | null>;
}

/** Runs `platform <args>` to completion; returns exit code and output. */
export function runPlatformCommand(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', MAIN, ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => {
      stdout += c;
    });
    child.stderr.on('data', (c) => {
      stderr += c;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`platform ${args.join(' ')} timed out\n${stderr}`));
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Starts `platform run` on free ports and waits until every host answers /readyz. With `processGroup` it runs in a
 * process group of its own, as a command started at a terminal does: `interrupt()` is then a Ctrl-C, a SIGINT to
 * every process of that group. `nodeArgs` go to Node before the script (`--heap-growing-percent=200`, say).
 */
export async function spawnPlatform(
  args: string[],
  env: Record<string, string>,
  options: { processGroup?: boolean; nodeArgs?: string[] } = {},
): Promise<PlatformProcess> {
  const ports = await freeHostPorts();
  const node = [...(options.nodeArgs ?? []), '--conditions=source', '--import', 'tsx', MAIN, 'run', ...args];
  const child = spawn(process.execPath, node, {
    detached: options.processGroup === true,
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      API_PORT: String(ports.api),
      AGENTS_PORT: String(ports.agents),
      DEVICES_PORT: String(ports.devices),
      VERIFY_PORT: String(ports.verify),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (c: Buffer) => {
    output += c;
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const urls = {
    api: `http://127.0.0.1:${ports.api}`,
    agents: `http://127.0.0.1:${ports.agents}`,
    devices: `https://127.0.0.1:${ports.devices}`,
    verify: `http://127.0.0.1:${ports.verify}`,
  };
  const deadline = Date.now() + 90_000;
  let ready = false;
  while (!ready) {
    if (child.exitCode !== null) throw new Error(`platform exited with ${child.exitCode}:\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`platform did not become ready:\n${output}`);
    }
    try {
      const res = await fetch(`${urls.api}/readyz`);
      const verify = await fetch(`${urls.verify}/readyz`);
      ready = res.ok && verify.ok;
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    child,
    urls,
    output: () => output,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
    interrupt: async () => {
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGINT');
      return exited;
    },
  };
}

/** The pids of the processes whose command line names `text` (a data directory, say). */
export async function processesNaming(text: string): Promise<number[]> {
  const { stdout } = await promisify(execFile)('ps', ['-eo', 'pid=,args=']);
  return stdout
    .split('\n')
    .filter((line) => line.includes(text))
    .map((line) => Number(line.trim().split(/\s+/)[0]));
}
