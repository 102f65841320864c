import { type CertificateInfo, readCertificate, splitPemChain } from '@ooh/crypto';
import { type Certificate, parsePem, verifyChain } from '@ooh/verify';
import { AgentError } from '../errors.js';
import { deviceIdFromCertificate } from './install.js';

/**
 * Checks the certificate a renewal answer carries before the agent stores it beside its pair (DESIGN.md §9; spec
 * renew rule 3: "a new certificate (same device id, validity one year)"). The answer comes over the devices host's
 * TLS, yet a broken platform, or a proxy in front of it that answers for it, must not make the player replace a
 * working identity with one the platform will refuse: once `old_valid_until` passes, only the new pair is offered.
 * Refused (AgentError `renewal_failed`, nothing written, the old pair kept, the same CSR sent again at the next check):
 * - a certificate for another key than the renewal key (`*.next`);
 * - another device: the answer's `device_id`, or the id in the certificate's subject, is not this device's;
 * - a CA certificate, or one not valid now (its validity in the past, or starting more than a day ahead of this
 *   player's clock), or one that ends no later than the certificate it replaces;
 * - one not issued by the device CA: its chain (the answer's `chain_pem`) must lead to a root of the chain the player
 *   already holds (`ca_chain_file`, installed at enrolment), each link signed, a CA, valid now, fit for clientAuth
 *   (@ooh/verify's verifyChain, the project's one chain walk).
 */
/** How far ahead of this player's clock a renewed certificate may start: a day, the agent's largest clock correction. */
const NOT_BEFORE_TOLERANCE_MS = 24 * 3_600_000;

export async function checkRenewedCertificate(args: {
  certificatePem: string;
  chainPem: string;
  /** SubjectPublicKeyInfo (base64 DER, as CertificateInfo gives it) of the renewal key. */
  renewalKeySpki: string;
  /** The device id the answer names, and the one this player holds (its config; else its current certificate's). */
  answerDeviceId: string;
  deviceId: string | null;
  current: CertificateInfo;
  currentChainPem: string;
  now: Date;
}): Promise<CertificateInfo> {
  const refuse = (why: string): never => {
    throw new AgentError('renewal_failed', `renewal answer refused: ${why}`);
  };
  let info: CertificateInfo;
  let leaf: Certificate;
  try {
    if (splitPemChain(args.certificatePem).length !== 1) refuse('certificate_pem is not one certificate');
    info = readCertificate(args.certificatePem);
    leaf = parsePem(args.certificatePem)[0]!;
  } catch (cause) {
    if (cause instanceof AgentError) throw cause;
    throw new AgentError('renewal_failed', 'renewal answer refused: certificate_pem is not a certificate', {
      cause,
    });
  }
  if (info.publicKeySpki !== args.renewalKeySpki) refuse('the certificate is not for the renewal key');
  const deviceId = (args.deviceId ?? deviceIdFromCertificate(args.current))?.toLowerCase() ?? null;
  if (!deviceId) refuse('this player holds no device id to compare with');
  if (args.answerDeviceId.toLowerCase() !== deviceId) {
    refuse(`the answer is for device ${args.answerDeviceId}, this player is ${deviceId}`);
  }
  const named = deviceIdFromCertificate(info);
  if (named !== deviceId)
    refuse(`the certificate names device ${named ?? '(none)'}, this player is ${deviceId}`);
  if (info.isCa) refuse('the certificate is a CA certificate');
  if (info.notAfter.getTime() <= args.now.getTime()) {
    refuse(`the certificate expired on ${info.notAfter.toISOString()}`);
  }
  // The platform backdates NotBefore by 5 minutes, and judges validity by its own clock; this player's may lag it
  // (an uncorrected clock, a correction held). A start up to a day ahead, the largest offset the agent's clock takes
  // from the platform, is the player's lag, not a bad certificate: refusing it would let the current one run out.
  if (info.notBefore.getTime() > args.now.getTime() + NOT_BEFORE_TOLERANCE_MS) {
    refuse(`the certificate is not valid before ${info.notBefore.toISOString()}`);
  }
  if (info.notAfter.getTime() <= args.current.notAfter.getTime()) {
    refuse(`the certificate ends (${info.notAfter.toISOString()}) no later than the one it replaces`);
  }
  let held: Certificate[];
  let pool: Certificate[];
  try {
    held = parsePem(args.currentChainPem);
    pool = args.chainPem.trim() ? parsePem(args.chainPem) : [];
  } catch (cause) {
    throw new AgentError(
      'renewal_failed',
      'renewal answer refused: chain_pem is not a chain of certificates',
      {
        cause,
      },
    );
  }
  // The trust anchors: the self-signed certificates of the chain installed at enrolment (the device CA's root), or
  // its last certificate when it stops below the root.
  const selfSigned = held.filter((certificate) => bytesEqual(certificate.issuer, certificate.subject));
  const roots = selfSigned.length > 0 ? selfSigned : held.slice(-1);
  if (roots.length === 0)
    refuse('no device CA chain is held (ca_chain_file) to check the certificate against');
  // Checked at the certificate's start when this player's clock lags it (above); else now.
  const at = info.notBefore.getTime() > args.now.getTime() ? info.notBefore : args.now;
  const chain = await verifyChain({ leaf, pool, roots, at, purpose: 'clientAuth' });
  if (!chain.ok) refuse(`not issued by the device CA: ${chain.error.message} (${chain.error.code})`);
  return info;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, index) => byte === b[index]);
}
