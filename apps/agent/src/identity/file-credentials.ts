import type { KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  type CertificateInfo,
  exportPrivateKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  importPrivateKey,
  publicKeyFingerprint,
  readCertificate,
} from '@ooh/crypto';
import { AgentError } from '../errors.js';
import { renameDurable, writeFileAtomic } from '../fs/atomic.js';
import type { TlsIdentity } from '../net/http-client.js';
import type { DeviceCredentials } from './device-credentials.js';
import { checkRenewedCertificate } from './renewed-certificate.js';

export interface CredentialPaths {
  keyFile: string;
  certificateFile: string;
  caChainFile: string;
  /** Renewal state (`renewal.json`) lives here. */
  dataDir: string;
}

/**
 * Renewal progress, written atomically; it is the commit point of each step (DESIGN.md §9):
 * - `requested`: the new key is at `<key>.next`, the CSR is here; a lost answer is recovered by sending
 *   this same CSR again;
 * - `issued`: the new certificate and chain are at `<cert>.next`, `<chain>.next`; both pairs are in use
 *   until a call with the new pair succeeds;
 * - `promoting`: the new pair is being moved over the old one (finished on the next start if cut short).
 */
export type RenewalState =
  | { state: 'requested'; csr: string; requested_at: string; for_serial: string }
  | {
      state: 'issued' | 'promoting';
      csr: string;
      requested_at: string;
      for_serial: string;
      not_after: string;
      old_valid_until: string;
    };

interface Pair {
  key: KeyObject;
  keyPem: string;
  certificatePem: string | null;
  certificate: CertificateInfo | null;
  chainPem: string;
}

/**
 * The device identity on disk: the key (mode 0600), the client certificate and its chain, and during a
 * renewal the new pair beside the old one (`*.next`).
 */
export class FileCredentials implements DeviceCredentials {
  private current!: Pair;
  private next: Pair | null = null;
  private renewal: RenewalState | null = null;

  private constructor(private readonly paths: CredentialPaths) {}

  /**
   * Loads the identity, finishing a promotion a power cut interrupted; with `readOnly` (`agent status`, beside a
   * running agent) nothing is renamed, and the pair read is the one the promotion gives.
   */
  static load(paths: CredentialPaths, options: { readOnly?: boolean } = {}): FileCredentials {
    const credentials = new FileCredentials(paths);
    credentials.reload(options.readOnly === true);
    return credentials;
  }

  /**
   * Generates the device key (P-256) if there is none and writes it with mode 0600. Returns whether a new
   * key was made; an existing key is never replaced.
   */
  static ensureKey(keyFile: string): { created: boolean; key: KeyObject } {
    if (existsSync(keyFile)) return { created: false, key: importPrivateKey(readFileSync(keyFile, 'utf8')) };
    mkdirSync(dirname(keyFile), { recursive: true });
    const { privateKey } = generateEs256KeyPair();
    writeFileAtomic(keyFile, exportPrivateKeyPem(privateKey), 0o600);
    return { created: true, key: privateKey };
  }

  reload(readOnly = false): void {
    this.renewal = this.readRenewalState();
    // Each file's `.next` while a promotion is unfinished: what finishing it makes the current pair.
    const promoted = (path: string) =>
      this.renewal?.state === 'promoting' && existsSync(`${path}.next`) ? `${path}.next` : path;
    if (this.renewal?.state === 'promoting' && !readOnly) this.finishPromotion();
    this.current = this.readPair(
      promoted(this.paths.keyFile),
      promoted(this.paths.certificateFile),
      promoted(this.paths.caChainFile),
      true,
    )!;
    this.next =
      this.renewal?.state === 'issued'
        ? this.readPair(
            `${this.paths.keyFile}.next`,
            `${this.paths.certificateFile}.next`,
            `${this.paths.caChainFile}.next`,
            false,
          )
        : null;
    if (
      this.current.certificate &&
      this.current.certificate.publicKeySpki !== exportPublicKeySpki(this.current.key)
    ) {
      throw new AgentError('identity_invalid', 'the device certificate does not belong to the device key');
    }
  }

  // --- DeviceCredentials ---

  signingKey(): KeyObject {
    return (this.next ?? this.current).key;
  }

  tlsIdentity(now: Date, attempt = 0): TlsIdentity | null {
    // spec: "the old certificate stays accepted until old_valid_until": past it the platform refuses the old pair
    // for good (401 device_unauthorized, a terminal answer), so only the new one is offered.
    const oldValidUntil =
      this.next && this.renewal?.state === 'issued' ? Date.parse(this.renewal.old_valid_until) : Number.NaN;
    const current = this.next && now.getTime() >= oldValidUntil ? null : this.current;
    const usable = [this.next, current].filter(
      (pair): pair is Pair & { certificate: CertificateInfo; certificatePem: string } =>
        pair !== null &&
        pair.certificate !== null &&
        pair.certificatePem !== null &&
        isValidAt(pair.certificate, now),
    );
    if (usable.length === 0) return null;
    // A new pair first; if calls with it fail, alternate with the old one (still accepted until old_valid_until).
    const pair = usable[attempt % usable.length]!;
    return {
      id: pair.certificate.serialHex,
      keyPem: pair.keyPem,
      certificatePem: pair.certificatePem,
      chainPem: pair.chainPem,
    };
  }

  confirm(identity: TlsIdentity | null): void {
    if (!identity || !this.next?.certificate || identity.id !== this.next.certificate.serialHex) return;
    this.promote();
  }

  // --- what status and renewal read ---

  get deviceKey(): KeyObject {
    return this.current.key;
  }

  get certificate(): CertificateInfo | null {
    return this.current.certificate;
  }

  get nextCertificate(): CertificateInfo | null {
    return this.next?.certificate ?? null;
  }

  get renewalState(): RenewalState | null {
    return this.renewal;
  }

  get publicKeySpki(): string {
    return exportPublicKeySpki(this.current.key);
  }

  get publicKeySha256(): string {
    return publicKeyFingerprint(this.current.key);
  }

  /** The pair renewal calls are made with (mTLS with the current certificate). */
  currentIdentity(): TlsIdentity | null {
    const { certificate, certificatePem } = this.current;
    if (!certificate || !certificatePem) return null;
    return {
      id: certificate.serialHex,
      keyPem: this.current.keyPem,
      certificatePem,
      chainPem: this.current.chainPem,
    };
  }

  /** Step 1 of renewal: a new key at `<key>.next` and the CSR recorded. */
  beginRenewal(keyPem: string, csr: string, at: Date): RenewalState {
    if (!this.current.certificate) throw new AgentError('identity_missing', 'no certificate to renew');
    writeFileAtomic(`${this.paths.keyFile}.next`, keyPem, 0o600);
    const state: RenewalState = {
      state: 'requested',
      csr,
      requested_at: at.toISOString(),
      for_serial: this.current.certificate.serialHex,
    };
    this.writeRenewalState(state);
    return state;
  }

  pendingKey(): KeyObject | null {
    const path = `${this.paths.keyFile}.next`;
    return existsSync(path) ? importPrivateKey(readFileSync(path, 'utf8')) : null;
  }

  /**
   * Step 2: the platform's certificate for the new key is written beside the old pair, once it passes
   * {@link checkRenewedCertificate} (the renewal key, this device, valid now and beyond the old one, issued by the
   * device CA of the chain held). Refused: AgentError `renewal_failed`, nothing written, the old pair kept.
   */
  async storeIssued(
    answer: { certificatePem: string; chainPem: string; deviceId: string; oldValidUntil: string },
    context: { deviceId: string | null; now: Date },
  ): Promise<void> {
    const renewal = this.renewal;
    if (renewal?.state !== 'requested') throw new AgentError('renewal_failed', 'no renewal was requested');
    const key = this.pendingKey();
    if (!key) throw new AgentError('renewal_failed', 'the renewal key is missing');
    const current = this.current.certificate;
    if (!current) throw new AgentError('identity_missing', 'no certificate to renew');
    const info = await checkRenewedCertificate({
      certificatePem: answer.certificatePem,
      chainPem: answer.chainPem,
      renewalKeySpki: exportPublicKeySpki(key),
      answerDeviceId: answer.deviceId,
      deviceId: context.deviceId,
      current,
      currentChainPem: this.current.chainPem,
      now: context.now,
    });
    writeFileAtomic(`${this.paths.certificateFile}.next`, answer.certificatePem, 0o644);
    writeFileAtomic(`${this.paths.caChainFile}.next`, answer.chainPem, 0o644);
    this.writeRenewalState({
      ...renewal,
      state: 'issued',
      // The certificate's own date, not the answer's word for it.
      not_after: info.notAfter.toISOString(),
      old_valid_until: answer.oldValidUntil,
    });
    this.reload();
  }

  /** Step 3: after a call with the new pair succeeded, the new pair replaces the old one. */
  promote(): void {
    const renewal = this.renewal;
    if (renewal?.state !== 'issued') return;
    this.writeRenewalState({ ...renewal, state: 'promoting' });
    this.finishPromotion();
    this.reload();
  }

  private finishPromotion(): void {
    for (const path of [this.paths.keyFile, this.paths.certificateFile, this.paths.caChainFile]) {
      if (existsSync(`${path}.next`)) {
        if (existsSync(path)) renameDurable(path, `${path}.previous`);
        renameDurable(`${path}.next`, path);
      }
    }
    rmSync(this.renewalPath(), { force: true });
    this.renewal = null;
  }

  private readPair(
    keyFile: string,
    certificateFile: string,
    chainFile: string,
    required: boolean,
  ): Pair | null {
    if (!existsSync(keyFile)) {
      if (required)
        throw new AgentError('identity_missing', `no device key at ${keyFile} (run "agent init")`);
      return null;
    }
    const keyPem = readFileSync(keyFile, 'utf8');
    let key: KeyObject;
    try {
      key = importPrivateKey(keyPem);
    } catch (cause) {
      throw new AgentError('identity_invalid', `device key at ${keyFile} is not a P-256 key`, { cause });
    }
    const certificatePem = existsSync(certificateFile) ? readFileSync(certificateFile, 'utf8') : null;
    let certificate: CertificateInfo | null = null;
    if (certificatePem) {
      try {
        certificate = readCertificate(certificatePem);
      } catch (cause) {
        throw new AgentError('identity_invalid', `certificate at ${certificateFile} is unreadable`, {
          cause,
        });
      }
    }
    const chainPem = existsSync(chainFile) ? readFileSync(chainFile, 'utf8') : '';
    return { key, keyPem, certificatePem, certificate, chainPem };
  }

  private renewalPath(): string {
    return join(this.paths.dataDir, 'renewal.json');
  }

  private readRenewalState(): RenewalState | null {
    const path = this.renewalPath();
    if (!existsSync(path)) return null;
    try {
      return JSON.parse(readFileSync(path, 'utf8')) as RenewalState;
    } catch (cause) {
      throw new AgentError('identity_invalid', `renewal state ${path} is unreadable`, { cause });
    }
  }

  private writeRenewalState(state: RenewalState): void {
    mkdirSync(this.paths.dataDir, { recursive: true });
    writeFileAtomic(this.renewalPath(), JSON.stringify(state), 0o600);
    this.renewal = state;
  }
}

export function isValidAt(certificate: CertificateInfo, now: Date): boolean {
  return certificate.notBefore.getTime() <= now.getTime() && now.getTime() < certificate.notAfter.getTime();
}
