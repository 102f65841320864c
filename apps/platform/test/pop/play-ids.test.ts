import { describe, expect } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { startHourOf } from '../../src/pop/judge.js';
import { findCountedPlays } from '../../src/pop/batch-context.js';
import { createTestDatabase } from '../support/database.js';
import {
  agentBody,
  answerOf,
  cmsBody,
  cmsPlay,
  countedPlays,
  play,
  postCms,
  postTelemetry,
  T0,
} from './helpers.js';
import { APPROVAL, popWorld } from './world.js';

/*
 * Issue "Trust under attack", item 6: "A play_id seen again for the same player under a new seq is counted twice (a
 * CMS that renumbers after a crash double-counts). Do not count a play whose play_id was already counted for that
 * player (within the 90-day horizon of too_old): refuse it with a stable reason, listed in items."
 */

const test = popWorld({ instances: 2, approvals: [{ number: APPROVAL }] })
  /** A new CMS installation with one screen, on the operator's second structure, and the screen's player key. */
  .extend('newScreen', { scope: 'file' }, ({ world }) => {
    let next = 0;
    return async () => {
      const screen = `screen-${next++}`;
      const source = await world.newSource({ [screen]: world.operator.structures[1]! });
      return { source, screen, key: `cms:${source.id}:${screen}` };
    };
  })
  /** The platform clock moves on, a second at a time, so that the rate limits refill (it never goes back). */
  .extend('tick', { scope: 'file' }, ({ world }) => {
    let clockMs = T0.getTime();
    return (ms = 1000): Date => {
      clockMs += ms;
      world.setNow(new Date(clockMs));
      return new Date(clockMs);
    };
  });

const refused = (indexes: number[]) =>
  indexes.map((index) => ({ index, status: 'refused', reason: 'play_id_counted' }));

describe('a play is counted once per play_id, whatever seq it comes under', () => {
  test('a CMS that renumbers after a crash resends its plays under new numbers: they are refused', async ({
    db,
    servers,
    newScreen,
  }) => {
    const { source, screen, key } = await newScreen();
    // Three plays a minute apart, in two batches.
    const at = (minute: number) => new Date(T0.getTime() - (10 - minute) * 60_000);
    const original = [1, 2, 3].map((seq) => cmsPlay(screen, seq, { play_id: `xibo-${seq}` }, at(seq)));
    expect(answerOf(await postCms(servers, source, cmsBody(source, 0, original.slice(0, 2)))).accepted).toBe(
      2,
    );
    expect(answerOf(await postCms(servers, source, cmsBody(source, 1, original.slice(2)))).accepted).toBe(1);

    // After the crash: the same three plays numbered 4, 5, 6, then a new one.
    const renumbered = original.map((record, i) => ({ ...record, seq: 4 + i }));
    const answer = answerOf(
      await postCms(
        servers,
        source,
        cmsBody(source, 2, [...renumbered, cmsPlay(screen, 7, { play_id: 'xibo-7' }, at(4))]),
      ),
    );
    expect(answer).toMatchObject({ received: 4, accepted: 1, refused: 3, duplicates: 0 });
    expect(answer.items).toEqual(refused([0, 1, 2]));
    expect(await countedPlays(db, key)).toBe(4);
    // Their numbers are taken all the same: a later record numbered 6 is a duplicate.
    const late = answerOf(
      await postCms(
        servers,
        source,
        cmsBody(source, 3, [cmsPlay(screen, 6, { play_id: 'xibo-new' }, at(5))]),
      ),
    );
    expect(late.items).toEqual([{ index: 0, status: 'duplicate' }]);
  });

  test('a resent play is found across an hour boundary and among many batches', async ({
    db,
    servers,
    newScreen,
    tick,
  }) => {
    const { source, screen, key } = await newScreen();
    // Plays every 10 minutes over three hours, a batch each.
    const start = new Date('2026-11-20T02:59:59.000Z');
    const plays = Array.from({ length: 18 }, (_, i) =>
      cmsPlay(screen, i + 1, { play_id: `p-${i}` }, new Date(start.getTime() + i * 600_000 + 15_000)),
    );
    for (const [i, record] of plays.entries()) {
      tick();
      expect(answerOf(await postCms(servers, source, cmsBody(source, i, [record]))).accepted).toBe(1);
    }
    tick();
    // The first play again, its times shifted across the hour by the resending system (02:59:59 -> 03:00:00.5).
    const shifted = {
      ...plays[0]!,
      seq: 100,
      start: '2026-11-20T03:00:00.500Z',
      end: '2026-11-20T03:00:15.500Z',
    };
    const answer = answerOf(
      await postCms(servers, source, cmsBody(source, 18, [shifted, { ...plays[9]!, seq: 101 }])),
    );
    expect(answer.items).toEqual(refused([0, 1]));
    expect(await countedPlays(db, key)).toBe(18);
  });

  test('a play_id that reads NULL is an identifier like any other', async ({
    db,
    servers,
    newScreen,
    tick,
  }) => {
    const { source, screen, key } = await newScreen();
    const record = cmsPlay(screen, 1, { play_id: 'NULL' });
    expect(answerOf(await postCms(servers, source, cmsBody(source, 0, [record]))).accepted).toBe(1);
    tick();
    const answer = answerOf(await postCms(servers, source, cmsBody(source, 1, [{ ...record, seq: 2 }])));
    expect(answer.items).toEqual(refused([0]));
    expect(await countedPlays(db, key)).toBe(1);
  });

  test('the same play_id twice in one batch: the second is refused', async ({ db, servers, newScreen }) => {
    const { source, screen, key } = await newScreen();
    const answer = answerOf(
      await postCms(
        servers,
        source,
        cmsBody(source, 0, [
          cmsPlay(screen, 1, { play_id: 'twice' }),
          cmsPlay(screen, 2, { play_id: 'once' }),
          cmsPlay(screen, 3, { play_id: 'twice' }),
        ]),
      ),
    );
    expect(answer.items).toEqual(refused([2]));
    expect(await countedPlays(db, key)).toBe(2);
  });

  test('in one batch as across batches: a play sent again is refused, a later play under a used play_id counts', async ({
    db,
    servers,
    newScreen,
  }) => {
    const { source, screen, key } = await newScreen();
    const at = (minutesAgo: number) => new Date(T0.getTime() - minutesAgo * 60_000);
    const answer = answerOf(
      await postCms(
        servers,
        source,
        cmsBody(source, 0, [
          cmsPlay(screen, 1, { play_id: 'x' }, at(50)),
          cmsPlay(screen, 2, { play_id: 'y' }, at(40)),
          // The first play again (its start is before the player's newest in this batch): looked for and refused.
          cmsPlay(screen, 3, { play_id: 'x' }, at(50)),
          // Seventy minutes earlier, in another hour: looked for in the hours beside its own; 'y' is not there.
          cmsPlay(screen, 4, { play_id: 'y' }, at(120)),
          // After every play so far: a new play that reuses an identifier.
          cmsPlay(screen, 5, { play_id: 'x' }, at(10)),
        ]),
      ),
    );
    expect(answer.items).toEqual(refused([2]));
    expect(await countedPlays(db, key)).toBe(4);
  });

  test('the agent channel too; a play refused for another reason does not hold its play_id', async ({
    db,
    servers,
    device,
    tick,
  }) => {
    const key = `device:${device.id}`;
    const first = agentBody(device, 0, [
      play(1, { play_id: 'agent-a' }),
      // too_short: not counted, so its play_id stays free.
      play(2, { play_id: 'agent-b', duration_ms: 400 }),
    ]);
    expect(answerOf(await postTelemetry(servers, device, first)).accepted).toBe(1);
    const second = agentBody(device, 1, [play(3, { play_id: 'agent-a' }), play(4, { play_id: 'agent-b' })], {
      ts: tick(11_000),
    });
    const answer = answerOf(await postTelemetry(servers, device, second));
    expect(answer.items).toEqual(refused([0]));
    expect(answer.accepted).toBe(1);
    expect(await countedPlays(db, key)).toBe(2);
  });

  test("one player's play_id is no other player's", async ({ db, servers, newScreen }) => {
    const a = await newScreen();
    const b = await newScreen();
    for (const { source, screen } of [a, b]) {
      const answer = answerOf(
        await postCms(servers, source, cmsBody(source, 0, [cmsPlay(screen, 1, { play_id: 'shared-id' })])),
      );
      expect(answer.accepted).toBe(1);
    }
    expect(await countedPlays(db, a.key)).toBe(1);
    expect(await countedPlays(db, b.key)).toBe(1);
  });

  test('two instances storing the same play under two numbers at once count it once', async ({
    world,
    db,
    servers,
    newScreen,
  }) => {
    for (let round = 0; round < 6; round += 1) {
      const { source, screen, key } = await newScreen();
      const [x, y] = await Promise.all([
        postCms(servers, source, cmsBody(source, 0, [cmsPlay(screen, 10, { play_id: 'raced' })])),
        postCms(
          world.instances[1]!.servers,
          source,
          cmsBody(source, 1, [cmsPlay(screen, 11, { play_id: 'raced' })]),
        ),
      ]);
      const answers = [answerOf(x), answerOf(y)];
      expect(answers.reduce((sum, a) => sum + a.accepted, 0)).toBe(1);
      // The other is refused (it came second with the higher number) or a duplicate (with the lower one).
      expect(answers.flatMap((a) => a.items.map((i) => i.reason ?? i.status))).toEqual([
        expect.stringMatching(/^(play_id_counted|duplicate)$/),
      ]);
      expect(await countedPlays(db, key)).toBe(1);
    }
  });

  test('a later play under a play_id used before is counted: only a play sent again is refused', async ({
    db,
    servers,
    newScreen,
    tick,
  }) => {
    const { source, screen, key } = await newScreen();
    const first = new Date(T0.getTime() - 600_000);
    expect(
      answerOf(
        await postCms(
          servers,
          source,
          cmsBody(source, 0, [cmsPlay(screen, 1, { play_id: 'reused' }, first)]),
        ),
      ).accepted,
    ).toBe(1);
    // The same identifier on a play that starts after every play counted for the player: a new play (the sender
    // reused an identifier), not the old one sent again. docs/decisions.md "A play is counted once per play_id".
    tick();
    const answer = answerOf(
      await postCms(servers, source, cmsBody(source, 1, [cmsPlay(screen, 2, { play_id: 'reused' }, T0)])),
    );
    expect(answer.accepted).toBe(1);
    expect(await countedPlays(db, key)).toBe(2);
  });
});

describe('migration 065 on a database that already counted plays', () => {
  test('plays counted before the upgrade are found after it, and each player has its newest start', async () => {
    const t = await createTestDatabase({ upTo: 64 });
    try {
      const db = t.db;
      const player = 'cms:00000000-0000-4000-8000-000000000001:screen-1';
      await db.query('SELECT pop_records_partition($1::date)', ['2026-11-20']);
      await db.query(`INSERT INTO pop_players (player_key, high_water_seq, previous_seq) VALUES ($1, 3, 0)`, [
        player,
      ]);
      for (const [index, id, start] of [
        [0, 'old-1', '2026-11-20T05:10:00Z'],
        [1, 'old-2', '2026-11-20T05:50:00Z'],
        [2, 'old-3', '2026-11-20T06:20:00Z'],
      ] as const) {
        await db.query(
          `INSERT INTO pop_records (receive_day, batch_id, record_index, player_key, structure_id, kind, seq, day,
                                   start_at, attested, play_id)
           VALUES ('2026-11-20', 7, $1, $2, '00000000-0000-4000-8000-000000000002', 'play', $1 + 1, '2026-11-20',
                   $3, true, $4)`,
          [index, player, start, id],
        );
      }
      await migrate(db);
      const { rows } = await db.query<{ newest_play_start: Date }>(
        'SELECT newest_play_start FROM pop_players WHERE player_key = $1',
        [player],
      );
      expect(rows).toEqual([{ newest_play_start: new Date('2026-11-20T06:20:00Z') }]);
      const sets = await db.query<{ start_hour: number; n: number }>(
        'SELECT start_hour, cardinality(play_keys) AS n FROM pop_play_sets ORDER BY start_hour',
      );
      expect(sets.rows).toEqual([
        { start_hour: startHourOf(Date.parse('2026-11-20T05:00:00Z')), n: 2 },
        { start_hour: startHourOf(Date.parse('2026-11-20T06:00:00Z')), n: 1 },
      ]);
      const found = await findCountedPlays(db, {
        playerKeys: [player, player, player],
        hours: [
          startHourOf(Date.parse('2026-11-20T05:50:00Z')),
          startHourOf(Date.parse('2026-11-20T06:20:00Z')),
          startHourOf(Date.parse('2026-11-20T06:20:00Z')),
        ],
        playIds: ['old-2', 'old-3', 'never'],
      });
      expect(found).toEqual(new Map([[player, new Set(['old-2', 'old-3'])]]));
    } finally {
      await t.drop();
    }
  });
});
