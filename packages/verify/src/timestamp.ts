import { bytesEqual, hexDecode, toArrayBuffer } from './bytes.js';
import { VerificationError } from './errors.js';
import {
  algorithmOid,
  children,
  expectTag,
  octets,
  oidText,
  readDer,
  signedAttribute,
  type Tlv,
} from './der.js';
import {
  type Certificate,
  KEY_USAGE,
  keyUsageAllows,
  parseCertificate,
  verifyChain,
  verifySignature,
} from './x509.js';

/*
 * RFC 3161 timestamps of the ledger blocks, checked in the browser with WebCrypto only (issue 23: "the browser
 * verifier check[s] ... timestamps against a pinned TSA certificate"), as `ooh-verify --tsa-cert` does: the reply
 * served at {verify_url}/v1/ledger/blocks/{day}/timestamp.tsr is granted; its token's TSTInfo stamps the block's
 * digest (SHA-256); the contentType and messageDigest attributes; the signing-certificate attribute names the signer;
 * the signature (ECDSA P-256/P-384 or RSA PKCS #1 v1.5, SHA-2); the signer's certificate is for time-stamping only
 * (critical id-kp-timeStamping) and is the pinned certificate or chains to one (through the certificates the token carries), valid at genTime.
 */

const OID = {
  signedData: '1.2.840.113549.1.7.2',
  tstInfo: '1.2.840.113549.1.9.16.1.4',
  contentType: '1.2.840.113549.1.9.3',
  messageDigest: '1.2.840.113549.1.9.4',
  signingCertificate: '1.2.840.113549.1.9.16.2.12',
  signingCertificateV2: '1.2.840.113549.1.9.16.2.47',
  extKeyUsage: '2.5.29.37',
  timeStamping: '1.3.6.1.5.5.7.3.8',
  ecPublicKey: '1.2.840.10045.2.1',
  ecdsaSha256: '1.2.840.10045.4.3.2',
  ecdsaSha384: '1.2.840.10045.4.3.3',
  rsaEncryption: '1.2.840.113549.1.1.1',
  sha256WithRsa: '1.2.840.113549.1.1.11',
  sha384WithRsa: '1.2.840.113549.1.1.12',
  sha512WithRsa: '1.2.840.113549.1.1.13',
} as const;

const HASHES: Record<string, 'SHA-1' | 'SHA-256' | 'SHA-384' | 'SHA-512'> = {
  '1.3.14.3.2.26': 'SHA-1',
  '2.16.840.1.101.3.4.2.1': 'SHA-256',
  '2.16.840.1.101.3.4.2.2': 'SHA-384',
  '2.16.840.1.101.3.4.2.3': 'SHA-512',
};

/**
 * Why a token is refused, as a stable word a page translates: not_granted (the reply is not a granted one),
 * other_digest (it stamps another digest, or with another hash than SHA-256), changed (the TSTInfo does not match its
 * messageDigest), signature (the TSA's signature does not verify), not_pinned (signed by a TSA the reader did not pin),
 * not_for_timestamping, not_valid_then (the TSA certificate was not valid at genTime), before_day_end, malformed.
 */
export type TimestampRefusal =
  | 'not_granted'
  | 'other_digest'
  | 'changed'
  | 'signature'
  | 'not_pinned'
  | 'not_for_timestamping'
  | 'not_valid_then'
  | 'before_day_end'
  | 'malformed';

export type TimestampResult =
  | { ok: true; genTime: Date; tsa: string | null }
  | { ok: false; code: TimestampRefusal; reason: string };

class Refusal extends Error {
  constructor(
    readonly code: TimestampRefusal,
    message: string,
  ) {
    super(message);
  }
}
function refuse(reason: string, code: TimestampRefusal = 'malformed'): never {
  throw new Refusal(code, reason);
}

async function digest(hash: string, data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest(hash, toArrayBuffer(data)));
}

/** GeneralizedTime with an optional fraction (RFC 3161 §2.4.2 allows one), Z only. */
function generalizedTime(tlv: Tlv): Date {
  expectTag(tlv, 0x18, 'genTime');
  const text = new TextDecoder().decode(tlv.value);
  const match = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(?:\.(\d{1,9}))?Z$/.exec(text);
  if (!match) throw new VerificationError('malformed', 'genTime is not a GeneralizedTime in UTC');
  const [y, mo, d, h, mi, s] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const ms = match[7] ? Math.floor(Number(`0.${match[7]}`) * 1000) : 0;
  return new Date(Date.UTC(y, mo - 1, d, h, mi, s, ms));
}

/**
 * Verifies a signature by `signer`'s key (x509.ts verifySignature: ECDSA or RSA PKCS #1 v1.5) with the hash the
 * SignerInfo's digest algorithm names; a signature algorithm that names another hash is refused.
 */
async function verifyBy(
  signer: Certificate,
  algorithm: string,
  hash: string,
  signature: Uint8Array,
  data: Uint8Array,
) {
  // A SignerInfo may name the key algorithm instead of ecdsa-with-SHAx / shaXWithRSA (RFC 5753, RFC 3370): the
  // digest algorithm decides.
  const byKey: Record<string, Record<string, string>> = {
    [OID.ecPublicKey]: { 'SHA-256': OID.ecdsaSha256, 'SHA-384': OID.ecdsaSha384 },
    [OID.rsaEncryption]: {
      'SHA-256': OID.sha256WithRsa,
      'SHA-384': OID.sha384WithRsa,
      'SHA-512': OID.sha512WithRsa,
    },
  };
  const named = byKey[algorithm]?.[hash] ?? algorithm;
  if (certificateHash(named) !== hash) return false;
  return verifySignature(signer, named, signature, data);
}

/** The hash a certificate's own signature algorithm names. */
function certificateHash(algorithm: string): string | null {
  if (algorithm === OID.ecdsaSha256 || algorithm === OID.sha256WithRsa) return 'SHA-256';
  if (algorithm === OID.ecdsaSha384 || algorithm === OID.sha384WithRsa) return 'SHA-384';
  if (algorithm === OID.sha512WithRsa) return 'SHA-512';
  return null;
}

async function check(
  reply: Uint8Array,
  digestHex: string,
  pinned: Certificate[],
  notBefore?: Date,
): Promise<TimestampResult> {
  const wanted = hexDecode(digestHex);
  if (!wanted || wanted.length !== 32) refuse('the block digest is not 64 hex digits');
  if (pinned.length === 0) refuse('no pinned TSA certificate');
  // TimeStampResp: status granted (0) or grantedWithMods (1), then the token.
  const response = children(expectTag(readDer(reply), 0x30, 'TimeStampResp'));
  const status = children(expectTag(response[0], 0x30, 'PKIStatusInfo'));
  const code = expectTag(status[0], 0x02, 'status').value;
  if (code.length !== 1 || code[0]! > 1) refuse('the TSA did not grant this timestamp', 'not_granted');
  const token = expectTag(response[1], 0x30, 'timeStampToken');
  const contentInfo = children(token);
  if (oidText(contentInfo[0]!) !== OID.signedData) refuse('the token is not SignedData');
  const signedData = children(
    expectTag(children(expectTag(contentInfo[1], 0xa0, 'content'))[0], 0x30, 'SignedData'),
  );
  const encap = children(expectTag(signedData[2], 0x30, 'encapContentInfo'));
  if (oidText(encap[0]!) !== OID.tstInfo) refuse('the token content is not a TSTInfo');
  const tstDer = octets(children(expectTag(encap[1], 0xa0, 'eContent'))[0]!);
  const certificates: Certificate[] = [];
  let signerInfos: Tlv | undefined;
  for (const field of signedData.slice(3)) {
    if (field.tag === 0xa0)
      for (const c of children(field)) if (c.tag === 0x30) certificates.push(parseCertificate(c.bytes));
    if (field.tag === 0x31) signerInfos = field;
  }

  // TSTInfo: version 1, policy, messageImprint, serialNumber, genTime, ...
  const tst = children(expectTag(readDer(tstDer), 0x30, 'TSTInfo'));
  const version = expectTag(tst[0], 0x02, 'TSTInfo version').value;
  if (version.length !== 1 || version[0] !== 1) refuse('TSTInfo version is not 1');
  const [imprintAlgorithm, imprint] = children(expectTag(tst[2], 0x30, 'messageImprint'));
  if (HASHES[algorithmOid(imprintAlgorithm, 'imprint algorithm')] !== 'SHA-256') {
    refuse('the token stamps a digest made with another hash than SHA-256', 'other_digest');
  }
  if (!bytesEqual(expectTag(imprint, 0x04, 'hashedMessage').value, wanted)) {
    refuse('the token stamps another digest than the block digest', 'other_digest');
  }
  const genTime = generalizedTime(tst[4]!);

  const infos = children(expectTag(signerInfos, 0x31, 'signerInfos'));
  if (infos.length !== 1) refuse('the token must have exactly one signer');
  const parts = children(expectTag(infos[0], 0x30, 'SignerInfo'));
  const sid = parts[1]!;
  const hash = HASHES[algorithmOid(parts[2], 'digest algorithm')];
  if (!hash || hash === 'SHA-1') refuse('the token is signed with a digest algorithm other than SHA-2');
  const signedAttributes = expectTag(parts[3], 0xa0, 'signed attributes');
  const signatureAlgorithm = algorithmOid(parts[4], 'signature algorithm');
  const signature = expectTag(parts[5], 0x04, 'signature').value;

  const contentType = signedAttribute(signedAttributes, OID.contentType);
  if (!contentType || oidText(contentType) !== OID.tstInfo)
    refuse('the contentType attribute is not id-ct-TSTInfo');
  const messageDigest = signedAttribute(signedAttributes, OID.messageDigest);
  if (
    !messageDigest ||
    !bytesEqual(expectTag(messageDigest, 0x04, 'messageDigest').value, await digest(hash, tstDer))
  ) {
    refuse('the messageDigest attribute does not match the TSTInfo: the token was changed', 'changed');
  }

  // The signer: in the token or one of the pinned certificates, by issuer and serial or by key identifier.
  const candidates = [...certificates, ...pinned];
  const signer =
    sid.tag === 0x30
      ? candidates.find((c) => {
          const [issuer, serial] = children(sid);
          return (
            bytesEqual(c.issuer, issuer!.bytes) &&
            bytesEqual(c.serial, expectTag(serial, 0x02, 'serial').value)
          );
        })
      : candidates.find((c) => c.subjectKeyIdentifier && bytesEqual(c.subjectKeyIdentifier, sid.value));
  if (!signer) refuse("the TSA's certificate is neither in the token nor pinned", 'not_pinned');

  // RFC 3161 §2.4.1 / RFC 5816: the signing-certificate attribute names the signer's certificate.
  const v2 = signedAttribute(signedAttributes, OID.signingCertificateV2);
  const v1 = v2 ? undefined : signedAttribute(signedAttributes, OID.signingCertificate);
  if (!v1 && !v2) refuse('the token has no signing-certificate attribute');
  const [certs] = children((v2 ?? v1)!);
  const certId = children(expectTag(children(expectTag(certs, 0x30, 'certs'))[0], 0x30, 'ESSCertID'));
  let certHash = 'SHA-1';
  let hashField = certId[0];
  if (v2) {
    certHash = 'SHA-256';
    if (certId[0]?.tag === 0x30) {
      certHash = HASHES[algorithmOid(certId[0], 'certificate hash')] ?? '';
      hashField = certId[1];
    }
  }
  if (!certHash) refuse('the signing-certificate attribute names an unknown hash');
  if (!bytesEqual(expectTag(hashField, 0x04, 'certHash').value, await digest(certHash, signer.der))) {
    refuse("the signing-certificate attribute does not name the signer's certificate");
  }

  // RFC 5652 §5.4: the signature covers the DER of the attributes with the SET OF tag.
  const signedBytes = new Uint8Array(signedAttributes.bytes);
  signedBytes[0] = 0x31;
  if (!(await verifyBy(signer, signatureAlgorithm, hash, signature, signedBytes))) {
    refuse('the TSA signature does not verify', 'signature');
  }
  const usage = signer.extendedKeyUsage;
  if (!usage || usage.purposes.length !== 1 || usage.purposes[0] !== OID.timeStamping || !usage.critical) {
    refuse(
      'the TSA certificate is not for time-stamping only (critical id-kp-timeStamping)',
      'not_for_timestamping',
    );
  }

  // RFC 3161 §2.3: the TSA's key signs; a keyUsage, when present, allows digitalSignature or nonRepudiation.
  if (
    !keyUsageAllows(signer, KEY_USAGE.digitalSignature) &&
    !keyUsageAllows(signer, KEY_USAGE.nonRepudiation)
  ) {
    refuse('the TSA certificate does not allow signatures (keyUsage)', 'not_for_timestamping');
  }

  // Pinned: the signer itself, or chained to a pinned certificate through the token's certificates by the one chain
  // walk (x509.ts verifyChain: issuer rules, path length, critical extensions, every certificate valid at genTime).
  if (genTime < signer.notBefore || genTime > signer.notAfter)
    refuse('the TSA certificate was not valid at genTime', 'not_valid_then');
  const chained = await verifyChain({ leaf: signer, pool: certificates, roots: pinned, at: genTime });
  if (!chained.ok) {
    const { code } = chained.error;
    if (code === 'chain_expired' || code === 'chain_not_yet_valid')
      refuse(`a certificate of the TSA's chain was not valid at genTime (${code})`, 'not_valid_then');
    refuse(`the TSA is not the pinned one (${code})`, 'not_pinned');
  }
  if (notBefore && genTime < notBefore)
    refuse('genTime is before the day ended: not a stamp of this block', 'before_day_end');
  return { ok: true, genTime, tsa: signer.subjectCommonName };
}

/**
 * Checks the RFC 3161 reply of a ledger block (the bytes of timestamp.tsr) against the block's digest (hex) and the
 * pinned TSA certificate(s); `notBefore`: the end of the block's day, before which no honest stamp of it exists.
 * Never throws.
 */
export async function verifyBlockTimestamp(
  reply: Uint8Array,
  digestHex: string,
  pinned: Certificate[],
  notBefore?: Date,
): Promise<TimestampResult> {
  try {
    return await check(reply, digestHex, pinned, notBefore);
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, code: error.code, reason: error.message };
    return { ok: false, code: 'malformed', reason: `malformed timestamp: ${(error as Error).message}` };
  }
}
