import { LIMITS, RenewAnswer, RenewRequest } from '@ooh/protocol';
import type { FastifyRequest } from 'fastify';
import { principalOf } from '../auth/plugin.js';
import type { PlatformContext } from '../context.js';
import type { Feature } from '../context.js';
import { ProblemError } from '../http/problem.js';
import { FLEET_ADMIN } from '../shared/auth-grants.js';
import { notFound, pathUuid } from '../shared/ids.js';
import { alertSettings } from '../alerts/index.js';
import type { Principal } from '../auth/principal.js';
import { DeviceRefusal, type DeviceIdentity, deviceFromClientCertificate } from './authenticate.js';
import { enrolDevice, reEnrolDevice, visibleDevice } from './enrol.js';
import { DeviceActivityAnswer, deviceActivity, FleetList, fleetItem, fleetList } from './fleet.js';
import { parseDeviceCsr } from './keys.js';
import { checkBodySignature, renewCertificate, requireSignatureHeader } from './renew.js';
import {
  type CertificateRow,
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
  FleetQuerystring,
  ForceGrantAnswer,
  fleetQueryOf,
  ReEnrolBody,
  WhoAmIAnswer,
  type DeviceView as DeviceViewType,
} from './schema.js';
import { RefusalRecorder } from './refusals.js';
import { recordServerErrorsOf } from './server-errors.js';
import { normaliseAddress } from './settings.js';
import { certificateState } from './state.js';
import { guardDevicesListener } from './tls.js';

export { fleetListStatement } from './fleet.js';

const HOUR_MS = 3_600_000;
/** The renew body holds one CSR and a flag. */
const RENEW_BODY_LIMIT = 64 * 1024;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** The organisation whose devices the caller sees; null for the authority (every device). */
const organisationScope = (principal: Principal): string | null =>
  principal.organisation.kind === 'authority' ? null : principal.organisation.id;

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

    // The fleet list (fleet.ts): one page of devices, searched, filtered and sorted, the whole fleet counted by state,
    // refused client certificates and open alerts. An operator sees its own devices only.
    app.get<{ Querystring: FleetQuerystring }>(
      '/api/v1/console/devices',
      {
        config: { auth: FLEET_ADMIN },
        schema: { querystring: FleetQuerystring, response: { 200: FleetList } },
      },
      async (request) =>
        fleetList(ctx.db, {
          organisationId: organisationScope(principalOf(request)),
          now: ctx.clock.now(),
          silentAfterMs: alertSettings(ctx.config.settings).silentAfterMs,
          query: fleetQueryOf(request.query),
        }),
    );

    // The device page (issue 22, item 2): its fleet row, newest batches and their answers, clock offset, rejects and
    // refused handshakes. Someone else's device is 404, as on every route of a device.
    app.get<{ Params: { id: string } }>(
      '/api/v1/console/devices/:id/activity',
      { config: { auth: FLEET_ADMIN }, schema: { response: { 200: DeviceActivityAnswer } } },
      async (request) => {
        const principal = principalOf(request);
        const device = await visibleDevice(ctx, principal, pathUuid(request.params.id, 'device'));
        const [item, activity] = await Promise.all([
          fleetItem(ctx.db, {
            organisationId: organisationScope(principal),
            now: ctx.clock.now(),
            silentAfterMs: alertSettings(ctx.config.settings).silentAfterMs,
            deviceId: device.id,
          }),
          deviceActivity(ctx.db, device.id),
        ]);
        if (!item) throw notFound('device', device.id);
        return { device: item, ...activity };
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

  // Issue "Trust under attack", item 4: 5xx answers to a device are recorded for the fleet view (server-errors.ts).
  // Registered on the host's scope before the proof-of-play feature registers its telemetry routes (FEATURES order):
  // a plugin takes the hooks its scope has when it is registered.
  agents(app, ctx) {
    recordServerErrorsOf(app, ctx);
  },

  devices(app, ctx) {
    recordServerErrorsOf(app, ctx);
    // Issue "Trust under attack", item 6: every refused client certificate is recorded (refusals.ts), whether TLS
    // refused it (guardDevicesListener) or the platform did after the handshake (a DeviceRefusal of any route here).
    const refusals = new RefusalRecorder(ctx);
    guardDevicesListener(
      app.server,
      (refusal) => refusals.note(refusal),
      () => ctx.clock.now(),
    );
    app.addHook('onError', async (request, _reply, error) => {
      if (!(error instanceof DeviceRefusal)) return;
      refusals.note({
        at: ctx.clock.now(),
        reason: error.reason,
        certificate: error.certificate,
        address: normaliseAddress(request.ip),
        deviceId: error.deviceId,
      });
    });
    app.addHook('onClose', async () => {
      await refusals.close();
    });

    // The credential before the body (docs/decisions.md, "The order of checks"): the client certificate identifies
    // the device, and a request without a body signature is refused, in onRequest, before a byte of the body is read,
    // so a revoked or unknown device gets its 401 whatever it sends and nobody makes the platform parse a body
    // without one. The signature over the body can only be checked once the body is read: in preValidation, before
    // the route's schema judges its fields, so field errors are told only to the holder of the certificate's key.
    const renewers = new WeakMap<FastifyRequest, { identity: DeviceIdentity; presented: CertificateRow }>();
    app.post<{ Body: RenewRequest }>(
      '/d/v1/renew',
      {
        bodyLimit: RENEW_BODY_LIMIT,
        schema: { body: RenewRequest, response: { 200: RenewAnswer } },
        onRequest: async (request) => {
          const identity = await deviceFromClientCertificate(ctx, request, { lostAnswerReplay: true });
          request.authenticatedDeviceId = identity.deviceId;
          const presented = await certificateBySerial(ctx.db, identity.certificateSerial);
          if (!presented) throw new ProblemError('device_unauthorized', 'the client certificate is unknown');
          requireSignatureHeader(request.headers['x-service-signature']);
          renewers.set(request, { identity, presented });
        },
        preValidation: async (request) => {
          const { presented } = renewers.get(request)!;
          checkBodySignature(presented, request.rawBody, request.headers['x-service-signature']);
        },
      },
      async (request) => {
        const { identity } = renewers.get(request)!;
        const csr = await parseDeviceCsr(request.body.csr, '/csr');
        return renewCertificate(ctx, identity, csr, request.body.force === true);
      },
    );

    app.get('/d/v1/whoami', { schema: { response: { 200: WhoAmIAnswer } } }, async (request) => {
      const identity = await deviceFromClientCertificate(ctx, request);
      request.authenticatedDeviceId = identity.deviceId;
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
