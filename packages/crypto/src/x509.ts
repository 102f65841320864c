import 'reflect-metadata';
import {
  createPublicKey,
  KeyObject,
  X509Certificate as NodeX509Certificate,
  randomBytes,
  verify as nodeVerify,
  webcrypto,
} from 'node:crypto';
import * as x509 from '@peculiar/x509';
import * as asn1js from 'asn1js';
import { base64Decode, base64Encode } from './bytes.js';
import { publicKeySpkiDer } from './es256.js';
import { CryptoError, type CryptoErrorCode } from './errors.js';

// @peculiar/x509 works on WebCrypto; node's implementation is the provider.
x509.cryptoProvider.set(webcrypto);

const ECDSA_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const ECDSA_SHA256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const OID_ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';

export interface CertificateInfo {
  /** Lowercase hex of the serial number, without a leading 00 sign octet. */
  serialHex: string;
  subject: string;
  issuer: string;
  notBefore: Date;
  notAfter: Date;
  /** base64 (standard, padded) of the SubjectPublicKeyInfo DER. */
  publicKeySpki: string;
  isCa: boolean;
  /** The certificate re-armoured as a single PEM block. */
  pem: string;
}

export interface CsrInfo {
  subject: string;
  publicKey: KeyObject;
  publicKeySpki: string;
  /** Whether the request's own signature verifies with the public key it carries. */
  signatureValid: boolean;
  der: Uint8Array;
}

export type CertificateUsage = 'client' | 'server' | 'signing';

// ---------------------------------------------------------------------------------------------------------
// Encodings

function toPem(der: Uint8Array, label: string): string {
  const body = base64Encode(der).replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${body}-----END ${label}-----\n`;
}

/** DER of one PEM block with the given label; the text must hold exactly that block. */
function fromPem(text: string, labels: readonly string[], code: CryptoErrorCode): Uint8Array {
  const match = /^-----BEGIN ([A-Z0-9 ]+)-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END ([A-Z0-9 ]+)-----$/.exec(
    text.trim(),
  );
  if (!match || match[1] !== match[3] || !labels.includes(match[1] ?? '')) {
    throw new CryptoError(code, `expected one PEM block labelled ${labels.join(' or ')}`);
  }
  try {
    return base64Decode((match[2] ?? '').replace(/[\r\n]/g, ''));
  } catch (cause) {
    throw new CryptoError(code, 'PEM body is not base64', { cause });
  }
}

/**
 * Refuses bytes that are not exactly one BER/DER element (truncated, or with trailing data). asn1js reports most
 * faults in its result but throws a plain Error for some (a GeneralizedTime whose text it cannot convert, as in the
 * base64 DER "GAA="), so a throw is refused with the same code: these bytes come from the network.
 */
function requireSingleElement(der: Uint8Array, code: CryptoErrorCode, what: string): asn1js.AsnType {
  let parsed: ReturnType<typeof asn1js.fromBER>;
  try {
    parsed = asn1js.fromBER(der);
  } catch (cause) {
    throw new CryptoError(code, `${what} is not readable DER`, { cause });
  }
  if (parsed.offset === -1 || parsed.offset !== der.byteLength || parsed.result.error) {
    throw new CryptoError(code, `${what} is not a single DER element`);
  }
  return parsed.result;
}

// ---------------------------------------------------------------------------------------------------------
// Certificates

interface ParsedCertificate {
  der: Buffer;
  pem: string;
  cert: x509.X509Certificate;
  node: NodeX509Certificate;
}

function certificateDer(pemOrDer: string | Uint8Array): Uint8Array {
  if (pemOrDer instanceof Uint8Array) return pemOrDer;
  if (typeof pemOrDer !== 'string')
    throw new CryptoError('invalid_certificate', 'expected PEM text or DER bytes');
  if (pemOrDer.trim().startsWith('-----')) return fromPem(pemOrDer, ['CERTIFICATE'], 'invalid_certificate');
  try {
    return base64Decode(pemOrDer.trim());
  } catch (cause) {
    throw new CryptoError('invalid_certificate', 'certificate is neither PEM nor base64 DER', { cause });
  }
}

function parseCertificate(pemOrDer: string | Uint8Array): ParsedCertificate {
  const bytes = certificateDer(pemOrDer);
  requireSingleElement(bytes, 'invalid_certificate', 'certificate');
  const der = Buffer.from(bytes);
  try {
    return {
      der,
      pem: toPem(der, 'CERTIFICATE'),
      cert: new x509.X509Certificate(der),
      node: new NodeX509Certificate(der),
    };
  } catch (cause) {
    throw new CryptoError('invalid_certificate', 'unreadable X.509 certificate', { cause });
  }
}

function basicConstraints(cert: x509.X509Certificate): x509.BasicConstraintsExtension | null {
  return cert.getExtension(x509.BasicConstraintsExtension);
}

function infoOf(parsed: ParsedCertificate): CertificateInfo {
  const { cert } = parsed;
  return {
    serialHex: cert.serialNumber.toLowerCase(),
    subject: cert.subject,
    issuer: cert.issuer,
    notBefore: cert.notBefore,
    notAfter: cert.notAfter,
    publicKeySpki: base64Encode(new Uint8Array(cert.publicKey.rawData)),
    isCa: basicConstraints(cert)?.ca === true,
    pem: parsed.pem,
  };
}

/** Reads a certificate given as PEM, base64 DER or DER bytes. CryptoError('invalid_certificate'). */
export function readCertificate(pemOrDer: string | Uint8Array): CertificateInfo {
  return infoOf(parseCertificate(pemOrDer));
}

/** Splits a PEM bundle into single CERTIFICATE blocks (other blocks are ignored), each ending in "\n". */
export function splitPemChain(pem: string): string[] {
  if (typeof pem !== 'string') return [];
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) => `${block.replace(/\r\n/g, '\n')}\n`);
}

/** 16 random bytes, first octet in 0x40..0x7f: positive, and the same 16 octets once DER-encoded. */
export function randomSerialHex(): string {
  const serial = randomBytes(16);
  serial[0] = ((serial[0] ?? 0) & 0x7f) | 0x40;
  return serial.toString('hex');
}

function normaliseSerial(serialHex: string | undefined): string {
  if (serialHex === undefined) return randomSerialHex();
  if (typeof serialHex !== 'string' || !/^(?:[0-9a-fA-F]{2}){1,20}$/.test(serialHex)) {
    throw new CryptoError('invalid_argument', 'serialHex must be 1 to 20 octets of hex');
  }
  // RFC 5280 §4.1.2.2: a positive integer of at most 20 octets; leading zero octets carry nothing.
  const trimmed = serialHex.toLowerCase().replace(/^(?:00)+/, '');
  if (trimmed === '') throw new CryptoError('invalid_argument', 'serial number must not be zero');
  if (trimmed.length === 40 && Number.parseInt(trimmed.slice(0, 2), 16) > 0x7f) {
    throw new CryptoError('invalid_argument', 'serial number would exceed 20 octets once encoded');
  }
  return trimmed;
}

function requireDates(notBefore: Date, notAfter: Date): void {
  if (!(notBefore instanceof Date) || !(notAfter instanceof Date)) {
    throw new CryptoError('invalid_argument', 'notBefore and notAfter must be Dates');
  }
  if (Number.isNaN(notBefore.getTime()) || Number.isNaN(notAfter.getTime()) || notAfter < notBefore) {
    throw new CryptoError('invalid_argument', 'notAfter must be a valid date not before notBefore');
  }
}

function requireP256Key(key: KeyObject, type: 'public' | 'private' | 'any'): void {
  if (!(key instanceof KeyObject) || key.type === 'secret' || (type !== 'any' && key.type !== type)) {
    throw new CryptoError(
      'invalid_key',
      `expected a ${type === 'any' ? 'public or private' : type} KeyObject`,
    );
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new CryptoError('unsupported_algorithm', 'only ECDSA P-256 keys are supported');
  }
}

async function toSigningKey(key: KeyObject): Promise<webcrypto.CryptoKey> {
  requireP256Key(key, 'private');
  const pkcs8 = key.export({ format: 'der', type: 'pkcs8' });
  return await webcrypto.subtle.importKey('pkcs8', pkcs8, ECDSA_P256, false, ['sign']);
}

async function toWebPublicKey(key: KeyObject): Promise<webcrypto.CryptoKey> {
  requireP256Key(key, 'any');
  const spki = publicKeySpkiDer(key);
  return await webcrypto.subtle.importKey('spki', spki, ECDSA_P256, true, ['verify']);
}

function parseName(subject: string): x509.Name {
  if (typeof subject !== 'string' || subject.trim() === '') {
    throw new CryptoError(
      'invalid_argument',
      'subject must be a non-empty name such as "CN=device 1, O=City"',
    );
  }
  try {
    return new x509.Name(subject);
  } catch (cause) {
    throw new CryptoError('invalid_argument', `unreadable subject name "${subject}"`, { cause });
  }
}

/** The issuer certificate, checked to be a CA whose key is `issuerKey`. */
function requireIssuer(issuerCertificatePem: string, issuerKey: KeyObject): ParsedCertificate {
  const issuer = parseCertificate(issuerCertificatePem);
  if (basicConstraints(issuer.cert)?.ca !== true) {
    throw new CryptoError('invalid_certificate', 'the issuer certificate is not a CA');
  }
  requireP256Key(issuerKey, 'private');
  const issuerSpki = Buffer.from(issuer.cert.publicKey.rawData);
  if (!issuerSpki.equals(publicKeySpkiDer(issuerKey))) {
    throw new CryptoError('invalid_key', 'issuerKey does not match the issuer certificate');
  }
  return issuer;
}

async function authorityKeyIdentifier(
  issuer: ParsedCertificate,
): Promise<x509.AuthorityKeyIdentifierExtension> {
  const ski = issuer.cert.getExtension(x509.SubjectKeyIdentifierExtension);
  if (ski) return new x509.AuthorityKeyIdentifierExtension(ski.keyId);
  return x509.AuthorityKeyIdentifierExtension.create(issuer.cert.publicKey);
}

function certificatePem(cert: x509.X509Certificate): string {
  return toPem(new Uint8Array(cert.rawData), 'CERTIFICATE');
}

/** A self-signed root CA certificate (basicConstraints CA, keyCertSign + cRLSign), PEM. */
export async function createRootCa(args: {
  subject: string;
  keyPair: { publicKey: KeyObject; privateKey: KeyObject };
  notBefore: Date;
  notAfter: Date;
  serialHex?: string;
}): Promise<string> {
  requireDates(args.notBefore, args.notAfter);
  const name = parseName(args.subject);
  const publicKey = await toWebPublicKey(args.keyPair.publicKey);
  const privateKey = await toSigningKey(args.keyPair.privateKey);
  if (
    !Buffer.from(publicKeySpkiDer(args.keyPair.publicKey)).equals(publicKeySpkiDer(args.keyPair.privateKey))
  ) {
    throw new CryptoError('invalid_key', 'publicKey and privateKey are not one pair');
  }
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: normaliseSerial(args.serialHex),
    name,
    notBefore: args.notBefore,
    notAfter: args.notAfter,
    signingAlgorithm: ECDSA_SHA256,
    keys: { publicKey, privateKey },
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
    ],
  });
  return certificatePem(cert);
}

async function issue(args: {
  subject: string;
  publicKey: KeyObject;
  issuerCertificatePem: string;
  issuerKey: KeyObject;
  notBefore: Date;
  notAfter: Date;
  serialHex: string | undefined;
  extensions: x509.Extension[];
}): Promise<string> {
  requireDates(args.notBefore, args.notAfter);
  const name = parseName(args.subject);
  const issuer = requireIssuer(args.issuerCertificatePem, args.issuerKey);
  const publicKey = await toWebPublicKey(args.publicKey);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: normaliseSerial(args.serialHex),
    subject: name,
    // The issuer's subject as it is encoded in its certificate, so name matching is exact.
    issuer: issuer.cert.subjectName,
    notBefore: args.notBefore,
    notAfter: args.notAfter,
    signingAlgorithm: ECDSA_SHA256,
    publicKey,
    signingKey: await toSigningKey(args.issuerKey),
    extensions: [
      ...args.extensions,
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
      await authorityKeyIdentifier(issuer),
    ],
  });
  return certificatePem(cert);
}

/** An intermediate (issuing) CA certificate signed by `issuerKey`, PEM. */
export async function createIntermediateCa(args: {
  subject: string;
  publicKey: KeyObject;
  issuerCertificatePem: string;
  issuerKey: KeyObject;
  notBefore: Date;
  notAfter: Date;
  serialHex?: string;
  pathLength?: number;
}): Promise<string> {
  if (args.pathLength !== undefined && (!Number.isSafeInteger(args.pathLength) || args.pathLength < 0)) {
    throw new CryptoError('invalid_argument', 'pathLength must be a non-negative integer');
  }
  return issue({
    ...args,
    serialHex: args.serialHex,
    extensions: [
      new x509.BasicConstraintsExtension(true, args.pathLength, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
}

/**
 * An end-entity certificate for `publicKey`, PEM. Usage 'client': digitalSignature + extKeyUsage
 * clientAuth; 'server': digitalSignature + extKeyUsage serverAuth + subjectAltName from dnsNames and
 * ipAddresses; 'signing': digitalSignature only (CMS signatures of envelopes and seals).
 */
export async function issueCertificate(args: {
  subject: string;
  publicKey: KeyObject;
  issuerCertificatePem: string;
  issuerKey: KeyObject;
  notBefore: Date;
  notAfter: Date;
  serialHex: string;
  usage: CertificateUsage;
  dnsNames?: string[];
  ipAddresses?: string[];
}): Promise<string> {
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
  ];
  switch (args.usage) {
    case 'client':
      extensions.push(new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth], false));
      break;
    case 'server':
      extensions.push(new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false));
      break;
    case 'signing':
      break;
    default:
      throw new CryptoError('invalid_argument', `unknown certificate usage ${String(args.usage)}`);
  }
  const names: x509.JsonGeneralName[] = [
    ...(args.dnsNames ?? []).map((value): x509.JsonGeneralName => ({ type: 'dns', value })),
    ...(args.ipAddresses ?? []).map((value): x509.JsonGeneralName => ({ type: 'ip', value })),
  ];
  if (names.some((name) => typeof name.value !== 'string' || name.value === '')) {
    throw new CryptoError('invalid_argument', 'dnsNames and ipAddresses must be non-empty strings');
  }
  if (names.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(names, false));
  if (args.serialHex === undefined) throw new CryptoError('invalid_argument', 'serialHex is required');
  return issue({ ...args, extensions });
}

// ---------------------------------------------------------------------------------------------------------
// Certification requests (PKCS #10)

/** A PKCS #10 request signed with the key pair's private key (ECDSA with SHA-256), PEM. */
export async function createCsr(args: {
  subject: string;
  keyPair: { publicKey: KeyObject; privateKey: KeyObject };
}): Promise<string> {
  const name = parseName(args.subject);
  const publicKey = await toWebPublicKey(args.keyPair.publicKey);
  const privateKey = await toSigningKey(args.keyPair.privateKey);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name,
    keys: { publicKey, privateKey },
    signingAlgorithm: ECDSA_SHA256,
  });
  return toPem(new Uint8Array(csr.rawData), 'CERTIFICATE REQUEST');
}

function csrDer(pemOrBase64Der: string): Uint8Array {
  if (typeof pemOrBase64Der !== 'string') throw new CryptoError('invalid_csr', 'CSR must be a string');
  const text = pemOrBase64Der.trim();
  if (text.startsWith('-----')) {
    return fromPem(text, ['CERTIFICATE REQUEST', 'NEW CERTIFICATE REQUEST'], 'invalid_csr');
  }
  try {
    return base64Decode(text);
  } catch (cause) {
    throw new CryptoError('invalid_csr', 'CSR is neither PEM nor base64 DER', { cause });
  }
}

/**
 * Reads a PKCS #10 request (spec /d/v1/renew: "PEM or base64 of DER; ECDSA P-256"). Throws
 * CryptoError('invalid_csr') when unreadable, ('unsupported_algorithm') for a key other than P-256 or a
 * signature algorithm other than ecdsa-with-SHA256. signatureValid reports the request's self-signature.
 */
export async function parseCsr(pemOrBase64Der: string): Promise<CsrInfo> {
  const der = csrDer(pemOrBase64Der);
  const outer = requireSingleElement(der, 'invalid_csr', 'CSR');
  const parts = outer instanceof asn1js.Sequence ? outer.valueBlock.value : [];
  const [info, algorithm, signature] = parts;
  if (
    parts.length !== 3 ||
    !(info instanceof asn1js.Sequence) ||
    !(algorithm instanceof asn1js.Sequence) ||
    !(signature instanceof asn1js.BitString)
  ) {
    throw new CryptoError('invalid_csr', 'not a CertificationRequest');
  }
  let csr: x509.Pkcs10CertificateRequest;
  let subject: string;
  let spki: Uint8Array;
  try {
    csr = new x509.Pkcs10CertificateRequest(der);
    subject = csr.subject;
    spki = new Uint8Array(csr.publicKey.rawData);
  } catch (cause) {
    throw new CryptoError('invalid_csr', 'unreadable CertificationRequest', { cause });
  }
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
  } catch (cause) {
    throw new CryptoError('unsupported_algorithm', 'the CSR public key is not a supported key', { cause });
  }
  if (publicKey.asymmetricKeyType !== 'ec' || publicKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new CryptoError('unsupported_algorithm', 'the CSR public key is not ECDSA P-256');
  }
  const algorithmOid = algorithm.valueBlock.value[0];
  if (
    !(algorithmOid instanceof asn1js.ObjectIdentifier) ||
    algorithmOid.getValue() !== OID_ECDSA_WITH_SHA256
  ) {
    throw new CryptoError('unsupported_algorithm', 'the CSR is not signed with ecdsa-with-SHA256');
  }
  let signatureValid = false;
  if (signature.valueBlock.unusedBits === 0) {
    try {
      signatureValid = nodeVerify(
        'sha256',
        info.valueBeforeDecodeView,
        { key: publicKey, dsaEncoding: 'der' },
        signature.valueBlock.valueHexView,
      );
    } catch {
      signatureValid = false;
    }
  }
  return {
    subject,
    publicKey,
    publicKeySpki: base64Encode(spki),
    signatureValid,
    der: new Uint8Array(der),
  };
}

// ---------------------------------------------------------------------------------------------------------
// Reading (whether a chain verifies is @ooh/verify's verifyChain)

/** Parses a certificate for this package's signing and token reading (internal). */
export function parseCertificateForChain(pemOrDer: string | Uint8Array): ParsedCertificate {
  return parseCertificate(pemOrDer);
}

export type { ParsedCertificate };

/** Lowercase hex of a certificate's SHA-256 thumbprint over its DER. */
export function certificateFingerprint(pemOrDer: string | Uint8Array): string {
  const parsed = parseCertificate(pemOrDer);
  return parsed.node.fingerprint256.replace(/:/g, '').toLowerCase();
}
