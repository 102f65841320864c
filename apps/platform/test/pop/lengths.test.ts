import { describe, expect } from 'vitest';
import {
  agentBody,
  answerOf,
  cmsBody,
  cmsPlay,
  countedPlays,
  play,
  postCms,
  postTelemetry,
  registerSource,
  T0,
} from './helpers.js';
import { APPROVAL, popWorld } from './world.js';

/*
 * Issue "The spec to the letter, second pass": item 2, "A play counts from 1000 ms however its length is given";
 * item 5, "screen is agent-channel only".
 */

const test = popWorld({ approvals: [{ number: APPROVAL }] });

/** A play of `intervalMs` between start and end, ending a minute before T0, with or without duration_ms. */
function timed(seq: number, intervalMs: number, durationMs?: number) {
  const end = new Date(T0.getTime() - 60_000);
  const { duration_ms: _, ...rest } = play(seq, {}, end);
  return {
    ...rest,
    start: new Date(end.getTime() - intervalMs).toISOString(),
    ...(durationMs === undefined ? {} : { duration_ms: durationMs }),
  };
}

describe('a play counts from 1000 ms, however its length is given', () => {
  test('without duration_ms, end - start decides: 500 ms apart is too_short, 1000 ms counts', async ({
    db,
    servers,
    device,
  }) => {
    const answer = answerOf(
      await postTelemetry(
        servers,
        device,
        agentBody(device, 0, [timed(1, 500), timed(2, 999), timed(3, 1000)]),
      ),
    );
    expect(answer.items).toEqual([
      { index: 0, status: 'refused', reason: 'too_short' },
      { index: 1, status: 'refused', reason: 'too_short' },
    ]);
    expect(await countedPlays(db, `device:${device.id}`)).toBe(1);
  });

  test('with both, duration_ms (the time on screen) decides; far apart, the play is flagged timing_mismatch', async ({
    servers,
    device,
  }) => {
    const answer = answerOf(
      await postTelemetry(
        servers,
        device,
        agentBody(device, 0, [
          timed(1, 15_000, 15_000), // agree
          timed(2, 15_900, 15_000), // 900 ms apart: within a second
          timed(3, 500, 15_000), // counted on duration_ms, flagged
          timed(4, 15_000, 800), // too_short on duration_ms
          timed(5, 600_000, 590_000), // 10 s apart: more than 1 % of ten minutes, flagged
          timed(6, 600_000, 596_000), // 4 s apart, within 1 % of ten minutes
        ]),
      ),
    );
    expect(answer.items).toEqual([
      { index: 2, status: 'flagged', flags: ['timing_mismatch'] },
      { index: 3, status: 'refused', reason: 'too_short' },
      { index: 4, status: 'flagged', flags: ['timing_mismatch'] },
    ]);
    expect(answer.accepted).toBe(5);
  });

  test('end before start is end_before_start, not too_short', async ({ servers, device }) => {
    const answer = answerOf(await postTelemetry(servers, device, agentBody(device, 0, [timed(1, -2000)])));
    expect(answer.items).toEqual([{ index: 0, status: 'refused', reason: 'end_before_start' }]);
  });
});

describe('screen is agent-channel only', () => {
  test("a CMS record's screen is not the screen's: no screen_off flag, nothing kept of it", async ({
    db,
    servers,
    operator,
    platform,
  }) => {
    const source = await registerSource(platform, operator, { 'screen-1': operator.structures[1]! });
    const answer = answerOf(
      await postCms(
        servers,
        source,
        cmsBody(source, 0, [cmsPlay('screen-1', 1, { screen: { power: 'off' } }), cmsPlay('screen-1', 2)]),
      ),
    );
    expect(answer).toMatchObject({ accepted: 2, flagged: 0, items: [] });
    const { rows } = await db.query<{ screen_power: string | null }>(
      'SELECT screen_power FROM pop_records WHERE player_key = $1',
      [`cms:${source.id}:screen-1`],
    );
    expect(rows).toEqual([{ screen_power: null }, { screen_power: null }]);
  });

  test('an agent play with the screen off is still flagged screen_off', async ({ servers, device }) => {
    const answer = answerOf(
      await postTelemetry(servers, device, agentBody(device, 0, [play(1, { screen: { power: 'off' } })])),
    );
    expect(answer.items).toEqual([{ index: 0, status: 'flagged', flags: ['screen_off'] }]);
  });
});
