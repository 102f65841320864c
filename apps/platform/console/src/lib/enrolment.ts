/**
 * What a device enrolment needs, read from what the player gives: the text `agent init` prints (structure, public
 * key as base64 SPKI, the CSR as PEM), a PEM file of the key or the CSR, or a DER file of either. Nothing is
 * checked here beyond the shape: the platform parses the key and the CSR and answers field errors.
 */
export interface EnrolmentFacts {
  /** base64 of the SubjectPublicKeyInfo DER, or a PEM public key. */
  publicKey: string | null;
  /** PEM, or base64 of the DER. */
  csr: string | null;
  /** The structure code `agent init` names. */
  structureCode: string | null;
}

const CSR_PEM =
  /-----BEGIN (?:NEW )?CERTIFICATE REQUEST-----[\s\S]*?-----END (?:NEW )?CERTIFICATE REQUEST-----/;
const KEY_PEM = /-----BEGIN PUBLIC KEY-----[\s\S]*?-----END PUBLIC KEY-----/;
const KEY_LINE = /^[ \t]*public key:[ \t]*([A-Za-z0-9+/]{40,}={0,2})[ \t]*$/im;
const STRUCTURE_LINE = /^[ \t]*structure:[ \t]*(\S+)[ \t]*$/im;
const BARE_BASE64 = /^[A-Za-z0-9+/]{40,}={0,2}$/;
/** A P-256 SubjectPublicKeyInfo is 91 bytes of DER. */
const P256_SPKI_BYTES = 91;

export function readEnrolmentText(text: string): EnrolmentFacts {
  const csr = CSR_PEM.exec(text)?.[0] ?? null;
  const keyPem = KEY_PEM.exec(text)?.[0] ?? null;
  const keyLine = KEY_LINE.exec(text)?.[1] ?? null;
  const trimmed = text.trim();
  const bare = !csr && !keyPem && !keyLine && BARE_BASE64.test(trimmed) ? trimmed : null;
  return {
    publicKey: keyLine ?? keyPem ?? bare,
    csr,
    structureCode: STRUCTURE_LINE.exec(text)?.[1] ?? null,
  };
}

function base64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** A dropped or chosen file: text (UTF-8) unless it is DER (an ASN.1 SEQUENCE). */
export function readEnrolmentFile(bytes: Uint8Array): EnrolmentFacts {
  if (bytes[0] === 0x30) {
    const der = base64(bytes);
    return bytes.length === P256_SPKI_BYTES
      ? { publicKey: der, csr: null, structureCode: null }
      : { publicKey: null, csr: der, structureCode: null };
  }
  return readEnrolmentText(new TextDecoder('utf-8', { fatal: false }).decode(bytes));
}
