import { DateTime, LIMITS, RenewAnswer, RenewRequest, Uuid } from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import { principalOf } from '../auth/plugin.js';
import type { PlatformContext } from '../context.js';
import type { Feature } from '../features.js';
import { ProblemError } from '../http/problem.js';
import { FLEET_ADMIN } from '../shared/auth-grants.js';
import { pathUuid } from '../shared/ids.js';
import { deviceFromClientCertificate } from './authenticate.js';
import { enrolDevice, reEnrolDevice, visibleDevice } from './enrol.js';
import { parseDeviceCsr } from './keys.js';
import { checkBodySignature, renewCertificate } from './renew.js';
import {
  certificateBySerial,
  type DeviceRow,
  deviceCertificates,
  deviceKeys,
  findDevice,
  insertForceGrant,
  liveForceGrant,
} from './repository.js';
import {
  DeviceView,
  EnrolAnswer,
  EnrolBody,
  ForceGrantAnswer,
  ReEnrolBody,
  WhoAmIAnswer,
  type DeviceView as DeviceViewType,
} from './schema.js';
import { certificateState } from './state.js';

const HOUR_MS = 3_600_000;
/** The renew body holds one CSR and a flag. */
const RENEW_BODY_LIMIT = 64 * 1024;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

interface FleetRow {
  device_id: string;
  structure_id: string;
  structure_code: string;
  organisation_id: string;
  created_at: Date;
  revoked_at: Date | null;
  force_renewal_until: Date | null;
  certificate_not_after: Date | null;
  last_batch_at: Date | null;
  last_batch_seq: number | null;
  queue_lag_seconds: number | null;
}

const NullableDateTime = Type.Union([DateTime, Type.Null()]);
const NullableInteger = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]);

/** GET /api/v1/console/devices (apps/platform/console/README.md "Fleet"). */
const FleetList = Type.Object({
  items: Type.Array(
    Type.Object({
      device_id: Uuid,
      structure_id: Uuid,
      structure_code: Type.String(),
      organisation_id: Uuid,
      created_at: DateTime,
      revoked_at: NullableDateTime,
      force_renewal_until: NullableDateTime,
      certificate_not_after: NullableDateTime,
      last_batch_at: NullableDateTime,
      last_batch_seq: NullableInteger,
      queue_lag_seconds: NullableInteger,
    }),
  ),
});

/**
 * The fleet list: devices with structure, current certificate expiry, force-renewal allowance, last batch and queue
 * lag (apps/platform/console/README.md "Fleet": the receive time of the device's newest batch minus the newest time
 * a record in it carries, never below 0; null without a batch or without a timed record in it). One index read per
 * device (migration 061); the batch row holds the newest record time (migration 063). $1: the caller's organisation
 * (null for the authority: every device); $2: now.
 */
export const FLEET_LIST_SQL = `
   SELECT d.id AS device_id, d.structure_id, s.code AS structure_code, s.organisation_id, d.created_at,
          d.revoked_at,
          (SELECT max(g.valid_until) FROM device_force_renewal_grants g
            WHERE g.device_id = d.id AND g.valid_until > $2) AS force_renewal_until,
          -- The current certificate: not replaced by a renewal, nor ended by a re-enrolment.
          (SELECT c.not_after FROM device_certificates c WHERE c.device_id = d.id AND c.replaced_at IS NULL
            ORDER BY c.issued_at DESC LIMIT 1) AS certificate_not_after,
          b.received_at AS last_batch_at, b.batch_seq AS last_batch_seq,
          -- greatest() skips nulls, hence the CASE: no timed record, no lag.
          CASE WHEN b.newest_record_at IS NOT NULL
               THEN greatest(0, floor(extract(epoch FROM b.received_at - b.newest_record_at)))::bigint
          END AS queue_lag_seconds
     FROM devices d JOIN structures s ON s.id = d.structure_id
     LEFT JOIN LATERAL (SELECT received_at, batch_seq, newest_record_at FROM pop_batches
                         WHERE owner = 'device:' || d.id
                         ORDER BY received_at DESC, id DESC LIMIT 1) b ON true
    WHERE $1::uuid IS NULL OR s.organisation_id = $1
    ORDER BY s.code, d.id`;

async function deviceView(ctx: PlatformContext, device: DeviceRow): Promise<DeviceViewType> {
  const now = ctx.clock.now();
  const [keys, certificates, grant] = await Promise.all([
    deviceKeys(ctx.db, device.id),
    deviceCertificates(ctx.db, device.id),
    liveForceGrant(ctx.db, device.id, now),
  ]);
  return {
    device_id: device.id,
    structure_id: device.structure_id,
    structure_code: device.structure_code,
    organisation_id: device.organisation_id,
    created_at: device.created_at.toISOString(),
    re_enrolled_at: iso(device.re_enrolled_at),
    revoked_at: iso(device.revoked_at),
    force_renewal_until: iso(grant?.valid_until ?? null),
    keys: keys.map((k) => ({
      fingerprint: k.fingerprint,
      public_key: k.public_key_spki,
      registered_at: k.registered_at.toISOString(),
      accepted_until: iso(k.accepted_until),
    })),
    certificates: certificates.map((c) => ({
      serial: c.serial,
      state: certificateState(c, device.revoked_at, now),
      not_before: c.not_before.toISOString(),
      not_after: c.not_after.toISOString(),
      issued_at: c.issued_at.toISOString(),
      issued_by: c.issued_by,
      first_used_at: iso(c.first_used_at),
      replaced_at: iso(c.replaced_at),
      old_valid_until: iso(c.old_valid_until),
      key_fingerprint: c.key_fingerprint,
      certificate_pem: c.pem,
    })),
  };
}

/**
 * Device identity: enrolment and the device's certificates in the console (api host), certificate renewal
 * and a who-am-I check on the devices host (mutual TLS).
 */
export const devicesFeature: Feature = {
  name: 'devices',

  api(app, ctx) {
    app.post<{ Body: EnrolBody }>(
      '/api/v1/console/devices',
      { config: { auth: FLEET_ADMIN }, schema: { body: EnrolBody, response: { 201: EnrolAnswer } } },
      async (request, reply) =>
        reply.code(201).send(await enrolDevice(ctx, principalOf(request), request.body)),
    );

    // The fleet list (FLEET_LIST_SQL).
    app.get(
      '/api/v1/console/devices',
      { config: { auth: FLEET_ADMIN }, schema: { response: { 200: FleetList } } },
      async (request) => {
        const principal = principalOf(request);
        const { rows } = await ctx.db.query<FleetRow>(FLEET_LIST_SQL, [
          principal.organisation.kind === 'authority' ? null : principal.organisation.id,
          ctx.clock.now(),
        ]);
        return {
          items: rows.map((row) => ({
            ...row,
            created_at: row.created_at.toISOString(),
            revoked_at: iso(row.revoked_at),
            force_renewal_until: iso(row.force_renewal_until),
            certificate_not_after: iso(row.certificate_not_after),
            last_batch_at: iso(row.last_batch_at),
          })),
        };
      },
    );

    app.get<{ Params: { id: string } }>(
      '/api/v1/console/devices/:id',
      { config: { auth: FLEET_ADMIN }, schema: { response: { 200: DeviceView } } },
      async (request) => {
        const device = await visibleDevice(ctx, principalOf(request), pathUuid(request.params.id, 'device'));
        return deviceView(ctx, device);
      },
    );

    app.post<{ Params: { id: string } }>(
      '/api/v1/console/devices/:id/revoke',
      { config: { auth: FLEET_ADMIN }, schema: { response: { 200: DeviceView } } },
      async (request) => {
        const device = await visibleDevice(ctx, principalOf(request), pathUuid(request.params.id, 'device'));
        // Revocation is final and idempotent: the first revocation time stays.
        await ctx.db.query('UPDATE devices SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1', [
          device.id,
          ctx.clock.now(),
        ]);
        return deviceView(ctx, (await findDevice(ctx.db, device.id))!);
      },
    );

    app.post<{ Params: { id: string } }>(
      '/api/v1/console/devices/:id/allow-force-renewal',
      { config: { auth: FLEET_ADMIN }, schema: { response: { 200: ForceGrantAnswer } } },
      async (request) => {
        const principal = principalOf(request);
        const device = await visibleDevice(ctx, principal, pathUuid(request.params.id, 'device'));
        if (device.revoked_at) throw new ProblemError('state_conflict', `device ${device.id} is revoked`);
        const now = ctx.clock.now();
        // spec renew: force is "allowed only after an administrator has allowed it for 24 hours".
        const until = new Date(now.getTime() + LIMITS.renewalForceGrantHours * HOUR_MS);
        await insertForceGrant(ctx.db, { deviceId: device.id, now, until, grantedBy: principal.id });
        return { device_id: device.id, until: until.toISOString() };
      },
    );

    app.post<{ Params: { id: string }; Body: ReEnrolBody }>(
      '/api/v1/console/devices/:id/re-enrol',
      { config: { auth: FLEET_ADMIN }, schema: { body: ReEnrolBody, response: { 200: EnrolAnswer } } },
      async (request) => {
        const device = await visibleDevice(ctx, principalOf(request), pathUuid(request.params.id, 'device'));
        return reEnrolDevice(ctx, device, request.body);
      },
    );
  },

  devices(app, ctx) {
    app.post<{ Body: RenewRequest }>(
      '/d/v1/renew',
      { bodyLimit: RENEW_BODY_LIMIT, schema: { body: RenewRequest, response: { 200: RenewAnswer } } },
      async (request) => {
        const identity = await deviceFromClientCertificate(ctx, request);
        const presented = await certificateBySerial(ctx.db, identity.certificateSerial);
        if (!presented) throw new ProblemError('device_unauthorized', 'the client certificate is unknown');
        checkBodySignature(presented, request.rawBody, request.headers['x-service-signature']);
        const csr = await parseDeviceCsr(request.body.csr, '/csr');
        return renewCertificate(ctx, identity, csr, request.body.force === true);
      },
    );

    app.get('/d/v1/whoami', { schema: { response: { 200: WhoAmIAnswer } } }, async (request) => {
      const identity = await deviceFromClientCertificate(ctx, request);
      const [device, certificate] = await Promise.all([
        findDevice(ctx.db, identity.deviceId),
        certificateBySerial(ctx.db, identity.certificateSerial),
      ]);
      return {
        device_id: identity.deviceId,
        structure_code: device!.structure_code,
        certificate_serial: identity.certificateSerial,
        certificate_state: certificateState(certificate!, device!.revoked_at, ctx.clock.now()),
        not_after: certificate!.not_after.toISOString(),
        old_valid_until: iso(certificate!.old_valid_until),
      };
    });
  },
};
