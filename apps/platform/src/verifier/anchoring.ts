import {
  type Checkpoint,
  checkSignature,
  NoteError,
  parseCheckpointText,
  parseNote,
  SIG_COSIGNATURE_V1,
  type Vkey,
} from '../ledger/note.js';

export interface CosignedCheckpoint {
  checkpoint: Checkpoint;
  /** Names of the pinned witnesses whose cosignature verifies. */
  cosigned: string[];
  /** Pinned witnesses whose cosignature line is there but does not verify. */
  invalid: { name: string; reason: string }[];
  /** The cosignatures' timestamps by witness (POSIX seconds). */
  timestamps: Record<string, number>;
}

/**
 * Reads a published checkpoint (c2sp.org/tlog-checkpoint) and checks its cosignatures (c2sp.org/tlog-cosignature v1)
 * against the witness keys the reader pins. signed-note: signatures of unknown keys are ignored; one whose name and
 * key ID match a pinned key must verify. The log's own signature is not required here: witnesses checked it before
 * cosigning, and a reader holding the ledger key can check it with the same note functions.
 */
export function checkCosignedCheckpoint(
  noteText: string,
  witnesses: readonly Vkey[],
): CosignedCheckpoint | { error: string } {
  let note: ReturnType<typeof parseNote>;
  let checkpoint: Checkpoint;
  try {
    note = parseNote(noteText);
    checkpoint = parseCheckpointText(note.text);
  } catch (error) {
    return { error: `not a checkpoint note (${error instanceof NoteError ? error.message : String(error)})` };
  }
  const keys = witnesses.filter((w) => w.type === SIG_COSIGNATURE_V1);
  const cosigned = new Set<string>();
  const invalid: CosignedCheckpoint['invalid'] = [];
  const timestamps: Record<string, number> = {};
  for (const sig of note.signatures) {
    const check = checkSignature(note.text, sig, keys);
    if (check.state === 'valid' && check.timestamp !== null) {
      cosigned.add(check.vkey.name);
      timestamps[check.vkey.name] = Number(check.timestamp);
    } else if (check.state === 'invalid') {
      invalid.push({ name: check.vkey.name, reason: check.reason });
    }
  }
  return { checkpoint, cosigned: [...cosigned].sort(), invalid, timestamps };
}
