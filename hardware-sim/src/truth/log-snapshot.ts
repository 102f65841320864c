import { closeSync, existsSync, openSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';

/**
 * A copy of a player's play log, taken without writing anything beside it: what `hardware-sim check` reads, so that
 * inspecting a real player leaves its folder byte for byte as it was.
 *
 * Opening the file itself would not do: even a read-only SQLite connection (the agent's `readStatus` opens the log
 * read-only) creates the -wal and -shm files of a WAL database when they are not there, and leaves them
 * (sqlite.org/wal.html, "Read-Only Databases"). So:
 *
 * - no -wal beside the file (the agent is not running, or closed cleanly): the file is the whole database; its bytes
 *   are read and copied, and taken only if its size and modification time did not change meanwhile and no -wal
 *   appeared (else the agent started: the second way);
 * - a -wal beside it (the agent is running, or stopped without closing): the file is opened read-only, as a WAL
 *   reader beside the agent (never blocked by its write transaction), and `serialize()` gives a consistent image
 *   of the last commit. The running agent's -shm is shared memory that every reader uses.
 *
 * The copy is then checked (`PRAGMA quick_check`): a truncated or overwritten file is refused with a code here,
 * not met as a SQLite error half way through reading it.
 */

export type LogProblemCode =
  | 'log_missing'
  | 'log_unreadable'
  | 'log_empty'
  | 'log_corrupt'
  | 'log_copy_failed';

export class LogSnapshotError extends Error {
  constructor(
    readonly code: LogProblemCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'LogSnapshotError';
  }
}

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** Copies `databaseFile` (a consistent image of its last commit) to `copyFile`; a {@link LogSnapshotError} if it
 * cannot be read as a database. */
export function snapshotAgentLog(databaseFile: string, copyFile: string): void {
  const before = statOf(databaseFile);
  if (before.size === 0)
    throw new LogSnapshotError('log_empty', `the play log ${databaseFile} is empty (0 bytes)`);
  const header = Buffer.alloc(SQLITE_HEADER.length);
  let bytes: Buffer | null = null;
  try {
    const fd = openSync(databaseFile, 'r');
    try {
      readSync(fd, header, 0, header.length, 0);
    } finally {
      closeSync(fd);
    }
    if (!existsSync(`${databaseFile}-wal`)) bytes = readFileSync(databaseFile);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? 'error';
    throw new LogSnapshotError('log_unreadable', `the play log ${databaseFile} cannot be read (${code})`, {
      cause,
    });
  }
  if (!header.equals(SQLITE_HEADER)) {
    throw new LogSnapshotError(
      'log_corrupt',
      `the play log ${databaseFile} is not a SQLite file (its header is not)`,
    );
  }
  let image: Buffer | null = null;
  if (bytes !== null) {
    const after = statOf(databaseFile);
    const unchanged =
      after.size === before.size && after.mtimeMs === before.mtimeMs && !existsSync(`${databaseFile}-wal`);
    if (unchanged) image = bytes;
  }
  if (image === null) {
    let db: BetterSqlite3.Database | null = null;
    try {
      db = new BetterSqlite3(databaseFile, { readonly: true, fileMustExist: true });
      db.pragma('busy_timeout = 5000');
      image = db.serialize();
    } catch (cause) {
      throw new LogSnapshotError(
        'log_corrupt',
        `the play log ${databaseFile} cannot be read (${sqliteReason(cause)})`,
        { cause },
      );
    } finally {
      db?.close();
    }
  }
  try {
    writeFileSync(copyFile, image, { mode: 0o600 });
  } catch (cause) {
    // The copy's folder (the temporary folder) full or not writable: nothing wrong with the log itself.
    const code = (cause as NodeJS.ErrnoException).code ?? 'error';
    throw new LogSnapshotError(
      'log_copy_failed',
      `no copy of the play log (${(image.length / 1024 / 1024).toFixed(1)} MiB) could be written in ${dirname(copyFile)} (${code})`,
      { cause },
    );
  }
  let copy: BetterSqlite3.Database | null = null;
  try {
    copy = new BetterSqlite3(copyFile, { fileMustExist: true });
    const rows = copy.pragma('quick_check') as { quick_check: string }[];
    const first = rows[0]?.quick_check;
    if (first !== 'ok') {
      throw new LogSnapshotError(
        'log_corrupt',
        `the play log ${databaseFile} is damaged (${first ?? 'no answer'})`,
      );
    }
  } catch (error) {
    if (error instanceof LogSnapshotError) throw error;
    throw new LogSnapshotError(
      'log_corrupt',
      `the play log ${databaseFile} is damaged (${sqliteReason(error)})`,
      {
        cause: error,
      },
    );
  } finally {
    copy?.close();
  }
}

function statOf(path: string): { size: number; mtimeMs: number } {
  try {
    const stat = statSync(path);
    if (!stat.isFile()) throw new LogSnapshotError('log_corrupt', `the play log ${path} is not a file`);
    return { size: stat.size, mtimeMs: stat.mtimeMs };
  } catch (cause) {
    if (cause instanceof LogSnapshotError) throw cause;
    const code = (cause as NodeJS.ErrnoException).code;
    if (code === 'ENOENT')
      throw new LogSnapshotError('log_missing', `there is no play log at ${path}`, { cause });
    throw new LogSnapshotError('log_unreadable', `the play log ${path} cannot be read (${code ?? 'error'})`, {
      cause,
    });
  }
}

function sqliteReason(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  return typeof code === 'string' ? `${code}: ${message}` : message;
}
