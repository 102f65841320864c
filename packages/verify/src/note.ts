import { base64Decode, bytesEqual, hexDecode, hexEncode, sha256, toArrayBuffer, utf8 } from './bytes.js';
import { VerificationError } from './errors.js';
import type { SyncSha256 } from './merkle.js';

/*
 * C2SP signed notes, checkpoints and Ed25519 cosignatures, verified (WebCrypto only):
 * https://c2sp.org/signed-note@v1.0.0, https://c2sp.org/tlog-checkpoint@v1.0.0, https://c2sp.org/tlog-cosignature.
 * The one place that reads a verifier key or a checkpoint and checks a note signature: the console's pages, the
 * verify CLI, the platform's witness client and the test witness all use it. The platform's src/ledger/note.ts signs
 * and formats, taking the key ID and cosignature message rules from here (keyIdInput, cosignatureMessage).
 */

/** signed-note signature types: 0x01 Ed25519 note signature, 0x04 timestamped Ed25519 cosignature v1. */
export const SIG_ED25519 = 0x01;
export const SIG_COSIGNATURE_V1 = 0x04;

export interface Vkey {
  name: string;
  /** 8 hex digits. */
  id: string;
  type: number;
  /** 32 bytes (Ed25519). */
  publicKey: Uint8Array;
  /** The vkey text it was read from (trimmed). */
  text: string;
}

/** signed-note: "Key names MUST be non-empty and MUST NOT contain any Unicode spaces or plus (U+002B)". */
export const isKeyName = (name: string): boolean => name.length > 0 && !/[\s+]/u.test(name);

/** What signed-note hashes for a key ID: key name || 0x0A || signature type || public key. */
export function keyIdInput(name: string, type: number, publicKey: Uint8Array): Uint8Array {
  const nameBytes = utf8(name);
  const input = new Uint8Array(nameBytes.length + 2 + publicKey.length);
  input.set(nameBytes);
  input.set([0x0a, type], nameBytes.length);
  input.set(publicKey, nameBytes.length + 2);
  return input;
}

/** signed-note: key ID = SHA-256(key name || 0x0A || signature type || public key)[:4], as hex. */
export async function keyIdHex(name: string, type: number, publicKey: Uint8Array): Promise<string> {
  return hexEncode((await sha256(keyIdInput(name, type, publicKey))).subarray(0, 4));
}

export type VkeyResult = { ok: true; vkey: Vkey } | { ok: false; error: VerificationError };

/** A vkey's fields before its key ID is checked, or why they are not a vkey. */
function vkeyFields(text: string): Vkey | VerificationError {
  // The name has no "+" and the key ID is hex: the base64 key after the second "+" may hold more of them.
  const trimmed = text.trim();
  const first = trimmed.indexOf('+');
  const second = first < 0 ? -1 : trimmed.indexOf('+', first + 1);
  if (second < 0)
    return new VerificationError('vkey_malformed', 'a vkey is <name>+<hex key ID>+<base64 key>');
  const name = trimmed.slice(0, first);
  const id = trimmed.slice(first + 1, second);
  const material = trimmed.slice(second + 1);
  if (!isKeyName(name))
    return new VerificationError('vkey_name', 'the key name is empty or holds a space or "+"');
  if (!/^[0-9a-f]{8}$/.test(id))
    return new VerificationError('vkey_key_id', 'the key ID is not 8 lowercase hex digits');
  const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(material) ? base64Decode(material) : null;
  if (!bytes) return new VerificationError('malformed', 'the key is not standard base64');
  const type = bytes[0];
  if (bytes.length !== 33 || (type !== SIG_ED25519 && type !== SIG_COSIGNATURE_V1))
    return new VerificationError(
      'unsupported_algorithm',
      'not an Ed25519 vkey (type 0x01 or 0x04, 32-byte key)',
    );
  return { name, id, type, publicKey: bytes.subarray(1), text: `${name}+${id}+${material}` };
}

function judgeKeyId(fields: Vkey, digest: Uint8Array): VkeyResult {
  return hexEncode(digest.subarray(0, 4)) === fields.id
    ? { ok: true, vkey: fields }
    : {
        ok: false,
        error: new VerificationError('vkey_key_id_differs', 'the key ID is not SHA-256(name, type, key)[:4]'),
      };
}

/**
 * signed-note "Verifier keys": `<key name>+hex(key ID)+base64(signature type || public key)`. Only Ed25519 types
 * (0x01, 0x04) are taken, and the key ID must be the one the name and key give (a vkey whose ID was made some other
 * way is refused, so a name and ID always mean one key). A refusal is a value with its code: vkey_malformed,
 * vkey_name, vkey_key_id, malformed (the key is not base64), unsupported_algorithm, vkey_key_id_differs.
 * `sha256`: a synchronous SHA-256 (node:crypto's) for a caller that cannot await, as MerkleRootBuilder takes one; the
 * rule stays here.
 */
export function readVkey(text: string): Promise<VkeyResult>;
export function readVkey(text: string, sha256: SyncSha256): VkeyResult;
export function readVkey(text: string, syncSha256?: SyncSha256): VkeyResult | Promise<VkeyResult> {
  if (typeof text !== 'string') throw new VerificationError('invalid_argument', 'a vkey is text');
  const fields = vkeyFields(text);
  if (fields instanceof VerificationError) {
    const refused: VkeyResult = { ok: false, error: fields };
    return syncSha256 ? refused : Promise.resolve(refused);
  }
  const input = keyIdInput(fields.name, fields.type, fields.publicKey);
  if (syncSha256) return judgeKeyId(fields, syncSha256(input));
  return sha256(input).then((digest) => judgeKeyId(fields, digest));
}

/** A vkey (readVkey), or null when it is not one. */
export async function parseVkey(text: string): Promise<Vkey | null> {
  const read = await readVkey(text);
  return read.ok ? read.vkey : null;
}

export interface NoteSignature {
  name: string;
  /** 8 hex digits. */
  id: string;
  /** The signature bytes after the key ID. */
  signature: Uint8Array;
  /** The signature line as written, with its newline (what a witness keeps or a client stores). */
  line: string;
}

/** A signed note: text (with its final newline) and signature lines; null when malformed. */
export function parseNote(note: string): { text: string; signatures: NoteSignature[] } | null {
  if (/[\u0000-\u0009\u000b-\u001f]/.test(note) || !note.endsWith('\n')) return null;
  const split = note.lastIndexOf('\n\n');
  if (split < 0) return null;
  const lines = note.slice(split + 2, -1).split('\n');
  if (lines.length > 64) return null;
  const signatures: NoteSignature[] = [];
  for (const line of lines) {
    const match = /^\u2014 (\S+) ([A-Za-z0-9+/]+={0,2})$/u.exec(line);
    const bytes = match ? base64Decode(match[2]!) : null;
    if (!match || !bytes || bytes.length < 5 || !isKeyName(match[1]!)) return null;
    signatures.push({
      name: match[1]!,
      id: hexEncode(bytes.subarray(0, 4)),
      signature: bytes.subarray(4),
      line: `${line}\n`,
    });
  }
  return { text: note.slice(0, split + 1), signatures };
}

export interface Checkpoint {
  origin: string;
  size: number;
  /** Hex. */
  root: string;
}

/** tlog-checkpoint note text: origin, size, base64 root hash, extension lines. */
export function parseCheckpoint(text: string): Checkpoint | null {
  const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : [];
  if (lines.length < 3 || lines.some((l) => l === '')) return null;
  const [origin, size, root] = lines as [string, string, string];
  const rootBytes = /^[A-Za-z0-9+/]{43}=$/.test(root) ? base64Decode(root) : null;
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size) || !rootBytes || rootBytes.length !== 32) return null;
  return { origin, size: Number(size), root: hexEncode(rootBytes) };
}

async function ed25519Verify(
  publicKey: Uint8Array,
  signature: Uint8Array,
  message: Uint8Array,
): Promise<boolean> {
  const key = await crypto.subtle.importKey('raw', toArrayBuffer(publicKey), { name: 'Ed25519' }, false, [
    'verify',
  ]);
  return crypto.subtle.verify({ name: 'Ed25519' }, key, toArrayBuffer(signature), toArrayBuffer(message));
}

/** tlog-cosignature "Ed25519 signed message": "cosignature/v1\ntime <t>\n" followed by the note text. */
export function cosignatureMessage(text: string, timestamp: bigint): Uint8Array {
  return utf8(`cosignature/v1\ntime ${timestamp.toString()}\n${text}`);
}

export type SignatureState =
  | { state: 'unknown' }
  | { state: 'valid'; vkey: Vkey; timestamp: number | null }
  | { state: 'invalid'; vkey: Vkey };

/** signed-note: signatures of unknown keys are ignored; one whose name and ID match a known key must verify. */
export async function checkSignature(
  text: string,
  sig: NoteSignature,
  keys: readonly Vkey[],
): Promise<SignatureState> {
  const vkey = keys.find((k) => k.name === sig.name && k.id === sig.id);
  if (!vkey) return { state: 'unknown' };
  if (vkey.type === SIG_ED25519) {
    const ok =
      sig.signature.length === 64 && (await ed25519Verify(vkey.publicKey, sig.signature, utf8(text)));
    return ok ? { state: 'valid', vkey, timestamp: null } : { state: 'invalid', vkey };
  }
  if (sig.signature.length !== 72) return { state: 'invalid', vkey };
  // tlog-cosignature: timestamped_signature = u64 big-endian timestamp || Ed25519 signature over
  // "cosignature/v1\ntime <timestamp>\n" followed by the checkpoint text.
  const view = new DataView(sig.signature.buffer, sig.signature.byteOffset, 8);
  const timestamp = view.getBigUint64(0);
  if (timestamp === 0n || timestamp > 2n ** 63n - 1n) return { state: 'invalid', vkey };
  return (await ed25519Verify(vkey.publicKey, sig.signature.subarray(8), cosignatureMessage(text, timestamp)))
    ? { state: 'valid', vkey, timestamp: Number(timestamp) }
    : { state: 'invalid', vkey };
}

export interface CosignedCheckpoint {
  checkpoint: Checkpoint;
  /** Pinned witnesses whose cosignature verifies, by name, with the cosignature's time (POSIX seconds). */
  cosigned: { name: string; timestamp: number }[];
  /** Pinned witnesses whose cosignature is there but does not verify. */
  invalid: string[];
  /**
   * Pinned witnesses whose cosignature verifies but is dated after now + COSIGNATURE_SKEW_SECONDS: refused. Present
   * only when there is one.
   */
  future?: string[];
}

/**
 * How far ahead of the reader's clock a cosignature's time may be (clocks differ a little). A witness dates its
 * cosignature when it makes it (tlog-cosignature: "the time at which the cosignature was generated"), so one dated
 * later than that was not made by an honest witness with a sane clock; it is refused, as ooh-verify refuses it.
 */
export const COSIGNATURE_SKEW_SECONDS = 300;

/**
 * A published checkpoint with its cosignatures checked against the pinned witness keys; null when malformed.
 * `now`: the reader's clock in milliseconds (default Date.now()).
 */
export async function checkCosignedCheckpoint(
  noteText: string,
  witnesses: readonly Vkey[],
  now: number = Date.now(),
): Promise<CosignedCheckpoint | null> {
  const note = parseNote(noteText);
  const checkpoint = note ? parseCheckpoint(note.text) : null;
  if (!note || !checkpoint) return null;
  const keys = witnesses.filter((w) => w.type === SIG_COSIGNATURE_V1);
  const cosigned: CosignedCheckpoint['cosigned'] = [];
  const invalid: string[] = [];
  const future: string[] = [];
  for (const sig of note.signatures) {
    const check = await checkSignature(note.text, sig, keys);
    if (check.state === 'valid' && check.timestamp !== null) {
      if (check.timestamp > Math.floor(now / 1000) + COSIGNATURE_SKEW_SECONDS) {
        if (!future.includes(check.vkey.name)) future.push(check.vkey.name);
      } else if (!cosigned.some((c) => c.name === check.vkey.name))
        cosigned.push({ name: check.vkey.name, timestamp: check.timestamp });
    } else if (check.state === 'invalid') {
      invalid.push(check.vkey.name);
    }
  }
  return { checkpoint, cosigned, invalid, ...(future.length > 0 ? { future } : {}) };
}

/**
 * Whether a published checkpoint is the ledger's: it names the pinned ledger key's name as its origin and carries
 * that key's valid signature (type 0x01). As `ooh-verify --ledger-key`: a line of the key that does not verify, or
 * none, refuses the checkpoint.
 */
export async function signedByLedgerKey(noteText: string, ledgerKey: Vkey): Promise<boolean> {
  const note = parseNote(noteText);
  const checkpoint = note ? parseCheckpoint(note.text) : null;
  if (!note || !checkpoint || ledgerKey.type !== SIG_ED25519 || checkpoint.origin !== ledgerKey.name)
    return false;
  let signed = false;
  for (const sig of note.signatures) {
    const check = await checkSignature(note.text, sig, [ledgerKey]);
    if (check.state === 'invalid') return false;
    if (check.state === 'valid') signed = true;
  }
  return signed;
}

/** Whether a checkpoint's root is the digest (hex) of a block. */
export function rootIs(checkpoint: Checkpoint, digestHex: string): boolean {
  const digest = hexDecode(digestHex);
  const root = hexDecode(checkpoint.root);
  return digest !== null && root !== null && bytesEqual(digest, root);
}
