import { sha256Hex } from '@ooh/crypto';
import { addDays } from '@ooh/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TestClock } from '../../src/clock.js';
import type { PlatformContext } from '../../src/context.js';
import { createPool } from '../../src/db/pool.js';
import { runSealScheduler, sealDay, sealEndedDays, startSealScheduler } from '../../src/seals/index.js';
import { agentBody, insertBatch, newDevice, startSealPlatform } from './helpers.js';

type P = Awaited<ReturnType<typeof startSealPlatform>>;

/** Another platform instance on the same database: its own pool and clock, same configuration. */
function otherInstance(p: P, now: Date): PlatformContext & { clock: TestClock; close(): Promise<void> } {
  const db = createPool(p.database.url, { max: 5, applicationName: 'ooh-test-instance-b' });
  const clock = new TestClock(now, { frozen: true });
  return { ...p.ctx, db, clock, testClock: clock, close: () => db.end() };
}

async function sealRows(p: P) {
  const { rows } = await p.database.db.query<{
    day: string;
    prev_day: string | null;
    body: Buffer;
    body_sha256: string;
    ledger_leaf_id: number;
  }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, to_char(prev_day, 'YYYY-MM-DD') AS prev_day, body, body_sha256,
            ledger_leaf_id FROM stats_seals ORDER BY day`,
  );
  return rows;
}

async function until<T>(what: string, probe: () => Promise<T | null>, limitMs = 30_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('two instances racing to seal the same day', () => {
  let p: P;
  beforeAll(async () => {
    p = await startSealPlatform(new Date('2026-11-20T06:00:00Z'));
    const device = newDevice();
    for (let seq = 0; seq < 50; seq += 1) {
      await insertBatch(p.database.db, {
        owner: device,
        batchSeq: seq,
        body: agentBody(device.slice(7), seq, seq % 4),
        receivedAt: `2026-11-19T0${seq % 10}:00:00.${String(seq).padStart(6, '0')}Z`,
      });
    }
  });
  afterAll(async () => {
    await p?.close();
  });

  test('make one seal, and both are answered with it', async () => {
    const b = otherInstance(p, new Date('2026-11-20T06:00:00Z'));
    try {
      const [a, bb, c, ...passes] = await Promise.all([
        sealDay(p.ctx, '2026-11-19'),
        sealDay(b, '2026-11-19'),
        sealDay(b, '2026-11-19'),
        sealEndedDays(p.ctx),
        sealEndedDays(b),
        runSealScheduler(p.ctx).then((r) => r.seals),
        runSealScheduler(b).then((r) => r.seals),
      ]);
      const rows = await sealRows(p);
      expect(rows.map((r) => r.day)).toEqual(['2026-11-19']);
      for (const r of [a, bb, c]) expect(r.seal.body_sha256).toBe(rows[0]!.body_sha256);
      // Exactly one of the seven made it.
      const made =
        [a, bb, c].filter((r) => r.created).length + passes.reduce((n, seals) => n + seals.length, 0);
      expect(made).toBe(1);
      const { rows: leaves } = await p.database.db.query(
        `SELECT id FROM ledger_leaves WHERE kind = 'stats_seal'`,
      );
      expect(leaves).toHaveLength(1);
    } finally {
      await b.close();
    }
  });
});

describe('a restart after three days down', () => {
  let p: P;
  const firstDay = '2026-11-20';
  beforeAll(async () => {
    // The platform's first day: 2026-11-20, 10:00 Almaty.
    p = await startSealPlatform(new Date('2026-11-20T05:00:00Z'));
  });
  afterAll(async () => {
    await p?.close();
  });

  test('seals the missed days in order, then the ledger gives them proofs the day after', async () => {
    // Instance A runs on the first day: nothing has ended yet.
    const stopA = startSealScheduler(p.ctx, { intervalMs: 20 });
    await until('the first scheduler pass', async () => {
      const { rows } = await p.database.db.query(
        `SELECT to_char(first_day, 'YYYY-MM-DD') AS d FROM seal_epoch`,
      );
      return rows[0]?.d ?? null;
    });
    const device = newDevice();
    await insertBatch(p.database.db, {
      owner: device,
      batchSeq: 1,
      body: agentBody(device.slice(7), 1, 2),
      receivedAt: '2026-11-20T05:00:01.000000Z',
    });
    await stopA();
    expect(await sealRows(p)).toEqual([]);

    // Down until 2026-11-24 09:00 Almaty: the 20th ended, and the 21st, 22nd and 23rd passed without it.
    const b = otherInstance(p, new Date('2026-11-24T04:00:00Z'));
    try {
      const stopB = startSealScheduler(b, { intervalMs: 20 });
      const rows = await until('four seals', async () => {
        const r = await sealRows(p);
        return r.length >= 4 ? r : null;
      });
      expect(rows.map((r) => r.day)).toEqual(['2026-11-20', '2026-11-21', '2026-11-22', '2026-11-23']);
      // In order: each follows the one before, in the chain and in the ledger.
      expect(rows.map((r) => r.prev_day)).toEqual([null, '2026-11-20', '2026-11-21', '2026-11-22']);
      for (let i = 1; i < rows.length; i += 1) {
        const body = JSON.parse(rows[i]!.body.toString('utf8'));
        expect(body.prev_seal_sha256).toBe(sha256Hex(rows[i - 1]!.body));
        expect(rows[i]!.ledger_leaf_id).toBeGreaterThan(rows[i - 1]!.ledger_leaf_id);
      }
      expect(JSON.parse(rows[0]!.body.toString('utf8')).batch_count).toBe(1);
      // Blocks of the ended days are digested (20th..23rd); the seals' leaves are in today's block, not yet.
      const blocks = await until('four blocks', async () => {
        const { rows: r } = await p.database.db.query<{
          day: string;
          block_height: number;
          leaf_count: number;
        }>(
          `SELECT to_char(day, 'YYYY-MM-DD') AS day, block_height, leaf_count FROM ledger_blocks ORDER BY day`,
        );
        return r.length >= 4 ? r : null;
      });
      expect(blocks).toEqual([
        { day: firstDay, block_height: 1, leaf_count: 0 },
        { day: addDays(firstDay, 1), block_height: 2, leaf_count: 0 },
        { day: addDays(firstDay, 2), block_height: 3, leaf_count: 0 },
        { day: addDays(firstDay, 3), block_height: 4, leaf_count: 0 },
      ]);
      const before = await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-22' });
      expect(before.json().ledger).toBeNull();

      // The next day: the 24th is sealed and its block (holding the four seals) digested.
      b.clock.set(new Date('2026-11-25T04:00:00Z'));
      await until('the seal of the 24th and its block', async () => {
        const { rows: r } = await p.database.db.query(`SELECT 1 FROM ledger_blocks WHERE day = '2026-11-24'`);
        return r.length > 0 ? true : null;
      });
      await stopB();
      const after = await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-22' });
      const ledger = after.json().ledger;
      expect(ledger).toMatchObject({ day: '2026-11-24', status: 'digested', block_height: 5 });
      expect(ledger.proof).toMatchObject({ v: 1, day: '2026-11-24', index: 2, leaf_count: 4 });
      expect(ledger.proof.leaf).toEqual({
        kind: 'stats_seal',
        approval_number: null,
        manifest_sha256: rows[2]!.body_sha256,
        signed_at: '2026-11-24T09:00:00.000+05:00',
        revoked_at: null,
      });
    } finally {
      await b.close();
    }
  });
});

describe('the scheduler waits a little after midnight', () => {
  let p: P;
  beforeAll(async () => {
    p = await startSealPlatform(new Date('2026-11-19T05:00:00Z'));
    await runSealScheduler(p.ctx);
  });
  afterAll(async () => {
    await p?.close();
  });

  test('for an instance whose clock runs behind: 10 s after midnight nothing, 31 s after the day is sealed', async () => {
    // 2026-11-20 00:00:10 Almaty.
    p.clock.set(new Date('2026-11-19T19:00:10Z'));
    expect(await runSealScheduler(p.ctx)).toEqual({ seals: [], blocks: [] });
    p.clock.set(new Date('2026-11-19T19:00:31Z'));
    const run = await runSealScheduler(p.ctx);
    expect(run.seals.map((s) => s.day)).toEqual(['2026-11-19']);
    expect(run.blocks).toEqual([{ day: '2026-11-19', block_height: 1 }]);
  });
});
