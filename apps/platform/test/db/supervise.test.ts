import type { ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { afterEach, expect, test, vi } from 'vitest';
import {
  RESTART_FIRST_MS,
  RESTART_MAX_MS,
  type ServerEvent,
  superviseServer,
} from '../../src/db/embedded.js';
import type { RunningPostgres } from '../../src/db/embedded-process.js';

/*
 * The supervision of the embedded PostgreSQL a platform started (src/db/embedded.ts, superviseServer): started again
 * when it exits unasked, less and less often while it will not start, never once stop() was called. The real server
 * killed under a running platform is test/core/cli-and-instances.test.ts; here the waits, with servers that are
 * event emitters.
 */

afterEach(() => {
  vi.useRealTimers();
});

function fakeServer(
  lines: string[] = [],
): RunningPostgres & { exit(signal: string): void; stopped: boolean } {
  const child = new EventEmitter() as unknown as ChildProcess;
  const server = {
    child,
    stopped: false,
    recentLines: () => lines,
    stop: async () => {
      server.stopped = true;
      child.emit('exit', 0, null);
    },
    stopNow: () => {
      server.stopped = true;
      child.emit('exit', null, 'SIGQUIT');
    },
    exit: (signal: string) => child.emit('exit', null, signal),
  };
  return server;
}

test('an exited server is started again after 1 s, then 2, 4, ... at most 30 s apart while starting fails', async () => {
  vi.useFakeTimers();
  const events: ServerEvent[] = [];
  const first = fakeServer([
    'LOG: ready',
    'PANIC: could not write to file "pg_wal/xlogtemp.1": No space left on device',
  ]);
  const next = fakeServer();
  let failures = 6;
  const starts: number[] = [];
  const start = async () => {
    starts.push(Date.now());
    if (failures > 0) {
      failures -= 1;
      throw new Error('PostgreSQL: FATAL: pre-existing shared memory block is still in use');
    }
    return next;
  };
  const supervised = superviseServer(first, start, (e) => events.push(e));
  const t0 = Date.now();
  first.exit('SIGKILL');
  expect(events[0]).toEqual({
    kind: 'exited',
    code: null,
    signal: 'SIGKILL',
    lastLine: 'PANIC: could not write to file "pg_wal/xlogtemp.1": No space left on device',
    restartInMs: RESTART_FIRST_MS,
  });
  await vi.advanceTimersByTimeAsync(200_000);
  expect(starts.map((at) => at - t0)).toEqual([1_000, 3_000, 7_000, 15_000, 31_000, 61_000, 91_000]);
  expect(events.filter((e) => e.kind === 'restart_failed').map((e) => e.restartInMs)).toEqual([
    2_000,
    4_000,
    8_000,
    16_000,
    RESTART_MAX_MS,
    RESTART_MAX_MS,
  ]);
  expect(events.at(-1)).toEqual({ kind: 'restarted', attempts: 7, downMs: 91_000 });

  // The new server is watched in turn; stop() stops it, and its exit then starts nothing.
  await supervised.stop();
  expect(next.stopped).toBe(true);
  await vi.advanceTimersByTimeAsync(200_000);
  expect(starts).toHaveLength(7);
});

test('stop() during the waits starts nothing more, and stops a server an attempt under way brings up', async () => {
  vi.useFakeTimers();
  const first = fakeServer();
  const late = fakeServer();
  let resolveStart: ((server: RunningPostgres) => void) | null = null;
  const start = vi.fn(
    () =>
      new Promise<RunningPostgres>((resolve) => {
        resolveStart = resolve;
      }),
  );
  const supervised = superviseServer(first, start, () => {});
  first.exit('SIGKILL');
  await vi.advanceTimersByTimeAsync(RESTART_FIRST_MS);
  expect(start).toHaveBeenCalledTimes(1);
  const stopping = supervised.stop();
  resolveStart!(late);
  await stopping;
  expect(late.stopped).toBe(true);
  await vi.advanceTimersByTimeAsync(100_000);
  expect(start).toHaveBeenCalledTimes(1);
  // A server stopped by stop() is not started again.
  const quiet = fakeServer();
  const again = vi.fn(async () => fakeServer());
  await superviseServer(quiet, again, () => {}).stop();
  await vi.advanceTimersByTimeAsync(100_000);
  expect(again).not.toHaveBeenCalled();
});
