import { es256Verify, importPublicKey, isCryptoError, readCertificate } from '@ooh/crypto';
import { LIMITS, type RenewAnswer } from '@ooh/protocol';
import type { PlatformContext } from '../context.js';
import { isUniqueViolation, withTransaction } from '../db/pool.js';
import { ProblemError } from '../http/problem.js';
import { type DeviceIdentity, DeviceRefusal } from './authenticate.js';
import { issueDeviceCertificate } from './ca.js';
import type { DeviceCsr } from './keys.js';
import {
  type CertificateRow,
  certificateBySerial,
  certificateRenewedFrom,
  endRunningGraces,
  findDevice,
  insertCertificate,
  insertDeviceKey,
  keyHolder,
  liveForceGrant,
  useForceGrant,
  replaceCurrent,
} from './repository.js';
import { answerMayBeLost } from './state.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

const refused = (detail: string) => new ProblemError('renewal_refused', detail);

/**
 * spec renew: "X-Service-Signature (required; same form as above)": a request without one is 401 bad_signature,
 * judged from the headers alone, before its body is read.
 */
export function requireSignatureHeader(header: unknown): string {
  if (typeof header !== 'string' || header === '') {
    throw new ProblemError(
      'bad_signature',
      'X-Service-Signature is required: ES256 over the exact body bytes',
    );
  }
  return header;
}

/**
 * spec renew: "X-Service-Signature (required; same form as above) over the body", by the key of the client
 * certificate presented. A missing, malformed or non-verifying signature is 401 bad_signature (the spec's
 * 401 for renewal has no code of its own; decision recorded for docs/decisions.md).
 */
export function checkBodySignature(
  certificate: CertificateRow,
  body: Buffer | undefined,
  header: unknown,
): void {
  const signature = requireSignatureHeader(header);
  const key = importPublicKey(readCertificate(certificate.pem).publicKeySpki);
  let valid: boolean;
  try {
    valid = es256Verify(key, body ?? Buffer.alloc(0), signature);
  } catch (error) {
    if (!isCryptoError(error)) throw error;
    throw new ProblemError(
      'bad_signature',
      'X-Service-Signature is not base64url of a 64-byte r||s signature',
      {
        cause: error,
      },
    );
  }
  if (!valid) {
    throw new ProblemError(
      'bad_signature',
      'X-Service-Signature does not verify with the client certificate key',
    );
  }
}

function answerOf(
  deviceId: string,
  issued: CertificateRow,
  oldValidUntil: Date,
  chainPem: string,
): RenewAnswer {
  return {
    device_id: deviceId,
    certificate_pem: issued.pem,
    chain_pem: chainPem,
    not_after: issued.not_after.toISOString(),
    old_valid_until: oldValidUntil.toISOString(),
  };
}

/**
 * POST {devices_url}/d/v1/renew after authentication (client certificate and body signature). The spec's rules:
 * 1. "The key in the request must be new; the request's own signature proves possession of it."
 * 2. "Refused: a revoked device, a certificate that is not the newest of the device, a bad or unchanged key (or
 *    a key already held), a certificate with more than 60 days left (unless force is allowed)."
 * 3. "The answer carries a new certificate (same device id, validity one year) and old_valid_until; the old
 *    certificate stays accepted until then, 24 hours."
 * A lost answer (DESIGN.md §9): the same CSR again from the old certificate, while the new certificate has never
 * been used, is answered with the certificate already issued, also after the old certificate's old_valid_until (the
 * only call such a certificate may make: identity.supersededCertificate).
 */
export async function renewCertificate(
  ctx: PlatformContext,
  identity: DeviceIdentity,
  csr: DeviceCsr,
  force: boolean,
): Promise<RenewAnswer> {
  const ca = await ctx.caches.devices.ca();
  const now = ctx.clock.now();
  try {
    return await withTransaction(ctx.db, async (client) => {
      // One renewal of a device at a time.
      const device = await findDevice(client, identity.deviceId, { lock: true });
      if (!device || device.revoked_at)
        throw new ProblemError('device_unauthorized', `device ${identity.deviceId} is revoked`);
      const presented = await certificateBySerial(client, identity.certificateSerial);
      if (!presented) throw new ProblemError('device_unauthorized', 'the client certificate is unknown');

      if (presented.replaced_at !== null) {
        const successor = await certificateRenewedFrom(client, presented.serial);
        if (
          successor &&
          successor.csr_sha256 === csr.sha256 &&
          answerMayBeLost(presented, successor) &&
          presented.old_valid_until !== null
        ) {
          // Nothing is issued or changed: the same certificate, for the key of this very CSR, which is of no use
          // without that key's private half. Past old_valid_until too (deviceFromClientCertificate, lostAnswerReplay).
          return answerOf(device.id, successor, presented.old_valid_until, ca.chainPem);
        }
        if (identity.supersededCertificate) {
          // Past its old_valid_until the certificate may do nothing else: refused as at authentication.
          throw new DeviceRefusal(
            'certificate_superseded',
            `certificate ${presented.serial} was replaced and is no longer accepted` +
              (presented.old_valid_until ? ` (since ${presented.old_valid_until.toISOString()})` : '') +
              '; only the CSR of the renewal that replaced it fetches again the certificate it issued',
            identity.supersededCertificate,
            device.id,
          );
        }
        let why = 'only the newest certificate of the device may renew';
        if (successor && successor.csr_sha256 !== csr.sha256) {
          why +=
            '; this certificate was already renewed with another CSR (resend that same CSR to recover a lost answer)';
        } else if (successor && successor.first_used_at !== null) {
          why += `; the certificate it was renewed into (${successor.serial}) is already in use`;
        }
        throw refused(`not_newest: certificate ${presented.serial} is not the device's newest; ${why}`);
      }

      if (csr.fingerprint === presented.key_fingerprint) {
        throw refused(
          'unchanged_key: the CSR is for the key of the current certificate; a renewal needs a new key',
        );
      }
      if ((await keyHolder(client, csr.fingerprint)) !== null) {
        throw refused('key_held: the key in the CSR is already held by a device; generate a new key');
      }
      let grant: { id: string } | null = null;
      const msLeft = presented.not_after.getTime() - now.getTime();
      // spec: "refused with more than 60 days left unless force is allowed (24 hours)".
      if (msLeft > LIMITS.renewalMaxDaysLeft * DAY_MS) {
        const daysLeft = Math.floor(msLeft / DAY_MS);
        const opens = new Date(
          presented.not_after.getTime() - LIMITS.renewalMaxDaysLeft * DAY_MS,
        ).toISOString();
        if (!force) {
          throw refused(
            `not_due: ${daysLeft} days left, more than ${LIMITS.renewalMaxDaysLeft}; renewal opens at ${opens}, ` +
              'or send force: true within 24 hours after an administrator allowed it',
          );
        }
        grant = await liveForceGrant(client, device.id, now, { lock: true });
        if (!grant) {
          throw refused(
            `force_not_allowed: ${daysLeft} days left and no administrator allowed a forced renewal ` +
              `within the last ${LIMITS.renewalForceGrantHours} hours (a grant allows one renewal)`,
          );
        }
      }

      const certificate = await issueDeviceCertificate(ca, { deviceId: device.id, publicKey: csr.key, now });
      // spec: old_valid_until is "Until when the old certificate is still accepted": 24 hours, but never past the
      // old certificate's own NotAfter, after which neither TLS nor deviceFromClientCertificate accepts it (a device
      // renewing with less than a day left would otherwise be told a time at which it is already refused).
      const oldValidUntil = new Date(
        Math.min(now.getTime() + LIMITS.renewalOldCertGraceHours * HOUR_MS, presented.not_after.getTime()),
      );
      await endRunningGraces(client, device.id, now);
      // From now on the old certificate and the old key are accepted until old_valid_until.
      await replaceCurrent(client, device.id, now, oldValidUntil);
      await insertDeviceKey(client, {
        deviceId: device.id,
        spki: csr.spki,
        fingerprint: csr.fingerprint,
        now,
      });
      await insertCertificate(client, {
        deviceId: device.id,
        certificate,
        keyFingerprint: csr.fingerprint,
        issuedAt: now,
        issuedBy: 'renewal',
        renewedFrom: presented.serial,
        csrSha256: csr.sha256,
      });
      // Issue "Trust under attack", item 6: "a grant is used up by the renewal it allowed".
      if (grant) await useForceGrant(client, grant.id, now, certificate.serial);
      const issued = await certificateBySerial(client, certificate.serial);
      return answerOf(device.id, issued!, oldValidUntil, ca.chainPem);
    });
  } catch (error) {
    // Two renewals racing for one key, or one certificate renewed twice at once.
    if (isUniqueViolation(error, 'device_keys_fingerprint_key')) {
      throw refused('key_held: the key in the CSR is already held by a device; generate a new key');
    }
    if (isUniqueViolation(error, 'device_certificates_renewed_from')) {
      throw refused('not_newest: the certificate was renewed meanwhile');
    }
    throw error;
  }
}
