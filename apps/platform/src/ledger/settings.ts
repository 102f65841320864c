import { isKeyName, SIG_COSIGNATURE_V1, type Vkey } from '@ooh/verify';
import { ConfigError, type PlatformConfig } from '../config.js';
import { NoteError, parseVkey } from './note.js';

/**
 * The ledger's anchoring settings (issue 23; docs/ledger-witnesses.md), from the platform's settings like every
 * feature's (checked at start by settings-check.ts):
 *
 * - LEDGER_ORIGIN: the checkpoint origin line and the ledger key's name (c2sp.org/tlog-checkpoint: "a unique
 *   identifier for the log identity", "SHOULD be a schema-less URL"). Default: `<verify host>/ledger`. Witnesses know
 *   the ledger by it, so it must not change once witnesses are configured.
 * - LEDGER_WITNESSES: the witnesses, separated by commas or newlines, each `<vkey> <submission URL>`; the vkey is the
 *   witness's cosignature key (c2sp.org/signed-note vkey, type 0x04), which names the witness.
 * - LEDGER_WITNESS_QUORUM: how many of them must cosign before a block is `anchored` (default 1; at most their
 *   number).
 */
export interface WitnessConfig {
  vkey: Vkey;
  /** The submission prefix: add-checkpoint is POSTed to `<url>/add-checkpoint`. */
  url: string;
}

export interface LedgerSettings {
  origin: string;
  witnesses: WitnessConfig[];
  /** 0 when no witness is configured: nothing is ever anchored. */
  quorum: number;
}

export const LEDGER_ENV = {
  origin: 'LEDGER_ORIGIN',
  witnesses: 'LEDGER_WITNESSES',
  quorum: 'LEDGER_WITNESS_QUORUM',
} as const;

export function ledgerSettings(config: Pick<PlatformConfig, 'settings' | 'publicUrls'>): LedgerSettings {
  const problems: string[] = [];
  const env = config.settings;
  const originText = env[LEDGER_ENV.origin]?.trim();
  const origin = originText || `${new URL(config.publicUrls.verify).host}/ledger`;
  if (!isKeyName(origin)) {
    problems.push(
      `${LEDGER_ENV.origin}: "${origin}" must be non-empty, without spaces or "+" (e.g. verify.example.kz/ledger)`,
    );
  }
  const witnesses: WitnessConfig[] = [];
  const entries = (env[LEDGER_ENV.witnesses] ?? '')
    .split(/[,\n]/)
    .map((e) => e.trim())
    .filter((e) => e !== '');
  for (const entry of entries) {
    const [vkeyText, url, ...rest] = entry.split(/\s+/);
    if (vkeyText === undefined || url === undefined || rest.length > 0) {
      problems.push(`${LEDGER_ENV.witnesses}: "${entry}" is not "<vkey> <submission URL>"`);
      continue;
    }
    let vkey: Vkey;
    try {
      vkey = parseVkey(vkeyText);
    } catch (error) {
      problems.push(
        `${LEDGER_ENV.witnesses}: ${vkeyText}: ${error instanceof NoteError ? error.message : String(error)}`,
      );
      continue;
    }
    if (vkey.type !== SIG_COSIGNATURE_V1) {
      problems.push(
        `${LEDGER_ENV.witnesses}: ${vkey.name}: a witness key is a cosignature key (vkey type 0x04)`,
      );
      continue;
    }
    let parsed: URL | null = null;
    try {
      parsed = new URL(url);
    } catch {
      parsed = null;
    }
    if (!parsed || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) {
      problems.push(`${LEDGER_ENV.witnesses}: ${vkey.name}: "${url}" is not an http(s) URL`);
      continue;
    }
    if (witnesses.some((w) => w.vkey.name === vkey.name)) {
      problems.push(`${LEDGER_ENV.witnesses}: ${vkey.name} is named twice`);
      continue;
    }
    witnesses.push({ vkey, url: url.replace(/\/+$/, '') });
  }
  let quorum = witnesses.length > 0 ? 1 : 0;
  const quorumText = env[LEDGER_ENV.quorum]?.trim();
  if (quorumText) {
    const n = Number(quorumText);
    if (!Number.isInteger(n) || n < 1 || n > Math.max(witnesses.length, 1) || witnesses.length === 0) {
      problems.push(
        `${LEDGER_ENV.quorum}: "${quorumText}" must be a whole number from 1 to the number of witnesses in ${LEDGER_ENV.witnesses} (${witnesses.length})`,
      );
    } else {
      quorum = n;
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { origin, witnesses, quorum };
}
