import { base64Decode, bytesEqual, sha256 } from './bytes.js';
import {
  algorithmOid,
  children,
  DerError,
  expectTag,
  octets,
  oidText,
  readTlv,
  smallInteger,
  type Tlv,
  timeValue,
} from './der.js';
import { type Certificate, issuedBy, OID as X509_OID, parseCertificate, verifyEcdsa } from './x509.js';

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
      content: Uint8Array;
      signingTime: Date | null;
      /** Common names from the signer up to the root. */
      chain: string[];
    }
  | { ok: false; reason: string };

interface SignerInfo {
  sid: Tlv;
  digestAlgorithm: string;
  signedAttributes: Tlv;
  signatureAlgorithm: string;
  signature: Uint8Array;
}

function parseSignedData(der: Uint8Array) {
  const contentInfo = children(expectTag(readTlv(der), 0x30, 'ContentInfo'));
  if (oidText(contentInfo[0]!) !== OID.signedData) throw new DerError('not SignedData');
  const signedData = children(
    expectTag(children(expectTag(contentInfo[1], 0xa0, 'content'))[0], 0x30, 'SignedData'),
  );
  // RFC 5652 section 5.1: version 1 (or 3 with other certificate or signer id forms); digestAlgorithms names the
  // signer's digest algorithm.
  const version = smallInteger(signedData[0], 'SignedData version');
  if (version !== 1 && version !== 3) throw new DerError('unknown SignedData version');
  const digestAlgorithms = children(expectTag(signedData[1], 0x31, 'digestAlgorithms')).map((a) =>
    algorithmOid(a, 'digest algorithm'),
  );
  if (!digestAlgorithms.includes(OID.sha256)) throw new DerError('digestAlgorithms does not name SHA-256');
  const encap = children(expectTag(signedData[2], 0x30, 'encapContentInfo'));
  if (oidText(encap[0]!) !== OID.data) throw new DerError('content type is not id-data');
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
    // RFC 5652 section 5.3: version 1 with IssuerAndSerialNumber, 3 with SubjectKeyIdentifier.
    const signerVersion = smallInteger(parts[0], 'SignerInfo version');
    if (
      !((signerVersion === 1 && parts[1]?.tag === 0x30) || (signerVersion === 3 && parts[1]?.tag === 0x80))
    ) {
      throw new DerError('SignerInfo version and signer identifier disagree');
    }
    const signedAttributes = parts.find((p) => p.tag === 0xa0);
    if (!signedAttributes) throw new DerError('no signed attributes');
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

function attribute(attributes: Tlv, oid: string): Tlv | undefined {
  for (const a of children(attributes)) {
    const [type, values] = children(a);
    if (type && values && oidText(type) === oid) return children(values)[0];
  }
  return undefined;
}

/**
 * Checks a CMS SignedData as DESIGN.md section 4 describes it (content attached, ECDSA P-256 with SHA-256, signed
 * attributes contentType, signingTime, messageDigest, signer certificate included): the message digest, the signature
 * over the signed attributes, and the chain from the signer through the included certificates to `root`, each
 * valid at the signing time. The same checks `openssl cms -verify -CAfile authority-root.pem` makes.
 */
export async function verifyCms(signatureBase64: string, root: Certificate): Promise<CmsResult> {
  try {
    const der = base64Decode(signatureBase64);
    if (!der) return { ok: false, reason: 'the signature is not base64' };
    const { eContent, certificates, infos } = parseSignedData(der);
    if (!eContent) return { ok: false, reason: 'the signed content is not attached' };
    if (infos.length !== 1) return { ok: false, reason: `expected one signer, found ${infos.length}` };
    const info = infos[0]!;
    if (info.digestAlgorithm !== OID.sha256)
      return { ok: false, reason: 'the digest algorithm is not SHA-256' };
    const signer = findSigner(info.sid, certificates);
    if (!signer) return { ok: false, reason: 'the signer certificate is not included' };

    const contentType = attribute(info.signedAttributes, OID.contentType);
    if (!contentType || oidText(contentType) !== OID.data)
      return { ok: false, reason: 'signed content type is not id-data' };
    const digest = attribute(info.signedAttributes, OID.messageDigest);
    if (!digest || !bytesEqual(expectTag(digest, 0x04, 'messageDigest').value, await sha256(eContent))) {
      return { ok: false, reason: 'the message digest does not match the content' };
    }
    const time = attribute(info.signedAttributes, OID.signingTime);
    const signingTime = time ? timeValue(time) : null;
    // RFC 5652 section 5.4: the signature covers the DER of the attributes with the SET OF tag.
    const signedBytes = new Uint8Array(info.signedAttributes.bytes);
    signedBytes[0] = 0x31;
    if (!(await verifyEcdsa(signer, info.signatureAlgorithm, info.signature, signedBytes))) {
      return { ok: false, reason: 'the signature does not verify with the signer certificate' };
    }

    const at = signingTime ?? new Date();
    const chain: string[] = [];
    let current = signer;
    for (let depth = 0; depth < 6; depth += 1) {
      if (at < current.notBefore || at > current.notAfter) {
        return {
          ok: false,
          reason: `certificate ${current.subjectCommonName ?? '?'} was not valid at the signing time`,
        };
      }
      chain.push(current.subjectCommonName ?? '?');
      if (bytesEqual(current.der, root.der)) return { ok: true, content: eContent, signingTime, chain };
      if (await issuedBy(current, root)) {
        if (at < root.notBefore || at > root.notAfter)
          return { ok: false, reason: 'the root was not valid at the signing time' };
        chain.push(root.subjectCommonName ?? '?');
        return { ok: true, content: eContent, signingTime, chain };
      }
      let parent: Certificate | undefined;
      for (const candidate of certificates) {
        if (candidate !== current && candidate.isCa && (await issuedBy(current, candidate)))
          parent = candidate;
      }
      if (!parent) return { ok: false, reason: 'the signer does not chain to the authority root' };
      current = parent;
    }
    return { ok: false, reason: 'the certificate chain is too long' };
  } catch (error) {
    return { ok: false, reason: `malformed signature: ${(error as Error).message}` };
  }
}

export { X509_OID };
