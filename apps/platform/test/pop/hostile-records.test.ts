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

  test('a detail that is too large, a screen too deep, a text that is not Unicode', async ({
    servers,
    platform,
    device,
  }) => {
    const body = agentBody(device, 0, [
      reject(1, { note: 'x'.repeat(20_000) }),
      play(2, { screen: { power: 'on', extra: nestedArrays(40) } }),
      // JSON.stringify writes a lone surrogate as the escape \udc00, which PostgreSQL's json refuses.
      reject(3, { file: 'clip-\udc00.mp4' }),
      play(4, { detail: { src: { channel: 'pmp', seller_id: 'ssp-1' }, note: '\ud800' } }),
      // A NUL is kept: detail is stored as json text, where it stays escaped.
      reject(5, { file: 'a\u0000b.mp4' }),
      play(6),
    ]);
    const answer = answerOf(await postTelemetry(servers, device, body));
    expect(refusedItems(answer.items)).toEqual([
      { index: 0, status: 'refused', reason: 'invalid_record' },
      { index: 1, status: 'refused', reason: 'invalid_record' },
      { index: 2, status: 'refused', reason: 'invalid_record' },
      { index: 3, status: 'refused', reason: 'invalid_record' },
    ]);
    expect(answer).toMatchObject({ received: 6, accepted: 2, refused: 4 });
    // The kept reject reads back through the console, NUL and all.
    const events = await apiCall(
      servers.api,
      platform.adminKey,
      'GET',
      `/api/v1/console/pop/devices/${device.id}/events`,
    );
    expect(events.statusCode, events.body).toBe(200);
    expect(events.json<{ items: { detail: unknown }[] }>().items).toEqual([
      expect.objectContaining({ detail: { file: 'a\u0000b.mp4' } }),
    ]);
  });

  test('the CMS channel: a play whose detail nests deep is refused, the others count', async ({
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
    expect(refusedItems(answer.items)).toEqual([{ index: 1, status: 'refused', reason: 'invalid_record' }]);
    expect(answer.accepted).toBe(2);
  });
});
