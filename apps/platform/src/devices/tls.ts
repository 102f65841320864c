import type { PlatformContext } from '../context.js';
import { deviceCaFor, loadServerTlsPair } from './ca.js';
import { deviceIdentitySettings } from './settings.js';

/** Options of the devices host's HTTPS listener (node:tls server options). */
export interface DevicesHttpsOptions {
  key: string;
  cert: string;
  ca: string[];
  requestCert: true;
  rejectUnauthorized: true;
  minVersion: 'TLSv1.2';
}

/**
 * DESIGN.md §2: the devices host is "HTTPS with client certificates required". TLS refuses any client without
 * a certificate chaining to the device CA (never rejectUnauthorized: false); which of those certificates are
 * still accepted is decided per request by deviceFromClientCertificate. Creates the device CA and the server
 * certificate on first start. Returns null when a TLS-terminating proxy sits in front
 * (DEVICES_TLS_TERMINATION=proxy): the listener is then plain HTTP and only trusted proxies may name a
 * client certificate.
 */
export async function devicesHttpsOptions(ctx: PlatformContext): Promise<DevicesHttpsOptions | null> {
  const settings = deviceIdentitySettings(ctx);
  const ca = await deviceCaFor(ctx);
  if (settings.termination === 'proxy') return null;
  const pair = await loadServerTlsPair(settings, ca, ctx.clock.now(), ctx.log);
  return {
    key: pair.keyPem,
    cert: pair.certPem,
    ca: ca.trustPems,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.2',
  };
}
