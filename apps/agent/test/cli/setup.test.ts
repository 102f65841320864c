import { spawn, spawnSync } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCsr, generateEs256KeyPair, importPrivateKey, readCertificate } from '@ooh/crypto';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
// The files `agent install` takes are the ones the platform's console hands out at enrolment.
import { issueDeviceCertificate, loadDeviceCa } from '../../../platform/src/devices/ca.js';
import { loadDeviceIdentitySettings } from '../../../platform/src/devices/settings.js';
import { CONFIG_DEFAULTS, parseConfig } from '../../src/config/config.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import { type AgentTestPlatform, startAgentTestPlatform } from '../helpers/platform.js';
import { tempDir } from '../helpers/temp.js';

const AGENT_ROOT = join(import.meta.dirname, '..', '..');
const REPO_ROOT = join(AGENT_ROOT, '..', '..');

/** The CLI as `npm run agent -- ...` runs it: from the repository root, INIT_CWD the user's folder. */
function agent(args: string[], initCwd: string, env: Record<string, string> = {}) {
  const result = spawnSync(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', 'apps/agent/src/cli/main.ts', ...args],
    {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, AGENT_CONFIG: '', INIT_CWD: initCwd, ...env },
    },
  );
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('player setup: init --write-config, install, status, run', () => {
  let dir: ReturnType<typeof tempDir>;
  let pki: TestPki;
  let platform: AgentTestPlatform;

  beforeAll(async () => {
    pki = await createTestPki();
    platform = await startAgentTestPlatform();
  });
  afterAll(async () => {
    await platform?.close();
  });
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => dir.cleanup());

  function writeConfig(folder: string) {
    return agent(
      [
        'init',
        '--write-config',
        '--structure',
        'ALM-0042',
        '--agents-url',
        platform.agentsUrl,
        '--devices-url',
        platform.devicesUrl,
        '--verify-url',
        platform.verifyUrl,
      ],
      folder,
    );
  }

  it('init --write-config writes a complete agent.json in the folder npm was run from, once', () => {
    const first = writeConfig(dir.path);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const configPath = join(dir.path, 'agent.json');
    expect(first.stdout).toContain(`Wrote ${configPath} (every setting at its default).`);
    expect(first.stdout).toMatch(/Created device key .*\/data\/device-key\.pem \(mode 0600\)/);
    expect(first.stdout).toContain('agent install <the folder they are in>');
    expect(existsSync(join(dir.path, 'data', 'device-key.pem'))).toBe(true);
    // Not in the repository root, where npm runs the script.
    expect(existsSync(join(REPO_ROOT, 'data', 'device-key.pem'))).toBe(false);

    const raw = JSON.parse(readFileSync(configPath, 'utf8'));
    expect(raw).toMatchObject({
      device_id: null,
      structure: 'ALM-0042',
      platform: { agents_url: platform.agentsUrl, verify_url: platform.verifyUrl },
      retention: { keep_acknowledged_ms: CONFIG_DEFAULTS.retention.keepAcknowledgedMs },
      disk: { hard_free_bytes: CONFIG_DEFAULTS.disk.hardFreeBytes },
    });
    const parsed = parseConfig(raw, dir.path, configPath);
    expect(parsed.warnings).toEqual([]);
    expect(parsed.shipping).toEqual(CONFIG_DEFAULTS.shipping);
    expect(parsed.disk).toEqual(CONFIG_DEFAULTS.disk);
    expect(parsed.retention).toEqual(CONFIG_DEFAULTS.retention);
    expect(parsed.revocationRefreshMs).toBe(CONFIG_DEFAULTS.revocationRefreshMs);

    const before = readFileSync(configPath, 'utf8');
    const again = writeConfig(dir.path);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`agent: ${configPath} exists; it was kept (--force to replace it)\n`);
    expect(readFileSync(configPath, 'utf8')).toBe(before);

    const missing = agent(['init', '--write-config', '--structure', 'ALM-1'], dir.path);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /^agent: init --write-config needs --agents-url, --devices-url, --verify-url\n\nusage:/,
    );
    const help = agent(['--help'], dir.path);
    expect(help.stdout).toContain('$INIT_CWD');
    expect(help.stdout).toContain('exit 3 when it is not enrolled');
  });

  it('status with the authority root missing says so in one line, exit 2, no stack trace', () => {
    expect(writeConfig(dir.path).code).toBe(0);
    const configPath = join(dir.path, 'agent.json');
    const raw = JSON.parse(readFileSync(configPath, 'utf8'));
    writeFileSync(configPath, JSON.stringify({ ...raw, device_id: '7d2b4c1e-9a3f-4e8b-b1c2-3d4e5f6a7b8c' }));
    const status = agent(['status'], dir.path);
    expect(status.code).toBe(2);
    expect(status.stderr).toMatch(
      /^agent: config_invalid: authority_root_file \S+authority-root\.pem cannot be read \(ENOENT\): save authority-root\.pem .*agent install <folder>.*\n$/,
    );
    expect(status.stderr.split('\n')).toHaveLength(2);
  });

  it('status on a player not enrolled yet exits 3 and says so; install takes the console files and enrols it', async () => {
    expect(writeConfig(dir.path).code).toBe(0);
    const configPath = join(dir.path, 'agent.json');
    const notEnrolled = agent(['status'], dir.path);
    expect(notEnrolled.code).toBe(3);
    expect(notEnrolled.stdout).toContain('device:          (not enrolled: device_id not set)');

    // The console's enrolment on the platform: its device CA issues for the key `agent init` made.
    const now = new Date();
    const key = importPrivateKey(readFileSync(join(dir.path, 'data', 'device-key.pem'), 'utf8'));
    const enrolled = await platform.enrol({
      publicKey: createPublicKey(key),
      csr: await createCsr({
        subject: 'CN=player',
        keyPair: { publicKey: createPublicKey(key), privateKey: key },
      }),
    });
    const deviceId = enrolled.deviceId;
    const chainPem = enrolled.chainPem!;
    const issued = readCertificate(enrolled.certificatePem!);
    const downloads = join(dir.path, 'Downloads');
    mkdirSync(downloads);
    writeFileSync(join(downloads, 'device-cert.pem'), issued.pem);
    writeFileSync(join(downloads, 'device-chain.pem'), chainPem);
    writeFileSync(join(downloads, 'server-ca.pem'), platform.serverCaPem);
    writeFileSync(join(downloads, 'authority-root.pem'), pki.authorityRootPem);
    writeFileSync(join(downloads, 'notes.txt'), 'not a console file: skipped in a folder');

    // A certificate for another key (another player's) is refused and nothing is written.
    const otherKeys = generateEs256KeyPair();
    const other = await platform.enrol({
      publicKey: otherKeys.publicKey,
      csr: await createCsr({ subject: 'CN=other player', keyPair: otherKeys }),
    });
    const wrong = join(dir.path, 'wrong');
    mkdirSync(wrong);
    writeFileSync(join(wrong, 'device-cert.pem'), other.certificatePem!);
    writeFileSync(join(wrong, 'device-chain.pem'), chainPem);
    const configBefore = readFileSync(configPath, 'utf8');
    const refused = agent(['install', 'wrong'], dir.path);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^agent: refused, nothing was written: .*device-cert\.pem is not for this player's key/,
    );
    expect(readFileSync(configPath, 'utf8')).toBe(configBefore);
    expect(existsSync(join(dir.path, 'data', 'device-cert.pem'))).toBe(false);

    // A chain that did not issue the certificate is refused too.
    writeFileSync(join(wrong, 'device-cert.pem'), issued.pem);
    writeFileSync(join(wrong, 'device-chain.pem'), pki.deviceIssuing.certificatePem);
    const badChain = agent(['install', 'wrong'], dir.path);
    expect(badChain.code).toBe(1);
    expect(badChain.stderr).toMatch(/device-chain\.pem did not issue .*device-cert\.pem/);

    const installed = agent(['install', 'Downloads'], dir.path);
    expect(installed.stderr).toBe('');
    expect(installed.code).toBe(0);
    expect(installed.stdout).toContain(
      `Installed device ${deviceId}: certificate serial ${issued.serialHex}`,
    );
    const config = JSON.parse(readFileSync(configPath, 'utf8'));
    expect(config.device_id).toBe(deviceId);
    expect(config.server_ca_file).toBe('server-ca.pem');
    expect(readCertificate(readFileSync(join(dir.path, 'data', 'device-cert.pem'), 'utf8')).serialHex).toBe(
      issued.serialHex,
    );
    expect(readFileSync(join(dir.path, 'data', 'device-chain.pem'), 'utf8')).toBe(chainPem);
    expect(readFileSync(join(dir.path, 'authority-root.pem'), 'utf8')).toBe(pki.authorityRootPem);
    expect(readFileSync(join(dir.path, 'server-ca.pem'), 'utf8')).toBe(platform.serverCaPem);

    // Status now: enrolled, times in local time with the zone (TZ of the player).
    const status = agent(['status'], dir.path, { TZ: 'Asia/Tokyo' });
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`device:          ${deviceId}`);
    const expiry = new Date(issued.notAfter.getTime() + 9 * 3_600_000).toISOString();
    expect(status.stdout).toContain(`expires ${expiry.slice(0, 10)} ${expiry.slice(11, 19)} +09:00 (`);
    const json = agent(['status', '--json'], dir.path, { TZ: 'Asia/Tokyo' });
    expect(JSON.parse(json.stdout).identity.certificate.not_after).toBe(issued.notAfter.toISOString());

    // Another device's certificate for this key: refused unless --force. The platform never issues one (a key is
    // held by one device), so its device CA code issues it, from a CA of its own.
    const ca = await loadDeviceCa(
      loadDeviceIdentitySettings({ dataDir: join(dir.path, 'platform-data') }, {}),
      now,
      pino({ level: 'silent' }),
    );
    const renamed = await issueDeviceCertificate(ca, {
      deviceId: '00000000-0000-4000-8000-000000000001',
      publicKey: key,
      now,
    });
    writeFileSync(join(wrong, 'device-cert.pem'), renamed.pem);
    writeFileSync(join(wrong, 'device-chain.pem'), ca.chainPem);
    const otherDevice = agent(
      ['install', join(wrong, 'device-cert.pem'), join(wrong, 'device-chain.pem')],
      dir.path,
    );
    expect(otherDevice.code).toBe(1);
    expect(otherDevice.stderr).toContain(
      `for device 00000000-0000-4000-8000-000000000001 but the config holds device_id ${deviceId} (--force`,
    );
    const unknownFile = agent(['install', 'Downloads/notes.txt'], dir.path);
    expect(unknownFile.code).toBe(2);
    expect(unknownFile.stderr).toMatch(
      /^agent: install_invalid: .*notes\.txt: not one of the console's files/,
    );
    const none = agent(['install'], dir.path);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^agent: install needs the files the console gave/);
  });

  it('run logs one start-up summary line', async () => {
    expect(writeConfig(dir.path).code).toBe(0);
    const configPath = join(dir.path, 'agent.json');
    const raw = JSON.parse(readFileSync(configPath, 'utf8'));
    raw.device_id = '7d2b4c1e-9a3f-4e8b-b1c2-3d4e5f6a7b8c';
    writeFileSync(configPath, JSON.stringify(raw));
    writeFileSync(join(dir.path, 'authority-root.pem'), pki.authorityRootPem);
    const child = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'apps/agent/src/cli/main.ts', 'run'],
      { cwd: REPO_ROOT, env: { ...process.env, AGENT_CONFIG: '', INIT_CWD: dir.path } },
    );
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    const deadline = Date.now() + 60_000;
    while (!stderr.includes('"agent started"') && Date.now() < deadline && child.exitCode === null) {
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => child.once('close', r));
    const started = stderr
      .split('\n')
      .filter((line) => line.includes('"agent started"'))
      .map((line) => JSON.parse(line));
    expect(started).toHaveLength(1);
    expect(started[0]).toMatchObject({
      level: 'info',
      device_id: raw.device_id,
      structure: 'ALM-0042',
      agents_url: platform.agentsUrl,
      verify_url: platform.verifyUrl,
      channel: 'signed',
      queue_depth: expect.any(Number),
      certificate_not_after: null,
    });
    expect(started[0]).toHaveProperty('media');
    expect(code).toBe(0);
  });
});
