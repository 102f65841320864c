import { afterEach, expect, test, vi } from 'vitest';
import {
  CONNECTION_LOSS_BURST_MS,
  isDatabaseConnectionLoss,
  reportConnectionLoss,
} from '../../src/logging.js';
import { startTicker } from '../../src/shared/ticker.js';
import { capturedLog } from '../support/log.js';
import { createTestDatabase } from '../support/database.js';

/*
 * A restart of PostgreSQL ends every connection at once: the pool's idle ones and those of background work whose
 * query was running. The log says so once for the burst, then how many more were lost, never a line (or a stack) per
 * connection; any other failure of background work is still an error with its stack.
 */

/** pg's error for a backend PostgreSQL terminated. */
function terminated(): Error {
  return Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
}

const clock = { now: () => new Date('2026-11-28T06:00:00Z') };

afterEach(() => {
  vi.useRealTimers();
});

test('the pool and a scheduler that lose their connections in one burst write one line, then a count', async () => {
  vi.useFakeTimers();
  const { log, lines } = capturedLog();
  reportConnectionLoss(log, terminated(), 'an idle connection of the pool');
  reportConnectionLoss(log, terminated(), 'an idle connection of the pool');
  const stop = startTicker({ clock, log }, 'seals', 60_000, () => Promise.reject(terminated()));
  await vi.advanceTimersByTimeAsync(1);
  await stop();
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({
    level: 40,
    code: '57P01',
    source: 'an idle connection of the pool',
    msg: 'database connection lost; the next query reconnects',
  });
  await vi.advanceTimersByTimeAsync(CONNECTION_LOSS_BURST_MS);
  expect(lines).toHaveLength(2);
  expect(lines[1]).toMatchObject({ level: 40, connections: 2, msg: 'more database connections were lost' });
  // A later loss starts a new burst.
  reportConnectionLoss(log, terminated(), 'an idle connection of the pool');
  expect(lines).toHaveLength(3);
});

test('a scheduler first to lose its connection names itself; any other failure stays an error with its stack', async () => {
  vi.useFakeTimers();
  const { log, lines } = capturedLog();
  const lost = startTicker({ clock, log }, 'seals', 60_000, () => Promise.reject(terminated()));
  await vi.advanceTimersByTimeAsync(1);
  await lost();
  expect(lines).toEqual([
    expect.objectContaining({ level: 40, code: '57P01', source: 'background work: seals' }),
  ]);
  const broken = startTicker({ clock, log }, 'alerts', 60_000, () => Promise.reject(new Error('a bug')));
  await vi.advanceTimersByTimeAsync(1);
  await broken();
  expect(lines).toHaveLength(2);
  expect(lines[1]).toMatchObject({ level: 50, ticker: 'alerts', msg: 'background work failed' });
  expect((lines[1]!['err'] as { stack?: string }).stack).toMatch(/a bug/);
  // A socket error of other work (a witness's ECONNREFUSED) is not a lost database connection either.
  const refused = startTicker({ clock, log }, 'ledger-witnesses', 60_000, () =>
    Promise.reject(Object.assign(new Error('connect ECONNREFUSED 192.0.2.1:443'), { code: 'ECONNREFUSED' })),
  );
  await vi.advanceTimersByTimeAsync(1);
  await refused();
  expect(lines).toHaveLength(3);
  expect(lines[2]).toMatchObject({ level: 50, ticker: 'ledger-witnesses', msg: 'background work failed' });
});

test('what pg gives work whose backend is ended, under a query or between two, is a lost connection', async () => {
  const t = await createTestDatabase({ migrate: false });
  try {
    const pidOf = async (client: { query(text: string): Promise<{ rows: { pid: number }[] }> }) =>
      (await client.query('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    // Under a query: the query itself fails.
    const busy = await t.db.connect();
    const busyPid = await pidOf(busy);
    const running = busy.query('SELECT pg_sleep(30)').then(
      () => null,
      (error: unknown) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await t.db.query('SELECT pg_terminate_backend($1)', [busyPid]);
    const underQuery = await running;
    busy.release(true);
    expect(underQuery).toBeInstanceOf(Error);
    expect(isDatabaseConnectionLoss(underQuery), String(underQuery)).toBe(true);

    // Between two queries of a transaction: the next one fails.
    const idle = await t.db.connect();
    const idlePid = await pidOf(idle);
    await idle.query('BEGIN');
    const lost = new Promise((resolve) => idle.once('error', resolve));
    await t.db.query('SELECT pg_terminate_backend($1)', [idlePid]);
    await lost;
    const next = await idle.query('SELECT 1').then(
      () => null,
      (error: unknown) => error,
    );
    idle.release(true);
    expect(next).toBeInstanceOf(Error);
    expect(isDatabaseConnectionLoss(next), String(next)).toBe(true);
  } finally {
    await t.drop();
  }
});
