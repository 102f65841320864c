import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

let answer: boolean | null = null;

/**
 * Whether this process can mount a tmpfs (a small disk that fills for real): root with CAP_SYS_ADMIN, as on the
 * machines CI runs on, not an ordinary user's. Found out by mounting one once.
 */
export function canMountTmpfs(): boolean {
  if (answer !== null) return answer;
  answer = false;
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return answer;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ooh-tmpfs-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    answer = true;
  } catch {
    answer = false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return answer;
}

/** Mounts a tmpfs of `size` (mount's notation: 64k) on the existing folder `dir`; the function unmounts it. */
export function mountTmpfs(dir: string, size: string): () => void {
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  return () => execFileSync('umount', [dir]);
}
