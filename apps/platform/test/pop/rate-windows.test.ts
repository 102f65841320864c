import fc from 'fast-check';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { rateLook } from '../../src/pop/rate-limits.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

// Migration 082: "2 000 000 records an hour per organisation" as a window kept per minute (pop_take_limits,
// pop_window_wait), checked against a model that keeps every take with its instant.
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const HOUR_MS = 3_600_000;
const T0 = Date.parse('2026-11-20T06:00:00Z');

async function take(
  key: string,
  limit: number,
  cost: number,
  at: Date,
  bucket?: { key: string; tokens: number },
) {
  const { rows } = await t.db.query<{ wait: number }>(
    `SELECT pop_take_limits($1::text[], $2::float8[], $3::float8[], $4::float8[],
                            ARRAY[$5]::text[], ARRAY[60]::int4[], ARRAY[$6]::float8[], ARRAY[$7]::float8[], $8) AS wait`,
    [
      bucket ? [bucket.key] : [],
      bucket ? [bucket.tokens] : [],
      bucket ? [1] : [],
      bucket ? [1] : [],
      key,
      limit,
      cost,
      at,
    ],
  );
  return rows[0]!.wait;
}

async function look(key: string, limit: number, cost: number, at: Date) {
  const { rows } = await t.db.query<{ wait: number }>(
    `SELECT ${rateLook('ARRAY[$1]', 'ARRAY[$2]', 'ARRAY[$3]', 'ARRAY[$4]', 'ARRAY[60]', '$5')} AS wait`,
    [key, limit, limit / 3600, cost, at],
  );
  return rows[0]!.wait;
}

test('never more than the limit in any hour; a refusal names the time room comes, and the look agrees', async () => {
  let n = 0;
  await fc.assert(
    fc.asyncProperty(
      // Takes of up to 40 % of the limit, a few seconds to a couple of hours apart.
      fc.array(fc.tuple(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 2 * HOUR_MS })), {
        minLength: 1,
        maxLength: 30,
      }),
      async (steps) => {
        n += 1;
        const key = `w:${n}`;
        const limit = 100;
        const taken: { at: number; cost: number }[] = [];
        let now = T0 + 17_123; // not on a minute
        for (const [cost, gap] of steps) {
          now += gap % 3 === 0 ? gap : Math.floor(gap / 40); // many takes within the hour, some hours apart
          const at = new Date(now);
          const looked = await look(key, limit, cost, at);
          const wait = await take(key, limit, cost, at);
          expect(looked).toBeCloseTo(wait, 6);
          // What the model knows for sure: within the last 59 minutes (the minute the take is in, and the 59
          // before it, all counted) a take that does not fit is refused; beyond 61 minutes nothing counts.
          const sure = taken.filter((x) => x.at > now - 59 * 60_000).reduce((s, x) => s + x.cost, 0);
          const all = taken.filter((x) => x.at > now - 61 * 60_000).reduce((s, x) => s + x.cost, 0);
          if (sure + cost > limit) expect(wait).toBeGreaterThan(0);
          if (all + cost <= limit) expect(wait).toBe(0);
          if (wait === 0) {
            taken.push({ at: now, cost });
            // The rule itself: in the hour that ends now, at most the limit.
            const hour = taken.filter((x) => x.at > now - HOUR_MS).reduce((s, x) => s + x.cost, 0);
            expect(hour).toBeLessThanOrEqual(limit);
          } else {
            // Refused: still refused a second before the time it names, taken at it (nothing else taken meanwhile).
            expect(wait).toBeLessThanOrEqual(61 * 60);
            const room = now + Math.ceil(wait * 1000);
            if (wait > 1) expect(await look(key, limit, cost, new Date(room - 1000))).toBeGreaterThan(0);
            expect(await look(key, limit, cost, new Date(room))).toBe(0);
          }
        }
      },
    ),
    { numRuns: 40 },
  );
});

test('all or nothing with the buckets; an instance whose clock is behind counts from the newest minute', async () => {
  const at = new Date(T0);
  // The bucket refuses: the window takes nothing either.
  expect(await take('w:all', 10, 4, at, { key: 'b:all', tokens: 0 })).toBeGreaterThan(0);
  expect(await look('w:all', 10, 10, at)).toBe(0);
  // Both grant: both take.
  expect(await take('w:all', 10, 4, at, { key: 'b:all2', tokens: 1 })).toBe(0);
  expect(await look('w:all', 10, 7, at)).toBeGreaterThan(0);
  // The window refuses: the bucket keeps its token.
  expect(await take('w:all', 10, 7, at, { key: 'b:all3', tokens: 1 })).toBeGreaterThan(0);
  const { rows } = await t.db.query("SELECT tokens FROM pop_rate_buckets WHERE bucket_key = 'b:all3'");
  expect(rows[0].tokens).toBe(1);
  // A take stamped five minutes in the past is counted in the newest minute, not lost behind the window.
  expect(await take('w:all', 10, 2, new Date(T0 - 5 * 60_000))).toBe(0);
  const { rows: w } = await t.db.query(
    "SELECT newest_minute, used FROM pop_rate_windows WHERE window_key = 'w:all'",
  );
  expect(Number(w[0].newest_minute)).toBe(T0 / 60_000);
  expect(w[0].used.map(Number)).toEqual([6]);
  // More than the limit at once can never be taken: a whole window is the answer, not a loop.
  expect(await take('w:all', 10, 11, new Date(T0 + 3 * HOUR_MS))).toBe(3600);
});
