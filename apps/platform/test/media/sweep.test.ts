import { createHash, randomUUID } from 'node:crypto';
import { lutimes, mkdir, mkdtemp, readdir, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TestClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { createPool, type Db } from '../../src/db/pool.js';
import { lockMediaHash } from '../../src/media/index.js';
import { type MediaSweep, sweepMedia } from '../../src/media/sweep.js';
import { type Platform, startPlatform } from '../../src/platform.js';
import { createDraft, organisation, structures, upload } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { createTestDatabase } from '../support/database.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

// The sweep of what a crash leaves in the media folder: temporary files of dead uploads, content files no row names.

const DAY_MS = 24 * 3_600_000;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const hashOf = (text: string) => sha(Buffer.from(text));

let p: TestPlatform;
let tmp: string;
/** A hash a submission names (its file is kept whatever its age). */
let named: string;
let namedBytes: Buffer;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ooh-media-sweep-'));
  p = await startTestPlatform({ dataDir: path.join(tmp, 'uploads') });
  const operator = await organisation(p, 'operator');
  const site = await structures(p, operator.id, 1);
  const draft = await createDraft(p, operator.key, { structure_ids: site.map((s) => s.id) });
  namedBytes = png(8, 8, 42);
  const res = await upload(p, operator.key, draft.id, namedBytes, 'image/png');
  expect(res.statusCode, res.body).toBe(200);
  named = sha(namedBytes);
});
afterAll(async () => {
  await p?.close();
  await rm(tmp, { recursive: true, force: true });
});

/** Sets a file's (or a link's own) modification time `ageMs` back from now. */
async function age(file: string, ageMs: number, options: { link?: boolean } = {}): Promise<void> {
  const at = (Date.now() - ageMs) / 1000;
  await (options.link ? lutimes(file, at, at) : utimes(file, at, at));
}

async function fileAged(file: string, bytes: number | Buffer, ageMs: number): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, typeof bytes === 'number' ? Buffer.alloc(bytes, 7) : bytes);
  await age(file, ageMs);
}

/** A data folder of its own, with the named file in it (as an upload left it). */
async function dataFolder(): Promise<string> {
  const dataDir = await mkdtemp(path.join(tmp, 'data-'));
  await fileAged(path.join(dataDir, 'media', named), namedBytes, 3 * DAY_MS);
  await mkdir(path.join(dataDir, 'media', 'tmp'));
  return dataDir;
}

const sweep = (dataDir: string, db: Db = p.database.db) =>
  sweepMedia({ db, dataDir, log: p.ctx.log }, { now: new Date() });

const NOTHING: MediaSweep = {
  tempFiles: 0,
  tempBytes: 0,
  unnamedFiles: 0,
  unnamedBytes: 0,
  busy: 0,
  failed: 0,
  keptForEmptyDatabase: 0,
};

const listing = async (dir: string) => (await readdir(dir)).sort();

describe('the media sweep', () => {
  test('removes a day-old temporary file and a day-old unnamed content file; keeps the fresh, the named, other names and links', async () => {
    const dataDir = await dataFolder();
    const media = path.join(dataDir, 'media');
    const outside = path.join(dataDir, 'outside');
    const oldTemp = randomUUID();
    const freshTemp = randomUUID();
    const linkTemp = randomUUID();
    const unnamed = hashOf('unnamed and old');
    const young = hashOf('unnamed and young');
    const linked = hashOf('a link');
    const folder = hashOf('a folder');
    const upper = hashOf('upper case').toUpperCase();

    await fileAged(path.join(media, 'tmp', oldTemp), 1000, 2 * DAY_MS);
    // An upload in progress: written a moment ago.
    await fileAged(path.join(media, 'tmp', freshTemp), 300, 60_000);
    await fileAged(path.join(media, 'tmp', 'upload.part'), 10, 2 * DAY_MS);
    await fileAged(path.join(outside, 'target-of-temp-link'), 20, 2 * DAY_MS);
    await symlink(path.join(outside, 'target-of-temp-link'), path.join(media, 'tmp', linkTemp));
    await age(path.join(media, 'tmp', linkTemp), 2 * DAY_MS, { link: true });

    await fileAged(path.join(media, unnamed), 500, 2 * DAY_MS);
    await fileAged(path.join(media, young), 400, 3_600_000);
    await fileAged(path.join(media, 'README'), 30, 2 * DAY_MS);
    await fileAged(path.join(media, upper), 40, 2 * DAY_MS);
    await fileAged(path.join(outside, 'target-of-content-link'), 50, 2 * DAY_MS);
    await symlink(path.join(outside, 'target-of-content-link'), path.join(media, linked));
    await age(path.join(media, linked), 2 * DAY_MS, { link: true });
    await mkdir(path.join(media, folder));
    await age(path.join(media, folder), 2 * DAY_MS);

    expect(await sweep(dataDir)).toEqual({
      ...NOTHING,
      tempFiles: 1,
      tempBytes: 1000,
      unnamedFiles: 1,
      unnamedBytes: 500,
    });
    expect(await listing(path.join(media, 'tmp'))).toEqual([freshTemp, linkTemp, 'upload.part'].sort());
    expect(await listing(media)).toEqual(['README', folder, linked, named, 'tmp', upper, young].sort());
    expect(await listing(outside)).toEqual(['target-of-content-link', 'target-of-temp-link']);
    // A second sweep finds nothing more.
    expect(await sweep(dataDir)).toEqual(NOTHING);
  });

  test('a media/tmp that is a link to another folder is not swept', async () => {
    const dataDir = await dataFolder();
    const elsewhere = path.join(dataDir, 'elsewhere');
    const stray = randomUUID();
    await fileAged(path.join(elsewhere, stray), 10, 2 * DAY_MS);
    await rm(path.join(dataDir, 'media', 'tmp'), { recursive: true });
    await symlink(elsewhere, path.join(dataDir, 'media', 'tmp'));
    expect(await sweep(dataDir)).toEqual(NOTHING);
    expect(await listing(elsewhere)).toEqual([stray]);
  });

  test('an unnamed file whose hash an upload holds now is left for the next sweep', async () => {
    const dataDir = await dataFolder();
    const held = hashOf('held by an upload');
    await fileAged(path.join(dataDir, 'media', held), 70, 2 * DAY_MS);
    const client = await p.database.db.connect();
    try {
      await client.query('BEGIN');
      await lockMediaHash(client, held);
      expect(await sweep(dataDir)).toEqual({ ...NOTHING, busy: 1 });
      expect(await listing(path.join(dataDir, 'media'))).toContain(held);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await sweep(dataDir)).toEqual({ ...NOTHING, unnamedFiles: 1, unnamedBytes: 70 });
  });

  test('a database that names no media at all has the old files kept (a wrong DATABASE_URL removes nothing)', async () => {
    const empty = await createTestDatabase();
    try {
      const dataDir = await dataFolder();
      const oldTemp = randomUUID();
      await fileAged(path.join(dataDir, 'media', 'tmp', oldTemp), 10, 2 * DAY_MS);
      expect(await sweep(dataDir, empty.db)).toEqual({
        ...NOTHING,
        tempFiles: 1,
        tempBytes: 10,
        keptForEmptyDatabase: 1,
      });
      expect(await listing(path.join(dataDir, 'media'))).toEqual([named, 'tmp']);
    } finally {
      await empty.drop();
    }
  });

  test('no media folder yet: nothing to do, no error', async () => {
    expect(await sweep(path.join(tmp, 'never-uploaded'))).toEqual(NOTHING);
  });

  test('two instances on one database sweeping at once do not fail, and each file is removed once', async () => {
    const dataDir = await dataFolder();
    const other = createPool(p.database.url, { max: 2, applicationName: 'ooh-test-second-instance' });
    try {
      for (let run = 0; run < 3; run += 1) {
        for (let i = 0; i < 40; i += 1) {
          await fileAged(path.join(dataDir, 'media', 'tmp', randomUUID()), 10, 2 * DAY_MS);
          await fileAged(path.join(dataDir, 'media', hashOf(`run ${run} file ${i}`)), 20, 2 * DAY_MS);
        }
        const results = await Promise.all([sweep(dataDir), sweep(dataDir, other)]);
        const done = results.filter((r): r is MediaSweep => r !== 'busy');
        expect(done.length).toBeGreaterThan(0);
        const total = (key: keyof MediaSweep) => done.reduce((sum, r) => sum + r[key], 0);
        expect([total('tempFiles'), total('unnamedFiles'), total('failed')]).toEqual([40, 40, 0]);
        expect(await listing(path.join(dataDir, 'media'))).toEqual([named, 'tmp']);
        expect(await listing(path.join(dataDir, 'media', 'tmp'))).toEqual([]);
      }
    } finally {
      await other.end();
    }
  });
});

describe('the media feature', () => {
  const started: Platform[] = [];
  afterAll(async () => {
    for (const platform of started) await platform.close();
  });

  test('two platforms on one database and one data folder sweep at start without failing, and log what they removed', async () => {
    const dataDir = await dataFolder();
    for (let i = 0; i < 5; i += 1) {
      await fileAged(path.join(dataDir, 'media', 'tmp', randomUUID()), 100, 2 * DAY_MS);
      await fileAged(path.join(dataDir, 'media', hashOf(`left by a crash ${i}`)), 200, 2 * DAY_MS);
    }
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const config = loadConfig({
      env: { API_PORT: '0', AGENTS_PORT: '0', DEVICES_PORT: '0', VERIFY_PORT: '0' },
      overrides: { env: 'test', logLevel: 'silent', databaseUrl: p.database.url, dataDir },
    });
    const clock = new TestClock(new Date(), { frozen: true });
    started.push(
      ...(await Promise.all([startPlatform({ config, clock, log }), startPlatform({ config, clock, log })])),
    );

    // Each logs its sweep once done: wait for the lines that account for all ten files.
    const swept = () => lines.filter((l) => l['msg'] === 'media files swept');
    const sum = (key: string) => swept().reduce((total, l) => total + Number(l[key]), 0);
    const until = Date.now() + 20_000;
    while (sum('temp_files') + sum('unnamed_files') < 10 && Date.now() < until)
      await new Promise((r) => setTimeout(r, 50));
    expect(await listing(path.join(dataDir, 'media'))).toEqual([named, 'tmp']);
    expect(await listing(path.join(dataDir, 'media', 'tmp'))).toEqual([]);
    expect([
      sum('temp_files'),
      sum('temp_bytes'),
      sum('unnamed_files'),
      sum('unnamed_bytes'),
      sum('failed'),
    ]).toEqual([5, 500, 5, 1000, 0]);
    expect(lines.filter((l) => l['ticker'] === 'media sweep')).toEqual([]);
  });
});
