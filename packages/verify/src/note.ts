import { base64Decode, bytesEqual, hexDecode, hexEncode, sha256, toArrayBuffer, utf8 } from './bytes.js';

/*
 * The verifying half of C2SP signed notes, checkpoints and Ed25519 cosignatures for the browser (WebCrypto only):
 * https://c2sp.org/signed-note@v1.0.0, https://c2sp.org/tlog-checkpoint@v1.0.0, https://c2sp.org/tlog-cosignature.
 * The same rules as the platform's src/ledger/note.ts, which signs; both are tested against the C2SP examples.
 */

/** signed-note signature types: 0x01 Ed25519 note signature, 0x04 timestamped Ed25519 cosignature v1. */
export const SIG_ED25519 = 0x01;
export const SIG_COSIGNATURE_V1 = 0x04;

export interface Vkey {
  name: string;
  /** 8 hex digits. */
  id: string;
  type: number;
  publicKey: Uint8Array;
  text: string;
}

const isKeyName = (name: string) => name.length > 0 && !/[\s+]/u.test(name);

/** signed-note: key ID = SHA-256(key name || 0x0A || signature type || public key)[:4], as hex. */
export async function keyIdHex(name: string, type: number, publicKey: Uint8Array): Promise<string> {
  const nameBytes = utf8(name);
  const input = new Uint8Array(nameBytes.length + 2 + publicKey.length);
  input.set(nameBytes);
  input.set([0x0a, type], nameBytes.length);
  input.set(publicKey, nameBytes.length + 2);
  return hexEncode((await sha256(input)).subarray(0, 4));
}

/** A vkey `<name>+<hex key ID>+<base64(type || key)>`, Ed25519 only; null when it is not one. */
export async function parseVkey(text: string): Promise<Vkey | null> {
  // The name has no "+" and the key ID is hex: the base64 key after the second "+" may hold more of them.
  const trimmed = text.trim();
  const first = trimmed.indexOf('+');
  const second = first < 0 ? -1 : trimmed.indexOf('+', first + 1);
  if (second < 0) return null;
  const name = trimmed.slice(0, first);
  const id = trimmed.slice(first + 1, second);
  const material = trimmed.slice(second + 1);
  if (!isKeyName(name) || !/^[0-9a-f]{8}$/.test(id)) return null;
  const bytes = base64Decode(material);
  if (!bytes || bytes.length !== 33 || (bytes[0] !== SIG_ED25519 && bytes[0] !== SIG_COSIGNATURE_V1))
    return null;
  const publicKey = bytes.subarray(1);
  if ((await keyIdHex(name, bytes[0], publicKey)) !== id) return null;
  return { name, id, type: bytes[0], publicKey, text: `${name}+${id}+${material}` };
}

export interface NoteSignature {
  name: string;
  id: string;
  signature: Uint8Array;
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
    signatures.push({ name: match[1]!, id: hexEncode(bytes.subarray(0, 4)), signature: bytes.subarray(4) });
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
  const message = utf8(`cosignature/v1\ntime ${timestamp.toString()}\n${text}`);
  return (await ed25519Verify(vkey.publicKey, sig.signature.subarray(8), message))
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
