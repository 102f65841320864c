import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync } from 'node:zlib';
import { exportPrivateKeyPem, generateEs256KeyPair } from '@ooh/crypto';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import {
  batchCount,
  countedPlays,
  createOperator,
  insertApproval,
  registerSource,
  type TestSource,
} from '../../platform/test/pop/helpers.js';
import { apiCall, startTestPlatform, type TestPlatform } from '../../platform/test/support/platform.js';
import { type CliIo, main } from '../src/cli.js';
import type { MappingFile } from '../src/mapping.js';
import type { Summary } from '../src/summary.js';

/*
 * pop import against the real platform (its own database, the api host listening on a port, its clock at
 * 2026-11-20 11:00 Almaty): the operator's command line, through HTTP, to counted plays.
 */

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const CLI = path.join(REPO, 'apps/pop-import/src/cli.ts');
const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const XIBO_DAY1 = path.join(FIXTURES, 'xibo-proof-of-play-2026-11-19.csv');
const XIBO_DAY2 = path.join(FIXTURES, 'xibo-proof-of-play-2026-11-20.csv');
const PLAYLOG = path.join(FIXTURES, 'playlog-2026-11-19.txt');

let p: TestPlatform;
let api: string;
const dirs: string[] = [];

beforeAll(async () => {
  p = await startTestPlatform();
  await p.servers.api.listen({ host: '127.0.0.1', port: 0 });
  api = `http://127.0.0.1:${(p.servers.api.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await p?.close();
});
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

let approvalSerial = 500;

interface Installation {
  source: TestSource;
  dir: string;
  keyFile: string;
  mappingFile: string;
  stateDir: string;
  mapping: MappingFile;
  /** The platform's key of a player: cms:<installation>:<external id>. */
  playerKey: (externalId: string) => string;
  args: (file: string, ...extra: string[]) => string[];
}

/**
 * An operator with two structures, a CMS installation whose players are those of the fixture's mapping file, and
 * approvals for its media (their numbers new for each test: approval numbers are unique on the platform).
 */
async function installation(
  mappingFixture: 'xibo-mapping.json' | 'broadsign-mapping.json',
): Promise<Installation> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ooh-pop-import-'));
  dirs.push(dir);
  const mapping = JSON.parse(readFileSync(path.join(FIXTURES, mappingFixture), 'utf8')) as MappingFile;
  const operator = await createOperator(p, 2);
  const externalIds = Object.values(mapping.players);
  const source = await registerSource(
    p,
    operator,
    Object.fromEntries(externalIds.map((id, i) => [id, operator.structures[i % 2]!])),
  );
  for (const target of Object.values(mapping.media)) {
    if (!('approval_number' in target)) continue;
    approvalSerial += 1;
    const number = `APR-2026-${String(approvalSerial).padStart(6, '0')}`;
    await insertApproval(p.database.db, operator.id, {
      number,
      mediaSha256: target.media_sha256,
      structureIds: operator.structures.map((s) => s.id),
    });
    target.approval_number = number;
  }
  const mappingFile = path.join(dir, 'mapping.json');
  writeFileSync(mappingFile, JSON.stringify(mapping, null, 2));
  const keyFile = path.join(dir, 'installation-key.pem');
  writeFileSync(keyFile, exportPrivateKeyPem(source.privateKey), { mode: 0o600 });
  const stateDir = path.join(dir, 'state');
  return {
    source,
    dir,
    keyFile,
    mappingFile,
    stateDir,
    mapping,
    playerKey: (externalId) => `cms:${source.id}:${externalId}`,
    args: (file, ...extra) => [
      'import',
      '--api',
      api,
      '--source',
      source.id,
      '--key',
      keyFile,
      '--mapping',
      mappingFile,
      '--timezone',
      'Asia/Almaty',
      '--state',
      stateDir,
      ...extra,
      file,
    ],
  };
}

interface Run {
  code: number;
  out: string[];
  err: string[];
  summary: Summary;
}

async function run(inst: Installation, argv: string[], io: Partial<CliIo> = {}): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, {
    out: (line) => out.push(line),
    err: (line) => err.push(line),
    env: { OOH_API_KEY: inst.source.operator.key, HOME: inst.dir },
    ...io,
  });
  const json = argv.includes('--json') ? (JSON.parse(out.join('\n')) as Summary) : (undefined as never);
  return { code, out, err, summary: json };
}

async function highWater(playerKey: string): Promise<number | null> {
  const { rows } = await p.database.db.query<{ seq: string }>(
    'SELECT high_water_seq::text AS seq FROM pop_players WHERE player_key = $1',
    [playerKey],
  );
  return rows[0] ? Number(rows[0].seq) : null;
}

async function storedBatches(sourceId: string): Promise<{ batch_seq: number; body_sha256: string }[]> {
  const { rows } = await p.database.db.query<{ batch_seq: string; body_sha256: string }>(
    `SELECT batch_seq::text, body_sha256 FROM pop_batches WHERE owner = $1 ORDER BY batch_seq`,
    [`source:${sourceId}`],
  );
  return rows.map((r) => ({ batch_seq: Number(r.batch_seq), body_sha256: r.body_sha256 }));
}

function stateOf(inst: Installation) {
  return JSON.parse(readFileSync(path.join(inst.stateDir, 'state.json'), 'utf8')) as {
    next_batch_seq: number;
    players: Record<string, number>;
    imports: { fingerprint: string; batches: { batch_seq: number; sha256: string; answer: unknown }[] }[];
  };
}

describe('pop import: a Xibo export', () => {
  test('is counted once: the right counts, and the same export again counts nothing twice', async () => {
    const inst = await installation('xibo-mapping.json');
    const display7 = inst.playerKey('xibo-display-7');
    const display12 = inst.playerKey('xibo-display-12');
    const drawn: string[] = [];
    let clock = 0;
    const first = await run(inst, inst.args(XIBO_DAY1, '--json', '--progress'), {
      progress: { isTTY: true, columns: 120, write: (text: string) => drawn.push(text) },
      // Every reading of the progress clock a second later: each phase and batch is drawn.
      progressNow: () => {
        clock += 1000;
        return clock;
      },
    });
    expect(first.code, first.err.join('\n')).toBe(1); // rows were left out and one record refused: see below
    const s = first.summary;
    expect(s).toMatchObject({ format: 'xibo', rows: 17, plays: 14, not_plays: { layout: 1, event: 1 } });
    expect(Object.fromEntries(Object.entries(s.not_sent).map(([reason, e]) => [reason, e.lines]))).toEqual({
      aggregated_row: [13],
      unmapped_media: [6, 15],
      unmapped_display: [16],
      repeated_in_export: [11],
    });
    expect(s.batches).toEqual({ planned: 1, first_batch_seq: 0, last_batch_seq: 0 });
    expect(s.sent).toMatchObject({
      batches: 1,
      already_received: 0,
      records: 10,
      accepted: 9,
      duplicates: 0,
      refused: 1,
      reasons: { too_short: 1 },
      refused_lines: { too_short: [12] },
    });
    expect(s.stopped).toBeNull();
    expect(s.pending).toBe(0);
    // The progress line was drawn (a terminal was given) and taken off again.
    const screen = drawn.join('');
    const plain = screen.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '');
    expect(plain).toContain('reading xibo-proof-of-play-2026-11-19.csv');
    expect(plain).toContain('sending batches ####################  1/1  100%');
    expect(plain).toContain('accepted 9');
    // Taken off the terminal at the end, so the summary lines never land after a bar.
    expect(screen.endsWith('\r\x1b[K')).toBe(true);
    // Counted as attested plays of the mapped players: the emergency notice apart, never billed.
    expect(await countedPlays(p.database.db, display7)).toBe(6);
    expect(await countedPlays(p.database.db, display12, { slot: false })).toBe(2);
    expect(await countedPlays(p.database.db, display12, { slot: true })).toBe(1);
    expect(await countedPlays(p.database.db, display7, { attested: true })).toBe(6);
    // spec: seq "+1 for every record across batches, from 1"; the refused record's number is taken too.
    expect(await highWater(display7)).toBe(6);
    expect(await highWater(display12)).toBe(4);
    // The platform keeps the very bytes the state names.
    const state = stateOf(inst);
    expect(await storedBatches(inst.source.id)).toEqual([
      { batch_seq: 0, body_sha256: state.imports[0]!.batches[0]!.sha256 },
    ]);

    const again = await run(inst, inst.args(XIBO_DAY1, '--json'));
    expect(again.code).toBe(1);
    expect(again.summary.imported_before).toBe(true);
    expect(again.summary.fingerprint).toBe(s.fingerprint);
    expect(again.summary.sent).toMatchObject({
      batches: 1,
      already_received: 1,
      accepted: 0,
      counted_before: 9,
    });
    expect(await countedPlays(p.database.db, display7)).toBe(6);
    expect(await countedPlays(p.database.db, display12)).toBe(3);
    expect(await batchCount(p.database.db, `source:${inst.source.id}`)).toBe(1);
  });

  test("the next day's export numbers on: a late play counts, a play counted the day before does not", async () => {
    const inst = await installation('xibo-mapping.json');
    const day1 = await run(inst, inst.args(XIBO_DAY1, '--json'));
    expect(day1.code).toBe(1);
    const day2 = await run(inst, inst.args(XIBO_DAY2));
    expect(day2.code).toBe(1); // the row exported on both days is refused play_id_counted
    expect(day2.out.join('\n')).toContain('refused 1 (play_id_counted 1)');
    expect(day2.out).toContain(
      'sent 1 batch(es), 5 records: accepted 4, duplicates 0, refused 1 (play_id_counted 1)',
    );
    expect(day2.out).toContain('  refused play_id_counted: line 3');
    const state = stateOf(inst);
    expect(state.next_batch_seq).toBe(2);
    expect(state.players).toEqual({ 'xibo-display-7': 9, 'xibo-display-12': 6 });
    const stored = await storedBatches(inst.source.id);
    expect(stored.map((b) => b.batch_seq)).toEqual([0, 1]);
    const { rows } = await p.database.db.query<{ body: Buffer }>(
      'SELECT body FROM pop_batches WHERE owner = $1 AND batch_seq = 1',
      [`source:${inst.source.id}`],
    );
    const body = JSON.parse(gunzipIfNeeded(rows[0]!.body).toString('utf8')) as {
      prev_sha256: string;
      records: { seq: number; player: string }[];
    };
    // spec: prev_sha256 "SHA-256 of the body of batch batch_seq - 1".
    expect(body.prev_sha256).toBe(stored[0]!.body_sha256);
    expect(body.records.map((r) => [r.player, r.seq])).toEqual([
      ['xibo-display-7', 7],
      ['xibo-display-12', 5],
      ['xibo-display-7', 8],
      ['xibo-display-7', 9],
      ['xibo-display-12', 6],
    ]);
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-7'))).toBe(8);
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-12'))).toBe(5);
  });

  test('a screen mapped late: the export again counts its plays, and refuses those counted before', async () => {
    const inst = await installation('xibo-mapping.json');
    const partial = path.join(inst.dir, 'partial-mapping.json');
    writeFileSync(
      partial,
      JSON.stringify({ ...inst.mapping, players: { 'ALM-0001 Abai / Dostyk': 'xibo-display-7' } }, null, 2),
    );
    const before = await run(inst, [...inst.args(XIBO_DAY1).slice(0, -1), '--mapping', partial, XIBO_DAY1]);
    expect(before.out.join('\n')).toContain('unmapped_display 7: line 9, 10, 11, 12, 14, ...');
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-12'))).toBe(0);
    // Other plays, so another import: the ones sent before come again under new numbers and are refused by
    // their play_id; the newly mapped screen's are counted.
    const after = await run(inst, inst.args(XIBO_DAY1, '--json'));
    expect(after.summary.imported_before).toBe(false);
    expect(after.summary.sent).toMatchObject({ accepted: 3, refused: 7 });
    expect(after.summary.sent.reasons).toEqual({ play_id_counted: 6, too_short: 1 });
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-7'))).toBe(6);
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-12'))).toBe(3);
  });

  test('a dry run reads, maps and plans, and changes nothing', async () => {
    const inst = await installation('xibo-mapping.json');
    const dry = await run(inst, inst.args(XIBO_DAY1, '--dry-run'));
    expect(dry.code).toBe(0);
    expect(dry.out).toContain('dry run: nothing was sent and the state was not changed');
    expect(dry.out.some((line) => line.startsWith('planned: import '))).toBe(true);
    expect(existsSync(inst.stateDir)).toBe(false);
    expect(await batchCount(p.database.db, `source:${inst.source.id}`)).toBe(0);
  });
});

describe('pop import: a Broadsign playlog', () => {
  test('is counted per player; a gzipped playlog of the same day is the same import', async () => {
    const inst = await installation('broadsign-mapping.json');
    const first = await run(inst, inst.args(PLAYLOG, '--json'));
    expect(first.code).toBe(1);
    expect(first.summary).toMatchObject({ format: 'broadsign', rows: 10, plays: 9 });
    expect(Object.keys(first.summary.not_sent).sort()).toEqual([
      'bad_row',
      'unmapped_display',
      'unmapped_media',
    ]);
    expect(first.summary.sent).toMatchObject({
      records: 7,
      accepted: 6,
      refused: 1,
      reasons: { too_short: 1 },
    });
    expect(await countedPlays(p.database.db, inst.playerKey('bs-player-100234'))).toBe(4);
    expect(await countedPlays(p.database.db, inst.playerKey('bs-player-100235'))).toBe(2);

    const gz = path.join(inst.dir, 'playlog-2026-11-19.txt.gz');
    writeFileSync(gz, gzipSync(readFileSync(PLAYLOG)));
    const again = await run(inst, inst.args(gz, '--json'));
    expect(again.summary.imported_before).toBe(true);
    expect(again.summary.sent).toMatchObject({ already_received: 1, accepted: 0 });
    expect(await countedPlays(p.database.db, inst.playerKey('bs-player-100234'))).toBe(4);
  });
});

describe('pop import: refusals before anything is sent', () => {
  test('an export without a time zone, a bad mapping, no API key: exit 2, nothing sent', async () => {
    const inst = await installation('xibo-mapping.json');
    const noZone = inst
      .args(XIBO_DAY1)
      .filter((a, i, all) => a !== '--timezone' && all[i - 1] !== '--timezone');
    const zoneless = await run(inst, noZone);
    expect(zoneless.code).toBe(2);
    expect(zoneless.err.join('\n')).toMatch(/carry no time zone.*--timezone.*nothing was sent/s);

    const badMapping = path.join(inst.dir, 'bad-mapping.json');
    writeFileSync(
      badMapping,
      JSON.stringify({ players: { 'ALM-0001 Abai / Dostyk': 'not valid' }, media: {} }),
    );
    const mapped = await run(inst, [
      ...inst.args(XIBO_DAY1).slice(0, -1),
      '--mapping',
      badMapping,
      XIBO_DAY1,
    ]);
    expect(mapped.code).toBe(2);
    expect(mapped.err.join('\n')).toContain('players["ALM-0001 Abai / Dostyk"]: Expected string to match');

    const noKey = await main(inst.args(XIBO_DAY1), { out: () => {}, err: () => {}, env: {} });
    expect(noKey).toBe(2);
    const badZone = await run(inst, [
      ...inst.args(XIBO_DAY1).slice(0, -1),
      '--timezone',
      'Mars/Olympus',
      XIBO_DAY1,
    ]);
    expect(badZone.code).toBe(2);
    expect(await batchCount(p.database.db, `source:${inst.source.id}`)).toBe(0);
  });

  test('a run while another holds the state folder is refused', async () => {
    const inst = await installation('xibo-mapping.json');
    await run(inst, inst.args(XIBO_DAY1));
    // The lock of a process that is alive (this test's parent).
    writeFileSync(path.join(inst.stateDir, 'lock'), String(process.ppid));
    const blocked = await run(inst, inst.args(XIBO_DAY2));
    expect(blocked.code).toBe(2);
    expect(blocked.err.join('\n')).toContain(`another import (pid ${process.ppid})`);
    // A lock left by a process that is gone is taken over.
    writeFileSync(path.join(inst.stateDir, 'lock'), '999999999');
    expect((await run(inst, inst.args(XIBO_DAY2))).code).toBe(1);
  });
});

describe('pop import: when sending stops', () => {
  test('a refused batch stops the run and stays pending; the next run sends the same bytes', async () => {
    const inst = await installation('xibo-mapping.json');
    const wrongKey = path.join(inst.dir, 'wrong-key.pem');
    writeFileSync(wrongKey, exportPrivateKeyPem(generateEs256KeyPair().privateKey));
    const refused = await run(inst, [...inst.args(XIBO_DAY1).slice(0, -1), '--key', wrongKey, XIBO_DAY1]);
    expect(refused.code).toBe(3);
    expect(refused.out.join('\n')).toContain('STOPPED at batch_seq 0: HTTP 401 bad_signature');
    expect(refused.out.join('\n')).toContain('1 batch(es) not answered yet');
    expect(readdirSync(path.join(inst.stateDir, 'pending'))).toEqual(['0.json']);
    const planned = stateOf(inst).imports[0]!.batches[0]!.sha256;

    const fixed = await run(inst, inst.args(XIBO_DAY1, '--json'));
    expect(fixed.code).toBe(1);
    expect(fixed.summary.sent).toMatchObject({ batches: 1, accepted: 9 });
    expect(await storedBatches(inst.source.id)).toEqual([{ batch_seq: 0, body_sha256: planned }]);
    expect(readdirSync(path.join(inst.stateDir, 'pending'))).toEqual([]);
  });

  test('batches left by two stopped runs are sent in batch_seq order by the next, whichever export it is', async () => {
    const inst = await installation('xibo-mapping.json');
    // A platform that cannot be reached: each run gives up at once and keeps its batches.
    const unreachable = {
      send: {
        fetch: (async () => new Response('', { status: 503 })) as unknown as typeof fetch,
        giveUpAfterMs: 0,
      },
    };
    expect((await run(inst, inst.args(XIBO_DAY1), unreachable)).code).toBe(3);
    const day2 = await run(inst, inst.args(XIBO_DAY2), unreachable);
    expect(day2.code).toBe(3);
    expect(day2.out.join('\n')).toContain('2 batch(es) not answered yet');
    // The first day again: its batch 0 goes before the second day's batch 1, or the second day's higher numbers
    // would move the marks past the first day's plays and they would be lost as duplicates.
    const again = await run(inst, inst.args(XIBO_DAY1, '--json'));
    expect(again.summary.earlier_batches_sent).toBe(1);
    expect(again.summary.sent).toMatchObject({ batches: 2, accepted: 9 + 4, duplicates: 0 });
    expect(again.summary.sent.reasons).toEqual({ too_short: 1, play_id_counted: 1 });
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-7'))).toBe(8);
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-12'))).toBe(5);
  });

  test('without its state, exports imported again in their first order are the same bytes; in another, refused', async () => {
    const inst = await installation('xibo-mapping.json');
    await run(inst, inst.args(XIBO_DAY1));
    await run(inst, inst.args(XIBO_DAY2));
    rmSync(inst.stateDir, { recursive: true });
    // The second day first: its plays come out under batch_seq 0 with other numbers, other bytes: refused.
    const wrongOrder = await run(inst, inst.args(XIBO_DAY2));
    expect(wrongOrder.code).toBe(3);
    expect(wrongOrder.out.join('\n')).toContain('STOPPED at batch_seq 0: HTTP 409 batch_conflict');
    expect(wrongOrder.out.join('\n')).toContain(
      'import the exports again in the order they were first imported',
    );
    rmSync(inst.stateDir, { recursive: true });
    // In their first order they are numbered as before: the very bytes the platform has, counted once.
    const first = await run(inst, inst.args(XIBO_DAY1, '--json'));
    expect(first.summary.sent).toMatchObject({ already_received: 1, accepted: 0 });
    const second = await run(inst, inst.args(XIBO_DAY2, '--json'));
    expect(second.code).toBe(0);
    expect(second.summary.sent).toMatchObject({ already_received: 1, accepted: 0, counted_before: 4 });
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-7'))).toBe(8);
    expect(await batchCount(p.database.db, `source:${inst.source.id}`)).toBe(2);
  });
});

/** A day of `count` plays, every 6 s per display, as Xibo exports them. */
function bulkXiboExport(file: string, count: number): void {
  const displays = ['ALM-0001 Abai / Dostyk', 'ALM-0002 Al-Farabi / Nurlytau'];
  const lines = ['"Stat Date",Type,FromDT,ToDT,Layout,Campaign,Display,Media,Tag,Duration,Count,Engagements'];
  const start = Date.parse('2026-11-19T00:00:00+05:00');
  const local = (ms: number) => new Date(ms + 5 * 3_600_000).toISOString().slice(0, 19).replace('T', ' ');
  for (let i = 0; i < count; i += 1) {
    const display = displays[i % 2]!;
    const from = start + Math.floor(i / 2) * 6000;
    const to = from + 5000;
    lines.push(
      `"${local(to)}",media,"${local(from)}","${local(to)}","Autumn loop",,"${display}",tea-autumn-15s.mp4,,5,1,[]`,
    );
  }
  writeFileSync(file, `${lines.join('\n')}\n`);
}

/** A proxy in front of the api host that kills the importer right after the platform answered its `crashAt`th batch. */
async function crashingProxy(crashAt: number, child: () => ChildProcess | undefined) {
  let posts = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      posts += 1;
      const headers: Record<string, string> = {};
      for (const name of [
        'authorization',
        'content-type',
        'content-encoding',
        'x-service-source',
        'x-service-signature',
      ]) {
        const value = req.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const upstream = await fetch(`${api}${req.url}`, {
        method: req.method!,
        headers,
        body: Buffer.concat(chunks),
      });
      const answer = Buffer.from(await upstream.arrayBuffer());
      if (posts === crashAt) {
        // The platform has stored the batch; the importer dies before it hears so.
        child()?.kill('SIGKILL');
        req.socket.destroy();
        return;
      }
      res.writeHead(upstream.status, {
        'content-type': upstream.headers.get('content-type') ?? 'application/json',
      });
      res.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    posts: () => posts,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('pop import: a crash in the middle', () => {
  test('the real command killed after its second batch: the next runs send the same bytes, nothing counted twice', async () => {
    const inst = await installation('xibo-mapping.json');
    const bulk = path.join(inst.dir, 'xibo-bulk-2026-11-19.csv');
    bulkXiboExport(bulk, 25_000); // three batches of at most 10 000 records
    let child: ChildProcess | undefined;
    const proxy = await crashingProxy(2, () => child);
    try {
      const args = inst.args(bulk).map((a) => (a === api ? proxy.url : a));
      child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', CLI, ...args], {
        cwd: REPO,
        env: { ...process.env, OOH_API_KEY: inst.source.operator.key, CI: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child!.on('exit', (code, signal) => resolve({ code, signal })),
      );
      expect(exit, stderr).toEqual({ code: null, signal: 'SIGKILL' });
    } finally {
      await proxy.close();
    }
    expect(proxy.posts()).toBe(2);
    // Batch 0 answered and journaled; batch 1 stored by the platform but never heard of; batch 2 never sent.
    expect((await storedBatches(inst.source.id)).map((b) => b.batch_seq)).toEqual([0, 1]);
    expect(readdirSync(path.join(inst.stateDir, 'pending')).sort()).toEqual(['1.json', '2.json']);
    expect(existsSync(path.join(inst.stateDir, 'answers.ndjson'))).toBe(true);
    expect(existsSync(path.join(inst.stateDir, 'lock'))).toBe(true);

    // The next day's export: the crashed import's batches go first, from their stored bytes, then the new plan.
    const next = await run(inst, inst.args(XIBO_DAY2, '--json'));
    expect(next.code).toBe(0);
    expect(next.summary.earlier_batches_sent).toBe(2);
    expect(next.summary.batches).toMatchObject({ planned: 1, first_batch_seq: 3 });
    expect(next.summary.sent).toMatchObject({ batches: 3, already_received: 1, counted_before: 10_000 });
    expect(next.summary.sent.accepted).toBe(5_000 + 5);
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-7'))).toBe(12_500 + 3);
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-12'))).toBe(12_500 + 2);

    // The crashed export again: every batch the same bytes, every one already received.
    const again = await run(inst, inst.args(bulk, '--json'));
    expect(again.code).toBe(0);
    expect(again.summary.imported_before).toBe(true);
    expect(again.summary.sent).toMatchObject({
      batches: 3,
      already_received: 3,
      accepted: 0,
      counted_before: 25_000,
    });
    expect(await countedPlays(p.database.db, inst.playerKey('xibo-display-7'))).toBe(12_500 + 3);
    const state = stateOf(inst);
    const stored = await storedBatches(inst.source.id);
    expect(stored.map((b) => b.body_sha256)).toEqual(
      state.imports.flatMap((i) => i.batches.map((b) => b.sha256)),
    );
    expect(existsSync(path.join(inst.stateDir, 'answers.ndjson'))).toBe(false);
    expect(statSync(path.join(inst.stateDir, 'state.json')).mode & 0o777).toBe(0o600);
  }, 120_000);
});

describe('ooh-pop keygen', () => {
  test('makes a key the console registers, and never overwrites one', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ooh-pop-keygen-'));
    dirs.push(dir);
    const keyFile = path.join(dir, 'key.pem');
    const out: string[] = [];
    expect(await main(['keygen', '--out', keyFile], { out: (l) => out.push(l), err: () => {} })).toBe(0);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    const operator = await createOperator(p, 1);
    const res = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/cms-installations', {
      organisation_id: operator.id,
      name: 'Xibo CMS',
      kind: 'xibo',
      public_key: out[0],
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(await main(['keygen', '--out', keyFile], { out: () => {}, err: () => {} })).toBe(2);
  });
});

function gunzipIfNeeded(body: Buffer): Buffer {
  return body[0] === 0x1f && body[1] === 0x8b ? gunzipSync(body) : body;
}
