import type { DbClient } from '../db/pool.js';

/*
 * COPY ... FROM STDIN through node-pg's submittable interface (pg has no COPY of its own and pg-copy-streams is
 * not a dependency): the statement goes out as a simple query, the server answers CopyInResponse, the data goes as
 * CopyData messages, then CopyDone.
 */

interface PgConnection {
  query(text: string): void;
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
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

  submit(connection: PgConnection): void {
    connection.query(this.text);
  }

  handleCopyInResponse(connection: PgConnection): void {
    for (const chunk of this.chunks) connection.sendCopyFromChunk(chunk);
    connection.endCopyFrom();
  }

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

/** Runs `COPY <table> (<columns>) FROM STDIN` with the given text-format data; resolves with the row count. */
export function copyFrom(client: DbClient, statement: string, chunks: readonly Buffer[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const copy = new CopyIn(statement, chunks);
    copy.callback = (error, rows) => (error ? reject(error) : resolve(rows ?? 0));
    (client as unknown as { query(submittable: CopyIn): void }).query(copy);
  });
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
