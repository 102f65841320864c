import { readFileSync } from 'node:fs';
import type { StatsSeal } from '@ooh/protocol';
import { parsePem, verifyCms, verifySeal } from '@ooh/verify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createAuthorityFiles } from '../../src/authority/pki.js';
import { digestLedgerDay } from '../../src/ledger/index.js';
import { sealDay } from '../../src/seals/index.js';
import { agentBody, insertBatch, startSealPlatform } from '../seals/helpers.js';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

// The console verifies seals in the browser with @ooh/verify (WebCrypto only); the same code runs here under Node
// against the seals of a real platform. The published vectors run in packages/verify/test.

describe('seals of a real platform, verified as the browser does', () => {
  let p: Awaited<ReturnType<typeof startSealPlatform>>;
  let otherAuthority: string;
  let seal20: StatsSeal;
  let seal19: StatsSeal;
  let rootPem: string;

  beforeAll(async () => {
    p = await startSealPlatform(new Date('2026-11-19T05:00:00Z'));
    const device = `device:${'1'.repeat(8)}-1111-4111-8111-${'1'.repeat(12)}`;
    await insertBatch(p.database.db, {
      owner: device,
      batchSeq: 1,
      body: agentBody(device.slice(7), 1, 3),
      receivedAt: '2026-11-19T05:30:00.000000Z',
    });
    await insertBatch(p.database.db, {
      owner: device,
      batchSeq: 2,
      body: agentBody(device.slice(7), 2, 2, 5),
      receivedAt: '2026-11-20T05:30:00.000000Z',
    });
    p.clock.set(new Date('2026-11-21T05:00:00Z'));
    await sealDay(p.ctx, '2026-11-19');
    await sealDay(p.ctx, '2026-11-20');
    p.clock.set(new Date('2026-11-22T05:00:00Z'));
    await digestLedgerDay(p.ctx, '2026-11-21');
    const fetchSeal = async (day: string) => {
      const res = await p.servers.verify.inject({ method: 'GET', url: `/v1/stats-seals/${day}` });
      expect(res.statusCode, res.body).toBe(200);
      return res.json<StatsSeal>();
    };
    seal19 = await fetchSeal('2026-11-19');
    seal20 = await fetchSeal('2026-11-20');
    rootPem = (await p.servers.verify.inject({ method: 'GET', url: '/v1/authority-root.pem' })).body;
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-other-authority-'));
    await createAuthorityFiles(path.join(dir, 'authority'), new Date('2026-11-01T00:00:00Z'));
    otherAuthority = readFileSync(path.join(dir, 'authority', 'root-ca.pem'), 'utf8');
    await rm(dir, { recursive: true, force: true });
  });
  afterAll(async () => {
    await p?.close();
  });

  test('every check passes: signature chain to the root, signed content, chain of seals, ledger proof', async () => {
    const root = parsePem(rootPem)[0]!;
    expect(seal20.ledger).not.toBeNull();
    const checks = await verifySeal(seal20, [root], seal19);
    expect(checks.map((c) => [c.name, c.state])).toEqual([
      ['signature', 'ok'],
      ['content', 'ok'],
      ['chain', 'ok'],
      ['ledger', 'ok'],
    ]);
    expect(checks[0]!.facts?.['signer']).toMatch(/Seal Signer.*Issuing CA.*Root CA/);
    const first = await verifySeal(seal19, [root], 'none');
    expect(first.find((c) => c.name === 'chain')).toMatchObject({ state: 'ok', reason: 'first_seal' });
  });

  test('a seal signed under another root, a changed body, a wrong previous seal and a bent proof all fail', async () => {
    const root = parsePem(rootPem)[0]!;
    const foreign = await verifySeal(seal20, parsePem(otherAuthority), seal19);
    expect(foreign[0]).toMatchObject({ name: 'signature', state: 'failed', reason: 'chain_no_issuer' });

    const changed = { ...seal20, body: { ...seal20.body, record_count: seal20.body.record_count + 1 } };
    const c = await verifySeal(changed, [root], seal19);
    expect(c.find((x) => x.name === 'content')).toMatchObject({ state: 'failed', reason: 'content_differs' });
    expect(c.find((x) => x.name === 'ledger')).toMatchObject({
      state: 'failed',
      reason: 'leaf_not_this_seal',
    });

    const wrongPrevious = { ...seal19, body: { ...seal19.body, batch_count: 99 } };
    const w = await verifySeal(seal20, [root], wrongPrevious);
    expect(w.find((x) => x.name === 'chain')).toMatchObject({ state: 'failed', reason: 'previous_differs' });

    const ledger = seal20.ledger!;
    const bentPath = ledger.proof.path.map((s, i) => (i === 0 ? { ...s, hash: 'f'.repeat(64) } : s));
    if (bentPath.length > 0) {
      const bent = { ...seal20, ledger: { ...ledger, proof: { ...ledger.proof, path: bentPath } } };
      expect((await verifySeal(bent, [root], seal19))[3]).toMatchObject({
        state: 'failed',
        reason: 'proof_does_not_reach_root',
      });
    }
    const otherDigest = { ...seal20, ledger: { ...ledger, digest: 'e'.repeat(64) } };
    expect((await verifySeal(otherDigest, [root], seal19))[3]).toMatchObject({
      state: 'failed',
      reason: 'digest_differs',
    });
    const pending = { ...seal20, ledger: null };
    expect((await verifySeal(pending, [root], seal19))[3]).toMatchObject({
      state: 'pending',
      reason: 'not_digested',
    });
  });

  test('the real seals relabelled as other days fail, as the pages check them with the day they show (audit H)', async () => {
    const root = parsePem(rootPem)[0]!;
    // The chain served shifted by nine days: each document's outer day is unsigned.
    const shifted19 = { ...seal19, day: '2026-11-28' };
    const shifted20 = { ...seal20, day: '2026-11-29' };
    const shifted = await verifySeal(shifted20, [root], shifted19, { day: '2026-11-29' });
    expect(shifted.map((c) => `${c.name}:${c.state}:${c.reason}`)).toEqual([
      'signature:ok:verified',
      'content:failed:another_day',
      'chain:failed:previous_not_day_before',
      'ledger:ok:digested',
    ]);
    // A seal of the 20th served whole as the seal of the 29th: the page's day is not the signed day.
    expect((await verifySeal(seal20, [root], seal19, { day: '2026-11-29' }))[1]).toMatchObject({
      state: 'failed',
      reason: 'another_day',
      facts: { day: '2026-11-29', body_day: '2026-11-20' },
    });
  });

  test('a flipped byte anywhere in the signature is refused', async () => {
    const root = parsePem(rootPem)[0]!;
    const der = Buffer.from(seal20.signature, 'base64');
    const accepted: number[] = [];
    for (let i = 0; i < der.length; i += 1) {
      const copy = Buffer.from(der);
      copy[i] = copy[i]! ^ 0x01;
      if ((await verifyCms(copy.toString('base64'), { roots: [root] })).ok) accepted.push(i);
    }
    expect(accepted).toEqual([]);
    expect((await verifyCms(seal20.signature, { roots: [root] })).ok).toBe(true);
  });
});
