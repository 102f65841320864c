import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { importPublicKey } from '@ooh/crypto';
import { type AgentConfig, parseConfig } from '../../src/config/config.js';
import { prepareEnrolment } from '../../src/identity/enrolment.js';
import type { TestPki } from './pki.js';
import type { AgentTestPlatform } from './platform.js';

export interface AgentSetup {
  config: AgentConfig;
  configPath: string;
  deviceId: string;
  raw: Record<string, unknown>;
}

/**
 * Lays out a player as a technician would: config file, authority root, `agent init` (device key and CSR), the
 * device enrolled on the real platform through its console API, with the CSR when a client certificate is asked for
 * ('valid': issued now; `issuedAt`: issued then, for the platform's one year), and `device_id` written into the
 * config. The platform's URLs may be replaced (`urls`: a proxy in front of a host).
 */
export async function setUpAgent(args: {
  dir: string;
  platform: AgentTestPlatform;
  pki: TestPki;
  certificate?: { issuedAt: Date } | 'valid' | null;
  urls?: { agents?: string; devices?: string; verify?: string };
  overrides?: Record<string, unknown>;
}): Promise<AgentSetup> {
  const platform = args.platform;
  const raw = layOutPlayer({
    dir: args.dir,
    authorityRootPem: args.pki.authorityRootPem,
    serverCaPem: platform.serverCaPem,
    deviceId: null,
    structure: platform.structure.code,
    urls: {
      agents: args.urls?.agents ?? platform.agentsUrl,
      devices: args.urls?.devices ?? platform.devicesUrl,
      verify: args.urls?.verify ?? platform.verifyUrl,
    },
    ...(args.overrides ? { overrides: args.overrides } : {}),
  });
  const configPath = join(args.dir, 'agent.json');
  const enrolment = await prepareEnrolment(parseConfig(raw, args.dir, configPath));
  const enrolled = await platform.enrol({
    publicKey: importPublicKey(enrolment.publicKeySpki),
    ...(args.certificate ? { csr: enrolment.csrPem } : {}),
    ...(args.certificate && args.certificate !== 'valid' ? { issuedAt: args.certificate.issuedAt } : {}),
  });
  raw['device_id'] = enrolled.deviceId;
  writeFileSync(configPath, JSON.stringify(raw, null, 2));
  const config = parseConfig(raw, args.dir, configPath);
  if (enrolled.certificatePem && enrolled.chainPem) {
    writeFileSync(config.certificateFile, enrolled.certificatePem);
    writeFileSync(config.caChainFile, enrolled.chainPem);
  }
  return { config, configPath, deviceId: enrolled.deviceId, raw };
}

/**
 * A player's folder as a technician lays it out (the authority root, the server CA) and its config as written in
 * tests: fast shipping and media checks, `overrides` last. Gives the config's raw JSON (not yet written).
 */
export function layOutPlayer(args: {
  dir: string;
  authorityRootPem: string;
  serverCaPem: string;
  deviceId: string | null;
  structure: string;
  urls: { agents: string; devices: string; verify: string };
  overrides?: Record<string, unknown>;
}): Record<string, unknown> {
  mkdirSync(args.dir, { recursive: true });
  writeFileSync(join(args.dir, 'authority-root.pem'), args.authorityRootPem);
  writeFileSync(join(args.dir, 'server-ca.pem'), args.serverCaPem);
  return {
    device_id: args.deviceId,
    structure: args.structure,
    platform: { agents_url: args.urls.agents, devices_url: args.urls.devices, verify_url: args.urls.verify },
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
}
