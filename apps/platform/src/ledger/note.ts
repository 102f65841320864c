import { createHash, createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';

/*
 * C2SP signed notes, checkpoints and Ed25519 cosignatures (https://c2sp.org/signed-note@v1.0.0,
 * https://c2sp.org/tlog-checkpoint@v1.0.0, https://c2sp.org/tlog-cosignature), for the ledger's checkpoints, the
 * witnesses that cosign them and the verify CLI. The verifying half for the browser is @ooh/verify's, on WebCrypto
 * (packages/verify/src/note.ts); both are tested against the examples the C2SP texts publish.
 */

/** signed-note "Signature types": 0x01 Ed25519 note signature, 0x04 timestamped Ed25519 cosignature (v1). */
export const SIG_ED25519 = 0x01;
export const SIG_COSIGNATURE_V1 = 0x04;

const EM_DASH = '\u2014';
// The PKCS#8 and SPKI prefixes of a raw Ed25519 key (RFC 8410), so node:crypto takes 32 raw bytes.
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export class NoteError extends Error {
  constructor(
    readonly code: 'malformed_note' | 'malformed_vkey' | 'malformed_checkpoint',
    message: string,
  ) {
    super(message);
    this.name = 'NoteError';
  }
}

/** signed-note: "Key names MUST be non-empty and MUST NOT contain any Unicode spaces or plus (U+002B)". */
export function isKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name);
}

/** signed-note: key ID = SHA-256(key name || 0x0A || signature type || public key)[:4]. */
export function keyId(name: string, type: number, publicKey: Uint8Array): Buffer {
  return createHash('sha256')
    .update(name, 'utf8')
    .update(Buffer.from([0x0a, type]))
    .update(publicKey)
    .digest()
    .subarray(0, 4);
}

export interface Vkey {
  name: string;
  /** 4 bytes. */
  id: Buffer;
  type: number;
  /** 32 bytes (Ed25519). */
  publicKey: Buffer;
  /** The vkey text it was read from. */
  text: string;
}

/**
 * signed-note "Verifier keys": `<key name>+hex(key ID)+base64(signature type || public key)`. Only Ed25519 types
 * (0x01, 0x04) are taken; the key ID must be the one the name and key give (we never accept a vkey whose ID was made
 * some other way, so a name and ID always mean one key).
 */
export function parseVkey(text: string): Vkey {
  // The name has no "+" and the key ID is hex: the base64 key after the second "+" may hold more of them.
  const trimmed = text.trim();
  const first = trimmed.indexOf('+');
  const second = first < 0 ? -1 : trimmed.indexOf('+', first + 1);
  if (second < 0) throw new NoteError('malformed_vkey', 'a vkey is <name>+<hex key ID>+<base64 key>');
  const name = trimmed.slice(0, first);
  const idHex = trimmed.slice(first + 1, second);
  const material = trimmed.slice(second + 1);
  if (!isKeyName(name)) throw new NoteError('malformed_vkey', `"${name}" is not a key name`);
  if (!/^[0-9a-f]{8}$/.test(idHex))
    throw new NoteError('malformed_vkey', 'the key ID is 8 lowercase hex digits');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(material))
    throw new NoteError('malformed_vkey', 'the key is not standard base64');
  const bytes = Buffer.from(material, 'base64');
  const type = bytes[0];
  if (bytes.length !== 33 || (type !== SIG_ED25519 && type !== SIG_COSIGNATURE_V1))
    throw new NoteError('malformed_vkey', 'only Ed25519 vkeys (type 0x01 or 0x04, 32-byte key) are taken');
  const publicKey = bytes.subarray(1);
  const id = Buffer.from(idHex, 'hex');
  if (!keyId(name, type, publicKey).equals(id))
    throw new NoteError('malformed_vkey', `the key ID ${idHex} is not SHA-256(name, type, key)[:4]`);
  return { name, id, type, publicKey, text: `${name}+${idHex}+${material}` };
}

export function formatVkey(name: string, type: number, publicKey: Uint8Array): string {
  return `${name}+${keyId(name, type, publicKey).toString('hex')}+${Buffer.concat([Buffer.from([type]), publicKey]).toString('base64')}`;
}

export function ed25519PublicKey(raw: Uint8Array): KeyObject {
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
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

/** At least the 16 signatures signed-note asks verifiers to take, and a bound on the size. */
const MAX_SIGNATURES = 64;
const MAX_NOTE_BYTES = 64 * 1024;

/** Parses signature lines ("— <name> <base64>\n" each). */
export function parseSignatureLines(text: string): NoteSignature[] {
  if (text === '' || !text.endsWith('\n'))
    throw new NoteError('malformed_note', 'signature lines end in a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length > MAX_SIGNATURES) throw new NoteError('malformed_note', 'too many signatures');
  return lines.map((line) => {
    const match = /^\u2014 (\S+) ([A-Za-z0-9+/]+={0,2})$/u.exec(line);
    if (!match || !isKeyName(match[1]!))
      throw new NoteError('malformed_note', `not a signature line: ${line}`);
    const bytes = Buffer.from(match[2]!, 'base64');
    if (bytes.length < 5) throw new NoteError('malformed_note', 'a signature holds a key ID and a signature');
    return { name: match[1]!, id: bytes.subarray(0, 4), signature: bytes.subarray(4), line: `${line}\n` };
  });
}

/**
 * signed-note "Format": text ending in a newline, a blank line, then one or more signature lines. "Signed notes MUST
 * be valid UTF-8 and MUST NOT contain any ASCII control characters ... other than newline"; the text is separated
 * from the signatures by the last empty line.
 */
export function parseNote(input: string | Uint8Array): Note {
  const bytes = typeof input === 'string' ? Buffer.from(input, 'utf8') : Buffer.from(input);
  if (bytes.length > MAX_NOTE_BYTES) throw new NoteError('malformed_note', 'the note is too large');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new NoteError('malformed_note', 'the note is not UTF-8');
  }
  if (/[\u0000-\u0009\u000b-\u001f]/.test(text)) throw new NoteError('malformed_note', 'control characters');
  const split = text.lastIndexOf('\n\n');
  if (split < 0) throw new NoteError('malformed_note', 'no blank line before the signatures');
  return { text: text.slice(0, split + 1), signatures: parseSignatureLines(text.slice(split + 2)) };
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

/** tlog-cosignature "Ed25519 signed message": "cosignature/v1\ntime <t>\n" followed by the note text. */
export function cosignatureMessage(text: string, timestamp: bigint): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp.toString()}\n${text}`, 'utf8');
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

export type SignatureCheck =
  | { state: 'unknown' }
  | { state: 'valid'; vkey: Vkey; timestamp: bigint | null }
  | { state: 'invalid'; vkey: Vkey; reason: string };

/**
 * Checks one signature line against the keys the reader trusts. signed-note: "Verifiers MUST ignore signatures from
 * unknown keys, even if they share a name or ID (but not both) with a known key. If the key name and ID match a known
 * key, verifiers MUST verify the signature."
 */
export function checkSignature(text: string, sig: NoteSignature, keys: readonly Vkey[]): SignatureCheck {
  const vkey = keys.find((k) => k.name === sig.name && k.id.equals(sig.id));
  if (!vkey) return { state: 'unknown' };
  const key = ed25519PublicKey(vkey.publicKey);
  if (vkey.type === SIG_ED25519) {
    if (sig.signature.length !== 64)
      return { state: 'invalid', vkey, reason: 'not a 64-byte Ed25519 signature' };
    return verify(null, Buffer.from(text, 'utf8'), key, sig.signature)
      ? { state: 'valid', vkey, timestamp: null }
      : { state: 'invalid', vkey, reason: 'the Ed25519 signature does not verify' };
  }
  if (sig.signature.length !== 72)
    return { state: 'invalid', vkey, reason: 'not a 72-byte timestamped signature' };
  const timestamp = sig.signature.readBigUInt64BE(0);
  // tlog-cosignature: "It MUST NOT exceed 2^63 - 1"; tlog-witness: "the timestamp MUST NOT be zero".
  if (timestamp === 0n || timestamp > 2n ** 63n - 1n)
    return { state: 'invalid', vkey, reason: 'the cosignature timestamp is 0 or beyond 2^63-1' };
  return verify(null, cosignatureMessage(text, timestamp), key, sig.signature.subarray(8))
    ? { state: 'valid', vkey, timestamp }
    : { state: 'invalid', vkey, reason: 'the cosignature does not verify' };
}

export interface Checkpoint {
  origin: string;
  size: number;
  /** 32 bytes. */
  rootHash: Buffer;
  /** Extension lines (we write none). */
  extensions: string[];
}

/** tlog-checkpoint "Note text": origin, tree size (decimal, no leading zeros), root hash (base64), extension lines. */
export function checkpointText(checkpoint: Pick<Checkpoint, 'origin' | 'size' | 'rootHash'>): string {
  if (!Number.isSafeInteger(checkpoint.size) || checkpoint.size < 0) throw new RangeError('size');
  if (checkpoint.rootHash.length !== 32) throw new RangeError('the root hash is 32 bytes');
  return `${checkpoint.origin}\n${checkpoint.size}\n${checkpoint.rootHash.toString('base64')}\n`;
}

export function parseCheckpointText(text: string): Checkpoint {
  const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : [];
  const [origin, size, root, ...extensions] = lines;
  if (origin === undefined || size === undefined || root === undefined || lines.some((l) => l === ''))
    throw new NoteError('malformed_checkpoint', 'a checkpoint is at least three non-empty lines');
  if (!/^(0|[1-9][0-9]*)$/.test(size) || !Number.isSafeInteger(Number(size)))
    throw new NoteError('malformed_checkpoint', 'the tree size is a decimal number without leading zeros');
  const rootHash = Buffer.from(root, 'base64');
  if (!/^[A-Za-z0-9+/]{43}=$/.test(root) || rootHash.length !== 32)
    throw new NoteError('malformed_checkpoint', 'the root hash is 32 bytes in base64');
  return { origin, size: Number(size), rootHash, extensions };
}
