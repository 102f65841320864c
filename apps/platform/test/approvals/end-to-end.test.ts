import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { canonicalize } from '@ooh/crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { OpensslWorkspace } from '../../../../packages/crypto/test/helpers/openssl.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  type TestPlatform,
  startTestPlatform,
} from '../support/platform.js';
import { authorityLookupKey, CATEGORY_ID } from './helpers.js';
import { mp4, png } from './media-fixtures.js';

let p: TestPlatform;
let dir: string;
let ws: OpensslWorkspace;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-e2e-approvals-'));
  ws = new OpensslWorkspace();
  // Near the machine's real time: openssl checks the certificates against its own clock.
  p = await startTestPlatform({ dataDir: path.join(dir, 'data'), now: new Date('2026-11-20T06:00:00Z') });
});
afterAll(async () => {
  await p?.close();
  await rm(dir, { recursive: true, force: true });
  ws?.dispose();
});

/** `openssl cms -verify` of a base64 CMS against the published root; answers the signed content. */
async function opensslVerify(signatureBase64: string, rootFile: string, name: string): Promise<string> {
  ws.write(`${name}.p7s`, Buffer.from(signatureBase64, 'base64'));
  // DESIGN.md section 4: "openssl cms -verify -binary -inform DER -CAfile authority-root.pem must accept it", at
  // openssl's own clock.
  const verified = ws.verifyCms(`${name}.p7s`, { ca: rootFile });
  if (!verified.ok) throw new Error(`openssl cms -verify refused ${name}: ${verified.stderr}`);
  return ws.read(`${name}.p7s.out`).toString('utf8');
}

test('create → upload → send → approve → lookup → envelope verified by openssl → revoke → revoked', async () => {
  const api = p.servers.api;
  const call = (key: string, method: 'GET' | 'POST', url: string, body?: unknown) =>
    apiCall(api, key, method, url, body);
  const scopes = ['write:submissions', 'read:creatives'];
  const operatorA = await createOrganisation(p, 'operator', scopes);
  const operatorB = await createOrganisation(p, 'operator', scopes);
  const agency = await createOrganisation(p, 'agency', scopes);
  const authority = await authorityLookupKey(p);
  const a1 = await createStructure(p, operatorA.id);
  const a2 = await createStructure(p, operatorA.id);
  const b1 = await createStructure(p, operatorB.id);

  // 1. The agency creates a fast-track draft on A's and B's structures.
  const created = await call(agency.key, 'POST', '/api/v1/submissions', {
    advertiser_name: 'Steppe Motors LLP',
    period_from: '2026-12-01',
    period_to: '2026-12-31',
    structure_ids: [a1.id, a2.id, b1.id],
    category_id: CATEGORY_ID,
    channel: 'programmatic',
    fast_track: true,
  });
  expect(created.statusCode, created.body).toBe(201);
  const submission = created.json<{ id: string; number: string; state: string }>();
  expect(submission.state).toBe('draft');

  // 2. Upload the video.
  const video = mp4(1920, 1080, 15_000, { seed: 42 });
  const sha256 = createHash('sha256').update(video).digest('hex');
  const uploaded = await api.inject({
    method: 'PUT',
    url: `/api/v1/submissions/${submission.id}/media`,
    headers: { authorization: `Bearer ${agency.key}`, 'content-type': 'video/mp4' },
    payload: video,
  });
  expect(uploaded.statusCode, uploaded.body).toBe(200);
  expect(uploaded.json()).toEqual({ media_sha256: sha256, width: 1920, height: 1080, duration_ms: 15_000 });

  // 3. Send: in review, due 4 working hours later (Friday 11:00 Almaty -> 15:00).
  const sent = await call(agency.key, 'POST', `/api/v1/submissions/${submission.id}/send`);
  expect(sent.statusCode, sent.body).toBe(200);
  expect(sent.json()).toMatchObject({ state: 'in_review', review_due_at: '2026-11-20T15:00:00+05:00' });
  expect(
    (await call(agency.key, 'POST', '/api/v1/creatives/lookup', { hashes: [sha256] })).json().items[0]
      .approvals,
  ).toMatchObject([
    { status: 'pending', approval_number: null, submission_number: submission.number, envelope_url: null },
  ]);

  // A second creative of the agency is rejected: its owner sees it as rejected.
  const other = await call(agency.key, 'POST', '/api/v1/submissions', {
    advertiser_name: 'Steppe Motors LLP',
    period_from: '2026-12-01',
    period_to: '2026-12-15',
    structure_ids: [b1.id],
    category_id: CATEGORY_ID,
  });
  const poster = png(1200, 600, 9);
  const posterSha = createHash('sha256').update(poster).digest('hex');
  await api.inject({
    method: 'PUT',
    url: `/api/v1/submissions/${other.json().id}/media`,
    headers: { authorization: `Bearer ${agency.key}`, 'content-type': 'image/png' },
    payload: poster,
  });
  expect((await call(agency.key, 'POST', `/api/v1/submissions/${other.json().id}/send`)).statusCode).toBe(
    200,
  );
  expect(
    (
      await call(p.adminKey, 'POST', `/api/v1/console/submissions/${other.json().id}/reject`, {
        reason: 'text too small',
      })
    ).statusCode,
  ).toBe(200);
  expect(
    (await call(agency.key, 'POST', '/api/v1/creatives/lookup', { hashes: [posterSha] })).json().items[0]
      .approvals,
  ).toMatchObject([
    {
      status: 'rejected',
      approval_number: null,
      valid_from: '2026-12-01',
      valid_until: '2026-12-15',
      width: 1200,
      height: 600,
    },
  ]);
  expect(
    (await call(operatorB.key, 'POST', '/api/v1/creatives/lookup', { hashes: [posterSha] })).json().items[0]
      .approvals,
  ).toEqual([]);

  // 4. The authority approves A's structures only, from 5 December.
  const approved = await call(p.adminKey, 'POST', `/api/v1/console/submissions/${submission.id}/approve`, {
    valid_from: '2026-12-05',
    structure_ids: [a1.id, a2.id],
  });
  expect(approved.statusCode, approved.body).toBe(201);
  const { approval_number: approvalNumber, envelope_url: envelopeUrl } = approved.json<{
    approval_number: string;
    envelope_url: string;
  }>();

  // 5. Lookups: statuses through the period, seen from the three organisations and the authority.
  const lookupAs = async (key: string) => {
    const res = await call(key, 'POST', '/api/v1/creatives/lookup', { hashes: [sha256] });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{
      items: { sha256: string; approvals: Record<string, unknown>[] }[];
      revocation_list_version: number | null;
    }>();
  };
  const statusAt = async (instant: string) => {
    p.clock.set(new Date(instant));
    return (await lookupAs(agency.key)).items[0]!.approvals[0]!['status'];
  };
  expect(await statusAt('2026-12-04T12:00:00+05:00')).toBe('not_yet_valid');
  expect(await statusAt('2026-12-05T00:00:00+05:00')).toBe('valid');
  expect(await statusAt('2027-01-01T00:00:00+05:00')).toBe('expired');
  p.clock.set(new Date('2026-12-10T12:00:00+05:00'));

  const seenByAgency = await lookupAs(agency.key);
  expect(seenByAgency.revocation_list_version).toBeNull();
  expect(seenByAgency.items[0]!.approvals).toEqual([
    {
      status: 'valid',
      approval_number: approvalNumber,
      submission_number: submission.number,
      valid_from: '2026-12-05',
      valid_until: '2026-12-31',
      structures: [a1.code, a2.code].sort(),
      category_id: CATEGORY_ID,
      duration_ms: 15_000,
      width: 1920,
      height: 1080,
      envelope_url: envelopeUrl,
    },
  ]);
  expect((await lookupAs(operatorA.key)).items[0]!.approvals).toMatchObject([
    { status: 'valid', submission_number: null },
  ]);
  expect((await lookupAs(operatorB.key)).items[0]!.approvals).toEqual([]);
  expect((await lookupAs(authority)).items[0]!.approvals).toMatchObject([
    { approval_number: approvalNumber },
  ]);

  // 6. The envelope, fetched at envelope_url, verified by openssl against the published root.
  const root = await p.servers.verify.inject({ method: 'GET', url: '/v1/authority-root.pem' });
  const rootFile = path.join(dir, 'authority-root.pem');
  await writeFile(rootFile, root.body);
  const envelopeRes = await call(operatorA.key, 'GET', new URL(envelopeUrl).pathname);
  expect(envelopeRes.statusCode).toBe(200);
  const envelope = envelopeRes.json<{ v: number; body: Record<string, unknown>; signature: string }>();
  expect(envelope.v).toBe(1);
  expect(envelope.body).toMatchObject({
    kind: 'approval',
    approval_number: approvalNumber,
    media_sha256: sha256,
  });
  expect(await opensslVerify(envelope.signature, rootFile, 'envelope')).toBe(canonicalize(envelope.body));
  // A signature whose signed content was changed (valid_until moved a day) is refused.
  const der = Buffer.from(envelope.signature, 'base64');
  const at = der.indexOf('"valid_until":"2026-12-31"');
  expect(at).toBeGreaterThan(0);
  der.write('"valid_until":"2026-12-30"', at, 'latin1');
  await expect(opensslVerify(der.toString('base64'), rootFile, 'envelope-tampered')).rejects.toThrow();
  // And a signature checked against another root fails.
  const otherRoot = path.join(dir, 'other-root.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-subj',
      '/CN=other',
      '-keyout',
      path.join(dir, 'other.key'),
      '-out',
      otherRoot,
      '-days',
      '1',
    ],
    { stdio: 'ignore' },
  );
  await expect(opensslVerify(envelope.signature, otherRoot, 'envelope-other')).rejects.toThrow();

  // 7. Revoke: lookups say revoked, the revocation list version rises, the list verifies with openssl.
  const revoked = await call(p.adminKey, 'POST', `/api/v1/console/approvals/${approvalNumber}/revoke`, {
    reason: 'misleading claims',
  });
  expect(revoked.statusCode, revoked.body).toBe(200);
  const after = await lookupAs(operatorA.key);
  expect(after.items[0]!.approvals).toMatchObject([{ status: 'revoked', approval_number: approvalNumber }]);
  expect(after.revocation_list_version).toBe(1);
  const list = await p.servers.verify.inject({ method: 'GET', url: '/v1/revocations.json' });
  expect(list.statusCode).toBe(200);
  const listDoc = list.json<{
    body: { version: number; revoked: { approval_number: string }[] };
    signature: string;
  }>();
  expect(listDoc.body.version).toBe(1);
  expect(listDoc.body.revoked.map((r) => r.approval_number)).toEqual([approvalNumber]);
  expect(await opensslVerify(listDoc.signature, rootFile, 'revocations')).toBe(canonicalize(listDoc.body));
});
