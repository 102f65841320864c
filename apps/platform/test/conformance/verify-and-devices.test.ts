/**
 * Black-box conformance of three endpoints with the interface specification, sentence by sentence:
 * - POST {devices_url}/d/v1/renew (real TLS with client certificates, as test/devices/renew.test.ts);
 * - GET {verify_url}/v1/stats-seals/{day} (inject; batches come in through the real proof-of-play routes);
 * - GET {verify_url}/v1/open/dictionary.json (inject).
 * Each test names the spec sentence it checks. Expected values are computed here from the spec's rules (an own
 * RFC 8785 writer and an own RFC 9162 tree, both checked against the shared vectors in reference.test.ts), never by the
 * platform's code. Claims already checked elsewhere are listed at the end of this file.
 */
import { generateKeyPairSync, randomUUID, sign as nodeSign, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import {
  base64Encode,
  es256Sign,
  exportPrivateKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  importPrivateKey,
  splitPemChain,
} from '@ooh/crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { issueDeviceCertificate } from '../../src/devices/ca.js';
import { runSealScheduler } from '../../src/seals/index.js';
import {
  csrFor,
  DAY_MS,
  type DeviceResponse,
  type DevicesTestPlatform,
  deviceRequest,
  enrolDevice,
  execFileAsync,
  HOUR_MS,
  realNow,
  renew,
  startDevicesPlatform,
  type TestDevice,
  tempFiles,
  whoami,
} from '../devices/helpers.js';
import {
  agentBody,
  cmsBody,
  cmsPlay,
  createOperator,
  insertDevice,
  play,
  postCms,
  postTelemetry,
  registerSource,
} from '../pop/helpers.js';
import { insertBatch, startSealPlatform } from '../seals/helpers.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';
import { canonical, merkleRoot, rootFromInclusion, sha256, sha256Hex } from './reference.js';

const HEX64 = /^[0-9a-f]{64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** RFC 3339 date-time. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

// ---------------------------------------------------------------------------------------------------------------

function expectProblem(res: LightMyRequestResponse, status: number, code?: string): Record<string, unknown> {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const problem = res.json<Record<string, unknown>>();
  expect(typeof problem['code']).toBe('string');
  if (code !== undefined) expect(problem['code']).toBe(code);
  return problem;
}

function deviceAnswer(res: DeviceResponse): Extract<DeviceResponse, { status: number }> {
  if (res.status === undefined) throw new Error(`the request failed: ${res.error}`);
  return res;
}

/** A problem document over TLS (spec Errors: "Problem documents use media type application/problem+json"). */
function expectDeviceProblem(res: DeviceResponse, status: number, code?: string): Record<string, unknown> {
  const answer = deviceAnswer(res);
  expect(answer.status, answer.body).toBe(status);
  expect(String(answer.headers['content-type'])).toMatch(/^application\/problem\+json/);
  const problem = answer.json<Record<string, unknown>>();
  expect(typeof problem['code']).toBe('string');
  if (code !== undefined) expect(problem['code']).toBe(code);
  return problem;
}

interface RenewedAnswer {
  device_id: string;
  certificate_pem: string;
  chain_pem: string;
  not_after: string;
  old_valid_until: string;
}

describe('POST {devices_url}/d/v1/renew', () => {
  let dp: DevicesTestPlatform;
  let T0: Date;
  const at = (ms: number) => new Date(T0.getTime() + ms);

  beforeAll(async () => {
    T0 = realNow();
    dp = await startDevicesPlatform({ now: T0 });
  });
  afterAll(async () => {
    await dp?.close();
  });
  afterEach(() => {
    dp.clock.set(T0);
  });

  /** A device whose certificate has exactly `msLeft` left at T0 (enrolled a calendar year before its NotAfter). */
  async function deviceWithLeft(msLeft: number): Promise<TestDevice> {
    const enrolledAt = new Date(T0.getTime() + msLeft);
    enrolledAt.setUTCFullYear(enrolledAt.getUTCFullYear() - 1);
    dp.clock.set(enrolledAt);
    const device = await enrolDevice(dp);
    dp.clock.set(T0);
    expect(new Date(device.notAfter).getTime() - T0.getTime()).toBe(msLeft);
    return device;
  }

  async function newKeyCsr() {
    const keyPair = generateEs256KeyPair();
    return { keyPair, keyPem: exportPrivateKeyPem(keyPair.privateKey), csr: await csrFor(keyPair) };
  }

  async function certificates(deviceId: string): Promise<{ serial: string; state: string }[]> {
    const res = await apiCall(dp.servers.api, dp.adminKey, 'GET', `/api/v1/console/devices/${deviceId}`);
    expect(res.statusCode).toBe(200);
    return res.json<{ certificates: { serial: string; state: string }[] }>().certificates;
  }

  const allowForce = (deviceId: string) =>
    apiCall(dp.servers.api, dp.adminKey, 'POST', `/api/v1/console/devices/${deviceId}/allow-force-renewal`);

  test('rule 3 and "Renewed certificate answer": exactly its five fields; same device id; the new key; validity one year; chain_pem up to the device CA (openssl); old_valid_until 24 hours', async () => {
    const device = await deviceWithLeft(50 * DAY_MS);
    const fresh = await newKeyCsr();
    const res = deviceAnswer(await renew(dp, { cert: device.certPem, key: device.keyPem, csr: fresh.csr }));
    expect(res.status, res.body).toBe(200);
    expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
    const answer = res.json<RenewedAnswer>();
    expect(Object.keys(answer).sort()).toEqual([
      'certificate_pem',
      'chain_pem',
      'device_id',
      'not_after',
      'old_valid_until',
    ]);
    // device_id: "Same device identifier", a uuid.
    expect(answer.device_id).toMatch(UUID);
    expect(answer.device_id).toBe(device.id);
    // certificate_pem: "New certificate, PEM", for the key of the CSR, naming the device.
    expect(splitPemChain(answer.certificate_pem)).toHaveLength(1);
    const certificate = new X509Certificate(answer.certificate_pem);
    expect(certificate.publicKey.export({ format: 'der', type: 'spki' }).toString('base64')).toBe(
      exportPublicKeySpki(fresh.keyPair.publicKey),
    );
    expect(certificate.subject).toContain(`CN=${device.id}`);
    expect(certificate.serialNumber).not.toBe(new X509Certificate(device.certPem).serialNumber);
    // not_after: "Expiry of the new certificate" (date-time); rule 3 "validity one year" (a calendar year,
    // docs/decisions.md).
    expect(answer.not_after).toMatch(DATE_TIME);
    expect(new Date(answer.not_after).getTime()).toBe(new Date(certificate.validTo).getTime());
    const oneYear = new Date(T0.getTime());
    oneYear.setUTCFullYear(oneYear.getUTCFullYear() + 1);
    expect(new Date(answer.not_after).getTime()).toBe(oneYear.getTime());
    // old_valid_until: date-time, 24 hours.
    expect(answer.old_valid_until).toMatch(DATE_TIME);
    expect(new Date(answer.old_valid_until).getTime()).toBe(at(24 * HOUR_MS).getTime());
    // chain_pem: "Chain up to the device certificate authority": it ends at the device CA's self-signed root and
    // openssl builds the client certificate's path through it.
    const chain = splitPemChain(answer.chain_pem);
    expect(chain.length).toBeGreaterThan(0);
    const root = new X509Certificate(chain.at(-1)!);
    expect(root.subject).toBe(root.issuer);
    expect(root.fingerprint256).toBe(new X509Certificate(dp.ca.rootPem).fingerprint256);
    expect(certificate.checkIssued(new X509Certificate(chain[0]!))).toBe(true);
    const files = await tempFiles({
      'cert.pem': answer.certificate_pem,
      'untrusted.pem': chain.slice(0, -1).join('') || chain.at(-1)!,
      'root.pem': chain.at(-1)!,
    });
    try {
      const { stdout } = await execFileAsync('openssl', [
        'verify',
        '-purpose',
        'sslclient',
        '-CAfile',
        files.paths['root.pem']!,
        '-untrusted',
        files.paths['untrusted.pem']!,
        files.paths['cert.pem']!,
      ]);
      expect(stdout.trim()).toBe(`${files.paths['cert.pem']}: OK`);
    } finally {
      await files.cleanup();
    }
    // The new certificate authenticates as the same device.
    const asNew = deviceAnswer(await whoami(dp, answer.certificate_pem, fresh.keyPem));
    expect(asNew.status).toBe(200);
    expect(asNew.json<{ device_id: string }>().device_id).toBe(device.id);
  });

  test('Certificate rule: "the old certificate stays accepted until old_valid_until": accepted 1 ms before it, refused (401) from it on', async () => {
    const device = await deviceWithLeft(40 * DAY_MS);
    const fresh = await newKeyCsr();
    const answer = deviceAnswer(
      await renew(dp, { cert: device.certPem, key: device.keyPem, csr: fresh.csr }),
    ).json<RenewedAnswer>();
    const until = new Date(answer.old_valid_until).getTime();
    // Accepted where a device uses it: the certificate channel's telemetry (mutual TLS), and its key on the
    // signed channel (DESIGN.md section 3: "the previous key stays accepted until old_valid_until").
    const certificateBatch = (seq: number) =>
      deviceRequest(dp, {
        path: '/d/v1/telemetry',
        cert: device.certPem,
        key: device.keyPem,
        body: JSON.stringify({ schema: 'service.pop/1', batch_seq: seq, events: [] }),
      });
    const signedBatch = (seq: number) => {
      const body = Buffer.from(
        JSON.stringify({
          schema: 'service.pop/1',
          device_id: device.id,
          ts: dp.clock.now().toISOString(),
          batch_seq: seq,
          events: [],
        }),
      );
      return dp.servers.agents.inject({
        method: 'POST',
        url: '/s/v1/telemetry',
        headers: {
          'content-type': 'application/json',
          'x-service-signature': es256Sign(device.keyPair.privateKey, new Uint8Array(body)),
        },
        payload: body,
      });
    };
    dp.clock.set(new Date(until - 1));
    expect(deviceAnswer(await whoami(dp, device.certPem, device.keyPem)).status).toBe(200);
    const beforeCertificate = deviceAnswer(await certificateBatch(1));
    expect(beforeCertificate.status, beforeCertificate.body).toBe(200);
    const beforeSigned = await signedBatch(2);
    expect(beforeSigned.statusCode, beforeSigned.body).toBe(200);
    dp.clock.set(new Date(until));
    expectDeviceProblem(await whoami(dp, device.certPem, device.keyPem), 401);
    expectDeviceProblem(await certificateBatch(3), 401);
    expectProblem(await signedBatch(4), 401);
    expect(deviceAnswer(await whoami(dp, answer.certificate_pem, fresh.keyPem)).status).toBe(200);
  });

  test('old_valid_until is "until when the old certificate is still accepted", also when it expires within 24 hours: accepted until then, not after', async () => {
    const device = await deviceWithLeft(2 * HOUR_MS);
    const fresh = await newKeyCsr();
    const res = deviceAnswer(await renew(dp, { cert: device.certPem, key: device.keyPem, csr: fresh.csr }));
    expect(res.status, res.body).toBe(200);
    const answer = res.json<RenewedAnswer>();
    const until = new Date(answer.old_valid_until).getTime();
    // Never later than the old certificate's own expiry: after it the platform refuses it (so does TLS).
    expect(until).toBeLessThanOrEqual(new Date(device.notAfter).getTime());
    expect(until).toBeGreaterThan(T0.getTime());
    dp.clock.set(new Date(until - 1));
    expect(deviceAnswer(await whoami(dp, device.certPem, device.keyPem)).status).toBe(200);
    dp.clock.set(new Date(until));
    expectDeviceProblem(await whoami(dp, device.certPem, device.keyPem), 401);
  });

  test('401 "(code not given) renewal: signature does not verify": missing, padded, standard-base64, DER, other bytes, another key; nothing issued', async () => {
    const device = await deviceWithLeft(40 * DAY_MS);
    const fresh = await newKeyCsr();
    const body = Buffer.from(JSON.stringify({ csr: fresh.csr }));
    // A signature whose base64url text holds '-' or '_', so that standard base64 differs from it.
    let good = es256Sign(device.keyPair.privateKey, new Uint8Array(body));
    while (!/[-_]/.test(good)) good = es256Sign(device.keyPair.privateKey, new Uint8Array(body));
    const raw = Buffer.from(good, 'base64url');
    expect(raw).toHaveLength(64);
    const der = nodeSign('sha256', body, { key: device.keyPair.privateKey, dsaEncoding: 'der' });
    const send = (headers: Record<string, string>) =>
      deviceRequestRaw(dp, device, body, headers).then((r) => expectDeviceProblem(r, 401));
    await send({});
    await send({ 'x-service-signature': '' });
    await send({ 'x-service-signature': `${good}==` });
    await send({ 'x-service-signature': raw.toString('base64') });
    await send({ 'x-service-signature': der.toString('base64url') });
    await send({
      'x-service-signature': es256Sign(device.keyPair.privateKey, new TextEncoder().encode(`${body} `)),
    });
    // By the key of the CSR rather than the certificate's.
    await send({ 'x-service-signature': es256Sign(fresh.keyPair.privateKey, new Uint8Array(body)) });
    expect(await certificates(device.id)).toHaveLength(1);
    // The same body with the right signature is renewed (the refusals above were the signature's).
    const ok = deviceAnswer(await deviceRequestRaw(dp, device, body, { 'x-service-signature': good }));
    expect(ok.status, ok.body).toBe(200);
  });

  test('401 "(code not given) renewal: device unknown or revoked"', async () => {
    // A certificate of the device CA for a device the platform does not know.
    const stranger = generateEs256KeyPair();
    const issued = await issueDeviceCertificate(dp.ca, {
      deviceId: randomUUID(),
      publicKey: stranger.publicKey,
      now: T0,
    });
    const fresh = await newKeyCsr();
    expectDeviceProblem(
      await renew(dp, { cert: issued.pem, key: exportPrivateKeyPem(stranger.privateKey), csr: fresh.csr }),
      401,
    );
    // Rule 2: "Refused: a revoked device".
    const device = await deviceWithLeft(40 * DAY_MS);
    const revoked = await apiCall(
      dp.servers.api,
      dp.adminKey,
      'POST',
      `/api/v1/console/devices/${device.id}/revoke`,
    );
    expect(revoked.statusCode).toBe(200);
    expectDeviceProblem(await renew(dp, { cert: device.certPem, key: device.keyPem, csr: fresh.csr }), 401);
    expect(await certificates(device.id)).toHaveLength(1);
  });

  test('rule 2 / 409 renewal_refused: "a certificate that is not the newest of the device"', async () => {
    const device = await deviceWithLeft(40 * DAY_MS);
    const first = await newKeyCsr();
    expect(
      deviceAnswer(await renew(dp, { cert: device.certPem, key: device.keyPem, csr: first.csr })).status,
    ).toBe(200);
    const second = await newKeyCsr();
    expectDeviceProblem(
      await renew(dp, { cert: device.certPem, key: device.keyPem, csr: second.csr }),
      409,
      'renewal_refused',
    );
    expect(await certificates(device.id)).toHaveLength(2);
  });

  test('rule 1 and rule 2: an unchanged key, a key held by another device, and a key the device held before are refused (409 renewal_refused)', async () => {
    const device = await deviceWithLeft(40 * DAY_MS);
    const other = await deviceWithLeft(200 * DAY_MS);
    expectDeviceProblem(
      await renew(dp, { cert: device.certPem, key: device.keyPem, csr: await csrFor(device.keyPair) }),
      409,
      'renewal_refused',
    );
    expectDeviceProblem(
      await renew(dp, { cert: device.certPem, key: device.keyPem, csr: await csrFor(other.keyPair) }),
      409,
      'renewal_refused',
    );
    // Renewed once; then the new certificate asks for the device's first key back (forced and allowed, so that
    // only the key can be the reason).
    const fresh = await newKeyCsr();
    const renewed = deviceAnswer(
      await renew(dp, { cert: device.certPem, key: device.keyPem, csr: fresh.csr }),
    ).json<RenewedAnswer>();
    expect((await allowForce(device.id)).statusCode).toBe(200);
    expectDeviceProblem(
      await renew(dp, {
        cert: renewed.certificate_pem,
        key: fresh.keyPem,
        csr: await csrFor(device.keyPair),
        force: true,
      }),
      409,
      'renewal_refused',
    );
    expect(await certificates(device.id)).toHaveLength(2);
  });

  test('rule 1: "the request\'s own signature proves possession of it"; "ECDSA P-256": other requests are refused and nothing is issued', async () => {
    const device = await deviceWithLeft(40 * DAY_MS);
    // A CSR whose public key was replaced after signing.
    const signer = generateEs256KeyPair();
    const swapped = generateEs256KeyPair();
    const csrDer = Buffer.from((await csrFor(signer)).replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
    const signerSpki = Buffer.from(exportPublicKeySpki(signer.publicKey), 'base64');
    const offset = csrDer.indexOf(signerSpki);
    expect(offset).toBeGreaterThan(0);
    Buffer.from(exportPublicKeySpki(swapped.publicKey), 'base64').copy(csrDer, offset);
    const files = await tempFiles({});
    try {
      // P-384 and RSA requests, by openssl.
      await execFileAsync('openssl', [
        'ecparam',
        '-name',
        'secp384r1',
        '-genkey',
        '-noout',
        '-out',
        `${files.dir}/p384.pem`,
      ]);
      const { stdout: p384 } = await execFileAsync('openssl', [
        'req',
        '-new',
        '-key',
        `${files.dir}/p384.pem`,
        '-subj',
        '/CN=x',
      ]);
      const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
      await writeFile(`${files.dir}/rsa.pem`, rsa.privateKey.export({ format: 'pem', type: 'pkcs8' }));
      const { stdout: rsaCsr } = await execFileAsync('openssl', [
        'req',
        '-new',
        '-key',
        `${files.dir}/rsa.pem`,
        '-subj',
        '/CN=x',
      ]);
      for (const csr of [csrDer.toString('base64'), p384, rsaCsr, 'not a certificate request']) {
        const res = deviceAnswer(await renew(dp, { cert: device.certPem, key: device.keyPem, csr }));
        expect(res.status, res.body).toBeGreaterThanOrEqual(400);
        expect(res.status, res.body).toBeLessThan(500);
        expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
      }
    } finally {
      await files.cleanup();
    }
    expect(await certificates(device.id)).toHaveLength(1);
  });

  test('Body: "csr (string, required ...; PEM or base64 of DER)", "force (boolean, optional)"', async () => {
    const device = await deviceWithLeft(40 * DAY_MS);
    for (const body of [{}, { csr: 5 }, { csr: (await newKeyCsr()).csr, force: 'yes' }]) {
      const bytes = Buffer.from(JSON.stringify(body));
      const res = deviceAnswer(
        await deviceRequestRaw(dp, device, bytes, {
          'x-service-signature': es256Sign(importPrivateKey(device.keyPem), new Uint8Array(bytes)),
        }),
      );
      expect(res.status, JSON.stringify(body)).toBe(422);
    }
    // base64 of DER, with force false.
    const fresh = await newKeyCsr();
    const der = base64Encode(
      new Uint8Array(Buffer.from(fresh.csr.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64')),
    );
    const res = deviceAnswer(
      await renew(dp, { cert: device.certPem, key: device.keyPem, csr: der, force: false }),
    );
    expect(res.status, res.body).toBe(200);
  });

  test('Limits: "refused with more than 60 days left unless force is allowed (24 hours)": exactly 60 days is due; 60 days and a second is not', async () => {
    const due = await deviceWithLeft(60 * DAY_MS);
    const ok = deviceAnswer(
      await renew(dp, { cert: due.certPem, key: due.keyPem, csr: (await newKeyCsr()).csr }),
    );
    expect(ok.status, ok.body).toBe(200);
    const notDue = await deviceWithLeft(60 * DAY_MS + 1000);
    expectDeviceProblem(
      await renew(dp, { cert: notDue.certPem, key: notDue.keyPem, csr: (await newKeyCsr()).csr }),
      409,
      'renewal_refused',
    );
    // force without an administrator's allowance: refused.
    expectDeviceProblem(
      await renew(dp, {
        cert: notDue.certPem,
        key: notDue.keyPem,
        csr: (await newKeyCsr()).csr,
        force: true,
      }),
      409,
      'renewal_refused',
    );
    expect(await certificates(notDue.id)).toHaveLength(1);
  });

  test('force: "allowed only after an administrator has allowed it for 24 hours": within the 24 hours renewed, after them refused', async () => {
    const late = await deviceWithLeft(300 * DAY_MS);
    dp.clock.set(at(-24 * HOUR_MS));
    expect((await allowForce(late.id)).statusCode).toBe(200);
    dp.clock.set(T0);
    expectDeviceProblem(
      await renew(dp, { cert: late.certPem, key: late.keyPem, csr: (await newKeyCsr()).csr, force: true }),
      409,
      'renewal_refused',
    );
    const inTime = await deviceWithLeft(300 * DAY_MS);
    dp.clock.set(at(-24 * HOUR_MS + 1000));
    expect((await allowForce(inTime.id)).statusCode).toBe(200);
    dp.clock.set(T0);
    const res = deviceAnswer(
      await renew(dp, {
        cert: inTime.certPem,
        key: inTime.keyPem,
        csr: (await newKeyCsr()).csr,
        force: true,
      }),
    );
    expect(res.status, res.body).toBe(200);
    expect(new Date(res.json<RenewedAnswer>().old_valid_until).getTime()).toBe(at(24 * HOUR_MS).getTime());
  });
});

/** POST /d/v1/renew with exact body bytes and headers (the helper `renew` always signs a body it builds). */
function deviceRequestRaw(
  dp: DevicesTestPlatform,
  device: TestDevice,
  body: Buffer,
  headers: Record<string, string>,
): Promise<DeviceResponse> {
  return deviceRequest(dp, { path: '/d/v1/renew', cert: device.certPem, key: device.keyPem, body, headers });
}

// ---------------------------------------------------------------------------------------------------------------

interface Seal {
  day: string;
  signed_at: string;
  body: Record<string, unknown> & {
    v: number;
    env: string;
    day: string;
    batch_count: number;
    record_count: number;
    root: string;
    prev_seal_sha256: string;
  };
  signature: string;
  ledger: null | {
    day: string;
    status: string;
    block_height: number;
    digest: string;
    proof: {
      v: number;
      day: string;
      leaf: {
        kind: string;
        approval_number: string | null;
        manifest_sha256: string;
        signed_at: string;
        revoked_at: string | null;
      };
      leaf_sha256: string;
      index: number;
      leaf_count: number;
      path: { side: string; hash: string }[];
      merkle_root: string;
      anchor_sha256: string;
      digest: string;
    };
  };
}

interface ExpectedLeaf {
  batch: number;
  owner: string;
  seq: number;
  body_sha256: string;
  received_at: string;
  plays: number;
}

describe('GET {verify_url}/v1/stats-seals/{day}', () => {
  type P = Awaited<ReturnType<typeof startSealPlatform>>;
  let p: P;
  /** Leaves of each day as this test expects them (batch numbers read back from storage). */
  const leaves = new Map<string, ExpectedLeaf[]>();
  let rootPem = '';
  const firstAnswers = new Map<string, Seal>();

  /** received_at of a leaf: "its receive time (UTC, microseconds)". */
  const micro = (instant: Date) => `${instant.toISOString().slice(0, 23)}000Z`;
  const get = (url: string, remoteAddress = '198.51.100.1') =>
    p.servers.verify.inject({ method: 'GET', url, remoteAddress });

  async function batchNumber(owner: string, seq: number): Promise<number> {
    const { rows } = await p.database.db.query<{ id: string }>(
      'SELECT id::text AS id FROM pop_batches WHERE owner = $1 AND batch_seq = $2',
      [owner, seq],
    );
    expect(rows).toHaveLength(1);
    return Number(rows[0]!.id);
  }

  function addExpectedLeaf(day: string, leaf: ExpectedLeaf) {
    leaves.set(day, [...(leaves.get(day) ?? []), leaf]);
  }

  const plays = (body: Buffer) => {
    const parsed = JSON.parse(body.toString('utf8')) as {
      events?: { kind: string }[];
      records?: { kind: string }[];
    };
    return (parsed.events ?? parsed.records ?? []).filter((r) => r.kind === 'play').length;
  };

  /** The expected root of a day: leaves ordered by receive time, then batch number. */
  function expectedBody(day: string) {
    const list = [...(leaves.get(day) ?? [])].sort((a, b) =>
      a.received_at < b.received_at ? -1 : a.received_at > b.received_at ? 1 : a.batch - b.batch,
    );
    const hashes = list.map((l) =>
      sha256(
        canonical({
          batch: l.batch,
          owner: l.owner,
          seq: l.seq,
          body_sha256: l.body_sha256,
          received_at: l.received_at,
        }),
      ),
    );
    return {
      batch_count: list.length,
      record_count: list.reduce((sum, l) => sum + l.plays, 0),
      root: merkleRoot(hashes).toString('hex'),
    };
  }

  async function openssl(args: string[], files: Record<string, string | Buffer>) {
    const folder = await tempFiles({});
    try {
      for (const [name, content] of Object.entries(files)) await writeFile(`${folder.dir}/${name}`, content);
      const result = await execFileAsync('openssl', args, { cwd: folder.dir, encoding: 'buffer' }).then(
        (r) => ({ ok: true, stdout: r.stdout as Buffer, stderr: String(r.stderr) }),
        (e: { stdout?: Buffer; stderr?: Buffer }) => ({
          ok: false,
          stdout: e.stdout ?? Buffer.alloc(0),
          stderr: String(e.stderr ?? ''),
        }),
      );
      let out: Buffer | null = null;
      try {
        out = await readFile(`${folder.dir}/out.bin`);
      } catch {
        out = null;
      }
      return { ...result, out };
    } finally {
      await folder.cleanup();
    }
  }

  beforeAll(async () => {
    // 2026-11-20 11:00 Almaty.
    p = await startSealPlatform(new Date('2026-11-20T06:00:00Z'));
    await runSealScheduler(p.ctx);
    const root = await get('/v1/authority-root.pem');
    expect(root.statusCode).toBe(200);
    rootPem = root.body;

    // Batches of 2026-11-20 through the real routes: two devices and a CMS at the same instant (ties by batch
    // number), a duplicate, a conflict and a bad signature (none stored), and one batch 11 s later.
    const operator = await createOperator(p, 3);
    const a = await insertDevice(p.database.db, operator.structures[0]!);
    const b = await insertDevice(p.database.db, operator.structures[1]!);
    const source = await registerSource(p, operator, { 'screen-1': operator.structures[2]! });
    const t1 = p.clock.now();
    const a1 = agentBody(a, 1, [
      play(1),
      play(2),
      { kind: 'reject', seq: 3, at: t1.toISOString(), code: 'REVOKED' },
    ]);
    const b1 = agentBody(b, 1, [play(1)]);
    const c1 = cmsBody(source, 1, [cmsPlay('screen-1', 1), cmsPlay('screen-1', 2), cmsPlay('screen-1', 3)]);
    for (const [res, owner, seq, body] of [
      [await postTelemetry(p.servers, b, b1), `device:${b.id}`, 1, b1],
      [await postTelemetry(p.servers, a, a1), `device:${a.id}`, 1, a1],
      [await postCms(p.servers, source, c1), `source:${source.id}`, 1, c1],
    ] as const) {
      expect(res.statusCode, res.body).toBe(200);
      addExpectedLeaf('2026-11-20', {
        batch: await batchNumber(owner, seq),
        owner,
        seq,
        body_sha256: sha256Hex(body),
        received_at: micro(t1),
        plays: plays(body),
      });
    }
    const duplicate = await postTelemetry(p.servers, a, a1);
    expect(duplicate.json().duplicate).toBe(true);
    p.clock.advance(11_000);
    const t2 = p.clock.now();
    const conflict = await postTelemetry(p.servers, a, agentBody(a, 1, [play(4)], { ts: t2 }));
    expect(conflict.statusCode).toBe(409);
    const badSignature = await postTelemetry(p.servers, a, agentBody(a, 2, [play(4)], { ts: t2 }), {
      signature: 'A'.repeat(86),
    });
    expect(badSignature.statusCode).toBe(401);
    const a2 = agentBody(a, 2, [play(4, {}, new Date(t2.getTime() - 60_000))], { ts: t2 });
    expect((await postTelemetry(p.servers, a, a2)).statusCode).toBe(200);
    addExpectedLeaf('2026-11-20', {
      batch: await batchNumber(`device:${a.id}`, 2),
      owner: `device:${a.id}`,
      seq: 2,
      body_sha256: sha256Hex(a2),
      received_at: micro(t2),
      plays: 1,
    });

    // Stored batches at the edges of the Almaty day (UTC+5): its first and last microsecond, and the next day's
    // first, which belongs to 2026-11-21.
    const edge = `device:${randomUUID()}`;
    for (const [seq, receivedAt, day] of [
      [1, '2026-11-19T19:00:00.000000Z', '2026-11-20'],
      [2, '2026-11-20T18:59:59.999999Z', '2026-11-20'],
      [3, '2026-11-20T19:00:00.000000Z', '2026-11-21'],
    ] as const) {
      const body = JSON.stringify({
        schema: 'service.pop/1',
        batch_seq: seq,
        events: [{ kind: 'play', seq }],
      });
      const batch = await insertBatch(p.database.db, { owner: edge, batchSeq: seq, body, receivedAt });
      addExpectedLeaf(day, {
        batch,
        owner: edge,
        seq,
        body_sha256: sha256Hex(body),
        received_at: receivedAt,
        plays: 1,
      });
    }

    // The seal of the 20th is made after it is over, not before (spec: "a day is sealed once, after it is over").
    p.clock.set(new Date('2026-11-20T18:59:59Z'));
    await runSealScheduler(p.ctx);
    expectProblem(await get('/v1/stats-seals/2026-11-20'), 404, 'not_found');

    // 2026-11-21 (Almaty): a batch that arrives late about plays of the 20th belongs to the 21st.
    p.clock.set(new Date('2026-11-21T06:00:00Z'));
    const t3 = p.clock.now();
    const a3 = agentBody(a, 3, [play(5, {}, new Date('2026-11-20T12:00:00Z'))], { ts: t3 });
    expect((await postTelemetry(p.servers, a, a3)).statusCode).toBe(200);
    addExpectedLeaf('2026-11-21', {
      batch: await batchNumber(`device:${a.id}`, 3),
      owner: `device:${a.id}`,
      seq: 3,
      body_sha256: sha256Hex(a3),
      received_at: micro(t3),
      plays: 1,
    });
    // The scheduler passes on the 21st: the 20th is sealed (at 11:00 Almaty, well after its end).
    await runSealScheduler(p.ctx);
  });
  afterAll(async () => {
    await p?.close();
  });

  test('"Default answer 200 application/json: StatsSeal": exactly its fields; day; signed_at in Asia/Almaty time', async () => {
    const res = await get('/v1/stats-seals/2026-11-20');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const seal = res.json<Seal>();
    firstAnswers.set('2026-11-20', seal);
    expect(Object.keys(seal).sort()).toEqual(['body', 'day', 'ledger', 'signature', 'signed_at']);
    expect(seal.day).toBe('2026-11-20');
    // "When the seal was made, Asia/Almaty time": the scheduler's pass at 06:00 UTC, +05:00 in Almaty.
    expect(seal.signed_at).toMatch(DATE_TIME);
    expect(seal.signed_at).toMatch(/\+05:00$/);
    expect(new Date(seal.signed_at).toISOString()).toBe('2026-11-21T06:00:00.000Z');
    expect(typeof seal.signature).toBe('string');
    expect(seal.signature).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
  });

  test('body.*: v 1, env test, day, batch_count, record_count, root (leaf and Merkle rules), prev_seal_sha256 64 zeros first', async () => {
    const seal = (await get('/v1/stats-seals/2026-11-20')).json<Seal>();
    expect(Object.keys(seal.body).sort()).toEqual(
      ['batch_count', 'day', 'env', 'prev_seal_sha256', 'record_count', 'root', 'v'].sort(),
    );
    const expected = expectedBody('2026-11-20');
    expect(expected.batch_count).toBe(6);
    expect(expected.record_count).toBe(2 + 1 + 3 + 1 + 2);
    expect(seal.body).toEqual({
      v: 1,
      env: 'test',
      day: '2026-11-20',
      batch_count: expected.batch_count,
      record_count: expected.record_count,
      root: expected.root,
      prev_seal_sha256: '0'.repeat(64),
    });
    expect(seal.body.root).toMatch(HEX64);
  });

  test('signature: "CMS signature (PKCS#7, body attached), base64", verified by openssl cms -verify against the authority root; its content is the canonical JSON of body; its signing time is signed_at', async () => {
    const seal = (await get('/v1/stats-seals/2026-11-20')).json<Seal>();
    const der = Buffer.from(seal.signature, 'base64');
    const verified = await openssl(
      [
        'cms',
        '-verify',
        '-binary',
        '-inform',
        'DER',
        '-in',
        'seal.p7s',
        '-CAfile',
        'root.pem',
        '-out',
        'out.bin',
      ],
      { 'seal.p7s': der, 'root.pem': rootPem },
    );
    expect(verified.ok, verified.stderr).toBe(true);
    expect(verified.stderr).toContain('Verification successful');
    expect(verified.out?.toString('utf8')).toBe(canonical(seal.body));
    // Another root does not verify it.
    const other = await openssl(
      [
        'cms',
        '-verify',
        '-binary',
        '-inform',
        'DER',
        '-in',
        'seal.p7s',
        '-CAfile',
        'root.pem',
        '-out',
        'out.bin',
      ],
      { 'seal.p7s': der, 'root.pem': contrastRootPem() },
    );
    expect(other.ok).toBe(false);
    const printed = await openssl(['cms', '-cmsout', '-print', '-inform', 'DER', '-in', 'seal.p7s'], {
      'seal.p7s': der,
    });
    expect(printed.ok, printed.stderr).toBe(true);
    // signingTime as UTCTIME "Nov 21 06:00:00 2026 GMT".
    expect(printed.stdout.toString('utf8')).toMatch(/UTCTIME:Nov 21 06:00:00 2026 GMT/);
  });

  test('format=p7s: "the signature itself (PKCS#7 with body attached), media type application/pkcs7-signature"', async () => {
    const seal = (await get('/v1/stats-seals/2026-11-20')).json<Seal>();
    const res = await get('/v1/stats-seals/2026-11-20?format=p7s');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/pkcs7-signature');
    expect(res.rawPayload.equals(Buffer.from(seal.signature, 'base64'))).toBe(true);
    const verified = await openssl(
      [
        'cms',
        '-verify',
        '-binary',
        '-inform',
        'DER',
        '-in',
        'seal.p7s',
        '-CAfile',
        'root.pem',
        '-out',
        'out.bin',
      ],
      { 'seal.p7s': res.rawPayload, 'root.pem': rootPem },
    );
    expect(verified.ok, verified.stderr).toBe(true);
    expect(verified.out?.toString('utf8')).toBe(canonical(seal.body));
  });

  test('"ledger is null until the ledger day that holds the seal has been digested"', async () => {
    // The seal of the 20th was made on the 21st; the 21st is not over.
    expect((await get('/v1/stats-seals/2026-11-20')).json<Seal>().ledger).toBeNull();
  });

  test('the next day: prev_seal_sha256 chains; a late batch belongs to the day it arrived; the day is sealed once', async () => {
    p.clock.set(new Date('2026-11-21T19:05:00Z'));
    await runSealScheduler(p.ctx);
    const res = await get('/v1/stats-seals/2026-11-21');
    expect(res.statusCode, res.body).toBe(200);
    const seal = res.json<Seal>();
    const previous = (await get('/v1/stats-seals/2026-11-20?format=p7s')).rawPayload;
    const previousBody = await openssl(
      [
        'cms',
        '-verify',
        '-binary',
        '-inform',
        'DER',
        '-in',
        'seal.p7s',
        '-CAfile',
        'root.pem',
        '-out',
        'out.bin',
      ],
      { 'seal.p7s': previous, 'root.pem': rootPem },
    );
    expect(previousBody.ok).toBe(true);
    const expected = expectedBody('2026-11-21');
    expect(expected.batch_count).toBe(2);
    expect(seal.body).toEqual({
      v: 1,
      env: 'test',
      day: '2026-11-21',
      batch_count: expected.batch_count,
      record_count: expected.record_count,
      root: expected.root,
      // "Hex SHA-256 of the previous seal's body".
      prev_seal_sha256: sha256Hex(previousBody.out!),
    });
    expect(seal.ledger).toBeNull();
    // Sealed once: the seal of the 20th is unchanged by later passes.
    await runSealScheduler(p.ctx);
    const again = (await get('/v1/stats-seals/2026-11-20')).json<Seal>();
    const first = firstAnswers.get('2026-11-20')!;
    expect(again.signature).toBe(first.signature);
    expect(again.body).toEqual(first.body);
    expect(again.signed_at).toBe(first.signed_at);
  });

  test('ledger, once its day is digested: day, status, block_height, digest, proof {v, day, leaf, leaf_sha256, index, leaf_count, path, merkle_root, anchor_sha256, digest}, all consistent', async () => {
    // The seal of the 20th is a leaf of the ledger day 2026-11-21, digested once that day is over (scheduler pass
    // of the previous test, at 00:05 Almaty on the 22nd).
    const seal = (await get('/v1/stats-seals/2026-11-20')).json<Seal>();
    const ledger = seal.ledger;
    expect(ledger).not.toBeNull();
    if (!ledger) return;
    expect(Object.keys(ledger).sort()).toEqual(['block_height', 'day', 'digest', 'proof', 'status']);
    expect(ledger.day).toBe('2026-11-21');
    expect(typeof ledger.status).toBe('string');
    expect(Number.isInteger(ledger.block_height)).toBe(true);
    expect(ledger.digest).toMatch(HEX64);
    const proof = ledger.proof;
    expect(Object.keys(proof).sort()).toEqual(
      [
        'anchor_sha256',
        'day',
        'digest',
        'index',
        'leaf',
        'leaf_count',
        'leaf_sha256',
        'merkle_root',
        'path',
        'v',
      ].sort(),
    );
    expect(Number.isInteger(proof.v)).toBe(true);
    expect(proof.day).toBe(ledger.day);
    expect(Object.keys(proof.leaf).sort()).toEqual(
      ['approval_number', 'kind', 'manifest_sha256', 'revoked_at', 'signed_at'].sort(),
    );
    // The leaf is this seal's: the SHA-256 of its body, made when the seal was.
    expect(proof.leaf.manifest_sha256).toBe(sha256Hex(canonical(seal.body)));
    expect(new Date(proof.leaf.signed_at).getTime()).toBe(new Date(seal.signed_at).getTime());
    expect(proof.leaf_sha256).toBe(sha256Hex(canonical(proof.leaf)));
    expect(Number.isInteger(proof.index) && Number.isInteger(proof.leaf_count)).toBe(true);
    expect(proof.index).toBeLessThan(proof.leaf_count);
    const walked = rootFromInclusion(
      proof.index,
      proof.leaf_count,
      Buffer.from(proof.leaf_sha256, 'hex'),
      proof.path.map((step) => Buffer.from(step.hash, 'hex')),
    );
    expect(walked).not.toBeNull();
    expect(walked!.root.toString('hex')).toBe(proof.merkle_root);
    expect(proof.path.map((step) => step.side)).toEqual(walked!.sides);
    expect(proof.digest).toBe(ledger.digest);
    // DESIGN.md section 6: digest = SHA-256 of the canonical JSON of {v: 1, day, block_height, leaf_count,
    // merkle_root, prev_digest}, anchor_sha256 the previous block's digest.
    expect(proof.anchor_sha256).toMatch(HEX64);
    expect(ledger.digest).toBe(
      sha256Hex(
        canonical({
          v: 1,
          day: ledger.day,
          block_height: ledger.block_height,
          leaf_count: proof.leaf_count,
          merkle_root: proof.merkle_root,
          prev_digest: proof.anchor_sha256,
        }),
      ),
    );
  });

  test('Errors 404 as problem documents: a day not sealed, today, the future, before the first seal, malformed', async () => {
    for (const day of [
      '2026-11-22',
      '2026-11-23',
      '2030-01-01',
      '2026-11-19',
      '2026-11-1',
      '2026-02-30',
      '20261120',
      'today',
      '2026-11-20x',
    ]) {
      expectProblem(await get(`/v1/stats-seals/${day}`), 404, 'not_found');
    }
    // "Public": credentials are neither needed nor looked at.
    const withHeader = await p.servers.verify.inject({
      method: 'GET',
      url: '/v1/stats-seals/2026-11-20',
      headers: { authorization: 'Bearer not-a-key' },
    });
    expect(withHeader.statusCode).toBe(200);
  });

  test('Errors 429 as a problem document with Retry-After (spec Errors: "429 rate_limited ... Retry-After gives seconds to wait")', async () => {
    let limited: LightMyRequestResponse | null = null;
    for (let i = 0; i < 1000 && !limited; i += 1) {
      const res = await get('/v1/stats-seals/not-a-day', '198.51.100.99');
      if (res.statusCode === 429) limited = res;
      else expect(res.statusCode).toBe(404);
    }
    expect(limited).not.toBeNull();
    expectProblem(limited!, 429, 'rate_limited');
    expect(limited!.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    // Another client is not limited.
    expect((await get('/v1/stats-seals/2026-11-20', '198.51.100.100')).statusCode).toBe(200);
  });
});

/** A self-signed P-256 root that is not the authority's: openssl must refuse the seal against it. */
let contrastRoot = '';
function contrastRootPem(): string {
  if (contrastRoot) return contrastRoot;
  throw new Error('contrast root not prepared');
}
beforeAll(async () => {
  const folder = await tempFiles({});
  try {
    await execFileAsync('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      `${folder.dir}/k.pem`,
      '-out',
      `${folder.dir}/c.pem`,
      '-subj',
      '/CN=Not the authority',
      '-days',
      '30',
    ]);
    contrastRoot = readFileSync(`${folder.dir}/c.pem`, 'utf8');
  } finally {
    await folder.cleanup();
  }
});

// ---------------------------------------------------------------------------------------------------------------

type DictionaryEntry = Record<string, unknown>;
interface Dictionary {
  version: unknown;
  licence: Record<string, unknown>;
  basis: DictionaryEntry;
  files: DictionaryEntry[];
  tables: DictionaryEntry[];
  columns: DictionaryEntry[];
  statuses: DictionaryEntry[];
  codes: Record<string, DictionaryEntry[] | undefined>;
  disclosure: Record<string, unknown>;
}

describe('GET {verify_url}/v1/open/dictionary.json', () => {
  let p: TestPlatform;
  const dictionary = (headers: Record<string, string> = {}) =>
    p.servers.verify.inject({ method: 'GET', url: '/v1/open/dictionary.json', headers });
  const publication = (enabled: boolean) =>
    apiCall(p.servers.api, p.adminKey, 'PUT', '/api/v1/console/open-data/publication', { enabled });

  beforeAll(async () => {
    p = await startTestPlatform();
    const operator = await createOrganisation(p, 'operator', ['console:fleet']);
    await createStructure(p, operator.id, { district: 'medeu', format: 'billboard' });
    await createStructure(p, operator.id, { district: 'almaly', format: 'digital' });
  });
  afterAll(async () => {
    await p?.close();
  });

  /** "All texts are objects {en, ru, kk} of strings". */
  function expectText(value: unknown, where: string) {
    expect(value, where).toBeTypeOf('object');
    expect(Object.keys(value as object).sort(), where).toEqual(['en', 'kk', 'ru']);
    for (const lang of ['en', 'ru', 'kk']) {
      const text = (value as Record<string, unknown>)[lang];
      expect(typeof text, `${where}.${lang}`).toBe('string');
      expect((text as string).trim(), `${where}.${lang}`).not.toBe('');
    }
  }

  /** "Entry = {name (string, optional ...), code (string, optional ...), the service {en, ru, kk} (required)}". */
  function expectEntry(entry: Record<string, unknown>, where: string, has: 'name' | 'code' | 'both') {
    const keys = Object.keys(entry);
    const textKeys = keys.filter((k) => k !== 'name' && k !== 'code');
    expect(textKeys, where).toHaveLength(1);
    expectText(entry[textKeys[0]!], `${where}.${textKeys[0]}`);
    if (has === 'name' || has === 'both') expect(typeof entry['name'], `${where}.name`).toBe('string');
    if (has === 'code' || has === 'both') expect(typeof entry['code'], `${where}.code`).toBe('string');
    if (has === 'name') expect(entry, where).not.toHaveProperty('code');
    if (has === 'code') expect(entry, where).not.toHaveProperty('name');
  }

  test('"While publication is switched off the answer is 404 with code not_published"', async () => {
    expectProblem(await dictionary(), 404, 'not_published');
  });

  test('"Public, no credentials. Response 200: OpenDataDictionary": every field of the table', async () => {
    expect((await publication(true)).statusCode).toBe(200);
    const res = await dictionary({ authorization: 'Bearer not-a-key' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const d = res.json<Dictionary>();
    for (const key of [
      'version',
      'licence',
      'basis',
      'files',
      'tables',
      'columns',
      'statuses',
      'codes',
      'disclosure',
    ])
      expect(d, key).toHaveProperty(key);
    expect(typeof d.version).toBe('string');
    // licence: "status (string, draft until the city decides) and the service {en, ru, kk}".
    expect(d.licence['status']).toBe('draft');
    const licenceKeys = Object.keys(d.licence);
    expect(licenceKeys).toHaveLength(2);
    expectText(d.licence[licenceKeys.find((k) => k !== 'status')!], 'licence');
    // basis: "name (string), code (string), the service {en, ru, kk} (required)".
    expectEntry(d.basis, 'basis', 'both');
    // files: "The two files of a release".
    expect(d.files).toHaveLength(2);
    for (const [i, entry] of d.files.entries()) expectEntry(entry, `files[${i}]`, 'name');
    expect(d.files.map((f) => f['name'])).toContain('dictionary.json');
    expect(d.files.some((f) => /\.csv$/.test(String(f['name'])))).toBe(true);
    for (const list of ['tables', 'columns'] as const) {
      expect(d[list].length, list).toBeGreaterThan(0);
      for (const [i, entry] of d[list].entries()) expectEntry(entry, `${list}[${i}]`, 'name');
    }
    expect(d.statuses.length).toBeGreaterThan(0);
    for (const [i, entry] of d.statuses.entries()) expectEntry(entry, `statuses[${i}]`, 'code');
    expect(d.statuses.map((s) => s['code'])).toContain('published');
  });

  test('codes: "district, format, daypart, each an array of {code, name {en, ru, kk}, start_hour, end_hour}"; start_hour and end_hour "on dayparts only"', async () => {
    const d = (await dictionary()).json<Dictionary>();
    expect(Object.keys(d.codes).sort()).toEqual(['daypart', 'district', 'format']);
    const codesOf = (kind: string) => (d.codes[kind] ?? []).map((c) => String(c['code']));
    expect(codesOf('district').sort()).toEqual(['almaly', 'medeu']);
    expect(codesOf('format').sort()).toEqual(['billboard', 'digital']);
    for (const kind of ['district', 'format'] as const) {
      for (const entry of d.codes[kind] ?? []) {
        const where = `${kind} ${String(entry['code'])}`;
        expect(typeof entry['code'], where).toBe('string');
        expectText(entry['name'], where);
        expect(entry, where).not.toHaveProperty('start_hour');
        expect(entry, where).not.toHaveProperty('end_hour');
      }
    }
    const dayparts = d.codes['daypart'] ?? [];
    expect(dayparts.length).toBeGreaterThan(0);
    const covered = new Set<number>();
    for (const entry of dayparts) {
      const where = `daypart ${String(entry['code'])}`;
      expect(typeof entry['code'], where).toBe('string');
      expectText(entry['name'], where);
      // "start_hour (integer, inclusive, Almaty time) and end_hour (integer, exclusive)".
      const start = entry['start_hour'] as number;
      const end = entry['end_hour'] as number;
      expect(Number.isInteger(start), where).toBe(true);
      expect(Number.isInteger(end), where).toBe(true);
      expect(start, where).toBeGreaterThanOrEqual(0);
      expect(end, where).toBeLessThanOrEqual(24);
      expect(start, where).toBeLessThan(end);
      for (let h = start; h < end; h += 1) covered.add(h);
    }
    expect(covered.size).toBe(24);
  });

  test('disclosure: min_operators 3, min_advertisers 3, max_party_share_pct 70, lag_months 1 (Limits), integers, with its text', async () => {
    const { disclosure } = (await dictionary()).json<Dictionary>();
    expect(Object.keys(disclosure)).toHaveLength(5);
    expect({
      min_operators: disclosure['min_operators'],
      min_advertisers: disclosure['min_advertisers'],
      max_party_share_pct: disclosure['max_party_share_pct'],
      lag_months: disclosure['lag_months'],
    }).toEqual({ min_operators: 3, min_advertisers: 3, max_party_share_pct: 70, lag_months: 1 });
    const textKey = Object.keys(disclosure).find((k) => !k.includes('_'))!;
    expectText(disclosure[textKey], 'disclosure');
  });

  test('"All texts are objects {en, ru, kk} of strings": every object with a language key has exactly the three', async () => {
    const d = (await dictionary()).json<unknown>();
    const walk = (value: unknown, where: string): number => {
      if (value === null || typeof value !== 'object') return 0;
      const keys = Object.keys(value);
      if (keys.some((k) => k === 'en' || k === 'ru' || k === 'kk')) {
        expectText(value, where);
        return 1;
      }
      return Object.entries(value).reduce((n, [k, v]) => n + walk(v, `${where}/${k}`), 0);
    };
    expect(walk(d, '')).toBeGreaterThan(20);
  });

  test('switched off again: 404 not_published', async () => {
    expect((await publication(false)).statusCode).toBe(200);
    expectProblem(await dictionary(), 404, 'not_published');
  });
});

/*
 * Claims checked by existing tests rather than here:
 * - mutual TLS: no client certificate, another CA's certificate, an expired one: test/devices/tls.test.ts.
 * - a lost renewal answer is recovered by the same CSR (DESIGN.md section 9): test/devices/renew.test.ts.
 * - one grant allows one forced renewal (docs/decisions.md): test/devices/renew.test.ts.
 * - the leaf JSON written by PostgreSQL equals canonical JSON for random rows: test/seals/leaf-and-tree.test.ts.
 * - seals across midnight, two instances, held transactions: test/seals/invariant.test.ts, scheduler.test.ts.
 * Not checkable on the platform: renewal rule 4 ("A player renews on its own when less than 30 days are left"),
 * an agent behaviour (apps/agent).
 */
