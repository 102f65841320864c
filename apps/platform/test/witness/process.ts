import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const WITNESS = fileURLToPath(new URL('./witness.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

export interface WitnessProcess {
  url: string;
  vkey: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts the test witness (test/witness/witness.ts) as its own process and waits for its {url, vkey} line. */
export function startWitness(options: {
  name: string;
  keyFile: string;
  stateFile: string;
  logVkeys: string[];
  /** The time the witness dates its cosignatures from (then moving with this computer's clock): the platform's
   * clock in a test, since the platform refuses a cosignature dated more than 300 s after its own clock. */
  now?: Date;
}): Promise<WitnessProcess> {
  const args = [
    '--conditions=source',
    '--import',
    'tsx',
    WITNESS,
    '--name',
    options.name,
    '--key',
    options.keyFile,
  ];
  args.push('--state', options.stateFile, ...options.logVkeys.flatMap((v) => ['--log', v]));
  if (options.now) args.push(`--clock-offset=${options.now.getTime() - Date.now()}`);
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the witness did not start:\n${err}`));
    }, 30_000);
    child.stderr!.on('data', (c) => {
      err += c;
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the witness exited with ${code}:\n${err}`));
    });
    child.stdout!.on('data', (c) => {
      out += c;
      const newline = out.indexOf('\n');
      if (newline < 0) return;
      clearTimeout(timer);
      const { url, vkey } = JSON.parse(out.slice(0, newline)) as { url: string; vkey: string };
      resolve({
        url,
        vkey,
        child,
        stop: async () => {
          if (child.exitCode === null) child.kill('SIGTERM');
          await exited;
        },
      });
    });
  });
}
