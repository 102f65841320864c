import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

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

/** `openssl cms -verify` of a DER PKCS#7 against a CA file; the verified content goes to `outFile`. */
export function opensslCmsVerify(p7sFile: string, caFile: string, outFile: string): Promise<ToolRun> {
  return run('openssl', [
    'cms',
    '-verify',
    '-binary',
    '-inform',
    'DER',
    '-in',
    p7sFile,
    '-CAfile',
    caFile,
    '-out',
    outFile,
  ]);
}
