/** What every export format is read into: the plays it reports, and why the other rows were left out. */

export const FORMATS = ['xibo', 'broadsign'] as const;
export type Format = (typeof FORMATS)[number];

/** One finished play as the source system reported it, before the mapping file names our player and approval. */
export interface SourcePlay {
  /** 1-based line of the export, for messages. */
  line: number;
  /** The source's identifier of the screen (Xibo: the Display column; Broadsign: the player id). */
  display: string;
  /** The source's identifier of what was played (Xibo: the Media column; Broadsign: the ad copy id). */
  media: string;
  /** Epoch milliseconds. */
  startMs: number;
  endMs: number;
  durationMs: number;
  /**
   * spec: play_id "Identifier of the play, unique for the player; characters A-Za-z0-9_-", made from the source's own
   * identifiers and the play's times as the export writes them, so the same row always gives the same play_id.
   */
  playId: string;
}

/**
 * Why a row of the export is not sent (the codes the summary counts by). Rows that are not plays at all (Xibo's
 * layout and event statistics) are counted apart as `notPlays`, not here.
 */
export const ROW_REFUSALS = [
  // Xibo: a row that sums several plays (Count > 1): its plays have no times of their own.
  'aggregated_row',
  // A row without the columns, numbers or times a play needs.
  'bad_row',
  // A local time that a daylight-saving jump skipped in the given zone.
  'time_not_in_zone',
  // A play row that names no media.
  'media_missing',
  // The mapping file has no player for the row's display, or no approval for its media.
  'unmapped_display',
  'unmapped_media',
  // The same play (same play_id for the same player) twice in one export: sent once.
  'repeated_in_export',
] as const;
export type RowRefusal = (typeof ROW_REFUSALS)[number];

export interface RefusedRow {
  line: number;
  reason: RowRefusal;
  /** What was wrong, for the operator (a column's value, the display's name). */
  detail: string;
}

export interface ReadResult {
  format: Format;
  rows: number;
  plays: SourcePlay[];
  refused: RefusedRow[];
  /** Rows that are statistics but not plays of a file, by their type (Xibo: layout, event). */
  notPlays: Record<string, number>;
}

/** The export as a whole cannot be read (a missing header, no time zone): nothing of it is sent. */
export class ExportError extends Error {
  constructor(
    readonly code: 'unknown_format' | 'bad_header' | 'no_time_zone' | 'unreadable',
    message: string,
  ) {
    super(message);
    this.name = 'ExportError';
  }
}
