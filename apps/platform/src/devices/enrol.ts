import { randomUUID } from 'node:crypto';
import { isAuthority, type Principal } from '../auth/principal.js';
import type { PlatformContext } from '../context.js';
import { isUniqueViolation, withTransaction } from '../db/pool.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { notFound } from '../shared/ids.js';
import { type IssuedCertificate, issueDeviceCertificate } from './ca.js';
import { type DeviceCsr, type DevicePublicKey, parseDeviceCsr, parseDevicePublicKey } from './keys.js';
import {
  type DeviceRow,
  endRunningGraces,
  findDevice,
  insertCertificate,
  insertDevice,
  insertDeviceKey,
  keyHolder,
  replaceCurrent,
} from './repository.js';
import type { EnrolAnswer, EnrolBody, ReEnrolBody } from './schema.js';

const keyTaken = () =>
  validationFailed([
    { path: '/public_key', code: 'key_taken', message: 'this key is already held by another device' },
  ]);

/** The key, and the CSR when given, which must be for that same key. */
async function readKeyAndCsr(body: { public_key: string; csr?: string | undefined }): Promise<{
  key: DevicePublicKey;
  csr: DeviceCsr | null;
}> {
  const key = parseDevicePublicKey(body.public_key, '/public_key');
  const csr = body.csr === undefined ? null : await parseDeviceCsr(body.csr, '/csr');
  if (csr && csr.fingerprint !== key.fingerprint) {
    throw validationFailed([
      { path: '/csr', code: 'key_mismatch', message: 'the CSR is not for public_key' },
    ]);
  }
  return { key, csr };
}

async function certificateFor(
  ctx: PlatformContext,
  deviceId: string,
  csr: DeviceCsr | null,
  now: Date,
): Promise<IssuedCertificate | null> {
  if (!csr) return null;
  return issueDeviceCertificate(await ctx.caches.devices.ca(), { deviceId, publicKey: csr.key, now });
}

async function answer(
  ctx: PlatformContext,
  deviceId: string,
  structureCode: string,
  certificate: IssuedCertificate | null,
): Promise<EnrolAnswer> {
  if (!certificate) return { device_id: deviceId, structure_code: structureCode };
  return {
    device_id: deviceId,
    structure_code: structureCode,
    certificate_pem: certificate.pem,
    chain_pem: (await ctx.caches.devices.ca()).chainPem,
    not_after: certificate.notAfter.toISOString(),
  };
}

/**
 * DESIGN.md §3: "a device is enrolled in the console with its P-256 public key (base64 SPKI DER) and its
 * structure; optionally a CSR, for which the device CA issues a client certificate (one year)". The enrolment
 * key is the device's signing key (device_keys, accepted_until NULL) until its first renewal.
 */
export async function enrolDevice(
  ctx: PlatformContext,
  principal: Principal,
  body: EnrolBody,
): Promise<EnrolAnswer> {
  const { rows } = await ctx.db.query<{ code: string; organisation_id: string; retired_at: Date | null }>(
    'SELECT code, organisation_id, retired_at FROM structures WHERE id = $1',
    [body.structure_id],
  );
  const structure = rows[0];
  if (!structure || (!isAuthority(principal) && structure.organisation_id !== principal.organisation.id)) {
    throw validationFailed([{ path: '/structure_id', code: 'not_found', message: 'no such structure' }]);
  }
  if (structure.retired_at) {
    throw validationFailed([
      { path: '/structure_id', code: 'retired', message: `structure ${structure.code} is retired` },
    ]);
  }
  const { key, csr } = await readKeyAndCsr(body);
  if ((await keyHolder(ctx.db, key.fingerprint)) !== null) throw keyTaken();
  const now = ctx.clock.now();
  const deviceId = randomUUID();
  const certificate = await certificateFor(ctx, deviceId, csr, now);
  try {
    await withTransaction(ctx.db, async (client) => {
      await insertDevice(client, { id: deviceId, structureId: body.structure_id, now });
      await insertDeviceKey(client, { deviceId, spki: key.spki, fingerprint: key.fingerprint, now });
      if (certificate) {
        await insertCertificate(client, {
          deviceId,
          certificate,
          keyFingerprint: key.fingerprint,
          issuedAt: now,
          issuedBy: 'enrolment',
        });
      }
    });
  } catch (error) {
    if (isUniqueViolation(error, 'device_keys_fingerprint_key')) throw keyTaken();
    throw error;
  }
  return answer(ctx, deviceId, structure.code, certificate);
}

/** The device if the caller may manage it (authority: any; operator: on its own structures); else 404. */
export async function visibleDevice(
  ctx: PlatformContext,
  principal: Principal,
  id: string,
): Promise<DeviceRow> {
  const device = await findDevice(ctx.db, id);
  if (!device || (!isAuthority(principal) && device.organisation_id !== principal.organisation.id)) {
    throw notFound('device', id);
  }
  return device;
}

/**
 * A device whose certificate expired while it was offline, or whose key is lost, gets a new key (or its own key
 * again) and, with a CSR, a new certificate; its id, and so its history, stays. Every earlier certificate and
 * every other key stops being accepted at once.
 */
export async function reEnrolDevice(
  ctx: PlatformContext,
  device: DeviceRow,
  body: ReEnrolBody,
): Promise<EnrolAnswer> {
  if (device.revoked_at)
    throw new ProblemError('state_conflict', `device ${device.id} is revoked; enrol a new device`);
  const { key, csr } = await readKeyAndCsr(body);
  const holder = await keyHolder(ctx.db, key.fingerprint);
  if (holder !== null && holder !== device.id) throw keyTaken();
  const now = ctx.clock.now();
  const certificate = await certificateFor(ctx, device.id, csr, now);
  try {
    await withTransaction(ctx.db, async (client) => {
      const locked = await findDevice(client, device.id, { lock: true });
      if (!locked || locked.revoked_at) {
        throw new ProblemError('state_conflict', `device ${device.id} is revoked; enrol a new device`);
      }
      await endRunningGraces(client, device.id, now);
      await replaceCurrent(client, device.id, now, now);
      if (holder === device.id) {
        await client.query(
          'UPDATE device_keys SET accepted_until = NULL, registered_at = $3 WHERE device_id = $1 AND fingerprint = $2',
          [device.id, key.fingerprint, now],
        );
      } else {
        await insertDeviceKey(client, {
          deviceId: device.id,
          spki: key.spki,
          fingerprint: key.fingerprint,
          now,
        });
      }
      if (certificate) {
        await insertCertificate(client, {
          deviceId: device.id,
          certificate,
          keyFingerprint: key.fingerprint,
          issuedAt: now,
          issuedBy: 're-enrolment',
        });
      }
      await client.query('UPDATE devices SET re_enrolled_at = $2 WHERE id = $1', [device.id, now]);
    });
  } catch (error) {
    if (isUniqueViolation(error, 'device_keys_fingerprint_key')) throw keyTaken();
    throw error;
  }
  return answer(ctx, device.id, device.structure_code, certificate);
}
