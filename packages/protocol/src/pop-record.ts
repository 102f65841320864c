import { TypeCompiler } from '@sinclair/typebox/compiler';
import { PopRecord, Src } from './schemas/pop.js';

/*
 * Per-record judgement of the parts that need no state (DESIGN.md §5 "invalid_record (schema)", "kind_not_allowed").
 * Everything that needs the clock or the database (time_in_future, too_old, too_short, end_before_start,
 * approval_missing, player_unknown, flags) is the platform's.
 */

const popRecordCheck = TypeCompiler.Compile(PopRecord);
const srcCheck = TypeCompiler.Compile(Src);

export type PopChannel = 'agent' | 'cms';

export type PopRecordCheck =
  | { ok: true; record: PopRecord }
  | { ok: false; reason: 'invalid_record' | 'kind_not_allowed' };

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// spec CMS body: "records ... kind must be play"; the record table: play_id, start, end, duration_ms "yes on CMS
// channel", player "yes on CMS channel".
const CMS_REQUIRED = ['play_id', 'start', 'end', 'duration_ms', 'player'] as const;
// spec record table: seq "required on play", media_sha256 "required on play" (both channels).
const PLAY_REQUIRED = ['seq', 'media_sha256'] as const;

export function checkPopRecord(record: unknown, channel: PopChannel): PopRecordCheck {
  if (!isPlainObject(record)) return { ok: false, reason: 'invalid_record' };
  // spec CMS rule 2: refused "when its kind is not play". A kind outside the vocabulary is no play either.
  if (channel === 'cms' && typeof record.kind === 'string' && record.kind !== 'play') {
    return { ok: false, reason: 'kind_not_allowed' };
  }
  if (!popRecordCheck.Check(record)) return { ok: false, reason: 'invalid_record' };
  if (record.kind === 'play' && PLAY_REQUIRED.some((field) => record[field] === undefined)) {
    return { ok: false, reason: 'invalid_record' };
  }
  if (channel === 'cms' && CMS_REQUIRED.some((field) => record[field] === undefined)) {
    return { ok: false, reason: 'invalid_record' };
  }
  return { ok: true, record };
}

/**
 * The attribution tag of a play, or null. spec: "A tag of another shape is ignored and the play counts all the
 * same": a malformed tag is never a reason to refuse the record, so this returns null instead of throwing.
 */
export function parseSrc(detail: unknown): Src | null {
  if (!isPlainObject(detail)) return null;
  const src = detail.src;
  return srcCheck.Check(src) ? src : null;
}
