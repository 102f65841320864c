import { generateEs256KeyPair } from '@ooh/crypto';
import { describe, expect } from 'vitest';
import { popEvents } from '../../src/pop/index.js';
import { apiCall } from '../support/platform.js';
import {
  agentBody,
  answerOf,
  batchCount,
  countedPlays,
  insertApproval,
  MEDIA,
  OTHER_MEDIA,
  play,
  postTelemetry,
  problemOf,
  rotateDeviceKey,
  sendBatch,
  sha256,
  sign,
  T0,
} from './helpers.js';
import { APPROVAL, popWorld } from './world.js';

const test = popWorld({ approvals: [{ number: APPROVAL, structures: [0] }] });
const owner = (device: { id: string }) => `device:${device.id}`;

describe('POST /s/v1/telemetry stores the body as received and answers', () => {
  test('a clean batch: counted, body kept byte for byte with its answer, Date header from the platform clock', async ({
    db,
    servers,
    device,
  }) => {
    // Unusual but valid JSON spacing: the stored bytes must be these, not a re-serialisation.
    const json = agentBody(device, 0, [play(1), play(2)])
      .toString('utf8')
      .replace('{', '{ ');
    const body = Buffer.from(json, 'utf8');
    const res = await postTelemetry(servers, device, body);
    const answer = answerOf(res);
    expect(answer).toEqual({
      batch_seq: 0,
      received: 2,
      accepted: 2,
      duplicates: 0,
      refused: 0,
      flagged: 0,
      duplicate: false,
      items: [],
    });
    expect(res.headers['date']).toBe(T0.toUTCString());
    const { rows } = await db.query(
      `SELECT owner, batch_seq, channel, body, body_sha256, received_at, receive_day::text AS receive_day,
              record_count, answer FROM pop_batches WHERE owner = $1`,
      [owner(device)],
    );
    expect(rows).toHaveLength(1);
    expect(Buffer.compare(rows[0].body, body)).toBe(0);
    expect(rows[0]).toMatchObject({
      batch_seq: 0,
      channel: 'agent',
      body_sha256: sha256(body),
      receive_day: '2026-11-20',
      record_count: 2,
      answer,
    });
    expect(rows[0].received_at.toISOString()).toBe(T0.toISOString());
    expect(await countedPlays(db, owner(device))).toBe(2);
  });

  test('the same batch again: the stored answer with duplicate true, counted once', async ({
    db,
    servers,
    device,
  }) => {
    const body = agentBody(device, 5, [play(1), play(1)]);
    const first = answerOf(await postTelemetry(servers, device, body));
    expect(first.items).toEqual([{ index: 1, status: 'duplicate' }]);
    const again = answerOf(await postTelemetry(servers, device, body));
    expect(again).toEqual({ ...first, duplicate: true });
    expect(await countedPlays(db, owner(device))).toBe(1);
    expect(await batchCount(db, owner(device))).toBe(1);
  });

  test('the same batch_seq with other content: 409 batch_conflict, nothing stored', async ({
    db,
    servers,
    device,
  }) => {
    answerOf(await sendBatch(servers, device, 1, [play(1)]));
    problemOf(await sendBatch(servers, device, 1, [play(2)]), 409, 'batch_conflict');
    expect(await countedPlays(db, owner(device))).toBe(1);
  });

  test('a duplicate is answered even when its ts is now stale (idempotency before freshness)', async ({
    servers,
    device,
    setNow,
  }) => {
    const body = agentBody(device, 0, [play(1)]);
    answerOf(await postTelemetry(servers, device, body));
    setNow(new Date(T0.getTime() + 3600_000));
    expect(answerOf(await postTelemetry(servers, device, body)).duplicate).toBe(true);
  });
});

describe('authentication', () => {
  test('401 bad_signature stores nothing: wrong key, tampered bytes, malformed or missing header', async ({
    db,
    servers,
    device,
  }) => {
    const body = agentBody(device, 0, [play(1)]);
    const otherKey = generateEs256KeyPair().privateKey;
    problemOf(
      await postTelemetry(servers, device, body, { signature: sign(otherKey, body) }),
      401,
      'bad_signature',
    );
    const tampered = Buffer.from(body.toString('utf8').replace('"seq":1', '"seq":9'));
    problemOf(
      await postTelemetry(servers, device, tampered, { signature: sign(device.privateKey, body) }),
      401,
      'bad_signature',
    );
    problemOf(
      await postTelemetry(servers, device, body, { signature: 'not-a-signature!' }),
      401,
      'bad_signature',
    );
    problemOf(await postTelemetry(servers, device, body, { signature: 'AAAA' }), 401, 'bad_signature');
    problemOf(await postTelemetry(servers, device, body, { signature: null }), 401, 'bad_signature');
    expect(await batchCount(db, owner(device))).toBe(0);
    const { rows } = await db.query('SELECT 1 FROM pop_players WHERE player_key = $1', [owner(device)]);
    expect(rows).toHaveLength(0);
    // Nothing was taken: the same batch_seq with these bytes and a good signature is new.
    expect(answerOf(await postTelemetry(servers, device, body)).duplicate).toBe(false);
  });

  test('401 device_unauthorized for an unknown device and, at once, for a revoked one', async ({
    db,
    servers,
    device,
  }) => {
    const stranger = { ...device, id: '00000000-0000-4000-8000-000000000001' };
    problemOf(await sendBatch(servers, stranger, 0, [play(1)]), 401, 'device_unauthorized');
    answerOf(await sendBatch(servers, device, 0, [play(1)]));
    await db.query('UPDATE devices SET revoked_at = $2 WHERE id = $1', [device.id, T0]);
    problemOf(await sendBatch(servers, device, 1, [play(2)]), 401, 'device_unauthorized');
  });

  test('a renewed device: the old key is accepted until accepted_until, then bad_signature', async ({
    db,
    servers,
    device,
    setNow,
  }) => {
    const renewed = await rotateDeviceKey(db, device, T0, new Date(T0.getTime() + 24 * 3600_000));
    answerOf(await sendBatch(servers, device, 0, [play(1)]));
    answerOf(await sendBatch(servers, renewed, 1, [play(2)]));
    const later = new Date(T0.getTime() + 25 * 3600_000);
    setNow(later);
    problemOf(await sendBatch(servers, device, 2, [play(3)], { ts: later }), 401, 'bad_signature');
    answerOf(await sendBatch(servers, renewed, 2, [play(3)], { ts: later }));
  });

  test('401 stale_request outside 300 s stores nothing; the same batch re-signed with a fresh ts is taken', async ({
    db,
    servers,
    device,
  }) => {
    problemOf(
      await sendBatch(servers, device, 0, [play(1)], { ts: new Date(T0.getTime() - 301_000) }),
      401,
      'stale_request',
    );
    problemOf(
      await sendBatch(servers, device, 0, [play(1)], { ts: new Date(T0.getTime() + 301_000) }),
      401,
      'stale_request',
    );
    expect(await batchCount(db, owner(device))).toBe(0);
    answerOf(await sendBatch(servers, device, 0, [play(1)], { ts: new Date(T0.getTime() - 300_000) }));
    expect(await countedPlays(db, owner(device))).toBe(1);
  });

  test('device_id and ts are required in the signed body: 422 validation_failed', async ({
    servers,
    device,
  }) => {
    const body = Buffer.from(JSON.stringify({ schema: 'service.pop/1', batch_seq: 0, events: [] }));
    const res = await postTelemetry(servers, device, body);
    problemOf(res, 422, 'validation_failed');
    const paths = res.json<{ errors: { path: string }[] }>().errors.map((e) => e.path);
    expect(paths).toEqual(expect.arrayContaining(['/device_id', '/ts']));
  });
});

describe('size, media type, JSON and schema', () => {
  test('over 1 MB: 413 body_too_large; over 1000 events: 413 batch_too_large', async ({
    servers,
    device,
  }) => {
    const big = agentBody(device, 0, [play(1, { detail: { pad: 'x'.repeat(1_000_000) } })]);
    problemOf(await postTelemetry(servers, device, big), 413, 'body_too_large');
    const many = agentBody(
      device,
      0,
      Array.from({ length: 1001 }, (_, i) => ({ kind: 'tamper', seq: i + 1 })),
    );
    expect(many.length).toBeLessThan(1_000_000);
    problemOf(await postTelemetry(servers, device, many), 413, 'batch_too_large');
    const exactly = agentBody(
      device,
      0,
      Array.from({ length: 1000 }, (_, i) => ({ kind: 'tamper', seq: i + 1 })),
    );
    expect(answerOf(await postTelemetry(servers, device, exactly)).accepted).toBe(1000);
  });

  test('415 for another media type or any Content-Encoding; 400 invalid_json; 400 schema_unknown', async ({
    db,
    servers,
    device,
  }) => {
    const body = agentBody(device, 0, [play(1)]);
    problemOf(
      await postTelemetry(servers, device, body, { headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
    problemOf(
      await postTelemetry(servers, device, body, { headers: { 'content-encoding': 'gzip' } }),
      415,
      'unsupported_media_type',
    );
    problemOf(await postTelemetry(servers, device, Buffer.from('{"schema":')), 400, 'invalid_json');
    problemOf(
      await postTelemetry(servers, device, agentBody(device, 0, [play(1)], { schema: 'service.pop/2' })),
      400,
      'schema_unknown',
    );
    expect(await batchCount(db, owner(device))).toBe(0);
  });

  test('legacy format (no schema) until a service.pop/1 batch was accepted, then 409 legacy_after_pop', async ({
    db,
    servers,
    device,
  }) => {
    const legacy = answerOf(await sendBatch(servers, device, 0, [play(1)], { schema: null }));
    expect(legacy.accepted).toBe(1);
    const { rows } = await db.query('SELECT channel FROM pop_batches WHERE owner = $1', [owner(device)]);
    expect(rows).toEqual([{ channel: 'legacy' }]);
    answerOf(await sendBatch(servers, device, 1, [play(2)]));
    problemOf(await sendBatch(servers, device, 2, [play(3)], { schema: null }), 409, 'legacy_after_pop');
    expect(await countedPlays(db, owner(device))).toBe(2);
  });
});

describe('records: seq, refusals, flags, events', () => {
  test('seq runs on across batches; at or below the high-water mark (also within the batch) is duplicate', async ({
    db,
    servers,
    device,
  }) => {
    answerOf(await sendBatch(servers, device, 0, [play(1), play(2), play(3)]));
    const second = answerOf(
      await sendBatch(servers, device, 1, [play(2), play(3), play(4), play(4), play(6), play(5)]),
    );
    expect(second).toMatchObject({ received: 6, accepted: 2, duplicates: 4, refused: 0 });
    expect(second.items).toEqual([
      { index: 0, status: 'duplicate' },
      { index: 1, status: 'duplicate' },
      { index: 3, status: 'duplicate' },
      { index: 5, status: 'duplicate' },
    ]);
    expect(await countedPlays(db, owner(device))).toBe(5);
    const { rows } = await db.query('SELECT high_water_seq FROM pop_players WHERE player_key = $1', [
      owner(device),
    ]);
    expect(rows[0].high_water_seq).toBe(6);
  });

  test('every refusal reason of the agent channel', async ({ db, servers, device }) => {
    const received = T0.getTime();
    const events = [
      play(1, { media_sha256: MEDIA.toUpperCase() }), // invalid_record
      { kind: 'dance', seq: 2 }, // invalid_record: not a kind of the vocabulary
      play(3, {}, new Date(received + 301_000 + 15_000)), // time_in_future (start and end)
      { kind: 'tamper', seq: 4, at: new Date(received + 301_000).toISOString() }, // time_in_future (at)
      play(5, {}, new Date(received - 91 * 24 * 3600_000)), // too_old
      play(6, { duration_ms: 999 }), // too_short
      play(7, {
        start: new Date(received - 1000).toISOString(),
        end: new Date(received - 5000).toISOString(),
      }), // end_before_start
      play(8, { approval_number: undefined }), // approval_missing
      play(9, {
        duration_ms: 1000,
        start: new Date(received + 300_000 - 1000).toISOString(),
        end: new Date(received + 300_000).toISOString(),
      }), // on the limits: taken
      play(5), // below the high-water mark
    ];
    const answer = answerOf(await sendBatch(servers, device, 0, events));
    expect(answer.items).toEqual([
      { index: 0, status: 'refused', reason: 'invalid_record' },
      { index: 1, status: 'refused', reason: 'invalid_record' },
      { index: 2, status: 'refused', reason: 'time_in_future' },
      { index: 3, status: 'refused', reason: 'time_in_future' },
      { index: 4, status: 'refused', reason: 'too_old' },
      { index: 5, status: 'refused', reason: 'too_short' },
      { index: 6, status: 'refused', reason: 'end_before_start' },
      { index: 7, status: 'refused', reason: 'approval_missing' },
      { index: 9, status: 'duplicate' },
    ]);
    expect(answer).toMatchObject({ received: 10, accepted: 1, refused: 8, duplicates: 1, flagged: 0 });
    expect(await countedPlays(db, owner(device))).toBe(1);
  });

  test('a number taken by a refused record is not counted when it comes again in a later batch', async ({
    db,
    servers,
    device,
  }) => {
    expect(answerOf(await sendBatch(servers, device, 0, [play(1, { duration_ms: 999 })])).refused).toBe(1);
    const again = answerOf(await sendBatch(servers, device, 1, [play(1), play(2)]));
    expect(again.items).toEqual([{ index: 0, status: 'duplicate' }]);
    expect(await countedPlays(db, owner(device))).toBe(1);
  });

  test('an approval number with U+0000 or a lone surrogate (no PostgreSQL text keeps it) is invalid_record; the batch is stored', async ({
    db,
    servers,
    device,
  }) => {
    const answer = answerOf(
      await sendBatch(servers, device, 0, [
        play(1, { approval_number: 'A-2026\u0000-000001' }),
        play(2),
        // A lone surrogate: PostgreSQL text would keep U+FFFD, a number the player never sent.
        play(3, { approval_number: 'A-2026-\ud800' }),
      ]),
    );
    expect(answer.items).toEqual([
      { index: 0, status: 'refused', reason: 'invalid_record' },
      { index: 2, status: 'refused', reason: 'invalid_record' },
    ]);
    expect(answer).toMatchObject({ accepted: 1, refused: 2 });
    expect(await countedPlays(db, owner(device))).toBe(1);
    expect(await batchCount(db, owner(device))).toBe(1);
  });
  test('every flag: accepted, counted, listed with its flags', async ({ db, servers, operator, device }) => {
    const s0 = operator.structures[0]!;
    await insertApproval(db, operator.id, {
      number: 'A-FLAG-OLD',
      validFrom: '2026-01-01',
      validUntil: '2026-01-31',
      structureIds: [s0.id],
    });
    await insertApproval(db, operator.id, {
      number: 'A-FLAG-ELSEWHERE',
      structureIds: [operator.structures[1]!.id],
    });
    await insertApproval(db, operator.id, {
      number: 'A-FLAG-REVOKED',
      structureIds: [s0.id],
      revokedAt: new Date(T0.getTime() - 3600_000),
    });
    await insertApproval(db, operator.id, {
      number: 'A-FLAG-LATE-REVOKE',
      structureIds: [s0.id],
      revokedAt: new Date(T0.getTime() - 30_000),
    });
    const events = [
      play(1, { structure: 'SOMEWHERE-ELSE' }),
      play(2, { approval_number: 'A-NOPE' }),
      play(3, { approval_number: 'A-FLAG-OLD' }),
      play(4, { approval_number: 'A-FLAG-ELSEWHERE' }),
      play(5, { approval_number: 'A-FLAG-REVOKED' }),
      play(6, { media_sha256: OTHER_MEDIA }),
      play(7, { screen: { power: 'off' } }),
      play(8, { duration_ms: undefined, start: undefined, end: undefined }),
      play(9, { structure: s0.code, screen: { power: 'on' } }),
      // Played before the revocation: not flagged.
      play(10, { approval_number: 'A-FLAG-LATE-REVOKE' }),
      // A start without an end, an end without a start: no length either.
      play(11, { duration_ms: undefined, end: undefined }),
      play(12, { duration_ms: undefined, start: undefined }),
    ];
    const answer = answerOf(await sendBatch(servers, device, 0, events));
    expect(answer.items).toEqual([
      { index: 0, status: 'flagged', flags: ['structure_mismatch'] },
      { index: 1, status: 'flagged', flags: ['approval_unknown'] },
      { index: 2, status: 'flagged', flags: ['approval_not_valid_on_day'] },
      { index: 3, status: 'flagged', flags: ['approval_not_for_structure'] },
      { index: 4, status: 'flagged', flags: ['approval_revoked'] },
      { index: 5, status: 'flagged', flags: ['media_mismatch'] },
      { index: 6, status: 'flagged', flags: ['screen_off'] },
      { index: 7, status: 'flagged', flags: ['timing_missing'] },
      { index: 10, status: 'flagged', flags: ['timing_missing'] },
      { index: 11, status: 'flagged', flags: ['timing_missing'] },
    ]);
    expect(answer).toMatchObject({ received: 12, accepted: 12, flagged: 10, refused: 0, duplicates: 0 });
    expect(await countedPlays(db, owner(device))).toBe(12);
    const { rows } = await db.query(
      'SELECT sum(flagged)::int AS flagged FROM play_counts WHERE player_key = $1',
      [owner(device)],
    );
    expect(rows[0].flagged).toBe(10);
  });

  test('reject, mode_change and tamper events are stored and queryable; screen.power kept', async ({
    db,
    servers,
    platform,
    device,
  }) => {
    const at = new Date(T0.getTime() - 120_000).toISOString();
    const events = [
      { kind: 'reject', seq: 1, at, code: 'HASH_MISMATCH', detail: { file: 'ad.mp4' } },
      { kind: 'mode_change', seq: 2, at, detail: { mode: 'offline' } },
      { kind: 'tamper', seq: 3, at, detail: { switch: 'open' } },
      play(4, { screen: { power: 'unknown' } }),
    ];
    const answer = answerOf(await sendBatch(servers, device, 0, events));
    expect(answer).toMatchObject({ accepted: 4, items: [] });
    const stored = await popEvents(db, owner(device));
    expect(stored.map((e) => [e.kind, e.seq, e.at, e.code, e.detail])).toEqual([
      ['reject', 1, at, 'HASH_MISMATCH', { file: 'ad.mp4' }],
      ['mode_change', 2, at, null, { mode: 'offline' }],
      ['tamper', 3, at, null, { switch: 'open' }],
    ]);
    expect((await popEvents(db, owner(device), { kinds: ['tamper'] })).map((e) => e.kind)).toEqual([
      'tamper',
    ]);
    const viaConsole = await apiCall(
      platform.servers.api,
      platform.adminKey,
      'GET',
      `/api/v1/console/pop/devices/${device.id}/events?kind=reject`,
    );
    expect(viaConsole.statusCode, viaConsole.body).toBe(200);
    expect(viaConsole.json()).toMatchObject({ items: [{ kind: 'reject', code: 'HASH_MISMATCH', seq: 1 }] });
    const { rows } = await db.query(
      "SELECT screen_power FROM pop_records WHERE player_key = $1 AND kind = 'play'",
      [owner(device)],
    );
    expect(rows).toEqual([{ screen_power: 'unknown' }]);
    // Only plays are counted.
    expect(await countedPlays(db, owner(device))).toBe(1);
  });

  test('src tags: a well-formed one is kept, a malformed one dropped silently and the play counts all the same', async ({
    db,
    servers,
    device,
  }) => {
    const good = { channel: 'programmatic', seller_id: 'ssp-1', deal_id: 'deal.7:x', imp_id: 'imp-9' };
    const events = [
      play(1, { detail: { src: good } }),
      play(2, { detail: { src: { ...good, channel: 'Programmatic' } } }),
      play(3, { detail: { src: { ...good, deal_id: 'x'.repeat(65) } } }),
      play(4, { detail: { src: { ...good, extra: 1 } } }),
      play(5, { detail: { src: 'programmatic' } }),
    ];
    const answer = answerOf(await sendBatch(servers, device, 0, events));
    expect(answer).toMatchObject({ accepted: 5, refused: 0, flagged: 0, items: [] });
    const { rows } = await db.query('SELECT seq, src FROM pop_records WHERE player_key = $1 ORDER BY seq', [
      owner(device),
    ]);
    expect(rows).toEqual([
      { seq: 1, src: good },
      { seq: 2, src: null },
      { seq: 3, src: null },
      { seq: 4, src: null },
      { seq: 5, src: null },
    ]);
  });

  test('slot plays are counted apart from billable plays, per day and approval', async ({
    db,
    servers,
    device,
  }) => {
    const events = [
      play(1),
      play(2, { approval_number: undefined, slot: 'gov' }),
      play(3, { approval_number: undefined, slot: 'emergency' }),
      play(4, { approval_number: undefined, slot: 'gov' }),
      // Started the Almaty day before (2026-11-20T00:00+05:00 is 2026-11-19T19:00Z).
      play(5, {}, new Date('2026-11-19T18:59:30.000Z')),
    ];
    answerOf(await sendBatch(servers, device, 0, events));
    const { rows } = await db.query(
      `SELECT day::text AS day, approval_number, slot, attested, plays::int AS plays FROM play_counts
        WHERE player_key = $1 ORDER BY day, approval_number NULLS LAST, slot`,
      [owner(device)],
    );
    expect(rows).toEqual([
      { day: '2026-11-19', approval_number: 'A-2026-000001', slot: null, attested: false, plays: 1 },
      { day: '2026-11-20', approval_number: 'A-2026-000001', slot: null, attested: false, plays: 1 },
      { day: '2026-11-20', approval_number: null, slot: 'emergency', attested: false, plays: 1 },
      { day: '2026-11-20', approval_number: null, slot: 'gov', attested: false, plays: 2 },
    ]);
    expect(await countedPlays(db, owner(device), { slot: false })).toBe(2);
    expect(await countedPlays(db, owner(device), { slot: true })).toBe(3);
  });
});

describe('rate limits', () => {
  test('burst of 3, then one batch every 10 s: 429 rate_limited with Retry-After; duplicates pass', async ({
    servers,
    device,
    setNow,
  }) => {
    const start = new Date(T0.getTime() + 7 * 24 * 3600_000);
    let now = start;
    setNow(now);
    for (let seq = 0; seq < 3; seq += 1)
      answerOf(await sendBatch(servers, device, seq, [play(seq + 1, {}, now)], { ts: now }));
    const limited = await sendBatch(servers, device, 3, [play(4, {}, now)], { ts: now });
    problemOf(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toBe('10');
    // A repeat of an answered batch is answered (idempotency comes before the rate limits).
    const repeat = agentBody(device, 0, [play(1, {}, now)], { ts: now });
    expect(answerOf(await postTelemetry(servers, device, repeat)).duplicate).toBe(true);
    now = new Date(start.getTime() + 6_000);
    setNow(now);
    expect(
      (await sendBatch(servers, device, 3, [play(4, {}, now)], { ts: now })).headers['retry-after'],
    ).toBe('4');
    now = new Date(start.getTime() + 10_000);
    setNow(now);
    answerOf(await sendBatch(servers, device, 3, [play(4, {}, now)], { ts: now }));
    problemOf(await sendBatch(servers, device, 4, [play(5, {}, now)], { ts: now }), 429, 'rate_limited');
    // Sustained: one every 10 s is always taken.
    for (let i = 0; i < 8; i += 1) {
      now = new Date(now.getTime() + 10_000);
      setNow(now);
      answerOf(await sendBatch(servers, device, 4 + i, [play(5 + i, {}, now)], { ts: now }));
    }
  });
});
