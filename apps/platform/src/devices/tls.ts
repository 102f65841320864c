import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as NetServer } from 'node:net';
import { Server as TlsServer, type TLSSocket } from 'node:tls';
import type { PlatformContext } from '../context.js';
import { loadServerTlsPair } from './ca.js';
import type { Refusal, RefusalReason } from './refusals.js';
import { normaliseAddress } from './settings.js';

/** Options of the devices host's HTTPS listener (node:tls server options). */
export interface DevicesHttpsOptions {
  key: string;
  cert: string;
  ca: string[];
  requestCert: true;
  /**
   * false: Node must not close refused connections itself, because it closes them without a trace (no event, the
   * certificate and the peer gone). guardDevicesListener closes them instead, having recorded why. The chain is
   * verified by TLS against the device CA exactly as before; only who closes the connection changed.
   */
  rejectUnauthorized: false;
  minVersion: 'TLSv1.2';
}

/**
 * DESIGN.md §2: the devices host is "HTTPS with client certificates required". TLS verifies every client
 * certificate against the device CA (its only trust anchor) and the machine clock; guardDevicesListener closes each
 * connection whose client presented none or one that did not verify, before a byte of HTTP is read. Which of the
 * verified certificates are still accepted is decided per request by deviceFromClientCertificate. Creates the device
 * CA and the server certificate on first start. Returns null when a TLS-terminating proxy sits in front
 * (DEVICES_TLS_TERMINATION=proxy): the listener is then plain HTTP and only trusted proxies may name a client
 * certificate.
 */
export async function devicesHttpsOptions(ctx: PlatformContext): Promise<DevicesHttpsOptions | null> {
  const settings = ctx.caches.devices.settings();
  const ca = await ctx.caches.devices.ca();
  if (settings.termination === 'proxy') return null;
  const pair = await loadServerTlsPair(settings, ca, ctx.clock.now(), ctx.log);
  return {
    key: pair.keyPem,
    cert: pair.certPem,
    ca: ca.trustPems,
    requestCert: true,
    rejectUnauthorized: false,
    minVersion: 'TLSv1.2',
  };
}

/** OpenSSL's verification errors (tlsSocket.authorizationError) as refusal reasons. */
function verifyErrorReason(code: string | undefined): RefusalReason {
  switch (code) {
    case 'CERT_HAS_EXPIRED':
      return 'certificate_expired';
    case 'CERT_NOT_YET_VALID':
      return 'certificate_not_yet_valid';
    case 'UNABLE_TO_GET_ISSUER_CERT':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'CERT_SIGNATURE_FAILURE':
    case 'CERT_UNTRUSTED':
    case 'CERT_REJECTED':
      return 'unknown_ca';
    default:
      return 'certificate_invalid';
  }
}

/**
 * Handshakes that end without a refusal: the peer closed or never spoke TLS in time (a load balancer's TCP check, a
 * port scanner). Not counted, or a health check every few seconds would bury the refusals an operator looks for.
 */
const NOT_REFUSALS = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ERR_TLS_HANDSHAKE_TIMEOUT']);

/**
 * What a load balancer may ask the devices host without a client certificate: whether the process is up (/healthz)
 * and whether it reaches its database (/readyz), by GET or HEAD. An HTTPS health check does not present a client
 * certificate, and a probe of a separate plain port would say "healthy" while this listener (its TLS pair, its port)
 * is broken; so the probe is answered here, on this listener, and nothing else is (docs/decisions.md).
 */
export const DEVICES_HEALTH_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/** How long a connection without a client certificate has to send its health probe. */
const HEALTH_PROBE_WAIT_MS = 10_000;

function isHealthProbe(request: IncomingMessage): boolean {
  const path = (request.url ?? '').split('?')[0] ?? '';
  return (request.method === 'GET' || request.method === 'HEAD') && DEVICES_HEALTH_PATHS.has(path);
}

/**
 * Makes the devices listener refuse, and report, every connection whose client certificate TLS did not verify
 * (issue "Trust under attack", item 6: "A client certificate refused during the TLS handshake leaves no trace").
 * Runs first on each new secure connection: an unverified one is reported with its certificate, reason and peer
 * address, and destroyed before the HTTP server sees it. Handshakes that fail outright (tlsClientError) are reported
 * too, unless the peer merely went away. A server that is not TLS (a TLS-terminating proxy in front) is left alone.
 *
 * One exception, for load balancers (issue "What a newcomer tripped over", item 7): a connection that presented no
 * certificate at all may send one health probe (DEVICES_HEALTH_PATHS), answered and then closed, and not recorded
 * as a refusal (a probe every few seconds would bury the refusals an operator looks for). Anything else it sends, or
 * sending nothing within HEALTH_PROBE_WAIT_MS, or closing without a probe, is the no_certificate refusal it always
 * was: recorded once, the connection destroyed before the request reaches a route. A certificate that TLS refused
 * is never given this exception.
 */
export function guardDevicesListener(
  server: NetServer,
  report: (refusal: Refusal) => void,
  now: () => Date,
): void {
  if (!(server instanceof TlsServer)) return;
  /** Connections without a certificate, and their refusal, recorded unless the connection was a health probe. */
  const withoutCertificate = new WeakMap<
    TLSSocket,
    { refusal: Refusal; probed: boolean; reported: boolean }
  >();
  server.prependListener('secureConnection', (socket: TLSSocket) => {
    if (socket.authorized) return;
    let certificate: Buffer | null = null;
    try {
      certificate = socket.getPeerX509Certificate()?.raw ?? null;
    } catch {
      certificate = null;
    }
    const refusal: Refusal = {
      at: now(),
      reason:
        certificate === null ? 'no_certificate' : verifyErrorReason(socket.authorizationError?.toString()),
      certificate,
      address: socket.remoteAddress ? normaliseAddress(socket.remoteAddress) : null,
      deviceId: null,
    };
    if (certificate !== null) {
      report(refusal);
      socket.destroy();
      return;
    }
    const state = { refusal, probed: false, reported: false };
    withoutCertificate.set(socket, state);
    const wait = setTimeout(() => socket.destroy(), HEALTH_PROBE_WAIT_MS);
    wait.unref();
    socket.once('close', () => {
      clearTimeout(wait);
      if (!state.probed && !state.reported) report(refusal);
    });
  });
  // Every request passes here before the HTTP framework's own listener: one on a connection without a certificate
  // reaches it only as a health probe.
  const handlers = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  server.removeAllListeners('request');
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const state = withoutCertificate.get(request.socket as TLSSocket);
    if (state) {
      if (state.probed || !isHealthProbe(request)) {
        if (!state.reported) report(state.refusal);
        state.reported = true;
        request.socket.destroy();
        return;
      }
      state.probed = true;
      // One probe per connection.
      response.shouldKeepAlive = false;
    }
    for (const handler of handlers) handler.call(server, request, response);
  });
  server.on('tlsClientError', (error: NodeJS.ErrnoException, socket: TLSSocket) => {
    if (error.code !== undefined && NOT_REFUSALS.has(error.code)) return;
    report({
      at: now(),
      reason: 'handshake_failed',
      certificate: null,
      address: socket.remoteAddress ? normaliseAddress(socket.remoteAddress) : null,
      deviceId: null,
    });
  });
}
