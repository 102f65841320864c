import { isIP } from 'node:net';
import path from 'node:path';

/**
 * Where the device CA and the devices host's TLS pair live, and how client certificates reach the platform.
 * Read from the platform configuration's settings (the config file's keys upper-cased, then the environment):
 *
 * - DEVICE_CA_CERT, DEVICE_CA_KEY, DEVICE_CA_CHAIN: PEM files of a real issuing CA, its private key and the
 *   certificates above it up to the root. Unset: a root and an issuing CA are created on first start in
 *   `${dataDir}/device-ca/` (keys mode 0600).
 * - DEVICES_TLS_CERT, DEVICES_TLS_KEY: PEM of the devices host's server certificate (with its chain) and key.
 *   Unset: one is issued by the device CA for localhost, 127.0.0.1, ::1 and the host of PUBLIC_DEVICES_URL, and
 *   kept in `${dataDir}/device-ca/`.
 * - DEVICES_TLS_TERMINATION: `direct` (default; the devices listener is HTTPS and requires a client
 *   certificate chaining to the device CA) or `proxy` (a TLS-terminating proxy in front; the listener is plain
 *   HTTP and the client certificate is taken from DEVICES_CLIENT_CERT_HEADER, only on connections from
 *   DEVICES_TRUSTED_PROXIES).
 * - DEVICES_CLIENT_CERT_HEADER: header carrying the client certificate (URL-encoded PEM as nginx
 *   `$ssl_client_escaped_cert`, PEM, or base64 DER). Required with `proxy`.
 * - DEVICES_TRUSTED_PROXIES: comma-separated IP addresses of the proxies. Required with `proxy`.
 */
export interface DeviceIdentitySettings {
  /** Folder of the generated CA and TLS files. */
  dir: string;
  /** Configured issuing CA, or null to generate one in `dir`. */
  ca: { certPath: string; keyPath: string; chainPath: string } | null;
  /** Configured TLS server pair, or null to issue one in `dir`. */
  tls: { certPath: string; keyPath: string } | null;
  termination: 'direct' | 'proxy';
  /** Lowercase header name; null unless termination is proxy. */
  clientCertHeader: string | null;
  trustedProxies: readonly string[];
  /** Names the generated server certificate covers besides localhost, 127.0.0.1 and ::1. */
  serverNames: readonly string[];
}

export class DeviceSettingsError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid device identity configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'DeviceSettingsError';
  }
}

const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;

/** Strips the IPv4-mapped IPv6 prefix so that 127.0.0.1 matches ::ffff:127.0.0.1. */
export function normaliseAddress(address: string): string {
  const lower = address.trim().toLowerCase();
  return lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4 ? lower.slice(7) : lower;
}

export function loadDeviceIdentitySettings(
  options: { dataDir: string; publicDevicesUrl?: string | undefined },
  env: NodeJS.ProcessEnv = process.env,
): DeviceIdentitySettings {
  const problems: string[] = [];
  const value = (name: string): string | null => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? null : v.trim();
  };

  const caCert = value('DEVICE_CA_CERT');
  const caKey = value('DEVICE_CA_KEY');
  const caChain = value('DEVICE_CA_CHAIN');
  let ca: DeviceIdentitySettings['ca'] = null;
  if (caCert || caKey || caChain) {
    if (!caCert || !caKey || !caChain) {
      problems.push('DEVICE_CA_CERT, DEVICE_CA_KEY and DEVICE_CA_CHAIN go together: set all three or none');
    } else {
      ca = { certPath: path.resolve(caCert), keyPath: path.resolve(caKey), chainPath: path.resolve(caChain) };
    }
  }

  const tlsCert = value('DEVICES_TLS_CERT');
  const tlsKey = value('DEVICES_TLS_KEY');
  let tls: DeviceIdentitySettings['tls'] = null;
  if (tlsCert || tlsKey) {
    if (!tlsCert || !tlsKey) problems.push('DEVICES_TLS_CERT and DEVICES_TLS_KEY go together');
    else tls = { certPath: path.resolve(tlsCert), keyPath: path.resolve(tlsKey) };
  }

  const termination = value('DEVICES_TLS_TERMINATION') ?? 'direct';
  if (termination !== 'direct' && termination !== 'proxy') {
    problems.push(`DEVICES_TLS_TERMINATION: must be direct or proxy, not "${termination}"`);
  }
  let clientCertHeader: string | null = null;
  let trustedProxies: string[] = [];
  if (termination === 'proxy') {
    const header = value('DEVICES_CLIENT_CERT_HEADER')?.toLowerCase() ?? null;
    if (!header || !HEADER_NAME.test(header)) {
      problems.push(
        'DEVICES_CLIENT_CERT_HEADER: a header name is required with DEVICES_TLS_TERMINATION=proxy',
      );
    } else {
      clientCertHeader = header;
    }
    trustedProxies = (value('DEVICES_TRUSTED_PROXIES') ?? '')
      .split(',')
      .map((a) => a.trim())
      .filter((a) => a !== '');
    if (trustedProxies.length === 0) {
      problems.push(
        'DEVICES_TRUSTED_PROXIES: at least one proxy address is required with DEVICES_TLS_TERMINATION=proxy',
      );
    }
    for (const address of trustedProxies) {
      if (isIP(address) === 0) problems.push(`DEVICES_TRUSTED_PROXIES: "${address}" is not an IP address`);
    }
    trustedProxies = trustedProxies.map(normaliseAddress);
  }

  const serverNames: string[] = [];
  if (options.publicDevicesUrl) {
    try {
      const host = new URL(options.publicDevicesUrl).hostname.replace(/^\[(.*)\]$/, '$1');
      if (host && !['localhost', '127.0.0.1', '::1'].includes(host)) serverNames.push(host);
    } catch {
      // The platform config already refused an unreadable URL.
    }
  }

  if (problems.length > 0) throw new DeviceSettingsError(problems);
  return {
    dir: path.join(options.dataDir, 'device-ca'),
    ca,
    tls,
    termination: termination as 'direct' | 'proxy',
    clientCertHeader,
    trustedProxies,
    serverNames,
  };
}
