import { cpSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { verifySignedDocument } from '@ooh/verify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CHANNEL_PLAY, type PlayCommand } from '../electron/bridge.js';
import { RendererDisplay } from '../electron/renderer-display.js';
import { formatStatus } from '../src/cli/main.js';
import { FileCredentials } from '../src/identity/file-credentials.js';
import { AgentState } from '../src/log/agent-state.js';
import { openAgentDatabase } from '../src/log/database.js';
import { createHttpClient } from '../src/net/http-client.js';
import { RenewalManager } from '../src/renewal/renewal.js';
import type { AgentConfig } from '../src/config/config.js';
import { type AgentCore, createAgent, EnvelopeVerifier, readStatus } from '../src/index.js';
import { memoryLogger } from '../src/logger.js';
import { setUpAgent } from './helpers/agent-setup.js';
import { ManualHardware, TimerDisplay } from './helpers/hardware.js';
import { writeMedia } from './helpers/media.js';
import { createTestPki, type TestPki } from './helpers/pki.js';
import {
  type AgentTestPlatform,
  FaultyHttp,
  issuedForDaysLeft,
  startAgentTestPlatform,
  startProxy,
} from './helpers/platform.js';
import { tempDir } from './helpers/temp.js';

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Every event the platform stored for the device, batch after batch. */
async function shippedEvents(
  platform: AgentTestPlatform,
  deviceId: string,
): Promise<Record<string, unknown>[]> {
  return (await platform.batches(deviceId)).flatMap(
    (batch) => JSON.parse(batch.body.toString()).events as Record<string, unknown>[],
  );
}

/*
 * Against the real platform (helpers/platform.ts): devices enrolled through its console, the signed channel on its
 * agents host, the certificate channel and renewals on its devices host's mutual TLS.
 */
describe('the agent core, end to end against the platform', () => {
  let pki: TestPki;
  let platform: AgentTestPlatform;
  let dir: ReturnType<typeof tempDir>;
  let agent: AgentCore | null;

  beforeAll(async () => {
    pki = await createTestPki();
    platform = await startAgentTestPlatform();
  });
  afterAll(async () => {
    await platform?.close();
  });
  beforeEach(() => {
    dir = tempDir();
    agent = null;
  });
  afterEach(async () => {
    await agent?.close();
    dir.cleanup();
  });

  it('plays verified media, logs plays and a tamper event, and ships them on the signed channel', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: null,
      // The platform takes a burst of three batches, then one every ten seconds: a batch every 2.5 s carries the
      // three plays within the burst, where a batch per record would wait for the fourth.
      overrides: {
        shipping: { min_interval_ms: 2500, idle_interval_ms: 100, backoff_base_ms: 50, backoff_cap_ms: 500 },
      },
    });
    await writeMedia(pki, setup.config.mediaDir, 'a.png', 'image a');
    await writeMedia(pki, setup.config.mediaDir, 'b.png', 'image b', {
      manifest: { approval_number: 'APP-B' },
    });
    await writeMedia(pki, setup.config.mediaDir, 'bad.png', 'no sidecar', { sidecar: false });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const hardware = new ManualHardware({ now: () => new Date() });
    agent = await createAgent({
      config: setup.config,
      hardware,
      display: new TimerDisplay({ now: () => new Date() }),
      logger: memoryLogger(),
    });
    await agent.start();
    hardware.setTamper('open');
    await until(async () => (await platform.plays(setup.deviceId)) >= 3);
    const status = agent.status();
    expect(status).toMatchObject({
      device_id: setup.deviceId,
      structure: 'ALM-0001',
      identity: { certificate: null },
      mode: 'normal',
      media: { playable: 2, refused: 1 },
    });
    expect(status.shipping.lastSend).not.toBeNull();
    await agent.stop();
    const records = agent.log.records().map((r) => r.record);
    expect(records.filter((r) => r.kind === 'reject')).toEqual([
      expect.objectContaining({ code: 'NO_SIGNATURE', detail: expect.objectContaining({ file: 'bad.png' }) }),
    ]);
    expect(records.filter((r) => r.kind === 'tamper')).toEqual([
      expect.objectContaining({ detail: { state: 'open' } }),
    ]);
    const batches = await platform.batches(setup.deviceId);
    expect(batches.length).toBeGreaterThan(0);
    expect(batches.every((b) => b.channel === 'agent')).toBe(true);
    // Every record the platform has is one the agent logged, in order, none twice.
    const shipped = await shippedEvents(platform, setup.deviceId);
    expect(shipped.map((e) => e['seq'])).toEqual(shipped.map((_, i) => i + 1));
    expect(shipped.some((e) => e['kind'] === 'tamper')).toBe(true);
  });

  it('uses the certificate channel with a certificate, renews when due and promotes the new pair after a call', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: { issuedAt: issuedForDaysLeft(5) },
    });
    await writeMedia(pki, setup.config.mediaDir, 'a.png', 'image a');
    await new Promise((resolve) => setTimeout(resolve, 150));
    agent = await createAgent({
      config: setup.config,
      hardware: new ManualHardware({ now: () => new Date() }),
      display: new TimerDisplay({ now: () => new Date() }),
      logger: memoryLogger(),
      random: () => 0,
    });
    const firstSerial = agent.credentials.certificate!.serialHex;
    await agent.start();
    await until(() => agent!.credentials.certificate?.serialHex !== firstSerial);
    await until(async () => (await platform.plays(setup.deviceId)) >= 2);
    const batches = await platform.batches(setup.deviceId);
    expect(batches.every((b) => b.channel === 'cert')).toBe(true);
    // The platform renewed it, and the agent uses the certificate the platform issued.
    const certificates = await platform.certificates(setup.deviceId);
    expect(certificates.map((c) => c.issuedBy)).toEqual(['enrolment', 'renewal']);
    expect(agent.credentials.certificate!.serialHex).toBe(certificates[1]!.serial);
    expect(existsSync(`${setup.config.certificateFile}.previous`)).toBe(true);
    const status = agent.status();
    expect(status.identity.certificate).toMatchObject({ state: 'valid' });
    expect(status.identity.certificate!.days_left).toBeGreaterThan(300);
    await agent.stop();
    const stopped = agent.status();

    // `agent status` reads the same facts from disk.
    const offline = await readStatus(setup.config);
    expect(offline.identity.certificate?.serial).toBe(agent.credentials.certificate!.serialHex);
    expect(offline.shipping.lastSend).toEqual(stopped.shipping.lastSend);
    expect(offline.queue).toEqual(stopped.queue);
  });

  it('a board clock in 1970 waits for the clock: nothing judged, played or refused; then it plays', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: 'valid',
      overrides: { media_recheck_ms: 100 },
    });
    await writeMedia(pki, setup.config.mediaDir, 'a.png', 'image a');
    await writeMedia(pki, setup.config.mediaDir, 'unsigned.png', 'no sidecar', { sidecar: false });
    await new Promise((resolve) => setTimeout(resolve, 150));
    // The RTC was reset: the board says 1 January 1970, far beyond what a Date header may correct (24 h).
    let boardSkewMs = Date.UTC(1970, 0, 1, 6) - Date.now();
    const board = { now: () => new Date(Date.now() + boardSkewMs) };
    const logger = memoryLogger();
    let core: AgentCore | null = null;
    agent = core = await createAgent({
      config: setup.config,
      hardware: new ManualHardware(board, () => performance.now()),
      display: new TimerDisplay({ now: () => core!.clock.now() }),
      logger,
    });
    await agent.start();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const waiting = agent.status();
    expect(waiting.clock.state).toBe('implausible');
    expect(waiting.identity.certificate).toMatchObject({ state: 'not_yet_valid' });
    expect(waiting.media).toEqual({ playable: 0, refused: 0, waiting: 2 });
    expect(waiting.mode).toBe('offline');
    const kinds = () => agent!.log.records().map((r) => r.record);
    expect(kinds().filter((r) => r.kind === 'play' || r.kind === 'reject')).toEqual([]);
    expect(
      kinds()
        .filter((r) => r.kind === 'mode_change')
        .map((r) => r.detail),
    ).toEqual([{ from: 'normal', to: 'offline', reason: 'clock' }]);
    expect(logger.lines.some((l) => /device certificate not yet valid \(clock\?\)/.test(l.message))).toBe(
      true,
    );
    expect(logger.lines.some((l) => /expired/i.test(l.message))).toBe(false);
    expect(logger.lines.some((l) => /clock implausible/.test(l.message))).toBe(true);

    // NTP sets the board clock right: within a media recheck the files are judged, and it plays.
    boardSkewMs = 0;
    await until(() => agent!.log.records().some((r) => r.record.kind === 'play'));
    // The mode change logged in 1970 was kept back until the platform's time was known, then set right.
    await until(async () => (await platform.plays(setup.deviceId)) >= 1);
    await agent.stop();
    const shipped = await shippedEvents(platform, setup.deviceId);
    expect(shipped.length).toBeGreaterThan(1);
    for (const event of shipped) {
      const stamp = (event['start'] ?? event['at']) as string;
      expect(Math.abs(Date.parse(stamp) - Date.now())).toBeLessThan(60_000);
    }
    const records = kinds();
    expect(records.filter((r) => r.kind === 'reject')).toEqual([
      expect.objectContaining({
        code: 'NO_SIGNATURE',
        detail: expect.objectContaining({ file: 'unsigned.png' }),
      }),
    ]);
    for (const record of records.filter((r) => r.kind === 'play' || r.kind === 'reject')) {
      const stamp = record.kind === 'play' ? record.start : record.at;
      expect(Math.abs(Date.parse(stamp) - Date.now())).toBeLessThan(60_000);
    }
    expect(agent.status().identity.certificate).toMatchObject({ state: 'valid' });
  });

  it('a board 10 minutes fast, offline at start: plays are logged, then set right before they are sent', async () => {
    // The platform is down when the player starts: nothing answers at its addresses (the agent takes the time from
    // any answer of the platform, the revocation list's too).
    const agents = await startProxy(platform.agentsUrl, { down: true });
    const verify = await startProxy(platform.verifyUrl, { down: true });
    try {
      const setup = await setUpAgent({
        dir: dir.path,
        platform,
        pki,
        certificate: null,
        urls: { agents: agents.url, verify: verify.url },
      });
      await writeMedia(pki, setup.config.mediaDir, 'a.png', 'image a');
      await new Promise((resolve) => setTimeout(resolve, 150));
      const board = { now: () => new Date(Date.now() + 600_000) };
      let core: AgentCore | null = null;
      agent = core = await createAgent({
        config: setup.config,
        hardware: new ManualHardware(board, () => performance.now()),
        display: new TimerDisplay({ now: () => core!.clock.now() }),
        logger: memoryLogger(),
      });
      await agent.start();
      await until(() => agent!.log.records().filter((r) => r.record.kind === 'play').length >= 3);
      expect(agent.status().clock.state).toBe('unsynced');
      expect(agent.status().queue.unsettled).toBeGreaterThanOrEqual(3);
      expect(await platform.batches(setup.deviceId)).toEqual([]);

      // The platform comes back on the same addresses.
      agents.down = false;
      verify.down = false;
      await until(async () => (await platform.plays(setup.deviceId)) >= 3);
      expect(agent.status().clock.state).toBe('synced');
      expect(Math.abs(agent.clock.offset + 600_000)).toBeLessThan(1500);
      await agent.stop();
      const answers = (await platform.batches(setup.deviceId)).map((batch) => batch.answer);
      expect(
        answers.reduce((sum, answer) => sum + answer.refused, 0),
        JSON.stringify(answers.map((a) => a.items)),
      ).toBe(0);
      const plays = (await shippedEvents(platform, setup.deviceId)).filter(
        (event) => event['kind'] === 'play',
      );
      // Every play is in the platform's time (to the Date header's second), not ten minutes ahead; those
      // logged before the sync say so.
      for (const play of plays) expect(Date.parse(play['end'] as string)).toBeLessThan(Date.now() + 1500);
      expect(
        plays.filter((play) => (play['detail'] as { clock_corrected_ms?: number })?.clock_corrected_ms)
          .length,
      ).toBeGreaterThanOrEqual(3);
    } finally {
      await agents.close();
      await verify.close();
    }
  });

  it("the Electron shell's display, wired as main.ts wires it, stamps plays on the agent's clock, not the board's", async () => {
    // main.ts gives RendererDisplay no clock: the agent hands it its corrected one. With the board's own clock, a
    // board 10 minutes fast put every play 10 minutes ahead after the sync, and the platform refused them all
    // (time_in_future).
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    await writeMedia(pki, setup.config.mediaDir, 'a.png', 'image a');
    await new Promise((resolve) => setTimeout(resolve, 150));
    const board = { now: () => new Date(Date.now() + 600_000) };
    const timers = new Set<ReturnType<typeof setTimeout>>();
    const later = (ms: number, run: () => void) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        run();
      }, ms);
      timers.add(timer);
    };
    // The renderer page: on screen 10 ms after the command, off it when the length asked for has passed.
    const display: RendererDisplay = new RendererDisplay({
      send: (channel, command) => {
        if (channel !== CHANNEL_PLAY) return;
        const { playId, durationMs } = command as PlayCommand;
        later(10, () => display.onReport({ type: 'playing', playId }));
        later(10 + (durationMs ?? 1000), () =>
          display.onReport({ type: 'ended', playId, interrupted: false }),
        );
      },
    });
    try {
      agent = await createAgent({
        config: setup.config,
        hardware: new ManualHardware(board, () => performance.now()),
        display,
        logger: memoryLogger(),
      });
      await agent.start();
      await until(() => agent!.status().clock.state === 'synced');
      const synced = agent.log.records().length;
      // Plays logged after the sync: their times are as the display read them.
      await until(() => agent!.log.records().filter((r) => r.record.kind === 'play').length >= synced + 2);
      await until(async () => (await platform.plays(setup.deviceId)) >= 2);
      await agent.stop();
      const plays = (await shippedEvents(platform, setup.deviceId)).filter(
        (event) => event['kind'] === 'play',
      );
      expect(plays.length).toBeGreaterThanOrEqual(2);
      for (const play of plays) expect(Date.parse(play['end'] as string)).toBeLessThan(Date.now() + 1500);
      const answers = (await platform.batches(setup.deviceId)).map((batch) => batch.answer);
      expect(
        answers.reduce((sum, answer) => sum + answer.refused, 0),
        JSON.stringify(answers),
      ).toBe(0);
    } finally {
      for (const timer of timers) clearTimeout(timer);
    }
  });

  it('shipping stopped by a refused certificate starts again once a renewal recovers a lost answer, without a restart', async () => {
    // A renewal whose answer was lost, then three days away: the old certificate is past its old_valid_until, so its
    // batches are refused device_unauthorized (terminal: shipping stops), and only the same CSR sent again recovers
    // the new certificate. Shipping used to wait for a restart after that.
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: { issuedAt: issuedForDaysLeft(10) },
      overrides: {
        renewal_check_ms: 1000,
        shipping: { min_interval_ms: 200, idle_interval_ms: 100, backoff_base_ms: 50, backoff_cap_ms: 500 },
      },
    });
    const credentialsOf = () =>
      FileCredentials.load({
        keyFile: setup.config.keyFile,
        certificateFile: setup.config.certificateFile,
        caChainFile: setup.config.caChainFile,
        dataDir: setup.config.dataDir,
      });
    const db = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    const http = new FaultyHttp(createHttpClient({ serverCaPem: platform.serverCaPem }));
    try {
      const renewal = new RenewalManager({
        credentials: credentialsOf(),
        http,
        devicesUrl: setup.config.devicesUrl,
        deviceId: setup.deviceId,
        clock: { now: () => new Date() },
        state: new AgentState(db),
        logger: memoryLogger(),
        random: () => 0,
      });
      http.loseAnswerNext(1);
      expect((await renewal.check()).result).toBe('failed');
      expect(await platform.certificates(setup.deviceId)).toHaveLength(2);
      // The renewal's next try comes a few seconds after the agent starts: its batches are refused first.
      const later = 3 * 86_400_000;
      const serial = credentialsOf().certificate!.serialHex;
      new AgentState(db).set('renewal.plan', {
        serial,
        at: new Date(Date.now() + later + 6000).toISOString(),
      });
    } finally {
      db.close();
      await http.close();
    }
    platform.setClockOffset(3 * 86_400_000);
    try {
      await writeMedia(pki, setup.config.mediaDir, 'a.png', 'image a');
      await new Promise((resolve) => setTimeout(resolve, 150));
      const board = { now: () => new Date(Date.now() + 3 * 86_400_000) };
      let core: AgentCore | null = null;
      agent = core = await createAgent({
        config: setup.config,
        hardware: new ManualHardware(board, () => performance.now()),
        display: new TimerDisplay({ now: () => core!.clock.now() }),
        logger: memoryLogger(),
      });
      await agent.start();
      await until(() => agent!.status().shipping.alert?.code === 'device_unauthorized', 20_000);
      expect(agent.status().shipping.state).toBe('stopped');
      expect(await platform.plays(setup.deviceId)).toBe(0);
      // The renewal recovers the certificate already issued; shipping starts again by itself.
      await until(async () => (await platform.plays(setup.deviceId)) >= 1, 30_000);
      // The platform counts the plays when it commits, a moment before the agent has stored its answer (and cleared
      // the alert with it): wait for that too.
      await until(() => agent!.status().shipping.alert === null, 10_000);
      expect(await platform.certificates(setup.deviceId)).toHaveLength(2);
    } finally {
      platform.setClockOffset(0);
    }
  });

  it('a board clock a month off, beyond what a Date header may correct, is reported until it is set', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    const offset = { ms: 30 * 86_400_000 };
    const board = { now: () => new Date(Date.now() + offset.ms) };
    const hardware = new ManualHardware(board, () => performance.now());
    const logger = memoryLogger();
    agent = await createAgent({ config: setup.config, hardware, logger });
    await agent.start();
    // A record to ship: the shipper asks the platform's time first (a POST: the revocation list, which a cache may
    // hand back, tells no time). It is a month behind the board's: refused (max_clock_correction_ms, 24 h), and said.
    hardware.setTamper('open');
    await until(() => agent!.status().clock.refused_offset_ms !== null);
    expect(Math.abs(agent.status().clock.refused_offset_ms! + 30 * 86_400_000)).toBeLessThan(5000);
    expect(agent.status().clock.offset_ms).toBe(0);
    expect(logger.lines.some((l) => l.level === 'error' && /30 d 0 h behind/.test(l.message))).toBe(true);
    // `agent status` from the disk says it too, and exits 1.
    const fromDisk = await readStatus(setup.config);
    expect(Math.abs(fromDisk.clock.refused_offset_ms! + 30 * 86_400_000)).toBeLessThan(5000);
    expect(formatStatus(fromDisk)).toMatch(
      /clock refused: +the platform's clock is 30 d 0 h behind this board's, beyond max_clock_correction_ms/,
    );
    // Someone sets the board clock: the next Date header (the next record's) is taken, and the report goes.
    offset.ms = 0;
    hardware.setTamper('closed');
    await until(
      () => agent!.status().clock.state === 'synced' && agent!.status().clock.refused_offset_ms === null,
    );
    await agent.stop();
    expect((await readStatus(setup.config)).clock.refused_offset_ms).toBeNull();
  });

  it('refuses to start without a device_id', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    await expect(createAgent({ config: { ...setup.config, deviceId: null } })).rejects.toMatchObject({
      code: 'config_invalid',
    });
  });

  it('logs each unknown config key at start, with its full path, and starts anyway', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: null,
      overrides: { shiping: { interval: 5 }, newer_agent_setting: true },
    });
    const logger = memoryLogger();
    agent = await createAgent({
      config: setup.config,
      hardware: new ManualHardware({ now: () => new Date() }),
      logger,
    });
    await agent.start();
    const warnings = logger.lines.filter((line) => line.message.startsWith('unknown key'));
    expect(warnings).toEqual([
      {
        level: 'warn',
        message: 'unknown key "shiping" (ignored; did you mean "shipping"?)',
        fields: { config: setup.configPath },
      },
      {
        level: 'warn',
        message: 'unknown key "newer_agent_setting" (ignored)',
        fields: { config: setup.configPath },
      },
    ]);
    expect(agent.status().device_id).toBe(setup.deviceId);
  });

  it('agents in one process share envelope signature checks when they pin the same root, and only then', async () => {
    let calls = 0;
    const counting = (rootPem: string) =>
      new EnvelopeVerifier({
        trustedRootsPem: [rootPem],
        verifyDocument: (text, validate, roots, at) => {
          calls++;
          return verifySignedDocument(text, validate, roots, at);
        },
      });
    const first = await setUpAgent({ dir: join(dir.path, 'first'), platform, pki, certificate: null });
    const second = await setUpAgent({ dir: join(dir.path, 'second'), platform, pki, certificate: null });
    await writeMedia(pki, first.config.mediaDir, 'a.png', 'image a');
    // The second player holds the same creative, sidecar and all, as a fleet's players do.
    cpSync(first.config.mediaDir, second.config.mediaDir, { recursive: true });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const playable = async (config: AgentConfig, envelopeVerifier: EnvelopeVerifier) => {
      const core = await createAgent({
        config,
        hardware: new ManualHardware({ now: () => new Date() }),
        logger: memoryLogger(),
        envelopeVerifier,
      });
      try {
        await core.start();
        return core.status().media?.playable;
      } finally {
        await core.close();
      }
    };
    const shared = counting(pki.authorityRootPem);
    expect(await playable(first.config, shared)).toBe(1);
    const verified = calls;
    expect(verified).toBeGreaterThan(0);
    expect(await playable(second.config, shared)).toBe(1);
    expect(calls).toBe(verified);
    // A verifier pinned to another root is not used: the agent checks against its own root, and the file plays.
    const foreign = counting((await createTestPki()).authorityRootPem);
    expect(await playable(second.config, foreign)).toBe(1);
    expect(calls).toBe(verified);
  });
});
