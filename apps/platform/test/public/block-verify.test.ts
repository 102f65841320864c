import { randomBytes } from 'node:crypto';
import { merkleRoot } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type Block,
  type BlockHead,
  blockVerdict,
  canonicalBytes,
  type LedgerInfo,
  merkleRoot as merkleRootOf,
  sha256Hex,
  verifyBlock,
  verifyHead,
  verifyLedgerInfo,
} from '@ooh/verify';
import { digestLedgerDay } from '../../src/ledger/index.js';
import { sealDay } from '../../src/seals/index.js';
import { approve, inReview, organisation, structures } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { agentBody, insertBatch, startSealPlatform } from '../seals/helpers.js';

// The browser's ledger checks (@ooh/verify's block.ts, used by the public page) run here under Node, on the
// blocks and proofs of a real platform, with @ooh/crypto as the oracle of the Merkle root.

describe('merkleRootOf, as @ooh/crypto computes it', () => {
  test.each([0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31])('%i leaves', async (n) => {
    const leaves = Array.from({ length: n }, () => new Uint8Array(randomBytes(32)));
    expect(Buffer.from(await merkleRootOf(leaves)).toString('hex')).toBe(
      Buffer.from(merkleRoot(leaves)).toString('hex'),
    );
  });
});

let p: Awaited<ReturnType<typeof startSealPlatform>>;
const blocks = new Map<string, Block>();
let sealLedger: LedgerInfo;
let sealBodySha = '';
let approvalLedger: LedgerInfo;
let approval: { approval_number: string; manifest_sha256: string };

beforeAll(async () => {
  p = await startSealPlatform(new Date('2026-11-19T05:00:00Z'));
  const operator = await organisation(p, 'operator');
  const sites = await structures(p, operator.id, 1);
  const sub = await inReview(
    p,
    operator.key,
    { bytes: png(40, 20, 5), type: 'image/png' },
    { structure_ids: sites.map((s) => s.id), period_from: '2026-11-20', period_to: '2026-12-31' },
  );
  const number = (await approve(p, sub.id)).json<{ approval_number: string }>().approval_number;
  const device = `${'3'.repeat(8)}-3333-4333-8333-${'3'.repeat(12)}`;
  for (const [seq, at] of [
    [1, '2026-11-19T06:00:00.000000Z'],
    [2, '2026-11-20T06:00:00.000000Z'],
  ] as const) {
    await insertBatch(p.database.db, {
      owner: `device:${device}`,
      batchSeq: seq,
      body: agentBody(device, seq, 2, seq * 10),
      receivedAt: at,
    });
  }
  p.clock.set(new Date('2026-11-21T05:00:00Z'));
  await sealDay(p.ctx, '2026-11-20');
  p.clock.set(new Date('2026-11-22T05:00:00Z'));
  await digestLedgerDay(p.ctx, '2026-11-21');
  const get = async <T>(url: string) => {
    const res = await p.servers.verify.inject({ method: 'GET', url });
    expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
    return res.json<T>();
  };
  for (const day of ['2026-11-19', '2026-11-20', '2026-11-21'])
    blocks.set(day, await get<Block>(`/v1/ledger/blocks/${day}`));
  const seal = await get<{ body: unknown; ledger: LedgerInfo }>('/v1/stats-seals/2026-11-20');
  sealLedger = seal.ledger;
  sealBodySha = await sha256Hex(canonicalBytes(seal.body));
  const status = await get<{
    approval_number: string;
    manifest_sha256: string;
    ledger: { approval: LedgerInfo };
  }>(`/v1/approvals/${number}`);
  approvalLedger = status.ledger.approval;
  approval = { approval_number: status.approval_number, manifest_sha256: status.manifest_sha256 };
}, 120_000);

afterAll(async () => {
  await p?.close();
});

const block = (day: string) => structuredClone(blocks.get(day)!);
const states = (checks: { name: string; state: string }[]) => checks.map((c) => [c.name, c.state]);

describe('verifyBlock on the blocks of a real platform', () => {
  test('every block checks out: entries, Merkle root, digest, and the chain from block 1', async () => {
    expect(block('2026-11-19').block_height).toBe(1);
    expect(states(await verifyBlock(block('2026-11-19'), 'none'))).toEqual([
      ['leaves', 'ok'],
      ['root', 'ok'],
      ['digest', 'ok'],
      ['link', 'ok'],
    ]);
    for (const [day, previous] of [
      ['2026-11-20', '2026-11-19'],
      ['2026-11-21', '2026-11-20'],
    ] as const) {
      const checks = await verifyBlock(block(day), block(previous));
      expect(blockVerdict(checks), day).toBe('ok');
    }
    // The 21st holds the two seals; the 20th has no entry at all (an empty block is still a block).
    expect(block('2026-11-21').leaves.map((l) => l.leaf.kind)).toEqual(['stats_seal', 'stats_seal']);
    expect(block('2026-11-20').leaves).toEqual([]);
    const head = await p.servers.verify.inject({ method: 'GET', url: '/v1/ledger/head' });
    expect(states(await verifyHead(head.json<BlockHead>(), block('2026-11-20')))).toEqual([
      ['digest', 'ok'],
      ['link', 'ok'],
    ]);
  });

  test('one changed byte anywhere is caught, and by the check it belongs to', async () => {
    const leaf = block('2026-11-21');
    leaf.leaves[0]!.leaf.signed_at = leaf.leaves[0]!.leaf.signed_at.replace(/.$/, '9');
    expect(states(await verifyBlock(leaf, block('2026-11-20')))).toEqual([
      ['leaves', 'failed'],
      ['root', 'failed'],
      ['digest', 'ok'],
      ['link', 'ok'],
    ]);

    const root = block('2026-11-21');
    root.merkle_root = (root.merkle_root.startsWith('0') ? '1' : '0') + root.merkle_root.slice(1);
    expect(states(await verifyBlock(root, block('2026-11-20')))).toEqual([
      ['leaves', 'ok'],
      ['root', 'failed'],
      ['digest', 'failed'],
      ['link', 'ok'],
    ]);

    const reordered = block('2026-11-21');
    reordered.leaves.reverse();
    expect(blockVerdict(await verifyBlock(reordered, block('2026-11-20')))).toBe('failed');

    const dropped = block('2026-11-21');
    dropped.leaves.pop();
    expect((await verifyBlock(dropped, block('2026-11-20')))[0]).toMatchObject({ state: 'failed' });

    // A rewritten earlier block: the next one no longer names its digest.
    const rewritten = block('2026-11-20');
    rewritten.digest = 'a'.repeat(64);
    expect((await verifyBlock(block('2026-11-21'), rewritten))[3]).toMatchObject({
      name: 'link',
      state: 'failed',
      reason: 'anchor_differs',
    });
    // A block that says it is first but names an anchor; a later one with no block before it.
    const first = block('2026-11-19');
    first.anchor_sha256 = 'b'.repeat(64);
    expect((await verifyBlock(first, 'none'))[3]).toMatchObject({ state: 'failed' });
    expect((await verifyBlock(block('2026-11-21'), 'none'))[3]).toMatchObject({ state: 'failed' });
    expect((await verifyBlock(block('2026-11-21'), null))[3]).toMatchObject({
      state: 'unknown',
      reason: 'previous_block_unavailable',
    });
    expect(blockVerdict(await verifyBlock(block('2026-11-21'), null))).toBe('incomplete');
  });
});

describe('verifyLedgerInfo on the proofs a seal and an approval carry', () => {
  test('a seal’s and an approval’s ledger proofs hold for what they name, and for nothing else', async () => {
    expect(
      await verifyLedgerInfo(sealLedger, { kind: 'stats_seal', manifest_sha256: sealBodySha }),
    ).toBeNull();
    expect(await verifyLedgerInfo(approvalLedger, { kind: 'approval', ...approval })).toBeNull();
    expect(approvalLedger.day).toBe('2026-11-19');

    expect(await verifyLedgerInfo(approvalLedger, { kind: 'revocation', ...approval })).toBe('leaf_kind');
    expect(
      await verifyLedgerInfo(approvalLedger, {
        kind: 'approval',
        ...approval,
        approval_number: 'APR-2026-999999',
      }),
    ).toBe('leaf_not_this_approval');
    expect(
      await verifyLedgerInfo(approvalLedger, {
        kind: 'approval',
        ...approval,
        manifest_sha256: 'c'.repeat(64),
      }),
    ).toBe('leaf_not_this_manifest');

    const bentLeaf = structuredClone(sealLedger);
    bentLeaf.proof.leaf_sha256 = 'd'.repeat(64);
    expect(await verifyLedgerInfo(bentLeaf, { kind: 'stats_seal', manifest_sha256: sealBodySha })).toBe(
      'leaf_hash_differs',
    );
    // The 21st holds two leaves: the proof has one step; its side is derived, never read.
    expect(sealLedger.proof.path.length).toBe(1);
    const flipped = structuredClone(sealLedger);
    flipped.proof.path[0]!.side = flipped.proof.path[0]!.side === 'left' ? 'right' : 'left';
    expect(await verifyLedgerInfo(flipped, { kind: 'stats_seal', manifest_sha256: sealBodySha })).toBe(
      'proof_does_not_reach_root',
    );
    const otherDigest = structuredClone(sealLedger);
    otherDigest.digest = 'e'.repeat(64);
    expect(await verifyLedgerInfo(otherDigest, { kind: 'stats_seal', manifest_sha256: sealBodySha })).toBe(
      'digest_differs',
    );
  });
});
