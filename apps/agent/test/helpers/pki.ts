import type { KeyObject } from 'node:crypto';
import {
  canonicalBytes,
  cmsSign,
  createIntermediateCa,
  createRootCa,
  generateEs256KeyPair,
  issueCertificate,
  randomSerialHex,
} from '@ooh/crypto';

const DAY_MS = 86_400_000;

export interface SignerMaterial {
  certificatePem: string;
  key: KeyObject;
}

/**
 * Every certificate a test needs, made with @ooh/crypto: the authority's root → issuing CA → signing
 * certificate (approval envelopes, revocation lists, DESIGN.md §4); the device CA root → device issuing CA
 * (client certificates); a TLS root and a server certificate for localhost (the test platform's HTTPS).
 */
export interface TestPki {
  authorityRootPem: string;
  authorityIssuing: SignerMaterial;
  authoritySigner: SignerMaterial;
  deviceRootPem: string;
  deviceIssuing: SignerMaterial;
  tlsRootPem: string;
  server: SignerMaterial;
}

export async function createTestPki(now: Date = new Date()): Promise<TestPki> {
  const notBefore = new Date(now.getTime() - DAY_MS);
  const notAfter = new Date(now.getTime() + 20 * 365 * DAY_MS);

  const authorityRootKeys = generateEs256KeyPair();
  const authorityRootPem = await createRootCa({
    subject: 'CN=Test Authority Root, O=City',
    keyPair: authorityRootKeys,
    notBefore,
    notAfter,
  });
  const issuingKeys = generateEs256KeyPair();
  const issuingPem = await createIntermediateCa({
    subject: 'CN=Test Authority Issuing, O=City',
    publicKey: issuingKeys.publicKey,
    issuerCertificatePem: authorityRootPem,
    issuerKey: authorityRootKeys.privateKey,
    notBefore,
    notAfter,
  });
  const signerKeys = generateEs256KeyPair();
  const signerPem = await issueCertificate({
    subject: 'CN=Test Approval Envelope Signer, O=City',
    publicKey: signerKeys.publicKey,
    issuerCertificatePem: issuingPem,
    issuerKey: issuingKeys.privateKey,
    notBefore,
    notAfter,
    serialHex: randomSerialHex(),
    usage: 'signing',
  });

  const deviceRootKeys = generateEs256KeyPair();
  const deviceRootPem = await createRootCa({
    subject: 'CN=Test Device Root, O=City',
    keyPair: deviceRootKeys,
    notBefore,
    notAfter,
  });
  const deviceIssuingKeys = generateEs256KeyPair();
  const deviceIssuingPem = await createIntermediateCa({
    subject: 'CN=Test Device CA, O=City',
    publicKey: deviceIssuingKeys.publicKey,
    issuerCertificatePem: deviceRootPem,
    issuerKey: deviceRootKeys.privateKey,
    notBefore,
    notAfter,
  });

  const tlsRootKeys = generateEs256KeyPair();
  const tlsRootPem = await createRootCa({
    subject: 'CN=Test TLS Root',
    keyPair: tlsRootKeys,
    notBefore,
    notAfter,
  });
  const serverKeys = generateEs256KeyPair();
  const serverPem = await issueCertificate({
    subject: 'CN=localhost',
    publicKey: serverKeys.publicKey,
    issuerCertificatePem: tlsRootPem,
    issuerKey: tlsRootKeys.privateKey,
    notBefore,
    notAfter,
    serialHex: randomSerialHex(),
    usage: 'server',
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
  });

  return {
    authorityRootPem,
    authorityIssuing: { certificatePem: issuingPem, key: issuingKeys.privateKey },
    authoritySigner: { certificatePem: signerPem, key: signerKeys.privateKey },
    deviceRootPem,
    deviceIssuing: { certificatePem: deviceIssuingPem, key: deviceIssuingKeys.privateKey },
    tlsRootPem,
    server: { certificatePem: serverPem, key: serverKeys.privateKey },
  };
}

/** `{"v":1, "body", "signature"}` with a CMS over the canonical JSON of body (DESIGN.md §4). */
export async function signEnvelope(
  pki: TestPki,
  body: unknown,
  signingTime: Date = new Date(),
  signer: SignerMaterial = pki.authoritySigner,
): Promise<{ v: 1; body: unknown; signature: string }> {
  const der = await cmsSign({
    content: canonicalBytes(body),
    signerCertificatePem: signer.certificatePem,
    signerKey: signer.key,
    signingTime,
    extraCertificatesPem: [pki.authorityIssuing.certificatePem],
  });
  return { v: 1, body, signature: Buffer.from(der).toString('base64') };
}

/** A device client certificate from the test device CA. */
export async function issueDeviceCertificate(
  pki: TestPki,
  deviceId: string,
  publicKey: KeyObject,
  notBefore: Date,
  notAfter: Date,
): Promise<string> {
  return issueCertificate({
    subject: `CN=device ${deviceId}, O=City`,
    publicKey,
    issuerCertificatePem: pki.deviceIssuing.certificatePem,
    issuerKey: pki.deviceIssuing.key,
    notBefore,
    notAfter,
    serialHex: randomSerialHex(),
    usage: 'client',
  });
}
