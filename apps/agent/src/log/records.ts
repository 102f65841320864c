import type { RejectCode, Slot } from '@ooh/protocol';

/** Screen power as the spec's record table names it (`screen.power`). */
export type ScreenPower = 'on' | 'off' | 'unknown';

/**
 * A `play` record exactly as it goes on the wire (spec, "Proof-of-play record"). Keys are written in this
 * order; the JSON text stored at logging time is the text sent, so a batch can always be rebuilt byte for byte.
 */
export interface WirePlayRecord {
  kind: 'play';
  seq: number;
  play_id: string;
  approval_number?: string;
  slot?: Slot;
  media_sha256: string;
  start: string;
  end: string;
  duration_ms: number;
  structure: string;
  screen: { power: ScreenPower };
  detail?: Record<string, unknown>;
}

/** A `reject`, `mode_change` or `tamper` record (spec: `at`, `code` on reject, `detail`). */
export interface WireStatusRecord {
  kind: 'reject' | 'mode_change' | 'tamper';
  seq: number;
  at: string;
  code?: RejectCode;
  detail?: Record<string, unknown>;
}

export type WireRecord = WirePlayRecord | WireStatusRecord;

/** What the scheduler knows about a finished play; the log adds `seq` and `duration_ms`. */
export interface PlayInput {
  playId: string;
  approvalNumber?: string;
  slot?: Slot;
  mediaSha256: string;
  start: Date;
  end: Date;
  structure: string;
  screenPower: ScreenPower;
  detail?: Record<string, unknown>;
}

export interface StatusInput {
  kind: 'reject' | 'mode_change' | 'tamper';
  at: Date;
  code?: RejectCode;
  detail?: Record<string, unknown>;
}

export interface LoggedRecord {
  seq: number;
  record: WireRecord;
  /** The exact JSON text stored and later sent. */
  json: string;
}

/** RFC 3339 with milliseconds in UTC (spec: "RFC 3339 with milliseconds"). */
export function rfc3339(instant: Date): string {
  return instant.toISOString();
}
