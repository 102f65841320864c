import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { importPublicKey } from '@ooh/crypto';
import { type AgentConfig, parseConfig } from '../../src/config/config.js';
import { prepareEnrolment } from '../../src/identity/enrolment.js';
import { issueDeviceCertificate, type TestPki } from './pki.js';
import type { TestPlatform } from './test-platform.js';

const DAY_MS = 86_400_000;

export interface AgentSetup {
  config: AgentConfig;
  configPath: string;
  deviceId: string;
  raw: Record<string, unknown>;
}

/**
 * Lays out a player as a technician would: config file, authority root, `agent init` (device key), the
 * device enrolled on the test platform, and optionally a client certificate with the given validity.
 */
export async function setUpAgent(args: {
  dir: string;
  platform: TestPlatform;
  pki: TestPki;
  certificate?: { notBefore: Date; notAfter: Date } | 'valid' | null;
  overrides?: Record<string, unknown>;
}): Promise<AgentSetup> {
  const deviceId = randomUUID();
  mkdirSync(args.dir, { recursive: true });
  writeFileSync(join(args.dir, 'authority-root.pem'), args.pki.authorityRootPem);
  writeFileSync(join(args.dir, 'server-ca.pem'), args.pki.tlsRootPem);
  let devicesUrl: string;
  try {
    devicesUrl = args.platform.devicesUrl;
  } catch {
    devicesUrl = args.platform.agentsUrl;
  }
  const raw: Record<string, unknown> = {
    device_id: deviceId,
    structure: 'ALM-0001',
    platform: {
      agents_url: args.platform.agentsUrl,
      devices_url: devicesUrl,
      verify_url: args.platform.verifyUrl,
    },
    data_dir: 'data',
    media_dir: 'media',
    authority_root_file: 'authority-root.pem',
    server_ca_file: 'server-ca.pem',
    image_duration_ms: 1000,
    shipping: { min_interval_ms: 0, idle_interval_ms: 100, backoff_base_ms: 50, backoff_cap_ms: 500 },
    media_stability_ms: 100,
    sidecar_grace_ms: 0,
    ...args.overrides,
  };
  const configPath = join(args.dir, 'agent.json');
  writeFileSync(configPath, JSON.stringify(raw, null, 2));
  const config = parseConfig(raw, args.dir, configPath);
  const enrolment = await prepareEnrolment(config);
  const publicKey = importPublicKey(enrolment.publicKeySpki);
  let certificatePem: string | undefined;
  if (args.certificate) {
    const validity =
      args.certificate === 'valid'
        ? { notBefore: new Date(Date.now() - DAY_MS), notAfter: new Date(Date.now() + 365 * DAY_MS) }
        : args.certificate;
    certificatePem = await issueDeviceCertificate(
      args.pki,
      deviceId,
      publicKey,
      validity.notBefore,
      validity.notAfter,
    );
    writeFileSync(config.certificateFile, certificatePem);
    writeFileSync(config.caChainFile, args.pki.deviceIssuing.certificatePem);
  }
  args.platform.registerDevice(deviceId, publicKey, certificatePem);
  return { config, configPath, deviceId, raw };
}
