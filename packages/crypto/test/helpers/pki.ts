import type { KeyObject } from 'node:crypto';
import {
  createIntermediateCa,
  createRootCa,
  generateEs256KeyPair,
  issueCertificate,
} from '../../src/index.js';

/** Fixed dates: tests never read the clock. Everything is valid during 2030; AT is inside. */
export const NOT_BEFORE = new Date('2030-01-01T00:00:00Z');
export const NOT_AFTER = new Date('2031-01-01T00:00:00Z');
export const AT = new Date('2030-06-01T12:00:00Z');

export interface KeyPair {
  publicKey: KeyObject;
  privateKey: KeyObject;
}

export interface Pki {
  rootKeys: KeyPair;
  rootPem: string;
  issuingKeys: KeyPair;
  issuingPem: string;
}

/** A root CA and an issuing CA below it, as the platform runs them. */
export async function createPki(name = 'City'): Promise<Pki> {
  const rootKeys = generateEs256KeyPair();
  const rootPem = await createRootCa({
    subject: `CN=${name} Root CA, O=${name}`,
    keyPair: rootKeys,
    notBefore: NOT_BEFORE,
    notAfter: NOT_AFTER,
  });
  const issuingKeys = generateEs256KeyPair();
  const issuingPem = await createIntermediateCa({
    subject: `CN=${name} Issuing CA, O=${name}`,
    publicKey: issuingKeys.publicKey,
    issuerCertificatePem: rootPem,
    issuerKey: rootKeys.privateKey,
    notBefore: NOT_BEFORE,
    notAfter: NOT_AFTER,
    pathLength: 0,
  });
  return { rootKeys, rootPem, issuingKeys, issuingPem };
}

/** An end-entity certificate from the issuing CA, with a fresh key pair. */
export async function issueLeaf(
  pki: Pki,
  usage: 'client' | 'server' | 'signing',
  options: { subject?: string; serialHex?: string; dnsNames?: string[]; ipAddresses?: string[] } = {},
): Promise<{ keys: KeyPair; pem: string }> {
  const keys = generateEs256KeyPair();
  const pem = await issueCertificate({
    subject: options.subject ?? `CN=${usage} leaf, O=City`,
    publicKey: keys.publicKey,
    issuerCertificatePem: pki.issuingPem,
    issuerKey: pki.issuingKeys.privateKey,
    notBefore: NOT_BEFORE,
    notAfter: NOT_AFTER,
    serialHex: options.serialHex ?? '1001',
    usage,
    ...(options.dnsNames ? { dnsNames: options.dnsNames } : {}),
    ...(options.ipAddresses ? { ipAddresses: options.ipAddresses } : {}),
  });
  return { keys, pem };
}
