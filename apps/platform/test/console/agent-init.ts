import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const REPO = fileURLToPath(new URL('../../../../', import.meta.url));

export interface AgentInit {
  /** Exactly what `agent init` printed. */
  output: string;
  /** The device key it created (PEM), to sign as the device would. */
  keyPem: string;
  /** With `keep`: the player's folder and its agent.json, left for the caller to remove. */
  dir?: string;
  config?: string;
}

/** Runs the real player agent's `agent init` for a structure, in a throw-away folder (kept with `keep`). */
export async function agentInit(structure: string, options: { keep?: boolean } = {}): Promise<AgentInit> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-agent-init-'));
  try {
    const config = path.join(dir, 'agent.json');
    await writeFile(
      config,
      JSON.stringify({
        structure,
        platform: {
          agents_url: 'http://127.0.0.1:9',
          devices_url: 'https://127.0.0.1:9',
          verify_url: 'http://127.0.0.1:9',
        },
        authority_root_file: 'authority-root.pem',
      }),
    );
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'apps/agent/src/cli/main.ts', 'init', '--config', config],
      { cwd: REPO },
    );
    const keyPem = await readFile(path.join(dir, 'data', 'device-key.pem'), 'utf8');
    return { output: stdout, keyPem, ...(options.keep ? { dir, config } : {}) };
  } finally {
    if (!options.keep) await rm(dir, { recursive: true, force: true });
  }
}

/** Runs the real player agent's CLI; resolves with its exit code and output, whatever the code. */
export async function agentCommand(
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'apps/agent/src/cli/main.ts', ...args],
      { cwd: REPO },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}
