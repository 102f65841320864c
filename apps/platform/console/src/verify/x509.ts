import { base64Decode, bytesEqual, toArrayBuffer } from './bytes.js';
import {
  algorithmOid,
  children,
  DerError,
  expectTag,
  octets,
  oidText,
  readTlv,
  type Tlv,
  timeValue,
} from './der.js';

/** What the browser reads of an X.509 certificate to check a chain (RFC 5280 section 4.1). */
export interface Certificate {
  der: Uint8Array;
  tbs: Uint8Array;
  serial: Uint8Array;
  issuer: Uint8Array;
  subject: Uint8Array;
  subjectCommonName: string | null;
  notBefore: Date;
  notAfter: Date;
  spki: Uint8Array;
  curve: 'P-256' | 'P-384' | null;
  signatureAlgorithm: string;
  signature: Uint8Array;
  isCa: boolean;
  subjectKeyIdentifier: Uint8Array | null;
}

export const OID = {
  ecPublicKey: '1.2.840.10045.2.1',
  p256: '1.2.840.10045.3.1.7',
  p384: '1.3.132.0.34',
  ecdsaSha256: '1.2.840.10045.4.3.2',
  ecdsaSha384: '1.2.840.10045.4.3.3',
  commonName: '2.5.4.3',
  basicConstraints: '2.5.29.19',
  subjectKeyIdentifier: '2.5.29.14',
} as const;

function commonName(name: Tlv): string | null {
  for (const rdn of children(name)) {
    for (const atv of children(rdn)) {
      const [type, value] = children(atv);
      if (type && value && oidText(type) === OID.commonName) return new TextDecoder().decode(value.value);
    }
  }
  return null;
}

export function parseCertificate(der: Uint8Array): Certificate {
  const cert = expectTag(readTlv(der), 0x30, 'certificate');
  const [tbs, algorithm, signatureValue] = children(cert);
  expectTag(tbs, 0x30, 'tbsCertificate');
  const fields = children(tbs!);
  let i = 0;
  if (fields[0]?.tag === 0xa0) i += 1; // [0] version
  const serial = expectTag(fields[i], 0x02, 'serial').value;
  const issuer = expectTag(fields[i + 2], 0x30, 'issuer');
  const validity = children(expectTag(fields[i + 3], 0x30, 'validity'));
  const subject = expectTag(fields[i + 4], 0x30, 'subject');
  const spki = expectTag(fields[i + 5], 0x30, 'subjectPublicKeyInfo');
  const [spkiAlgorithm] = children(spki);
  const [keyType, curveOid] = children(expectTag(spkiAlgorithm, 0x30, 'spki algorithm'));
  const curveText = keyType && oidText(keyType) === OID.ecPublicKey && curveOid ? oidText(curveOid) : null;
  let isCa = false;
  let subjectKeyIdentifier: Uint8Array | null = null;
  const extensions = fields.slice(i + 6).find((f) => f.tag === 0xa3);
  if (extensions) {
    for (const extension of children(expectTag(children(extensions)[0], 0x30, 'extensions'))) {
      const parts = children(extension);
      const id = oidText(parts[0]!);
      const value = octets(parts[parts.length - 1]!);
      if (id === OID.basicConstraints) {
        const constraints = children(readTlv(value));
        isCa = constraints[0]?.tag === 0x01 && constraints[0].value[0] !== 0;
      } else if (id === OID.subjectKeyIdentifier) {
        subjectKeyIdentifier = octets(readTlv(value));
      }
    }
  }
  const bitString = expectTag(signatureValue, 0x03, 'signature');
  if (bitString.value[0] !== 0) throw new DerError('signature BIT STRING with unused bits');
  return {
    der: cert.bytes,
    tbs: tbs!.bytes,
    serial,
    issuer: issuer.bytes,
    subject: subject.bytes,
    subjectCommonName: commonName(subject),
    notBefore: timeValue(validity[0]!),
    notAfter: timeValue(validity[1]!),
    spki: spki.bytes,
    curve: curveText === OID.p256 ? 'P-256' : curveText === OID.p384 ? 'P-384' : null,
    signatureAlgorithm: algorithmOid(algorithm, 'signature algorithm'),
    signature: bitString.value.subarray(1),
    isCa,
    subjectKeyIdentifier,
  };
}

/** The certificates of a PEM text, in order. */
export function parsePem(pem: string): Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) => {
    const der = base64Decode(block.replace(/-----(BEGIN|END) CERTIFICATE-----/g, ''));
    if (!der) throw new DerError('PEM certificate is not base64');
    return parseCertificate(der);
  });
}

/** ECDSA-Sig-Value (DER SEQUENCE of r, s) to the raw r‖s WebCrypto verifies. */
function rawSignature(der: Uint8Array, size: number): Uint8Array {
  const [r, s] = children(expectTag(readTlv(der), 0x30, 'ECDSA signature'));
  const out = new Uint8Array(2 * size);
  for (const [index, part] of [r, s].entries()) {
    let value = expectTag(part, 0x02, 'ECDSA integer').value;
    while (value.length > size && value[0] === 0) value = value.subarray(1);
    if (value.length > size) throw new DerError('ECDSA integer too long');
    out.set(value, (index + 1) * size - value.length);
  }
  return out;
}

/** Verifies an ECDSA signature (DER encoded, as in X.509 and CMS) by the key of `signer` over `data`. */
export async function verifyEcdsa(
  signer: Certificate,
  algorithm: string,
  signature: Uint8Array,
  data: Uint8Array,
) {
  if (!signer.curve) return false;
  const hash = algorithm === OID.ecdsaSha256 ? 'SHA-256' : algorithm === OID.ecdsaSha384 ? 'SHA-384' : null;
  if (!hash) return false;
  try {
    const key = await crypto.subtle.importKey(
      'spki',
      toArrayBuffer(signer.spki),
      { name: 'ECDSA', namedCurve: signer.curve },
      false,
      ['verify'],
    );
    const raw = rawSignature(signature, signer.curve === 'P-256' ? 32 : 48);
    return await crypto.subtle.verify({ name: 'ECDSA', hash }, key, toArrayBuffer(raw), toArrayBuffer(data));
  } catch {
    return false;
  }
}

/** True when `child` names `parent` as issuer and carries its valid signature. */
export async function issuedBy(child: Certificate, parent: Certificate): Promise<boolean> {
  return (
    bytesEqual(child.issuer, parent.subject) &&
    (await verifyEcdsa(parent, child.signatureAlgorithm, child.signature, child.tbs))
  );
}
