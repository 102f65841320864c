import { X509Certificate } from 'node:crypto';
import { TLSSocket } from 'node:tls';
import { readCertificate, sha256Hex } from '@ooh/crypto';
import { type Certificate, parseCertificate, parsePem, parsePems, verifyChain } from '@ooh/verify';
import type { FastifyRequest } from 'fastify';
import type { PlatformContext } from '../context.js';
import { ProblemError } from '../http/problem.js';
import type { RefusalReason } from './refusals.js';
import { certificateBySerial, certificateRenewedFrom, findDevice, markFirstUse } from './repository.js';
import { normaliseAddress } from './settings.js';
import { answerMayBeLost, certificateState } from './state.js';

export interface DeviceIdentity {
  deviceId: string;
  /** Lowercase hex serial of the client certificate that authenticated the request. */
  certificateSerial: string;
  /**
   * Set only where the caller asked for it (`lostAnswerReplay`, POST /d/v1/renew): the DER of a superseded
   * certificate, past its old_valid_until, let through because the answer of its renewal may have been lost. It may
   * only fetch again, with the same CSR, the certificate that renewal issued; anything else is refused as
   * `certificate_superseded` (renew.ts).
   */
  supersededCertificate?: Buffer;
}

/**
 * 401 device_unauthorized for a client certificate the platform refuses, with why (a stable reason) and what was
 * presented: the devices feature records every such refusal for the fleet view (refusals.ts).
 */
export class DeviceRefusal extends ProblemError {
  constructor(
    readonly reason: RefusalReason,
    detail: string,
    readonly certificate: Buffer | null = null,
    readonly deviceId: string | null = null,
    options: { cause?: unknown } = {},
  ) {
    super('device_unauthorized', detail, options);
  }
}

/** Chains verified lately are kept up to this many (ctx.caches.devices.verifiedChains; each platform its own CA). */
const VERIFIED_CHAINS_MAX = 10_000;

/**
 * Chains a certificate passed by the proxy to the device CA at the platform clock, for clientAuth (@ooh/verify's
 * verifyChain: the purpose TLS checks of a client's chain, so the proxy path refuses what a direct connection
 * refuses). Checking a chain costs milliseconds of signature work and a device sends the same certificate on every
 * call for a year, so a successful verification is remembered by the leaf's digest for as long as every certificate
 * of the chain is inside its dates (the chain's window; bounded, the oldest entry goes first). A failure is never
 * remembered.
 */
async function verifyProxiedChain(ctx: PlatformContext, der: Buffer): Promise<void> {
  const digest = sha256Hex(der);
  const cache = ctx.caches.devices.verifiedChains;
  const now = ctx.clock.now().getTime();
  const known = cache.get(digest);
  if (known && now >= known.from && now < known.until) return;
  const ca = await ctx.caches.devices.ca();
  let leaf: Certificate;
  try {
    leaf = parseCertificate(new Uint8Array(der));
  } catch (cause) {
    cache.delete(digest);
    throw new DeviceRefusal(
      'certificate_unreadable',
      'the client certificate passed by the proxy is unreadable',
      der,
      null,
      { cause },
    );
  }
  const chain = await verifyChain({
    leaf,
    pool: parsePems(ca.trustPems.slice(0, -1)),
    roots: parsePem(ca.rootPem),
    at: new Date(now),
    purpose: 'clientAuth',
  });
  if (!chain.ok) {
    cache.delete(digest);
    throw new DeviceRefusal(
      chain.error.code === 'chain_purpose' ? 'certificate_invalid' : chainFailureReason(leaf, now),
      chain.error.code === 'chain_purpose'
        ? 'the client certificate is not for client authentication'
        : 'the client certificate does not chain to the device CA',
      der,
      null,
      { cause: chain.error },
    );
  }
  cache.delete(digest);
  if (cache.size >= VERIFIED_CHAINS_MAX) cache.delete(cache.keys().next().value as string);
  cache.set(digest, {
    serial: readCertificate(new Uint8Array(der)).serialHex,
    from: chain.window.notBefore.getTime(),
    until: chain.window.notAfter.getTime(),
  });
}

/** Why a certificate passed by a proxy did not chain: its own dates, else its chain. */
function chainFailureReason(leaf: Certificate, nowMs: number): RefusalReason {
  if (nowMs >= leaf.notAfter.getTime()) return 'certificate_expired';
  if (nowMs < leaf.notBefore.getTime()) return 'certificate_not_yet_valid';
  return 'unknown_ca';
}

/**
 * The client certificate's DER. Direct TLS: the peer certificate, which TLS has already chained to the device
 * CA (against the machine clock). Behind a TLS-terminating proxy: the configured header, believed only on
 * connections from a configured proxy address and chained to the device CA here again; from anyone else the
 * header is removed and ignored.
 */
async function presentedCertificate(ctx: PlatformContext, request: FastifyRequest): Promise<Buffer> {
  const settings = ctx.caches.devices.settings();
  if (settings.termination === 'proxy' && settings.clientCertHeader) {
    const header = request.headers[settings.clientCertHeader];
    delete request.headers[settings.clientCertHeader];
    const from = normaliseAddress(request.socket.remoteAddress ?? '');
    if (!settings.trustedProxies.includes(from)) {
      throw new DeviceRefusal('untrusted_proxy', 'a client certificate is required');
    }
    if (typeof header !== 'string' || header.trim() === '') {
      throw new DeviceRefusal('no_certificate', 'a client certificate is required');
    }
    let der: Buffer;
    try {
      const text = header.includes('%') ? decodeURIComponent(header) : header;
      der = Buffer.from(new X509Certificate(readCertificate(text.trim()).pem).raw);
    } catch (cause) {
      throw new DeviceRefusal(
        'certificate_unreadable',
        'the client certificate passed by the proxy is unreadable',
        null,
        null,
        { cause },
      );
    }
    await verifyProxiedChain(ctx, der);
    return der;
  }
  const socket = request.raw.socket;
  // The listener's gate (tls.ts) already closed any other connection; this is the belt to those braces.
  const peer = socket instanceof TLSSocket ? socket.getPeerCertificate() : null;
  const raw = peer && Buffer.isBuffer(peer.raw) && peer.raw.length > 0 ? peer.raw : null;
  if (!(socket instanceof TLSSocket) || socket.authorized !== true || raw === null) {
    throw new DeviceRefusal(
      raw === null ? 'no_certificate' : 'unknown_ca',
      'a client certificate issued by the device CA is required',
      raw,
    );
  }
  return raw;
}

/**
 * Serials of certificates seen lately are kept, by the SHA-256 of their DER (parsing one costs about a millisecond),
 * up to this many (ctx.caches.devices.serials).
 */
const SERIALS_MAX = 20_000;

function serialOf(ctx: PlatformContext, der: Buffer, digest: string): string {
  const serials = ctx.caches.devices.serials;
  const known = serials.get(digest);
  if (known !== undefined) return known;
  let serial: string;
  try {
    serial = readCertificate(der).serialHex;
  } catch (cause) {
    throw new DeviceRefusal('certificate_unreadable', 'the client certificate is unreadable', der, null, {
      cause,
    });
  }
  if (serials.size >= SERIALS_MAX) serials.delete(serials.keys().next().value as string);
  serials.set(digest, serial);
  return serial;
}

/**
 * Which device a request comes from, by its client certificate (DESIGN.md §3): the device's newest certificate
 * is accepted; the one it replaced until its old_valid_until (spec "Certificate rule": "the old certificate
 * stays accepted until old_valid_until (24 hours)"); a superseded certificate, a revoked device, an unknown
 * serial or a certificate outside its dates at ctx.clock are 401 device_unauthorized (a DeviceRefusal, which says
 * why). Marks the first use of a certificate.
 *
 * `lostAnswerReplay` (POST /d/v1/renew only): a superseded certificate whose renewal's answer may have been lost
 * (its successor never used and still the newest, answerMayBeLost) is let through, marked supersededCertificate, so
 * that the same CSR can fetch the certificate already issued after the 24 hours too (DESIGN.md §9: "A lost renewal
 * answer is recovered by sending the same CSR again"). A player whose renewal answer was lost just before an outage
 * of more than a day was otherwise locked out until re-enrolled on site. The revoked device and the dates are
 * judged as for any certificate.
 */
export async function deviceFromClientCertificate(
  ctx: PlatformContext,
  request: FastifyRequest,
  options: { lostAnswerReplay?: boolean } = {},
): Promise<DeviceIdentity> {
  const der = await presentedCertificate(ctx, request);
  const digest = sha256Hex(der);
  const serial = serialOf(ctx, der, digest);
  const certificate = await certificateBySerial(ctx.db, serial);
  // The serial names the certificate; the digest makes sure it is that very certificate.
  if (!certificate || certificate.certificate_sha256 !== digest) {
    throw new DeviceRefusal('certificate_unknown', `certificate ${serial} was not issued to any device`, der);
  }
  const device = await findDevice(ctx.db, certificate.device_id);
  if (!device) {
    throw new DeviceRefusal('certificate_unknown', `certificate ${serial} was not issued to any device`, der);
  }
  const now = ctx.clock.now();
  const state = certificateState(certificate, device.revoked_at, now);
  let supersededCertificate: Buffer | undefined;
  switch (state) {
    case 'revoked':
      throw new DeviceRefusal('device_revoked', `device ${device.id} is revoked`, der, device.id);
    case 'superseded': {
      if (options.lostAnswerReplay) {
        const successor = await certificateRenewedFrom(ctx.db, certificate.serial);
        if (successor && answerMayBeLost(certificate, successor)) {
          supersededCertificate = der;
          break;
        }
      }
      throw new DeviceRefusal(
        'certificate_superseded',
        `certificate ${serial} was replaced and is no longer accepted` +
          (certificate.old_valid_until ? ` (since ${certificate.old_valid_until.toISOString()})` : ''),
        der,
        device.id,
      );
    }
    case 'current':
    case 'previous-until':
      break;
  }
  if (now < certificate.not_before || now >= certificate.not_after) {
    throw new DeviceRefusal(
      'certificate_outside_dates',
      `certificate ${serial} is not valid at ${now.toISOString()}; the device must be re-enrolled`,
      der,
      device.id,
    );
  }
  if (supersededCertificate) return { deviceId: device.id, certificateSerial: serial, supersededCertificate };
  if (certificate.first_used_at === null) await markFirstUse(ctx.db, serial, now);
  return { deviceId: device.id, certificateSerial: serial };
}
