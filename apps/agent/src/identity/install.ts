import { X509Certificate } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import {
  type CertificateInfo,
  exportPublicKeySpki,
  importPrivateKey,
  readCertificate,
  splitPemChain,
} from '@ooh/crypto';
import type { AgentConfig } from '../config/config.js';
import { AgentError } from '../errors.js';
import { writeFileAtomic } from '../fs/atomic.js';

/**
 * `agent install <folder-or-files>`: the files the console gives at enrolment (enrol-device.tsx: device-cert.pem,
 * device-chain.pem, server-ca.pem, authority-root.pem), recognised by name (a browser's "device-cert (1).pem" too),
 * checked, then written to the config's paths, and the device id (the certificate's CN, devices/ca.ts:
 * `CN=<device id>, OU=Devices`) written into the config file. Nothing is written unless every check passes.
 */
export interface InstallFiles {
  certificate: string | null;
  chain: string | null;
  serverCa: string | null;
  authorityRoot: string | null;
}

const KINDS: [keyof InstallFiles, RegExp][] = [
  ['certificate', /^device-cert\b.*\.pem$/i],
  ['chain', /^device-chain\b.*\.pem$/i],
  ['serverCa', /^server-ca\b.*\.pem$/i],
  ['authorityRoot', /^authority-root\b.*\.pem$/i],
];

/** Sorts the given paths (folders are looked into, one level) into the console's four files. */
export function findInstallFiles(paths: string[]): InstallFiles {
  const found: InstallFiles = { certificate: null, chain: null, serverCa: null, authorityRoot: null };
  const files: string[] = [];
  for (const path of paths) {
    if (!existsSync(path)) throw new AgentError('install_invalid', `${path} does not exist`);
    if (statSync(path).isDirectory()) {
      for (const name of readdirSync(path).sort()) files.push(join(path, name));
    } else {
      files.push(path);
    }
  }
  for (const file of files) {
    const kind = KINDS.find(([, pattern]) => pattern.test(basename(file)))?.[0];
    if (!kind) {
      if (paths.includes(file)) {
        throw new AgentError(
          'install_invalid',
          `${file}: not one of the console's files (device-cert.pem, device-chain.pem, server-ca.pem, authority-root.pem)`,
        );
      }
      continue;
    }
    if (found[kind])
      throw new AgentError('install_invalid', `two files for ${kind}: ${found[kind]} and ${file}`);
    found[kind] = file;
  }
  return found;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

/** The device id the console put in the certificate's subject: `CN=<id>, OU=Devices, O=…` (or `CN=device <id>`). */
export function deviceIdFromCertificate(certificate: CertificateInfo): string | null {
  const cn = /(?:^|[,\n/]\s*)CN=([^,\n/]+)/.exec(certificate.subject)?.[1] ?? '';
  return UUID.exec(cn)?.[0]?.toLowerCase() ?? null;
}

export interface InstallResult {
  deviceId: string;
  certificate: CertificateInfo;
  written: string[];
}

function readPem(file: string, what: string): string {
  const text = readFileSync(file, 'utf8');
  if (splitPemChain(text).length === 0)
    throw new AgentError('install_invalid', `${file}: no PEM certificate (${what})`);
  return text;
}

/**
 * Checks, then installs. Refused (AgentError install_refused, nothing written): no device key yet, a certificate
 * for another key, one that is expired or whose chain did not issue it, a device id other than the one the config
 * holds (unless `force`: a device enrolled anew).
 */
export function installEnrolment(
  config: AgentConfig,
  files: InstallFiles,
  options: { now: Date; force?: boolean },
): InstallResult {
  if (!config.configFile)
    throw new AgentError('install_invalid', 'the config has no file to write device_id into');
  if (!files.certificate) {
    throw new AgentError(
      'install_invalid',
      'no device-cert.pem among the files (the console\'s "certificate" download)',
    );
  }
  if (!existsSync(config.keyFile)) {
    throw new AgentError('install_refused', `no device key at ${config.keyFile}: run "agent init" first`);
  }
  const key = importPrivateKey(readFileSync(config.keyFile, 'utf8'));
  const certificatePem = readPem(files.certificate, 'the device certificate');
  const certificate = readCertificate(certificatePem);
  if (certificate.isCa)
    throw new AgentError('install_refused', `${files.certificate} is a CA certificate, not a device's`);
  if (certificate.publicKeySpki !== exportPublicKeySpki(key)) {
    throw new AgentError(
      'install_refused',
      `${files.certificate} is not for this player's key (${config.keyFile}): was it issued for another player, or was the key made again after enrolment?`,
    );
  }
  if (certificate.notAfter.getTime() <= options.now.getTime()) {
    throw new AgentError(
      'install_refused',
      `${files.certificate} expired on ${certificate.notAfter.toISOString()}`,
    );
  }
  const deviceId = deviceIdFromCertificate(certificate);
  if (!deviceId)
    throw new AgentError(
      'install_refused',
      `${files.certificate}: no device id in its subject (${certificate.subject})`,
    );
  if (config.deviceId && config.deviceId !== deviceId && !options.force) {
    throw new AgentError(
      'install_refused',
      `the certificate is for device ${deviceId} but the config holds device_id ${config.deviceId} (--force to replace it)`,
    );
  }
  let chainPem: string | null = null;
  if (files.chain) {
    chainPem = readPem(files.chain, 'the certificate chain');
    const issuer = new X509Certificate(splitPemChain(chainPem)[0]!);
    const leaf = new X509Certificate(certificatePem);
    if (!leaf.checkIssued(issuer) || !leaf.verify(issuer.publicKey)) {
      throw new AgentError('install_refused', `${files.chain} did not issue ${files.certificate}`);
    }
  } else if (!existsSync(config.caChainFile)) {
    throw new AgentError(
      'install_invalid',
      'no device-chain.pem among the files (the console\'s "chain" download)',
    );
  }
  const serverCaPem = files.serverCa ? readPem(files.serverCa, 'the server CA') : null;
  const authorityRootPem = files.authorityRoot ? readPem(files.authorityRoot, 'the authority root') : null;

  // Every check passed: write.
  const written: string[] = [];
  const write = (path: string, text: string) => {
    writeFileAtomic(path, text, 0o644);
    written.push(path);
  };
  const raw = JSON.parse(readFileSync(config.configFile, 'utf8')) as Record<string, unknown>;
  write(config.certificateFile, certificatePem);
  if (chainPem) write(config.caChainFile, chainPem);
  if (authorityRootPem) write(config.authorityRootFile, authorityRootPem);
  if (serverCaPem) {
    const target = config.serverCaFile ?? join(dirname(config.configFile), 'server-ca.pem');
    write(target, serverCaPem);
    if (!config.serverCaFile) raw['server_ca_file'] = 'server-ca.pem';
  }
  raw['device_id'] = deviceId;
  write(config.configFile, `${JSON.stringify(raw, null, 2)}\n`);
  return { deviceId, certificate, written };
}
