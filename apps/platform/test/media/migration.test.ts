import { afterEach, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { isMediaNamed, unnamedHashes } from '../../src/media/repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const T = new Date('2026-11-20T06:00:00Z');
const NAMED = 'a'.repeat(64);
const UNNAMED = 'b'.repeat(64);
let database: TestDatabase | null = null;
afterEach(async () => {
  await database?.drop();
  database = null;
});

describe('083_submission_media_sha256', () => {
  test('existing media rows are kept and found by their hash alone', async () => {
    database = await createTestDatabase({ upTo: 82 });
    const db = database.db;
    const org = (
      await db.query(
        "INSERT INTO organisations (name, kind, created_at) VALUES ('Op', 'operator', $1) RETURNING id",
        [T],
      )
    ).rows[0].id;
    const submission = (
      await db.query(
        `INSERT INTO submissions (number, organisation_id, state, advertiser_name, period_from, period_to, created_at, updated_at)
         VALUES ('SUB-2026-000001', $1, 'draft', 'Acme', '2026-12-01', '2026-12-31', $2, $2) RETURNING id`,
        [org, T],
      )
    ).rows[0].id;
    await db.query(
      `INSERT INTO submission_media (submission_id, organisation_id, media_sha256, media_type, size_bytes, width, height,
         duration_ms, uploaded_at) VALUES ($1, $2, $3, 'image/png', 10, 4, 4, NULL, $4)`,
      [submission, org, NAMED, T],
    );

    await migrate(db);

    const { rows } = await db.query(
      "SELECT indexdef FROM pg_indexes WHERE tablename = 'submission_media' AND indexname = 'submission_media_sha256_hash'",
    );
    expect(rows).toEqual([
      {
        indexdef:
          'CREATE INDEX submission_media_sha256_hash ON public.submission_media USING hash (media_sha256)',
      },
    ]);
    expect(await isMediaNamed(db, NAMED)).toBe(true);
    expect(await isMediaNamed(db, UNNAMED)).toBe(false);
    expect(await unnamedHashes(db, [NAMED, UNNAMED])).toEqual([UNNAMED]);
  });
});
