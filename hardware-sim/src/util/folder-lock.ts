import { closeSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * One command's claim on a folder (`player --dir`, `run --dir`): a lock file made with an exclusive create (O_EXCL),
 * so of two commands started at the same instant exactly one gets it, and the other is told who has it. Looking
 * first ("is the folder empty?") and writing after cannot do that: both look before either writes.
 *
 * The lock holds the claimer's pid. A lock whose process is gone (killed with SIGKILL, a second Ctrl-C) is taken
 * over, under a second exclusive file (`.hardware-sim.lock.break`) so that two newcomers never both take it.
 */

export const LOCK_FILE = '.hardware-sim.lock';
const BREAK_FILE = `${LOCK_FILE}.break`;
/** A lock or break file with no readable holder older than this was left by a process killed while making it. */
const UNFINISHED_MS = 10_000;

export interface LockHolder {
  pid: number;
  /** `hardware-sim player`, `hardware-sim run`. */
  command: string;
}

/** The folder is claimed by a live process (or one making its lock right now: `holder` null). */
export class FolderInUse extends Error {
  constructor(
    readonly dir: string,
    readonly holder: LockHolder | null,
  ) {
    super(
      `${dir} is in use by ${holder ? `${holder.command} (pid ${holder.pid})` : 'another hardware-sim command'}`,
    );
    this.name = 'FolderInUse';
  }
}

export interface FolderClaim {
  readonly file: string;
  /** Removes the lock (once; later calls do nothing). */
  release(): void;
}

/** The live holder of `dir`'s lock, or null when there is none or it was left by a process that is gone. */
export function liveHolder(dir: string): LockHolder | 'unknown' | null {
  const lock = readLock(join(dir, LOCK_FILE));
  if (lock === null) return null;
  if (lock === 'unfinished') return 'unknown';
  if (lock === 'abandoned') return null;
  return alive(lock.pid) ? lock : null;
}

/** Claims `dir` (which must exist) for this process; a {@link FolderInUse} when a live process holds it. */
export function claimFolder(dir: string, command: string): FolderClaim {
  const file = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, 'wx', 0o644);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = liveHolder(dir);
      if (holder !== null) throw new FolderInUse(dir, holder === 'unknown' ? null : holder);
      breakAbandoned(dir);
      continue;
    }
    try {
      writeSync(fd, `${JSON.stringify({ pid: process.pid, command } satisfies LockHolder)}\n`);
    } finally {
      closeSync(fd);
    }
    let released = false;
    return {
      file,
      release: () => {
        if (released) return;
        released = true;
        rmSync(file, { force: true });
      },
    };
  }
  // Taken over by another newcomer each time: that one has it.
  const holder = liveHolder(dir);
  throw new FolderInUse(dir, holder === null || holder === 'unknown' ? null : holder);
}

/** Removes an abandoned lock, if it still is one, holding the break file meanwhile. */
function breakAbandoned(dir: string): void {
  const breaker = join(dir, BREAK_FILE);
  let fd: number;
  try {
    fd = openSync(breaker, 'wx', 0o644);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    // Another newcomer is breaking it; a break file from a process killed in these microseconds is removed.
    if (olderThan(breaker, UNFINISHED_MS)) rmSync(breaker, { force: true });
    return;
  }
  try {
    // Looked at again under the break file: the lock seen a moment ago may already be a newcomer's.
    if (liveHolder(dir) === null) rmSync(join(dir, LOCK_FILE), { force: true });
  } finally {
    closeSync(fd);
    rmSync(breaker, { force: true });
  }
}

function readLock(file: string): LockHolder | 'unfinished' | 'abandoned' | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as Partial<LockHolder>;
    if (
      Number.isSafeInteger(parsed.pid) &&
      (parsed.pid as number) > 0 &&
      typeof parsed.command === 'string'
    ) {
      return { pid: parsed.pid as number, command: parsed.command };
    }
  } catch {
    // not written yet (the claimer is between its create and its write), or cut short by a kill
  }
  return olderThan(file, UNFINISHED_MS) ? 'abandoned' : 'unfinished';
}

function olderThan(file: string, ms: number): boolean {
  try {
    return Date.now() - statSync(file).mtimeMs > ms;
  } catch {
    return false;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: a process of another user has that pid, and it runs.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
