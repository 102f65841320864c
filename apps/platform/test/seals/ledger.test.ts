import { canonicalize, merkleRoot, sha256, sha256Hex, verifyInclusion } from '@ooh/crypto';
import { LedgerInfo } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { digestLedgerDay } from '../../src/ledger/index.js';
import { createLedgerFeature } from '../../src/ledger/routes.js';
import { buildServers } from '../../src/platform.js';
import { createSealsFeature, runSealScheduler } from '../../src/seals/index.js';
import { approve, inReview, organisation, revoke, structures } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { apiCall } from '../support/platform.js';
import { agentBody, insertBatch, newDevice, startSealPlatform } from './helpers.js';

type P = Awaited<ReturnType<typeof startSealPlatform>>;
const ZERO = '0'.repeat(64);

/** DESIGN.md section 6 written out here, apart from the code under test (@ooh/verify's blockDigest). */
function blockDigest(b: {
  day: string;
  block_height: number;
  leaf_count: number;
  merkle_root: string;
  prev_digest: string;
}): string {
  const { day, block_height, leaf_count, merkle_root, prev_digest } = b;
  return sha256Hex(canonicalize({ v: 1, day, block_height, leaf_count, merkle_root, prev_digest }));
}

/** Checks a ledger proof the way an outsider must: leaf hash recomputed, sides derived, digest recomputed. */
function checkProof(info: LedgerInfo): void {
  expect(Value.Check(LedgerInfo, info)).toBe(true);
  const { proof } = info;
  expect(sha256Hex(canonicalize(proof.leaf))).toBe(proof.leaf_sha256);
  expect(
    verifyInclusion({
      leafHash: sha256(canonicalize(proof.leaf)),
      index: proof.index,
      leafCount: proof.leaf_count,
      path: proof.path,
      root: Buffer.from(proof.merkle_root, 'hex'),
    }),
  ).toBe(true);
  const digest = blockDigest({
    day: proof.day,
    block_height: info.block_height,
    leaf_count: proof.leaf_count,
    merkle_root: proof.merkle_root,
    prev_digest: proof.anchor_sha256,
  });
  expect(digest).toBe(proof.digest);
  expect(info.digest).toBe(proof.digest);
}

describe('the public ledger', () => {
  let p: P;
  let approvalNumber = '';

  beforeAll(async () => {
    // Friday 2026-11-20, 10:00 Almaty.
    p = await startSealPlatform(new Date('2026-11-20T05:00:00Z'));
    await runSealScheduler(p.ctx);
    const operator = await organisation(p, 'operator');
    const [s1, s2] = await structures(p, operator.id, 2);
    const submission = await inReview(
      p,
      operator.key,
      { bytes: png(64, 32, 7), type: 'image/png' },
      {
        structure_ids: [s1!.id, s2!.id],
        period_from: '2026-11-20',
        period_to: '2026-12-31',
      },
    );
    const approved = await approve(p, submission.id);
    expect(approved.statusCode, approved.body).toBe(201);
    approvalNumber = approved.json().approval_number;
    const device = newDevice();
    await insertBatch(p.database.db, {
      owner: device,
      batchSeq: 1,
      body: agentBody(device.slice(7), 1, 3),
      receivedAt: '2026-11-20T05:30:00.000000Z',
    });
  });
  afterAll(async () => {
    await p?.close();
  });

  test('before any block: head and blocks are 404, the approval has no proof yet', async () => {
    const head = await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/head' });
    expect(head.statusCode).toBe(404);
    const block = await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/blocks/2026-11-20' });
    expect(block.statusCode).toBe(404);
    const approval = await p.servers.verify.inject({ method: 'GET', url: `/v1/approvals/${approvalNumber}` });
    expect(approval.statusCode).toBe(200);
    expect(approval.json()).toMatchObject({
      approval_number: approvalNumber,
      status: 'valid',
      valid_from: '2026-11-20',
      valid_until: '2026-12-31',
      revoked_at: null,
      ledger: { approval: null, revocation: null },
    });
    expect(approval.json().structures).toHaveLength(2);
    const manifest = approval.json().manifest;
    expect(sha256Hex(canonicalize(manifest))).toBe(approval.json().manifest_sha256);
  });

  test('the next day: the block of the 20th holds the approval; head, block and approval proof agree', async () => {
    p.clock.set(new Date('2026-11-21T05:00:00Z'));
    const run = await runSealScheduler(p.ctx);
    expect(run.seals.map((s) => s.day)).toEqual(['2026-11-20']);
    expect(run.blocks).toEqual([{ day: '2026-11-20', block_height: 1 }]);

    const head = (await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/head' })).json();
    expect(head).toMatchObject({
      day: '2026-11-20',
      block_height: 1,
      status: 'digested',
      anchor_sha256: ZERO,
    });
    const block = (
      await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/blocks/2026-11-20' })
    ).json();
    expect(block.leaves).toHaveLength(1);
    expect(block.leaves[0].leaf).toMatchObject({ kind: 'approval', approval_number: approvalNumber });
    expect(
      Buffer.from(
        merkleRoot(block.leaves.map((l: { leaf: unknown }) => sha256(canonicalize(l.leaf)))),
      ).toString('hex'),
    ).toBe(block.merkle_root);
    expect(blockDigest({ ...block, prev_digest: block.anchor_sha256 })).toBe(block.digest);

    const approval = (
      await p.servers.verify.inject({ method: 'GET', url: `/v1/approvals/${approvalNumber}` })
    ).json();
    checkProof(approval.ledger.approval);
    expect(approval.ledger.approval.proof.leaf.manifest_sha256).toBe(approval.manifest_sha256);
    // The seal of the 20th was made today: its leaf is in today's block, not digested yet.
    const seal = (await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-20' })).json();
    expect(seal.ledger).toBeNull();
  });

  test('a revocation and a seal land in the block of the 21st; proofs appear once it is digested', async () => {
    const revoked = await revoke(p, approvalNumber);
    expect(revoked.statusCode, revoked.body).toBe(200);
    p.clock.set(new Date('2026-11-22T05:00:00Z'));
    await runSealScheduler(p.ctx);

    const approval = (
      await p.servers.verify.inject({ method: 'GET', url: `/v1/approvals/${approvalNumber}` })
    ).json();
    expect(approval.status).toBe('revoked');
    checkProof(approval.ledger.revocation);
    expect(approval.ledger.revocation.proof.leaf).toMatchObject({
      kind: 'revocation',
      approval_number: approvalNumber,
    });

    const seal = (await p.servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-20' })).json();
    checkProof(seal.ledger);
    expect(seal.ledger).toMatchObject({ day: '2026-11-21', block_height: 2, status: 'digested' });
    expect(seal.ledger.proof.leaf).toMatchObject({
      kind: 'stats_seal',
      approval_number: null,
      manifest_sha256: sha256Hex(canonicalize(seal.body)),
      revoked_at: null,
    });
    expect(new Date(seal.ledger.proof.leaf.signed_at).getTime()).toBe(new Date(seal.signed_at).getTime());
    const first = (
      await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/blocks/2026-11-20' })
    ).json();
    expect(seal.ledger.proof.anchor_sha256).toBe(first.digest);
    const head = (await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/head' })).json();
    expect(head).toMatchObject({
      day: '2026-11-21',
      block_height: 2,
      anchor_sha256: first.digest,
      leaf_count: 2,
    });
  });

  test('a leaf that commits after its day was digested goes into the next block', async () => {
    await p.database.db.query(
      `INSERT INTO ledger_leaves (recorded_at, day, kind, approval_number, manifest_sha256, signed_at, revoked_at)
       VALUES ('2026-11-21T18:59:59Z', '2026-11-21', 'stats_seal', NULL, $1, '2026-11-21T18:59:59Z', NULL)`,
      ['f'.repeat(64)],
    );
    p.clock.set(new Date('2026-11-23T05:00:00Z'));
    await runSealScheduler(p.ctx);
    const block = (
      await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/blocks/2026-11-22' })
    ).json();
    expect(block.leaves.map((l: { leaf: { manifest_sha256: string } }) => l.leaf.manifest_sha256)).toContain(
      'f'.repeat(64),
    );
    const earlier = (
      await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/blocks/2026-11-21' })
    ).json();
    expect(earlier.leaf_count).toBe(2);
  });

  test('digestLedgerDay refuses a day that has not ended; 404 for malformed days and unknown approvals', async () => {
    await expect(digestLedgerDay(p.ctx, '2026-11-23')).rejects.toMatchObject({ code: 'day_not_ended' });
    await expect(digestLedgerDay(p.ctx, '2026-11-01')).rejects.toMatchObject({ code: 'before_first_day' });
    expect((await digestLedgerDay(p.ctx, '2026-11-21')).block_height).toBe(2);
    for (const url of [
      '/v1/ledger/blocks/2026-11-23',
      '/v1/ledger/blocks/2026-02-30',
      '/v1/ledger/blocks/0000-01-01',
      '/v1/approvals/APR-1900-000001',
    ]) {
      const res = await p.servers.verify.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
  });

  test('public rate limit: 429 rate_limited with Retry-After, per client, refilled in real time', async () => {
    let elapsed = 0;
    const nowMs = () => elapsed;
    const servers = await buildServers(p.ctx, [
      createSealsFeature({ rateLimit: { burst: 2, perSecond: 0.5, nowMs } }),
      createLedgerFeature({ rateLimit: { burst: 1, perSecond: 1, nowMs } }),
    ]);
    try {
      const get = (url: string, ip = '203.0.113.7') =>
        servers.verify.inject({ method: 'GET', url, remoteAddress: ip });
      expect((await get('/v1/stats-seals/2026-11-20')).statusCode).toBe(200);
      expect((await get('/v1/stats-seals/1999-01-01')).statusCode).toBe(404);
      const limited = await get('/v1/stats-seals/2026-11-20');
      expect(limited.statusCode).toBe(429);
      expect(limited.json().code).toBe('rate_limited');
      expect(limited.headers['retry-after']).toBe('2');
      expect((await get('/v1/stats-seals/2026-11-20', '203.0.113.8')).statusCode).toBe(200);
      expect((await get('/v1/ledger/head')).statusCode).toBe(200);
      expect((await get('/v1/ledger/head')).statusCode).toBe(429);
      // The platform clock does not refill the buckets (a test may hold it still, an operator may correct it).
      p.clock.advance(60_000);
      expect((await get('/v1/ledger/head')).statusCode).toBe(429);
      elapsed += 2000;
      expect((await get('/v1/stats-seals/2026-11-20')).statusCode).toBe(200);
    } finally {
      await Promise.all(Object.values(servers).map((s) => s.close()));
    }
  });

  test('the console export streams the batches of a sealed day as NDJSON; 404 for a day not sealed', async () => {
    const res = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/seals/2026-11-20/batches');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/x-ndjson/);
    const lines = res.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(Object.keys(lines[0]).sort()).toEqual([
      'batch',
      'body',
      'body_sha256',
      'owner',
      'received_at',
      'seq',
    ]);
    expect(sha256Hex(Buffer.from(lines[0].body, 'base64'))).toBe(lines[0].body_sha256);
    expect(lines[0].received_at).toBe('2026-11-20T05:30:00.000000Z');
    const missing = await apiCall(
      p.servers.api,
      p.adminKey,
      'GET',
      '/api/v1/console/seals/2026-12-20/batches',
    );
    expect(missing.statusCode).toBe(404);
  });
});
