import { randomBytes } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  createIntermediateCa,
  createRootCa,
  exportPrivateKeyPem,
  generateEs256KeyPair,
  importPrivateKey,
  issueCertificate,
  publicKeySpkiDer,
  randomSerialHex,
  readCertificate,
  splitPemChain,
} from '@ooh/crypto';
import {
  type ChainResult,
  parsePem,
  parsePems,
  SIGNER_ROLE_NAMES,
  type SignerRole,
  signerRoleOf,
  verifyChain,
} from '@ooh/verify';

/**
 * The authority's PKI (DESIGN.md sections 2 and 4): a root CA (the public trust anchor of envelopes,
 * revocation lists and seals), an issuing CA, and two signing certificates issued by it: one for approval
 * envelopes and revocation lists, one for stats seals.
 */
export interface Signer {
  certPem: string;
  key: KeyObject;
}

export interface Authority {
  /** The trust anchor, published at {verify_url}/v1/authority-root.pem. */
  rootPem: string;
  /** Certificates between the signers and the root (the issuing CA), nearest the signer first. */
  chainPem: string[];
  /** Signs approval envelopes and revocation lists. */
  envelopeSigner: Signer;
  /** Signs stats seals. */
  sealSigner: Signer;
}

export type AuthorityErrorCode = 'authority_config' | 'authority_unreadable' | 'authority_invalid';

export class AuthorityError extends Error {
  constructor(
    readonly code: AuthorityErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'AuthorityError';
  }
}

/** Where the authority's files are: generated ones in a folder, or mounted ones named one by one. */
export type AuthoritySource =
  | { kind: 'generated'; dir: string }
  | {
      kind: 'files';
      rootCert: string;
      /** A PEM bundle of the issuing CA certificate(s). */
      chainCerts: string;
      envelopeCert: string;
      envelopeKey: string;
      sealCert: string;
      sealKey: string;
    };

/** Environment names of the configurable paths (the platform config has no slot for them yet). */
export const AUTHORITY_ENV = {
  dir: 'AUTHORITY_DIR',
  rootCert: 'AUTHORITY_ROOT_CERT',
  chainCerts: 'AUTHORITY_CHAIN_CERTS',
  envelopeCert: 'AUTHORITY_ENVELOPE_CERT',
  envelopeKey: 'AUTHORITY_ENVELOPE_KEY',
  sealCert: 'AUTHORITY_SEAL_CERT',
  sealKey: 'AUTHORITY_SEAL_KEY',
} as const;

/**
 * Real keys are mounted by naming every file (AUTHORITY_ROOT_CERT and the five others); otherwise the
 * authority lives in AUTHORITY_DIR, default `${dataDir}/authority`, created on first start.
 */
export function authoritySource(dataDir: string, env: NodeJS.ProcessEnv = process.env): AuthoritySource {
  const given = (name: string) => {
    const v = env[name];
    return v !== undefined && v.trim() !== '' ? path.resolve(v.trim()) : undefined;
  };
  const files = {
    rootCert: given(AUTHORITY_ENV.rootCert),
    chainCerts: given(AUTHORITY_ENV.chainCerts),
    envelopeCert: given(AUTHORITY_ENV.envelopeCert),
    envelopeKey: given(AUTHORITY_ENV.envelopeKey),
    sealCert: given(AUTHORITY_ENV.sealCert),
    sealKey: given(AUTHORITY_ENV.sealKey),
  };
  const named = Object.entries(files).filter(([, v]) => v !== undefined);
  if (named.length === 0) {
    return {
      kind: 'generated',
      dir: given(AUTHORITY_ENV.dir) ?? path.join(path.resolve(dataDir), 'authority'),
    };
  }
  const missing = Object.entries(files)
    .filter(([, v]) => v === undefined)
    .map(([k]) => AUTHORITY_ENV[k as keyof typeof files]);
  if (missing.length > 0) {
    throw new AuthorityError(
      'authority_config',
      `authority files are named only in part; also set ${missing.join(', ')}`,
    );
  }
  return { kind: 'files', ...(files as Record<keyof typeof files, string>) };
}

/** File names inside a generated authority folder. */
export const GENERATED_FILES = {
  rootCert: 'root-ca.pem',
  rootKey: 'root-ca.key',
  issuingCert: 'issuing-ca.pem',
  issuingKey: 'issuing-ca.key',
  envelopeCert: 'envelope-signer.pem',
  envelopeKey: 'envelope-signer.key',
  sealCert: 'seal-signer.pem',
  sealKey: 'seal-signer.key',
} as const;

const ORGANISATION = 'O=City advertising authority';
const YEAR_MS = 365.25 * 86_400_000;
// Validity: long enough that no approval outlives a signer; renewal of the PKI is a manual operation.
const ROOT_YEARS = 30;
const ISSUING_YEARS = 20;
const SIGNER_YEARS = 10;
// Certificates start a day before their creation, so a verifier whose clock lags a little accepts them.
const BACKDATE_MS = 86_400_000;

/**
 * Creates a fresh authority in `dir`: built in a temporary sibling folder and renamed into place, so a
 * crash or a concurrent start never leaves half an authority. Keys are written with mode 0600.
 */
export async function createAuthorityFiles(dir: string, now: Date): Promise<void> {
  const notBefore = new Date(now.getTime() - BACKDATE_MS);
  const until = (years: number) => new Date(now.getTime() + years * YEAR_MS);
  const root = generateEs256KeyPair();
  const rootPem = await createRootCa({
    subject: `CN=OOH Authority Root CA, ${ORGANISATION}`,
    keyPair: root,
    notBefore,
    notAfter: until(ROOT_YEARS),
    serialHex: randomSerialHex(),
  });
  const issuing = generateEs256KeyPair();
  const issuingPem = await createIntermediateCa({
    subject: `CN=OOH Authority Issuing CA 1, ${ORGANISATION}`,
    publicKey: issuing.publicKey,
    issuerCertificatePem: rootPem,
    issuerKey: root.privateKey,
    notBefore,
    notAfter: until(ISSUING_YEARS),
    serialHex: randomSerialHex(),
    pathLength: 0,
  });
  const signer = async (cn: string) => {
    const pair = generateEs256KeyPair();
    const certPem = await issueCertificate({
      subject: `CN=${cn}, ${ORGANISATION}`,
      publicKey: pair.publicKey,
      issuerCertificatePem: issuingPem,
      issuerKey: issuing.privateKey,
      notBefore,
      notAfter: until(SIGNER_YEARS),
      serialHex: randomSerialHex(),
      usage: 'signing',
    });
    return { certPem, keyPem: exportPrivateKeyPem(pair.privateKey) };
  };
  const envelope = await signer('OOH Approval Envelope Signer');
  const seal = await signer('OOH Stats Seal Signer');

  const parent = path.dirname(dir);
  await mkdir(parent, { recursive: true });
  const temp = path.join(parent, `.${path.basename(dir)}.tmp-${randomBytes(6).toString('hex')}`);
  await mkdir(temp, { mode: 0o700 });
  try {
    const cert = (name: string, pem: string) => writeFile(path.join(temp, name), pem, { mode: 0o644 });
    const key = (name: string, pem: string) => writeFile(path.join(temp, name), pem, { mode: 0o600 });
    await cert(GENERATED_FILES.rootCert, rootPem);
    await key(GENERATED_FILES.rootKey, exportPrivateKeyPem(root.privateKey));
    await cert(GENERATED_FILES.issuingCert, issuingPem);
    await key(GENERATED_FILES.issuingKey, exportPrivateKeyPem(issuing.privateKey));
    await cert(GENERATED_FILES.envelopeCert, envelope.certPem);
    await key(GENERATED_FILES.envelopeKey, envelope.keyPem);
    await cert(GENERATED_FILES.sealCert, seal.certPem);
    await key(GENERATED_FILES.sealKey, seal.keyPem);
    await rename(temp, dir);
  } catch (error) {
    await rm(temp, { recursive: true, force: true });
    const code = (error as NodeJS.ErrnoException).code;
    // Another instance created the folder first: theirs is used.
    if (code === 'EEXIST' || code === 'ENOTEMPTY') return;
    throw error;
  }
}

async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    throw new AuthorityError('authority_unreadable', `cannot read ${file}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** Reads the authority and checks it: each signer's key matches its certificate, which chains to the root. */
export async function readAuthority(source: AuthoritySource, now: Date): Promise<Authority> {
  const files =
    source.kind === 'files'
      ? source
      : {
          rootCert: path.join(source.dir, GENERATED_FILES.rootCert),
          chainCerts: path.join(source.dir, GENERATED_FILES.issuingCert),
          envelopeCert: path.join(source.dir, GENERATED_FILES.envelopeCert),
          envelopeKey: path.join(source.dir, GENERATED_FILES.envelopeKey),
          sealCert: path.join(source.dir, GENERATED_FILES.sealCert),
          sealKey: path.join(source.dir, GENERATED_FILES.sealKey),
        };
  const rootPem = await readText(files.rootCert);
  const chainPem = splitPemChain(await readText(files.chainCerts));
  const signer = async (
    certFile: string,
    keyFile: string,
    what: string,
    role: SignerRole,
  ): Promise<Signer> => {
    const certPem = await readText(certFile);
    const keyPem = await readText(keyFile);
    let key: KeyObject;
    let info: ReturnType<typeof readCertificate>;
    try {
      key = importPrivateKey(keyPem);
      info = readCertificate(certPem);
    } catch (error) {
      throw new AuthorityError('authority_invalid', `${what}: ${(error as Error).message}`, { cause: error });
    }
    if (!Buffer.from(publicKeySpkiDer(key)).equals(Buffer.from(info.publicKeySpki, 'base64'))) {
      throw new AuthorityError(
        'authority_invalid',
        `${what}: the key in ${keyFile} does not match ${certFile}`,
      );
    }
    if (info.isCa) throw new AuthorityError('authority_invalid', `${what}: ${certFile} is a CA certificate`);
    const leaf = parsePem(info.pem)[0]!;
    // Verifiers tell the two signers apart by name (@ooh/verify signer-role.ts): a mounted certificate named
    // otherwise would sign what no verifier accepts.
    if (signerRoleOf(leaf) !== role) {
      throw new AuthorityError(
        'authority_invalid',
        `${what}: the common name of ${certFile} (${leaf.subjectCommonName ?? 'none'}) must end in "${SIGNER_ROLE_NAMES[role]}": verifiers accept a ${what} by that name only`,
      );
    }
    let chain: ChainResult;
    try {
      chain = await verifyChain({
        leaf,
        pool: parsePems(chainPem),
        roots: parsePem(rootPem),
        at: now,
      });
    } catch (error) {
      throw new AuthorityError('authority_invalid', `${what}: ${(error as Error).message}`, { cause: error });
    }
    if (!chain.ok) {
      throw new AuthorityError(
        'authority_invalid',
        `${what}: ${certFile} does not chain to the root: ${chain.error.code}: ${chain.error.message}`,
        { cause: chain.error },
      );
    }
    return { certPem, key };
  };
  return {
    rootPem,
    chainPem,
    envelopeSigner: await signer(files.envelopeCert, files.envelopeKey, 'envelope signer', 'envelope'),
    sealSigner: await signer(files.sealCert, files.sealKey, 'seal signer', 'seal'),
  };
}
