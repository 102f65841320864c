import { createHash, randomBytes, verify as nodeVerify } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { bytesEqual, hexEncode } from './bytes.js';
import {
  certificateDer,
  isAsn,
  objectIdentifierValue,
  octetStringValue,
  oid,
  Refusal,
  refuse,
  singleAttributeValue,
  TAG_BOOLEAN,
  TAG_INTEGER,
  TAG_NULL,
  TAG_OCTET_STRING,
  TAG_SEQUENCE,
  tlv,
  unsignedInteger,
} from './der.js';
import { CryptoError } from './errors.js';
import {
  keyUsageAllowsSigning,
  type ParsedCertificate,
  parseCertificateForChain,
  verifyParsedChain,
} from './x509.js';

// RFC 3161 (Time-Stamp Protocol) with the ESS signing-certificate attributes of RFC 2634 / RFC 5035 (RFC 5816):
// the request a client sends, the response a time-stamping authority (TSA) answers, and the check of the token in
// it. Like cms.ts, the request is written as exact DER here (pkijs bundles its own asn1js, whose objects cannot be
// mixed with this package's), and reading uses pkijs with checks on the parsed values.

const OID_SIGNED_DATA = '1.2.840.113549.1.7.2';
/** RFC 3161 §2.4.2: id-ct-TSTInfo, the content type of the token's SignedData. */
const OID_TST_INFO = '1.2.840.113549.1.9.16.1.4';
const OID_CONTENT_TYPE = '1.2.840.113549.1.9.3';
const OID_MESSAGE_DIGEST = '1.2.840.113549.1.9.4';
/** RFC 2634 §5.4 SigningCertificate (ESSCertID, SHA-1) and RFC 5035 §3 SigningCertificateV2 (ESSCertIDv2). */
const OID_SIGNING_CERTIFICATE = '1.2.840.113549.1.9.16.2.12';
const OID_SIGNING_CERTIFICATE_V2 = '1.2.840.113549.1.9.16.2.47';
/** RFC 3161 §2.3: id-kp-timeStamping. */
const OID_KP_TIME_STAMPING = '1.3.6.1.5.5.7.3.8';
const OID_EXTENDED_KEY_USAGE = '2.5.29.37';

const HASHES: Record<string, 'sha1' | 'sha256' | 'sha384' | 'sha512'> = {
  '1.3.14.3.2.26': 'sha1',
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};
const OID_SHA256 = '2.16.840.1.101.3.4.2.1';

/** Signature algorithms of a SignerInfo: the key type they need and the hash they fix, if any. */
const SIGNATURES: Record<string, { key: 'ec' | 'rsa' | 'ed25519'; hash: string | null }> = {
  '1.2.840.10045.2.1': { key: 'ec', hash: null }, // id-ecPublicKey (RFC 5753 allows it here)
  '1.2.840.10045.4.3.2': { key: 'ec', hash: 'sha256' },
  '1.2.840.10045.4.3.3': { key: 'ec', hash: 'sha384' },
  '1.2.840.10045.4.3.4': { key: 'ec', hash: 'sha512' },
  '1.2.840.113549.1.1.1': { key: 'rsa', hash: null }, // rsaEncryption (RFC 3370 §3.2)
  '1.2.840.113549.1.1.11': { key: 'rsa', hash: 'sha256' },
  '1.2.840.113549.1.1.12': { key: 'rsa', hash: 'sha384' },
  '1.2.840.113549.1.1.13': { key: 'rsa', hash: 'sha512' },
  '1.3.101.112': { key: 'ed25519', hash: null },
};

/** Big-endian octets of a DER INTEGER's value without leading zero octets, as lowercase hex ("0" for zero). */
function integerHex(octets: Uint8Array): string {
  const hex = hexEncode(octets).replace(/^(?:00)+/, '');
  return hex === '' ? '0' : hex;
}

// ---------------------------------------------------------------------------------------------------------
// Request

export interface TimeStampRequest {
  /** The DER TimeStampReq, sent as application/timestamp-query (RFC 3161 §3.4). */
  der: Uint8Array;
  /** The nonce asked for, lowercase hex without leading zeros: the token must carry it. */
  nonceHex: string;
}

/**
 * RFC 3161 §2.4.1 TimeStampReq v1 over a SHA-256 digest: messageImprint {sha256, digest}, a random 64-bit nonce
 * (or the one given), certReq (default true: the TSA puts its certificate in the token), an optional policy OID.
 */
export function createTimeStampRequest(args: {
  digest: Uint8Array;
  nonce?: Uint8Array;
  certReq?: boolean;
  policy?: string;
}): TimeStampRequest {
  if (!(args.digest instanceof Uint8Array) || args.digest.byteLength !== 32) {
    throw new CryptoError('invalid_length', 'digest must be the 32 bytes of a SHA-256 digest');
  }
  let nonce = args.nonce;
  if (nonce === undefined) {
    nonce = randomBytes(8);
    // Never zero, and never a leading zero octet that the INTEGER would drop.
    nonce[0] = ((nonce[0] ?? 0) & 0x7f) | 0x40;
  }
  if (!(nonce instanceof Uint8Array) || nonce.byteLength === 0 || nonce.byteLength > 32) {
    throw new CryptoError('invalid_argument', 'nonce must be 1 to 32 bytes');
  }
  if (args.policy !== undefined && !/^[0-2](\.(0|[1-9][0-9]*))+$/.test(args.policy)) {
    throw new CryptoError('invalid_argument', 'policy must be a dotted object identifier');
  }
  // AlgorithmIdentifier with NULL parameters, as OpenSSL and most TSAs write it.
  const messageImprint = tlv(
    TAG_SEQUENCE,
    tlv(TAG_SEQUENCE, oid(OID_SHA256), tlv(TAG_NULL)),
    tlv(TAG_OCTET_STRING, args.digest),
  );
  const parts = [tlv(TAG_INTEGER, Uint8Array.of(1)), messageImprint];
  if (args.policy !== undefined) parts.push(oid(args.policy));
  parts.push(unsignedInteger(nonce));
  // certReq BOOLEAN DEFAULT FALSE: DER leaves a default value out.
  if (args.certReq !== false) parts.push(tlv(TAG_BOOLEAN, Uint8Array.of(0xff)));
  return { der: new Uint8Array(tlv(TAG_SEQUENCE, ...parts)), nonceHex: integerHex(nonce) };
}

// ---------------------------------------------------------------------------------------------------------
// Response

/** RFC 3161 §2.4.2 PKIStatus names. */
const STATUS_NAMES = [
  'granted',
  'grantedWithMods',
  'rejection',
  'waiting',
  'revocationWarning',
  'revocationNotification',
];
/** RFC 3161 §2.4.2 PKIFailureInfo bit names. */
const FAILURE_BITS: Record<number, string> = {
  0: 'badAlg',
  2: 'badRequest',
  5: 'badDataFormat',
  14: 'timeNotAvailable',
  15: 'unacceptedPolicy',
  16: 'unacceptedExtension',
  17: 'addInfoNotAvailable',
  25: 'systemFailure',
};

export type TimeStampResponse =
  | { ok: true; token: Uint8Array; status: 'granted' | 'grantedWithMods' }
  | { ok: false; reason: string; status: string | null };

function single(der: Uint8Array): asn1js.AsnType | null {
  const parsed = asn1js.fromBER(der);
  if (parsed.offset === -1 || parsed.offset !== der.byteLength || parsed.result.error) return null;
  return parsed.result;
}

/**
 * Reads a DER TimeStampResp (RFC 3161 §2.4.2): the status, and for a granted one the token (a DER ContentInfo,
 * the exact bytes the TSA sent). The token is not checked here: verifyTimeStampToken does that. Never throws.
 */
export function parseTimeStampResponse(der: Uint8Array): TimeStampResponse {
  if (!(der instanceof Uint8Array)) return { ok: false, reason: 'the response is not bytes', status: null };
  const outer = single(der);
  const parts = outer instanceof asn1js.Sequence ? outer.valueBlock.value : [];
  const statusInfo = parts[0];
  if (parts.length < 1 || parts.length > 2 || !(statusInfo instanceof asn1js.Sequence)) {
    return { ok: false, reason: 'not a TimeStampResp', status: null };
  }
  const [statusValue, ...rest] = statusInfo.valueBlock.value;
  if (!(statusValue instanceof asn1js.Integer)) {
    return { ok: false, reason: 'TimeStampResp status is not an INTEGER', status: null };
  }
  const code = statusValue.valueBlock.valueDec;
  const status = STATUS_NAMES[code] ?? `status ${code}`;
  const texts: string[] = [];
  const failures: string[] = [];
  for (const item of rest) {
    if (item instanceof asn1js.Sequence) {
      for (const text of item.valueBlock.value) {
        if (text instanceof asn1js.Utf8String) texts.push(text.valueBlock.value);
      }
    } else if (item instanceof asn1js.BitString) {
      const bits = item.valueBlock.valueHexView;
      for (let bit = 0; bit < bits.length * 8; bit += 1) {
        if ((bits[bit >> 3]! >> (7 - (bit & 7))) & 1)
          failures.push(FAILURE_BITS[bit] ?? `failure bit ${bit}`);
      }
    }
  }
  if (code !== 0 && code !== 1) {
    const detail = [...texts, ...failures].join('; ');
    return { ok: false, reason: `the TSA answered ${status}${detail ? ` (${detail})` : ''}`, status };
  }
  const token = parts[1];
  if (!token) return { ok: false, reason: `the TSA answered ${status} without a token`, status };
  return {
    ok: true,
    status: code === 0 ? 'granted' : 'grantedWithMods',
    token: new Uint8Array(token.valueBeforeDecodeView),
  };
}

/**
 * A TimeStampResp with status granted around a token, as a TSA answers (RFC 3161 §2.4.2): what
 * `openssl ts -verify -in reply.tsr` reads. `token` is a DER ContentInfo.
 */
export function timeStampReply(token: Uint8Array): Uint8Array {
  if (!(token instanceof Uint8Array) || !(single(token) instanceof asn1js.Sequence)) {
    throw new CryptoError('invalid_encoding', 'token must be one DER ContentInfo');
  }
  return new Uint8Array(tlv(TAG_SEQUENCE, tlv(TAG_SEQUENCE, tlv(TAG_INTEGER, Uint8Array.of(0))), token));
}

// ---------------------------------------------------------------------------------------------------------
// Token verification

export interface TimeStampInfo {
  /** TSTInfo genTime: when the TSA says the digest existed. */
  genTime: Date;
  /** TSTInfo serialNumber, lowercase hex. */
  serialHex: string;
  /** TSTInfo policy OID. */
  policy: string;
  /** TSTInfo nonce, lowercase hex without leading zeros; null when the token has none. */
  nonceHex: string | null;
  /** The TSA's signing certificate (PEM) and its subject. */
  tsaCertificatePem: string;
  tsaSubject: string;
}

export type TimeStampVerifyResult = ({ ok: true } & TimeStampInfo) | { ok: false; reason: string };

/** What a token says of itself, read and not checked: `readTimeStampToken`. */
export interface TimeStampTokenClaims {
  /** TSTInfo nonce, lowercase hex without leading zeros (as createTimeStampRequest's nonceHex); null when none. */
  nonceHex: string | null;
  /** Subject of the certificate in the token that its SignerInfo names; null when the token does not carry it. */
  signerSubject: string | null;
}

/**
 * Reads what the platform, as the TSA's client, matches against its own request: the nonce, and the subject of the
 * TSA certificate the token carries. No check: @ooh/verify's verifyBlockTimestamp judges the token (digest,
 * signature, signing certificate, the pinned TSA); this only reads the same bytes. Null when unreadable.
 */
export function readTimeStampToken(token: Uint8Array): TimeStampTokenClaims | null {
  try {
    if (!(token instanceof Uint8Array) || single(token) === null) return null;
    const contentInfo = pkijs.ContentInfo.fromBER(Uint8Array.from(token));
    if (contentInfo.contentType !== OID_SIGNED_DATA) return null;
    const signedData = new pkijs.SignedData({ schema: contentInfo.content });
    const { eContentType, eContent } = signedData.encapContentInfo;
    const tstDer = eContent === undefined ? null : octetStringValue(eContent);
    if (eContentType !== OID_TST_INFO || tstDer === null) return null;
    const tst = pkijs.TSTInfo.fromBER(Uint8Array.from(tstDer));
    const signerInfo = signedData.signerInfos[0];
    const signer = signerInfo
      ? signerCertificates(signedData).find((candidate) => matchesSid(signerInfo.sid, candidate))
      : undefined;
    return {
      nonceHex: tst.nonce ? integerHex(tst.nonce.valueBlock.valueHexView) : null,
      signerSubject: signer ? signer.cert.subject : null,
    };
  } catch {
    return null;
  }
}

/** DER of a value of pkijs's asn1js, read again with this package's asn1js. */
function reread(value: unknown): asn1js.AsnType | null {
  const toBER = (value as { toBER?: (sizeOnly?: boolean) => ArrayBuffer } | null)?.toBER;
  if (typeof toBER !== 'function') return null;
  return single(new Uint8Array(toBER.call(value, false)));
}

/**
 * RFC 3161 §2.4.1 / RFC 5816: the token's signed attributes must bind the signer's certificate, by a SHA-1
 * ESSCertID (SigningCertificate) or an ESSCertIDv2 (SigningCertificateV2, SHA-256 unless it names another hash):
 * the first certID is the signer's.
 */
function checkSigningCertificate(attributes: readonly pkijs.Attribute[], signer: ParsedCertificate): void {
  const v1 = attributes.some((a) => a.type === OID_SIGNING_CERTIFICATE);
  const v2 = attributes.some((a) => a.type === OID_SIGNING_CERTIFICATE_V2);
  if (!v1 && !v2) refuse('the token has no signing-certificate attribute (RFC 3161 §2.4.1, RFC 5816)');
  const value = reread(
    v2
      ? singleAttributeValue(attributes, OID_SIGNING_CERTIFICATE_V2, 'signingCertificateV2')
      : singleAttributeValue(attributes, OID_SIGNING_CERTIFICATE, 'signingCertificate'),
  );
  const certs = value instanceof asn1js.Sequence ? value.valueBlock.value[0] : undefined;
  const first = certs instanceof asn1js.Sequence ? certs.valueBlock.value[0] : undefined;
  const fields = first instanceof asn1js.Sequence ? first.valueBlock.value : [];
  let hash = 'sha1';
  let index = 0;
  if (v2 && fields[0] instanceof asn1js.Sequence) {
    const algorithm = fields[0].valueBlock.value[0];
    const name = algorithm instanceof asn1js.ObjectIdentifier ? HASHES[algorithm.getValue()] : undefined;
    if (!name) refuse('the signing-certificate attribute names a hash this verifier does not know');
    hash = name;
    index = 1;
  } else if (v2) {
    hash = 'sha256';
  }
  const certHash = fields[index];
  if (!(certHash instanceof asn1js.OctetString)) refuse('the signing-certificate attribute is unreadable');
  const actual = createHash(hash).update(signer.der).digest();
  if (!bytesEqual(actual, certHash.valueBlock.valueHexView)) {
    refuse("the signing-certificate attribute does not name the signer's certificate");
  }
}

/**
 * RFC 3161 §2.3: the TSA's certificate has exactly one extended key usage, id-kp-timeStamping, marked critical
 * (OpenSSL's `ts -verify` asks the same).
 */
function checkTimeStampingUsage(signer: ParsedCertificate): void {
  const extension = signer.cert.extensions.find((item) => item.type === OID_EXTENDED_KEY_USAGE);
  if (!extension) refuse('the TSA certificate has no extended key usage (RFC 3161 §2.3: id-kp-timeStamping)');
  const usages = new x509.ExtendedKeyUsageExtension(extension.rawData).usages.map(String);
  if (usages.length !== 1 || usages[0] !== OID_KP_TIME_STAMPING) {
    refuse(
      'the TSA certificate is not for time-stamping only (extended key usage must be id-kp-timeStamping)',
    );
  }
  if (!extension.critical) refuse('the TSA certificate marks its time-stamping key usage non-critical');
  if (!keyUsageAllowsSigning(signer)) refuse('the TSA certificate key usage does not allow signatures');
}

function signerCertificates(signedData: pkijs.SignedData): ParsedCertificate[] {
  const parsed: ParsedCertificate[] = [];
  for (const item of signedData.certificates ?? []) {
    if (!(item instanceof pkijs.Certificate)) continue;
    try {
      parsed.push(parseCertificateForChain(certificateDer(item)));
    } catch {
      // An unreadable extra certificate cannot be the signer nor help build a path.
    }
  }
  return parsed;
}

function matchesSid(sid: pkijs.SignerInfo['sid'], candidate: ParsedCertificate): boolean {
  const certificate = pkijs.Certificate.fromBER(Uint8Array.from(candidate.der));
  if (sid instanceof pkijs.IssuerAndSerialNumber) {
    return certificate.issuer.isEqual(sid.issuer) && certificate.serialNumber.isEqual(sid.serialNumber);
  }
  const wanted = isAsn(sid, 3, 0) ? sid.valueBlock.valueHexView : undefined;
  const ski = candidate.cert.getExtension(x509.SubjectKeyIdentifierExtension);
  return wanted !== undefined && ski !== null && hexEncode(wanted) === ski.keyId.toLowerCase();
}

function verifySignature(signerInfo: pkijs.SignerInfo, signer: ParsedCertificate, hash: string): void {
  const algorithm = SIGNATURES[signerInfo.signatureAlgorithm.algorithmId];
  if (!algorithm) refuse(`signature algorithm ${signerInfo.signatureAlgorithm.algorithmId} is not supported`);
  if (algorithm.hash !== null && algorithm.hash !== hash) {
    refuse('the signature algorithm and the digest algorithm name different hashes');
  }
  const key = signer.node.publicKey;
  const keyType = key.asymmetricKeyType;
  if (algorithm.key !== keyType) refuse(`the TSA key (${keyType}) does not fit the signature algorithm`);
  if (keyType === 'rsa' && (key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) {
    refuse('the TSA RSA key is shorter than 2048 bits');
  }
  const signedAttrs = signerInfo.signedAttrs!;
  // RFC 5652 §5.4: the signature covers the DER of the signed attributes with an explicit SET OF tag.
  const signedBytes = new Uint8Array(signedAttrs.encodedValue.slice(0));
  if (signedBytes.byteLength === 0) refuse('signed attributes missing');
  signedBytes[0] = 0x31;
  let ok = false;
  try {
    ok = nodeVerify(
      keyType === 'ed25519' ? null : hash,
      signedBytes,
      keyType === 'ec' ? { key, dsaEncoding: 'der' } : key,
      signerInfo.signature.valueBlock.valueHexView,
    );
  } catch {
    ok = false;
  }
  if (!ok) refuse('the TSA signature does not verify');
}

async function verifyOrRefuse(
  token: Uint8Array,
  options: { digest: Uint8Array; trustedTsaPem: string[]; nonceHex?: string },
): Promise<TimeStampVerifyResult> {
  if (!(token instanceof Uint8Array)) refuse('the token is not bytes');
  if (!(options.digest instanceof Uint8Array) || options.digest.byteLength !== 32) {
    refuse('digest must be the 32 bytes of a SHA-256 digest');
  }
  if (!Array.isArray(options.trustedTsaPem) || options.trustedTsaPem.length === 0) {
    refuse('no pinned TSA certificate given');
  }
  if (single(token) === null) refuse('the token is not a single DER element');
  let contentInfo: pkijs.ContentInfo;
  try {
    contentInfo = pkijs.ContentInfo.fromBER(Uint8Array.from(token));
  } catch {
    return refuse('the token is not a CMS ContentInfo');
  }
  if (contentInfo.contentType !== OID_SIGNED_DATA) refuse('the token does not hold SignedData');
  let signedData: pkijs.SignedData;
  try {
    signedData = new pkijs.SignedData({ schema: contentInfo.content });
  } catch {
    return refuse('the token holds an unreadable SignedData');
  }
  const { eContentType, eContent } = signedData.encapContentInfo;
  if (eContentType !== OID_TST_INFO) refuse('the token content is not a TSTInfo (id-ct-TSTInfo)');
  const tstDer = eContent === undefined ? null : octetStringValue(eContent);
  if (tstDer === null) refuse('the token carries no TSTInfo');
  let tst: pkijs.TSTInfo;
  try {
    tst = pkijs.TSTInfo.fromBER(Uint8Array.from(tstDer));
  } catch {
    return refuse('the TSTInfo is unreadable');
  }
  if (tst.version !== 1) refuse(`TSTInfo version ${tst.version} is not 1`);

  // What was stamped: the digest asked for, hashed with SHA-256.
  if (tst.messageImprint.hashAlgorithm.algorithmId !== OID_SHA256) {
    refuse('the token stamps a digest made with another hash than SHA-256');
  }
  const imprint = tst.messageImprint.hashedMessage.valueBlock.valueHexView;
  if (!bytesEqual(imprint, options.digest)) {
    refuse(`the token stamps digest ${hexEncode(imprint)}, not ${hexEncode(options.digest)}`);
  }
  const nonceHex = tst.nonce ? integerHex(tst.nonce.valueBlock.valueHexView) : null;
  if (options.nonceHex !== undefined && nonceHex !== options.nonceHex.toLowerCase().replace(/^0+(?=.)/, '')) {
    refuse(`the token's nonce ${nonceHex ?? 'is missing'}${nonceHex ? ' differs from the request' : ''}`);
  }
  const genTime = tst.genTime;
  if (!(genTime instanceof Date) || Number.isNaN(genTime.getTime()))
    refuse('the token has no readable genTime');

  if (signedData.signerInfos.length !== 1) refuse('the token must have exactly one signer');
  const signerInfo = signedData.signerInfos[0]!;
  const hash = HASHES[signerInfo.digestAlgorithm.algorithmId];
  if (!hash || hash === 'sha1') refuse('the token is signed with a digest algorithm other than SHA-2');
  const attributes = signerInfo.signedAttrs?.attributes ?? [];
  if (attributes.length === 0) refuse('the token has no signed attributes');
  if (
    objectIdentifierValue(singleAttributeValue(attributes, OID_CONTENT_TYPE, 'contentType')) !== OID_TST_INFO
  ) {
    refuse('the contentType attribute is not id-ct-TSTInfo');
  }
  const messageDigest = octetStringValue(
    singleAttributeValue(attributes, OID_MESSAGE_DIGEST, 'messageDigest'),
  );
  if (messageDigest === null || !bytesEqual(messageDigest, createHash(hash).update(tstDer).digest())) {
    refuse('the messageDigest attribute does not match the TSTInfo: the token was changed');
  }

  // The signer: in the token (certReq) or, when the TSA left it out, one of the pinned certificates.
  const embedded = signerCertificates(signedData);
  let pinned: ParsedCertificate[] = [];
  try {
    pinned = options.trustedTsaPem.flatMap((pem) =>
      (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? []).map((block) =>
        parseCertificateForChain(block),
      ),
    );
  } catch {
    refuse('a pinned TSA certificate is unreadable');
  }
  if (pinned.length === 0) refuse('no pinned TSA certificate given');
  const signer = [...embedded, ...pinned].find((candidate) => matchesSid(signerInfo.sid, candidate));
  if (!signer) refuse("the TSA's certificate is neither in the token nor pinned");
  verifySignature(signerInfo, signer, hash);
  checkSigningCertificate(attributes, signer);
  checkTimeStampingUsage(signer);

  // Pinned: the signer is a pinned certificate itself, or chains to one; valid at genTime.
  const chain = verifyParsedChain({
    leaf: signer,
    pool: embedded.filter((item) => !item.der.equals(signer.der)),
    rootsPem: pinned.map((item) => item.pem),
    intermediatesPem: [],
    at: genTime,
  });
  if (!chain.ok) refuse(`the TSA is not the pinned one: ${chain.reason}`);
  return {
    ok: true,
    genTime,
    serialHex: integerHex(tst.serialNumber.valueBlock.valueHexView),
    policy: tst.policy,
    nonceHex,
    tsaCertificatePem: signer.pem,
    tsaSubject: signer.cert.subject,
  };
}

/**
 * Verifies an RFC 3161 token (DER ContentInfo of SignedData over a TSTInfo) for a SHA-256 `digest`:
 * messageImprint is {sha256, digest}; the nonce is `nonceHex` when given; contentType and messageDigest attributes;
 * the signing-certificate attribute names the signer; the signature (ECDSA, RSA PKCS #1 v1.5 or Ed25519, SHA-2);
 * the signer's certificate is for time-stamping only (critical id-kp-timeStamping) and is one of `trustedTsaPem`
 * or chains to one, valid at genTime. Whether genTime is plausible is the caller's to judge (no clock here).
 * Never throws on bad input.
 */
export async function verifyTimeStampToken(
  token: Uint8Array,
  options: { digest: Uint8Array; trustedTsaPem: string[]; nonceHex?: string },
): Promise<TimeStampVerifyResult> {
  try {
    return await verifyOrRefuse(token, options);
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, reason: error.message };
    return {
      ok: false,
      reason: `malformed token: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}
