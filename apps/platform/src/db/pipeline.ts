import type { DbClient } from './pool.js';

/*
 * Several statements in one round trip (docs/pop-ingestion.md, "Round trips under load"). node-postgres sends a
 * query only after the one before has been answered, and under load each answer waits its turn on the event loop
 * and the backend its turn on a core: in the agent channel's open loop a bare BEGIN took 1.2 ms (median) at 40 % of
 * the closed loop's rate and 2.3 ms at 80 %. Here the statements go out in one write, each as Parse (once per
 * connection for a named one), Bind, Describe and Execute, with one Sync after the last: PostgreSQL runs them in
 * order, and after an error skips the rest up to the Sync (so nothing after a failed statement runs). A pipeline
 * that begins with BEGIN leaves its transaction open after the Sync, for the statements that follow it on the
 * client; without BEGIN its statements are one implicit transaction, committed at the Sync.
 *
 * Results come back as text, a row an object of strings (null for NULL) by column name: the caller converts them.
 * Parameters are strings, numbers, Buffers (sent in binary: src/db/binary-arrays.ts) or null.
 */

export type PipelineValue = string | number | Buffer | null;

export interface PipelineStatement {
  /** A name makes it a prepared statement, parsed once per connection (shared with node-postgres's own). */
  name?: string;
  text: string;
  values?: readonly PipelineValue[];
}

export interface PipelineResult {
  /** The command tag, e.g. `BEGIN`, `SELECT 3`. */
  command: string;
  rows: Record<string, string | null>[];
}

interface PgConnection {
  parsedStatements: Record<string, string | undefined>;
  submittedNamedStatements?: Record<string, string | undefined>;
  parse(query: { name?: string; text: string; types?: number[] }): void;
  bind(config: {
    portal?: string;
    statement?: string;
    values?: readonly unknown[];
    binary?: boolean;
    valueMapper?: (value: unknown) => unknown;
  }): void;
  describe(message: { type: 'P' | 'S'; name?: string }): void;
  execute(config: { portal?: string; rows?: number }): void;
  sync(): void;
  sendCopyFail(message: string): void;
  on(event: 'parseComplete', listener: () => void): void;
  off(event: 'parseComplete', listener: () => void): void;
  stream?: { cork?(): void; uncork?(): void };
}

const toWire = (value: unknown): unknown => {
  if (value === null || typeof value === 'string' || Buffer.isBuffer(value)) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  throw new TypeError(
    `a pipelined statement's parameter must be a string, a finite number, a Buffer or null`,
  );
};

class Pipeline {
  callback: ((error: Error | null, results?: PipelineResult[]) => void) | undefined;
  private readonly results: PipelineResult[] = [];
  private fields: string[] = [];
  private rows: Record<string, string | null>[] = [];
  /** The named statements whose Parse went out, in order; undefined for an unnamed one. */
  private readonly parses: (PipelineStatement | undefined)[] = [];
  private parseCompletes = 0;
  private connection: PgConnection | undefined;
  private done = false;

  constructor(private readonly statements: readonly PipelineStatement[]) {}

  /** A named statement counts as parsed on the connection once PostgreSQL said so (its ParseComplete). */
  private readonly onParseComplete = (): void => {
    const statement = this.parses[this.parseCompletes];
    this.parseCompletes += 1;
    if (statement?.name !== undefined && this.connection) {
      this.connection.parsedStatements[statement.name] = statement.text;
    }
  };

  submit(connection: PgConnection): Error | undefined {
    // Checked before anything is written: a name already parsed on this connection with another text.
    const texts = new Map<string, string>();
    for (const statement of this.statements) {
      if (statement.name === undefined) continue;
      const known = parsedText(connection, statement.name) ?? texts.get(statement.name);
      texts.set(statement.name, statement.text);
      if (known !== undefined && known !== statement.text) {
        return new Error(`prepared statement "${statement.name}" has another text on this connection`);
      }
    }
    try {
      for (const statement of this.statements) statement.values?.forEach(toWire);
    } catch (error) {
      return error as Error;
    }
    this.connection = connection;
    connection.on('parseComplete', this.onParseComplete);
    connection.stream?.cork?.();
    try {
      const parsing = new Set<string>();
      for (const statement of this.statements) {
        const name = statement.name;
        if (name === undefined || (parsedText(connection, name) === undefined && !parsing.has(name))) {
          if (name !== undefined) parsing.add(name);
          connection.parse({ ...(name === undefined ? {} : { name }), text: statement.text });
          this.parses.push(name === undefined ? undefined : statement);
        }
        connection.bind({
          portal: '',
          statement: statement.name ?? '',
          values: statement.values ?? [],
          valueMapper: toWire,
        });
        connection.describe({ type: 'P', name: '' });
        connection.execute({ portal: '', rows: 0 });
      }
      connection.sync();
    } finally {
      connection.stream?.uncork?.();
    }
    return undefined;
  }

  private finish(error: Error | null): void {
    if (this.done) return;
    this.done = true;
    this.connection?.off('parseComplete', this.onParseComplete);
    if (error) this.callback?.(error);
    else this.callback?.(null, this.results);
  }

  handleRowDescription(message: { fields: { name: string }[] }): void {
    this.fields = message.fields.map((field) => field.name);
  }

  handleDataRow(message: { fields: (string | null)[] }): void {
    const row: Record<string, string | null> = {};
    for (let i = 0; i < this.fields.length; i += 1) row[this.fields[i]!] = message.fields[i] ?? null;
    this.rows.push(row);
  }

  handleCommandComplete(message: { text?: string }): void {
    this.results.push({ command: message.text ?? '', rows: this.rows });
    this.rows = [];
    this.fields = [];
  }

  handleEmptyQuery(): void {
    this.results.push({ command: '', rows: [] });
  }

  handleReadyForQuery(): void {
    this.finish(
      this.results.length === this.statements.length
        ? null
        : new Error(`a pipeline of ${this.statements.length} statements gave ${this.results.length} results`),
    );
  }

  handleError(error: Error): void {
    this.finish(error);
  }

  handlePortalSuspended(): void {
    this.finish(new Error('a pipelined statement was suspended'));
  }

  /**
   * A COPY FROM STDIN would wait for data that is not coming. Statements after it: PostgreSQL reads their messages
   * as its data, refuses them (a protocol violation) and ends the connection. The last statement: the Sync was read
   * inside the COPY, where it means nothing, so the COPY is failed and another Sync ends the pipeline.
   */
  handleCopyInResponse(): void {
    if (this.results.length === this.statements.length - 1) {
      this.connection?.sendCopyFail('COPY cannot be pipelined');
      this.connection?.sync();
    }
  }

  handleCopyData(): void {}
}

function parsedText(connection: PgConnection, name: string): string | undefined {
  return connection.parsedStatements[name] ?? connection.submittedNamedStatements?.[name];
}

/**
 * Runs `statements` in one round trip, in order; resolves with one result per statement, or rejects with the error
 * of the first that failed (none after it ran). In a transaction begun before, or by the pipeline's own BEGIN, a
 * failure leaves the transaction aborted: roll it back.
 */
export function pipelined(
  client: DbClient,
  statements: readonly PipelineStatement[],
): Promise<PipelineResult[]> {
  return new Promise((resolve, reject) => {
    const pipeline = new Pipeline(statements);
    pipeline.callback = (error, results) => (error ? reject(error) : resolve(results!));
    (client as unknown as { query(submittable: Pipeline): void }).query(pipeline);
  });
}
