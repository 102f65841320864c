import { type Certificate, parsePem, sha256Hex } from '@ooh/verify';

/**
 * The root the reader pins (issue 22, item 1): a SHA-256 fingerprint, or a whole root certificate, kept in this
 * browser's localStorage. The verify host's own root is compared with it; when they differ, nothing is verified.
 */
export interface Pin {
  /** Lowercase hex SHA-256 of the certificate's DER. */
  fingerprint: string;
  /** The pinned certificate itself, when the reader pasted one. */
  pem?: string;
}

const STORAGE_KEY = 'ooh-public-root-pin';

export function loadPin(): Pin | null {
  try {
    const raw = window.localStorage.getItem(STORAGE_KEY);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as Partial<Pin>;
    if (typeof parsed.fingerprint !== 'string' || !/^[0-9a-f]{64}$/.test(parsed.fingerprint)) return null;
    return typeof parsed.pem === 'string'
      ? { fingerprint: parsed.fingerprint, pem: parsed.pem }
      : { fingerprint: parsed.fingerprint };
  } catch {
    return null;
  }
}

export function savePin(pin: Pin | null): void {
  try {
    if (pin) window.localStorage.setItem(STORAGE_KEY, JSON.stringify(pin));
    else window.localStorage.removeItem(STORAGE_KEY);
  } catch {
    // Storage switched off: the pin holds for this visit only.
  }
}

/**
 * What the reader pasted: a PEM certificate (its fingerprint is computed), or a fingerprint in any usual spelling
 * (`SHA256 Fingerprint=AB:CD:...` as openssl prints it, hex with colons or spaces, any case). Null when neither.
 */
export async function parsePinInput(text: string): Promise<Pin | null> {
  const trimmed = text.trim();
  if (trimmed.includes('-----BEGIN CERTIFICATE-----')) {
    let certificate: Certificate | undefined;
    try {
      [certificate] = parsePem(trimmed);
    } catch {
      return null;
    }
    if (!certificate) return null;
    return { fingerprint: await sha256Hex(certificate.der), pem: trimmed };
  }
  const hex = trimmed
    .replace(/^sha-?256\s*fingerprint\s*=\s*/i, '')
    .replace(/[:\s]/g, '')
    .toLowerCase();
  return /^[0-9a-f]{64}$/.test(hex) ? { fingerprint: hex } : null;
}

/** AB:CD:... in upper case, as `openssl x509 -noout -fingerprint -sha256` prints it. */
export function formatFingerprint(hex: string): string {
  return (hex.toUpperCase().match(/.{2}/g) ?? []).join(':');
}
