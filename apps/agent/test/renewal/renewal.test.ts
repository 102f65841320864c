import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { exportPublicKeySpki, readCertificate } from '@ooh/crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FileCredentials } from '../../src/identity/file-credentials.js';
import { AgentState } from '../../src/log/agent-state.js';
import { type Database, openAgentDatabase } from '../../src/log/database.js';
import { memoryLogger } from '../../src/logger.js';
import { createHttpClient } from '../../src/net/http-client.js';
import { RenewalManager } from '../../src/renewal/renewal.js';
import { type AgentSetup, setUpAgent } from '../helpers/agent-setup.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import {
  type AgentTestPlatform,
  FaultyHttp,
  issuedForDaysLeft,
  startAgentTestPlatform,
} from '../helpers/platform.js';
import { ManualClock, tempDir } from '../helpers/temp.js';

const DAY_MS = 86_400_000;

/*
 * Against the real platform (helpers/platform.ts): devices enrolled with a CSR through its console, certificates
 * issued by its device CA, renewals over its devices host's mutual TLS.
 */
describe('certificate self-renewal', () => {
  let pki: TestPki;
  let platform: AgentTestPlatform;
  let dir: ReturnType<typeof tempDir>;
  let db: Database;
  let http: FaultyHttp;
  let setup: AgentSetup;
  let credentials: FileCredentials;
  let clock: ManualClock;
  let logger: ReturnType<typeof memoryLogger>;

  beforeAll(async () => {
    pki = await createTestPki();
    platform = await startAgentTestPlatform();
  });
  afterAll(async () => {
    await platform?.close();
  });
  beforeEach(() => {
    dir = tempDir();
    clock = new ManualClock(new Date());
    logger = memoryLogger();
  });
  afterEach(async () => {
    await http?.close();
    db?.close();
    dir.cleanup();
  });

  /** A player enrolled with a certificate the platform issued for a year, `daysLeft` days of it left now. */
  async function prepare(daysLeft: number): Promise<RenewalManager> {
    setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: { issuedAt: issuedForDaysLeft(daysLeft) },
    });
    db = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    http = new FaultyHttp(createHttpClient({ serverCaPem: platform.serverCaPem }));
    credentials = loadCredentials();
    return manager(() => 0.5);
  }

  function loadCredentials(): FileCredentials {
    return FileCredentials.load({
      keyFile: setup.config.keyFile,
      certificateFile: setup.config.certificateFile,
      caChainFile: setup.config.caChainFile,
      dataDir: setup.config.dataDir,
    });
  }

  function manager(random: () => number, sleep?: (ms: number) => Promise<void>): RenewalManager {
    return new RenewalManager({
      credentials,
      http,
      devicesUrl: setup.config.devicesUrl,
      deviceId: setup.deviceId,
      clock,
      state: new AgentState(db),
      logger,
      random,
      ...(sleep ? { sleep } : {}),
    });
  }

  it('does nothing while 30 days or more are left', async () => {
    const renewal = await prepare(45);
    expect(await renewal.check()).toEqual({ result: 'not_due', daysLeft: 44 });
    expect(credentials.renewalState).toBeNull();
  });

  it('plans a random point in the last 30 days, keeps it across restarts, then renews over mTLS', async () => {
    const renewal = await prepare(29);
    const first = await renewal.check();
    expect(first.result).toBe('scheduled');
    const plannedAt = Date.parse((first as { at: string }).at);
    // random 0.5 in [now, notAfter - 15 days] = now + 7 days.
    expect(Math.abs(plannedAt - (Date.now() + 7 * DAY_MS))).toBeLessThan(60_000);
    // Another draw (a restart) keeps the plan.
    expect(await manager(() => 0).check()).toEqual(first);

    clock.set(new Date(plannedAt + 1000));
    const oldKeySpki = exportPublicKeySpki(credentials.deviceKey);
    const renewed = await renewal.check();
    expect(renewed.result).toBe('renewed');
    // The new pair sits beside the old one; the old pair is untouched.
    expect(existsSync(`${setup.config.keyFile}.next`)).toBe(true);
    expect(statSync(`${setup.config.keyFile}.next`).mode & 0o777).toBe(0o600);
    expect(exportPublicKeySpki(credentials.deviceKey)).toBe(oldKeySpki);
    expect(credentials.renewalState?.state).toBe('issued');
    const next = readCertificate(readFileSync(`${setup.config.certificateFile}.next`, 'utf8'));
    expect(next.publicKeySpki).toBe(exportPublicKeySpki(credentials.signingKey()));
    expect(next.publicKeySpki).not.toBe(oldKeySpki);
    // The platform saw the body signature and the current certificate, and issued the new one.
    expect(http.exchanges).toEqual([expect.objectContaining({ path: '/d/v1/renew', status: 200 })]);
    expect(await platform.certificates(setup.deviceId)).toEqual([
      expect.objectContaining({ issuedBy: 'enrolment' }),
      { serial: next.serialHex, issuedBy: 'renewal' },
    ]);

    // The new pair is offered first; a success with it promotes it and retires the old one.
    const identity = credentials.tlsIdentity(new Date(), 0)!;
    expect(identity.id).toBe(next.serialHex);
    expect(credentials.tlsIdentity(new Date(), 1)!.id).not.toBe(next.serialHex);
    credentials.confirm(identity);
    expect(credentials.renewalState).toBeNull();
    expect(credentials.certificate?.serialHex).toBe(next.serialHex);
    expect(existsSync(`${setup.config.keyFile}.next`)).toBe(false);
    expect(exportPublicKeySpki(loadCredentials().deviceKey)).toBe(next.publicKeySpki);
    expect(await renewal.check()).toMatchObject({ result: 'not_due' });
  });

  it('recovers a lost answer by sending the same CSR again', async () => {
    const renewal = await prepare(10);
    http.loseAnswerNext(1);
    expect((await manager(() => 0).check()).result).toBe('failed');
    const csr = credentials.renewalState?.state === 'requested' ? credentials.renewalState.csr : null;
    expect(csr).not.toBeNull();
    // A restart in between: state comes back from disk.
    credentials = loadCredentials();
    expect(credentials.renewalState).toMatchObject({ state: 'requested', csr });
    expect((await manager(() => 0).check()).result).toBe('renewed');
    // The platform answered the same CSR with the certificate it had issued, not a second one.
    expect(http.exchanges.map((e) => e.status)).toEqual(['lost', 200]);
    const certificates = await platform.certificates(setup.deviceId);
    expect(certificates.map((c) => c.issuedBy)).toEqual(['enrolment', 'renewal']);
    expect(credentials.nextCertificate?.serialHex).toBe(certificates[1]!.serial);
    expect(credentials.renewalState).toMatchObject({ state: 'issued', csr });
    void renewal;
  });

  it("recovers a lost answer after more than a day offline, past the old certificate's old_valid_until", async () => {
    await prepare(10);
    http.loseAnswerNext(1);
    expect((await manager(() => 0).check()).result).toBe('failed');
    const csr = credentials.renewalState?.state === 'requested' ? credentials.renewalState.csr : null;
    expect(csr).not.toBeNull();
    // The player comes back three days later: the platform took the renewal, so the old certificate's
    // old_valid_until (24 hours on) is past, and the player still holds only the old pair.
    const later = 3 * DAY_MS;
    platform.setClockOffset(later);
    clock.set(new Date(clock.now().getTime() + later));
    try {
      credentials = loadCredentials();
      expect((await manager(() => 0).check()).result).toBe('renewed');
      // The platform answered the same CSR with the certificate it had issued, not a second one.
      expect(http.exchanges.map((e) => e.status)).toEqual(['lost', 200]);
      const certificates = await platform.certificates(setup.deviceId);
      expect(certificates.map((c) => c.issuedBy)).toEqual(['enrolment', 'renewal']);
      expect(credentials.nextCertificate?.serialHex).toBe(certificates[1]!.serial);
      // Only the new pair is offered now (the old one's old_valid_until is past).
      expect(credentials.tlsIdentity(clock.now(), 0)?.id).toBe(certificates[1]!.serial);
      expect(credentials.tlsIdentity(clock.now(), 1)?.id).toBe(certificates[1]!.serial);
      // A call with it succeeds, and promotes it.
      const identity = credentials.tlsIdentity(clock.now())!;
      const whoami = await http.get(`${setup.config.devicesUrl.replace(/\/+$/, '')}/d/v1/whoami`, identity);
      expect(whoami.status).toBe(200);
      credentials.confirm(identity);
      expect(credentials.certificate?.serialHex).toBe(certificates[1]!.serial);
      expect(credentials.renewalState).toBeNull();
    } finally {
      platform.setClockOffset(0);
    }
  });

  it('finishes a promotion cut short by a power failure', async () => {
    await prepare(5);
    expect((await manager(() => 0).check()).result).toBe('renewed');
    const nextSerial = credentials.nextCertificate!.serialHex;
    // Power cut after the state said "promoting" and only the key was moved.
    const statePath = join(setup.config.dataDir, 'renewal.json');
    const state = JSON.parse(readFileSync(statePath, 'utf8'));
    writeFileSync(statePath, JSON.stringify({ ...state, state: 'promoting' }));
    const { renameSync } = await import('node:fs');
    renameSync(setup.config.keyFile, `${setup.config.keyFile}.previous`);
    renameSync(`${setup.config.keyFile}.next`, setup.config.keyFile);
    // `agent status` beside it reads what the promotion gives and renames nothing.
    const files = () => readdirSync(dirname(setup.config.keyFile)).sort();
    const before = files();
    const readOnly = FileCredentials.load(
      {
        keyFile: setup.config.keyFile,
        certificateFile: setup.config.certificateFile,
        caChainFile: setup.config.caChainFile,
        dataDir: setup.config.dataDir,
      },
      { readOnly: true },
    );
    expect(readOnly.certificate?.serialHex).toBe(nextSerial);
    expect(readOnly.certificate?.publicKeySpki).toBe(exportPublicKeySpki(readOnly.deviceKey));
    expect(readOnly.renewalState).toMatchObject({ state: 'promoting' });
    expect(files()).toEqual(before);
    expect(existsSync(statePath)).toBe(true);
    const reloaded = loadCredentials();
    expect(reloaded.renewalState).toBeNull();
    expect(reloaded.certificate?.serialHex).toBe(nextSerial);
    expect(reloaded.certificate?.publicKeySpki).toBe(exportPublicKeySpki(reloaded.deviceKey));
  });

  it('reports a certificate that is not valid YET as such (clock?), never as expired', async () => {
    const renewal = await prepare(200);
    // The board clock is far behind: before the certificate was issued.
    clock.set(new Date(Date.now() - 400 * DAY_MS));
    expect(await renewal.check()).toMatchObject({ result: 'not_yet_valid' });
    expect(await renewal.check()).toMatchObject({ result: 'not_yet_valid' });
    expect(logger.lines.filter((l) => /not yet valid \(clock\?\)/.test(l.message))).toHaveLength(1);
    expect(logger.lines.some((l) => /expired/.test(l.message))).toBe(false);
    // The clock is set: back to the normal checks.
    clock.set(new Date());
    expect(await renewal.check()).toMatchObject({ result: 'not_due' });
  });

  it('reports an expired certificate once instead of looping', async () => {
    const renewal = await prepare(-1);
    expect(await renewal.check()).toMatchObject({ result: 'expired' });
    expect(await renewal.check()).toMatchObject({ result: 'expired' });
    expect(logger.lines.filter((l) => l.level === 'error' && /expired/.test(l.message))).toHaveLength(1);
    expect(credentials.tlsIdentity(new Date())).toBeNull();
    expect(http.exchanges).toEqual([]);
  });

  it('checks at least hourly, whatever interval is configured', async () => {
    await prepare(200);
    const waits: number[] = [];
    const controller = new AbortController();
    const renewal = new RenewalManager({
      credentials,
      http,
      devicesUrl: setup.config.devicesUrl,
      deviceId: setup.deviceId,
      clock,
      state: new AgentState(db),
      logger,
      checkEveryMs: 5 * 3_600_000,
      sleep: async (ms) => {
        waits.push(ms);
        if (waits.length === 3) controller.abort();
      },
    });
    await renewal.run(controller.signal);
    expect(waits).toEqual([3_600_000, 3_600_000, 3_600_000]);
  });
});
