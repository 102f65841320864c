import { canonicalize, merkleRoot, sha256, sha256Hex } from '@ooh/crypto';
import { bytesEqual, parsePem, verifyCms } from '@ooh/verify';
import { StatsSeal } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { OpensslWorkspace } from '../../../../packages/crypto/test/helpers/openssl.js';
import { loadAuthority } from '../../src/authority/index.js';
import { sealDay } from '../../src/seals/index.js';
import { apiCall } from '../support/platform.js';
import { agentBody, cmsBody, insertBatch, newDevice, newSource, startSealPlatform } from './helpers.js';

type P = Awaited<ReturnType<typeof startSealPlatform>>;

/** The leaf hash as the spec describes it, computed with the generic canonicalize(). */
const leafOf = (l: { batch: number; owner: string; seq: number; body_sha256: string; received_at: string }) =>
  sha256(canonicalize(l));

describe('sealing a day', () => {
  let p: P;
  const device = newDevice();
  const source = newSource();
  const expected: { batch: number; owner: string; seq: number; body_sha256: string; received_at: string }[] =
    [];
  let plays = 0;

  beforeAll(async () => {
    // 2026-11-20 11:00 Almaty: 2026-11-19 has ended.
    p = await startSealPlatform(new Date('2026-11-20T06:00:00Z'));
    const batches = [
      // Inserted out of receive order: leaves are ordered by receive time, then batch number.
      {
        owner: device,
        batchSeq: 2,
        body: agentBody(device.slice(7), 2, 3),
        receivedAt: '2026-11-19T10:00:00.000002Z',
      },
      {
        owner: device,
        batchSeq: 1,
        body: agentBody(device.slice(7), 1, 2),
        receivedAt: '2026-11-19T10:00:00.000001Z',
      },
      {
        owner: source,
        batchSeq: 7,
        body: cmsBody(source.slice(7), 7, 4),
        receivedAt: '2026-11-19T10:00:00.000002Z',
      },
      // 23:59:59.999999 Almaty on the 19th (UTC+5).
      {
        owner: source,
        batchSeq: 8,
        body: cmsBody(source.slice(7), 8, 1),
        receivedAt: '2026-11-19T18:59:59.999999Z',
      },
      // 00:00 Almaty on the 19th.
      {
        owner: device,
        batchSeq: 0,
        body: agentBody(device.slice(7), 0, 0),
        receivedAt: '2026-11-18T19:00:00.000000Z',
      },
    ];
    const ids: number[] = [];
    for (const b of batches) ids.push(await insertBatch(p.database.db, b));
    // Other days: not in the seal of the 19th (the 18th ends at 19:00 UTC; the 20th is today).
    await insertBatch(p.database.db, {
      owner: device,
      batchSeq: 9,
      body: agentBody(device.slice(7), 9, 5),
      receivedAt: '2026-11-19T19:00:00.000000Z',
    });
    const leaf = (i: number) => ({
      batch: ids[i]!,
      owner: batches[i]!.owner,
      seq: batches[i]!.batchSeq,
      body_sha256: sha256Hex(batches[i]!.body),
      received_at: batches[i]!.receivedAt,
    });
    // receive order; equal times (index 0 and 2) by batch number.
    expected.push(leaf(4), leaf(1), leaf(0), leaf(2), leaf(3));
    plays = 3 + 2 + 4 + 1 + 0;
  });
  afterAll(async () => {
    await p?.close();
  });

  test('the console seals an ended day: body fields, root over ordered leaves, signature by the seal signer', async () => {
    const res = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2026-11-19');
    expect(res.statusCode).toBe(201);
    const seal = res.json();
    expect(Value.Check(StatsSeal, seal)).toBe(true);
    expect(seal.day).toBe('2026-11-19');
    expect(seal.signed_at).toBe('2026-11-20T11:00:00+05:00');
    expect(seal.ledger).toBeNull();
    expect(seal.body).toEqual({
      v: 1,
      env: 'test',
      day: '2026-11-19',
      batch_count: 5,
      record_count: plays,
      root: Buffer.from(merkleRoot(expected.map(leafOf))).toString('hex'),
      prev_seal_sha256: '0'.repeat(64),
    });

    const authority = await loadAuthority(p.ctx);
    const verified = await verifyCms(new Uint8Array(Buffer.from(seal.signature, 'base64')), {
      roots: parsePem(authority.rootPem),
      at: new Date('2026-11-20T06:00:00Z'),
    });
    expect(verified.ok).toBe(true);
    if (!verified.ok) return;
    expect(Buffer.from(verified.content).toString('utf8')).toBe(canonicalize(seal.body));
    expect(bytesEqual(verified.signer.der, parsePem(authority.sealSigner.certPem)[0]!.der)).toBe(true);
    expect(verified.signingTime?.toISOString()).toBe('2026-11-20T06:00:00.000Z');

    // Idempotent: the same seal again, 200.
    const again = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2026-11-19');
    expect(again.statusCode).toBe(200);
    expect(again.json().signature).toBe(seal.signature);
  });

  test('GET /v1/stats-seals/{day}: JSON, and ?format=p7s the DER that openssl cms -verify accepts', async () => {
    const json = await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-19' });
    expect(json.statusCode).toBe(200);
    expect(json.headers['content-type']).toMatch(/^application\/json/);
    const seal = json.json();
    const der = await p.servers.verify.inject({
      method: 'GET',
      url: '/v1/stats-seals/2026-11-19?format=p7s',
    });
    expect(der.statusCode).toBe(200);
    expect(der.headers['content-type']).toBe('application/pkcs7-signature');
    expect(der.rawPayload.toString('base64')).toBe(seal.signature);

    const ws = new OpensslWorkspace();
    try {
      const authority = await loadAuthority(p.ctx);
      ws.write('seal.p7s', der.rawPayload);
      ws.write('root.pem', authority.rootPem);
      const verified = ws.verifyCms('seal.p7s', { ca: 'root.pem' });
      expect(verified.ok, verified.stderr).toBe(true);
      expect(ws.read('seal.p7s.out').toString('utf8')).toBe(canonicalize(seal.body));
    } finally {
      ws.dispose();
    }
  });

  test('404 not_found for a day not sealed, in the future, or malformed (never 422)', async () => {
    for (const day of [
      '2026-11-18',
      '2026-11-20',
      '2027-01-01',
      '2026-02-30',
      '0000-01-01',
      'yesterday',
      '2026-1-1',
    ]) {
      const res = await p.servers.verify.inject({ method: 'GET', url: `/v1/stats-seals/${day}` });
      expect(res.statusCode, day).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
  });

  test('the console refuses a day that has not ended, or before the chain starts', async () => {
    const today = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2026-11-20');
    expect(today.statusCode).toBe(409);
    expect(today.json().code).toBe('state_conflict');
    const before = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2026-11-01');
    expect(before.statusCode).toBe(409);
    const malformed = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2026-13-01');
    expect(malformed.statusCode).toBe(422);
  });

  test('the next day chains to the previous seal; a day with no batches gets an empty root', async () => {
    p.clock.set(new Date('2026-11-22T06:00:00Z'), { frozen: true });
    const first = (await sealDay(p.ctx, '2026-11-19')).seal;
    const { seal: third, created } = await sealDay(p.ctx, '2026-11-21');
    expect(created).toBe(true);
    const second = await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-20' });
    expect(second.statusCode).toBe(200);
    const secondBody = second.json().body;
    expect(secondBody.prev_seal_sha256).toBe(sha256Hex(first.body));
    expect(secondBody.batch_count).toBe(1);
    expect(secondBody.record_count).toBe(5);
    const thirdBody = JSON.parse(third.body.toString('utf8'));
    expect(thirdBody.prev_seal_sha256).toBe(sha256Hex(canonicalize(secondBody)));
    expect(thirdBody.batch_count).toBe(0);
    expect(thirdBody.record_count).toBe(0);
    expect(thirdBody.root).toBe(sha256Hex(new Uint8Array(0)));
  });
});
