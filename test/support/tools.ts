import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OpensslWorkspace } from '../../packages/crypto/test/helpers/openssl.js';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VERIFIER = fileURLToPath(new URL('../../apps/platform/src/verifier/cli.ts', import.meta.url));

export interface ToolRun {
  code: number;
  stdout: string;
  stderr: string;
}

export function run(command: string, args: string[], timeoutMs = 120_000): Promise<ToolRun> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd: REPO_ROOT, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** The project's seal verifier CLI (`ooh-verify seal ...`), as a user runs it. */
export function verifierCli(args: string[]): Promise<ToolRun> {
  return run(process.execPath, ['--conditions=source', '--import', 'tsx', VERIFIER, ...args]);
}

/**
 * `openssl cms -verify` of a DER PKCS#7 against a CA file, at openssl's own clock (the crypto package's workspace
 * writes the command once); the verified content goes to `outFile`.
 */
export function opensslCmsVerify(p7sFile: string, caFile: string, outFile: string): Promise<ToolRun> {
  const ws = new OpensslWorkspace();
  try {
    const result = ws.verifyCms(path.resolve(REPO_ROOT, p7sFile), {
      ca: path.resolve(REPO_ROOT, caFile),
      out: path.resolve(REPO_ROOT, outFile),
    });
    return Promise.resolve({ code: result.status, stdout: result.stdout, stderr: result.stderr });
  } finally {
    ws.dispose();
  }
}
