import { PG_EPOCH_MS, pgDate, uuidBytes } from './binary-arrays.js';
import type { DbClient } from './pool.js';

/*
 * COPY ... FROM STDIN through node-pg's submittable interface (pg has no COPY of its own and pg-copy-streams is
 * not a dependency): the statement goes out as a simple query, the server answers CopyInResponse, the data goes as
 * CopyData messages, then CopyDone.
 */

interface PgConnection {
  query(text: string): void;
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
  sendCopyFail(message: string): void;
  stream?: { cork?(): void; uncork?(): void };
}

class CopyIn {
  private done = false;
  private rows = 0;
  callback: ((error: Error | null, rows?: number) => void) | undefined;

  constructor(
    readonly text: string,
    private readonly chunks: readonly Buffer[],
  ) {}

  private finish(error: Error | null): void {
    if (this.done) return;
    this.done = true;
    this.callback?.(error, this.rows);
  }

  /**
   * The statement and all its data in one write: the server reads the data as soon as it enters the COPY, without a
   * round trip for CopyInResponse. Should it refuse the statement instead, it drops the CopyData and CopyDone that
   * follow outside a COPY ("any subsequent CopyData, CopyDone, or CopyFail messages issued by the frontend will
   * simply be dropped"; PostgresMain ignores them), so nothing of the data is read as anything else.
   */
  submit(connection: PgConnection): void {
    connection.stream?.cork?.();
    try {
      connection.query(this.text);
      for (const chunk of this.chunks) connection.sendCopyFromChunk(chunk);
      connection.endCopyFrom();
    } finally {
      connection.stream?.uncork?.();
    }
  }

  handleCopyInResponse(): void {}

  handleCommandComplete(message: { text?: string }): void {
    const match = /^COPY (\d+)/.exec(message.text ?? '');
    if (match) this.rows = Number(match[1]);
  }

  handleReadyForQuery(): void {
    this.finish(null);
  }

  handleError(error: Error): void {
    this.finish(error);
  }

  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/**
 * Runs `COPY <table> (<columns>) FROM STDIN` with the given data; resolves with the row count. With `commit`, the
 * COMMIT of the client's transaction follows in the same query string, after the COPY: one round trip for both. It
 * runs only if the COPY succeeded (a failed statement discards the rest of the string, leaving the transaction to be
 * rolled back), and its error, if the COMMIT fails, is the promise's.
 */
export function copyFrom(
  client: DbClient,
  statement: string,
  chunks: readonly Buffer[],
  options: { commit?: boolean } = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const copy = new CopyIn(options.commit ? `${statement};\nCOMMIT` : statement, chunks);
    copy.callback = (error, rows) => (error ? reject(error) : resolve(rows ?? 0));
    (client as unknown as { query(submittable: CopyIn): void }).query(copy);
  });
}

/**
 * A COPY ... FROM STDIN whose data is pushed while it is made (the records of a CMS batch are written as they are
 * judged, so the server works on the first thousands while the platform judges the next). Queue it on a client
 * with `start`; `push` data, then `end` (or `fail`, which makes the server refuse the COPY); `done` settles when
 * the server has answered.
 */
export class CopyStream {
  private connection: PgConnection | null = null;
  private pending: Buffer[] = [];
  private closing: 'end' | { fail: string } | null = null;
  private finished = false;
  private rows = 0;
  private settle: { resolve: (rows: number) => void; reject: (error: Error) => void } | undefined;
  readonly done: Promise<number>;

  constructor(readonly text: string) {
    this.done = new Promise<number>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // A failure is awaited by whoever awaits `done`; never an unhandled rejection meanwhile.
    this.done.catch(() => {});
  }

  /** Queues the COPY on `client` (it runs after the queries queued before it). */
  start(client: DbClient): void {
    (client as unknown as { query(submittable: CopyStream): void }).query(this);
  }

  push(chunk: Buffer): void {
    if (this.closing !== null) throw new Error('COPY data pushed after its end');
    if (this.finished || chunk.length === 0) return; // the server refused already; done says why
    if (this.connection) this.connection.sendCopyFromChunk(chunk);
    else this.pending.push(chunk);
  }

  end(): void {
    this.closing ??= 'end';
    if (this.connection && !this.finished) this.connection.endCopyFrom();
  }

  /** Makes the server end the COPY with an error (nothing of it is kept); `done` rejects. */
  fail(reason: string): void {
    if (this.closing !== null) return;
    this.closing = { fail: reason };
    if (this.connection && !this.finished) this.connection.sendCopyFail(reason);
  }

  submit(connection: PgConnection): void {
    connection.query(this.text);
  }

  handleCopyInResponse(connection: PgConnection): void {
    this.connection = connection;
    for (const chunk of this.pending) connection.sendCopyFromChunk(chunk);
    this.pending = [];
    if (this.closing === 'end') connection.endCopyFrom();
    else if (this.closing !== null) connection.sendCopyFail(this.closing.fail);
  }

  handleCommandComplete(message: { text?: string }): void {
    const match = /^COPY (\d+)/.exec(message.text ?? '');
    if (match) this.rows = Number(match[1]);
  }

  handleReadyForQuery(): void {
    if (this.finished) return;
    this.finished = true;
    this.settle?.resolve(this.rows);
  }

  handleError(error: Error): void {
    if (this.finished) return;
    this.finished = true;
    this.settle?.reject(error);
  }

  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/** A value of COPY's text format: \N for null; backslash, tab, newline and carriage return escaped. */
export function copyText(value: string | number | boolean | null): string {
  if (value === null) return '\\N';
  if (typeof value !== 'string') return String(value);
  // Fast path: most values (ids, hashes, times) need no escaping.
  if (!/[\\\t\n\r]/.test(value)) return value;
  return value.replace(/[\\\t\n\r]/g, (c) =>
    c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r',
  );
}

/*
 * COPY's binary format (PostgreSQL documentation, "COPY", "Binary Format"): a signature and two zero words, then
 * per row a 16-bit field count and each field as a 32-bit length (-1 for NULL) and the type's binary (send) form;
 * a 16-bit -1 ends the data. PostgreSQL reads it without parsing text: for rows full of dates, timestamps and uuids
 * this costs the server about half of the text format (measured on pop_records).
 */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const TWO_TO_32 = 4294967296;
const TEXT_OID = 25;

/**
 * Writes rows in COPY's binary format into one growing buffer. Values are written in column order. Integers are
 * written byte by byte after one room check per value (Buffer#writeInt32BE validates every call, which costs more
 * than the write at 220 000 values a batch).
 */
export class BinaryCopyWriter {
  private buffer: Buffer;
  private offset = 0;
  // Ids and days repeat across the rows of a batch: each is converted once.
  private readonly uuids = new Map<string, Buffer>();
  private readonly days = new Map<string, number>();

  constructor(initialBytes = 64 * 1024) {
    this.buffer = Buffer.allocUnsafe(Math.max(initialBytes, 64));
    SIGNATURE.copy(this.buffer, 0);
    this.offset = SIGNATURE.length;
    this.put32(0); // flags
    this.put32(0); // header extension length
  }

  /**
   * The data written so far (the header first, the first time); writing goes on in a new buffer, so the bytes
   * given may be handed to a socket as they are.
   */
  drain(nextBytes = 64 * 1024): Buffer {
    const data = this.buffer.subarray(0, this.offset);
    this.buffer = Buffer.allocUnsafe(Math.max(nextBytes, 64));
    this.offset = 0;
    return data;
  }

  private room(bytes: number): void {
    if (this.offset + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.offset + bytes));
    this.buffer.copy(grown, 0, 0, this.offset);
    this.buffer = grown;
  }

  /** A 32-bit word, big-endian (two's complement for negative values); room already checked. */
  private put32(value: number): void {
    const b = this.buffer;
    const o = this.offset;
    b[o] = value >>> 24;
    b[o + 1] = value >>> 16;
    b[o + 2] = value >>> 8;
    b[o + 3] = value;
    this.offset = o + 4;
  }

  /** Starts a row of `fields` values. */
  row(fields: number): void {
    this.room(2);
    this.buffer[this.offset] = fields >>> 8;
    this.buffer[this.offset + 1] = fields;
    this.offset += 2;
  }

  null(): void {
    this.room(4);
    this.put32(-1);
  }

  int32(value: number): void {
    if (!Number.isInteger(value) || value < -2147483648 || value > 2147483647) {
      throw new RangeError(`${value} is not a 32-bit integer`);
    }
    this.room(8);
    this.put32(4);
    this.put32(value);
  }

  /** A whole number within +-2^53 as int8. */
  int64(value: number): void {
    if (!Number.isSafeInteger(value)) throw new RangeError(`${value} is not a safe integer`);
    const high = Math.floor(value / TWO_TO_32);
    this.room(12);
    this.put32(8);
    this.put32(high);
    this.put32(value - high * TWO_TO_32);
  }

  bool(value: boolean): void {
    this.room(5);
    this.put32(1);
    this.buffer[this.offset++] = value ? 1 : 0;
  }

  /** text (and json, whose binary form is its text). */
  text(value: string): void {
    const length = value.length;
    this.room(4 + length * 3);
    const b = this.buffer;
    const start = this.offset + 4;
    // Short ASCII (ids, hashes, codes): copied unit by unit; anything else through the UTF-8 encoder.
    let written = -1;
    if (length <= 64) {
      let i = 0;
      for (; i < length; i += 1) {
        const unit = value.charCodeAt(i);
        if (unit > 0x7f) break;
        b[start + i] = unit;
      }
      if (i === length) written = length;
    }
    if (written < 0) written = b.write(value, start, 'utf8');
    this.put32(written);
    this.offset = start + written;
  }

  uuid(value: string): void {
    let bytes = this.uuids.get(value);
    if (bytes === undefined) {
      bytes = uuidBytes(value);
      this.uuids.set(value, bytes);
    }
    this.room(20);
    this.put32(16);
    this.offset += bytes.copy(this.buffer, this.offset);
  }

  /** A calendar day 'YYYY-MM-DD' as date. */
  date(day: string): void {
    let days = this.days.get(day);
    if (days === undefined) {
      days = pgDate(day);
      this.days.set(day, days);
    }
    this.int32(days);
  }

  /** An instant (epoch milliseconds) as timestamptz: microseconds since 2000-01-01 UTC. */
  timestamp(epochMs: number): void {
    this.int64((epochMs - PG_EPOCH_MS) * 1000);
  }

  /** text[] of one dimension (an empty list is an array of no dimensions). */
  textArray(values: readonly string[]): void {
    if (values.length === 0) {
      this.room(16);
      this.put32(12);
      this.put32(0); // dimensions
      this.put32(0); // has nulls
      this.put32(TEXT_OID);
      return;
    }
    this.room(24);
    const at = this.offset;
    this.offset += 4;
    this.put32(1);
    this.put32(0);
    this.put32(TEXT_OID);
    this.put32(values.length);
    this.put32(1); // lower bound
    for (const value of values) this.text(value);
    const end = this.offset;
    this.offset = at;
    this.put32(end - at - 4);
    this.offset = end;
  }

  /** The data with its trailer; the writer must not be used afterwards. */
  finish(): Buffer {
    this.room(2);
    this.buffer[this.offset] = 0xff;
    this.buffer[this.offset + 1] = 0xff;
    this.offset += 2;
    return this.buffer.subarray(0, this.offset);
  }
}
