import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { exportPublicKeySpki, importPrivateKey, parseCsr } from '@ooh/crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAgent } from '../../src/agent.js';
import { formatLocalTime, main } from '../../src/cli/main.js';
import BetterSqlite3 from 'better-sqlite3';
import { AgentState } from '../../src/log/agent-state.js';
import { openAgentDatabase } from '../../src/log/database.js';
import { LATEST_SCHEMA_VERSION } from '../../src/log/migrations.js';
import { memoryLogger } from '../../src/logger.js';
import { PlayLog } from '../../src/log/play-log.js';
import { BatchStore } from '../../src/shipping/batch-store.js';
import { setUpAgent } from '../helpers/agent-setup.js';
import { ManualHardware } from '../helpers/hardware.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import { type AgentTestPlatform, issuedForDaysLeft, startAgentTestPlatform } from '../helpers/platform.js';
import { tempDir } from '../helpers/temp.js';

const DAY_MS = 86_400_000;
const AGENT_ROOT = join(import.meta.dirname, '..', '..');

async function run(args: string[]): Promise<{ code: number; output: string; errors: string }> {
  let output = '';
  let errors = '';
  const code = await main(
    args,
    (text) => {
      output += text;
    },
    (text) => {
      errors += text;
    },
  );
  return { code, output, errors };
}

describe('agent CLI', () => {
  let pki: TestPki;
  let platform: AgentTestPlatform;
  let dir: ReturnType<typeof tempDir>;

  beforeAll(async () => {
    pki = await createTestPki();
    // Players enrolled on the real platform, certificates issued by its device CA (helpers/platform.ts).
    platform = await startAgentTestPlatform();
  });
  afterAll(async () => {
    await platform?.close();
  });
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => dir.cleanup());

  it('status only reads: no play log created before the first run, none migrated, the file left as it was', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: { issuedAt: issuedForDaysLeft(100) },
    });
    const logPath = join(setup.config.dataDir, 'agent.sqlite');
    // Installed, never run: the status of an empty log, and still no log.
    expect(existsSync(logPath)).toBe(false);
    const fresh = await run(['status', '--config', setup.configPath]);
    expect(fresh.code).toBe(0);
    expect(fresh.output).toContain('queue:           0 records not yet acknowledged');
    expect(existsSync(logPath)).toBe(false);
    // A log at an older schema version (an agent upgraded, not started since): refused, never migrated by status.
    const db = openAgentDatabase(logPath);
    new PlayLog(db).appendStatus({ kind: 'tamper', at: new Date() });
    db.pragma('user_version = 3');
    db.close();
    const bytes = readFileSync(logPath);
    // (main throws it; the program prints its message and exits 2, as for every AgentError.)
    await expect(run(['status', '--config', setup.configPath])).rejects.toMatchObject({
      code: 'database_older',
      message: expect.stringMatching(/schema version 3 is older .* the agent upgrades it when it starts/),
    });
    expect(readFileSync(logPath).equals(bytes)).toBe(true);
    // At the current version it is read, and its bytes stay as they were.
    const again = new BetterSqlite3(logPath);
    again.pragma(`user_version = ${LATEST_SCHEMA_VERSION}`);
    again.close();
    const current = readFileSync(logPath);
    const read = await run(['status', '--config', setup.configPath]);
    expect(read.code).toBe(0);
    expect(read.output).toContain('queue:           1 records not yet acknowledged (last seq 1)');
    expect(readFileSync(logPath).equals(current)).toBe(true);
  });

  it('init creates a 0600 P-256 key once and prints its public key and a CSR for it', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    // setUpAgent already ran init; running it again keeps the key.
    const keyBefore = readFileSync(setup.config.keyFile, 'utf8');
    const { code, output } = await run(['init', '--config', setup.configPath]);
    expect(code).toBe(0);
    expect(output).toMatch(/already exists; it was kept/);
    expect(readFileSync(setup.config.keyFile, 'utf8')).toBe(keyBefore);
    expect(statSync(setup.config.keyFile).mode & 0o777).toBe(0o600);
    const spki = exportPublicKeySpki(importPrivateKey(keyBefore));
    expect(output).toContain(`public key:       ${spki}`);
    const csrPem = output.slice(
      output.indexOf('-----BEGIN CERTIFICATE REQUEST-----'),
      output.indexOf('-----END CERTIFICATE REQUEST-----') + 33,
    );
    const csr = await parseCsr(csrPem);
    expect(csr.signatureValid).toBe(true);
    expect(csr.publicKeySpki).toBe(spki);
  });

  it('init on a fresh player creates the key', async () => {
    const configPath = join(dir.path, 'agent.json');
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(dir.path, 'root.pem'), pki.authorityRootPem);
    writeFileSync(
      configPath,
      JSON.stringify({
        structure: 'ALM-0002',
        platform: {
          agents_url: 'https://a.example',
          devices_url: 'https://d.example',
          verify_url: 'https://v.example',
        },
        authority_root_file: 'root.pem',
      }),
    );
    const { code, output } = await run(['init', '--config', configPath]);
    expect(code).toBe(0);
    expect(output).toMatch(/Created device key .*device-key\.pem \(mode 0600\)/);
    expect(output).toMatch(
      /agent install <the folder they are in>\n.*writes the device id into the config file/,
    );
    expect(statSync(join(dir.path, 'data', 'device-key.pem')).mode & 0o777).toBe(0o600);
  });

  it('status shows identity, certificate expiry, queue depth, last send and clock offset', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: { issuedAt: issuedForDaysLeft(100) },
    });
    const db = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    new PlayLog(db).appendStatus({ kind: 'tamper', at: new Date() });
    db.close();
    const { code, output } = await run(['status', '--config', setup.configPath]);
    expect(code).toBe(0);
    expect(output).toContain(`device:          ${setup.deviceId}`);
    expect(output).toMatch(/certificate: {5}VALID serial [0-9a-f]+, expires .* \((99|100) days\)/);
    expect(output).toContain('queue:           1 records not yet acknowledged (last seq 1)');
    expect(output).toContain('last send:       never');
    expect(output).toContain('clock offset:    0 ms');
    // No clock jump held: no line for one.
    expect(output).not.toContain('clock held');
    const json = await run(['status', '--json', '--config', setup.configPath]);
    expect(JSON.parse(json.output)).toMatchObject({
      device_id: setup.deviceId,
      queue: { depth: 1, last_seq: 1 },
      clock: { offset_ms: 0, held_offset_ms: null },
    });
  });

  it('status shows a clock jump the running agent holds until a later request confirms it, and not once it ends', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    const agent = await createAgent({
      config: setup.config,
      hardware: new ManualHardware({ now: () => new Date() }),
      logger: memoryLogger(),
    });
    try {
      const header = (aheadMs: number) => {
        const at = agent.clock.baseNow();
        return agent.clock.observeServerDate(new Date(at.getTime() + aheadMs).toUTCString(), at, at);
      };
      // Synced by a first header on time; then one an hour on is held, not taken.
      expect(header(0)).toBe(true);
      expect(header(3_600_000)).toBe(false);
      const held = agent.clock.heldOffset!;
      expect(Math.abs(held - 3_600_000)).toBeLessThanOrEqual(1000);
      const { code, output } = await run(['status', '--config', setup.configPath]);
      expect(code).toBe(0);
      expect(output).toContain(`clock offset:    ${agent.clock.offset} ms`);
      const jump = ((held - agent.clock.offset) / 1000).toFixed(1);
      expect(output).toContain(
        `\nclock held:      a jump of +${jump} s (to ${held} ms) seen once, held until a later request confirms it\n`,
      );
      const json = await run(['status', '--json', '--config', setup.configPath]);
      expect(JSON.parse(json.output).clock).toMatchObject({ held_offset_ms: held });
      // A later header that agrees with the clock drops it; status no longer shows one.
      expect(header(0)).toBe(true);
      expect(agent.clock.heldOffset).toBeNull();
      expect((await run(['status', '--config', setup.configPath])).output).not.toContain('clock held');
      // Held again, then the agent stops: a held jump belongs to its run.
      expect(header(3_600_000)).toBe(false);
      expect((await run(['status', '--config', setup.configPath])).output).toContain('clock held');
    } finally {
      await agent.close();
    }
    const after = await run(['status', '--json', '--config', setup.configPath]);
    expect(JSON.parse(after.output).clock).toMatchObject({ held_offset_ms: null });
  });

  it("status exits 1 while the platform's time was refused as beyond max_clock_correction_ms, and says so", async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    const db = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    const state = new AgentState(db);
    state.set('clock.refused_offset_ms', 26 * 3_600_000);
    db.close();
    const refused = await run(['status', '--config', setup.configPath]);
    expect(refused.code).toBe(1);
    expect(refused.output).toContain(
      "\nclock refused:   the platform's clock is 26 h ahead of this board's, beyond max_clock_correction_ms: not taken; set the board clock (NTP)\n",
    );
    const json = await run(['status', '--json', '--config', setup.configPath]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.output).clock).toMatchObject({ refused_offset_ms: 26 * 3_600_000 });
    // Once a header is taken the running agent removes it: status is clean again.
    const again = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    new AgentState(again).delete('clock.refused_offset_ms');
    again.close();
    const clean = await run(['status', '--config', setup.configPath]);
    expect(clean.code).toBe(0);
    expect(clean.output).not.toContain('clock refused');
  });

  it('status shows a stuck batch (exit code 1) and the records set aside (exit code 0 once shipping moves)', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    const db = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    const log = new PlayLog(db);
    log.appendStatus({ kind: 'tamper', at: new Date('2026-11-20T06:00:00.000Z') });
    log.appendStatus({ kind: 'tamper', at: new Date('2026-11-20T06:00:01.000Z') });
    const batches = new BatchStore(db);
    const batch = batches.pendingOrCut({ deviceId: setup.deviceId, now: new Date(), maxEvents: 1 })!;
    for (let i = 0; i < 3; i++) {
      batches.noteAttempt(batch.batchSeq, 'signed');
      batches.noteFailure(batch.batchSeq, {
        at: new Date(`2026-11-20T06:0${i + 1}:00.000Z`),
        serverError: true,
        what: 'http 500 internal_error',
      });
    }
    db.close();

    const stuck = await run(['status', '--config', setup.configPath]);
    expect(stuck.code).toBe(1);
    expect(stuck.output).toContain(
      `STUCK:           batch 1 (1 records) failing since ${formatLocalTime('2026-11-20T06:01:00.000Z')}: 3 sends, 3 failed (3 answered 5xx); last: http 500 internal_error`,
    );
    const json = await run(['status', '--json', '--config', setup.configPath]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.output).shipping).toMatchObject({
      stuck: {
        batch_seq: 1,
        records: 1,
        since: '2026-11-20T06:01:00.000Z',
        attempts: 3,
        failures: 3,
        server_errors: 3,
        last_answer: 'http 500 internal_error',
      },
      setAside: { records: 0, newest: [] },
    });

    const again = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    new BatchStore(again).setAside(
      batch.batchSeq,
      new Date('2026-11-20T06:04:00.000Z'),
      'http 500 internal_error',
    );
    again.close();
    const setAside = await run(['status', '--config', setup.configPath]);
    expect(setAside.code).toBe(0);
    expect(setAside.output).not.toContain('STUCK');
    expect(setAside.output).toContain(
      'set aside:       1 record(s) the platform could not take while it took others (kept, not sent again)',
    );
    expect(setAside.output).toContain(
      `seq 1 tamper logged ${formatLocalTime('2026-11-20T06:00:00.000Z')}, set aside ${formatLocalTime('2026-11-20T06:04:00.000Z')}: http 500 internal_error`,
    );
    expect(setAside.output).toContain('queue:           1 records not yet acknowledged (last seq 2)');
  });

  it('status shows the database size, free space and thresholds, the oldest unacknowledged record and retention', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    const db = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    const log = new PlayLog(db);
    const batches = new BatchStore(db);
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000 - 60_000);
    log.appendStatus({ kind: 'tamper', at: twoHoursAgo }, twoHoursAgo);
    batches.storeAnswer(
      batches.pendingOrCut({ deviceId: setup.deviceId, now: twoHoursAgo })!.batchSeq,
      '{}',
      twoHoursAgo,
    );
    log.appendStatus({ kind: 'tamper', at: twoHoursAgo }, twoHoursAgo);
    log.appendStatus({ kind: 'tamper', at: new Date() });
    db.close();

    const { code, output } = await run(['status', '--config', setup.configPath]);
    expect(code).toBe(0);
    expect(output).toMatch(
      /^database: {8}\d+\.\d (KiB|MiB) \(file \d+\.\d (KiB|MiB) \+ wal \d+(\.\d)? (B|KiB|MiB)\)$/m,
    );
    expect(output).toMatch(
      /^disk: {12}OK, \d+\.\d (GiB|TiB) free \(warning below 512\.0 MiB, hard below 128\.0 MiB\)$/m,
    );
    expect(output).toMatch(/^ {17}data .*\/data: \d+\.\d (GiB|TiB) free of \d+\.\d (GiB|TiB)$/m);
    expect(output).toMatch(
      /^oldest unacked: {2}seq 2, logged \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d \(2 h 1 min ago\)$/m,
    );
    expect(output).toContain(
      'retention:       answered batches kept 28 days, records set aside 180 days; 3 records in 1 batches kept',
    );
    const json = JSON.parse((await run(['status', '--json', '--config', setup.configPath])).output);
    expect(json.storage).toMatchObject({
      database: { vacuum: 'incremental' },
      disk: { state: 'ok', warn_free_bytes: 512 * 1024 ** 2, hard_free_bytes: 128 * 1024 ** 2 },
      oldest_unacknowledged: { seq: 2 },
      retention: { keep_acknowledged_ms: 28 * DAY_MS, kept: { records: 3, batches: 1 }, last_prune: null },
    });
    expect(json.storage.database.file_bytes).toBeGreaterThan(0);
    expect(json.storage.oldest_unacknowledged.age_seconds).toBeGreaterThanOrEqual(7260);
  });

  it('status exits 1 when the disk is below its hard threshold (billable content stops), 0 when only low', async () => {
    const huge = 2 ** 52;
    const full = await setUpAgent({
      dir: join(dir.path, 'full'),
      platform,
      pki,
      certificate: null,
      overrides: { disk: { warn_free_bytes: huge, hard_free_bytes: huge } },
    });
    const fullStatus = await run(['status', '--config', full.configPath]);
    expect(fullStatus.code).toBe(1);
    expect(fullStatus.output).toMatch(/^disk: {12}FULL, /m);
    expect(fullStatus.output).toContain('DISK FULL: only authority slot content plays until space is back');
    const low = await setUpAgent({
      dir: join(dir.path, 'low'),
      platform,
      pki,
      certificate: null,
      overrides: { disk: { warn_free_bytes: huge, hard_free_bytes: 0 } },
    });
    const lowStatus = await run(['status', '--config', low.configPath]);
    expect(lowStatus.code).toBe(0);
    expect(lowStatus.output).toMatch(/^disk: {12}LOW, /m);
    expect(lowStatus.output).toContain('oldest unacked:  none (every record answered by the platform)');
  });

  it('status says clearly when the certificate has expired (exit code 1)', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: { issuedAt: issuedForDaysLeft(-1) },
    });
    const { code, output } = await run(['status', '--config', setup.configPath]);
    expect(code).toBe(1);
    expect(output).toMatch(/certificate: {5}EXPIRED/);
    expect(output).toMatch(/has EXPIRED: renewal is impossible; enrol the device again/);
  });

  it('status tells a certificate not valid yet (clock?) from an expired one (exit code 1 too)', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      // Issued ten days from now by the platform's clock: not valid yet.
      certificate: { issuedAt: new Date(Date.now() + 10 * DAY_MS) },
    });
    const { code, output } = await run(['status', '--config', setup.configPath]);
    expect(code).toBe(1);
    expect(output).toMatch(/certificate: {5}NOT_YET_VALID/);
    expect(output).toContain('certificate not yet valid (clock?)');
    expect(output).not.toMatch(/EXPIRED/);
    expect(output).toMatch(/the clock is IMPLAUSIBLE/);
  });

  it('runs as a program: `node --conditions=source --import tsx src/cli/main.ts status`', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    const result = spawnSync(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'src/cli/main.ts', 'status', '--config', setup.configPath],
      { cwd: AGENT_ROOT, encoding: 'utf8', timeout: 60_000 },
    );
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('certificate:     none (signed channel only)');
    const bad = spawnSync(
      process.execPath,
      [
        '--conditions=source',
        '--import',
        'tsx',
        'src/cli/main.ts',
        'status',
        '--config',
        join(dir.path, 'missing.json'),
      ],
      { cwd: AGENT_ROOT, encoding: 'utf8', timeout: 60_000 },
    );
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/config_missing/);
  });

  it('answers an unknown command with the usage on stderr (exit 2) before looking for a config', async () => {
    const missing = join(dir.path, 'missing.json');
    const unknown = await run(['frobnicate', '--config', missing]);
    expect(unknown.code).toBe(2);
    expect(unknown.output).toBe('');
    expect(unknown.errors).toMatch(/^agent: unknown command "frobnicate"\n\nusage: agent <command>/);
    const none = await run(['--config', missing]);
    expect(none.code).toBe(2);
    expect(none.errors).toMatch(/^agent: no command given\n\nusage: agent <command>/);
    const extra = await run(['status', 'now', '--config', missing]);
    expect(extra.code).toBe(2);
    expect(extra.errors).toMatch(/^agent: status takes no arguments \(got "now"\)/);
    for (const args of [['--help'], ['status', '-h', '--config', missing]]) {
      const help = await run(args);
      expect(help.code).toBe(0);
      expect(help.output).toMatch(/^usage: agent <command>/);
      expect(help.errors).toBe('');
    }
  });

  it('answers an unknown option or a missing value with the usage (exit 2), not a stack trace', async () => {
    const option = await run(['status', '--verbose']);
    expect(option.code).toBe(2);
    expect(option.errors).toMatch(/^agent: Unknown option '--verbose'.*\n\nusage: agent <command>/s);
    const value = await run(['status', '--config']);
    expect(value.code).toBe(2);
    expect(value.errors).toMatch(/^agent: Option '-c, --config <value>' argument missing\n\nusage:/);
    const spawned = spawnSync(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'src/cli/main.ts', 'status', '--verbose'],
      { cwd: AGENT_ROOT, encoding: 'utf8', timeout: 60_000 },
    );
    expect(spawned.status).toBe(2);
    expect(spawned.stdout).toBe('');
    expect(spawned.stderr).toMatch(/^agent: Unknown option '--verbose'/);
    expect(spawned.stderr).not.toMatch(/\n\s+at /);
  });

  it('init and status warn on stderr about unknown config keys, and still work', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: null,
      overrides: { shipping: { min_interval_ms: 0, interval: 5 }, platfrom_url: 'https://x.example' },
    });
    const expected =
      `agent: warning: ${setup.configPath}: unknown key "platfrom_url" (ignored)\n` +
      `agent: warning: ${setup.configPath}: unknown key "shipping.interval" (ignored)\n`;
    const init = await run(['init', '--config', setup.configPath]);
    expect(init.code).toBe(0);
    expect(init.errors).toBe(expected);
    const status = await run(['status', '--json', '--config', setup.configPath]);
    expect(status.code).toBe(0);
    expect(status.errors).toBe(expected);
    // stdout stays JSON a script can read.
    expect(JSON.parse(status.output)).toMatchObject({ device_id: setup.deviceId });
  });
});
