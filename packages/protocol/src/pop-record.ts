import { TypeCompiler } from '@sinclair/typebox/compiler';
import { LIMITS } from './limits.js';
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

export function checkPopRecord(value: unknown, channel: PopChannel): PopRecordCheck {
  if (!isPlainObject(value)) return { ok: false, reason: 'invalid_record' };
  let record = value;
  // spec CMS rule 2: refused "when its kind is not play". A kind outside the vocabulary is no play either.
  if (channel === 'cms' && typeof record.kind === 'string' && record.kind !== 'play') {
    return { ok: false, reason: 'kind_not_allowed' };
  }
  // spec: screen is "Agent channel only": a CMS record's screen is ignored, whatever its shape (a play is not
  // refused for a field that has no meaning there).
  if (channel === 'cms' && record.screen !== undefined) record = without(record, 'screen');
  // The free-form objects first: they must be small and shallow before anything walks, stores or serialises them.
  // A play's detail is neither stored nor walked: only its src tag is read, and "a tag of another shape is ignored
  // and the play counts all the same" (parseSrc bounds the tag itself). The detail of a reject, mode_change or
  // tamper is kept, so one that cannot be is refused with its record, never with its batch.
  if (record.kind !== 'play' && !freeFormWithinLimits(record.detail)) {
    return { ok: false, reason: 'invalid_record' };
  }
  if (!freeFormWithinLimits(record.screen)) return { ok: false, reason: 'invalid_record' };
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
  // A tag that could not be kept (over the free-form bounds, a text with U+0000 or a lone surrogate) is of
  // another shape too.
  return srcCheck.Check(src) && freeFormWithinLimits(src) ? src : null;
}

/** The record without one of its fields (a copy; the record as sent stays in the kept body). */
function without(record: Record<string, unknown>, field: string): Record<string, unknown> {
  const { [field]: _dropped, ...rest } = record;
  return rest;
}

/** Browser-safe (the package has no Node dependency). */
const utf8 = new TextEncoder();

/** Whether a text holds a UTF-16 surrogate without its other half (no Unicode scalar value). */
function hasLoneSurrogate(text: string): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    if (unit > 0xdbff) return true;
    const next = text.charCodeAt(i + 1);
    if (!(next >= 0xdc00 && next <= 0xdfff)) return true;
    i += 1;
  }
  return false;
}

/**
 * A text PostgreSQL cannot give back from a kept object: a lone surrogate (json refuses its escape) or U+0000 (json
 * keeps the escape, but every operator that reads a field, `->`, `->>`, an index on one, a cast to jsonb, fails
 * with 22P05: a mode_change whose detail held one failed its whole batch's insert, and a kept reject made its
 * device's activity page fail for ever).
 */
function unreadable(text: string): boolean {
  return text.includes('\u0000') || hasLoneSurrogate(text);
}

/** Bounds of a JSON text's length in bytes, gathered by `walk`: at least one byte a UTF-16 unit, at most six. */
interface Size {
  lower: number;
  upper: number;
}

/** False as soon as `item` is too deep, holds a lone surrogate or is certainly over `maxBytes`. */
function walk(item: unknown, depth: number, size: Size, maxBytes: number): boolean {
  if (typeof item === 'string') {
    if (unreadable(item)) return false;
    size.lower += item.length + 2;
    size.upper += item.length * 6 + 2;
  } else if (typeof item === 'number') {
    size.lower += 1;
    size.upper += 24;
  } else if (typeof item !== 'object' || item === null) {
    size.lower += 4;
    size.upper += 5;
  } else {
    if (depth > LIMITS.recordObjectMaxDepth) return false;
    if (Array.isArray(item)) {
      size.lower += item.length + 1;
      size.upper += item.length + 1;
      for (const element of item) if (!walk(element, depth + 1, size, maxBytes)) return false;
    } else {
      for (const key in item) {
        if (unreadable(key)) return false;
        size.lower += key.length + 4;
        size.upper += key.length * 6 + 4;
        if (!walk((item as Record<string, unknown>)[key], depth + 1, size, maxBytes)) return false;
      }
      size.lower += 1;
      size.upper += 2;
    }
  }
  return size.lower <= maxBytes;
}

/**
 * Whether a free-form value of a record (detail, screen) may be kept: at most LIMITS.recordObjectMaxDepth levels of
 * objects and arrays, at most LIMITS.recordObjectMaxBytes bytes as JSON, and no text PostgreSQL cannot give back (a
 * lone surrogate or U+0000, in a value or a key: see `unreadable`). The walk stops at the
 * first level too deep (so a body of 100,000 nested arrays costs as little as a flat one) and as soon as the text is
 * certainly too large; the exact size is measured only when the bounds cannot decide.
 */
export function freeFormWithinLimits(value: unknown): boolean {
  if (value === undefined) return true;
  const maxBytes = LIMITS.recordObjectMaxBytes;
  const size: Size = { lower: 0, upper: 0 };
  if (!walk(value, 1, size, maxBytes)) return false;
  return size.upper <= maxBytes || utf8.encode(JSON.stringify(value)).length <= maxBytes;
}
