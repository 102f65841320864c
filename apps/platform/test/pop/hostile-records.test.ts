import { describe, expect } from 'vitest';
import { apiCall } from '../support/platform.js';
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
import { popWorld } from './world.js';

/*
 * Issue "Trust under attack", item 4: "A signed agent batch with a reject whose detail nests 100,000 arrays answers
 * 500 (RangeError in pop/judge.ts). The agent resends the same bytes until answered, so that device's queue stops for
 * good. Limit depth and size of free-form objects (detail, src, screen) and refuse such a record as invalid_record;
 * the rest of the batch counts."
 */

const test = popWorld();

/** Where a body holds DEEP, the text of `depth` nested arrays (JSON.stringify itself cannot write it). */
const DEEP = '__deep__';
function withDeep(body: Buffer, depth: number): Buffer {
  return Buffer.from(body.toString('utf8').replace(`"${DEEP}"`, `${'['.repeat(depth)}${']'.repeat(depth)}`));
}
function nestedArrays(depth: number): unknown {
  let value: unknown = [];
  for (let i = 0; i < depth; i += 1) value = [value];
  return value;
}
const refusedItems = (items: { status: string }[]) => items.filter((i) => i.status === 'refused');

const reject = (seq: number, detail: unknown) => ({
  kind: 'reject',
  seq,
  at: new Date(T0.getTime() - 1000).toISOString(),
  code: 'BAD_SIGNATURE',
  detail,
});

describe('records whose free-form objects no one can store are refused; the rest of the batch counts', () => {
  test('a reject whose detail nests 100,000 arrays', async ({ db, servers, device }) => {
    const body = withDeep(agentBody(device, 0, [play(1), reject(2, { trace: DEEP }), play(3)]), 100_000);
    const answer = answerOf(await postTelemetry(servers, device, body));
    expect(answer).toMatchObject({ received: 3, accepted: 2, refused: 1, duplicate: false });
    expect(refusedItems(answer.items)).toEqual([{ index: 1, status: 'refused', reason: 'invalid_record' }]);
    expect(await countedPlays(db, `device:${device.id}`)).toBe(2);
    // The same bytes again: the stored answer, nothing counted twice.
    expect(answerOf(await postTelemetry(servers, device, body))).toMatchObject({
      duplicate: true,
      accepted: 2,
    });
  });

  test('a detail that is too large, a screen too deep, a text PostgreSQL could not give back', async ({
    db,
    servers,
    platform,
    device,
  }) => {
    const body = agentBody(device, 0, [
      reject(1, { note: 'x'.repeat(20_000) }),
      play(2, { screen: { power: 'on', extra: nestedArrays(40) } }),
      // JSON.stringify writes a lone surrogate as the escape \udc00, which PostgreSQL's json refuses.
      reject(3, { file: 'clip-\udc00.mp4' }),
      // A play's detail is not kept: its tag is read, the rest of it is no reason to refuse the play.
      play(4, { detail: { src: { channel: 'pmp', seller_id: 'ssp-1' }, note: '\ud800' } }),
      // json keeps U+0000 escaped, but no operator can read a field of it back (22P05).
      reject(5, { file: 'a\u0000b.mp4' }),
      play(6),
    ]);
    const answer = answerOf(await postTelemetry(servers, device, body));
    expect(refusedItems(answer.items)).toEqual([
      { index: 0, status: 'refused', reason: 'invalid_record' },
      { index: 1, status: 'refused', reason: 'invalid_record' },
      { index: 2, status: 'refused', reason: 'invalid_record' },
      { index: 4, status: 'refused', reason: 'invalid_record' },
    ]);
    expect(answer).toMatchObject({ received: 6, accepted: 2, refused: 4 });
    expect(await countedPlays(db, `device:${device.id}`)).toBe(2);
    const src = await db.query<{ src: unknown }>(
      `SELECT src FROM pop_records WHERE player_key = $1 AND seq = 4`,
      [`device:${device.id}`],
    );
    expect(src.rows).toEqual([{ src: { channel: 'pmp', seller_id: 'ssp-1' } }]);
    const events = await apiCall(
      servers.api,
      platform.adminKey,
      'GET',
      `/api/v1/console/pop/devices/${device.id}/events`,
    );
    expect(events.statusCode, events.body).toBe(200);
  });

  test('a mode_change whose detail holds U+0000 is refused alone: its batch is stored and its plays count', async ({
    db,
    servers,
    platform,
    device,
  }) => {
    const modeChange = (seq: number, detail: unknown) => ({
      kind: 'mode_change',
      seq,
      at: new Date(T0.getTime() - 1000).toISOString(),
      detail,
    });
    const body = agentBody(device, 0, [
      play(1),
      modeChange(2, { from: 'normal', to: 'offline', note: 'x\u0000' }),
      modeChange(3, { from: 'offline', to: 'normal', ['reason\u0000']: 'key' }),
      reject(4, { file: 'b.mp4', reason: 'a\u0000' }),
      modeChange(5, { from: 'normal', to: 'disk_full', storage: { free_bytes: 1 } }),
      play(6),
    ]);
    const response = await postTelemetry(servers, device, body);
    expect(response.statusCode, response.body).toBe(200);
    const answer = answerOf(response);
    expect(refusedItems(answer.items)).toEqual([
      { index: 1, status: 'refused', reason: 'invalid_record' },
      { index: 2, status: 'refused', reason: 'invalid_record' },
      { index: 3, status: 'refused', reason: 'invalid_record' },
    ]);
    expect(answer).toMatchObject({ received: 6, accepted: 3, refused: 3 });
    expect(await countedPlays(db, `device:${device.id}`)).toBe(2);
    // What was kept reads back: the console's event list and the device's activity page.
    for (const url of [
      `/api/v1/console/pop/devices/${device.id}/events`,
      `/api/v1/console/devices/${device.id}/activity`,
    ]) {
      const read = await apiCall(servers.api, platform.adminKey, 'GET', url);
      expect(read.statusCode, `${url}: ${read.body}`).toBe(200);
    }
  });

  test('a play whose src tag is of another shape counts, its tag ignored (spec: "the play counts all the same")', async ({
    db,
    servers,
    device,
  }) => {
    const body = agentBody(device, 0, [
      play(1, { detail: { src: { channel: 'pmp', seller_id: 's'.repeat(20_000) } } }),
      play(2, { detail: { src: { channel: 'pmp', seller_id: 'ssp\u00001' } } }),
      play(3, { detail: { src: { channel: 'pmp', seller_id: 'ssp-\udc00' } } }),
      play(4, { detail: { src: { channel: 'pmp', seller_id: 'ssp-1', extra: nestedArrays(40) } } }),
    ]);
    const answer = answerOf(await postTelemetry(servers, device, body));
    expect(answer).toMatchObject({ received: 4, accepted: 4, refused: 0 });
    expect(await countedPlays(db, `device:${device.id}`)).toBe(4);
    const src = await db.query<{ src: unknown }>(`SELECT src FROM pop_records WHERE player_key = $1`, [
      `device:${device.id}`,
    ]);
    expect(src.rows.map((row) => row.src)).toEqual([null, null, null, null]);
  });

  test('the CMS channel: a play whose detail nests deep counts, its tag ignored', async ({
    servers,
    operator,
    platform,
  }) => {
    const source = await registerSource(platform, operator, { 'screen-9': operator.structures[1]! });
    const body = withDeep(
      cmsBody(source, 0, [
        cmsPlay('screen-9', 1),
        cmsPlay('screen-9', 2, { detail: { src: DEEP } }),
        cmsPlay('screen-9', 3),
      ]),
      50_000,
    );
    const answer = answerOf(await postCms(servers, source, body));
    expect(refusedItems(answer.items)).toEqual([]);
    expect(answer.accepted).toBe(3);
  });

  test('the CMS channel: a screen of any shape is ignored (spec: "Agent channel only"), the play counts', async ({
    servers,
    operator,
    platform,
  }) => {
    const source = await registerSource(platform, operator, { 'screen-8': operator.structures[1]! });
    const body = cmsBody(source, 0, [
      cmsPlay('screen-8', 1, { screen: { power: 'dimmed' } }),
      cmsPlay('screen-8', 2, { screen: 'on' }),
      cmsPlay('screen-8', 3, { screen: { power: 'on', extra: nestedArrays(40) } }),
      cmsPlay('screen-8', 4, { screen: { power: 'off' } }),
    ]);
    const answer = answerOf(await postCms(servers, source, body));
    expect(answer).toMatchObject({ received: 4, accepted: 4, refused: 0 });
    // Nothing a CMS says of a screen is kept or flags a play.
    expect(
      answer.items.filter((item) => (item as { flags?: string[] }).flags?.includes('screen_off')),
    ).toEqual([]);
  });
});
