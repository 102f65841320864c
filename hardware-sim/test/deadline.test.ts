import { spawnSync } from 'node:child_process';
import { getEventListeners } from 'node:events';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { describeFailure } from '../src/cli/commission.js';
import { ConsoleClient } from '../src/platform/console-client.js';
import { AnswerTimeout, pause } from '../src/util/deadline.js';

/*
 * A platform that takes the connection and never answers (a stalled proxy, a hung platform): each call gives up at
 * its limit, said as "did not answer in time", even when the garbage collector runs meanwhile. On Node 20,
 * AbortSignal.any([AbortSignal.timeout(ms), signal]) loses its timeout to the collector and never fires
 * (nodejs/node#57736): the call waited for undici's 300 s instead.
 */

const SIM_ROOT = join(import.meta.dirname, '..');

describe('a platform that accepts connections and never answers', () => {
  let server: net.Server;
  let url: string;
  const sockets = new Set<net.Socket>();

  beforeAll(async () => {
    server = net.createServer((socket) => {
      sockets.add(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  });
  afterAll(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });

  test('a call with the run’s signal gives up at its limit, the collector running every 50 ms', () => {
    // A process of its own, for --expose-gc: the collector is what took the timeout away.
    const script = `
      const { ConsoleClient } = await import(${JSON.stringify(join(SIM_ROOT, 'src/platform/console-client.ts'))});
      const collecting = setInterval(() => gc(), 50);
      const started = Date.now();
      const run = new AbortController();
      try {
        await new ConsoleClient(${JSON.stringify(url)}, 'k', 500, run.signal).call('GET', '/api/v1/console/structures');
        console.log(JSON.stringify({ answered: true }));
      } catch (error) {
        console.log(JSON.stringify({ name: error.name, ms: Date.now() - started }));
      }
      clearInterval(collecting);
      process.exit(0);
    `;
    const child = spawnSync(
      process.execPath,
      ['--expose-gc', '--conditions=source', '--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: SIM_ROOT, encoding: 'utf8', timeout: 20_000 },
    );
    expect(child.stderr).toBe('');
    const result = JSON.parse(child.stdout) as { name: string; ms: number };
    expect(result.name).toBe('TimeoutError');
    expect(result.ms).toBeGreaterThanOrEqual(450);
    expect(result.ms).toBeLessThan(5_000);
  });

  test('the failure says the platform did not answer in time, naming the host and the limit', async () => {
    const error = await new ConsoleClient(url, 'k', 300)
      .call('GET', '/api/v1/console/structures')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AnswerTimeout);
    const failure = describeFailure('structure', url, error);
    expect(`${failure.what}: ${failure.action}`).toMatch(
      /^the platform did not answer in time: no answer from http:\/\/127\.0\.0\.1:\d+ within 0\.3 s: check that the platform runs/,
    );
  });

  test('Ctrl-C during a call still ends it at once, with its own reason, not a timeout', async () => {
    const run = new AbortController();
    const interrupted = new Error('interrupted');
    const call = new ConsoleClient(url, 'k', 60_000, run.signal)
      .call('GET', '/api/v1/console/structures')
      .catch((e: unknown) => e);
    setTimeout(() => run.abort(interrupted), 100);
    const started = Date.now();
    expect(await call).toBe(interrupted);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe('pause: the wait of player’s play loop', () => {
  test('fifteen waits on one run’s signal leave no listener on it and raise no warning', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const run = new AbortController();
      for (let turn = 0; turn < 15; turn++) {
        await pause(5, run.signal);
        expect(getEventListeners(run.signal, 'abort')).toHaveLength(0);
      }
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((w) => w.name)).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('Ctrl-C ends a wait at once', async () => {
    const run = new AbortController();
    const started = Date.now();
    setTimeout(() => run.abort(), 20);
    await pause(60_000, run.signal);
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});
