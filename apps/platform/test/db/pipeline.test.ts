import pg from 'pg';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import { pipelined } from '../../src/db/pipeline.js';
import { createPool, type Db, type DbClient } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/*
 * Statements in one round trip (src/db/pipeline.ts), against a real PostgreSQL: what each answers, what an error
 * stops, the transaction a pipeline leaves open, and named statements shared with node-postgres's own.
 */

let database: TestDatabase;
let db: Db;
beforeAll(async () => {
  database = await createTestDatabase({ migrate: false });
  db = createPool(database.url, { max: 4 });
  await db.query('CREATE TABLE pipeline_t (v int NOT NULL)');
});
afterAll(async () => {
  await db?.end();
  await database?.drop();
});

interface Connection {
  parse: (query: { name?: string; text: string }) => void;
  on(event: 'commandComplete', listener: () => void): void;
  off(event: 'commandComplete', listener: () => void): void;
  stream: { write: (...args: unknown[]) => boolean };
}
const connectionOf = (client: DbClient) => (client as unknown as { connection: Connection }).connection;

/** Runs `work`, and says how many answers had come back at each write to the socket. */
async function writesOf<T>(
  client: DbClient,
  work: () => Promise<T>,
): Promise<{ result: T; writes: number[] }> {
  const connection = connectionOf(client);
  let answers = 0;
  const answered = () => {
    answers += 1;
  };
  const writes: number[] = [];
  const original = connection.stream.write.bind(connection.stream);
  const write = vi.spyOn(connection.stream, 'write').mockImplementation((...args: unknown[]) => {
    writes.push(answers);
    return original(...args);
  });
  connection.on('commandComplete', answered);
  try {
    return { result: await work(), writes };
  } finally {
    connection.off('commandComplete', answered);
    write.mockRestore();
  }
}

async function withClient<T>(work: (client: DbClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  try {
    return await work(client);
  } finally {
    client.release();
  }
}

test('one round trip: every statement is written before the first answer; rows as text by column, NULL, a Buffer sent as binary', async () => {
  await withClient(async (client) => {
    const { result: results, writes } = await writesOf(client, () =>
      pipelined(client, [
        { text: 'SELECT 1 AS a, NULL::text AS b' },
        {
          text: 'SELECT $1::int + 1 AS x, length($2::bytea) AS n, $3::text IS NULL AS missing',
          values: [41, Buffer.from([0, 1, 2]), null],
        },
        { text: "SELECT 'never' AS y WHERE false" },
        { text: 'SELECT g FROM generate_series(1, 3) AS g' },
      ]),
    );
    expect(writes.length).toBeGreaterThan(4);
    expect(writes.every((answers) => answers === 0)).toBe(true);
    expect(results).toEqual([
      { command: 'SELECT 1', rows: [{ a: '1', b: null }] },
      { command: 'SELECT 1', rows: [{ x: '42', n: '3', missing: 't' }] },
      { command: 'SELECT 0', rows: [] },
      { command: 'SELECT 3', rows: [{ g: '1' }, { g: '2' }, { g: '3' }] },
    ]);
  });
});

test('a named statement is parsed once per connection, and node-postgres knows it (and the other way round)', async () => {
  await withClient(async (client) => {
    const connection = connectionOf(client);
    const parse = vi.spyOn(connection, 'parse');
    const named = { name: 'pipeline-named', text: 'SELECT $1::int * 2 AS twice' };
    expect((await pipelined(client, [{ ...named, values: [2] }]))[0]!.rows).toEqual([{ twice: '4' }]);
    expect(parse).toHaveBeenCalledTimes(1);
    // Twice in one pipeline, and again: no second Parse (PostgreSQL would refuse it: 42P05).
    const again = await pipelined(client, [
      { ...named, values: [3] },
      { ...named, values: [4] },
    ]);
    expect(again.map((r) => r.rows[0]!['twice'])).toEqual(['6', '8']);
    expect(parse).toHaveBeenCalledTimes(1);
    // node-postgres runs it without parsing it again.
    expect((await client.query({ ...named, values: [5] })).rows).toEqual([{ twice: 10 }]);
    expect(parse).toHaveBeenCalledTimes(1);

    // One node-postgres parsed first: the pipeline binds it without a Parse.
    const theirs = { name: 'pipeline-theirs', text: 'SELECT $1::text AS echoed' };
    await client.query({ ...theirs, values: ['a'] });
    expect(parse).toHaveBeenCalledTimes(2);
    expect((await pipelined(client, [{ ...theirs, values: ['b'] }]))[0]!.rows).toEqual([{ echoed: 'b' }]);
    expect(parse).toHaveBeenCalledTimes(2);
    parse.mockRestore();

    // On this connection only.
    const { rows } = await client.query<{ name: string }>(
      "SELECT name FROM pg_prepared_statements WHERE name LIKE 'pipeline-%' ORDER BY name",
    );
    expect(rows.map((r) => r.name)).toEqual(['pipeline-named', 'pipeline-theirs']);
  });
});

test('an error stops the rest and aborts the transaction; after ROLLBACK the connection serves, and a statement that never ran is parsed next time', async () => {
  await withClient(async (client) => {
    const after = { name: 'pipeline-after-error', text: 'INSERT INTO pipeline_t VALUES ($1::int)' };
    const failed = await pipelined(client, [
      { text: 'BEGIN' },
      { text: 'INSERT INTO pipeline_t VALUES (1)' },
      { text: 'SELECT 1 / $1::int AS x', values: [0] },
      { ...after, values: [2] },
    ]).catch((error: unknown) => error);
    expect(failed).toMatchObject({ code: '22012' }); // division_by_zero
    // Nothing after the failed statement ran, and the transaction it was in is aborted.
    await expect(client.query('SELECT 1')).rejects.toMatchObject({ code: '25P02' });
    await client.query('ROLLBACK');
    expect((await client.query('SELECT count(*)::int AS n FROM pipeline_t')).rows).toEqual([{ n: 0 }]);
    // The named statement after the error was never parsed, so it is parsed now (no 42P05, no 26000).
    await pipelined(client, [{ ...after, values: [3] }]);
    expect((await client.query('SELECT v FROM pipeline_t')).rows).toEqual([{ v: 3 }]);
    await client.query('DELETE FROM pipeline_t');
  });
});

test('a named statement that failed to parse is not taken for parsed', async () => {
  await withClient(async (client) => {
    const bad = { name: 'pipeline-bad', text: 'SELECT * FROM no_such_table_here' };
    await expect(pipelined(client, [bad])).rejects.toMatchObject({ code: '42P01' });
    await client.query('CREATE TEMP TABLE no_such_table_here (v int)');
    expect((await pipelined(client, [bad]))[0]!.command).toBe('SELECT 0');
  });
});

test('begun with BEGIN, the transaction stays open after the pipeline; without it, the statements commit at its end', async () => {
  const other = new pg.Client({ connectionString: database.url });
  await other.connect();
  try {
    const seen = async () => (await other.query('SELECT v FROM pipeline_t ORDER BY v')).rows.map((r) => r.v);
    await withClient(async (client) => {
      await pipelined(client, [{ text: 'BEGIN' }, { text: 'INSERT INTO pipeline_t VALUES (7)' }]);
      expect(await seen()).toEqual([]);
      await client.query('COMMIT');
      expect(await seen()).toEqual([7]);
      await pipelined(client, [{ text: 'INSERT INTO pipeline_t VALUES (8)' }, { text: 'SELECT 1' }]);
      expect(await seen()).toEqual([7, 8]);
      // Without BEGIN the statements are one transaction: a failure takes back those before it.
      await expect(
        pipelined(client, [{ text: 'INSERT INTO pipeline_t VALUES (9)' }, { text: 'SELECT 1 / 0' }]),
      ).rejects.toMatchObject({ code: '22012' });
      expect(await seen()).toEqual([7, 8]);
      await client.query('DELETE FROM pipeline_t');
    });
  } finally {
    await other.end();
  }
});

test('refused before anything is written: a name parsed with another text, a parameter of no wire form', async () => {
  await withClient(async (client) => {
    await pipelined(client, [{ name: 'pipeline-text', text: 'SELECT 1 AS one' }]);
    const { writes } = await writesOf(client, async () => {
      await expect(pipelined(client, [{ name: 'pipeline-text', text: 'SELECT 2 AS two' }])).rejects.toThrow(
        /another text/,
      );
      await expect(
        pipelined(client, [
          { name: 'pipeline-twice', text: 'SELECT 1' },
          { name: 'pipeline-twice', text: 'SELECT 2' },
        ]),
      ).rejects.toThrow(/another text/);
      for (const value of [Number.NaN, { a: 1 }, [1, 2], undefined]) {
        await expect(
          pipelined(client, [{ text: 'SELECT 1' }, { text: 'SELECT $1::text', values: [value as never] }]),
        ).rejects.toThrow(/parameter/);
      }
    });
    expect(writes).toEqual([]);
    // The connection serves as before.
    expect((await client.query('SELECT 1 AS ok')).rows).toEqual([{ ok: 1 }]);
  });
});

test('a COPY FROM STDIN, which cannot be pipelined, fails and holds nothing', async () => {
  await withClient(async (client) => {
    // Last: it waits for data, and the pipeline fails it (CopyFail): the connection serves on.
    await expect(
      pipelined(client, [{ text: 'SELECT 1' }, { text: 'COPY pipeline_t (v) FROM STDIN' }]),
    ).rejects.toMatchObject({ code: '57014' }); // query_canceled: "COPY from stdin failed"
    expect((await client.query('SELECT 1 AS ok')).rows).toEqual([{ ok: 1 }]);
  });
  // Before another statement: PostgreSQL reads that statement's messages as COPY data and ends the connection.
  const client = await db.connect();
  const failed = await pipelined(client, [
    { text: 'COPY pipeline_t (v) FROM STDIN' },
    { text: 'SELECT 2' },
  ]).catch((error: unknown) => error);
  expect(failed).toMatchObject({ code: '08P01' }); // protocol_violation: "unexpected message type ... during COPY"
  client.release(true);
  expect((await db.query('SELECT count(*)::int AS n FROM pipeline_t')).rows).toEqual([{ n: 0 }]);
});
