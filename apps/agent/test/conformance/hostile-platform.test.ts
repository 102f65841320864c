import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { KeyObject } from 'node:crypto';
import { generateEs256KeyPair, issueCertificate, parseCsr, randomSerialHex } from '@ooh/crypto';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { signedRevocations } from '../helpers/media.js';
import {
  answer,
  createTlsAuthority,
  type HostilePlayer,
  type HostileServer,
  hostilePlayer,
  type ServerIdentity,
  startHostileServer,
  type TlsAuthority,
} from '../helpers/hostile.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import { tempDir } from '../helpers/temp.js';

/*
 * A platform (or whatever answers in its name over the platform's own TLS) that gives what it should not: revocation
 * lists tampered, cut short or older than the one held; renewal answers with a certificate for another key, another
 * device, dates in the past or to come, or from another CA. The agent runs on a real SQLite log and its real
 * transport against a real TLS server (helpers/hostile.ts); the devices host's mutual TLS asks for the device
 * certificate as the platform's does. The transport's own cases: hostile-network.test.ts.
 *
 * Failed before the agent was changed: every renewal answer below but the one for another key was stored as the new
 * pair (only the key was compared), and would have become the only pair offered after old_valid_until. Guards (right
 * before, kept): a tampered, truncated, foreign or older revocation list changes nothing, across a restart too. The
 * agent fetches no envelopes: they arrive as sidecar files beside the media (test/media/envelope.test.ts).
 */

const DAY_MS = 86_400_000;

let pki: TestPki;
let otherPki: TestPki;
let authority: TlsAuthority;
let platformIdentity: ServerIdentity;

beforeAll(async () => {
  [pki, otherPki, authority] = await Promise.all([
    createTestPki(),
    createTestPki(),
    createTlsAuthority('Platform TLS Root'),
  ]);
  platformIdentity = await authority.issue();
});

describe('revocation lists that are not the newest the authority signed', () => {
  let dir: ReturnType<typeof tempDir>;
  let server: HostileServer;
  let player: HostilePlayer | null = null;
  let served: string | null = null;

  beforeEach(async () => {
    dir = tempDir();
    served = null;
    server = await startHostileServer(platformIdentity, (socket) =>
      served === null
        ? answer(socket, 404)
        : answer(socket, 200, { 'content-type': 'application/json' }, served),
    );
  });
  afterEach(async () => {
    await player?.agent.close();
    await server.close();
    player = null;
    dir.cleanup();
  });

  it('keeps the list held against a tampered, truncated, foreign or replayed older one, across a restart too', async () => {
    player = await hostilePlayer({ dir: dir.path, pki, serverCaPem: authority.rootPem, url: server.url });
    let { agent } = player;
    const revokedAt = new Date(Date.now() - DAY_MS).toISOString();
    const v1 = JSON.stringify(await signedRevocations(pki, 1, []));
    const v2 = await signedRevocations(pki, 2, [
      { approval_number: 'APP-2026-000001', revoked_at: revokedAt },
    ]);
    served = JSON.stringify(v2);
    expect(await agent.revocations.refresh()).toBe('updated');
    expect(agent.revocations.isRevoked('APP-2026-000001')).toBe(true);

    const offers: [string, string, string][] = [
      // The same signature over a body that un-revokes, with a higher version.
      [
        'tampered',
        JSON.stringify({ ...v2, body: { ...(v2.body as object), version: 3, revoked: [] } }),
        'invalid',
      ],
      ['truncated', served.slice(0, Math.floor(served.length / 2)), 'invalid'],
      ['signed by another authority', JSON.stringify(await signedRevocations(otherPki, 9, [])), 'invalid'],
      ['not a list', '{"v":1,"body":{"__proto__":{"version":99}},"signature":""}', 'invalid'],
      ['the older list replayed', v1, 'older_refused'],
      ['the same list again', JSON.stringify(v2), 'unchanged'],
    ];
    for (const [name, text, outcome] of offers) {
      served = text;
      expect({ name, outcome: await agent.revocations.refresh() }).toEqual({ name, outcome });
      expect(agent.revocations.version).toBe(2);
      expect(agent.revocations.isRevoked('APP-2026-000001')).toBe(true);
    }

    // A restart reads the list held from disk (verified again) and still refuses the older one.
    await agent.close();
    agent = await player.restart();
    await agent.revocations.loadCache();
    expect(agent.revocations.version).toBe(2);
    served = v1;
    expect(await agent.revocations.refresh()).toBe('older_refused');
    expect(agent.revocations.isRevoked('APP-2026-000001')).toBe(true);
    // A 404 (no list published, as a fresh platform says) un-revokes nothing either.
    served = null;
    expect(await agent.revocations.refresh()).toBe('none_published');
    expect(agent.revocations.isRevoked('APP-2026-000001')).toBe(true);
  });
});

describe('renewal answers the agent must refuse', () => {
  let dir: ReturnType<typeof tempDir>;
  let server: HostileServer;
  let player: HostilePlayer | null = null;
  /** Builds the answer to a renewal request for the CSR's key. */
  let renewAnswer: (csrKey: KeyObject, deviceId: string) => Promise<Record<string, unknown>>;

  beforeEach(async () => {
    dir = tempDir();
    // The devices host asks for a client certificate of the device CA, as the platform's does.
    server = await startHostileServer(
      platformIdentity,
      async (socket, request) => {
        if (request.path !== '/d/v1/renew') return answer(socket, 503);
        const { csr } = JSON.parse(request.body.toString('utf8')) as { csr: string };
        const key = (await parseCsr(csr)).publicKey;
        const body = await renewAnswer(key, player!.deviceId);
        answer(socket, 200, { 'content-type': 'application/json' }, JSON.stringify(body));
      },
      { clientCaPem: pki.deviceRootPem },
    );
  });
  afterEach(async () => {
    await player?.agent.close();
    await server.close();
    player = null;
    dir.cleanup();
  });

  async function deviceCertificate(args: {
    publicKey: KeyObject;
    deviceId: string;
    notBefore?: Date;
    notAfter?: Date;
    issuer?: TestPki;
  }): Promise<string> {
    const issuer = args.issuer ?? pki;
    return issueCertificate({
      subject: `CN=${args.deviceId}, OU=Devices, O=OOH Platform`,
      publicKey: args.publicKey,
      issuerCertificatePem: issuer.deviceIssuing.certificatePem,
      issuerKey: issuer.deviceIssuing.key,
      notBefore: args.notBefore ?? new Date(Date.now() - 5 * 60_000),
      notAfter: args.notAfter ?? new Date(Date.now() + 365 * DAY_MS),
      serialHex: randomSerialHex(),
      usage: 'client',
    });
  }

  const chainOf = (issuer: TestPki) =>
    `${issuer.deviceIssuing.certificatePem.trim()}\n${issuer.deviceRootPem.trim()}\n`;

  function answerWith(certificatePem: string, extra: { deviceId?: string; chainPem?: string } = {}) {
    return (deviceId: string) => ({
      device_id: extra.deviceId ?? deviceId,
      certificate_pem: certificatePem,
      chain_pem: extra.chainPem ?? chainOf(pki),
      not_after: new Date(Date.now() + 365 * DAY_MS).toISOString(),
      old_valid_until: new Date(Date.now() + DAY_MS).toISOString(),
    });
  }

  const cases: [string, (key: KeyObject, deviceId: string) => Promise<Record<string, unknown>>][] = [
    [
      'a certificate for another key',
      async (_key, deviceId) =>
        answerWith(await deviceCertificate({ publicKey: generateEs256KeyPair().publicKey, deviceId }))(
          deviceId,
        ),
    ],
    [
      'an answer for another device id',
      async (key, deviceId) =>
        answerWith(await deviceCertificate({ publicKey: key, deviceId }), { deviceId: randomUUID() })(
          deviceId,
        ),
    ],
    [
      'a certificate naming another device',
      async (key, deviceId) =>
        answerWith(await deviceCertificate({ publicKey: key, deviceId: randomUUID() }))(deviceId),
    ],
    [
      'a validity in the past',
      async (key, deviceId) =>
        answerWith(
          await deviceCertificate({
            publicKey: key,
            deviceId,
            notBefore: new Date(Date.now() - 400 * DAY_MS),
            notAfter: new Date(Date.now() - DAY_MS),
          }),
        )(deviceId),
    ],
    [
      'a validity still to come',
      async (key, deviceId) =>
        answerWith(
          await deviceCertificate({ publicKey: key, deviceId, notBefore: new Date(Date.now() + 2 * DAY_MS) }),
        )(deviceId),
    ],
    [
      'a validity ending before the current one',
      async (key, deviceId) =>
        answerWith(
          await deviceCertificate({ publicKey: key, deviceId, notAfter: new Date(Date.now() + 5 * DAY_MS) }),
        )(deviceId),
    ],
    [
      'a certificate of another device CA, with its own chain',
      async (key, deviceId) =>
        answerWith(await deviceCertificate({ publicKey: key, deviceId, issuer: otherPki }), {
          chainPem: chainOf(otherPki),
        })(deviceId),
    ],
    [
      'a certificate of another device CA, with the right chain',
      async (key, deviceId) =>
        answerWith(await deviceCertificate({ publicKey: key, deviceId, issuer: otherPki }))(deviceId),
    ],
    [
      'a certificate that is not one',
      async (_key, deviceId) =>
        answerWith('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n')(deviceId),
    ],
    [
      'two certificates in certificate_pem',
      async (key, deviceId) =>
        answerWith(
          `${await deviceCertificate({ publicKey: key, deviceId })}${await deviceCertificate({ publicKey: key, deviceId })}`,
        )(deviceId),
    ],
  ];

  it.each(cases)('refuses %s and keeps the old pair', async (_name, build) => {
    renewAnswer = build;
    player = await hostilePlayer({
      dir: dir.path,
      pki,
      serverCaPem: authority.rootPem,
      url: server.url,
      daysLeft: 10,
    });
    const { agent, config, logger } = player;
    const serial = agent.credentials.certificate!.serialHex;
    expect(await agent.renewal.check()).toMatchObject({
      result: 'failed',
      reason: expect.stringMatching(/^renewal answer refused/),
    });
    expect(server.requests.filter((r) => r.path === '/d/v1/renew')).toHaveLength(1);
    // Nothing written beside the old pair; the request stays, its CSR to be sent again at the next check.
    expect(existsSync(`${config.certificateFile}.next`)).toBe(false);
    expect(existsSync(`${config.caChainFile}.next`)).toBe(false);
    expect(agent.credentials.renewalState?.state).toBe('requested');
    expect(agent.credentials.nextCertificate).toBeNull();
    expect(agent.credentials.certificate!.serialHex).toBe(serial);
    expect(agent.credentials.tlsIdentity(new Date())!.id).toBe(serial);
    expect(
      logger.lines.filter((l) => l.level === 'error' && /renewal answer refused/.test(l.message)),
    ).toHaveLength(1);
  });

  it('takes the right answer: the renewal key, this device, a year from now, from the device CA', async () => {
    renewAnswer = async (key, deviceId) =>
      answerWith(await deviceCertificate({ publicKey: key, deviceId }))(deviceId);
    player = await hostilePlayer({
      dir: dir.path,
      pki,
      serverCaPem: authority.rootPem,
      url: server.url,
      daysLeft: 10,
    });
    const { agent, config } = player;
    expect(await agent.renewal.check()).toMatchObject({ result: 'renewed' });
    expect(existsSync(`${config.certificateFile}.next`)).toBe(true);
    expect(agent.credentials.renewalState?.state).toBe('issued');
    expect(agent.credentials.nextCertificate!.notAfter.getTime()).toBeGreaterThan(Date.now() + 300 * DAY_MS);
  });

  it('takes a certificate starting a few hours ahead of a player whose clock lags the platform’s', async () => {
    // The platform backdates NotBefore 5 minutes by its own clock; this player's runs 3 hours behind it.
    renewAnswer = async (key, deviceId) =>
      answerWith(
        await deviceCertificate({
          publicKey: key,
          deviceId,
          notBefore: new Date(Date.now() + 3 * 3_600_000),
        }),
      )(deviceId);
    player = await hostilePlayer({
      dir: dir.path,
      pki,
      serverCaPem: authority.rootPem,
      url: server.url,
      daysLeft: 10,
    });
    expect(await player.agent.renewal.check()).toMatchObject({ result: 'renewed' });
    expect(player.agent.credentials.renewalState?.state).toBe('issued');
  });
});
