import { createHash, createPrivateKey, createPublicKey, type KeyObject, sign } from 'node:crypto';
import {
  cosignatureMessage,
  keyIdInput,
  readVkey,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  type VerificationErrorCode,
  type Vkey,
} from '@ooh/verify';

/*
 * C2SP signed notes, checkpoints and Ed25519 cosignatures (https://c2sp.org/signed-note@v1.0.0,
 * https://c2sp.org/tlog-checkpoint@v1.0.0, https://c2sp.org/tlog-cosignature): the signing half, for the ledger's
 * checkpoints and the test witness's cosignatures, and the text they are written in. Reading a verifier key or a
 * checkpoint and checking a signature is @ooh/verify's (packages/verify/src/note.ts), the one verifier, whose key ID
 * and cosignature message rules this module signs with.
 */

// signed-note "Signature types" and the verifier key, as @ooh/verify reads them.
export { SIG_COSIGNATURE_V1, SIG_ED25519, type Vkey } from '@ooh/verify';

const EM_DASH = '\u2014';
// The PKCS#8 prefix of a raw Ed25519 seed (RFC 8410), so node:crypto takes 32 raw bytes.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export class NoteError extends Error {
  constructor(
    readonly code: 'malformed_vkey',
    message: string,
  ) {
    super(message);
    this.name = 'NoteError';
  }
}

const nodeSha256 = (bytes: Uint8Array): Buffer => createHash('sha256').update(bytes).digest();

/** signed-note: key ID = SHA-256(key name || 0x0A || signature type || public key)[:4]. */
export function keyId(name: string, type: number, publicKey: Uint8Array): Buffer {
  return nodeSha256(keyIdInput(name, type, publicKey)).subarray(0, 4);
}

/** What an operator reads when a vkey they gave is refused, by @ooh/verify's code. */
const VKEY_PROBLEMS: Partial<Record<VerificationErrorCode, string>> = {
  vkey_malformed: 'a vkey is <name>+<hex key ID>+<base64 key>',
  vkey_name: 'the key name is empty or holds a space or "+"',
  vkey_key_id: 'the key ID is 8 lowercase hex digits',
  malformed: 'the key is not standard base64',
  unsupported_algorithm: 'only Ed25519 vkeys (type 0x01 or 0x04, 32-byte key) are taken',
  vkey_key_id_differs:
    'the key ID is not SHA-256(name, type, key)[:4]: the name, the type or the key was changed',
};

/**
 * A vkey an operator gave (LEDGER_WITNESSES, ooh-verify --witness and --ledger-key), read by @ooh/verify's readVkey
 * with node:crypto's SHA-256, so settings are read without an await; a refusal throws a NoteError that says, by the
 * package's code, what is wrong in the operator's words.
 */
export function parseVkey(text: string): Vkey {
  const read = readVkey(text, nodeSha256);
  if (read.ok) return read.vkey;
  throw new NoteError('malformed_vkey', VKEY_PROBLEMS[read.error.code] ?? read.error.message);
}

export function formatVkey(name: string, type: number, publicKey: Uint8Array): string {
  return `${name}+${keyId(name, type, publicKey).toString('hex')}+${Buffer.concat([Buffer.from([type]), publicKey]).toString('base64')}`;
}

export function ed25519PrivateKeyFromSeed(seed: Uint8Array): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

/** The 32 raw bytes of an Ed25519 public key (from a private or public KeyObject). */
export function rawEd25519PublicKey(key: KeyObject): Buffer {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  const der = pub.export({ format: 'der', type: 'spki' });
  return Buffer.from(der.subarray(der.length - 32));
}

export interface NoteSignature {
  name: string;
  id: Buffer;
  /** The signature bytes after the key ID. */
  signature: Buffer;
  /** The whole line, with its newline. */
  line: string;
}

export interface Note {
  /** The text, with its final newline. */
  text: string;
  signatures: NoteSignature[];
}

export function formatNote(note: Note): string {
  return `${note.text}\n${note.signatures.map((s) => s.line).join('')}`;
}

export function signatureLine(name: string, id: Uint8Array, signature: Uint8Array): NoteSignature {
  const bytes = Buffer.concat([id, signature]);
  return {
    name,
    id: Buffer.from(id),
    signature: Buffer.from(signature),
    line: `${EM_DASH} ${name} ${bytes.toString('base64')}\n`,
  };
}

/** signed-note "Ed25519 signatures": over the note text (with its final newline). */
export function signNote(text: string, name: string, key: KeyObject): NoteSignature {
  const publicKey = rawEd25519PublicKey(key);
  return signatureLine(name, keyId(name, SIG_ED25519, publicKey), sign(null, Buffer.from(text, 'utf8'), key));
}

/** A timestamped_signature (u64 big-endian timestamp || Ed25519 signature) over a checkpoint's text. */
export function cosign(text: string, name: string, key: KeyObject, timestamp: bigint): NoteSignature {
  if (timestamp <= 0n || timestamp > 2n ** 63n - 1n)
    throw new RangeError('a cosignature timestamp is 1..2^63-1');
  const publicKey = rawEd25519PublicKey(key);
  const time = Buffer.alloc(8);
  time.writeBigUInt64BE(timestamp);
  const signature = sign(null, cosignatureMessage(text, timestamp), key);
  return signatureLine(name, keyId(name, SIG_COSIGNATURE_V1, publicKey), Buffer.concat([time, signature]));
}

/**
 * tlog-checkpoint "Note text": origin, tree size (decimal, no leading zeros), root hash (base64); we write no
 * extension lines. @ooh/verify's parseCheckpoint reads it.
 */
export function checkpointText(checkpoint: { origin: string; size: number; rootHash: Uint8Array }): string {
  if (!Number.isSafeInteger(checkpoint.size) || checkpoint.size < 0) throw new RangeError('size');
  if (checkpoint.rootHash.length !== 32) throw new RangeError('the root hash is 32 bytes');
  return `${checkpoint.origin}\n${checkpoint.size}\n${Buffer.from(checkpoint.rootHash).toString('base64')}\n`;
}
