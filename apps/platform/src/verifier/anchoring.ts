import {
  type Checkpoint,
  checkSignature,
  NoteError,
  parseCheckpointText,
  parseNote,
  SIG_COSIGNATURE_V1,
  type Vkey,
} from '../ledger/note.js';

/**
 * How far ahead of the verifier's clock a cosignature's time may be. tlog-cosignature: the timestamp is "the time at
 * which the cosignature was generated"; one dated later than now was not made by an honest witness with a sane clock
 * (or was made to look fresher than it is), so it is refused. Five minutes allows for clocks that differ a little.
 */
export const COSIGNATURE_SKEW_SECONDS = 300;

export interface CosignedCheckpoint {
  checkpoint: Checkpoint;
  /** Names of the pinned witnesses whose cosignature verifies. */
  cosigned: string[];
  /** Pinned witnesses whose cosignature line is there but is refused: it does not verify, or is dated ahead. */
  invalid: { name: string; reason: string }[];
  /** The cosignatures' timestamps by witness (POSIX seconds). */
  timestamps: Record<string, number>;
}

export interface CheckpointPins {
  /**
   * The ledger's own checkpoint key (a signed-note vkey of type 0x01, named after the ledger's origin) the reader
   * pins: a checkpoint not signed by it is refused whole, its cosignatures with it.
   */
  ledgerKey?: Vkey;
  /** The verifier's clock, milliseconds (default Date.now()). */
  now?: number;
}

/**
 * Reads a published checkpoint (c2sp.org/tlog-checkpoint) and checks its cosignatures (c2sp.org/tlog-cosignature v1)
 * against the witness keys the reader pins. signed-note: signatures of unknown keys are ignored; one whose name and
 * key ID match a pinned key must verify; and a cosignature dated more than COSIGNATURE_SKEW_SECONDS after the
 * verifier's clock is refused. With the ledger key pinned (`ooh-verify --ledger-key`), the checkpoint must carry its
 * valid signature and name its origin; without it, the log's signature is not required (witnesses checked it before
 * cosigning).
 */
export function checkCosignedCheckpoint(
  noteText: string,
  witnesses: readonly Vkey[],
  pins: CheckpointPins = {},
): CosignedCheckpoint | { error: string } {
  let note: ReturnType<typeof parseNote>;
  let checkpoint: Checkpoint;
  try {
    note = parseNote(noteText);
    checkpoint = parseCheckpointText(note.text);
  } catch (error) {
    return { error: `not a checkpoint note (${error instanceof NoteError ? error.message : String(error)})` };
  }
  const ledgerKey = pins.ledgerKey;
  if (ledgerKey) {
    const problem = ledgerSignatureProblem(note, checkpoint, ledgerKey);
    if (problem !== null) return { error: problem };
  }
  const now = Math.floor((pins.now ?? Date.now()) / 1000);
  const keys = witnesses.filter((w) => w.type === SIG_COSIGNATURE_V1);
  const cosigned = new Set<string>();
  const invalid: CosignedCheckpoint['invalid'] = [];
  const timestamps: Record<string, number> = {};
  for (const sig of note.signatures) {
    const check = checkSignature(note.text, sig, keys);
    if (check.state === 'valid' && check.timestamp !== null) {
      const at = Number(check.timestamp);
      if (at > now + COSIGNATURE_SKEW_SECONDS) {
        invalid.push({
          name: check.vkey.name,
          reason: `the cosignature is dated ${isoSeconds(at)}, more than ${COSIGNATURE_SKEW_SECONDS / 60} minutes after this computer's clock (${isoSeconds(now)})`,
        });
        continue;
      }
      cosigned.add(check.vkey.name);
      timestamps[check.vkey.name] = at;
    } else if (check.state === 'invalid') {
      invalid.push({ name: check.vkey.name, reason: check.reason });
    }
  }
  return { checkpoint, cosigned: [...cosigned].sort(), invalid, timestamps };
}

/** Why the checkpoint is not the pinned ledger key's, or null when it carries the key's valid signature. */
function ledgerSignatureProblem(
  note: ReturnType<typeof parseNote>,
  checkpoint: Checkpoint,
  ledgerKey: Vkey,
): string | null {
  const pinned = `${ledgerKey.name}+${ledgerKey.id.toString('hex')}`;
  // tlog-checkpoint: "The log's key name in its signature line SHOULD match the origin line"; ours always does.
  if (checkpoint.origin !== ledgerKey.name) {
    return `the checkpoint's origin "${checkpoint.origin}" is not the pinned ledger key's name (${pinned})`;
  }
  let signed = false;
  for (const sig of note.signatures) {
    const check = checkSignature(note.text, sig, [ledgerKey]);
    if (check.state === 'invalid') return `the signature of the pinned ledger key ${pinned} does not verify`;
    if (check.state === 'valid') signed = true;
  }
  return signed ? null : `the checkpoint is not signed by the pinned ledger key ${pinned}`;
}

function isoSeconds(seconds: number): string {
  const date = new Date(seconds * 1000);
  return Number.isNaN(date.getTime()) ? `${seconds} s` : date.toISOString().replace('.000Z', 'Z');
}
