import { randomBytes } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { hexEncode } from './bytes.js';
import {
  certificateDer,
  isAsn,
  octetStringValue,
  oid,
  TAG_BOOLEAN,
  TAG_INTEGER,
  TAG_NULL,
  TAG_OCTET_STRING,
  TAG_SEQUENCE,
  tlv,
  unsignedInteger,
} from './der.js';
import { CryptoError } from './errors.js';
import { type ParsedCertificate, parseCertificateForChain } from './x509.js';

// RFC 3161 (Time-Stamp Protocol), the client's side: the request the platform sends, the response a time-stamping
// authority (TSA) answers, and what the platform matches against its own request (the nonce). Whether a token
// verifies is @ooh/verify's verifyBlockTimestamp, the same check a reader of a ledger block makes. Like cms.ts, the
// request is written as exact DER here (pkijs bundles its own asn1js, whose objects cannot be mixed with this
// package's), and reading uses pkijs.

const OID_SIGNED_DATA = '1.2.840.113549.1.7.2';
/** RFC 3161 §2.4.2: id-ct-TSTInfo, the content type of the token's SignedData. */
const OID_TST_INFO = '1.2.840.113549.1.9.16.1.4';
const OID_SHA256 = '2.16.840.1.101.3.4.2.1';

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

/** The one ASN.1 element `der` holds, or null: asn1js reports most faults in its result, but throws on some (a
 * GeneralizedTime it cannot convert: "GAA="), and a TSA's answer is not ours to trust. */
function single(der: Uint8Array): asn1js.AsnType | null {
  let parsed: ReturnType<typeof asn1js.fromBER>;
  try {
    parsed = asn1js.fromBER(der);
  } catch {
    return null;
  }
  if (parsed.offset === -1 || parsed.offset !== der.byteLength || parsed.result.error) return null;
  return parsed.result;
}

/**
 * Reads a DER TimeStampResp (RFC 3161 §2.4.2): the status, and for a granted one the token (a DER ContentInfo,
 * the exact bytes the TSA sent). The token is not checked here: @ooh/verify's verifyBlockTimestamp does that.
 * Never throws.
 */
export function parseTimeStampResponse(der: Uint8Array): TimeStampResponse {
  try {
    return readTimeStampResponse(der);
  } catch {
    return { ok: false, reason: 'not a TimeStampResp', status: null };
  }
}

function readTimeStampResponse(der: Uint8Array): TimeStampResponse {
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
// Reading a token (checking one is @ooh/verify's verifyBlockTimestamp)

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
