/*
 * One-dimensional arrays as query parameters in PostgreSQL's binary format (the form array_recv reads: PostgreSQL
 * documentation, "Array Types", and src/backend/utils/adt/arrayfuncs.c). node-postgres sends a Buffer parameter
 * in binary format, and the statement's cast (`$8::int8[]`) gives the parameter its type, so PostgreSQL reads each
 * element with its type's receive function: no text or JSON is parsed. For the proof-of-play statements' count rows
 * this costs PostgreSQL about 5 us a row against about 12 us as JSON objects (json_to_recordset builds a hash table
 * per object) and 7 us as text array literals (docs/pop-ingestion.md, "The count rows: HOT updates and binary
 * parameters").
 *
 * The layout: dimensions (int32), a has-nulls flag (int32), the element type's OID (int32), then per dimension its
 * length and lower bound (int32 each; 1), then per element its length in bytes (int32, -1 for NULL) and its binary
 * form. An empty array has no dimensions. array_recv checks the OID against the cast's element type.
 */

const OID = { bool: 16, int8: 20, int4: 23, text: 25, date: 1082, uuid: 2950 } as const;
const TWO_TO_32 = 4294967296;
/** 2000-01-01T00:00:00Z, PostgreSQL's epoch for dates and timestamps. */
export const PG_EPOCH_MS = Date.UTC(2000, 0, 1);
const DAY_MS = 86_400_000;
const CALENDAR_DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

/** The value of each ASCII hex digit, -1 for any other code unit below 128. */
const HEX = new Int8Array(128).fill(-1);
for (let d = 0; d < 16; d += 1) {
  HEX['0123456789abcdef'.charCodeAt(d)] = d;
  HEX['0123456789ABCDEF'.charCodeAt(d)] = d;
}

/**
 * Writes the 16 bytes of a uuid in its text form (8-4-4-4-12 hex digits, either case) at `offset`; TypeError for
 * anything else. Digit by digit: a regular expression, then a hex string without its hyphens, then a Buffer, was a
 * fiftieth of a platform process's CPU in the agent benchmark (a uuid column of every count row).
 */
export function putUuid(target: Uint8Array, offset: number, value: string): void {
  if (value.length !== 36) throw new TypeError(`not a uuid: ${value}`);
  let at = offset;
  for (let i = 0; i < 36; ) {
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (value.charCodeAt(i) !== 0x2d) throw new TypeError(`not a uuid: ${value}`);
      i += 1;
      continue;
    }
    const high = value.charCodeAt(i);
    const low = value.charCodeAt(i + 1);
    const h = high < 128 ? HEX[high]! : -1;
    const l = low < 128 ? HEX[low]! : -1;
    if (h < 0 || l < 0) throw new TypeError(`not a uuid: ${value}`);
    target[at] = (h << 4) | l;
    at += 1;
    i += 2;
  }
}

/** The 16 bytes of a uuid in its text form; TypeError for anything else. */
export function uuidBytes(value: string): Buffer {
  const bytes = Buffer.allocUnsafe(16);
  putUuid(bytes, 0, value);
  return bytes;
}

/** A calendar day 'YYYY-MM-DD' as PostgreSQL's date: days since 2000-01-01; TypeError for anything else. */
export function pgDate(day: string): number {
  const match = CALENDAR_DAY.exec(day);
  if (!match) throw new TypeError(`not a calendar day: ${day}`);
  const year = Number(match[1]);
  const month = Number(match[2]);
  const date = Number(match[3]);
  // setUTCFullYear keeps years 0..99 as they are (Date.UTC would read them as 1900..1999), and rolls 2026-02-30
  // over into March: a day that does not exist is refused, as PostgreSQL's date_in would refuse it.
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, date);
  if (at.getUTCFullYear() !== year || at.getUTCMonth() !== month - 1 || at.getUTCDate() !== date) {
    throw new TypeError(`not a calendar day: ${day}`);
  }
  return (at.getTime() - PG_EPOCH_MS) / DAY_MS;
}

/** An array of `count` elements, `width(i)` bytes each (-1: NULL), written by `put(buffer, offset, i)`. */
function array(
  oid: number,
  count: number,
  width: (i: number) => number,
  put: (buffer: Buffer, offset: number, i: number) => void,
): Buffer {
  if (count === 0) {
    const empty = Buffer.alloc(12);
    empty.writeInt32BE(oid, 8);
    return empty;
  }
  let size = 20;
  let nulls = 0;
  for (let i = 0; i < count; i += 1) {
    const bytes = width(i);
    if (bytes < 0) nulls = 1;
    else size += bytes;
    size += 4;
  }
  const out = Buffer.allocUnsafe(size);
  out.writeInt32BE(1, 0); // dimensions
  out.writeInt32BE(nulls, 4);
  out.writeInt32BE(oid, 8);
  out.writeInt32BE(count, 12);
  out.writeInt32BE(1, 16); // lower bound
  let offset = 20;
  for (let i = 0; i < count; i += 1) {
    const bytes = width(i);
    out.writeInt32BE(bytes, offset);
    offset += 4;
    if (bytes < 0) continue;
    put(out, offset, i);
    offset += bytes;
  }
  return out;
}

export function int4Array(values: readonly number[]): Buffer {
  for (const value of values) {
    if (!Number.isInteger(value) || value < -2147483648 || value > 2147483647) {
      throw new RangeError(`${value} is not a 32-bit integer`);
    }
  }
  return array(
    OID.int4,
    values.length,
    () => 4,
    (b, o, i) => b.writeInt32BE(values[i]!, o),
  );
}

/** Whole numbers within +-2^53 as int8. */
export function int8Array(values: readonly number[]): Buffer {
  for (const value of values) {
    if (!Number.isSafeInteger(value)) throw new RangeError(`${value} is not a safe integer`);
  }
  return array(
    OID.int8,
    values.length,
    () => 8,
    (b, o, i) => {
      const value = values[i]!;
      const high = Math.floor(value / TWO_TO_32);
      b.writeInt32BE(high, o);
      b.writeUInt32BE(value - high * TWO_TO_32, o + 4);
    },
  );
}

export function boolArray(values: readonly boolean[]): Buffer {
  return array(
    OID.bool,
    values.length,
    () => 1,
    (b, o, i) => {
      b[o] = values[i] ? 1 : 0;
    },
  );
}

/**
 * text[], NULL for null. PostgreSQL's text holds no U+0000: an element with one is refused here (RangeError), as
 * PostgreSQL would refuse the whole parameter.
 */
export function textArray(values: readonly (string | null)[]): Buffer {
  const lengths = values.map((value) => {
    if (value === null) return -1;
    if (value.includes('\u0000')) throw new RangeError('text cannot hold U+0000');
    return Buffer.byteLength(value, 'utf8');
  });
  return array(
    OID.text,
    values.length,
    (i) => lengths[i]!,
    (b, o, i) => {
      b.write(values[i]!, o, lengths[i]!, 'utf8');
    },
  );
}

export function uuidArray(values: readonly string[]): Buffer {
  return array(
    OID.uuid,
    values.length,
    () => 16,
    (b, o, i) => putUuid(b, o, values[i]!),
  );
}

/** Calendar days 'YYYY-MM-DD' as date[]. */
export function dateArray(days: readonly string[]): Buffer {
  const known = new Map<string, number>();
  const values = days.map((day) => {
    let value = known.get(day);
    if (value === undefined) {
      value = pgDate(day);
      known.set(day, value);
    }
    return value;
  });
  return array(
    OID.date,
    values.length,
    () => 4,
    (b, o, i) => b.writeInt32BE(values[i]!, o),
  );
}
