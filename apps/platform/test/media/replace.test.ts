import { createHash } from 'node:crypto';
import { access, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { releaseMedia } from '../../src/media/index.js';
import { createDraft, type Org, organisation, structures, upload } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import { apiCall, startTestPlatform, type TestPlatform } from '../support/platform.js';

// A draft's media replaced by another file: the old file leaves the disk once no submission of any organisation
// names its hash, never before the replacement committed, and never while another upload is about to name it.

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let p: TestPlatform;
let dataDir: string;
let operator: Org;
let advertiser: Org;
let site: { id: string; code: string }[];
let seed = 0;
/** A PNG no other test of this file uploads. */
const freshPng = () => {
  seed += 1;
  return png(16, 16, seed);
};

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-media-replace-'));
  p = await startTestPlatform({ dataDir, now: new Date('2026-11-20T16:30:00+05:00') });
  operator = await organisation(p, 'operator');
  advertiser = await organisation(p, 'advertiser');
  site = await structures(p, operator.id, 1);
  // What the failure and the race below ask of an upload's transaction. A deferred constraint trigger runs at
  // COMMIT, after keepUpload has moved the file: rows of the submissions listed in media_test_refused fail there,
  // rows of those in media_test_slow wait there (the window between keepUpload and COMMIT, held open). A plain
  // trigger runs when the row is written, before keepUpload: rows of those in media_test_slow also wait there.
  await p.database.db.query(`
    CREATE TABLE media_test_refused (submission_id uuid PRIMARY KEY);
    CREATE TABLE media_test_slow (submission_id uuid PRIMARY KEY);
    CREATE FUNCTION media_test_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM media_test_refused WHERE submission_id = NEW.submission_id) THEN
        RAISE EXCEPTION 'refused by the test at COMMIT';
      END IF;
      IF EXISTS (SELECT 1 FROM media_test_slow WHERE submission_id = NEW.submission_id) THEN
        PERFORM pg_sleep(0.3);
      END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER media_test_at_commit AFTER INSERT OR UPDATE ON submission_media
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION media_test_at_commit();
    CREATE FUNCTION media_test_at_write() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM media_test_slow WHERE submission_id = NEW.submission_id) THEN
        PERFORM pg_sleep(0.3);
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER media_test_at_write AFTER INSERT OR UPDATE ON submission_media
      FOR EACH ROW EXECUTE FUNCTION media_test_at_write();
  `);
});
afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const fileOf = (hash: string) => path.join(dataDir, 'media', hash);
const onDisk = (hash: string) =>
  access(fileOf(hash)).then(
    () => true,
    () => false,
  );
const draftOf = (org: Org) => createDraft(p, org.key, { structure_ids: site.map((s) => s.id) });

async function uploaded(org: Org, id: string, bytes: Buffer): Promise<void> {
  const res = await upload(p, org.key, id, bytes, 'image/png');
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json().media_sha256).toBe(sha(bytes));
}

async function downloaded(org: Org, id: string): Promise<Buffer> {
  const res = await apiCall(p.servers.api, org.key, 'GET', `/api/v1/submissions/${id}/media`);
  expect(res.statusCode, res.body).toBe(200);
  return res.rawPayload;
}

async function namedHash(id: string): Promise<string | null> {
  const { rows } = await p.database.db.query<{ media_sha256: string }>(
    'SELECT media_sha256 FROM submission_media WHERE submission_id = $1',
    [id],
  );
  return rows[0]?.media_sha256 ?? null;
}

/** Every hash a row names has its file on disk. */
async function everyNamedFileThere(): Promise<void> {
  const { rows } = await p.database.db.query<{ media_sha256: string }>(
    'SELECT DISTINCT media_sha256 FROM submission_media',
  );
  const missing: string[] = [];
  for (const { media_sha256 } of rows) if (!(await onDisk(media_sha256))) missing.push(media_sha256);
  expect(missing).toEqual([]);
}

describe("replacing a draft's media", () => {
  test('removes the old file when no submission names it any more; the new file is there and downloadable', async () => {
    const d = await draftOf(operator);
    const first = freshPng();
    const second = freshPng();
    await uploaded(operator, d.id, first);
    expect(await onDisk(sha(first))).toBe(true);

    await uploaded(operator, d.id, second);
    expect(await onDisk(sha(first))).toBe(false);
    expect(await onDisk(sha(second))).toBe(true);
    expect(await namedHash(d.id)).toBe(sha(second));
    expect(Buffer.compare(await downloaded(operator, d.id), second)).toBe(0);
  });

  test("keeps the old file while another organisation's submission names the same bytes, removes it after", async () => {
    const own = await draftOf(operator);
    const theirs = await draftOf(advertiser);
    const shared = freshPng();
    await uploaded(operator, own.id, shared);
    await uploaded(advertiser, theirs.id, shared);

    const replacement = freshPng();
    await uploaded(operator, own.id, replacement);
    expect(await onDisk(sha(shared))).toBe(true);
    expect(Buffer.compare(await downloaded(advertiser, theirs.id), shared)).toBe(0);
    expect(Buffer.compare(await downloaded(operator, own.id), replacement)).toBe(0);

    // The last submission that named it moves on: now nothing needs it.
    await uploaded(advertiser, theirs.id, freshPng());
    expect(await onDisk(sha(shared))).toBe(false);
    expect(await onDisk(sha(replacement))).toBe(true);
  });

  test('uploading the same file again keeps it', async () => {
    const d = await draftOf(operator);
    const bytes = freshPng();
    await uploaded(operator, d.id, bytes);
    await uploaded(operator, d.id, bytes);
    expect(await onDisk(sha(bytes))).toBe(true);
    expect(Buffer.compare(await downloaded(operator, d.id), bytes)).toBe(0);
  });

  test('a replacement whose transaction fails after the file was moved leaves the old file and its row, and no new file nobody names', async () => {
    const d = await draftOf(operator);
    const old = freshPng();
    await uploaded(operator, d.id, old);
    await p.database.db.query('INSERT INTO media_test_refused (submission_id) VALUES ($1)', [d.id]);
    try {
      // Bytes nobody else names: removed again after the failed COMMIT.
      const lonely = freshPng();
      const failed = await upload(p, operator.key, d.id, lonely, 'image/png');
      expect(failed.statusCode).toBe(500);
      expect(await namedHash(d.id)).toBe(sha(old));
      expect(await onDisk(sha(old))).toBe(true);
      expect(await onDisk(sha(lonely))).toBe(false);

      // Bytes another submission names: they stay for it.
      const other = await draftOf(advertiser);
      const shared = freshPng();
      await uploaded(advertiser, other.id, shared);
      expect((await upload(p, operator.key, d.id, shared, 'image/png')).statusCode).toBe(500);
      expect(await namedHash(d.id)).toBe(sha(old));
      expect(await onDisk(sha(old))).toBe(true);
      expect(await onDisk(sha(shared))).toBe(true);
      expect(Buffer.compare(await downloaded(operator, d.id), old)).toBe(0);
      expect(Buffer.compare(await downloaded(advertiser, other.id), shared)).toBe(0);
      expect(await readdir(path.join(dataDir, 'media', 'tmp'))).toEqual([]);
    } finally {
      await p.database.db.query('DELETE FROM media_test_refused WHERE submission_id = $1', [d.id]);
    }
  });

  test('a file that is not there is no error to remove', async () => {
    expect(await releaseMedia(p.database.db, dataDir, 'f'.repeat(64))).toEqual({ outcome: 'missing' });
  });
});

describe('two uploads of the same bytes while a third draft replaces them away', () => {
  /** Transactions waiting in media_test_at_commit: between keepUpload and the end of their COMMIT. */
  async function committing(): Promise<number> {
    const { rows } = await p.database.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event = 'PgSleep' AND query = 'COMMIT'`,
    );
    return rows[0]!.n;
  }

  /**
   * Watches, every few milliseconds until stopped, that each hash a committed row names has its file: a file removed
   * from under a row is put back when the other upload moves its own copy into place, so the end state alone would
   * not show it. Resolves with what it saw missing.
   */
  function watchNamedFiles(): () => Promise<string[]> {
    const missing = new Set<string>();
    let stopped = false;
    const watching = (async () => {
      while (!stopped) {
        const { rows } = await p.database.db.query<{ media_sha256: string }>(
          'SELECT DISTINCT media_sha256 FROM submission_media',
        );
        for (const { media_sha256 } of rows) if (!(await onDisk(media_sha256))) missing.add(media_sha256);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    return async () => {
      stopped = true;
      await watching;
      return [...missing];
    };
  }

  async function race(options: { replaceWhileCommitting: boolean }): Promise<void> {
    const bytes = freshPng();
    const hash = sha(bytes);
    const leaving = await draftOf(operator);
    await uploaded(operator, leaving.id, bytes);
    const a = await draftOf(operator);
    const b = await draftOf(advertiser);
    if (options.replaceWhileCommitting) {
      await p.database.db.query('INSERT INTO media_test_slow (submission_id) VALUES ($1), ($2)', [
        a.id,
        b.id,
      ]);
    }
    const stopWatching = watchNamedFiles();
    const uploads = [
      upload(p, operator.key, a.id, bytes, 'image/png'),
      upload(p, advertiser.key, b.id, bytes, 'image/png'),
    ];
    if (options.replaceWhileCommitting) {
      // The first of them has found the file there (keepUpload, so it dropped its own copy) and waits at COMMIT; the
      // other waits to write its row: the moment a remover that does not wait for them would see the hash unnamed and
      // take the file from under the first.
      const until = Date.now() + 10_000;
      while ((await committing()) === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
      expect(await committing()).toBeGreaterThan(0);
    }
    const replacing = upload(p, operator.key, leaving.id, freshPng(), 'image/png');
    const answers = await Promise.all([...uploads, replacing]);
    expect(await stopWatching()).toEqual([]);
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200, 200]);
    expect(await namedHash(a.id)).toBe(hash);
    expect(await namedHash(b.id)).toBe(hash);
    expect(await namedHash(leaving.id)).not.toBe(hash);
    expect(await onDisk(hash)).toBe(true);
    await everyNamedFileThere();
    expect(Buffer.compare(await downloaded(operator, a.id), bytes)).toBe(0);
    expect(Buffer.compare(await downloaded(advertiser, b.id), bytes)).toBe(0);

    // Both move on at once: whichever commits last removes the file.
    await p.database.db.query('DELETE FROM media_test_slow WHERE submission_id IN ($1, $2)', [a.id, b.id]);
    const moved = await Promise.all([
      upload(p, operator.key, a.id, freshPng(), 'image/png'),
      upload(p, advertiser.key, b.id, freshPng(), 'image/png'),
    ]);
    expect(moved.map((r) => r.statusCode)).toEqual([200, 200]);
    await everyNamedFileThere();
    expect(await onDisk(hash)).toBe(false);
  }

  test('no row ever names a missing file, when the replacement falls between keepUpload and COMMIT (5 runs)', async () => {
    for (let run = 0; run < 5; run += 1) await race({ replaceWhileCommitting: true });
  });

  test('no row ever names a missing file, all three at once (10 runs)', async () => {
    for (let run = 0; run < 10; run += 1) await race({ replaceWhileCommitting: false });
  });
});
