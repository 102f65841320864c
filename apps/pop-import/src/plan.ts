import { sha256Hex } from '@ooh/crypto';
import { LIMITS, POP_SCHEMA } from '@ooh/protocol';
import type { RefusedRow, SourcePlay } from './formats/source.js';
import type { MappingFile, MediaTarget } from './mapping.js';

/*
 * From the export's plays to the exact bytes of the batches. Everything here is a function of its inputs: the same
 * plays, started from the same numbers, give the same bodies byte for byte, which is what lets a re-run resend
 * "the same bytes" (spec CMS rule 4) instead of new bytes under a batch_seq already taken (409 batch_conflict).
 *
 *  - plays are ordered by start, then player, then play_id (never by their place in the file, so an export with its
 *    rows in another order is the same import);
 *  - spec record seq: "Record number for this player, +1 for every record across batches, from 1": each player's
 *    plays get the numbers after the last one this installation gave it;
 *  - batches are cut at 10 000 records (spec Limits "CMS batch records: at most 10 000") or at BODY_MAX_BYTES of JSON,
 *    whichever comes first, so that even an uncompressed body is under the 4 MB on the wire;
 *  - no sent_at: it is optional, and a time of cutting would make a re-cut batch differ from the first.
 */

/** Below the spec's "4 MB on the wire": a body that cannot be compressed within the 20:1 rule is sent as it is. */
export const BODY_MAX_BYTES = 3_500_000;

/** A play with our player and approval, ready to be numbered. */
export interface MappedPlay {
  line: number;
  player: string;
  playId: string;
  target: MediaTarget;
  startMs: number;
  endMs: number;
  durationMs: number;
}

export interface Mapped {
  plays: MappedPlay[];
  refused: RefusedRow[];
}

const own = <T>(record: Record<string, T>, key: string): T | undefined =>
  Object.hasOwn(record, key) ? record[key] : undefined;

/** Names our player and approval for each play; sorts them; drops a play the export lists twice. */
export function mapPlays(plays: readonly SourcePlay[], mapping: MappingFile): Mapped {
  const refused: RefusedRow[] = [];
  const mapped: MappedPlay[] = [];
  for (const play of plays) {
    const player = own(mapping.players, play.display);
    if (player === undefined) {
      refused.push({ line: play.line, reason: 'unmapped_display', detail: play.display });
      continue;
    }
    const target = own(mapping.media, play.media);
    if (target === undefined) {
      refused.push({ line: play.line, reason: 'unmapped_media', detail: play.media });
      continue;
    }
    mapped.push({
      line: play.line,
      player,
      playId: play.playId,
      target,
      startMs: play.startMs,
      endMs: play.endMs,
      durationMs: play.durationMs,
    });
  }
  mapped.sort(
    (a, b) =>
      a.startMs - b.startMs || compare(a.player, b.player) || compare(a.playId, b.playId) || a.line - b.line,
  );
  // spec: play_id "unique for the player": a row the export repeats is one play, sent once.
  const seen = new Set<string>();
  const unique: MappedPlay[] = [];
  for (const play of mapped) {
    const key = `${play.player}\u0000${play.playId}`;
    if (seen.has(key)) {
      refused.push({ line: play.line, reason: 'repeated_in_export', detail: play.playId });
      continue;
    }
    seen.add(key);
    unique.push(play);
  }
  refused.sort((a, b) => a.line - b.line);
  return { plays: unique, refused };
}

/** Code-unit order: the same on every machine and locale. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The fields of a record other than its seq, in the order they are written. */
function recordFields(play: MappedPlay): Record<string, unknown> {
  const target = play.target;
  return {
    play_id: play.playId,
    player: play.player,
    ...('slot' in target ? { slot: target.slot } : { approval_number: target.approval_number }),
    media_sha256: target.media_sha256,
    start: new Date(play.startMs).toISOString(),
    end: new Date(play.endMs).toISOString(),
    duration_ms: play.durationMs,
  };
}

/** What identifies an import: its plays with our names, in order, without numbers. Same plays, same fingerprint. */
export function fingerprintOf(plays: readonly MappedPlay[]): string {
  return sha256Hex(plays.map((play) => JSON.stringify(recordFields(play))).join('\n'));
}

/** The numbers an installation has given: its next batch_seq, the last body's hash, each player's last seq. */
export interface Counters {
  batchSeq: number;
  prevSha256: string;
  /** A Map, not an object: an external id may be any text the console takes, "__proto__" included. */
  seqs: ReadonlyMap<string, number>;
}

export interface PlannedBatch {
  batchSeq: number;
  body: Buffer;
  sha256: string;
  records: number;
  /** The export line of each record, by its index in the batch (for the answer's items). */
  lines: number[];
}

export interface Plan {
  batches: PlannedBatch[];
  /** The counters after the plan. */
  end: Counters;
  /** The counters of the plan's own players before it (what a re-run starts from). */
  start: Counters;
}

export function planBatches(
  plays: readonly MappedPlay[],
  sourceId: string,
  counters: Counters,
  limits: { maxRecords?: number; maxBytes?: number } = {},
): Plan {
  const maxRecords = limits.maxRecords ?? LIMITS.cmsRecordsMax;
  const maxBytes = limits.maxBytes ?? BODY_MAX_BYTES;
  const seqs = new Map<string, number>();
  for (const play of plays) {
    if (!seqs.has(play.player)) seqs.set(play.player, counters.seqs.get(play.player) ?? 0);
  }
  const startSeqs = new Map(seqs);
  const batches: PlannedBatch[] = [];
  let batchSeq = counters.batchSeq;
  let prevSha256 = counters.prevSha256;
  let records: string[] = [];
  let lines: number[] = [];
  let bytes = 0;
  const head = (seq: number, prev: string): string =>
    `{"schema":${JSON.stringify(POP_SCHEMA)},"source_id":${JSON.stringify(sourceId)},"batch_seq":${seq},` +
    `"prev_sha256":${JSON.stringify(prev)},"records":[`;
  let headBytes = Buffer.byteLength(head(batchSeq, prevSha256));
  const cut = () => {
    const body = Buffer.from(`${head(batchSeq, prevSha256)}${records.join(',')}]}`, 'utf8');
    const sha256 = sha256Hex(body);
    batches.push({ batchSeq, body, sha256, records: records.length, lines });
    prevSha256 = sha256;
    batchSeq += 1;
    records = [];
    lines = [];
    bytes = 0;
    headBytes = Buffer.byteLength(head(batchSeq, prevSha256));
  };
  for (const play of plays) {
    const seq = seqs.get(play.player)! + 1;
    const record = JSON.stringify({ kind: 'play', seq, ...recordFields(play) });
    const recordBytes = Buffer.byteLength(record) + 1;
    if (
      records.length > 0 &&
      (records.length >= maxRecords || headBytes + bytes + recordBytes + 2 > maxBytes)
    )
      cut();
    seqs.set(play.player, seq);
    records.push(record);
    lines.push(play.line);
    bytes += recordBytes;
  }
  if (records.length > 0) cut();
  return {
    batches,
    start: { batchSeq: counters.batchSeq, prevSha256: counters.prevSha256, seqs: startSeqs },
    end: { batchSeq, prevSha256, seqs: new Map([...counters.seqs, ...seqs]) },
  };
}
