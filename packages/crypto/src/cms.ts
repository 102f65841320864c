import { createPublicKey, type KeyObject, sign as nodeSign } from 'node:crypto';
import * as asn1js from 'asn1js';
import { sha256 } from './bytes.js';
import {
  derSetOf,
  oid,
  TAG_CONTEXT_0,
  TAG_GENERALIZED_TIME,
  TAG_INTEGER,
  TAG_OCTET_STRING,
  TAG_SEQUENCE,
  TAG_SET,
  TAG_UTC_TIME,
  tlv,
} from './der.js';
import { CryptoError } from './errors.js';
import { parseCertificateForChain } from './x509.js';

// DESIGN.md §4 "CMS signature": SignedData, content attached (id-data), ECDSA P-256 with SHA-256, signed
// attributes contentType, signingTime, messageDigest, signer certificate included.
// `openssl cms -verify -binary -inform DER -CAfile authority-root.pem` must accept it.
//
// Why the signing side writes DER itself: pkijs 3 bundles its own asn1js 3.x while this package depends
// on asn1js 4, so asn1js objects cannot be handed to pkijs (different classes), and pkijs would wrap the
// content in a constructed (BER) OCTET STRING. A SignedData with one signer is a few fixed structures, so
// they are written here as exact DER and signed with node:crypto. Verifying a SignedData is @ooh/verify's
// (verifyCms), in Node and in the browser.

const OID_DATA = '1.2.840.113549.1.7.1';
const OID_SIGNED_DATA = '1.2.840.113549.1.7.2';
const OID_CONTENT_TYPE = '1.2.840.113549.1.9.3';
const OID_MESSAGE_DIGEST = '1.2.840.113549.1.9.4';
const OID_SIGNING_TIME = '1.2.840.113549.1.9.5';
const OID_SHA256 = '2.16.840.1.101.3.4.2.1';
const OID_ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';

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
