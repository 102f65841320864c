import { mkdir, rmdir, stat, unlink } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';

/*
 * Who runs an embedded cluster. The process that starts PostgreSQL on a data directory listens on a Unix socket,
 * `owner.sock`, in the cluster's private socket folder, and answers every connection with one JSON line: its pid,
 * what it is and whether the cluster is ready. Another process on the same data directory asks it first: a
 * platform uses the answer to refuse a second start, a command (bootstrap) to use the running cluster. The kernel
 * keeps this honest: once the owner is gone, even by kill -9, connecting is refused, so a cluster left running
 * by a killed platform is known to be an orphan (no pid file whose number could have been reused).
 */

export const OWNER_SOCKET = 'owner.sock';

export interface OwnerAnswer {
  pid: number;
  /** serve: a platform, for as long as it runs; command: a short command (bootstrap) that stops it when done. */
  use: 'serve' | 'command';
  /** What the owner is, for messages ("platform run"). */
  what: string;
  /** The cluster accepts connections (its roles are set up). */
  ready: boolean;
  socketDir: string;
  port: number;
}

const ASK_TIMEOUT_MS = 5_000;
const CLAIM_LOCK_STALE_MS = 10_000;

/**
 * The owner's answer; `null` when nobody owns the cluster (no socket, or a socket nobody listens on any more);
 * `'silent'` when a process listens but did not answer in time (alive, but busy).
 */
export function askOwner(socketDir: string): Promise<OwnerAnswer | null | 'silent'> {
  return new Promise((resolve) => {
    const socket = net.connect(path.join(socketDir, OWNER_SOCKET));
    let text = '';
    let connected = false;
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('silent');
    }, ASK_TIMEOUT_MS);
    socket.on('connect', () => {
      connected = true;
    });
    socket.on('data', (chunk) => {
      text += chunk.toString('utf8');
    });
    socket.on('error', () => {
      clearTimeout(timer);
      // ENOENT: no socket; ECONNREFUSED: its process is gone. A reset after connecting: it is closing.
      resolve(connected ? 'silent' : null);
    });
    socket.on('end', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(text) as OwnerAnswer);
      } catch {
        resolve('silent');
      }
    });
  });
}

export interface Ownership {
  /** Marks the cluster ready: askers from now on get ready: true. */
  setReady(): void;
  /** Stops answering (after the cluster is stopped). */
  release(): Promise<void>;
}

/**
 * Claims the cluster for this process, or answers who has it. A short lock folder (`claim.lock`) makes "ask, then
 * listen" one step, so two processes starting together cannot both take over a socket left by a killed one.
 */
export async function claimOwnership(
  socketDir: string,
  me: Omit<OwnerAnswer, 'ready'>,
): Promise<{ ownership: Ownership } | { owner: OwnerAnswer | 'silent' }> {
  const lock = path.join(socketDir, 'claim.lock');
  await takeLock(lock);
  try {
    const owner = await askOwner(socketDir);
    if (owner !== null) return { owner };
    const file = path.join(socketDir, OWNER_SOCKET);
    await unlink(file).catch(() => {});
    let ready = false;
    const server = net.createServer((socket) => {
      socket.on('error', () => {});
      socket.end(`${JSON.stringify({ ...me, ready } satisfies OwnerAnswer)}\n`);
    });
    server.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(file, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // Answering never keeps a process alive on its own.
    server.unref();
    let released: Promise<void> | null = null;
    return {
      ownership: {
        setReady: () => {
          ready = true;
        },
        release: () => {
          // Closing a listening Unix socket removes its file (libuv).
          released ??= new Promise<void>((resolve) => server.close(() => resolve()));
          return released;
        },
      },
    };
  } finally {
    await rmdir(lock).catch(() => {});
  }
}

async function takeLock(lock: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await mkdir(lock, { mode: 0o700 });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || Date.now() > deadline) throw error;
    }
    // A claim takes milliseconds: a lock this old belongs to a process killed while claiming.
    const age = await stat(lock).then(
      (s) => Date.now() - s.mtimeMs,
      () => 0,
    );
    if (age > CLAIM_LOCK_STALE_MS) await rmdir(lock).catch(() => {});
    else await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
