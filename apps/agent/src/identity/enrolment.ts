import { mkdirSync } from 'node:fs';
import { createCsr, exportPublicKeySpki, publicKeyFingerprint } from '@ooh/crypto';
import { createPublicKey } from 'node:crypto';
import type { AgentConfig } from '../config/config.js';
import { FileCredentials } from './file-credentials.js';

export interface EnrolmentInfo {
  /** True when this call generated the key; false when an existing key was reused. */
  created: boolean;
  keyFile: string;
  /** What the technician enters in the console: base64 of the SubjectPublicKeyInfo DER (DESIGN.md §3). */
  publicKeySpki: string;
  publicKeySha256: string;
  /** Certificate request for the same key, for the device CA (optional at enrolment). */
  csrPem: string;
}

/**
 * `agent init`: creates the data and media folders and the device key (P-256, mode 0600) if there is none,
 * and returns what the technician enters in the console. Never replaces an existing key.
 */
export async function prepareEnrolment(config: AgentConfig): Promise<EnrolmentInfo> {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  mkdirSync(config.mediaDir, { recursive: true });
  const { created, key } = FileCredentials.ensureKey(config.keyFile);
  const publicKey = createPublicKey(key);
  const csrPem = await createCsr({
    subject: `CN=device ${config.deviceId ?? config.structure}`,
    keyPair: { publicKey, privateKey: key },
  });
  return {
    created,
    keyFile: config.keyFile,
    publicKeySpki: exportPublicKeySpki(key),
    publicKeySha256: publicKeyFingerprint(key),
    csrPem,
  };
}
