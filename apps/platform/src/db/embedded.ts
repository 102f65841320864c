import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, realpath, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { type OwnerAnswer, type Ownership, claimOwnership } from './embedded-owner.js';
import {
  EmbeddedDatabaseError,
  initCluster,
  isPostmasterOf,
  type PostgresUser,
  postgresBinaries,
  postgresUser,
  processAlive,
  type RunningPostgres,
  readPostmasterPid,
  startPostgres,
  stopForeignPostmaster,
} from './embedded-process.js';
import {
  type Credentials,
  credentialsFile,
  newCredentials,
  readCredentials,
  SETUP_VERSION,
  setUpRoles,
  writeCredentials,
} from './embedded-roles.js';

export { EmbeddedDatabaseError } from './embedded-process.js';
export { credentialsFile } from './embedded-roles.js';

/*
 * The embedded PostgreSQL (DESIGN.md section 2: "without [DATABASE_URL] the platform starts an embedded PostgreSQL
 * in its data directory"), made so that nobody else can use it (issue "Trust under attack", item 2):
 *
 * - no TCP listener: the only way in is a Unix socket in a folder only PostgreSQL's user (and root) may enter,
 *   `<cluster>-socket/` beside the cluster (`${DATA_DIR}/pgdata-socket/`), or a folder of its own in /tmp when that
 *   path is too long for a socket;
 * - every role by password, scram-sha-256 (pg_hba.conf is written at every start); the passwords are random, made
 *   on first start, kept in `<cluster>-credentials.json` (0600; src/db/embedded-roles.ts);
 * - the platform connects as `ooh_platform`, which owns the database and its schema and is not a superuser;
 * - a data directory of an earlier version (superuser postgres with the password from the source, TCP, `password`
 *   authentication) is moved over on its first start: new passwords, the role, every object handed to it.
 *
 * One process at a time starts a cluster and answers for it on `owner.sock` (src/db/embedded-owner.ts). A platform
 * refuses a cluster another platform serves; a command (bootstrap) uses it. A cluster whose owner was killed (kill -9)
 * is stopped and started again by the next process.
 */

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Folder that holds the cluster; created and initialised on first use. */
  dir: string;
  /** Names the socket (`.s.PGSQL.<port>`); there is no TCP listener. 0 or unset: 5432 (the folder is private). */
  port?: number;
  /** fsync off is for throw-away test clusters only; never for a platform's data. */
  fsync?: boolean;
  onLog?: (line: string) => void;
  /** What the supervision of a started server did (see superviseServer): for the platform's log. */
  onServerEvent?: (event: ServerEvent) => void;
}

/**
 * A server this process started exited without being asked (killed, out of memory, a crash): it is started again,
 * at once and then less and less often, until it runs or the cluster is stopped. Meanwhile the pool's connections
 * fail and requests are answered 503 (src/http/unavailable.ts); once it runs, the next query reconnects.
 */
export type ServerEvent =
  | {
      kind: 'exited';
      code: number | null;
      signal: string | null;
      lastLine: string | null;
      restartInMs: number;
    }
  | { kind: 'restarted'; attempts: number; downMs: number }
  | { kind: 'restart_failed'; attempts: number; reason: string; restartInMs: number };

/** The waits between attempts to start an exited server again: 1 s, then doubling, at most 30 s. */
export const RESTART_FIRST_MS = 1_000;
export const RESTART_MAX_MS = 30_000;

export interface EmbeddedClusterOptions extends EmbeddedOptions {
  /**
   * serve (default): this process runs the cluster for as long as it runs, and refuses one another platform
   * serves. command: a short command that uses the cluster a platform serves, or runs one of its own meanwhile.
   */
  use?: 'serve' | 'command';
  /** What this process is, as others name it ("platform run"). */
  what?: string;
  /** How long a command waits for a platform's cluster to be ready, or for another command to be done. */
  waitMs?: number;
}

export interface EmbeddedCluster {
  /** The platform role's URL (ooh_platform: owns the schema, not a superuser), through the socket. */
  url: string;
  /** The superuser's URL: for setting a cluster up, and for throw-away test clusters. */
  superuserUrl: string;
  socketDir: string;
  port: number;
  /** The process whose cluster this one uses; null when this process started it (and stop() stops it). */
  owner: { pid: number; what: string } | null;
  /** What this start did to the cluster's roles: made them (new cluster), moved an old directory over, or nothing. */
  setUp: 'created' | 'moved' | null;
  /** The pid of a server a killed process had left running on the cluster, stopped by this start. */
  stoppedOrphan: number | null;
  /** Stops the cluster when this process started it; otherwise nothing. */
  stop(): Promise<void>;
  /**
   * Stops the cluster at once when this process started it (immediate shutdown, waited for synchronously:
   * RunningPostgres.stopNow); otherwise nothing. For a process that exits without waiting for stop().
   */
  stopNow(): void;
}

const DEFAULT_PORT = 5432;
/** sockaddr_un.sun_path holds 108 bytes on Linux (104 on macOS) with its terminating NUL. */
const MAX_SOCKET_PATH = 103;

export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}

/**
 * `count` distinct free ports: every one is held open until all are found (ports asked for one after another
 * may come back equal once the first is closed).
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      server.unref();
      servers.push(server);
      ports.push(
        await new Promise<number>((resolve, reject) => {
          server.on('error', reject);
          server.listen(0, '127.0.0.1', () => {
            const address = server.address();
            resolve(typeof address === 'object' && address ? address.port : 0);
          });
        }),
      );
    }
    return ports;
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}

/** Four distinct free ports for the platform's hosts. */
export async function freeHostPorts(): Promise<{
  api: number;
  agents: number;
  devices: number;
  verify: number;
}> {
  const [api, agents, devices, verify] = (await freePorts(4)) as [number, number, number, number];
  return { api, agents, devices, verify };
}

/** A throw-away cluster for tests and benchmarks: `url` is the superuser's. */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const cluster = await openEmbeddedCluster({ ...options, use: 'serve', what: 'an embedded PostgreSQL' });
  return { url: cluster.superuserUrl, stop: () => cluster.stop() };
}

/**
 * Opens the cluster in `options.dir`: starts it (initialising a new one, moving an old one over, stopping one a
 * killed process left running), or, for a command, uses the one a running platform serves.
 */
export async function openEmbeddedCluster(options: EmbeddedClusterOptions): Promise<EmbeddedCluster> {
  const given = path.resolve(options.dir);
  await mkdir(path.dirname(given), { recursive: true });
  // One spelling per cluster (no links), so that every process finds the same socket folder and owner.
  const dir = await realpath(given).catch(async () =>
    path.join(await realpath(path.dirname(given)), path.basename(given)),
  );
  const port = options.port && options.port > 0 ? options.port : DEFAULT_PORT;
  const use = options.use ?? 'serve';
  const what = options.what ?? (use === 'serve' ? 'the platform' : 'a platform command');
  const log = options.onLog ?? (() => {});
  const user = await postgresUser();
  // PostgreSQL's user must be able to reach the folder through its parent.
  if (user.other) await chmod(path.dirname(dir), 0o755).catch(() => {});
  const socketDir = await socketFolder(dir, user);
  const me = { pid: process.pid, use, what, socketDir, port };

  const deadline = Date.now() + (options.waitMs ?? 120_000);
  let ownership: Ownership | null = null;
  for (;;) {
    const claim = await claimOwnership(socketDir, me);
    if ('ownership' in claim) {
      ownership = claim.ownership;
      break;
    }
    const owner = claim.owner;
    if (owner !== 'silent' && owner.use === 'serve') {
      if (use === 'serve') throw inUse(dir, owner);
      if (owner.ready) return useRunning(dir, owner);
    }
    // A platform still starting, or a command that will be done in a moment.
    if (Date.now() > deadline) throw inUse(dir, owner);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }

  let running: RunningPostgres | null = null;
  try {
    let stoppedOrphan: number | null = null;
    const left = await readPostmasterPid(dir);
    if (left && processAlive(left.pid) && (await isPostmasterOf(left.pid, dir))) {
      // Nobody answers for it: the process that started it was killed.
      log(`stopping PostgreSQL pid ${left.pid}, left running on ${dir} by a process that was killed`);
      await stopForeignPostmaster(left.pid, dir);
      stoppedOrphan = left.pid;
    }
    const binaries = await postgresBinaries();
    const file = credentialsFile(dir);
    let credentials: Credentials | null = await readCredentials(file);
    if (!existsSync(path.join(dir, 'PG_VERSION'))) {
      credentials = newCredentials();
      await writeCredentials(file, credentials);
      await initCluster({
        binaries,
        user,
        dir,
        superuser: credentials.superuser.user,
        password: credentials.superuser.password,
        privateDir: socketDir,
        onLog: log,
      });
    } else if (!credentials) {
      // A data directory of an earlier version: moved over below, once.
      credentials = newCredentials();
      await writeCredentials(file, credentials);
    }
    await writeHba(dir, user);
    // The same server at each start: this one, and those the supervision starts if it exits unasked.
    const start = () =>
      startPostgres({ binaries, user, dir, socketDir, port, fsync: options.fsync !== false, onLog: log });
    running = await start();
    let setUp: EmbeddedCluster['setUp'] = null;
    if (credentials.setup < SETUP_VERSION) {
      setUp = await setUpRoles({ socketDir, port }, credentials);
      credentials = { ...credentials, setup: SETUP_VERSION };
      await writeCredentials(file, credentials);
    }
    ownership.setReady();
    const supervised = superviseServer(running, start, options.onServerEvent ?? (() => {}));
    const owned = ownership;
    return {
      ...urls(credentials, socketDir, port),
      socketDir,
      port,
      owner: null,
      setUp,
      stoppedOrphan,
      stop: async () => {
        await supervised.stop();
        await owned.release();
      },
      // owner.sock goes with this process; the next start finds nobody answering on it, as after a kill.
      stopNow: () => supervised.stopNow(),
    };
  } catch (error) {
    await running?.stop().catch(() => {});
    await ownership.release();
    throw error;
  }
}

/**
 * Watches a server this process started: when it exits without stop() having been called, starts it again (the
 * same folder, socket and port) after RESTART_FIRST_MS, then after twice as long at each failure, at most
 * RESTART_MAX_MS apart. PostgreSQL recovers from its WAL as after any crash; a server whose killed postmaster left
 * backends holding its shared memory refuses until they are gone, which the next attempt outlives. stop() stops
 * the server that runs, or the attempts; stopNow() the same at once (RunningPostgres.stopNow).
 */
export function superviseServer(
  first: RunningPostgres,
  start: () => Promise<RunningPostgres>,
  onEvent: (event: ServerEvent) => void,
): { stop(): Promise<void>; stopNow(): void } {
  let current: RunningPostgres | null = first;
  let stopping = false;
  let timer: NodeJS.Timeout | null = null;
  let attempt: Promise<void> | null = null;
  const watch = (server: RunningPostgres) => {
    server.child.once('exit', (code, signal) => {
      if (stopping || current !== server) return;
      current = null;
      const lines = server.recentLines();
      const lastLine = lines.findLast((l) => /\b(PANIC|FATAL):/.test(l)) ?? lines.at(-1) ?? null;
      onEvent({ kind: 'exited', code, signal, lastLine, restartInMs: RESTART_FIRST_MS });
      schedule(Date.now(), 1, RESTART_FIRST_MS);
    });
  };
  const schedule = (downSince: number, attempts: number, waitMs: number) => {
    timer = setTimeout(() => {
      timer = null;
      attempt = start().then(
        (server) => {
          attempt = null;
          // Stopped meanwhile: stop() stops this one once the attempt is over.
          current = server;
          if (stopping) return;
          watch(server);
          onEvent({ kind: 'restarted', attempts, downMs: Date.now() - downSince });
        },
        (error: unknown) => {
          attempt = null;
          if (stopping) return;
          const next = Math.min(waitMs * 2, RESTART_MAX_MS);
          onEvent({
            kind: 'restart_failed',
            attempts,
            reason: error instanceof Error ? error.message : String(error),
            restartInMs: next,
          });
          schedule(downSince, attempts + 1, next);
        },
      );
    }, waitMs);
  };
  watch(first);
  return {
    stop: async () => {
      stopping = true;
      if (timer) clearTimeout(timer);
      await attempt;
      await current?.stop();
    },
    // A start under way (a restart) is not reached: its server is not known until it is ready.
    stopNow: () => {
      stopping = true;
      if (timer) clearTimeout(timer);
      current?.stopNow();
    },
  };
}

/** A cluster a running platform serves: its URLs from the credentials file, and nothing to stop. */
async function useRunning(dir: string, owner: OwnerAnswer): Promise<EmbeddedCluster> {
  const credentials = await readCredentials(credentialsFile(dir));
  if (!credentials) {
    throw new EmbeddedDatabaseError('credentials_unreadable', `${credentialsFile(dir)} is missing`);
  }
  return {
    ...urls(credentials, owner.socketDir, owner.port),
    socketDir: owner.socketDir,
    port: owner.port,
    owner: { pid: owner.pid, what: owner.what },
    setUp: null,
    stoppedOrphan: null,
    stop: async () => {},
    stopNow: () => {},
  };
}

function inUse(dir: string, owner: OwnerAnswer | 'silent'): EmbeddedDatabaseError {
  return new EmbeddedDatabaseError(
    'in_use',
    owner === 'silent'
      ? `the embedded PostgreSQL in ${dir} is in use by another process, which does not answer`
      : `the embedded PostgreSQL in ${dir} is in use by ${owner.what} (pid ${owner.pid}); ` +
          (owner.use === 'serve' ? 'stop it first, or use another DATA_DIR' : 'try again when it is done'),
  );
}

function urls(
  credentials: Credentials,
  socketDir: string,
  port: number,
): { url: string; superuserUrl: string } {
  // libpq's and node-postgres's form for a socket: the folder as the host parameter.
  const url = (login: { user: string; password: string }) =>
    `postgresql://${login.user}:${encodeURIComponent(login.password)}@localhost:${port}/${credentials.database}` +
    `?host=${encodeURIComponent(socketDir)}`;
  return { url: url(credentials.platform), superuserUrl: url(credentials.superuser) };
}

/**
 * The socket folder: `<cluster>-socket` when a socket path in it fits in sockaddr_un, else `/tmp/ooh-pg-<hash of
 * the cluster path>`.
 */
export function socketFolderPath(dir: string): string {
  const beside = `${dir}-socket`;
  return Buffer.byteLength(path.join(beside, '.s.PGSQL.65535.lock')) <= MAX_SOCKET_PATH
    ? beside
    : path.join('/tmp', `ooh-pg-${createHash('sha256').update(dir).digest('hex').slice(0, 16)}`);
}

/**
 * Makes the socket folder, which only PostgreSQL's user may enter (mode 0700, its owner); our process enters it as
 * that same user, or as root. A folder that someone else made (in /tmp, say), or a link, is refused, not used.
 */
async function socketFolder(dir: string, user: PostgresUser): Promise<string> {
  const folder = socketFolderPath(dir);
  await mkdir(folder, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  const info = await lstat(folder);
  const ownUid = process.getuid?.() ?? -1;
  if (!info.isDirectory() || (info.uid !== user.uid && info.uid !== ownUid)) {
    throw new EmbeddedDatabaseError(
      'socket_folder',
      `${folder} is not a folder of this platform's (a link, or another user's): remove it and start again`,
    );
  }
  if (user.other) await chown(folder, user.uid, user.gid);
  await chmod(folder, 0o700);
  return folder;
}

/** Only the socket, only by password: no `trust`, no `password` (clear text), no TCP line. */
const HBA = `# Written by the platform at every start (apps/platform/src/db/embedded.ts): connections through the Unix
# socket in a private folder only (the server has no TCP listener), every role by password, scram-sha-256.
local all all scram-sha-256
`;

async function writeHba(dir: string, user: PostgresUser): Promise<void> {
  const file = path.join(dir, 'pg_hba.conf');
  await writeFile(file, HBA, { mode: 0o600 });
  if (user.other) await chown(file, user.uid, user.gid);
  await chmod(file, 0o600);
}
