import type { KeyObject } from 'node:crypto';
import {
  type CsrInfo,
  exportPublicKeySpki,
  importPublicKey,
  isCryptoError,
  parseCsr,
  publicKeyFingerprint,
  sha256Hex,
} from '@ooh/crypto';
import { validationFailed } from '../http/problem.js';

export interface DevicePublicKey {
  key: KeyObject;
  /** base64 SPKI DER, as stored in device_keys. */
  spki: string;
  /** SHA-256 hex of the SPKI DER (device_keys.fingerprint). */
  fingerprint: string;
}

export interface DeviceCsr extends DevicePublicKey {
  /** SHA-256 hex of the CSR DER: the same request in PEM or base64 DER has the same digest. */
  sha256: string;
}

function devicePublicKey(key: KeyObject): DevicePublicKey {
  return { key, spki: exportPublicKeySpki(key), fingerprint: publicKeyFingerprint(key) };
}

/** A P-256 public key given as base64 SPKI DER or PEM; 422 otherwise. */
export function parseDevicePublicKey(text: string, path: string): DevicePublicKey {
  try {
    return devicePublicKey(importPublicKey(text));
  } catch (error) {
    if (!isCryptoError(error)) throw error;
    throw validationFailed([
      {
        path,
        code: 'invalid_key',
        message: `not an ECDSA P-256 public key as base64 SPKI DER: ${error.message}`,
      },
    ]);
  }
}

/**
 * A certificate request, PEM or base64 of DER, for an ECDSA P-256 key, whose own signature verifies (spec renew
 * rule 1: "the request's own signature proves possession of it"). Anything else is 422 validation_failed.
 */
export async function parseDeviceCsr(text: string, path: string): Promise<DeviceCsr> {
  let csr: CsrInfo;
  try {
    csr = await parseCsr(text);
  } catch (error) {
    if (!isCryptoError(error)) throw error;
    const code = error.code === 'unsupported_algorithm' ? 'unsupported_algorithm' : 'invalid_csr';
    const message =
      code === 'unsupported_algorithm'
        ? `the CSR must be for an ECDSA P-256 key signed with ecdsa-with-SHA256: ${error.message}`
        : `not a certificate request (PEM or base64 of DER): ${error.message}`;
    throw validationFailed([{ path, code, message }]);
  }
  if (!csr.signatureValid) {
    throw validationFailed([
      {
        path,
        code: 'bad_signature',
        message: "the CSR's own signature does not verify with the key it carries",
      },
    ]);
  }
  return { ...devicePublicKey(csr.publicKey), sha256: sha256Hex(csr.der) };
}
