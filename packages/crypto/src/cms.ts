import { createPublicKey, type KeyObject, verify as nodeVerify, sign as nodeSign } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { bytesEqual, sha256 } from './bytes.js';
import {
  CONTEXT,
  certificateDer,
  derSetOf,
  isAsn,
  objectIdentifierValue,
  octetStringValue,
  oid,
  Refusal,
  refuse,
  singleAttributeValue,
  TAG_CONTEXT_0,
  TAG_GENERALIZED_TIME,
  TAG_INTEGER,
  TAG_OCTET_STRING,
  TAG_SEQUENCE,
  TAG_SET,
  TAG_UTC_TIME,
  tlv,
  UNIVERSAL,
} from './der.js';
import { CryptoError } from './errors.js';
import {
  keyUsageAllowsSigning,
  type ParsedCertificate,
  parseCertificateForChain,
  verifyParsedChain,
} from './x509.js';

// DESIGN.md §4 "CMS signature": SignedData, content attached (id-data), ECDSA P-256 with SHA-256, signed
// attributes contentType, signingTime, messageDigest, signer certificate included.
// `openssl cms -verify -binary -inform DER -CAfile authority-root.pem` must accept it.
//
// Why the signing side writes DER itself: pkijs 3 bundles its own asn1js 3.x while this package depends
// on asn1js 4, so asn1js objects cannot be handed to pkijs (different classes), and pkijs would wrap the
// content in a constructed (BER) OCTET STRING. A SignedData with one signer is a few fixed structures, so
// they are written here as exact DER and signed with node:crypto. Reading uses pkijs (schema-checked
// parsing of whatever BER another signer such as OpenSSL produced), with checks done on the parsed values.

const OID_DATA = '1.2.840.113549.1.7.1';
const OID_SIGNED_DATA = '1.2.840.113549.1.7.2';
const OID_CONTENT_TYPE = '1.2.840.113549.1.9.3';
const OID_MESSAGE_DIGEST = '1.2.840.113549.1.9.4';
const OID_SIGNING_TIME = '1.2.840.113549.1.9.5';
const OID_SHA256 = '2.16.840.1.101.3.4.2.1';
const OID_ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';
const OID_EC_PUBLIC_KEY = '1.2.840.10045.2.1';
const OID_SUBJECT_KEY_IDENTIFIER = '2.5.29.14';

export type CmsVerifyResult =
  | { ok: true; content: Uint8Array; signerCertificatePem: string; signingTime: Date | null }
  | { ok: false; reason: string };

// ---------------------------------------------------------------------------------------------------------
// DER writing (the shared writer: der.ts)

/** AlgorithmIdentifier without parameters (RFC 5754 §2 for SHA-256, RFC 5758 §3.2 for ECDSA). */
function algorithm(dotted: string): Uint8Array {
  return tlv(TAG_SEQUENCE, oid(dotted));
}

function attribute(type: string, value: Uint8Array): Uint8Array {
  return tlv(TAG_SEQUENCE, oid(type), tlv(TAG_SET, value));
}

/** RFC 5652 §11.3: UTCTime for 1950..2049, GeneralizedTime otherwise; whole seconds, Z. */
function signingTimeValue(signingTime: Date): Uint8Array {
  const iso = signingTime.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-T:]/g, '');
  const year = signingTime.getUTCFullYear();
  if (year >= 1950 && year < 2050) return tlv(TAG_UTC_TIME, Buffer.from(`${digits.slice(2)}Z`, 'latin1'));
  return tlv(TAG_GENERALIZED_TIME, Buffer.from(`${digits}Z`, 'latin1'));
}

/** The issuer Name and serialNumber of a certificate, as encoded in it (for IssuerAndSerialNumber). */
function issuerAndSerialNumber(certificateDer: Uint8Array): Uint8Array {
  const parsed = asn1js.fromBER(certificateDer);
  const tbs = parsed.result instanceof asn1js.Sequence ? parsed.result.valueBlock.value[0] : undefined;
  const fields = tbs instanceof asn1js.Sequence ? tbs.valueBlock.value : [];
  // tbsCertificate: [0] version (optional), serialNumber, signature, issuer, ...
  const offset = fields[0]?.idBlock.tagClass === 3 ? 1 : 0;
  const serial = fields[offset];
  const issuer = fields[offset + 2];
  if (!serial || serial.idBlock.tagNumber !== TAG_INTEGER || !issuer) {
    throw new CryptoError(
      'invalid_certificate',
      'signer certificate has no readable issuer and serial number',
    );
  }
  return tlv(TAG_SEQUENCE, issuer.valueBeforeDecodeView, serial.valueBeforeDecodeView);
}

function requireSigningKey(key: KeyObject): void {
  if (
    key?.type !== 'private' ||
    key.asymmetricKeyType !== 'ec' ||
    key.asymmetricKeyDetails?.namedCurve !== 'prime256v1'
  ) {
    throw new CryptoError('invalid_key', 'signerKey must be an ECDSA P-256 private key');
  }
}

/**
 * CMS SignedData (DER ContentInfo) over `content`, attached as id-data, signed with ECDSA P-256/SHA-256,
 * signed attributes contentType, signingTime and messageDigest; the signer certificate and any extra
 * certificates (e.g. the issuing CA) are included.
 */
export async function cmsSign(args: {
  content: Uint8Array;
  signerCertificatePem: string;
  signerKey: KeyObject;
  signingTime: Date;
  extraCertificatesPem?: string[];
}): Promise<Uint8Array> {
  if (!(args.content instanceof Uint8Array))
    throw new CryptoError('invalid_argument', 'content must be a Uint8Array');
  if (!(args.signingTime instanceof Date) || Number.isNaN(args.signingTime.getTime())) {
    throw new CryptoError('invalid_argument', 'signingTime must be a valid Date');
  }
  requireSigningKey(args.signerKey);
  const signer = parseCertificateForChain(args.signerCertificatePem);
  const signerSpki = signer.node.publicKey.export({ format: 'der', type: 'spki' });
  if (!signerSpki.equals(createPublicKey(args.signerKey).export({ format: 'der', type: 'spki' }))) {
    throw new CryptoError('invalid_key', 'signerKey does not match the signer certificate');
  }
  const extras = (args.extraCertificatesPem ?? []).map((pem) => parseCertificateForChain(pem));
  const certificates = [signer.der, ...extras.map((extra) => extra.der)].filter(
    (der, index, all) => all.findIndex((other) => other.equals(der)) === index,
  );

  const signedAttributes = [
    attribute(OID_CONTENT_TYPE, oid(OID_DATA)),
    attribute(OID_SIGNING_TIME, signingTimeValue(args.signingTime)),
    attribute(OID_MESSAGE_DIGEST, tlv(TAG_OCTET_STRING, sha256(args.content))),
  ];
  // RFC 5652 §5.4: the signature is over the DER of the attributes with the SET OF tag, and they are
  // stored with the [0] IMPLICIT tag in SignerInfo.
  const signature = nodeSign('sha256', derSetOf(TAG_SET, signedAttributes), {
    key: args.signerKey,
    dsaEncoding: 'der',
  });
  const signerInfo = tlv(
    TAG_SEQUENCE,
    tlv(TAG_INTEGER, Uint8Array.of(1)),
    issuerAndSerialNumber(signer.der),
    algorithm(OID_SHA256),
    derSetOf(TAG_CONTEXT_0, signedAttributes),
    algorithm(OID_ECDSA_WITH_SHA256),
    tlv(TAG_OCTET_STRING, signature),
  );
  const signedData = tlv(
    TAG_SEQUENCE,
    tlv(TAG_INTEGER, Uint8Array.of(1)),
    derSetOf(TAG_SET, [algorithm(OID_SHA256)]),
    tlv(TAG_SEQUENCE, oid(OID_DATA), tlv(TAG_CONTEXT_0, tlv(TAG_OCTET_STRING, args.content))),
    derSetOf(TAG_CONTEXT_0, certificates),
    derSetOf(TAG_SET, [signerInfo]),
  );
  const contentInfo = tlv(TAG_SEQUENCE, oid(OID_SIGNED_DATA), tlv(TAG_CONTEXT_0, signedData));
  return new Uint8Array(contentInfo);
}

// ---------------------------------------------------------------------------------------------------------
// Verification

function timeValue(value: unknown): Date | null {
  if (!isAsn(value, UNIVERSAL, TAG_UTC_TIME) && !isAsn(value, UNIVERSAL, TAG_GENERALIZED_TIME)) return null;
  const toDate = (value as { toDate?: () => Date }).toDate;
  if (typeof toDate !== 'function') return null;
  const date = toDate.call(value);
  return date instanceof Date && !Number.isNaN(date.getTime()) ? date : null;
}

function parseSignedData(der: Uint8Array): pkijs.SignedData {
  // This package's asn1js only checks that the input is one complete element (no trailing bytes).
  const outer = asn1js.fromBER(der);
  if (outer.offset === -1 || outer.offset !== der.byteLength || outer.result.error) {
    refuse('not a single DER element');
  }
  let contentInfo: pkijs.ContentInfo;
  try {
    contentInfo = pkijs.ContentInfo.fromBER(der);
  } catch {
    return refuse('not a CMS ContentInfo');
  }
  if (contentInfo.contentType !== OID_SIGNED_DATA) refuse('ContentInfo does not hold SignedData');
  try {
    return new pkijs.SignedData({ schema: contentInfo.content });
  } catch {
    return refuse('unreadable SignedData');
  }
}

function attachedContent(signedData: pkijs.SignedData): Uint8Array {
  const { eContentType, eContent } = signedData.encapContentInfo;
  if (eContentType !== OID_DATA) refuse('encapsulated content is not id-data');
  const content = eContent === undefined ? null : octetStringValue(eContent);
  if (content === null) refuse('content is not attached');
  return content;
}

function signerCertificateOf(signedData: pkijs.SignedData, signerInfo: pkijs.SignerInfo): ParsedCertificate {
  const certificates = (signedData.certificates ?? []).filter(
    (item): item is pkijs.Certificate => item instanceof pkijs.Certificate,
  );
  const { sid } = signerInfo;
  const match = certificates.find((certificate) => {
    if (sid instanceof pkijs.IssuerAndSerialNumber) {
      return certificate.issuer.isEqual(sid.issuer) && certificate.serialNumber.isEqual(sid.serialNumber);
    }
    // [0] SubjectKeyIdentifier
    const wanted = isAsn(sid, CONTEXT, 0) ? sid.valueBlock.valueHexView : undefined;
    const extension = certificate.extensions?.find((item) => item.extnID === OID_SUBJECT_KEY_IDENTIFIER);
    const keyId = octetStringValue(extension?.parsedValue);
    return wanted !== undefined && keyId !== null && bytesEqual(wanted, keyId);
  });
  if (!match) refuse('signer certificate not included');
  try {
    return parseCertificateForChain(certificateDer(match));
  } catch {
    return refuse('unreadable signer certificate');
  }
}

async function verifyOrRefuse(
  der: Uint8Array,
  options: { trustedRootsPem: string[]; intermediatesPem?: string[]; at?: Date },
): Promise<CmsVerifyResult> {
  if (!(der instanceof Uint8Array)) refuse('input is not bytes');
  if (typeof options !== 'object' || options === null || !Array.isArray(options.trustedRootsPem)) {
    refuse('trustedRootsPem must be an array of PEM');
  }
  if (options.at !== undefined && (!(options.at instanceof Date) || Number.isNaN(options.at.getTime()))) {
    refuse('at must be a valid Date');
  }
  const signedData = parseSignedData(der);
  const content = attachedContent(signedData);
  if (signedData.signerInfos.length !== 1) refuse('exactly one signer expected');
  const signerInfo = signedData.signerInfos[0]!;

  if (signerInfo.digestAlgorithm.algorithmId !== OID_SHA256) refuse('digest algorithm is not SHA-256');
  const signatureAlgorithm = signerInfo.signatureAlgorithm.algorithmId;
  // OpenSSL writes ecdsa-with-SHA256; some signers write the bare key algorithm (RFC 5753 allows both).
  if (signatureAlgorithm !== OID_ECDSA_WITH_SHA256 && signatureAlgorithm !== OID_EC_PUBLIC_KEY) {
    refuse('signature algorithm is not ECDSA with SHA-256');
  }
  const signedAttrs = signerInfo.signedAttrs;
  if (!signedAttrs || signedAttrs.attributes.length === 0) refuse('signed attributes missing');
  const attributes = signedAttrs.attributes;

  const contentType = singleAttributeValue(attributes, OID_CONTENT_TYPE, 'contentType');
  if (objectIdentifierValue(contentType) !== OID_DATA) refuse('contentType attribute is not id-data');
  const messageDigest = octetStringValue(
    singleAttributeValue(attributes, OID_MESSAGE_DIGEST, 'messageDigest'),
  );
  if (messageDigest === null) refuse('messageDigest attribute is not an OCTET STRING');
  if (!bytesEqual(messageDigest, sha256(content))) refuse('messageDigest does not match the content');
  let signingTime: Date | null = null;
  if (attributes.some((item) => item.type === OID_SIGNING_TIME)) {
    signingTime = timeValue(singleAttributeValue(attributes, OID_SIGNING_TIME, 'signingTime'));
    if (signingTime === null) refuse('signingTime is neither a UTCTime nor a GeneralizedTime');
  }

  const signer = signerCertificateOf(signedData, signerInfo);
  const signerKey = signer.node.publicKey;
  if (signerKey.asymmetricKeyType !== 'ec' || signerKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    refuse('signer key is not ECDSA P-256');
  }
  if (!keyUsageAllowsSigning(signer)) refuse('signer certificate key usage does not allow signatures');

  // RFC 5652 §5.4: the signature covers the DER of the signed attributes with an explicit SET OF tag.
  const signedBytes = new Uint8Array(signedAttrs.encodedValue.slice(0));
  if (signedBytes.byteLength === 0) refuse('signed attributes missing');
  signedBytes[0] = 0x31;
  let signatureOk = false;
  try {
    signatureOk = nodeVerify(
      'sha256',
      signedBytes,
      { key: signerKey, dsaEncoding: 'der' },
      signerInfo.signature.valueBlock.valueHexView,
    );
  } catch {
    signatureOk = false;
  }
  if (!signatureOk) refuse('signature does not verify');

  const embedded: ParsedCertificate[] = [];
  for (const item of signedData.certificates ?? []) {
    if (!(item instanceof pkijs.Certificate)) continue;
    try {
      const parsed = parseCertificateForChain(certificateDer(item));
      if (!parsed.der.equals(signer.der)) embedded.push(parsed);
    } catch {
      // An unreadable extra certificate cannot help build a path; the path check decides.
    }
  }
  const chain = verifyParsedChain({
    leaf: signer,
    pool: embedded,
    rootsPem: options.trustedRootsPem,
    intermediatesPem: options.intermediatesPem,
    at: options.at ?? null,
  });
  if (!chain.ok) refuse(`signer certificate: ${chain.reason}`);
  return { ok: true, content, signerCertificatePem: signer.pem, signingTime };
}

/**
 * Verifies a DER CMS SignedData with attached id-data content: the ECDSA P-256/SHA-256 signature over the
 * signed attributes, contentType and messageDigest, and the signer certificate's chain to one of
 * `trustedRootsPem` through `intermediatesPem` and the embedded certificates; every certificate valid at
 * `at` when given (no date check otherwise: this package has no clock). Never throws on bad input.
 */
export async function cmsVerify(
  der: Uint8Array,
  options: { trustedRootsPem: string[]; intermediatesPem?: string[]; at?: Date },
): Promise<CmsVerifyResult> {
  try {
    return await verifyOrRefuse(der, options);
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, reason: error.message };
    return { ok: false, reason: `malformed CMS: ${error instanceof Error ? error.message : String(error)}` };
  }
}
