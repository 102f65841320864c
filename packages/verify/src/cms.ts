import { base64Decode, bytesEqual, sha256 } from './bytes.js';
import {
  algorithmOid,
  children,
  expectTag,
  octets,
  oidText,
  readDer,
  signedAttribute,
  smallInteger,
  type Tlv,
  timeValue,
} from './der.js';
import { VerificationError, type VerificationErrorCode } from './errors.js';
import { SIGNER_ROLE_NAMES, type SignerRole, signerRoleOf } from './signer-role.js';
import {
  type Certificate,
  KEY_USAGE,
  keyUsageAllows,
  OID as X509_OID,
  parseCertificate,
  type ValidityWindow,
  verifyChain,
  verifySignature,
} from './x509.js';

const OID = {
  data: '1.2.840.113549.1.7.1',
  signedData: '1.2.840.113549.1.7.2',
  contentType: '1.2.840.113549.1.9.3',
  messageDigest: '1.2.840.113549.1.9.4',
  signingTime: '1.2.840.113549.1.9.5',
  sha256: '2.16.840.1.101.3.4.2.1',
} as const;

export type CmsResult =
  | {
      ok: true;
      /** The attached content, as signed. */
      content: Uint8Array;
      /** The signingTime attribute; null when the signer gave none. */
      signingTime: Date | null;
      signer: Certificate;
      /** From the signer up to the pinned root. */
      chain: Certificate[];
      /** When every certificate of the chain is valid (the agent judges it at each play). */
      window: ValidityWindow;
    }
  | { ok: false; error: VerificationError };

class Refusal extends Error {
  constructor(
    readonly code: VerificationErrorCode,
    message: string,
  ) {
    super(message);
  }
}
function refuse(code: VerificationErrorCode, message: string): never {
  throw new Refusal(code, message);
}

interface SignerInfo {
  sid: Tlv;
  digestAlgorithm: string;
  signedAttributes: Tlv;
  signatureAlgorithm: string;
  signature: Uint8Array;
}

function parseSignedData(der: Uint8Array) {
  const contentInfo = children(expectTag(readDer(der), 0x30, 'ContentInfo'));
  if (oidText(contentInfo[0]!) !== OID.signedData)
    refuse('malformed', 'ContentInfo does not hold SignedData');
  const signedData = children(
    expectTag(children(expectTag(contentInfo[1], 0xa0, 'content'))[0], 0x30, 'SignedData'),
  );
  // RFC 5652 §5.1: version 1 (or 3 with other certificate or signer id forms); digestAlgorithms names the
  // signer's digest algorithm.
  const version = smallInteger(signedData[0], 'SignedData version');
  if (version !== 1 && version !== 3) refuse('malformed', 'unknown SignedData version');
  const digestAlgorithms = children(expectTag(signedData[1], 0x31, 'digestAlgorithms')).map((a) =>
    algorithmOid(a, 'digest algorithm'),
  );
  if (!digestAlgorithms.includes(OID.sha256))
    refuse('cms_algorithm', 'digestAlgorithms does not name SHA-256');
  const encap = children(expectTag(signedData[2], 0x30, 'encapContentInfo'));
  if (oidText(encap[0]!) !== OID.data) refuse('cms_content_type', 'the encapsulated content is not id-data');
  const eContent = encap[1] ? octets(children(expectTag(encap[1], 0xa0, 'eContent'))[0]!) : null;
  const certificates: Certificate[] = [];
  let signerInfos: Tlv | undefined;
  for (const field of signedData.slice(3)) {
    if (field.tag === 0xa0)
      for (const c of children(field)) if (c.tag === 0x30) certificates.push(parseCertificate(c.bytes));
    if (field.tag === 0x31) signerInfos = field;
  }
  const infos = children(expectTag(signerInfos, 0x31, 'signerInfos')).map((info): SignerInfo => {
    const parts = children(expectTag(info, 0x30, 'SignerInfo'));
    // RFC 5652 §5.3: version 1 with IssuerAndSerialNumber, 3 with SubjectKeyIdentifier.
    const signerVersion = smallInteger(parts[0], 'SignerInfo version');
    if (
      !((signerVersion === 1 && parts[1]?.tag === 0x30) || (signerVersion === 3 && parts[1]?.tag === 0x80))
    ) {
      refuse('malformed', 'SignerInfo version and signer identifier disagree');
    }
    const signedAttributes = parts.find((p) => p.tag === 0xa0);
    if (!signedAttributes) refuse('malformed', 'no signed attributes');
    const afterAttributes = parts.indexOf(signedAttributes);
    return {
      sid: parts[1]!,
      digestAlgorithm: algorithmOid(parts[2], 'digest algorithm'),
      signedAttributes,
      signatureAlgorithm: algorithmOid(parts[afterAttributes + 1], 'signature algorithm'),
      signature: expectTag(parts[afterAttributes + 2], 0x04, 'signature').value,
    };
  });
  return { eContent, certificates, infos };
}

function findSigner(sid: Tlv, certificates: Certificate[]): Certificate | undefined {
  if (sid.tag === 0x30) {
    const [issuer, serial] = children(sid);
    const serialValue = expectTag(serial, 0x02, 'serial').value;
    return certificates.find(
      (c) =>
        bytesEqual(c.issuer, expectTag(issuer, 0x30, 'issuer').bytes) && bytesEqual(c.serial, serialValue),
    );
  }
  if (sid.tag === 0x80)
    return certificates.find((c) => c.subjectKeyIdentifier && bytesEqual(c.subjectKeyIdentifier, sid.value));
  return undefined;
}

/** What verifyCms is asked to check the signature against. */
export interface CmsOptions {
  roots: readonly Certificate[];
  intermediates?: readonly Certificate[];
  at?: Date | null;
  /** The role the signer must have (signer-role.ts); any signer of the authority when absent. */
  role?: SignerRole;
}

async function check(der: Uint8Array, options: CmsOptions): Promise<CmsResult> {
  const { eContent, certificates, infos } = parseSignedData(der);
  if (!eContent) refuse('cms_not_attached', 'the signed content is not attached');
  if (infos.length !== 1) refuse('cms_signer_count', `expected one signer, found ${infos.length}`);
  const info = infos[0]!;
  if (info.digestAlgorithm !== OID.sha256) refuse('cms_algorithm', 'the digest algorithm is not SHA-256');
  // OpenSSL writes ecdsa-with-SHA256; some signers write the bare key algorithm (RFC 5753 allows both).
  if (info.signatureAlgorithm !== X509_OID.ecdsaSha256 && info.signatureAlgorithm !== X509_OID.ecPublicKey)
    refuse('cms_algorithm', 'the signature algorithm is not ECDSA with SHA-256');
  const signer = findSigner(info.sid, certificates);
  if (!signer) refuse('cms_signer_not_included', 'the signer certificate is not included');
  if (signer.keyType !== 'ec' || signer.curve !== 'P-256')
    refuse('cms_algorithm', 'the signer key is not P-256');
  if (
    !keyUsageAllows(signer, KEY_USAGE.digitalSignature) &&
    !keyUsageAllows(signer, KEY_USAGE.nonRepudiation)
  ) {
    refuse('cms_signer_key_usage', 'the signer certificate key usage does not allow signatures');
  }

  const contentType = signedAttribute(info.signedAttributes, OID.contentType);
  if (!contentType || oidText(contentType) !== OID.data)
    refuse('cms_content_type', 'the contentType attribute is not id-data');
  const digest = signedAttribute(info.signedAttributes, OID.messageDigest);
  if (!digest || !bytesEqual(expectTag(digest, 0x04, 'messageDigest').value, await sha256(eContent))) {
    refuse('cms_message_digest', 'the message digest does not match the content');
  }
  const time = signedAttribute(info.signedAttributes, OID.signingTime);
  const signingTime = time ? timeValue(time) : null;
  // RFC 5652 §5.4: the signature covers the DER of the attributes with the SET OF tag.
  const signedBytes = new Uint8Array(info.signedAttributes.bytes);
  signedBytes[0] = 0x31;
  if (!(await verifySignature(signer, X509_OID.ecdsaSha256, info.signature, signedBytes))) {
    refuse('cms_bad_signature', 'the signature does not verify with the signer certificate');
  }
  const chain = await verifyChain({
    leaf: signer,
    pool: [...(options.intermediates ?? []), ...certificates.filter((c) => c !== signer)],
    roots: options.roots,
    at: options.at ?? null,
  });
  if (!chain.ok) return chain;
  // Checked once the signer is known to be the authority's: which of its signers it is.
  if (options.role !== undefined && signerRoleOf(signer) !== options.role) {
    refuse(
      'signer_role',
      `the signer "${signer.subjectCommonName ?? '?'}" is not the ${SIGNER_ROLE_NAMES[options.role].toLowerCase()}`,
    );
  }
  return { ok: true, content: eContent, signingTime, signer, chain: chain.chain, window: chain.window };
}

/**
 * Verifies a CMS SignedData (DER, or its base64) as DESIGN.md §4 makes them (content attached, ECDSA P-256 with
 * SHA-256, signed attributes contentType, signingTime, messageDigest, signer certificate included): the message
 * digest, the signature over the signed attributes, and the chain from the signer through `intermediates` and the
 * included certificates to one of `roots`, every certificate valid at `at` (dates not judged when `at` is null or
 * absent: the result's `window` then says when the chain is valid). The checks `openssl cms -verify -CAfile` makes;
 * with `role`, the signer must also be the authority's signer of that role (signer_role: signer-role.ts). Never
 * throws on bad input: `{ ok: false, error }` with the error's code.
 */
export async function verifyCms(signature: Uint8Array | string, options: CmsOptions): Promise<CmsResult> {
  const der = typeof signature === 'string' ? base64Decode(signature) : signature;
  if (!der) return { ok: false, error: new VerificationError('malformed', 'the signature is not base64') };
  try {
    return await check(der, options);
  } catch (error) {
    if (error instanceof Refusal)
      return { ok: false, error: new VerificationError(error.code, error.message) };
    if (error instanceof VerificationError) return { ok: false, error };
    return {
      ok: false,
      error: new VerificationError('malformed', `malformed signature: ${(error as Error).message}`, {
        cause: error,
      }),
    };
  }
}
