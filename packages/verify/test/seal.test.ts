import { createHash } from 'node:crypto';
import { cmsSign, inclusionPath, merkleRoot as syncMerkleRoot } from '@ooh/crypto';
import { almatyDate } from '@ooh/protocol';
import { beforeAll, describe, expect, test } from 'vitest';
import { createPki, issueLeaf } from '../../crypto/test/helpers/pki.js';
import {
  blockDigest,
  type Check,
  type CheckName,
  type Certificate,
  canonicalBytes,
  parsePem,
  type SealDocument,
  verdictOf,
  verifySeal,
  verifySealBatches,
} from '../src/index.js';

const sha256 = (bytes: Uint8Array | string) => new Uint8Array(createHash('sha256').update(bytes).digest());
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const ZERO = '0'.repeat(64);
const deviceId = `${'1'.repeat(8)}-1111-4111-8111-${'1'.repeat(12)}`;
const device = `device:${deviceId}`;

/** Two batches received on 2030-06-01 (Almaty), as the batch export lists them. */
function exportLines(): string[] {
  const bodies = [
    { device_id: deviceId, batch_seq: 1, events: [{ kind: 'play' }, { kind: 'play' }, { kind: 'error' }] },
    { device_id: deviceId, batch_seq: 2, events: [{ kind: 'play' }] },
  ];
  return bodies.map((body, i) => {
    const bytes = Buffer.from(JSON.stringify(body));
    return JSON.stringify({
      batch: 10 + i,
      owner: device,
      seq: i + 1,
      body_sha256: hex(sha256(bytes)),
      received_at: `2030-06-01T0${5 + i}:00:00.000000Z`,
      body: bytes.toString('base64'),
    });
  });
}

function batchRoot(lines: string[]): string {
  const leaves = lines.map((text) => {
    const { body: _body, ...leaf } = JSON.parse(text) as Record<string, unknown>;
    return sha256(canonicalBytes(leaf));
  });
  return hex(syncMerkleRoot(leaves));
}

let root: Certificate;
let otherRoot: Certificate;
let seal: SealDocument;
let previous: SealDocument;
let sign: (content: Uint8Array, signingTime: Date) => Promise<Uint8Array>;
let envelopeSign: (content: Uint8Array, signingTime: Date) => Promise<Uint8Array>;

async function makeSeal(
  day: string,
  body: SealDocument['body'],
  signed_at: string,
  sign: (c: Uint8Array, at: Date) => Promise<Uint8Array>,
): Promise<SealDocument> {
  const signature = Buffer.from(await sign(canonicalBytes(body), new Date(signed_at))).toString('base64');
  const leaf = {
    kind: 'stats_seal',
    approval_number: null,
    manifest_sha256: hex(sha256(canonicalBytes(body))),
    signed_at,
    revoked_at: null,
  };
  const leaves = [sha256('approval leaf'), sha256(canonicalBytes(leaf)), sha256('another leaf')];
  const merkle_root = hex(syncMerkleRoot(leaves));
  // The leaf is recorded when the seal is made: in the block of the day it was signed, after `day`.
  const blockDay = almatyDate(new Date(signed_at));
  const head = { day: blockDay, block_height: 7, leaf_count: 3, merkle_root, anchor_sha256: 'a'.repeat(64) };
  const digest = await blockDigest(head);
  return {
    day,
    signed_at,
    body,
    signature,
    ledger: {
      day: blockDay,
      status: 'digested',
      block_height: 7,
      digest,
      proof: {
        v: 1,
        day: blockDay,
        leaf,
        leaf_sha256: hex(leaves[1]!),
        index: 1,
        leaf_count: 3,
        path: inclusionPath(leaves, 1),
        merkle_root,
        anchor_sha256: head.anchor_sha256,
        digest,
      },
    },
  };
}

beforeAll(async () => {
  const pki = await createPki();
  root = parsePem(pki.rootPem)[0]!;
  otherRoot = parsePem((await createPki('Other')).rootPem)[0]!;
  const signer = await issueLeaf(pki, 'signing', { subject: 'CN=Seal Signer, O=City' });
  sign = (content: Uint8Array, signingTime: Date) =>
    cmsSign({
      content,
      signerCertificatePem: signer.pem,
      signerKey: signer.keys.privateKey,
      signingTime,
      extraCertificatesPem: [pki.issuingPem],
    });
  // The authority's other signer, under the same issuing CA, with the same key usage.
  const envelopeSigner = await issueLeaf(pki, 'signing', {
    subject: 'CN=OOH Approval Envelope Signer, O=City',
    serialHex: '1002',
  });
  envelopeSign = (content: Uint8Array, signingTime: Date) =>
    cmsSign({
      content,
      signerCertificatePem: envelopeSigner.pem,
      signerKey: envelopeSigner.keys.privateKey,
      signingTime,
      extraCertificatesPem: [pki.issuingPem],
    });
  const base = { v: 1, env: 'test', batch_count: 0, record_count: 0, root: hex(sha256('')) };
  previous = await makeSeal(
    '2030-05-31',
    { ...base, day: '2030-05-31', prev_seal_sha256: ZERO },
    '2030-06-01T01:00:00+05:00',
    sign,
  );
  const lines = exportLines();
  seal = await makeSeal(
    '2030-06-01',
    {
      ...base,
      day: '2030-06-01',
      batch_count: 2,
      record_count: 3,
      root: batchRoot(lines),
      prev_seal_sha256: hex(sha256(canonicalBytes(previous.body))),
    },
    '2030-06-02T01:00:00+05:00',
    sign,
  );
});

const summary = (checks: Check<CheckName>[]) => checks.map((c) => `${c.name}:${c.state}:${c.reason}`);

describe('verifySeal', () => {
  test('every check passes, and the first seal links to nothing', async () => {
    const checks = await verifySeal(seal, [root], previous);
    expect(summary(checks)).toEqual([
      'signature:ok:verified',
      'content:ok:matches',
      'chain:ok:links_previous',
      'ledger:ok:digested',
    ]);
    expect(checks[0]!.facts?.['signer']).toBe('Seal Signer → City Issuing CA → City Root CA');
    expect(verdictOf(checks)).toBe('ok');
    expect((await verifySeal(previous, [root], 'none'))[2]).toMatchObject({
      state: 'ok',
      reason: 'first_seal',
    });
  });

  test('another root, a changed body, signed_at, previous seal, proof or digest each fail with their reason', async () => {
    expect((await verifySeal(seal, [otherRoot], previous))[0]).toMatchObject({
      state: 'failed',
      reason: 'chain_no_issuer',
    });
    const changed = await verifySeal({ ...seal, body: { ...seal.body, record_count: 4 } }, [root], previous);
    expect(summary(changed)).toContain('content:failed:content_differs');
    expect(summary(changed)).toContain('ledger:failed:leaf_not_this_seal');
    const moved = await verifySeal({ ...seal, signed_at: '2030-06-02T01:00:01+05:00' }, [root], previous);
    expect(summary(moved)).toContain('signature:failed:signed_at_differs');
    expect(summary(moved)).toContain('ledger:failed:leaf_signed_at_differs');
    const wrongPrevious = { ...previous, body: { ...previous.body, batch_count: 9 } };
    expect((await verifySeal(seal, [root], wrongPrevious))[2]).toMatchObject({ reason: 'previous_differs' });
    expect((await verifySeal(seal, [root], { ...previous, day: '2030-05-30' }))[2]).toMatchObject({
      reason: 'previous_not_day_before',
    });
    expect((await verifySeal(seal, [root], null))[2]).toMatchObject({ state: 'unknown' });
    const ledger = seal.ledger!;
    const bent = {
      ...ledger,
      proof: { ...ledger.proof, path: ledger.proof.path.map((s) => ({ ...s, hash: 'f'.repeat(64) })) },
    };
    expect((await verifySeal({ ...seal, ledger: bent }, [root], previous))[3]).toMatchObject({
      reason: 'proof_does_not_reach_root',
    });
    expect(
      (await verifySeal({ ...seal, ledger: { ...ledger, digest: 'e'.repeat(64) } }, [root], previous))[3],
    ).toMatchObject({
      reason: 'digest_differs',
    });
    const pending = await verifySeal({ ...seal, ledger: null }, [root], previous);
    expect(pending[3]).toMatchObject({ state: 'pending', reason: 'not_digested' });
    expect(verdictOf(pending)).toBe('ledger_pending');
  });
});

describe('verifySeal holds every unsigned field to its signed twin (audit H)', () => {
  test('a genuine seal shown under another day fails: body.day is the day shown, the day asked and the chain', async () => {
    // The host serves the real chain shifted by ten days: the outer day is unsigned.
    const shifted = { ...seal, day: '2030-06-11' };
    const shiftedPrevious = { ...previous, day: '2030-06-10' };
    const checks = await verifySeal(shifted, [root], shiftedPrevious);
    expect(checks[1]).toMatchObject({
      name: 'content',
      state: 'failed',
      reason: 'another_day',
      facts: { body_day: '2030-06-01', document_day: '2030-06-11' },
    });
    expect(checks[2]).toMatchObject({ name: 'chain', state: 'failed', reason: 'previous_not_day_before' });
    expect(verdictOf(checks)).toBe('failed');
    // Relabelled whole (outer day and all): the page asked for another day than the one signed.
    expect((await verifySeal(seal, [root], previous, { day: '2030-06-11' }))[1]).toMatchObject({
      state: 'failed',
      reason: 'another_day',
      facts: { day: '2030-06-11', body_day: '2030-06-01' },
    });
    expect(summary(await verifySeal(seal, [root], previous, { day: '2030-06-01' }))).toEqual([
      'signature:ok:verified',
      'content:ok:matches',
      'chain:ok:links_previous',
      'ledger:ok:digested',
    ]);
    // The previous seal is judged by its signed day too, not by its label.
    const olderBody = { ...previous.body, day: '2030-05-30' };
    const older = { ...previous, body: olderBody };
    const linked = {
      ...seal,
      body: { ...seal.body, prev_seal_sha256: hex(sha256(canonicalBytes(olderBody))) },
    };
    expect((await verifySeal(linked, [root], older))[2]).toMatchObject({
      state: 'failed',
      reason: 'previous_not_day_before',
    });
  });

  test('a seal signed before its day ended, and its leaf in a block of that day, fail', async () => {
    // Signed at 11:00 Almaty on the day it seals, by the real seal signer, chained to the real previous seal.
    const early = await makeSeal('2030-06-01', seal.body, '2030-06-01T11:00:00+05:00', sign);
    const checks = await verifySeal(early, [root], previous);
    expect(summary(checks)).toEqual([
      'signature:failed:signed_before_day_end',
      'content:ok:matches',
      'chain:ok:links_previous',
      'ledger:failed:leaf_before_day_end',
    ]);
    expect(checks[0]!.facts).toMatchObject({ day_end: '2030-06-01T19:00:00.000Z' });
    // One second after midnight in Almaty is after the day.
    const justAfter = await makeSeal('2030-06-01', seal.body, '2030-06-02T00:00:01+05:00', sign);
    expect(verdictOf(await verifySeal(justAfter, [root], previous))).toBe('ok');
  });

  test("a seal signed with the envelope signer's certificate fails signer_role", async () => {
    const forged = await makeSeal('2030-06-01', seal.body, seal.signed_at, envelopeSign);
    const checks = await verifySeal(forged, [root], previous);
    expect(checks[0]).toMatchObject({ name: 'signature', state: 'failed', reason: 'signer_role' });
    expect(String(checks[0]!.facts?.['detail'])).toContain('OOH Approval Envelope Signer');
    expect(verdictOf(checks)).toBe('failed');
  });
});

describe('verdictOf', () => {
  const ok = (name: Check['name']): Check => ({ name, state: 'ok', reason: 'x' });
  test('only the ledger pending is amber, not a failure; a failure anywhere is red', () => {
    const passed = [ok('signature'), ok('content'), ok('chain')];
    expect(verdictOf([...passed, ok('ledger')])).toBe('ok');
    expect(verdictOf([...passed, { name: 'ledger', state: 'pending', reason: 'not_digested' }])).toBe(
      'ledger_pending',
    );
    expect(
      verdictOf([
        ok('signature'),
        ok('content'),
        { name: 'chain', state: 'unknown', reason: 'previous_unavailable' },
        ok('ledger'),
      ]),
    ).toBe('incomplete');
    expect(
      verdictOf([
        ok('signature'),
        { name: 'content', state: 'failed', reason: 'content_differs' },
        ok('chain'),
        { name: 'ledger', state: 'pending', reason: 'not_digested' },
      ]),
    ).toBe('failed');
  });
});

describe("verifySealBatches (the CLI's --batches)", () => {
  test('the export recomputes root, batch_count and record_count', async () => {
    const checks = await verifySealBatches(seal, exportLines());
    expect(summary(checks)).toEqual([
      'batches:ok:bodies_match',
      'root:ok:root_recomputed',
      'batch_count:ok:batch_count_recounted',
      'record_count:ok:record_count_recounted',
    ]);
  });

  test('a changed body, a batch of another day, a line out of order, a missing line and junk each fail', async () => {
    const lines = exportLines();
    const changed = JSON.parse(lines[1]!) as Record<string, unknown>;
    changed['body'] = Buffer.from(
      JSON.stringify({ device_id: deviceId, batch_seq: 2, events: [{ kind: 'play' }, { kind: 'play' }] }),
    ).toString('base64');
    expect(summary(await verifySealBatches(seal, [lines[0]!, JSON.stringify(changed)]))).toEqual([
      'batches:failed:body_sha256_differs',
      'root:ok:root_recomputed',
      'batch_count:ok:batch_count_recounted',
      'record_count:failed:record_count_differs',
    ]);
    const otherDay = JSON.parse(lines[1]!) as Record<string, unknown>;
    otherDay['received_at'] = '2030-06-01T19:30:00.000000Z'; // 00:30 on 2 June in Almaty
    expect(summary(await verifySealBatches(seal, [lines[0]!, JSON.stringify(otherDay)]))).toContain(
      'batches:failed:received_another_day',
    );
    expect(summary(await verifySealBatches(seal, [lines[1]!, lines[0]!]))).toContain(
      'batches:failed:out_of_order',
    );
    const missing = summary(await verifySealBatches(seal, [lines[0]!]));
    expect(missing).toContain('root:failed:root_differs');
    expect(missing).toContain('batch_count:failed:batch_count_differs');
    expect(summary(await verifySealBatches(seal, [lines[0]!, '{"x":1}', lines[1]!]))).toContain(
      'batches:failed:not_a_batch_line',
    );
  });

  test('a batch listed twice fails, whichever of its number, owner and seq, or body repeats (audit H)', async () => {
    const [first, second] = exportLines().map((l) => JSON.parse(l) as Record<string, unknown>);
    // The same batch (owner, seq, body) under a second batch number: its plays counted twice, the counts made to fit.
    const again = { ...first!, batch: 12, received_at: '2030-06-01T07:00:00.000000Z' };
    const lines = [first!, second!, again].map((l) => JSON.stringify(l));
    const twice = {
      ...seal,
      body: { ...seal.body, batch_count: 3, record_count: 5, root: batchRoot(lines) },
    };
    const checks = await verifySealBatches(twice, lines);
    expect(summary(checks)).toEqual([
      'batches:failed:listed_twice',
      'root:ok:root_recomputed',
      'batch_count:ok:batch_count_recounted',
      'record_count:ok:record_count_recounted',
    ]);
    expect(checks[0]).toMatchObject({
      subject: 'batch 12',
      facts: { same: 'owner and batch_seq', as_batch: 10 },
    });
    const sameNumber = JSON.stringify({ ...second!, batch: 10 });
    expect(summary(await verifySealBatches(seal, [lines[0]!, sameNumber]))).toContain(
      'batches:failed:listed_twice',
    );
  });

  test("a body whose own batch_seq or device_id is not its leaf's fails body_differs_from_leaf", async () => {
    const [first, second] = exportLines().map((l) => JSON.parse(l) as Record<string, unknown>);
    const withBody = (line: Record<string, unknown>, body: unknown) => {
      const bytes = Buffer.from(JSON.stringify(body));
      return JSON.stringify({ ...line, body: bytes.toString('base64'), body_sha256: hex(sha256(bytes)) });
    };
    const events = [{ kind: 'play' }];
    const otherSeq = withBody(second!, { device_id: deviceId, batch_seq: 7, events });
    const checks = await verifySealBatches(seal, [JSON.stringify(first), otherSeq]);
    expect(checks[0]).toMatchObject({ reason: 'body_differs_from_leaf', facts: { field: 'batch_seq' } });
    const otherDevice = withBody(second!, { device_id: deviceId.replace(/^1/, '2'), batch_seq: 2, events });
    expect((await verifySealBatches(seal, [JSON.stringify(first), otherDevice]))[0]).toMatchObject({
      reason: 'body_differs_from_leaf',
      facts: { field: 'device_id' },
    });
  });
});
