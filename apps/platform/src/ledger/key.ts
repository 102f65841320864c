import { createPrivateKey, generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { link, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../config.js';
import type { PlatformCaches, PlatformContext } from '../context.js';
import { loadAuthority } from '../authority/load.js';
import { authoritySource } from '../authority/pki.js';
import { formatVkey, rawEd25519PublicKey, SIG_ED25519 } from './note.js';

/**
 * The ledger key: the Ed25519 key of the authority that signs the ledger's checkpoints (C2SP signed notes use
 * Ed25519, signature type 0x01). It lives beside the authority's other keys: in a generated authority folder it is
 * `ledger-signer.ed25519.key`, made on first need with mode 0600 like the others (DESIGN.md section 2); a mounted key
 * is named by AUTHORITY_LEDGER_KEY (never made then: it must exist).
 */
export const LEDGER_KEY_ENV = 'AUTHORITY_LEDGER_KEY';
export const LEDGER_KEY_FILE = 'ledger-signer.ed25519.key';

export function ledgerKeyPath(ctx: Pick<PlatformContext, 'config'>): { file: string; create: boolean } {
  const given = ctx.config.settings[LEDGER_KEY_ENV]?.trim();
  if (given) return { file: path.resolve(given), create: false };
  const source = authoritySource(ctx.config.dataDir, ctx.config.settings);
  // Mounted authority files (AUTHORITY_ROOT_CERT ...) without a mounted ledger key: the key is made in the data
  // folder rather than refusing to start a platform that ran before checkpoints existed; mount it with
  // AUTHORITY_LEDGER_KEY like the others (docs/ledger-witnesses.md).
  if (source.kind === 'files')
    return { file: path.join(ctx.config.dataDir, 'authority-ledger', LEDGER_KEY_FILE), create: true };
  return { file: path.join(source.dir, LEDGER_KEY_FILE), create: true };
}

export interface LedgerKey {
  key: KeyObject;
  /** 32 raw bytes. */
  publicKey: Buffer;
}

async function createKeyFile(file: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  // Written whole under a temporary name, then linked into place: link() refuses an existing name, so two instances
  // starting together keep the first key and nobody reads half a file.
  const temp = `${file}.tmp-${randomBytes(6).toString('hex')}`;
  await writeFile(temp, pem, { mode: 0o600, flag: 'wx' });
  try {
    await link(temp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await rm(temp, { force: true });
  }
}

/** Reads the ledger key, creating it first in a generated authority folder. */
export async function loadLedgerKey(
  ctx: Pick<PlatformContext, 'config'> & { caches: Pick<PlatformCaches, 'authority'> },
): Promise<LedgerKey> {
  const { file, create } = ledgerKeyPath(ctx);
  // The generated folder is made whole by the authority (built aside and renamed into place): it must exist first.
  if (create && authoritySource(ctx.config.dataDir, ctx.config.settings).kind === 'generated')
    await loadAuthority(ctx);
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || !create) {
      throw new ConfigError([`${LEDGER_KEY_ENV}: cannot read ${file}: ${(error as Error).message}`]);
    }
    await createKeyFile(file);
    pem = await readFile(file, 'utf8');
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch (error) {
    throw new ConfigError([`${LEDGER_KEY_ENV}: ${file} is not a private key (${(error as Error).message})`]);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new ConfigError([`${LEDGER_KEY_ENV}: ${file} is a ${key.asymmetricKeyType} key, not Ed25519`]);
  }
  return { key, publicKey: rawEd25519PublicKey(key) };
}

/** The ledger's verifier key (signed-note vkey, type 0x01) under its origin. */
export function ledgerVkey(origin: string, key: LedgerKey): string {
  return formatVkey(origin, SIG_ED25519, key.publicKey);
}
