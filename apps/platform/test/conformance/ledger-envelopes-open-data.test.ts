/**
 * Black-box conformance of the approval envelope, the revocation list, the public ledger, the verifier and open data
 * with DESIGN.md sections 4, 6 and 7 and the interface specification, claim by claim. Answers are read through the
 * hosts (inject, or HTTP for the verifier); expected values are computed here from the rules (an own RFC 8785 writer,
 * an own RFC 9162 tree and inclusion path, checked against the shared vectors in reference.test.ts) and signatures are checked by
 * openssl, never by the platform's code.
 *
 * Claims checked elsewhere and not repeated here:
 * - seal JSON, body, p7s and its ledger proof fields: test/conformance/verify-and-devices.test.ts;
 * - the dictionary's fields and texts: test/conformance/verify-and-devices.test.ts, test/open-data/dictionary.test.ts;
 * - revocations.json 404 before the first revocation: test/approvals/decisions.test.ts ("before any revocation");
 * - revocation_list_version null before the first list: test/approvals/lookup.test.ts ("the list version rises from
 *   null") and test/approvals/end-to-end.test.ts;
 * - the envelope's visibility by organisation: test/approvals/lookup.test.ts ("the envelope follows the same
 *   visibility");
 * - open data: the lag to the second, not_published on every route, not_found for months, disclosure rules one by one,
 *   complementary suppression, totals, byte-identical releases: test/open-data/release.test.ts and
 *   test/open-data/disclosure.test.ts (those seed play rows with SQL; here plays come in through the real routes);
 * - a leaf committed after its day was digested goes into the next block: test/seals/ledger.test.ts;
 * - tampering of stored seals, batches, leaves and digests found by the verifier: test/seals/verifier.test.ts.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FEATURES } from '../../src/features.js';
import { createLedgerFeature } from '../../src/ledger/routes.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createSealsFeature, runSealScheduler } from '../../src/seals/index.js';
import { approve, inReview, organisation, revoke, structures } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { startSealPlatform } from '../seals/helpers.js';
import {
  httpSource,
  type PublicSource,
  reportLines,
  type VerifyReport,
  verifyApproval,
  verifySeal,
} from '../../src/verifier/index.js';
import { buildDueReleases } from '../../src/open-data/release.js';
import {
  agentBody,
  cmsBody,
  cmsPlay,
  createOperator,
  insertApproval,
  insertDevice,
  MEDIA,
  play,
  postCms,
  postTelemetry,
  registerSource,
} from '../pop/helpers.js';
import { apiCall, createOrganisation, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { canonical, inclusionPath, merkleRoot, rootFromInclusion, sha256, sha256Hex } from './reference.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../../../', import.meta.url));
const HEX64 = /^[0-9a-f]{64}$/;
const ZERO = '0'.repeat(64);
const UNLIMITED = { burst: 1_000_000, perSecond: 1_000_000 };

// ---------------------------------------------------------------------------------------------------------------
// openssl

interface OpensslRun {
  ok: boolean;
  stdout: string;
  stderr: string;
  files: Record<string, Buffer>;
}

/** Runs openssl in a fresh folder holding `files`; answers its output and the files named in `read`. */
async function openssl(
  args: string[],
  files: Record<string, string | Buffer>,
  read: string[] = [],
): Promise<OpensslRun> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-conformance-openssl-'));
  try {
    for (const [name, content] of Object.entries(files)) await writeFile(path.join(dir, name), content);
    const result = await run('openssl', args, { cwd: dir }).then(
      (r) => ({ ok: true, stdout: String(r.stdout), stderr: String(r.stderr) }),
      (e: { stdout?: string; stderr?: string }) => ({
        ok: false,
        stdout: String(e.stdout ?? ''),
        stderr: String(e.stderr ?? ''),
      }),
    );
    const out: Record<string, Buffer> = {};
    for (const name of read) {
      try {
        out[name] = await readFile(path.join(dir, name));
      } catch {
        // not written
      }
    }
    return { ...result, files: out };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * DESIGN.md section 4 "CMS signature": SignedData, content attached (id-data), ECDSA P-256 with SHA-256, signed
 * attributes contentType, signingTime, messageDigest, signer certificate included; `openssl cms -verify -binary
 * -inform DER -CAfile authority-root.pem` must accept it. Answers the signed content and the signing time.
 */
async function expectDesignCms(
  signatureBase64: string,
  rootPem: string,
): Promise<{ content: Buffer; signingTime: Date }> {
  expect(signatureBase64).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
  const der = Buffer.from(signatureBase64, 'base64');
  // The exact command of DESIGN.md; no -content: the content travels in the signature (attached).
  const verified = await openssl(
    [
      'cms',
      '-verify',
      '-binary',
      '-inform',
      'DER',
      '-in',
      'sig.p7s',
      '-CAfile',
      'authority-root.pem',
      '-out',
      'content.bin',
      '-signer',
      'signer.pem',
    ],
    { 'sig.p7s': der, 'authority-root.pem': rootPem },
    ['content.bin', 'signer.pem'],
  );
  expect(verified.ok, verified.stderr).toBe(true);
  expect(verified.stderr).toContain('Verification successful');
  const content = verified.files['content.bin']!;
  expect(content).toBeDefined();

  // The structure, read by openssl's ASN.1 parser.
  const parsed = await openssl(['asn1parse', '-inform', 'DER', '-in', 'sig.p7s'], { 'sig.p7s': der });
  expect(parsed.ok, parsed.stderr).toBe(true);
  const objects = [...parsed.stdout.matchAll(/OBJECT\s+:(\S+)/g)].map((m) => m[1]!);
  // ContentInfo of type signedData; encapsulated content id-data.
  expect(objects[0]).toBe('pkcs7-signedData');
  expect(objects).toContain('pkcs7-data');
  expect(objects).toContain('sha256');
  expect(objects).toContain('ecdsa-with-SHA256');
  // Signed attributes, each once: contentType (id-data), signingTime, messageDigest.
  for (const attribute of ['contentType', 'signingTime', 'messageDigest'])
    expect(
      objects.filter((o) => o === attribute),
      attribute,
    ).toHaveLength(1);
  const afterContentType = objects[objects.indexOf('contentType') + 1];
  expect(afterContentType).toBe('pkcs7-data');
  // messageDigest = SHA-256 of the content.
  const digest = /:messageDigest\s*\n.*?\n?.*?OCTET STRING\s+\[HEX DUMP\]:([0-9A-F]+)/.exec(parsed.stdout);
  expect(digest, parsed.stdout).not.toBeNull();
  expect(digest![1]!.toLowerCase()).toBe(sha256Hex(content));
  const time = /:signingTime\s*\n.*?\n?.*?UTCTIME\s+:(\d{12})Z/.exec(parsed.stdout);
  expect(time, parsed.stdout).not.toBeNull();
  const t = time![1]!;
  const signingTime = new Date(
    `20${t.slice(0, 2)}-${t.slice(2, 4)}-${t.slice(4, 6)}T${t.slice(6, 8)}:${t.slice(8, 10)}:${t.slice(10, 12)}Z`,
  );

  // The signer certificate travels in the signature and holds a P-256 key.
  const listed = await openssl(['pkcs7', '-inform', 'DER', '-in', 'sig.p7s', '-print_certs'], {
    'sig.p7s': der,
  });
  expect(listed.ok, listed.stderr).toBe(true);
  const signerPem = verified.files['signer.pem']!.toString('utf8');
  const signerBase64 = signerPem.replace(/-----[^-]+-----|\s/g, '');
  expect(listed.stdout.replace(/\s/g, '')).toContain(signerBase64);
  const signer = await openssl(['x509', '-in', 'signer.pem', '-noout', '-text'], { 'signer.pem': signerPem });
  expect(signer.stdout).toMatch(/NIST CURVE: P-256|prime256v1/);
  return { content, signingTime };
}

// ---------------------------------------------------------------------------------------------------------------

type P = Awaited<ReturnType<typeof startSealPlatform>>;

interface Envelope {
  v: number;
  body: Record<string, unknown>;
  signature: string;
}

interface BlockDoc {
  day: string;
  block_height: number;
  status: string;
  leaf_count: number;
  merkle_root: string;
  anchor_sha256: string;
  digest: string;
  leaves: { index: number; leaf: Record<string, unknown>; leaf_sha256: string }[];
}

interface LedgerInfoDoc {
  day: string;
  status: string;
  block_height: number;
  digest: string;
  proof: {
    v: number;
    day: string;
    leaf: Record<string, unknown>;
    leaf_sha256: string;
    index: number;
    leaf_count: number;
    path: { side: string; hash: string }[];
    merkle_root: string;
    anchor_sha256: string;
    digest: string;
  };
}

/** DESIGN.md section 6: digest = SHA-256 of the canonical JSON of {v:1, day, block_height, leaf_count, merkle_root, prev_digest}. */
const blockDigest = (b: {
  day: string;
  block_height: number;
  leaf_count: number;
  merkle_root: string;
  anchor_sha256: string;
}) =>
  sha256Hex(
    canonical({
      v: 1,
      day: b.day,
      block_height: b.block_height,
      leaf_count: b.leaf_count,
      merkle_root: b.merkle_root,
      prev_digest: b.anchor_sha256,
    }),
  );

/** A ledger position checked as a third party must: leaf hash, derived sides, root and digest recomputed here. */
function expectProofHolds(info: LedgerInfoDoc, block: BlockDoc) {
  const { proof } = info;
  expect(proof.v).toBe(1);
  expect(proof.day).toBe(info.day);
  expect(info.day).toBe(block.day);
  expect(proof.leaf_sha256).toBe(sha256Hex(canonical(proof.leaf)));
  expect(proof.index).toBeLessThan(proof.leaf_count);
  expect(proof.leaf_count).toBe(block.leaf_count);
  const leaves = block.leaves.map((l) => sha256(canonical(l.leaf)));
  expect(proof.path).toEqual(inclusionPath(leaves, proof.index));
  const walked = rootFromInclusion(
    proof.index,
    proof.leaf_count,
    sha256(canonical(proof.leaf)),
    proof.path.map((s) => Buffer.from(s.hash, 'hex')),
  );
  expect(walked?.root.toString('hex')).toBe(proof.merkle_root);
  expect(proof.merkle_root).toBe(block.merkle_root);
  expect(proof.anchor_sha256).toBe(block.anchor_sha256);
  expect(info.block_height).toBe(block.block_height);
  expect(proof.digest).toBe(blockDigest({ ...proof, block_height: info.block_height }));
  expect(info.digest).toBe(proof.digest);
  expect(info.status).toBe(block.status);
}

/** GET {verify_url}/v1/approvals/{number}, as far as these tests read it. */
interface PublicApprovalDoc {
  status: string;
  valid_until: string;
  revoked_at: string | null;
  manifest: Record<string, unknown>;
  manifest_sha256: string;
  ledger: { approval: LedgerInfoDoc | null; revocation: LedgerInfoDoc | null };
}

const MANIFEST_FIELDS = [
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
];

describe('approval envelopes, the revocation list and the public ledger (DESIGN.md sections 4 and 6)', () => {
  let p: P;
  let servers: Servers;
  let verifyUrl = '';
  let rootPem = '';
  let reader: { id: string; key: string };
  let operator: { id: string; key: string };
  const approvals: { number: string; envelopeUrl: string; sha256: string; codes: string[] }[] = [];
  const revokedAt = new Map<string, string>();

  const verify = (url: string) => servers.verify.inject({ method: 'GET', url });
  const api = (key: string | null, method: 'GET' | 'POST', url: string, body?: unknown) =>
    apiCall(servers.api, key, method, url, body);

  async function issue(seed: number, fields: { period_from: string; period_to: string }) {
    const sts = await structures(p, operator.id, 2);
    const s = await inReview(
      p,
      operator.key,
      { bytes: png(80 + seed, 40 + seed, seed), type: 'image/png' },
      {
        structure_ids: sts.map((x) => x.id),
        ...fields,
      },
    );
    const res = await approve(p, s.id);
    expect(res.statusCode, res.body).toBe(201);
    const { approval_number, envelope_url } = res.json<{ approval_number: string; envelope_url: string }>();
    approvals.push({
      number: approval_number,
      envelopeUrl: envelope_url,
      sha256: s.sha256,
      codes: sts.map((x) => x.code).sort(),
    });
    return approval_number;
  }

  async function revokeNow(number: string) {
    const res = await revoke(p, number);
    expect(res.statusCode, res.body).toBe(200);
    revokedAt.set(number, res.json<{ revoked_at: string }>().revoked_at);
  }

  async function block(day: string): Promise<BlockDoc> {
    const res = await verify(`/v1/ledger/blocks/${day}`);
    expect(res.statusCode, `${day}: ${res.body}`).toBe(200);
    return res.json<BlockDoc>();
  }

  beforeAll(async () => {
    // Friday 2026-11-20 10:00 Almaty, near the machine's clock (openssl judges certificates by its own).
    p = await startSealPlatform(new Date('2026-11-20T05:00:00Z'));
    servers = await buildServers(
      p.ctx,
      FEATURES.map((f) =>
        f.name === 'seals'
          ? createSealsFeature({ rateLimit: UNLIMITED })
          : f.name === 'ledger'
            ? createLedgerFeature({ rateLimit: UNLIMITED, witnessIntervalMs: null })
            : f,
      ),
    );
    await servers.verify.listen({ host: '127.0.0.1', port: 0 });
    const address = servers.verify.server.address();
    verifyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    await runSealScheduler(p.ctx);
    rootPem = (await verify('/v1/authority-root.pem')).body;
    expect(rootPem).toContain('-----BEGIN CERTIFICATE-----');

    operator = await organisation(p, 'operator');
    reader = await organisation(p, 'agency');

    // Day 1, 2026-11-20: approvals A0 and A1, then A0 revoked.
    await issue(1, { period_from: '2026-11-20', period_to: '2026-12-31' });
    p.clock.set(new Date('2026-11-20T06:00:00Z'));
    await issue(2, { period_from: '2026-12-01', period_to: '2026-12-31' });
    p.clock.set(new Date('2026-11-20T07:30:00Z'));
    await revokeNow(approvals[0]!.number);

    // Day 2, 2026-11-21: at 01:00 Almaty the 20th is sealed (a stats_seal leaf of the 21st) and its block digested;
    // then A2 and A3 are issued and A1 revoked.
    p.clock.set(new Date('2026-11-20T20:00:00Z'));
    await runSealScheduler(p.ctx);
    p.clock.set(new Date('2026-11-21T05:00:00Z'));
    await issue(3, { period_from: '2026-12-01', period_to: '2026-12-31' });
    p.clock.set(new Date('2026-11-21T05:30:00Z'));
    await issue(4, { period_from: '2026-12-01', period_to: '2026-12-31' });
    p.clock.set(new Date('2026-11-21T07:00:00Z'));
    await revokeNow(approvals[1]!.number);

    // Day 3, 2026-11-22: the 21st is sealed and digested. Then nobody runs the scheduler until 2026-11-25 01:00
    // Almaty: the seals of the 22nd, 23rd and 24th are made on the 25th, so the blocks of the 23rd and 24th hold
    // nothing and the 22nd only the seal of the 21st.
    p.clock.set(new Date('2026-11-21T20:00:00Z'));
    await runSealScheduler(p.ctx);
    p.clock.set(new Date('2026-11-24T20:00:00Z'));
    await runSealScheduler(p.ctx);
  });
  afterAll(async () => {
    if (servers) await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
    await p?.close();
  });

  describe('the approval envelope', () => {
    test('envelope_url needs the same credentials as the lookup: none 401, another scope 403, read:creatives 200', async () => {
      const a = approvals[2]!;
      const url = new URL(a.envelopeUrl).pathname;
      const otherScope = await createOrganisation(p, 'operator', ['write:submissions']);
      const lookupOf = (key: string | null) =>
        api(key, 'POST', '/api/v1/creatives/lookup', { hashes: [a.sha256] });
      for (const [key, status, code] of [
        [null, 401, null],
        ['not-a-key', 401, 'invalid_api_key'],
        [otherScope.key, 403, 'key_scope_denied'],
        [operator.key, 200, null],
      ] as const) {
        const envelope = await api(key, 'GET', url);
        const lookup = await lookupOf(key);
        expect(envelope.statusCode, `${key}: ${envelope.body}`).toBe(status);
        expect(lookup.statusCode, `${key}: ${lookup.body}`).toBe(status);
        if (code !== null) {
          expect(envelope.json().code).toBe(code);
          expect(lookup.json().code).toBe(code);
        }
      }
      // The lookup names this very address.
      const found = (await lookupOf(operator.key)).json<{
        items: { approvals: { approval_number: string; envelope_url: string }[] }[];
      }>();
      expect(found.items[0]!.approvals.map((x) => x.envelope_url)).toEqual([a.envelopeUrl]);
    });

    test('{"v":1, "body": {...manifest...}, "signature"}: the manifest fields exactly, with their values', async () => {
      for (const a of approvals) {
        const res = await api(operator.key, 'GET', new URL(a.envelopeUrl).pathname);
        expect(res.statusCode).toBe(200);
        expect(res.headers['content-type']).toMatch(/^application\/json/);
        const envelope = res.json<Envelope>();
        expect(Object.keys(envelope).sort()).toEqual(['body', 'signature', 'v']);
        expect(envelope.v).toBe(1);
        expect(Object.keys(envelope.body).sort()).toEqual(MANIFEST_FIELDS);
        const issuedAt = envelope.body['issued_at'] as string;
        expect(envelope.body).toEqual({
          kind: 'approval',
          approval_number: a.number,
          media_sha256: a.sha256,
          structures: a.codes,
          valid_from: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
          valid_until: '2026-12-31',
          category_id: 1564,
          duration_ms: null,
          width: expect.any(Number),
          height: expect.any(Number),
          // RFC 3339 in Almaty time.
          issued_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?\+05:00$/),
        });
        // The PNG's own size.
        const seed = approvals.indexOf(a) + 1;
        expect([envelope.body['width'], envelope.body['height']]).toEqual([80 + seed, 40 + seed]);
        expect(Number.isNaN(new Date(issuedAt).getTime())).toBe(false);
      }
    });

    test('the signature: CMS SignedData as DESIGN.md section 4 says, over the canonical JSON of body, accepted by openssl', async () => {
      const a = approvals[2]!;
      const envelope = (await api(operator.key, 'GET', new URL(a.envelopeUrl).pathname)).json<Envelope>();
      const { content, signingTime } = await expectDesignCms(envelope.signature, rootPem);
      expect(content.toString('utf8')).toBe(canonical(envelope.body));
      // Signed when issued (whole seconds in a UTCTime).
      expect(signingTime.getTime()).toBe(
        Math.floor(new Date(envelope.body['issued_at'] as string).getTime() / 1000) * 1000,
      );
    });

    test('valid_from and valid_until are Almaty dates, inclusive: valid from 00:00 of the first day to 24:00 of the last', async () => {
      const a = approvals[2]!; // 2026-12-01 .. 2026-12-31
      const statusAt = async (instant: string) => {
        p.clock.set(new Date(instant));
        const res = await verify(`/v1/approvals/${a.number}`);
        expect(res.statusCode).toBe(200);
        return res.json<{ status: string }>().status;
      };
      const saved = p.clock.now();
      try {
        expect(await statusAt('2026-11-30T23:59:59.999+05:00')).toBe('not_yet_valid');
        expect(await statusAt('2026-12-01T00:00:00.000+05:00')).toBe('valid');
        expect(await statusAt('2026-12-31T23:59:59.999+05:00')).toBe('valid');
        expect(await statusAt('2027-01-01T00:00:00.000+05:00')).toBe('expired');
      } finally {
        p.clock.set(saved);
      }
    });
  });

  describe('the revocation list', () => {
    test('public at {verify_url}/v1/revocations.json: {v:1, body:{version, issued_at, revoked:[{approval_number, revoked_at}]}, signature}', async () => {
      const res = await verify('/v1/revocations.json');
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const list = res.json<Envelope>();
      expect(Object.keys(list).sort()).toEqual(['body', 'signature', 'v']);
      expect(list.v).toBe(1);
      expect(Object.keys(list.body).sort()).toEqual(['issued_at', 'revoked', 'version']);
      expect(list.body['version']).toBe(2);
      expect(list.body['issued_at']).toBe(revokedAt.get(approvals[1]!.number));
      const revoked = list.body['revoked'] as Record<string, unknown>[];
      for (const entry of revoked)
        expect(Object.keys(entry).sort()).toEqual(['approval_number', 'revoked_at']);
      expect(revoked).toEqual([
        { approval_number: approvals[0]!.number, revoked_at: revokedAt.get(approvals[0]!.number) },
        { approval_number: approvals[1]!.number, revoked_at: revokedAt.get(approvals[1]!.number) },
      ]);
    });

    test('signed the same way as an envelope: CMS over the canonical JSON of body, accepted by openssl', async () => {
      const list = (await verify('/v1/revocations.json')).json<Envelope>();
      const { content, signingTime } = await expectDesignCms(list.signature, rootPem);
      expect(content.toString('utf8')).toBe(canonical(list.body));
      expect(signingTime.toISOString()).toBe('2026-11-21T07:00:00.000Z');
    });

    test('revocation_list_version in the lookup is the newest version', async () => {
      const res = await api(operator.key, 'POST', '/api/v1/creatives/lookup', {
        hashes: approvals.map((a) => a.sha256),
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().revocation_list_version).toBe(2);
      // The same for an organisation that sees none of them.
      const other = await api(reader.key, 'POST', '/api/v1/creatives/lookup', {
        hashes: [approvals[0]!.sha256],
      });
      expect(other.json()).toEqual({
        items: [{ sha256: approvals[0]!.sha256, approvals: [] }],
        revocation_list_version: 2,
      });
    });
  });

  describe('the public ledger', () => {
    test('one block per Almaty day from the first, empty days too; block_height from 1; anchor_sha256 the previous digest (64 zeros first); the digest recomputed', async () => {
      const days = ['2026-11-20', '2026-11-21', '2026-11-22', '2026-11-23', '2026-11-24'];
      let previous: BlockDoc | null = null;
      for (const [i, day] of days.entries()) {
        const b = await block(day);
        expect(b.day).toBe(day);
        expect(b.block_height).toBe(i + 1);
        expect(['digested', 'anchored']).toContain(b.status);
        expect(b.anchor_sha256).toBe(previous ? previous.digest : ZERO);
        expect(b.leaf_count).toBe(b.leaves.length);
        expect(b.leaves.map((l) => l.index)).toEqual(b.leaves.map((_, n) => n));
        for (const l of b.leaves) expect(l.leaf_sha256).toBe(sha256Hex(canonical(l.leaf)));
        expect(b.merkle_root).toBe(
          merkleRoot(b.leaves.map((l) => sha256(canonical(l.leaf)))).toString('hex'),
        );
        expect(b.digest).toMatch(HEX64);
        expect(b.digest).toBe(blockDigest(b));
        previous = b;
      }
      // The empty days: no leaves, the empty tree's root.
      for (const day of ['2026-11-23', '2026-11-24']) {
        const b = await block(day);
        expect(b.leaf_count).toBe(0);
        expect(b.merkle_root).toBe(sha256Hex(''));
      }
      // The 25th has not ended: not digested. The head is the 24th.
      expect((await verify('/v1/ledger/blocks/2026-11-25')).statusCode).toBe(404);
      const head = (await verify('/v1/ledger/head')).json<BlockDoc>();
      expect(head).toMatchObject({ day: '2026-11-24', block_height: 5, digest: previous!.digest });
    });

    test('leaves in order of recording, {kind, approval_number, manifest_sha256, signed_at, revoked_at} for approval, revocation and stats_seal', async () => {
      const manifests = new Map<string, Envelope>();
      for (const a of approvals) {
        manifests.set(
          a.number,
          (await api(operator.key, 'GET', new URL(a.envelopeUrl).pathname)).json<Envelope>(),
        );
      }
      const approvalLeaf = (number: string) => ({
        kind: 'approval',
        approval_number: number,
        manifest_sha256: sha256Hex(canonical(manifests.get(number)!.body)),
        signed_at: manifests.get(number)!.body['issued_at'],
        revoked_at: null,
      });
      const revocationLeaf = (number: string) => ({
        ...approvalLeaf(number),
        kind: 'revocation',
        revoked_at: revokedAt.get(number),
      });
      const sealLeaf = async (day: string) => {
        const seal = (await verify(`/v1/stats-seals/${day}`)).json<{ body: unknown; signed_at: string }>();
        return {
          kind: 'stats_seal',
          approval_number: null,
          manifest_sha256: sha256Hex(canonical(seal.body)),
          signed_at: seal.signed_at,
          revoked_at: null,
        };
      };
      const timesAsInstants = (leaf: Record<string, unknown>) => ({
        ...leaf,
        signed_at: new Date(leaf['signed_at'] as string).getTime(),
        revoked_at: leaf['revoked_at'] === null ? null : new Date(leaf['revoked_at'] as string).getTime(),
      });
      const expectLeaves = async (day: string, expected: Record<string, unknown>[]) => {
        const b = await block(day);
        for (const l of b.leaves) {
          expect(Object.keys(l.leaf).sort()).toEqual(
            ['approval_number', 'kind', 'manifest_sha256', 'revoked_at', 'signed_at'].sort(),
          );
        }
        expect(b.leaves.map((l) => timesAsInstants(l.leaf))).toEqual(expected.map(timesAsInstants));
      };
      const [a0, a1, a2, a3] = approvals.map((a) => a.number);
      await expectLeaves('2026-11-20', [approvalLeaf(a0!), approvalLeaf(a1!), revocationLeaf(a0!)]);
      await expectLeaves('2026-11-21', [
        await sealLeaf('2026-11-20'),
        approvalLeaf(a2!),
        approvalLeaf(a3!),
        revocationLeaf(a1!),
      ]);
      await expectLeaves('2026-11-22', [await sealLeaf('2026-11-21')]);
    });

    test('a third party checks an approval without credentials: GET /v1/approvals/{number} with proofs of issue and revocation', async () => {
      const a = approvals[1]!; // issued on the 20th, revoked on the 21st
      const res = await verify(`/v1/approvals/${a.number}`);
      expect(res.statusCode).toBe(200);
      const doc = res.json<{
        manifest: Record<string, unknown>;
        manifest_sha256: string;
        status: string;
        revoked_at: string | null;
        ledger: { approval: LedgerInfoDoc | null; revocation: LedgerInfoDoc | null };
      }>();
      expect(doc.status).toBe('revoked');
      const envelope = (await api(operator.key, 'GET', new URL(a.envelopeUrl).pathname)).json<Envelope>();
      expect(doc.manifest).toEqual(envelope.body);
      expect(doc.manifest_sha256).toBe(sha256Hex(canonical(envelope.body)));
      expect(doc.ledger.approval).not.toBeNull();
      expect(doc.ledger.revocation).not.toBeNull();
      expectProofHolds(doc.ledger.approval!, await block('2026-11-20'));
      expectProofHolds(doc.ledger.revocation!, await block('2026-11-21'));
      expect(doc.ledger.approval!.proof.leaf).toMatchObject({
        kind: 'approval',
        approval_number: a.number,
        manifest_sha256: doc.manifest_sha256,
        revoked_at: null,
      });
      expect(doc.ledger.revocation!.proof.leaf).toMatchObject({
        kind: 'revocation',
        approval_number: a.number,
        manifest_sha256: doc.manifest_sha256,
        revoked_at: revokedAt.get(a.number),
      });
    });

    test("a seal's ledger proof is public and holds against its block (index, sides, root, digest recomputed)", async () => {
      const seal = (await verify('/v1/stats-seals/2026-11-20')).json<{ ledger: LedgerInfoDoc }>();
      expect(seal.ledger).not.toBeNull();
      expectProofHolds(seal.ledger, await block('2026-11-21'));
      expect(seal.ledger.proof.index).toBe(0);
    });
  });

  describe('the verifier refuses what DESIGN.md section 4 says it must (verify CLI, src/verifier)', () => {
    /** The verify host, with the seal of `day` rewritten by `change` on its way (a dishonest host). */
    const tampered = (day: string, change: (seal: { ledger: LedgerInfoDoc }) => void): PublicSource => {
      const honest = httpSource(verifyUrl);
      return {
        origin: honest.origin,
        async get(route) {
          const answer = await honest.get(route);
          if (route !== `/v1/stats-seals/${day}` || answer.status !== 200) return answer;
          const seal = JSON.parse(answer.body.toString('utf8'));
          change(seal);
          return { status: 200, body: Buffer.from(JSON.stringify(seal)) };
        },
      };
    };
    const leafFailures = async (source: PublicSource) => {
      const report = await verifySeal({ day: '2026-11-20', source, rootPem });
      return {
        ok: report.ok,
        leaf: report.checks.filter((c) => c.state === 'failed' && c.subject?.startsWith('ledger leaf')),
      };
    };

    test('the honest seal of 2026-11-20 passes every check (index 0 of 4 leaves, sides right, right)', async () => {
      const report = await verifySeal({ day: '2026-11-20', source: httpSource(verifyUrl), rootPem });
      expect(report.checks.filter((c) => c.state === 'failed')).toEqual([]);
      expect(report.ok).toBe(true);
      const seal = (await verify('/v1/stats-seals/2026-11-20')).json<{ ledger: LedgerInfoDoc }>();
      expect(seal.ledger.proof.leaf_count).toBe(4);
      expect(seal.ledger.proof.path.map((s) => s.side)).toEqual(['right', 'right']);
    });

    test('sides are derived from index and leaf_count: the same path under index 3 (sides left, left) is refused', async () => {
      // A verifier that followed the sides given would reach the true root and accept.
      const result = await leafFailures(
        tampered('2026-11-20', (seal) => {
          seal.ledger.proof.index = 3;
        }),
      );
      expect(result.ok).toBe(false);
      expect(result.leaf.map((c) => c.reason)).toEqual(['proof_does_not_reach_root']);
    });

    test('a path whose sides disagree with the index is refused, even when its hashes lead to the root', async () => {
      // Index 0 of 4: the true sides are right, right; the first one relabelled.
      const result = await leafFailures(
        tampered('2026-11-20', (seal) => {
          seal.ledger.proof.path[0]!.side = 'left';
        }),
      );
      expect(result.ok).toBe(false);
      expect(result.leaf.map((c) => c.reason)).toEqual(['proof_does_not_reach_root']);
    });

    test('index >= leaf_count is refused', async () => {
      const result = await leafFailures(
        tampered('2026-11-20', (seal) => {
          seal.ledger.proof.index = seal.ledger.proof.leaf_count;
        }),
      );
      expect(result.ok).toBe(false);
      expect(result.leaf.map((c) => c.reason)).toEqual(['proof_does_not_reach_root']);
    });

    test('a path one step too long or too short is refused', async () => {
      for (const change of [
        (seal: { ledger: LedgerInfoDoc }) => {
          seal.ledger.proof.path.push({ side: 'right', hash: ZERO });
        },
        (seal: { ledger: LedgerInfoDoc }) => {
          seal.ledger.proof.path.pop();
        },
      ]) {
        const result = await leafFailures(tampered('2026-11-20', change));
        expect(result.ok).toBe(false);
        expect(result.leaf.map((c) => c.reason)).toEqual(['proof_does_not_reach_root']);
      }
    });

    test('leaf_sha256 is recomputed from leaf: a leaf rewritten (same instant, other text) under the old leaf_sha256 is refused', async () => {
      // A verifier that took leaf_sha256 as given would walk the true path to the true root and accept.
      const result = await leafFailures(
        tampered('2026-11-20', (seal) => {
          const leaf = seal.ledger.proof.leaf;
          leaf['signed_at'] = new Date(leaf['signed_at'] as string).toISOString();
        }),
      );
      expect(result.ok).toBe(false);
      expect(result.leaf.map((c) => c.reason)).toEqual(['leaf_hash_differs']);
    });
  });

  describe('the verify CLI checks an approval from public data only (DESIGN.md section 6)', () => {
    /** The verifier's clock is the platform's test clock (statuses are judged by it). */
    const nowMs = () => p.clock.now().getTime();
    const failures = (report: VerifyReport) =>
      reportLines(report.checks)
        .filter((c) => c.kind === 'fail')
        .map((c) => `${c.subject}: ${c.message}`);
    /** The verify host, with the answer of `route` rewritten by `change` on its way (a dishonest host). */
    const rewriting = (route: string, change: (doc: PublicApprovalDoc) => void): PublicSource => {
      const honest = httpSource(verifyUrl);
      return {
        origin: honest.origin,
        async get(path) {
          const answer = await honest.get(path);
          if (path !== route || answer.status !== 200) return answer;
          const doc = JSON.parse(answer.body.toString('utf8'));
          change(doc);
          return { status: 200, body: Buffer.from(JSON.stringify(doc)) };
        },
      };
    };

    test('an issued, a revoked approval: every check passes; the leaves, the chain and the revocation list are checked', async () => {
      for (const a of [approvals[2]!, approvals[1]!]) {
        const report = await verifyApproval({
          now: nowMs(),
          number: a.number,
          source: httpSource(verifyUrl),
          rootPem,
        });
        expect(failures(report)).toEqual([]);
        expect(report.ok).toBe(true);
        const reasons = report.checks.filter((c) => c.state === 'ok').map((c) => c.reason);
        expect(reasons).toContain('manifest_matches');
        expect(reasons).toContain('chain_holds');
        const revoked = revokedAt.has(a.number);
        expect(reasons.filter((r) => r === 'approval_leaf_holds')).toHaveLength(revoked ? 2 : 1);
        expect(reasons).toContain(revoked ? 'in_revocation_list' : 'not_in_revocation_list');
      }
    });

    test('the envelope a player holds: its signature against the root and its body the manifest of the ledger', async () => {
      const a = approvals[3]!;
      const text = (await api(operator.key, 'GET', new URL(a.envelopeUrl).pathname)).body;
      const good = await verifyApproval({
        now: nowMs(),
        number: a.number,
        source: httpSource(verifyUrl),
        rootPem,
        envelopeText: text,
      });
      expect(failures(good)).toEqual([]);
      expect(good.checks.map((c) => c.reason)).toContain('envelope_matches');
      // The body changed after signing: refused.
      const changed = text.replace('"valid_until":"2026-12-31"', '"valid_until":"2027-12-31"');
      expect(changed).not.toBe(text);
      const bad = await verifyApproval({
        now: nowMs(),
        number: a.number,
        source: httpSource(verifyUrl),
        rootPem,
        envelopeText: changed,
      });
      expect(bad.ok).toBe(false);
      expect(bad.checks.filter((c) => c.state === 'failed').map((c) => c.reason)).toEqual([
        'document_content_differs',
      ]);
      // Another approval's envelope: signed, but not this manifest.
      const other = (await api(operator.key, 'GET', new URL(approvals[2]!.envelopeUrl).pathname)).body;
      const wrong = await verifyApproval({
        now: nowMs(),
        number: a.number,
        source: httpSource(verifyUrl),
        rootPem,
        envelopeText: other,
      });
      expect(wrong.checks.filter((c) => c.state === 'failed').map((c) => c.reason)).toEqual([
        'envelope_differs',
      ]);
    });

    test('a dishonest host is caught: a changed manifest, a hidden revocation, a proof with wrong sides', async () => {
      const a = approvals[1]!; // revoked
      const route = `/v1/approvals/${a.number}`;
      // The manifest's last day moved, its hash recomputed to match: the ledger leaf names the signed manifest.
      const moved = await verifyApproval({
        now: nowMs(),
        number: a.number,
        rootPem,
        source: rewriting(route, (doc) => {
          doc.manifest['valid_until'] = '2027-12-31';
          doc.valid_until = '2027-12-31';
          doc.manifest_sha256 = sha256Hex(canonical(doc.manifest));
        }),
      });
      expect(moved.ok).toBe(false);
      expect(failures(moved).join('\n')).toMatch(/^ledger leaf of approval .*: manifest_sha256 differs/m);
      // The revocation hidden: the ledger and the signed revocation list still name it.
      const hidden = await verifyApproval({
        now: nowMs(),
        number: a.number,
        rootPem,
        source: rewriting(route, (doc) => {
          // A consistent lie: the status its dates give without the revocation.
          doc.status = 'not_yet_valid';
          doc.revoked_at = null;
          doc.ledger.revocation = null;
        }),
      });
      expect(hidden.ok).toBe(false);
      // The ledger blocks walked hold its revocation leaf, and the signed revocation list still names it.
      expect(hidden.checks.filter((c) => c.state === 'failed').map((c) => c.reason)).toEqual([
        'revocation_withheld',
        'listed_but_not_revoked',
      ]);
      // The status: "valid" for an approval whose first day has not come (Almaty, by the verifier's clock).
      const early = await verifyApproval({
        now: nowMs(),
        number: approvals[2]!.number,
        rootPem,
        source: rewriting(`/v1/approvals/${approvals[2]!.number}`, (doc) => {
          expect(doc.status).toBe('not_yet_valid');
          doc.status = 'valid';
        }),
      });
      expect(early.checks.filter((c) => c.state === 'failed').map((c) => c.reason)).toEqual([
        'status_differs',
      ]);
      // The proof of issue with a side relabelled.
      const sides = await verifyApproval({
        now: nowMs(),
        number: a.number,
        rootPem,
        source: rewriting(route, (doc) => {
          const step = doc.ledger.approval!.proof.path[0]!;
          step.side = step.side === 'left' ? 'right' : 'left';
        }),
      });
      expect(sides.ok).toBe(false);
      expect(sides.checks.filter((c) => c.state === 'failed').map((c) => c.reason)).toEqual([
        'proof_does_not_reach_root',
      ]);
      // A revocation list signed under another root is refused.
      const otherRoot = await openssl(
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
          'other.key',
          '-out',
          'other.pem',
          '-days',
          '1',
        ],
        {},
        ['other.pem'],
      );
      expect(otherRoot.ok, otherRoot.stderr).toBe(true);
      const unpinned = await verifyApproval({
        now: nowMs(),
        number: a.number,
        rootPem: otherRoot.files['other.pem']!.toString('utf8'),
        source: httpSource(verifyUrl),
      });
      expect(unpinned.ok).toBe(false);
      expect(unpinned.checks.find((c) => c.subject === 'revocation list')?.state).toBe('failed');
    });

    test('`npm run verify -- approval <number>`: exit 0 and a line per check; 1 when a check fails; 2 on bad arguments', async () => {
      const rootFile = path.join(p.dataDir, 'conformance-root.pem');
      await writeFile(rootFile, rootPem);
      const cli = [
        '--conditions=source',
        '--import',
        'tsx',
        path.join(REPO, 'apps/platform/src/verifier/cli.ts'),
      ];
      const verifyCli = async (...args: string[]) => {
        try {
          const { stdout, stderr } = await run('node', [...cli, ...args], {
            cwd: REPO,
            env: { ...process.env, CI: '1' },
          });
          return { code: 0, stdout, stderr };
        } catch (error) {
          const e = error as { code: number; stdout: string; stderr: string };
          return { code: e.code, stdout: e.stdout, stderr: e.stderr };
        }
      };
      const a = approvals[1]!;
      const good = await verifyCli('approval', a.number, '--from', verifyUrl, '--root', rootFile);
      expect(good.code, good.stdout + good.stderr).toBe(0);
      expect(good.stdout).toContain(`approval ${a.number}: every check passed`);
      expect(good.stdout).toMatch(
        new RegExp(`^ok +ledger leaf of approval ${a.number} \\(block 2026-11-20, index 1\\)`, 'm'),
      );
      expect(good.stdout).toMatch(
        new RegExp(`^ok +ledger leaf of revocation of ${a.number} \\(block 2026-11-21, index 3\\)`, 'm'),
      );
      expect(good.stdout).toMatch(/^ok +ledger chain: 5 block digest\(s\) chain from the head/m);
      expect(good.stdout).toMatch(
        new RegExp(`^ok +revocation list: version 2 .* names ${a.number} revoked at`, 'm'),
      );
      const unknown = await verifyCli('approval', 'APR-1999-000001', '--from', verifyUrl, '--root', rootFile);
      expect(unknown.code).toBe(1);
      expect(unknown.stdout).toMatch(/^FAIL approval APR-1999-000001: not found at /m);
      const bad = await verifyCli('approval', '--from', verifyUrl);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/^ooh-verify: approval: which approval\?/);
    });

    test('an approval whose block is not digested yet: a note, or a failure with --require-ledger', async () => {
      const number = await issue(9, { period_from: '2026-12-01', period_to: '2026-12-31' });
      const note = await verifyApproval({ now: nowMs(), number, source: httpSource(verifyUrl), rootPem });
      expect(note.ok).toBe(true);
      expect(note.checks.find((c) => c.reason === 'leaf_not_digested')?.state).toBe('pending');
      const required = await verifyApproval({
        now: nowMs(),
        number,
        source: httpSource(verifyUrl),
        rootPem,
        requireLedger: true,
      });
      expect(required.ok).toBe(false);
      expect(required.checks.filter((c) => c.state === 'failed').map((c) => c.reason)).toEqual([
        'leaf_not_digested',
      ]);
    });
  });
});

// ---------------------------------------------------------------------------------------------------------------

describe('open data through the real intake (DESIGN.md section 7)', () => {
  let p: TestPlatform;
  const APPROVAL = 'APR-2026-000777';
  const verify = (url: string) => p.servers.verify.inject({ method: 'GET', url });
  const at = (iso: string) => new Date(iso);

  /** The CSV read as RFC 4180 without quoted fields (codes never need quotes): header, then records. */
  function readCsv(text: string): Record<string, string>[] {
    expect(text.endsWith('\r\n')).toBe(true);
    const lines = text.slice(0, -2).split('\r\n');
    const header = lines[0]!.split(',');
    return lines.slice(1).map((line) => {
      const fields = line.split(',');
      expect(fields).toHaveLength(header.length);
      return Object.fromEntries(header.map((name, i) => [name, fields[i]!]));
    });
  }

  beforeAll(async () => {
    // Saturday 2026-10-10 12:00 Almaty: plays of October come in through the agent and CMS routes.
    p = await startTestPlatform({ now: at('2026-10-10T12:00:00+05:00') });
    // Disclosure values that publish any cell with plays, so that every counted play shows in a number.
    const rules = await apiCall(p.servers.api, p.adminKey, 'PUT', '/api/v1/console/open-data/disclosure', {
      min_operators: 1,
      min_advertisers: 1,
      max_party_share_pct: 100,
      lag_months: 1,
    });
    expect(rules.statusCode, rules.body).toBe(200);
    const on = await apiCall(p.servers.api, p.adminKey, 'PUT', '/api/v1/console/open-data/publication', {
      enabled: true,
    });
    expect(on.statusCode, on.body).toBe(200);

    const operator = await createOperator(p, 2);
    const advertiser = await createOrganisation(p, 'advertiser', ['read:creatives']);
    await insertApproval(p.database.db, advertiser.id, {
      number: APPROVAL,
      mediaSha256: MEDIA,
      validFrom: '2026-10-01',
      validUntil: '2026-10-31',
      structureIds: operator.structures.map((s) => s.id),
    });
    const device = await insertDevice(p.database.db, operator.structures[0]!, at('2026-10-01T00:00:00Z'));
    const now = p.clock.now();
    const ended = (iso: string) => at(iso);
    const dayPlay = (seq: number, fields: Record<string, unknown> = {}) =>
      play(seq, { approval_number: APPROVAL, ...fields }, ended('2026-10-10T11:30:00+05:00'));
    const first = agentBody(
      device,
      1,
      [
        dayPlay(1), // counted, billable: day
        dayPlay(2), // counted, billable: day
        dayPlay(3, { duration_ms: 500 }), // refused too_short
        dayPlay(4, { approval_number: 'APR-2026-999998' }), // counted, flagged approval_unknown: not billable
        { ...dayPlay(5), approval_number: undefined, slot: 'gov' }, // a slot play: counted apart
        { kind: 'reject', seq: 6, at: now.toISOString(), code: 'REVOKED' }, // not a play
        play(7, { approval_number: APPROVAL }, ended('2026-10-10T08:30:00+05:00')), // counted: morning
        play(8, { approval_number: APPROVAL }, ended('2026-10-10T13:00:00+05:00')), // refused time_in_future
      ],
      { ts: now },
    );
    const a1 = await postTelemetry(p.servers, device, first);
    expect(a1.statusCode, a1.body).toBe(200);
    expect(a1.json()).toMatchObject({ received: 8, accepted: 6, refused: 2, duplicates: 0 });
    // The same batch again: answered duplicate, counted once.
    const again = await postTelemetry(p.servers, device, first);
    expect(again.json()).toMatchObject({ duplicate: true });
    // A record at or below the high-water mark is a duplicate, not counted again; seq 9 counts.
    const second = agentBody(device, 2, [dayPlay(2), dayPlay(9)], { ts: now });
    const a2 = await postTelemetry(p.servers, device, second);
    expect(a2.json()).toMatchObject({ received: 2, accepted: 1, duplicates: 1 });
    // A CMS batch: one counted play of a mapped player, one of a player not mapped (refused player_unknown).
    const source = await registerSource(p, operator, { 'screen-1': operator.structures[1]! });
    const records = [
      cmsPlay('screen-1', 1, { approval_number: APPROVAL }, ended('2026-10-10T11:40:00+05:00')),
      cmsPlay('screen-x', 1, { approval_number: APPROVAL }, ended('2026-10-10T11:40:00+05:00')),
    ];
    const c1 = await postCms(p.servers, source, cmsBody(source, 1, records));
    expect(c1.statusCode, c1.body).toBe(200);
    expect(c1.json()).toMatchObject({ received: 2, accepted: 1, refused: 1 });
  });
  afterAll(async () => {
    await p?.close();
  });

  test('only counted, billable plays enter the cells; slot plays are their own rows; a month released one full month after its end', async () => {
    p.clock.set(at('2026-11-30T23:59:59.999+05:00'));
    expect(await buildDueReleases(p.ctx)).toEqual([]);
    p.clock.set(at('2026-12-01T00:00:00+05:00'));
    expect(await buildDueReleases(p.ctx)).toEqual(['2026-10']);
    const res = await verify('/v1/open/releases/2026-10/plays.csv');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-disposition']).toBe('attachment; filename="plays-2026-10.csv"');
    const rows = readCsv(res.body);
    const one = (match: Record<string, string>) => {
      const found = rows.filter((r) => Object.entries(match).every(([k, v]) => r[k] === v));
      expect(found, JSON.stringify(match)).toHaveLength(1);
      return found[0]!;
    };
    // seq 1, 2 and 9 of the device and the CMS play; not the refused, duplicate, unknown-approval or slot plays.
    expect(one({ table: 'cells', district: 'almaly', format: 'billboard', daypart: 'day' })).toMatchObject({
      month: '2026-10',
      slot: '',
      plays: '4',
      status: 'published',
    });
    expect(
      one({ table: 'cells', district: 'almaly', format: 'billboard', daypart: 'morning' }),
    ).toMatchObject({
      plays: '1',
      status: 'published',
    });
    for (const daypart of ['night', 'evening', 'late']) {
      expect(one({ table: 'cells', district: 'almaly', format: 'billboard', daypart })).toMatchObject({
        plays: '0',
        status: 'no_plays',
      });
    }
    // The slot play is a row of its own kind and in no billable row.
    expect(
      one({ table: 'slot_cells', slot: 'gov', district: 'almaly', format: 'billboard', daypart: 'day' }),
    ).toMatchObject({ plays: '1', status: 'published' });
    expect(
      one({
        table: 'slot_cells',
        slot: 'emergency',
        district: 'almaly',
        format: 'billboard',
        daypart: 'day',
      }),
    ).toMatchObject({ plays: '0', status: 'no_plays' });
    expect(one({ table: 'daypart_totals', daypart: 'day' })).toMatchObject({
      plays: '4',
      status: 'published',
    });
  });

  test('the release is two files, plays-YYYY-MM.csv and dictionary.json; another file or month is 404 not_found', async () => {
    const list = (await verify('/v1/open/releases')).json<{
      releases: { month: string; files: { name: string; url: string }[] }[];
    }>();
    expect(list.releases.map((r) => r.month)).toEqual(['2026-10']);
    expect(list.releases[0]!.files.map((f) => f.name)).toEqual(['plays-2026-10.csv', 'dictionary.json']);
    for (const file of list.releases[0]!.files) {
      const res = await verify(new URL(file.url).pathname);
      expect(res.statusCode, file.url).toBe(200);
    }
    const dictionary = (await verify('/v1/open/releases/2026-10/dictionary.json')).json();
    expect(dictionary.disclosure).toMatchObject({
      min_operators: 1,
      min_advertisers: 1,
      max_party_share_pct: 100,
      lag_months: 1,
    });
    for (const url of [
      '/v1/open/releases/2026-10/other.csv',
      '/v1/open/releases/2026-10/plays-2026-10.json',
      '/v1/open/releases/2026-11/plays.csv',
      '/v1/open/releases/2026-11/dictionary.json',
      '/v1/open/releases/2026-09/dictionary.json',
    ]) {
      const res = await verify(url);
      expect(res.statusCode, url).toBe(404);
      expect(res.headers['content-type'], url).toMatch(/^application\/problem\+json/);
      expect(res.json().code, url).toBe('not_found');
    }
  });
});
