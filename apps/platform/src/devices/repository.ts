import type { Db, DbClient } from '../db/pool.js';
import type { IssuedCertificate } from './ca.js';

type Queryable = Db | DbClient;

export interface DeviceRow {
  id: string;
  structure_id: string;
  structure_code: string;
  organisation_id: string;
  created_at: Date;
  re_enrolled_at: Date | null;
  revoked_at: Date | null;
}

export interface CertificateRow {
  serial: string;
  device_id: string;
  certificate_sha256: string;
  key_fingerprint: string;
  pem: string;
  not_before: Date;
  not_after: Date;
  issued_at: Date;
  issued_by: 'enrolment' | 'renewal' | 're-enrolment';
  renewed_from: string | null;
  csr_sha256: string | null;
  first_used_at: Date | null;
  replaced_at: Date | null;
  old_valid_until: Date | null;
}

export interface DeviceKeyRow {
  fingerprint: string;
  public_key_spki: string;
  registered_at: Date;
  accepted_until: Date | null;
}

const DEVICE_COLUMNS = `d.id, d.structure_id, s.code AS structure_code, s.organisation_id, d.created_at,
  d.re_enrolled_at, d.revoked_at`;
const CERTIFICATE_COLUMNS = `serial, device_id, certificate_sha256, key_fingerprint, pem, not_before, not_after,
  issued_at, issued_by, renewed_from, csr_sha256, first_used_at, replaced_at, old_valid_until`;

export async function findDevice(
  db: Queryable,
  id: string,
  options: { lock?: boolean } = {},
): Promise<DeviceRow | null> {
  const { rows } = await db.query<DeviceRow>(
    `SELECT ${DEVICE_COLUMNS} FROM devices d JOIN structures s ON s.id = d.structure_id WHERE d.id = $1
     ${options.lock ? 'FOR UPDATE OF d' : ''}`,
    [id],
  );
  return rows[0] ?? null;
}

export async function insertDevice(
  db: Queryable,
  args: { id: string; structureId: string; now: Date },
): Promise<void> {
  await db.query('INSERT INTO devices (id, structure_id, created_at) VALUES ($1, $2, $3)', [
    args.id,
    args.structureId,
    args.now,
  ]);
}

/** The device holding the key with this SPKI fingerprint (any state), or null. */
export async function keyHolder(db: Queryable, fingerprint: string): Promise<string | null> {
  const { rows } = await db.query<{ device_id: string }>(
    'SELECT device_id FROM device_keys WHERE fingerprint = $1',
    [fingerprint],
  );
  return rows[0]?.device_id ?? null;
}

export async function insertDeviceKey(
  db: Queryable,
  args: { deviceId: string; spki: string; fingerprint: string; now: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO device_keys (device_id, public_key_spki, fingerprint, registered_at, accepted_until)
     VALUES ($1, $2, $3, $4, NULL)`,
    [args.deviceId, args.spki, args.fingerprint, args.now],
  );
}

export async function deviceKeys(db: Queryable, deviceId: string): Promise<DeviceKeyRow[]> {
  const { rows } = await db.query<DeviceKeyRow>(
    `SELECT fingerprint, public_key_spki, registered_at, accepted_until FROM device_keys
      WHERE device_id = $1 ORDER BY registered_at DESC, fingerprint`,
    [deviceId],
  );
  return rows;
}

export async function insertCertificate(
  db: Queryable,
  args: {
    deviceId: string;
    certificate: IssuedCertificate;
    keyFingerprint: string;
    issuedAt: Date;
    issuedBy: CertificateRow['issued_by'];
    renewedFrom?: string;
    csrSha256?: string;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO device_certificates (serial, device_id, certificate_sha256, key_fingerprint, pem, not_before,
       not_after, issued_at, issued_by, renewed_from, csr_sha256)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [
      args.certificate.serial,
      args.deviceId,
      args.certificate.sha256,
      args.keyFingerprint,
      args.certificate.pem,
      args.certificate.notBefore,
      args.certificate.notAfter,
      args.issuedAt,
      args.issuedBy,
      args.renewedFrom ?? null,
      args.csrSha256 ?? null,
    ],
  );
}

export async function certificateBySerial(db: Queryable, serial: string): Promise<CertificateRow | null> {
  const { rows } = await db.query<CertificateRow>(
    `SELECT ${CERTIFICATE_COLUMNS} FROM device_certificates WHERE serial = $1`,
    [serial],
  );
  return rows[0] ?? null;
}

export async function certificateRenewedFrom(db: Queryable, serial: string): Promise<CertificateRow | null> {
  const { rows } = await db.query<CertificateRow>(
    `SELECT ${CERTIFICATE_COLUMNS} FROM device_certificates WHERE renewed_from = $1`,
    [serial],
  );
  return rows[0] ?? null;
}

export async function deviceCertificates(db: Queryable, deviceId: string): Promise<CertificateRow[]> {
  const { rows } = await db.query<CertificateRow>(
    `SELECT ${CERTIFICATE_COLUMNS} FROM device_certificates WHERE device_id = $1 ORDER BY issued_at DESC, serial`,
    [deviceId],
  );
  return rows;
}

/** Marks the first authenticated use of a certificate (ends lost-answer recovery for the renewal that made it). */
export async function markFirstUse(db: Queryable, serial: string, now: Date): Promise<void> {
  await db.query(
    'UPDATE device_certificates SET first_used_at = $2 WHERE serial = $1 AND first_used_at IS NULL',
    [serial, now],
  );
}

/**
 * Ends every grace still running for the device's older certificates and keys: only the newest certificate
 * and the one before it are ever accepted ("the previous one until its old_valid_until, anything else 401").
 */
export async function endRunningGraces(db: Queryable, deviceId: string, now: Date): Promise<void> {
  await db.query(
    `UPDATE device_certificates SET old_valid_until = $2
      WHERE device_id = $1 AND replaced_at IS NOT NULL AND old_valid_until > $2`,
    [deviceId, now],
  );
  await db.query('UPDATE device_keys SET accepted_until = $2 WHERE device_id = $1 AND accepted_until > $2', [
    deviceId,
    now,
  ]);
}

/** Replaces the newest certificate and the unlimited keys of a device; both stay accepted until `until`. */
export async function replaceCurrent(db: Queryable, deviceId: string, now: Date, until: Date): Promise<void> {
  await db.query(
    `UPDATE device_certificates SET replaced_at = $2, old_valid_until = $3
      WHERE device_id = $1 AND replaced_at IS NULL`,
    [deviceId, now, until],
  );
  await db.query(
    'UPDATE device_keys SET accepted_until = $2 WHERE device_id = $1 AND accepted_until IS NULL',
    [deviceId, until],
  );
}

/**
 * A live force-renewal grant: given at or before `now`, not yet over, not used by a renewal (migration 066).
 * `lock`: row-locked for the renewal transaction that may use it.
 */
export async function liveForceGrant(
  db: Queryable,
  deviceId: string,
  now: Date,
  options: { lock?: boolean } = {},
): Promise<{ id: string; valid_until: Date } | null> {
  const { rows } = await db.query<{ id: string; valid_until: Date }>(
    `SELECT id, valid_until FROM device_force_renewal_grants
      WHERE device_id = $1 AND granted_at <= $2 AND valid_until > $2 AND used_at IS NULL
      ORDER BY valid_until DESC LIMIT 1${options.lock ? ' FOR UPDATE' : ''}`,
    [deviceId, now],
  );
  return rows[0] ?? null;
}

/** The forced renewal that `grantId` allowed has issued `serial`: the grant allows nothing more. */
export async function useForceGrant(
  db: Queryable,
  grantId: string,
  now: Date,
  serial: string,
): Promise<void> {
  await db.query('UPDATE device_force_renewal_grants SET used_at = $2, used_for_serial = $3 WHERE id = $1', [
    grantId,
    now,
    serial,
  ]);
}

export async function insertForceGrant(
  db: Queryable,
  args: { deviceId: string; now: Date; until: Date; grantedBy: string },
): Promise<void> {
  await db.query(
    'INSERT INTO device_force_renewal_grants (device_id, granted_at, valid_until, granted_by) VALUES ($1, $2, $3, $4)',
    [args.deviceId, args.now, args.until, args.grantedBy],
  );
}
