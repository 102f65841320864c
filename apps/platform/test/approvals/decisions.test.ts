import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { base64Decode, canonicalBytes, sha256Hex } from '@ooh/crypto';
import { bytesEqual, parsePem, verifyCms } from '@ooh/verify';
import { ApprovalEnvelope, RevocationList } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { revokeApproval } from '../../src/approvals/decisions.js';
import { loadAuthority } from '../../src/authority/index.js';
import { ledgerLeafObject, ledgerLeavesOfDay } from '../../src/ledger/leaves.js';
import { apiCall, type TestPlatform, startTestPlatform } from '../support/platform.js';
import { approve, inReview, type Org, organisation, reject, revoke, structures } from './helpers.js';
import { mp4, png } from './media-fixtures.js';

let p: TestPlatform;
let dataDir: string;
let operator: Org;
let site: { id: string; code: string }[];
let seed = 100;
const NOW = new Date('2026-11-20T06:00:00Z');

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-decisions-'));
  p = await startTestPlatform({ dataDir, now: NOW });
  operator = await organisation(p, 'operator');
  site = await structures(p, operator.id, 3);
});
afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const submitted = (
  fields: { structure_ids?: string[]; period_from?: string; period_to?: string } = {},
  video = false,
) => {
  seed += 1;
  const media = video
    ? { bytes: mp4(1920, 1080, 10_000, { seed }), type: 'video/mp4' }
    : { bytes: png(32, 18, seed), type: 'image/png' };
  return inReview(p, operator.key, media, {
    structure_ids: fields.structure_ids ?? site.map((s) => s.id),
    ...fields,
  });
};

const serial = (number: string) => Number(number.split('-')[2]);

describe('before any revocation', () => {
  test('GET {verify_url}/v1/revocations.json is 404 not_found', async () => {
    const res = await p.servers.verify.inject({ method: 'GET', url: '/v1/revocations.json' });
    expect(res.statusCode).toBe(404);
    expect(res.json().code).toBe('not_found');
  });
});

describe('POST /api/v1/console/submissions/{id}/approve', () => {
  test('issues with the requested period and structures, a signed envelope and an approval leaf', async () => {
    p.clock.set(NOW);
    const s = await submitted({}, true);
    const res = await approve(p, s.id);
    expect(res.statusCode, res.body).toBe(201);
    const { approval_number, envelope_url } = res.json<{ approval_number: string; envelope_url: string }>();
    expect(approval_number).toMatch(/^APR-2026-\d{6}$/);
    expect(envelope_url).toBe(`${p.ctx.config.publicUrls.api}/api/v1/approvals/${approval_number}/envelope`);
    expect(res.headers['location']).toBe(envelope_url);

    const { rows } = await p.database.db.query(
      `SELECT a.number, to_char(a.valid_from, 'YYYY-MM-DD') AS valid_from, to_char(a.valid_until, 'YYYY-MM-DD') AS valid_until,
              a.media_sha256, a.category_id, a.duration_ms, a.width, a.height, a.issued_at, a.envelope, a.manifest_sha256,
              (SELECT array_agg(structure_id ORDER BY structure_id) FROM approval_structures WHERE approval_id = a.id) AS structures,
              s.state
         FROM approvals a JOIN submissions s ON s.id = a.submission_id WHERE a.submission_id = $1`,
      [s.id],
    );
    const row = rows[0];
    expect(row).toMatchObject({
      number: approval_number,
      valid_from: '2026-12-01',
      valid_until: '2026-12-31',
      media_sha256: s.sha256,
      duration_ms: 10_000,
      width: 1920,
      height: 1080,
      state: 'approved',
    });
    expect(row.issued_at).toEqual(NOW);
    expect(row.structures).toEqual(site.map((x) => x.id).sort());

    // The envelope: {v, body, signature}, the manifest fields exactly, signed over the canonical body.
    const envelope = JSON.parse(row.envelope);
    expect(Value.Check(ApprovalEnvelope, envelope)).toBe(true);
    expect(Object.keys(envelope.body).sort()).toEqual([
      'approval_number',
      'category_id',
      'duration_ms',
      'height',
      'issued_at',
      'kind',
      'media_sha256',
      'structures',
      'valid_from',
      'valid_until',
      'width',
    ]);
    expect(envelope.body).toMatchObject({
      kind: 'approval',
      approval_number,
      media_sha256: s.sha256,
      structures: site.map((x) => x.code).sort(),
      valid_from: '2026-12-01',
      valid_until: '2026-12-31',
      category_id: 1564,
      duration_ms: 10_000,
      width: 1920,
      height: 1080,
      issued_at: '2026-11-20T11:00:00.000+05:00',
    });
    const authority = await loadAuthority(p.ctx);
    const verified = await verifyCms(base64Decode(envelope.signature), {
      roots: parsePem(authority.rootPem),
      at: NOW,
    });
    expect(verified.ok).toBe(true);
    if (verified.ok) {
      expect(Buffer.from(verified.content)).toEqual(Buffer.from(canonicalBytes(envelope.body)));
      expect(bytesEqual(verified.signer.der, parsePem(authority.envelopeSigner.certPem)[0]!.der)).toBe(true);
      expect(verified.signingTime).toEqual(NOW);
    }
    // The body text in the document is the signed bytes.
    expect(row.envelope).toContain(Buffer.from(canonicalBytes(envelope.body)).toString('utf8'));

    const manifestSha = sha256Hex(canonicalBytes(envelope.body));
    expect(row.manifest_sha256).toBe(manifestSha);
    const leaves = (await ledgerLeavesOfDay(p.database.db, '2026-11-20')).filter(
      (l) => l.approval_number === approval_number,
    );
    expect(leaves.map(ledgerLeafObject)).toEqual([
      {
        kind: 'approval',
        approval_number,
        manifest_sha256: manifestSha,
        signed_at: '2026-11-20T11:00:00.000+05:00',
        revoked_at: null,
      },
    ]);

    const again = await approve(p, s.id);
    expect(again.statusCode).toBe(409);
    expect(again.json().code).toBe('state_conflict');
  });

  test('narrowing the period and structures is allowed', async () => {
    const s = await submitted();
    const res = await approve(p, s.id, {
      valid_from: '2026-12-10',
      valid_until: '2026-12-20',
      structure_ids: [site[1]!.id],
    });
    expect(res.statusCode, res.body).toBe(201);
    const envelope = await apiCall(
      p.servers.api,
      operator.key,
      'GET',
      new URL(res.json().envelope_url).pathname,
    );
    // The submitting operator reads the envelope with its read:creatives key.
    expect(envelope.statusCode).toBe(200);
    expect(envelope.json().body).toMatchObject({
      valid_from: '2026-12-10',
      valid_until: '2026-12-20',
      structures: [site[1]!.code],
      width: 32,
      duration_ms: null,
    });
  });

  test('widening is refused with field errors, and a refused approval takes no number', async () => {
    const first = await submitted();
    const before = serial((await approve(p, first.id)).json().approval_number);
    const s = await submitted({ structure_ids: [site[0]!.id, site[1]!.id] });
    const cases: [Record<string, unknown>, string, string][] = [
      [{ valid_from: '2026-11-30' }, '/valid_from', 'out_of_range'],
      [{ valid_until: '2027-01-01' }, '/valid_until', 'out_of_range'],
      [{ valid_from: '2026-12-20', valid_until: '2026-12-10' }, '/valid_until', 'out_of_range'],
      [{ structure_ids: [site[2]!.id] }, '/structure_ids/0', 'not_allowed'],
      [{ structure_ids: [] }, '/structure_ids', 'too_few'],
      [{ structure_ids: ['nope'] }, '/structure_ids/0', 'format'],
      [{ valid_from: '2026-02-30' }, '/valid_from', 'format'],
      [{ until: '2026-12-10' }, '/until', 'unknown_key'],
    ];
    for (const [body, pathName, code] of cases) {
      const res = await approve(p, s.id, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(422);
      expect(res.json().errors).toContainEqual(expect.objectContaining({ path: pathName, code }));
    }
    const ok = await approve(p, s.id, {});
    expect(ok.statusCode).toBe(201);
    expect(serial(ok.json().approval_number)).toBe(before + 1);
  });

  test('only a submission in review can be decided; only the authority decides', async () => {
    const res = await apiCall(p.servers.api, operator.key, 'POST', '/api/v1/submissions', {
      advertiser_name: 'Draft Co',
      period_from: '2026-12-01',
      period_to: '2026-12-31',
      structure_ids: [site[0]!.id],
    });
    const draftId = res.json().id as string;
    expect((await approve(p, draftId)).json().code).toBe('state_conflict');
    expect((await approve(p, '00000000-0000-4000-8000-000000000000')).statusCode).toBe(404);
    const s = await submitted();
    const byOperator = await apiCall(
      p.servers.api,
      operator.key,
      'POST',
      `/api/v1/console/submissions/${s.id}/approve`,
      {},
    );
    expect(byOperator.statusCode).toBe(403);
    expect(byOperator.json().code).toBe('key_scope_denied');
  });

  test('approval numbers restart with the Almaty year', async () => {
    // 00:30 on 1 January in Almaty is still 2026 in UTC.
    p.clock.set(new Date('2027-01-01T00:30:00+05:00'));
    try {
      const s = await submitted({ period_from: '2027-01-01', period_to: '2027-01-31' });
      const res = await approve(p, s.id);
      expect(res.json().approval_number).toBe('APR-2027-000001');
    } finally {
      p.clock.set(NOW);
    }
  });
});

describe('POST /api/v1/console/submissions/{id}/reject', () => {
  test('needs a reason; moves in_review to rejected; a decided submission is 409', async () => {
    const s = await submitted();
    const none = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/submissions/${s.id}/reject`,
      {},
    );
    expect(none.statusCode).toBe(422);
    expect(none.json().errors).toContainEqual(expect.objectContaining({ path: '/reason', code: 'required' }));
    const res = await reject(p, s.id, '  misleading claims ');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id: s.id, state: 'rejected', reject_reason: 'misleading claims' });
    expect((await reject(p, s.id)).statusCode).toBe(409);
    expect((await approve(p, s.id)).json().code).toBe('state_conflict');
  });
});

describe('POST /api/v1/console/approvals/{number}/revoke and the revocation list', () => {
  test('revocations record leaves and publish consecutive signed list versions', async () => {
    const a = (await approve(p, (await submitted()).id)).json().approval_number as string;
    const b = (await approve(p, (await submitted()).id)).json().approval_number as string;
    expect((await revoke(p, 'APR-2026-999999')).statusCode).toBe(404);
    const noReason = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/approvals/${a}/revoke`,
      { reason: '' },
    );
    expect(noReason.statusCode).toBe(422);

    p.clock.set(new Date('2026-11-20T07:00:00Z'));
    const first = await revoke(p, a);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toEqual({
      approval_number: a,
      revoked_at: '2026-11-20T12:00:00.000+05:00',
      revocation_list_version: 1,
    });
    expect((await revoke(p, a)).json().code).toBe('state_conflict');

    p.clock.set(new Date('2026-11-20T08:00:00Z'));
    expect((await revoke(p, b)).json().revocation_list_version).toBe(2);

    const published = await p.servers.verify.inject({ method: 'GET', url: '/v1/revocations.json' });
    expect(published.statusCode).toBe(200);
    expect(published.headers['content-type']).toMatch(/^application\/json/);
    const list = published.json();
    expect(Value.Check(RevocationList, list)).toBe(true);
    expect(list.body).toEqual({
      version: 2,
      issued_at: '2026-11-20T13:00:00.000+05:00',
      revoked: [
        { approval_number: a, revoked_at: '2026-11-20T12:00:00.000+05:00' },
        { approval_number: b, revoked_at: '2026-11-20T13:00:00.000+05:00' },
      ],
    });
    const authority = await loadAuthority(p.ctx);
    const verified = await verifyCms(base64Decode(list.signature), { roots: parsePem(authority.rootPem) });
    expect(verified.ok && Buffer.from(verified.content).equals(Buffer.from(canonicalBytes(list.body)))).toBe(
      true,
    );

    const { rows } = await p.database.db.query(
      'SELECT revoke_reason, revoked_at FROM approvals WHERE number = $1',
      [a],
    );
    expect(rows[0]).toEqual({ revoke_reason: 'court order', revoked_at: new Date('2026-11-20T07:00:00Z') });
    const leaves = (await ledgerLeavesOfDay(p.database.db, '2026-11-20')).filter(
      (l) => l.approval_number === a,
    );
    expect(leaves.map((l) => l.kind)).toEqual(['approval', 'revocation']);
    const [issued, revoked] = leaves.map(ledgerLeafObject);
    // A revocation leaf names the approval as signed: same manifest and signing time, plus revoked_at.
    expect(revoked).toEqual({ ...issued, kind: 'revocation', revoked_at: '2026-11-20T12:00:00.000+05:00' });
    p.clock.set(NOW);
  });

  test('a list is never issued before the list it follows, nor before a revocation it holds', async () => {
    const [a, b] = [
      (await approve(p, (await submitted()).id)).json().approval_number as string,
      (await approve(p, (await submitted()).id)).json().approval_number as string,
    ];
    const authority = await loadAuthority(p.ctx);
    const principal = { type: 'api_key', id: 'test' } as never;
    // Revocation A reads the clock first but reaches the list's lock second: B, 40 ms later by the clock, takes it
    // while A waits (the lock held here until both wait on it).
    const early = new Date('2026-11-21T06:00:00.000Z');
    const later = new Date('2026-11-21T06:00:00.040Z');
    const holder = await p.database.db.connect();
    let revokedA: ReturnType<typeof revokeApproval> | undefined;
    let revokedB: ReturnType<typeof revokeApproval> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1)', [0x00_0f_f0_0d_30]);
      revokedB = revokeApproval({
        db: p.ctx.db,
        authority,
        principal,
        approvalNumber: b,
        reason: 'b',
        now: later,
      });
      await waitForLockWaiters(1);
      revokedA = revokeApproval({
        db: p.ctx.db,
        authority,
        principal,
        approvalNumber: a,
        reason: 'a',
        now: early,
      });
      await waitForLockWaiters(2);
      await holder.query('COMMIT');
    } finally {
      holder.release();
    }
    const [listB, listA] = await Promise.all([revokedB!, revokedA!]);
    expect(listA.revocationListVersion).toBe(listB.revocationListVersion + 1);
    const { rows } = await p.database.db.query<{
      version: number;
      issued_at: Date;
      body: { issued_at: string; revoked: { approval_number: string; revoked_at: string }[] };
    }>('SELECT version, issued_at, body FROM revocation_lists ORDER BY version');
    for (const [index, row] of rows.entries()) {
      const issued = Date.parse(row.body.issued_at);
      expect(row.issued_at.getTime()).toBe(issued);
      if (index > 0) expect(issued).toBeGreaterThanOrEqual(Date.parse(rows[index - 1]!.body.issued_at));
      for (const entry of row.body.revoked) expect(Date.parse(entry.revoked_at)).toBeLessThanOrEqual(issued);
    }
    expect(rows.at(-1)!.body.issued_at).toBe('2026-11-21T11:00:00.040+05:00');
  });
});

/** Waits until `count` sessions wait for an advisory lock. */
async function waitForLockWaiters(count: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const { rows } = await p.database.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
    );
    if (rows[0]!.n >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`fewer than ${count} sessions wait for the lock`);
}
