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
}

/** Runs the real player agent's `agent init` for a structure, in a throw-away folder. */
export async function agentInit(structure: string): Promise<AgentInit> {
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
    return { output: stdout, keyPem: await readFile(path.join(dir, 'data', 'device-key.pem'), 'utf8') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
