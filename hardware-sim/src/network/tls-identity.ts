import {
  createRootCa,
  exportPrivateKeyPem,
  generateEs256KeyPair,
  issueCertificate,
  randomSerialHex,
} from '@ooh/crypto';

export interface ProxyTls {
  /** The simulator's own CA: players trust it for the proxy's TLS front. */
  caPem: string;
  certPem: string;
  keyPem: string;
}

const DAY_MS = 86_400_000;

/**
 * A CA and a server certificate for the fault proxy's TLS front (localhost, 127.0.0.1, ::1). TLS checks
 * certificates against the machine's real clock, so these are dated by it, not by virtual time.
 */
export async function createProxyTls(now = new Date()): Promise<ProxyTls> {
  const caKeys = generateEs256KeyPair();
  const notBefore = new Date(now.getTime() - DAY_MS);
  const notAfter = new Date(now.getTime() + 2 * 365 * DAY_MS);
  const caPem = await createRootCa({
    subject: 'CN=hardware-sim proxy CA',
    keyPair: caKeys,
    notBefore,
    notAfter,
  });
  const serverKeys = generateEs256KeyPair();
  const certPem = await issueCertificate({
    subject: 'CN=hardware-sim proxy',
    publicKey: serverKeys.publicKey,
    issuerCertificatePem: caPem,
    issuerKey: caKeys.privateKey,
    notBefore,
    notAfter,
    serialHex: randomSerialHex(),
    usage: 'server',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1', '::1'],
  });
  return { caPem, certPem, keyPem: exportPrivateKeyPem(serverKeys.privateKey) };
}
