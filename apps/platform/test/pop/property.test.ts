import fc from 'fast-check';
import { describe, expect } from 'vitest';
import type { Db } from '../../src/db/pool.js';
import {
  agentBody,
  answerOf,
  type Answer,
  cmsBody,
  cmsPlay,
  play,
  postCms,
  postTelemetry,
  T0,
  type TestDevice,
  type TestSource,
} from './helpers.js';
import { type PopWorld, popWorld } from './world.js';

/*
 * spec: "record numbers seq run on by one per player across batches; records at or below the highest number
 * already taken for their player are not counted again"; "a repeat of the same batch_seq with the same content is
 * answered duplicate true and counted once". Random interleavings of batches (duplicated, reordered, overlapping
 * seq ranges, some records refused) against a model of those rules.
 */

const test = popWorld({ instances: 2 });

/** Players: two devices (agent channel, each its own owner) and two screens of one CMS installation. */
const PLAYERS = ['d1', 'd2', 'cms:s1', 'cms:s2'] as const;
type PlayerName = (typeof PLAYERS)[number];

interface GenRecord {
  player: PlayerName;
  seq: number;
  /** false: refused by a rule (too short) — it still takes its number. */
  valid: boolean;
}
interface GenBatch {
  owner: string;
  records: GenRecord[];
}

const recordArb = (owner: string) =>
  fc.record({
    player:
      owner === 'cms' ? fc.constantFrom<PlayerName>('cms:s1', 'cms:s2') : fc.constant(owner as PlayerName),
    seq: fc.integer({ min: 1, max: 40 }),
    valid: fc.integer({ min: 0, max: 3 }).map((n) => n > 0),
  });

const batchArb = (owners: readonly string[]): fc.Arbitrary<GenBatch> =>
  fc.constantFrom(...owners).chain((owner) =>
    fc
      .tuple(
        fc.integer({ min: 1, max: 35 }),
        fc.integer({ min: 0, max: 12 }),
        fc.array(recordArb(owner), { maxLength: 4 }),
      )
      .map(([from, length, strays]) => {
        // A run of numbers (the usual case: overlapping ranges when batches are re-cut), plus a few strays.
        const run: GenRecord[] = Array.from({ length }, (_, i) => ({
          player: owner === 'cms' ? (i % 2 ? 'cms:s1' : 'cms:s2') : (owner as PlayerName),
          seq: from + i,
          valid: true,
        }));
        return { owner, records: [...run, ...strays] };
      }),
  );

/** Batches and the order of sends: every batch sent at least once, some again, in any order. */
const scenarioArb = (owners: readonly string[]) =>
  fc.array(batchArb(owners), { minLength: 1, maxLength: 8 }).chain((batches) =>
    fc
      .shuffledSubarray([...batches.keys(), ...batches.keys(), ...batches.keys()], {
        minLength: batches.length,
      })
      .map((sends) => {
        // Make sure each batch is sent at least once.
        const order = [...sends];
        for (const index of batches.keys()) if (!order.includes(index)) order.push(index);
        return { batches, order };
      }),
  );

interface Fleet {
  devices: Record<'d1' | 'd2', TestDevice>;
  source: TestSource;
}

async function newFleet(world: PopWorld): Promise<Fleet> {
  const [s0, s1] = world.operator.structures;
  return {
    devices: { d1: await world.newDevice(s0), d2: await world.newDevice(s0) },
    source: await world.newSource({ s1: s0!, s2: s1! }),
  };
}

function playerKey(fleet: Fleet, player: PlayerName): string {
  if (player === 'd1' || player === 'd2') return `device:${fleet.devices[player].id}`;
  return `cms:${fleet.source.id}:${player.slice(4)}`;
}

let clockStep = 0;
/** A fresh instant for every send: ten seconds apart (the agent's one batch every 10 s), never repeating. */
function nextInstant(): Date {
  clockStep += 1;
  return new Date(T0.getTime() + clockStep * 10_000);
}

function recordJson(record: GenRecord): Record<string, unknown> {
  const fields = record.valid ? {} : { duration_ms: 500 };
  return record.player.startsWith('cms:')
    ? cmsPlay(record.player.slice(4), record.seq, fields, T0)
    : play(record.seq, fields, T0);
}

/** Sends one batch; its bytes are made at its first send (ts fresh then) and resent as they are. */
function makeSender(world: PopWorld, fleet: Fleet, batches: GenBatch[]) {
  const bodies = new Map<number, Buffer>();
  const batchSeqs = new Map<number, number>();
  const nextSeq = new Map<string, number>();
  for (const [index, batch] of batches.entries()) {
    const seq = nextSeq.get(batch.owner) ?? 0;
    batchSeqs.set(index, seq);
    nextSeq.set(batch.owner, seq + 1);
  }
  return async (index: number, instance: number, now: Date): Promise<Answer> => {
    const batch = batches[index]!;
    const servers = world.instances[instance]!.servers;
    let body = bodies.get(index);
    const batchSeq = batchSeqs.get(index)!;
    if (batch.owner === 'cms') {
      body ??= cmsBody(fleet.source, batchSeq, batch.records.map(recordJson));
      bodies.set(index, body);
      return answerOf(await postCms(servers, fleet.source, body, { gzip: index % 2 === 0 }));
    }
    const device = fleet.devices[batch.owner as 'd1' | 'd2'];
    body ??= agentBody(device, batchSeq, batch.records.map(recordJson), { ts: now });
    bodies.set(index, body);
    return answerOf(await postTelemetry(servers, device, body));
  };
}

async function countedByPlayer(db: Db, fleet: Fleet): Promise<Map<string, number>> {
  const keys = PLAYERS.map((p) => playerKey(fleet, p));
  const { rows } = await db.query<{ player_key: string; plays: string }>(
    'SELECT player_key, sum(plays)::text AS plays FROM play_counts WHERE player_key = ANY($1) GROUP BY player_key',
    [keys],
  );
  return new Map(rows.map((r) => [r.player_key, Number(r.plays)]));
}

describe('counting under random interleavings', () => {
  test('sent one after the other: counted = distinct (player, seq) plays that passed the rules, as the model says', async ({
    world,
    db,
    setNow,
  }) => {
    await fc.assert(
      fc.asyncProperty(scenarioArb(['d1', 'd2', 'cms']), async ({ batches, order }) => {
        const fleet = await newFleet(world);
        const send = makeSender(world, fleet, batches);
        // The model: high-water marks per player, batches taken once.
        const marks = new Map<PlayerName, number>();
        const taken = new Set<number>();
        const counted = new Set<string>();
        for (const [k, index] of order.entries()) {
          const now = nextInstant();
          setNow(now);
          const answer = await send(index, k % 2, now);
          const repeat = taken.has(index);
          expect(answer.duplicate).toBe(repeat);
          if (repeat) continue;
          taken.add(index);
          let accepted = 0;
          for (const record of batches[index]!.records) {
            if (record.seq <= (marks.get(record.player) ?? 0)) continue;
            marks.set(record.player, record.seq);
            if (record.valid) {
              counted.add(`${record.player}#${record.seq}`);
              accepted += 1;
            }
          }
          expect(answer.accepted).toBe(accepted);
        }
        const byPlayer = await countedByPlayer(db, fleet);
        for (const player of PLAYERS) {
          const expected = [...counted].filter((k) => k.startsWith(`${player}#`)).length;
          expect(byPlayer.get(playerKey(fleet, player)) ?? 0).toBe(expected);
        }
      }),
      { numRuns: 30 },
    );
  });

  // Concurrent sends of one device would meet its rate limit (a burst of 3); the CMS installation's burst of 10
  // holds a whole scenario, so the races are among CMS batches.
  test('sent concurrently on two instances: counted = accepted in the answers, no (player, seq) twice', async ({
    world,
    db,
    setNow,
  }) => {
    await fc.assert(
      fc.asyncProperty(scenarioArb(['cms']), async ({ batches, order }) => {
        const fleet = await newFleet(world);
        const send = makeSender(world, fleet, batches);
        // Every batch once first (concurrently), then the repeats (concurrently): bodies are made at first send.
        const firsts = [...new Set(order)];
        const repeats = order.filter((index, k) => order.indexOf(index) !== k);
        const now = nextInstant();
        clockStep += 3;
        setNow(now);
        const first = await Promise.all(firsts.map((index, k) => send(index, k % 2, now)));
        const again = await Promise.all(repeats.map((index, k) => send(index, k % 2, now)));
        expect(first.filter((x) => !x.duplicate)).toHaveLength(firsts.length);
        expect(again.every((x) => x.duplicate)).toBe(true);
        const acceptedPlays = first.reduce((sum, x) => sum + x.accepted, 0);
        const byPlayer = await countedByPlayer(db, fleet);
        const total = [...byPlayer.values()].reduce((sum, n) => sum + n, 0);
        expect(total).toBe(acceptedPlays);
        const { rows } = await db.query(
          `SELECT player_key, seq FROM pop_records WHERE player_key = ANY($1)
            GROUP BY player_key, seq HAVING count(*) > 1`,
          [PLAYERS.map((p) => playerKey(fleet, p))],
        );
        expect(rows).toEqual([]);
        // The distinct valid numbers bound the count from above (a number is counted at most once, and only for a
        // valid record; which copy of an overlapped number comes first depends on the interleaving).
        for (const player of PLAYERS) {
          const valid = new Set(
            batches
              .flatMap((b) => b.records)
              .filter((r) => r.player === player && r.valid)
              .map((r) => r.seq),
          );
          expect(byPlayer.get(playerKey(fleet, player)) ?? 0).toBeLessThanOrEqual(valid.size);
        }
      }),
      { numRuns: 20 },
    );
  });
});
