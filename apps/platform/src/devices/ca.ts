import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  createIntermediateCa,
  createRootCa,
  exportPrivateKeyPem,
  generateEs256KeyPair,
  importPrivateKey,
  issueCertificate,
  randomSerialHex,
  readCertificate,
  sha256Hex,
  splitPemChain,
} from '@ooh/crypto';
import { addCalendarYears, LIMITS } from '@ooh/protocol';
import { type ChainResult, parsePem, parsePems, verifyChain } from '@ooh/verify';
import type { Logger } from 'pino';
import type { DeviceIdentitySettings } from './settings.js';

const DAY_MS = 86_400_000;
/** NotBefore is set this far back so that a fresh certificate works at once on a player whose clock is behind. */
export const CLOCK_SKEW_MS = 5 * 60_000;
const ROOT_VALIDITY_DAYS = 20 * 365;
const ISSUING_VALIDITY_DAYS = 10 * 365;
const SERVER_VALIDITY_DAYS = 365;
/** A generated server certificate with fewer days left than this is replaced at start. */
const SERVER_RENEW_DAYS = 30;

/** Generated files in `${dataDir}/device-ca/`. root-ca.pem is what a player or a technician trusts. */
export const DEVICE_CA_FILES = {
  rootCert: 'root-ca.pem',
  rootKey: 'root-ca.key',
  issuingCert: 'issuing-ca.pem',
  issuingKey: 'issuing-ca.key',
  chain: 'chain.pem',
  tlsCert: 'tls-server.pem',
  tlsKey: 'tls-server.key',
} as const;

export interface DeviceCa {
  /** The CA that signs device certificates. */
  issuingCertPem: string;
  issuingKey: KeyObject;
  issuingNotAfter: Date;
  /** The issuing CA and every certificate above it up to the root: chain_pem of the spec's answer. */
  chainPem: string;
  /** The certificates a client certificate may chain to (TLS `ca`). */
  trustPems: string[];
  /** The self-signed root of the chain. */
  rootPem: string;
}

export interface IssuedCertificate {
  pem: string;
  serial: string;
  sha256: string;
  notBefore: Date;
  notAfter: Date;
}

export class DeviceCaError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DeviceCaError';
  }
}

async function writeAtomically(file: string, data: string, mode: number): Promise<void> {
  const temp = `${file}.${process.pid}.${randomSerialHex().slice(0, 8)}.tmp`;
  await writeFile(temp, data, { mode, flag: 'wx' });
  await rename(temp, file);
}

async function readIfExists(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

function keyMatches(certPem: string, key: KeyObject): boolean {
  try {
    return new X509Certificate(certPem).checkPrivateKey(key);
  } catch {
    return false;
  }
}

/** A root and an issuing CA, written to `dir`; the issuing certificate is written last and marks completion. */
async function createGeneratedCa(dir: string, now: Date, log: Logger): Promise<void> {
  const notBefore = new Date(now.getTime() - DAY_MS);
  const root = generateEs256KeyPair();
  const rootPem = await createRootCa({
    subject: 'CN=OOH Device Root CA, O=OOH Platform',
    keyPair: root,
    notBefore,
    notAfter: new Date(now.getTime() + ROOT_VALIDITY_DAYS * DAY_MS),
  });
  const issuing = generateEs256KeyPair();
  const issuingPem = await createIntermediateCa({
    subject: 'CN=OOH Device Issuing CA, O=OOH Platform',
    publicKey: issuing.publicKey,
    issuerCertificatePem: rootPem,
    issuerKey: root.privateKey,
    notBefore,
    notAfter: new Date(now.getTime() + ISSUING_VALIDITY_DAYS * DAY_MS),
    pathLength: 0,
  });
  // Written into a fresh folder renamed into place at once, so that two processes starting on one data
  // directory never mix their halves: the loser finds the winner's CA and uses it.
  const files: [string, string, number][] = [
    [DEVICE_CA_FILES.rootKey, exportPrivateKeyPem(root.privateKey), 0o600],
    [DEVICE_CA_FILES.rootCert, rootPem, 0o644],
    [DEVICE_CA_FILES.issuingKey, exportPrivateKeyPem(issuing.privateKey), 0o600],
    [DEVICE_CA_FILES.chain, issuingPem + rootPem, 0o644],
    // Last: its presence marks a complete CA.
    [DEVICE_CA_FILES.issuingCert, issuingPem, 0o644],
  ];
  await mkdir(path.dirname(dir), { recursive: true });
  const temp = await mkdtemp(`${dir}.creating-`);
  try {
    await chmod(temp, 0o700);
    for (const [name, data, mode] of files)
      await writeFile(path.join(temp, name), data, { mode, flag: 'wx' });
    try {
      await rename(temp, dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw error;
      if ((await readIfExists(path.join(dir, DEVICE_CA_FILES.issuingCert))) !== null) return;
      // The folder exists without a CA (it may hold a TLS pair): move the files in, the marker last.
      for (const [name] of files) await rename(path.join(temp, name), path.join(dir, name));
    }
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
  log.info({ dir }, 'device CA created (root and issuing CA)');
}

/**
 * Reads the device CA: the configured one, or the generated one in `${dataDir}/device-ca/`, created on first
 * start. Refuses a CA whose key does not match, that is not a CA, or whose chain does not reach its root.
 */
export async function loadDeviceCa(
  settings: DeviceIdentitySettings,
  now: Date,
  log: Logger,
): Promise<DeviceCa> {
  let certPath: string;
  let keyPath: string;
  let chainPath: string;
  if (settings.ca) {
    ({ certPath, keyPath, chainPath } = settings.ca);
  } else {
    certPath = path.join(settings.dir, DEVICE_CA_FILES.issuingCert);
    keyPath = path.join(settings.dir, DEVICE_CA_FILES.issuingKey);
    chainPath = path.join(settings.dir, DEVICE_CA_FILES.rootCert);
    if ((await readIfExists(certPath)) === null) await createGeneratedCa(settings.dir, now, log);
  }
  const read = async (file: string): Promise<string> => {
    const text = await readIfExists(file);
    if (text === null) throw new DeviceCaError(`device CA: ${file} does not exist`);
    return text;
  };
  const issuingCertPem = splitPemChain(await read(certPath))[0];
  if (!issuingCertPem) throw new DeviceCaError(`device CA: no certificate in ${certPath}`);
  let issuingKey: KeyObject;
  try {
    issuingKey = importPrivateKey(await read(keyPath));
  } catch (cause) {
    throw new DeviceCaError(`device CA: ${keyPath} is not an unencrypted ECDSA P-256 private key`, { cause });
  }
  const issuing = readCertificate(issuingCertPem);
  if (!issuing.isCa) throw new DeviceCaError(`device CA: ${certPath} is not a CA certificate`);
  if (!keyMatches(issuingCertPem, issuingKey)) {
    throw new DeviceCaError(`device CA: ${keyPath} is not the key of ${certPath}`);
  }
  const above = splitPemChain(await read(chainPath)).filter((pem) => pem.trim() !== issuingCertPem.trim());
  const selfSigned = (pem: string) => {
    const x = new X509Certificate(pem);
    return x.checkIssued(x) && x.verify(x.publicKey);
  };
  const roots = [issuingCertPem, ...above].filter(selfSigned);
  if (roots.length === 0) throw new DeviceCaError(`device CA: ${chainPath} holds no self-signed root`);
  // Names, signatures and constraints are checked at a moment inside the issuing CA's own validity: whether
  // the CA is valid today is for TLS (machine clock) to say, and a test clock may stand anywhere.
  let chain: ChainResult;
  try {
    chain = await verifyChain({
      leaf: parsePem(issuingCertPem)[0]!,
      pool: parsePems(above),
      roots: parsePems(roots),
      at: issuing.notBefore,
    });
  } catch (cause) {
    throw new DeviceCaError(`device CA: a certificate of ${chainPath} or ${certPath} is unreadable`, {
      cause,
    });
  }
  if (!chain.ok) {
    throw new DeviceCaError(
      `device CA: the issuing CA does not chain to its root: ${chain.error.code}: ${chain.error.message}`,
      { cause: chain.error },
    );
  }
  const chainPem = chain.chain.map((c) => readCertificate(c.der).pem);
  if (now < issuing.notBefore || now > issuing.notAfter) {
    log.warn(
      { notBefore: issuing.notBefore, notAfter: issuing.notAfter },
      'device CA: the issuing CA is not valid now',
    );
  } else if (
    issuing.notAfter.getTime() <
    addCalendarYears(now, LIMITS.certificateValidityYears).getTime() + 30 * DAY_MS
  ) {
    log.warn({ notAfter: issuing.notAfter }, 'device CA: the issuing CA expires within a year; replace it');
  }
  return {
    issuingCertPem,
    issuingKey,
    issuingNotAfter: issuing.notAfter,
    chainPem: chainPem.join(''),
    trustPems: chainPem,
    rootPem: chainPem[chainPem.length - 1]!,
  };
}

/**
 * A client certificate for a device (spec renew rule 3: "same device id, validity one year"): the subject names
 * the device id; NotBefore is backdated CLOCK_SKEW_MS.
 */
export async function issueDeviceCertificate(
  ca: DeviceCa,
  args: { deviceId: string; publicKey: KeyObject; now: Date },
): Promise<IssuedCertificate> {
  const notBefore = new Date(args.now.getTime() - CLOCK_SKEW_MS);
  const notAfter = addCalendarYears(args.now, LIMITS.certificateValidityYears);
  if (notAfter > ca.issuingNotAfter) {
    throw new DeviceCaError(
      'device CA: the issuing CA expires before a new device certificate would; replace it',
    );
  }
  const pem = await issueCertificate({
    subject: `CN=${args.deviceId}, OU=Devices, O=OOH Platform`,
    publicKey: args.publicKey,
    issuerCertificatePem: ca.issuingCertPem,
    issuerKey: ca.issuingKey,
    notBefore,
    notAfter,
    serialHex: randomSerialHex(),
    usage: 'client',
  });
  const info = readCertificate(pem);
  return {
    pem: info.pem,
    serial: info.serialHex,
    sha256: sha256Hex(new X509Certificate(pem).raw),
    notBefore: info.notBefore,
    notAfter: info.notAfter,
  };
}

export interface ServerTlsPair {
  /** Server certificate followed by the issuing CA. */
  certPem: string;
  keyPem: string;
}

/**
 * The devices host's TLS server pair: the configured one, or one issued by the device CA for localhost,
 * 127.0.0.1, ::1 and the public devices host, replaced at start when missing, near expiry, issued by another
 * CA, or not naming every host.
 */
export async function loadServerTlsPair(
  settings: DeviceIdentitySettings,
  ca: DeviceCa,
  now: Date,
  log: Logger,
): Promise<ServerTlsPair> {
  if (settings.tls) {
    const certPem = await readFile(settings.tls.certPath, 'utf8');
    const keyPem = await readFile(settings.tls.keyPath, 'utf8');
    const leaf = splitPemChain(certPem)[0];
    if (!leaf) throw new DeviceCaError(`devices TLS: no certificate in ${settings.tls.certPath}`);
    if (!keyMatches(leaf, createPrivateKey(keyPem))) {
      throw new DeviceCaError(
        `devices TLS: ${settings.tls.keyPath} is not the key of ${settings.tls.certPath}`,
      );
    }
    return { certPem, keyPem };
  }
  const certFile = path.join(settings.dir, DEVICE_CA_FILES.tlsCert);
  const keyFile = path.join(settings.dir, DEVICE_CA_FILES.tlsKey);
  const dnsNames = ['localhost', ...settings.serverNames.filter((n) => !/^[0-9.:]+$/.test(n))];
  const ipAddresses = ['127.0.0.1', '::1', ...settings.serverNames.filter((n) => /^[0-9.:]+$/.test(n))];
  const existingCert = await readIfExists(certFile);
  const existingKey = await readIfExists(keyFile);
  if (existingCert !== null && existingKey !== null) {
    const leaf = splitPemChain(existingCert)[0];
    if (leaf) {
      const x = new X509Certificate(leaf);
      const issuer = new X509Certificate(ca.issuingCertPem);
      const fresh = new Date(x.validTo).getTime() - now.getTime() > SERVER_RENEW_DAYS * DAY_MS;
      const ours = x.checkIssued(issuer) && x.verify(issuer.publicKey);
      const names =
        dnsNames.every((n) => x.checkHost(n) !== undefined) &&
        ipAddresses.every((ip) => x.checkIP(ip) !== undefined);
      let paired = false;
      try {
        paired = keyMatches(leaf, createPrivateKey(existingKey));
      } catch {
        paired = false;
      }
      if (fresh && ours && names && paired) return { certPem: existingCert, keyPem: existingKey };
    }
  }
  const pair = generateEs256KeyPair();
  const leafPem = await issueCertificate({
    subject: 'CN=OOH devices host, O=OOH Platform',
    publicKey: pair.publicKey,
    issuerCertificatePem: ca.issuingCertPem,
    issuerKey: ca.issuingKey,
    notBefore: new Date(now.getTime() - DAY_MS),
    notAfter: new Date(Math.min(now.getTime() + SERVER_VALIDITY_DAYS * DAY_MS, ca.issuingNotAfter.getTime())),
    serialHex: randomSerialHex(),
    usage: 'server',
    dnsNames,
    ipAddresses,
  });
  const certPem = leafPem + ca.issuingCertPem;
  const keyPem = exportPrivateKeyPem(pair.privateKey);
  await mkdir(settings.dir, { recursive: true, mode: 0o700 });
  await writeAtomically(keyFile, keyPem, 0o600);
  await writeAtomically(certFile, certPem, 0o644);
  log.info({ file: certFile, dnsNames, ipAddresses }, 'devices host TLS certificate issued by the device CA');
  return { certPem, keyPem };
}
