import { base64Decode, bytesEqual, toArrayBuffer } from './bytes.js';
import { algorithmOid, children, expectTag, octets, oidText, readDer, type Tlv, timeValue } from './der.js';
import { VerificationError } from './errors.js';

/** What a verifier reads of an X.509 certificate (RFC 5280 §4.1). */
export interface Certificate {
  der: Uint8Array;
  tbs: Uint8Array;
  serial: Uint8Array;
  /** DER of the issuer and subject Names, compared byte for byte. */
  issuer: Uint8Array;
  subject: Uint8Array;
  subjectCommonName: string | null;
  notBefore: Date;
  notAfter: Date;
  /** DER SubjectPublicKeyInfo. */
  spki: Uint8Array;
  keyType: 'ec' | 'rsa' | null;
  curve: 'P-256' | 'P-384' | null;
  signatureAlgorithm: string;
  signature: Uint8Array;
  /** basicConstraints cA. */
  isCa: boolean;
  /** basicConstraints pathLenConstraint; null when absent. */
  pathLength: number | null;
  /** keyUsage bits (bit 0, digitalSignature, is 0x80 of the first byte: `keyUsageAllows`); null when absent. */
  keyUsage: Uint8Array | null;
  /** extKeyUsage purposes and whether the extension is critical; null when absent. */
  extendedKeyUsage: { purposes: string[]; critical: boolean } | null;
  subjectKeyIdentifier: Uint8Array | null;
  /** The keyIdentifier of authorityKeyIdentifier; null when absent. */
  authorityKeyIdentifier: Uint8Array | null;
  /** The authorityCertSerialNumber of authorityKeyIdentifier (the issuer's serial, INTEGER octets); null when absent. */
  authorityCertSerial: Uint8Array | null;
  /** OIDs of the extensions marked critical. */
  criticalExtensions: string[];
}

export const OID = {
  ecPublicKey: '1.2.840.10045.2.1',
  rsaEncryption: '1.2.840.113549.1.1.1',
  p256: '1.2.840.10045.3.1.7',
  p384: '1.3.132.0.34',
  ecdsaSha256: '1.2.840.10045.4.3.2',
  ecdsaSha384: '1.2.840.10045.4.3.3',
  sha256WithRsa: '1.2.840.113549.1.1.11',
  sha384WithRsa: '1.2.840.113549.1.1.12',
  sha512WithRsa: '1.2.840.113549.1.1.13',
  commonName: '2.5.4.3',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
} as const;

/** Extensions the chain walk knows; any other extension marked critical refuses the chain (RFC 5280 §4.2). */
const KNOWN_EXTENSIONS: ReadonlySet<string> = new Set([
  OID.subjectKeyIdentifier,
  OID.keyUsage,
  OID.subjectAltName,
  OID.basicConstraints,
  OID.authorityKeyIdentifier,
  OID.extKeyUsage,
]);

/** keyUsage bit numbers (RFC 5280 §4.2.1.3). */
export const KEY_USAGE = { digitalSignature: 0, nonRepudiation: 1, keyAgreement: 4, keyCertSign: 5 } as const;

/** What a chain may be asked to be good for (`verifyChain`'s `purpose`): the TLS purposes of RFC 5280 §4.2.1.12. */
export type ChainPurpose = 'clientAuth' | 'serverAuth';

/** Whether a keyUsage extension is absent or sets `bit`. */
export function keyUsageAllows(certificate: Certificate, bit: number): boolean {
  const bits = certificate.keyUsage;
  if (!bits) return true;
  const byte = bits[bit >> 3] ?? 0;
  return (byte & (0x80 >> (bit & 7))) !== 0;
}

function commonName(name: Tlv): string | null {
  for (const rdn of children(name)) {
    for (const atv of children(rdn)) {
      const [type, value] = children(atv);
      if (type && value && oidText(type) === OID.commonName) return new TextDecoder().decode(value.value);
    }
  }
  return null;
}

/** Parses a DER certificate; throws VerificationError('malformed') when it cannot be read. */
export function parseCertificate(der: Uint8Array): Certificate {
  const cert = expectTag(readDer(der), 0x30, 'certificate');
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
  const [keyTypeOid, curveOid] = children(expectTag(spkiAlgorithm, 0x30, 'spki algorithm'));
  const keyTypeText = keyTypeOid ? oidText(keyTypeOid) : null;
  const curveText = keyTypeText === OID.ecPublicKey && curveOid?.tag === 0x06 ? oidText(curveOid) : null;
  let isCa = false;
  let pathLength: number | null = null;
  let keyUsage: Uint8Array | null = null;
  let extendedKeyUsage: Certificate['extendedKeyUsage'] = null;
  let subjectKeyIdentifier: Uint8Array | null = null;
  let authorityKeyIdentifier: Uint8Array | null = null;
  let authorityCertSerial: Uint8Array | null = null;
  const criticalExtensions: string[] = [];
  const extensions = fields.slice(i + 6).find((f) => f.tag === 0xa3);
  if (extensions) {
    for (const extension of children(expectTag(children(extensions)[0], 0x30, 'extensions'))) {
      const parts = children(extension);
      const id = oidText(parts[0]!);
      const critical = parts.length === 3 && parts[1]!.tag === 0x01 && parts[1]!.value[0] !== 0;
      if (critical) criticalExtensions.push(id);
      const value = octets(parts[parts.length - 1]!);
      if (id === OID.basicConstraints) {
        const constraints = children(readDer(value));
        isCa = constraints[0]?.tag === 0x01 && constraints[0].value[0] !== 0;
        const length = constraints.find((c) => c.tag === 0x02);
        if (length) pathLength = length.value.reduce((n, b) => n * 256 + b, 0);
      } else if (id === OID.keyUsage) {
        keyUsage = expectTag(readDer(value), 0x03, 'keyUsage').value.subarray(1);
      } else if (id === OID.extKeyUsage) {
        extendedKeyUsage = { purposes: children(readDer(value)).map((p) => oidText(p)), critical };
      } else if (id === OID.subjectKeyIdentifier) {
        subjectKeyIdentifier = octets(readDer(value));
      } else if (id === OID.authorityKeyIdentifier) {
        const fields = children(readDer(value));
        const keyId = fields.find((c) => c.tag === 0x80);
        authorityKeyIdentifier = keyId ? keyId.value : null;
        const serial = fields.find((c) => c.tag === 0x82);
        authorityCertSerial = serial ? serial.value : null;
      }
    }
  }
  const bitString = expectTag(signatureValue, 0x03, 'signature');
  if (bitString.value[0] !== 0) {
    throw new VerificationError('malformed', 'certificate signature BIT STRING has unused bits');
  }
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
    keyType: keyTypeText === OID.ecPublicKey ? 'ec' : keyTypeText === OID.rsaEncryption ? 'rsa' : null,
    curve: curveText === OID.p256 ? 'P-256' : curveText === OID.p384 ? 'P-384' : null,
    signatureAlgorithm: algorithmOid(algorithm, 'signature algorithm'),
    signature: bitString.value.subarray(1),
    isCa,
    pathLength,
    keyUsage,
    extendedKeyUsage,
    subjectKeyIdentifier,
    authorityKeyIdentifier,
    authorityCertSerial,
    criticalExtensions,
  };
}

/** The certificates of a PEM text, in order; throws VerificationError('malformed') on a block it cannot read. */
export function parsePem(pem: string): Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) => {
    const der = base64Decode(block.replace(/-----(BEGIN|END) CERTIFICATE-----/g, ''));
    if (!der) throw new VerificationError('malformed', 'PEM certificate is not base64');
    return parseCertificate(der);
  });
}

/** Every certificate of several PEM texts (pinned roots given as PEM); malformed PEM throws. */
export function parsePems(pems: readonly string[]): Certificate[] {
  return pems.flatMap((pem) => parsePem(pem));
}

/** ECDSA-Sig-Value (DER SEQUENCE of r, s) to the raw r‖s WebCrypto verifies. */
function rawSignature(der: Uint8Array, size: number): Uint8Array {
  const [r, s] = children(expectTag(readDer(der), 0x30, 'ECDSA signature'));
  const out = new Uint8Array(2 * size);
  for (const [index, part] of [r, s].entries()) {
    let value = expectTag(part, 0x02, 'ECDSA integer').value;
    while (value.length > size && value[0] === 0) value = value.subarray(1);
    if (value.length > size) throw new VerificationError('malformed', 'ECDSA integer too long');
    out.set(value, (index + 1) * size - value.length);
  }
  return out;
}

const ECDSA_HASH: Record<string, string> = { [OID.ecdsaSha256]: 'SHA-256', [OID.ecdsaSha384]: 'SHA-384' };
const RSA_HASH: Record<string, string> = {
  [OID.sha256WithRsa]: 'SHA-256',
  [OID.sha384WithRsa]: 'SHA-384',
  [OID.sha512WithRsa]: 'SHA-512',
};

/**
 * Verifies a signature by the key of `signer` over `data`: ECDSA (P-256, P-384; the signature DER encoded, as X.509
 * and CMS carry it) or RSA PKCS #1 v1.5, with the SHA-2 hash `algorithm` (an OID) names. False when it does not
 * verify, when the algorithm does not fit the key, or when the signature cannot be read.
 */
export async function verifySignature(
  signer: Certificate,
  algorithm: string,
  signature: Uint8Array,
  data: Uint8Array,
): Promise<boolean> {
  try {
    if (signer.keyType === 'ec' && signer.curve && ECDSA_HASH[algorithm]) {
      const key = await crypto.subtle.importKey(
        'spki',
        toArrayBuffer(signer.spki),
        { name: 'ECDSA', namedCurve: signer.curve },
        false,
        ['verify'],
      );
      const raw = rawSignature(signature, signer.curve === 'P-256' ? 32 : 48);
      return await crypto.subtle.verify(
        { name: 'ECDSA', hash: ECDSA_HASH[algorithm] },
        key,
        toArrayBuffer(raw),
        toArrayBuffer(data),
      );
    }
    if (signer.keyType === 'rsa' && RSA_HASH[algorithm]) {
      const key = await crypto.subtle.importKey(
        'spki',
        toArrayBuffer(signer.spki),
        { name: 'RSASSA-PKCS1-v1_5', hash: RSA_HASH[algorithm] },
        false,
        ['verify'],
      );
      return await crypto.subtle.verify(
        'RSASSA-PKCS1-v1_5',
        key,
        toArrayBuffer(signature),
        toArrayBuffer(data),
      );
    }
    return false;
  } catch {
    return false;
  }
}

/** True when `child` names `parent` as issuer and carries its valid signature. */
export async function issuedBy(child: Certificate, parent: Certificate): Promise<boolean> {
  return (
    bytesEqual(child.issuer, parent.subject) &&
    (await verifySignature(parent, child.signatureAlgorithm, child.signature, child.tbs))
  );
}

/** The time every certificate of a chain is valid: the latest notBefore to the earliest notAfter, inclusive. */
export interface ValidityWindow {
  notBefore: Date;
  notAfter: Date;
}

export type ChainResult =
  | {
      ok: true;
      /** From the leaf up to the pinned root. */
      chain: Certificate[];
      window: ValidityWindow;
    }
  | { ok: false; error: VerificationError };

const MAX_CHAIN_LENGTH = 8;

const describe = (c: Certificate) => `"${c.subjectCommonName ?? '?'}"`;

/** Why `c` is not valid at `at`, or null when it is (or when `at` is null: dates not judged). */
function validityProblem(c: Certificate, at: Date | null): VerificationError | null {
  if (at === null) return null;
  if (at.getTime() < c.notBefore.getTime())
    return new VerificationError('chain_not_yet_valid', `certificate ${describe(c)} is not valid yet`);
  if (at.getTime() > c.notAfter.getTime())
    return new VerificationError('chain_expired', `certificate ${describe(c)} has expired`);
  return null;
}

function unknownCritical(c: Certificate): VerificationError | null {
  const unknown = c.criticalExtensions.find((id) => !KNOWN_EXTENSIONS.has(id));
  return unknown
    ? new VerificationError(
        'chain_unknown_critical_extension',
        `certificate ${describe(c)} has unsupported critical extension ${unknown}`,
      )
    : null;
}

/**
 * Whether `candidate` names itself as the issuer of `child` as OpenSSL's X509_check_issued sees it: the issuer
 * name is its subject, the authority key identifier (when both are there) is its subject key identifier, and the
 * authority's serial number, when the child names one, is the candidate's.
 */
function names(child: Certificate, candidate: Certificate): boolean {
  if (!bytesEqual(child.issuer, candidate.subject)) return false;
  if (child.authorityCertSerial && !bytesEqual(child.authorityCertSerial, candidate.serial)) return false;
  if (child.authorityKeyIdentifier && candidate.subjectKeyIdentifier)
    return bytesEqual(child.authorityKeyIdentifier, candidate.subjectKeyIdentifier);
  return true;
}

/** Why `candidate` cannot be the CA above `caCountBelow` intermediate CAs, or null when it can. */
function issuerProblem(
  candidate: Certificate,
  caCountBelow: number,
  at: Date | null,
): VerificationError | null {
  if (!candidate.isCa || !keyUsageAllows(candidate, KEY_USAGE.keyCertSign))
    return new VerificationError('chain_issuer_not_ca', `issuer ${describe(candidate)} is not a CA`);
  if (candidate.pathLength !== null && caCountBelow > candidate.pathLength) {
    return new VerificationError(
      'chain_path_length',
      `issuer ${describe(candidate)} path length constraint exceeded`,
    );
  }
  return validityProblem(candidate, at) ?? unknownCritical(candidate);
}

/**
 * Why the path `chain` (leaf first) is not good for `purpose`, as OpenSSL's X509_PURPOSE_SSL_CLIENT/SERVER judge it
 * (the check TLS makes of a peer's chain): every certificate that carries extKeyUsage lists the purpose
 * (anyExtendedKeyUsage does not count, as in OpenSSL), and the leaf's keyUsage, when present, allows
 * digitalSignature or keyAgreement.
 */
function purposeProblem(chain: readonly Certificate[], purpose: ChainPurpose): VerificationError | null {
  const oid = OID[purpose];
  for (const c of chain) {
    if (c.extendedKeyUsage && !c.extendedKeyUsage.purposes.includes(oid)) {
      return new VerificationError('chain_purpose', `certificate ${describe(c)} is not for ${purpose}`);
    }
  }
  const leaf = chain[0]!;
  if (!keyUsageAllows(leaf, KEY_USAGE.digitalSignature) && !keyUsageAllows(leaf, KEY_USAGE.keyAgreement)) {
    return new VerificationError(
      'chain_purpose',
      `certificate ${describe(leaf)} allows neither digitalSignature nor keyAgreement (${purpose})`,
    );
  }
  return null;
}

/**
 * The one certificate-chain walk (RFC 5280 §6, the checks `openssl verify` makes of our chains): from `leaf`
 * through `pool` (intermediates, the certificates a SignedData carries) to one of `roots` (trust anchors, matched by
 * exact DER). Every link: the candidate names itself the issuer (name, key identifier), its signature verifies, it is
 * a CA allowed to sign certificates and within its path length; no certificate carries an unknown critical
 * extension; every certificate is valid at `at` (not judged when `at` is null: the caller then judges the returned
 * window). Depth-first, so a pool with several candidates still finds a path. With `purpose`, the path found must
 * also be good for it (`purposeProblem`: what TLS checks of a client's or server's chain). Never throws on bad
 * certificates.
 */
export async function verifyChain(args: {
  leaf: Certificate;
  pool?: readonly Certificate[];
  roots: readonly Certificate[];
  at: Date | null;
  purpose?: ChainPurpose;
}): Promise<ChainResult> {
  const { leaf, roots, at } = args;
  if (at !== null && (!(at instanceof Date) || Number.isNaN(at.getTime())))
    throw new VerificationError('invalid_argument', 'at must be a valid Date or null');
  if (roots.length === 0)
    return { ok: false, error: new VerificationError('invalid_argument', 'no trusted roots given') };
  const leafProblem = validityProblem(leaf, at) ?? unknownCritical(leaf);
  if (leafProblem) return { ok: false, error: leafProblem };
  const candidates = [...roots, ...(args.pool ?? [])];
  // The most telling failure: a named issuer that failed a check, else the certificate left without one.
  let failed: VerificationError | null = null;
  let withoutIssuer = leaf;

  const extend = async (chain: Certificate[]): Promise<Certificate[] | null> => {
    const current = chain[chain.length - 1]!;
    if (roots.some((root) => bytesEqual(root.der, current.der))) return chain;
    if (chain.length >= MAX_CHAIN_LENGTH) {
      failed = new VerificationError('chain_too_long', 'chain too long');
      return null;
    }
    let named = false;
    for (const candidate of candidates) {
      if (chain.some((item) => bytesEqual(item.der, candidate.der))) continue;
      if (!names(current, candidate)) continue;
      named = true;
      if (!(await verifySignature(candidate, current.signatureAlgorithm, current.signature, current.tbs))) {
        failed = new VerificationError(
          'chain_bad_signature',
          `signature of ${describe(current)} does not verify with ${describe(candidate)}`,
        );
        continue;
      }
      const problem = issuerProblem(candidate, chain.length - 1, at);
      if (problem) {
        failed = problem;
        continue;
      }
      const found = await extend([...chain, candidate]);
      if (found) return found;
    }
    if (!named) withoutIssuer = current;
    return null;
  };

  const chain = await extend([leaf]);
  if (!chain) {
    return {
      ok: false,
      error:
        failed ??
        new VerificationError('chain_no_issuer', `no trusted issuer found for ${describe(withoutIssuer)}`),
    };
  }
  const unfit = args.purpose === undefined ? null : purposeProblem(chain, args.purpose);
  if (unfit) return { ok: false, error: unfit };
  const window = {
    notBefore: new Date(Math.max(...chain.map((c) => c.notBefore.getTime()))),
    notAfter: new Date(Math.min(...chain.map((c) => c.notAfter.getTime()))),
  };
  return { ok: true, chain, window };
}
