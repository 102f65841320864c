import { randomBytes } from 'node:crypto';
import { generateEs256KeyPair } from '@ooh/crypto';
import { gzipSync } from 'node:zlib';
import { describe, expect, vi } from 'vitest';
import { inflations } from '../../src/http/inflate.js';
import { type ExportLine, exportDayBatches } from '../../src/seals/index.js';
import { apiCall, createOrganisation } from '../support/platform.js';
import {
  answerOf,
  batchCount,
  cmsBody,
  cmsPlay,
  countedPlays,
  createOperator,
  insertApproval,
  mapPlayer,
  postCms,
  problemOf,
  registerSource,
  rotateSourceKey,
  sha256,
  sign,
  T0,
  type TestSource,
} from './helpers.js';
import { APPROVAL, popWorld } from './world.js';

/** `source` fixture: a CMS installation with screen-1 and screen-2 on the operator's two structures. */
const test = popWorld({ approvals: [{ number: APPROVAL }] });
const sourceOwner = (source: TestSource) => `source:${source.id}`;
const playerKey = (source: TestSource, external: string) => `cms:${source.id}:${external}`;

describe('POST /api/v1/pop/batches', () => {
  test('plain and gzip: kept byte for byte (gzip as it came), counted as attested plays on the mapped player', async ({
    db,
    servers,
    operator,
    source,
  }) => {
    const plain = cmsBody(source, 0, [cmsPlay('screen-1', 1), cmsPlay('screen-2', 1)]);
    const first = answerOf(await postCms(servers, source, plain));
    expect(first).toEqual({
      batch_seq: 0,
      received: 2,
      accepted: 2,
      duplicates: 0,
      refused: 0,
      flagged: 0,
      duplicate: false,
      items: [],
    });
    const zipped = cmsBody(source, 1, [cmsPlay('screen-1', 2), cmsPlay('screen-1', 3)]);
    const wire = gzipSync(zipped);
    const res = await postCms(servers, source, zipped, { gzip: true, wire });
    expect(answerOf(res).accepted).toBe(2);
    expect(res.headers['date']).toBe(T0.toUTCString());
    const { rows } = await db.query(
      `SELECT id, batch_seq, channel, body, body_encoding, body_size, body_sha256, record_count, receive_day::text AS day
         FROM pop_batches WHERE owner = $1 ORDER BY batch_seq`,
      [sourceOwner(source)],
    );
    expect(rows.map((r) => [r.batch_seq, r.channel, r.record_count])).toEqual([
      [0, 'cms', 2],
      [1, 'cms', 2],
    ]);
    // The plain body as it came; the gzip one as the very bytes of the wire, with the length they restore to.
    expect(rows[0]).toMatchObject({ body_encoding: 'identity', body_size: null });
    expect(Buffer.compare(rows[0].body, plain)).toBe(0);
    expect(rows[1]).toMatchObject({ body_encoding: 'gzip', body_size: zipped.length });
    expect(Buffer.compare(rows[1].body, wire)).toBe(0);
    expect(rows[1].body_sha256).toBe(sha256(zipped));
    // Every reader gets the decompressed bytes back exactly: the seal export is what auditors hash.
    const lines: ExportLine[] = [];
    for await (const chunk of exportDayBatches(db, rows[1].day)) {
      for (const line of chunk.split('\n').filter(Boolean)) lines.push(JSON.parse(line));
    }
    const exported = lines.filter((l) => l.owner === sourceOwner(source));
    expect(exported.map((l) => l.seq)).toEqual([0, 1]);
    expect(Buffer.compare(Buffer.from(exported[0]!.body, 'base64'), plain)).toBe(0);
    expect(Buffer.compare(Buffer.from(exported[1]!.body, 'base64'), zipped)).toBe(0);
    expect(exported[1]!.body_sha256).toBe(sha256(zipped));
    expect(await countedPlays(db, playerKey(source, 'screen-1'), { attested: true })).toBe(3);
    expect(await countedPlays(db, playerKey(source, 'screen-2'), { attested: true })).toBe(1);
    const { rows: counts } = await db.query(
      'SELECT DISTINCT structure_id FROM play_counts WHERE player_key = $1',
      [playerKey(source, 'screen-2')],
    );
    expect(counts).toEqual([{ structure_id: operator.structures[1]!.id }]);
  });

  test('a gzip body whose wire bytes are not smaller is kept decompressed', async ({
    db,
    servers,
    source,
  }) => {
    const body = cmsBody(source, 0, [cmsPlay('screen-1', 1)]);
    // Level 0: stored blocks, a few bytes longer than the body itself.
    const wire = gzipSync(body, { level: 0 });
    expect(wire.length).toBeGreaterThan(body.length);
    expect(answerOf(await postCms(servers, source, body, { gzip: true, wire })).accepted).toBe(1);
    const { rows } = await db.query(
      'SELECT body, body_encoding, body_size FROM pop_batches WHERE owner = $1',
      [sourceOwner(source)],
    );
    expect(rows[0]).toMatchObject({ body_encoding: 'identity', body_size: null });
    expect(Buffer.compare(rows[0].body, body)).toBe(0);
  });

  test('same bytes again (plain or gzip): duplicate true, counted once; other bytes: 409 batch_conflict', async ({
    db,
    servers,
    source,
  }) => {
    const body = cmsBody(source, 7, [cmsPlay('screen-1', 1)]);
    const first = answerOf(await postCms(servers, source, body, { gzip: true }));
    expect(answerOf(await postCms(servers, source, body))).toEqual({ ...first, duplicate: true });
    problemOf(
      await postCms(servers, source, cmsBody(source, 7, [cmsPlay('screen-1', 2)])),
      409,
      'batch_conflict',
    );
    expect(await countedPlays(db, playerKey(source, 'screen-1'))).toBe(1);
  });

  test('seq per player across batches; duplicates within a batch', async ({ db, servers, source }) => {
    answerOf(
      await postCms(servers, source, cmsBody(source, 0, [cmsPlay('screen-1', 1), cmsPlay('screen-1', 2)])),
    );
    const answer = answerOf(
      await postCms(
        servers,
        source,
        cmsBody(source, 1, [
          cmsPlay('screen-1', 2),
          cmsPlay('screen-2', 2),
          cmsPlay('screen-1', 3),
          cmsPlay('screen-2', 2),
        ]),
      ),
    );
    expect(answer.items).toEqual([
      { index: 0, status: 'duplicate' },
      { index: 3, status: 'duplicate' },
    ]);
    expect(await countedPlays(db, playerKey(source, 'screen-1'))).toBe(3);
    expect(await countedPlays(db, playerKey(source, 'screen-2'))).toBe(1);
  });

  test('records refused one by one: player_unknown (unmapped, removed, U+0000), kind_not_allowed, invalid_record', async ({
    servers,
    operator,
    platform,
    source,
  }) => {
    const removed = await apiCall(
      platform.servers.api,
      platform.adminKey,
      'DELETE',
      `/api/v1/console/cms-installations/${source.id}/players/screen-2`,
    );
    expect(removed.statusCode).toBe(204);
    const { player: _omitted, ...noPlayer } = cmsPlay('x', 9);
    const { duration_ms: _d, ...noDuration } = cmsPlay('screen-1', 4);
    const records = [
      cmsPlay('screen-1', 1),
      cmsPlay('nobody', 1),
      cmsPlay('screen-2', 1),
      { kind: 'tamper', seq: 2, player: 'screen-1' },
      noPlayer,
      noDuration,
      cmsPlay('screen-1', 5, { duration_ms: 500 }),
      cmsPlay('screen-1', 6, { end: new Date(T0.getTime() + 3600_000).toISOString() }),
      // Neither a player nor an approval number with U+0000 can be looked up or stored as text.
      cmsPlay('screen\u0000-1', 7, { play_id: 'nul-7' }),
      cmsPlay('screen-1', 8, { approval_number: 'A\u0000' }),
    ];
    const answer = answerOf(await postCms(servers, source, cmsBody(source, 0, records)));
    expect(answer.items).toEqual([
      { index: 1, status: 'refused', reason: 'player_unknown' },
      { index: 2, status: 'refused', reason: 'player_unknown' },
      { index: 3, status: 'refused', reason: 'kind_not_allowed' },
      { index: 4, status: 'refused', reason: 'invalid_record' },
      { index: 5, status: 'refused', reason: 'invalid_record' },
      { index: 6, status: 'refused', reason: 'too_short' },
      { index: 7, status: 'refused', reason: 'time_in_future' },
      { index: 8, status: 'refused', reason: 'player_unknown' },
      { index: 9, status: 'refused', reason: 'invalid_record' },
    ]);
    expect(answer).toMatchObject({ received: 10, accepted: 1, refused: 9 });
    // Mapped again: the player's own numbering goes on.
    await mapPlayer(platform, source, 'screen-2', operator.structures[1]!.id);
    expect(
      answerOf(await postCms(servers, source, cmsBody(source, 1, [cmsPlay('screen-2', 1)]))).accepted,
    ).toBe(1);
  });

  test('flags are the same as on the agent channel, except timing (start, end and duration are required)', async ({
    db,
    servers,
    source,
  }) => {
    const answer = answerOf(
      await postCms(
        servers,
        source,
        cmsBody(source, 0, [
          cmsPlay('screen-1', 1, { structure: 'NOT-HERE' }),
          cmsPlay('screen-1', 2, { approval_number: 'A-UNKNOWN' }),
          cmsPlay('screen-1', 3, { approval_number: undefined, slot: 'emergency' }),
        ]),
      ),
    );
    expect(answer.items).toEqual([
      { index: 0, status: 'flagged', flags: ['structure_mismatch'] },
      { index: 1, status: 'flagged', flags: ['approval_unknown'] },
    ]);
    expect(await countedPlays(db, playerKey(source, 'screen-1'), { slot: true })).toBe(1);
    expect(await countedPlays(db, playerKey(source, 'screen-1'), { slot: false })).toBe(2);
  });

  test('approval_not_for_structure is judged per player: one approval, players at a covered and another structure', async ({
    db,
    servers,
    operator,
    source,
  }) => {
    // Covers screen-1's structure only; the reading query asks only about the structures of the batch's players.
    await insertApproval(db, operator.id, {
      number: 'A-CMS-ONE',
      structureIds: [operator.structures[0]!.id],
    });
    const answer = answerOf(
      await postCms(
        servers,
        source,
        cmsBody(source, 0, [
          cmsPlay('screen-1', 1, { approval_number: 'A-CMS-ONE' }),
          cmsPlay('screen-2', 1, { approval_number: 'A-CMS-ONE' }),
          cmsPlay('screen-2', 2),
        ]),
      ),
    );
    expect(answer.items).toEqual([{ index: 1, status: 'flagged', flags: ['approval_not_for_structure'] }]);
    expect(answer).toMatchObject({ accepted: 3, flagged: 1 });
  });
});

describe('large batches (records written by COPY)', () => {
  test('escaping, flags, src and times read back as sent', async ({ db, servers, source }) => {
    const records = Array.from({ length: 400 }, (_, i) =>
      cmsPlay(i % 2 ? 'screen-1' : 'screen-2', Math.floor(i / 2) + 1),
    );
    const tricky = 'A\tB\\C\nD\r';
    records[0] = { ...records[0]!, approval_number: tricky };
    const src = { channel: 'rtb', seller_id: 'sel\\ler\t"x"\n', deal_id: 'd.1:x' };
    records[1] = { ...records[1]!, detail: { src, note: 'ignored on a play' } };
    // 06:00:00+05:00 is 01:00:00Z: stored as that instant.
    records[2] = {
      ...records[2]!,
      start: '2026-11-20T10:59:00+05:00',
      end: '2026-11-20T10:59:30.5+05:00',
      duration_ms: 30_500,
    };
    records[3] = { ...records[3]!, approval_number: 'А-кириллица-№1' };
    // Plain: 400 look-alike records compress beyond the ratio of 20.
    const answer = answerOf(await postCms(servers, source, cmsBody(source, 0, records)));
    expect(answer).toMatchObject({ received: 400, accepted: 400, flagged: 2 });
    expect(answer.items).toEqual([
      { index: 0, status: 'flagged', flags: ['approval_unknown'] },
      { index: 3, status: 'flagged', flags: ['approval_unknown'] },
    ]);
    const { rows } = await db.query(
      `SELECT record_index, approval_number, flags, src, start_at, end_at, attested FROM pop_records
        WHERE player_key IN ($1, $2) AND record_index < 4 ORDER BY record_index`,
      [playerKey(source, 'screen-1'), playerKey(source, 'screen-2')],
    );
    expect(rows.map((r) => r.approval_number)).toEqual([
      tricky,
      'A-2026-000001',
      'A-2026-000001',
      'А-кириллица-№1',
    ]);
    expect(rows[0].flags).toEqual(['approval_unknown']);
    expect(rows[1].src).toEqual(src);
    expect(rows[2].start_at.toISOString()).toBe('2026-11-20T05:59:00.000Z');
    expect(rows[2].end_at.toISOString()).toBe('2026-11-20T05:59:30.500Z');
    expect(rows.every((r) => r.attested === true)).toBe(true);
    const { rows: total } = await db.query(
      'SELECT count(*)::int AS n FROM pop_records WHERE player_key IN ($1, $2)',
      [playerKey(source, 'screen-1'), playerKey(source, 'screen-2')],
    );
    expect(total[0].n).toBe(400);
  });
});

describe('authentication of the CMS channel', () => {
  test("X-Service-Source must be given and equal source_id (422); the installation must be the caller organisation's (401 source_unknown)", async ({
    world,
    db,
    servers,
    platform,
    source,
  }) => {
    const body = cmsBody(source, 0, [cmsPlay('screen-1', 1)]);
    // The spec's source_unauthorized is the rotated-out key only (issue "The spec to the letter, second pass", 3).
    const missing = await postCms(servers, source, body, { sourceHeader: null });
    problemOf(missing, 422, 'validation_failed');
    expect(missing.json().errors).toEqual([
      expect.objectContaining({ path: 'headers:/x-service-source', code: 'required' }),
    ]);
    const malformed = await postCms(servers, source, body, { sourceHeader: 'nope' });
    expect(malformed.json().errors).toEqual([
      expect.objectContaining({ path: 'headers:/x-service-source', code: 'format' }),
    ]);
    const other = await world.newSource();
    const mismatch = await postCms(servers, source, body, { sourceHeader: other.id });
    problemOf(mismatch, 422, 'validation_failed');
    expect(mismatch.json().errors).toEqual([expect.objectContaining({ path: '/source_id' })]);
    const stranger = await createOperator(platform, 1);
    problemOf(await postCms(servers, source, body, { key: stranger.key }), 401, 'source_unknown');
    const unknown = { ...source, id: '00000000-0000-4000-8000-0000000000aa' };
    problemOf(await postCms(servers, unknown, cmsBody(unknown, 0, [])), 401, 'source_unknown');
    expect(await batchCount(db, sourceOwner(source))).toBe(0);
  });

  test('the order of checks: the API key before the body is read, then size, media type, JSON, schema, source, signature', async ({
    servers,
    source,
  }) => {
    const noKey = { key: 'ooh_not-a-real-key-at-all-000000' };
    // Without a valid key nothing about the body is looked at (docs/decisions.md, "The order of checks").
    for (const [body, headers] of [
      [Buffer.from('x'.repeat(4_000_001)), {}],
      [Buffer.from('{}'), { 'content-encoding': 'br' }],
      [Buffer.from('{'), {}],
      [cmsBody(source, 0, [], { schema: 'other/1' }), {}],
      [cmsBody(source, -1, []), {}],
      [cmsBody(source, 0, []), {}],
    ] as const) {
      problemOf(await postCms(servers, source, body, { ...noKey, headers }), 401, 'invalid_api_key');
    }
    // With one, the body's checks in DESIGN.md section 5's order.
    problemOf(await postCms(servers, source, Buffer.from('x'.repeat(4_000_001))), 413, 'body_too_large');
    problemOf(
      await postCms(servers, source, Buffer.from('{}'), { headers: { 'content-encoding': 'br' } }),
      415,
      'unsupported_media_type',
    );
    problemOf(await postCms(servers, source, Buffer.from('{')), 400, 'invalid_json');
    problemOf(
      await postCms(servers, source, cmsBody(source, 0, [], { schema: 'other/1' })),
      400,
      'schema_unknown',
    );
    problemOf(await postCms(servers, source, cmsBody(source, -1, [])), 422, 'validation_failed');
    // Then the source, then the signature.
    problemOf(
      await postCms(servers, source, cmsBody(source, 0, []), { sourceHeader: null, signature: null }),
      422,
      'validation_failed',
    );
    problemOf(
      await postCms(servers, source, cmsBody(source, 0, []), { signature: null }),
      401,
      'bad_signature',
    );
  });

  test('operator organisations with write:plays only; API key errors first', async ({
    servers,
    platform,
    source,
  }) => {
    const body = cmsBody(source, 0, [cmsPlay('screen-1', 1)]);
    const agency = await createOrganisation(platform, 'agency', ['write:plays']);
    problemOf(await postCms(servers, source, body, { key: agency.key }), 403, 'forbidden');
    const readOnly = await createOrganisation(platform, 'operator', ['read:creatives']);
    problemOf(await postCms(servers, source, body, { key: readOnly.key }), 403, 'key_scope_denied');
    problemOf(
      await postCms(servers, source, body, { key: 'ooh_not-a-real-key-at-all-000000' }),
      401,
      'invalid_api_key',
    );
  });

  test('401 bad_signature stores nothing: signed over the compressed bytes, wrong key, none', async ({
    db,
    servers,
    source,
  }) => {
    const body = cmsBody(source, 0, [cmsPlay('screen-1', 1)]);
    const wire = gzipSync(body);
    problemOf(
      await postCms(servers, source, body, { gzip: true, wire, signature: sign(source.privateKey, wire) }),
      401,
      'bad_signature',
    );
    problemOf(
      await postCms(servers, source, body, { signWith: generateEs256KeyPair().privateKey }),
      401,
      'bad_signature',
    );
    problemOf(await postCms(servers, source, body, { signature: null }), 401, 'bad_signature');
    expect(await batchCount(db, sourceOwner(source))).toBe(0);
    expect(answerOf(await postCms(servers, source, body, { gzip: true, wire })).accepted).toBe(1);
  });

  test('the key that verified a source last is tried first, on the thread pool, and trusted only if still accepted', async ({
    db,
    servers,
    platform,
    setNow,
  }) => {
    // An operator of its own: its calls spend none of the file's operator's key tokens.
    const operator = await createOperator(platform, 1);
    const source = await registerSource(platform, operator, { 'screen-1': operator.structures[0]! });
    // The first batch sets the guess (its key); each later body is hashed and checked against it while it is parsed.
    const first = cmsBody(source, 0, [cmsPlay('screen-1', 1)]);
    answerOf(await postCms(servers, source, first, { gzip: true }));
    const second = cmsBody(source, 1, [cmsPlay('screen-1', 2)]);
    // Signed by the guessed key over other bytes, or by another key: refused as before, nothing stored.
    problemOf(
      await postCms(servers, source, second, { signature: sign(source.privateKey, first) }),
      401,
      'bad_signature',
    );
    problemOf(
      await postCms(servers, source, second, { signWith: generateEs256KeyPair().privateKey }),
      401,
      'bad_signature',
    );
    expect(await batchCount(db, sourceOwner(source))).toBe(1);
    answerOf(await postCms(servers, source, second));
    // body_sha256 is the decompressed bytes' digest, whichever thread computed it.
    const { rows } = await db.query<{ batch_seq: number; body_sha256: string }>(
      'SELECT batch_seq, body_sha256 FROM pop_batches WHERE owner = $1 ORDER BY batch_seq',
      [sourceOwner(source)],
    );
    expect(rows).toEqual([
      { batch_seq: 0, body_sha256: sha256(first) },
      { batch_seq: 1, body_sha256: sha256(second) },
    ]);
    // The guessed key rotated out more than 24 hours ago: its signature verifies, but it is no longer accepted.
    const rotated = await rotateSourceKey(platform, source);
    const after = new Date(T0.getTime() + 24 * 3600_000);
    setNow(after);
    problemOf(
      await postCms(servers, source, cmsBody(source, 2, [cmsPlay('screen-1', 3, {}, after)])),
      401,
      'source_unauthorized',
    );
    answerOf(await postCms(servers, rotated, cmsBody(source, 2, [cmsPlay('screen-1', 3, {}, after)])));
  });

  test('key rotation: the old key is accepted for 24 hours, then 401 source_unauthorized', async ({
    servers,
    platform,
    source,
    setNow,
  }) => {
    const rotated = await rotateSourceKey(platform, source);
    answerOf(await postCms(servers, source, cmsBody(source, 0, [cmsPlay('screen-1', 1)])));
    answerOf(await postCms(servers, rotated, cmsBody(source, 1, [cmsPlay('screen-1', 2)])));
    const almost = new Date(T0.getTime() + 24 * 3600_000 - 1000);
    setNow(almost);
    answerOf(await postCms(servers, source, cmsBody(source, 2, [cmsPlay('screen-1', 3, {}, almost)])));
    const after = new Date(T0.getTime() + 24 * 3600_000);
    setNow(after);
    problemOf(
      await postCms(servers, source, cmsBody(source, 3, [cmsPlay('screen-1', 4, {}, after)])),
      401,
      'source_unauthorized',
    );
    answerOf(await postCms(servers, rotated, cmsBody(source, 3, [cmsPlay('screen-1', 4, {}, after)])));
  });
});

describe('sizes, encodings and counts', () => {
  test('415 for an encoding other than gzip or another media type; 400 for a broken gzip stream', async ({
    servers,
    source,
  }) => {
    const body = cmsBody(source, 0, [cmsPlay('screen-1', 1)]);
    for (const encoding of ['deflate', 'br', 'gzip, gzip', 'x-gzip']) {
      problemOf(
        await postCms(servers, source, body, { headers: { 'content-encoding': encoding } }),
        415,
        'unsupported_media_type',
      );
    }
    problemOf(
      await postCms(servers, source, body, { headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
    problemOf(
      await postCms(servers, source, body, { gzip: true, wire: gzipSync(body).subarray(0, 20) }),
      400,
      'invalid_json',
    );
    problemOf(await postCms(servers, source, Buffer.from('{"schema":')), 400, 'invalid_json');
    problemOf(
      await postCms(servers, source, cmsBody(source, 0, [], { schema: 'service.pop/0' })),
      400,
      'schema_unknown',
    );
  });

  test('4 MB on the wire, 16 MB inflated, ratio 20: 413 body_too_large without inflating the bomb', async ({
    db,
    servers,
    source,
  }) => {
    const pad = (bytes: number) => cmsBody(source, 0, [], { pad: 'x'.repeat(bytes) });
    // Plain bodies count on the wire: just under 4 MB is taken.
    problemOf(await postCms(servers, source, pad(4_000_001)), 413, 'body_too_large');
    expect(answerOf(await postCms(servers, source, pad(3_999_000))).received).toBe(0);
    // Incompressible-ish wire over 4 MB.
    const random = randomBytes(4_100_000);
    problemOf(await postCms(servers, source, pad(10), { gzip: true, wire: random }), 413, 'body_too_large');
    // Over 16 MB inflated although within the ratio: 16.5 MB of random a/b letters (1 bit each) compress to about 1/4.
    const letters = randomBytes(16_500_000);
    for (let i = 0; i < letters.length; i += 1) letters[i] = letters[i]! & 1 ? 0x61 : 0x62;
    const text = letters.toString('latin1');
    const sixteen = Buffer.from(
      JSON.stringify({ schema: 'service.pop/1', source_id: source.id, batch_seq: 0, records: [], pad: text }),
    );
    expect(sixteen.length).toBeGreaterThan(16_000_000);
    const sixteenWire = gzipSync(sixteen, { level: 1 });
    expect(sixteenWire.length * 20).toBeGreaterThan(16_000_000);
    expect(sixteenWire.length).toBeLessThan(4_000_000);
    problemOf(
      await postCms(servers, source, sixteen, { gzip: true, wire: sixteenWire }),
      413,
      'body_too_large',
    );
    // A bomb: 50 MB of zeros in about 50 KB of gzip; refused at 20 times the wire size.
    const bomb = gzipSync(Buffer.alloc(50_000_000), { level: 9 });
    const before = process.memoryUsage().rss;
    problemOf(await postCms(servers, source, pad(10), { gzip: true, wire: bomb }), 413, 'body_too_large');
    expect(process.memoryUsage().rss - before).toBeLessThan(200_000_000);
    // Ratio alone: 100 KB inflating to 2.5 MB (25 times).
    const ratio = gzipSync(pad(2_500_000));
    expect(2_500_000 / ratio.length).toBeGreaterThan(20);
    problemOf(
      await postCms(servers, source, pad(2_500_000), { gzip: true, wire: ratio }),
      413,
      'body_too_large',
    );
    expect(await batchCount(db, sourceOwner(source))).toBe(1);
  });

  test('at most 10 000 records: 10 001 is 413 batch_too_large, 10 000 are taken', async ({
    db,
    servers,
    source,
  }) => {
    // Plays of a busy day: every record its own times and play id, so gzip stays within the ratio of 20.
    const records = (n: number) =>
      Array.from({ length: n }, (_, i) =>
        cmsPlay(
          i % 2 ? 'screen-1' : 'screen-2',
          i + 1,
          { play_id: randomBytes(12).toString('base64url') },
          new Date(T0.getTime() - 60_000 - i * 7_919),
        ),
      );
    const tooMany = cmsBody(source, 0, records(10_001));
    problemOf(await postCms(servers, source, tooMany, { gzip: true }), 413, 'batch_too_large');
    const full = cmsBody(source, 0, records(10_000));
    expect(full.length / gzipSync(full).length).toBeLessThan(20);
    const answer = answerOf(await postCms(servers, source, full, { gzip: true }));
    expect(answer).toMatchObject({ received: 10_000, accepted: 10_000, items: [] });
    expect(await countedPlays(db, playerKey(source, 'screen-1'))).toBe(5_000);
  });

  test('inflations are bounded: with every slot and waiting place taken, a gzip batch is 503 and stores nothing', async ({
    db,
    servers,
    source,
  }) => {
    // Issue "Trust under attack", item 3: "bound how many inflations run at once". The route must go through the
    // process's slots: take them all (2 inflating, 8 waiting, by ten other callers holding one place each, so that
    // none holds enough to give one up) and the next gzip body is turned away at once.
    const body = cmsBody(source, 0, [cmsPlay('screen-1', 1)]);
    const held = [await inflations.acquire('caller-0'), await inflations.acquire('caller-1')];
    const queued = Array.from({ length: 8 }, (_, i) => inflations.acquire(`caller-${i + 2}`));
    try {
      const refused = await postCms(servers, source, body, { gzip: true });
      problemOf(refused, 503, 'service_unavailable');
      expect(refused.headers['retry-after']).toBe('1');
      expect(await batchCount(db, sourceOwner(source))).toBe(0);
      // A plain body inflates nothing and is not held up by the slots.
      const plain = cmsBody(source, 1, [cmsPlay('screen-2', 1)]);
      expect(answerOf(await postCms(servers, source, plain)).accepted).toBe(1);
    } finally {
      // Each release hands its slot to the next in line: free them in turn.
      for (const release of held) release();
      for (const waiting of queued) (await waiting)();
    }
    // The sender resends the same bytes once a slot is free: taken, nothing lost.
    expect(answerOf(await postCms(servers, source, body, { gzip: true })).accepted).toBe(1);
    expect(await batchCount(db, sourceOwner(source))).toBe(2);
  });

  test("one operator's flood of gzip batches takes the free inflation places, and gives one back (429) to another operator, who is served next", async ({
    db,
    servers,
    platform,
    setNow,
  }) => {
    // Fresh keys and a time of their own: the per-key token buckets of the other tests are not drawn on.
    setNow(new Date(T0.getTime() + 34 * 24 * 3600_000));
    const flooder = await createOperator(platform, 1);
    const flooderSource = await registerSource(platform, flooder);
    const other = await createOperator(platform, 1);
    const otherSource = await registerSource(platform, other);
    // Two of the flooder's batches inflating (held here so that they stay in the slots), then ten more at once
    // through the route: alone, it may take all eight waiting places; the last two get 503.
    const inflating = [await inflations.acquire(flooder.id), await inflations.acquire(flooder.id)];
    const settled: { seq: number; statusCode: number; body: string; retryAfter: unknown }[] = [];
    const flood = Array.from({ length: 10 }, (_, seq) =>
      postCms(servers, flooderSource, cmsBody(flooderSource, seq, []), { gzip: true }).then((res) => {
        settled.push({
          seq,
          statusCode: res.statusCode,
          body: res.body,
          retryAfter: res.headers['retry-after'],
        });
        return res;
      }),
    );
    let otherAnswer: Promise<Awaited<ReturnType<typeof postCms>>> | null = null;
    try {
      await vi.waitFor(() => expect(settled).toHaveLength(2), { timeout: 10_000, interval: 20 });
      for (const refused of settled) {
        expect(refused.statusCode, refused.body).toBe(503);
        expect(JSON.parse(refused.body)).toMatchObject({ code: 'service_unavailable' });
        expect(refused.retryAfter).toBe('1');
      }
      expect(inflations.placesOf(flooder.id)).toBe(10);
      // The other operator's gzip batch: the flooder's newest waiting batch is turned away, 429 rate_limited, and
      // the other takes its place; the next free slot is the other's (it inflates none, the flooder two).
      otherAnswer = postCms(servers, otherSource, cmsBody(otherSource, 0, []), { gzip: true });
      await vi.waitFor(() => expect(settled).toHaveLength(3), { timeout: 10_000, interval: 20 });
      const givenBack = settled[2]!;
      expect(givenBack.statusCode, givenBack.body).toBe(429);
      expect(JSON.parse(givenBack.body)).toMatchObject({ code: 'rate_limited' });
      expect(givenBack.retryAfter).toBe('1');
      expect(inflations.placesOf(other.id)).toBe(1);
      inflating[0]!();
      expect(answerOf(await otherAnswer)).toMatchObject({ batch_seq: 0, duplicate: false });
    } finally {
      for (const release of inflating) release();
      await Promise.all([...flood, ...(otherAnswer ? [otherAnswer] : [])]);
    }
    // The flooder's seven batches still waiting were taken once slots were free; the refused ones stored nothing.
    const served = (await Promise.all(flood)).filter((res) => res.statusCode === 200);
    expect(served).toHaveLength(7);
    expect(await batchCount(db, `source:${flooderSource.id}`)).toBe(7);
    expect(await batchCount(db, `source:${otherSource.id}`)).toBe(1);
    expect(inflations.placesOf(flooder.id)).toBe(0);
  });
});

describe('CMS rate limits', () => {
  test('2 batches a second per installation with a burst of 10', async ({ servers, source, setNow }) => {
    const at = new Date(T0.getTime() + 30 * 24 * 3600_000);
    setNow(at);
    for (let seq = 0; seq < 10; seq += 1) answerOf(await postCms(servers, source, cmsBody(source, seq, [])));
    const limited = await postCms(servers, source, cmsBody(source, 10, []));
    problemOf(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toBe('1');
    setNow(new Date(at.getTime() + 500));
    answerOf(await postCms(servers, source, cmsBody(source, 10, [])));
  });

  test('10 calls a second per key with a burst of 30, every call counted: repeats and refusals too', async ({
    servers,
    platform,
    setNow,
  }) => {
    const op = await createOperator(platform, 1);
    const source = await registerSource(platform, op, { 'screen-1': op.structures[0]! });
    const at = new Date(T0.getTime() + 33 * 24 * 3600_000);
    setNow(at);
    const body = cmsBody(source, 0, [cmsPlay('screen-1', 1, {}, new Date(at.getTime() - 60_000))]);
    answerOf(await postCms(servers, source, body));
    // The same stored batch again, 29 times: answered as a repeat while the key has tokens.
    for (let i = 0; i < 29; i += 1)
      expect(answerOf(await postCms(servers, source, body)).duplicate).toBe(true);
    const limited = await postCms(servers, source, body);
    problemOf(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toBe('1');
    // A second later, 10 more calls: 10 bad signatures, then 429 again, never 401 beyond the limit.
    setNow(new Date(at.getTime() + 1000));
    const answers = [];
    for (let i = 0; i < 12; i += 1)
      answers.push((await postCms(servers, source, body, { signature: 'A'.repeat(86) })).statusCode);
    expect(answers).toEqual([...Array(10).fill(401), 429, 429]);
  });

  test('10 calls a second per key with a burst of 30, across installations', async ({
    servers,
    platform,
    setNow,
  }) => {
    const op = await createOperator(platform, 1);
    const sources: TestSource[] = [];
    for (let i = 0; i < 4; i += 1) sources.push(await registerSource(platform, op));
    const at = new Date(T0.getTime() + 31 * 24 * 3600_000);
    setNow(at);
    for (let i = 0; i < 30; i += 1) {
      const source = sources[i % 4]!;
      answerOf(await postCms(servers, source, cmsBody(source, Math.floor(i / 4), [])));
    }
    const source = sources[2]!;
    const limited = await postCms(servers, source, cmsBody(source, 8, []));
    problemOf(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toBe('1');
  });

  test('2 000 000 records an hour per organisation: in any hour, kept per minute', async ({
    db,
    servers,
    platform,
    setNow,
  }) => {
    const op = await createOperator(platform, 1);
    const source = await registerSource(platform, op, { p: op.structures[0]! });
    const at = new Date(T0.getTime() + 32 * 24 * 3600_000); // the start of a minute
    const minute = at.getTime() / 60_000;
    setNow(at);
    // The organisation's window (the state every instance shares, migration 082): 1 000 000 records taken 59
    // minutes ago and 999 990 in this minute, newest minute first.
    const used = Array.from({ length: 61 }, () => 0);
    used[0] = 999_990;
    used[59] = 1_000_000;
    await db.query('INSERT INTO pop_rate_windows (window_key, newest_minute, used) VALUES ($1, $2, $3)', [
      `cms-organisation:${op.id}`,
      minute,
      used,
    ]);
    const records = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => cmsPlay('p', from + i, {}, at));
    answerOf(await postCms(servers, source, cmsBody(source, 0, records(1, 10))));
    const limited = await postCms(servers, source, cmsBody(source, 1, records(11, 1000)));
    problemOf(limited, 429, 'rate_limited');
    // Room comes when the minute of the 1 000 000 leaves the window: 2 minutes from now.
    expect(limited.headers['retry-after']).toBe('120');
    setNow(new Date(at.getTime() + 119_000));
    problemOf(await postCms(servers, source, cmsBody(source, 1, records(11, 1000))), 429, 'rate_limited');
    setNow(new Date(at.getTime() + 120_000));
    answerOf(await postCms(servers, source, cmsBody(source, 1, records(11, 1000))));
    const { rows } = await db.query(
      'SELECT newest_minute, used FROM pop_rate_windows WHERE window_key = $1',
      [`cms-organisation:${op.id}`],
    );
    // Two minutes on: this minute's 1000 first, then two minutes earlier the 999 990 + 10; nothing older is kept
    // beyond the 61 minutes a take counts.
    expect(Number(rows[0].newest_minute)).toBe(minute + 2);
    expect(rows[0].used.map(Number).slice(0, 3)).toEqual([1000, 0, 1_000_000]);
    expect(rows[0].used).toHaveLength(61);
  });
});
