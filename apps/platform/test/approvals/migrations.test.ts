import { afterEach, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { recordLedgerLeaf } from '../../src/ledger/leaves.js';
import { withTransaction } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const HEX = 'a'.repeat(64);
const T = new Date('2026-11-20T06:00:00Z');
let database: TestDatabase | null = null;
afterEach(async () => {
  await database?.drop();
  database = null;
});

/** A database migrated to `upTo`, holding one organisation, structure, submission and approval. */
async function seeded(upTo: number) {
  database = await createTestDatabase({ upTo });
  const db = database.db;
  const org = (
    await db.query(
      "INSERT INTO organisations (name, kind, created_at) VALUES ('Op', 'operator', $1) RETURNING id",
      [T],
    )
  ).rows[0].id;
  const structure = (
    await db.query(
      "INSERT INTO structures (organisation_id, code, district, format, created_at) VALUES ($1, 'S-1', 'almaly', 'billboard', $2) RETURNING id",
      [org, T],
    )
  ).rows[0].id;
  const submission = (
    await db.query(
      `INSERT INTO submissions (number, organisation_id, state, advertiser_name, period_from, period_to, created_at, updated_at)
       VALUES ('SUB-2026-000001', $1, 'draft', 'Acme', '2026-12-01', '2026-12-31', $2, $2) RETURNING id`,
      [org, T],
    )
  ).rows[0].id;
  const approval = (
    await db.query(
      `INSERT INTO approvals (number, submission_id, media_sha256, valid_from, valid_until, issued_at)
       VALUES ('APR-2026-000001', $1, $2, '2026-12-01', '2026-12-31', $3) RETURNING id`,
      [submission, HEX, T],
    )
  ).rows[0].id;
  await db.query('INSERT INTO approval_structures (approval_id, structure_id) VALUES ($1, $2)', [
    approval,
    structure,
  ]);
  return { db, org, structure, submission, approval };
}

describe('030_submission_review', () => {
  test('existing submissions keep their state and gain empty review columns; media rows are checked', async () => {
    const { db, submission, org } = await seeded(29);
    await migrate(db);
    const { rows } = await db.query(
      'SELECT state, sent_at, decided_at, reject_reason FROM submissions WHERE id = $1',
      [submission],
    );
    expect(rows[0]).toEqual({ state: 'draft', sent_at: null, decided_at: null, reject_reason: null });
    await expect(
      db.query("UPDATE submissions SET state = 'withdrawn' WHERE id = $1", [submission]),
    ).rejects.toMatchObject({ code: '23514', constraint: 'submissions_state' });
    await db.query(
      `INSERT INTO submission_media (submission_id, organisation_id, media_sha256, media_type, size_bytes, width, height,
         duration_ms, uploaded_at)
       VALUES ($1, $2, $3, 'video/mp4', 10, 1920, 1080, 15000, $4)`,
      [submission, org, HEX, T],
    );
    await expect(
      db.query(
        `INSERT INTO submission_media (submission_id, organisation_id, media_sha256, media_type, size_bytes, width, height,
           uploaded_at)
         VALUES ($1, $2, $3, 'image/gif', 10, 1, 1, $4)`,
        [submission, org, 'b'.repeat(64), T],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'submission_media_media_type_check' });
  });
});

describe('031_approval_envelopes', () => {
  test('an approval issued before keeps its columns, has no envelope, and gets its owner, number and codes', async () => {
    const { db, approval, org } = await seeded(30);
    await migrate(db);
    const { rows } = await db.query(
      `SELECT number, media_sha256, to_char(valid_from, 'YYYY-MM-DD') AS valid_from, envelope, manifest_sha256,
              organisation_id, submission_number, structure_codes
         FROM approvals WHERE id = $1`,
      [approval],
    );
    expect(rows[0]).toEqual({
      number: 'APR-2026-000001',
      media_sha256: HEX,
      valid_from: '2026-12-01',
      envelope: null,
      manifest_sha256: null,
      organisation_id: org,
      submission_number: 'SUB-2026-000001',
      structure_codes: ['S-1'],
    });
    await expect(
      db.query("UPDATE approvals SET manifest_sha256 = 'XYZ' WHERE id = $1", [approval]),
    ).rejects.toMatchObject({ code: '23514', constraint: 'approvals_manifest_sha256_check' });
  });
});

describe('032_revocation_lists', () => {
  test('versions start at 1 and are unique', async () => {
    const { db } = await seeded(31);
    await migrate(db);
    const insert = (version: number) =>
      db.query('INSERT INTO revocation_lists (version, issued_at, body, signature) VALUES ($1, $2, $3, $4)', [
        version,
        T,
        '{}',
        'sig',
      ]);
    await insert(1);
    await expect(insert(1)).rejects.toMatchObject({ code: '23505', constraint: 'revocation_lists_pkey' });
    await expect(insert(0)).rejects.toMatchObject({
      code: '23514',
      constraint: 'revocation_lists_version_check',
    });
  });
});

describe('033_ledger_leaves', () => {
  test('leaves are recorded in order with their Almaty day; kinds and their fields are checked', async () => {
    const { db } = await seeded(32);
    await migrate(db);
    // 23:30 UTC on 20 November is 04:30 on 21 November in Almaty.
    const late = new Date('2026-11-20T23:30:00Z');
    const leaf = await withTransaction(db, (c) =>
      recordLedgerLeaf(
        c,
        { kind: 'approval', approvalNumber: 'APR-2026-000001', manifestSha256: HEX, signedAt: late },
        late,
      ),
    );
    expect(leaf).toMatchObject({
      day: '2026-11-21',
      kind: 'approval',
      approval_number: 'APR-2026-000001',
      revoked_at: null,
    });
    const seal = await withTransaction(db, (c) =>
      recordLedgerLeaf(c, { kind: 'stats_seal', manifestSha256: HEX, signedAt: late }, late),
    );
    expect(seal.id).toBeGreaterThan(leaf.id);
    expect(seal.approval_number).toBeNull();
    await expect(
      db.query(
        "INSERT INTO ledger_leaves (recorded_at, day, kind, approval_number, manifest_sha256, signed_at) VALUES ($1, '2026-11-20', 'revocation', 'APR-1', $2, $1)",
        [T, HEX],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'ledger_leaves_check1' });
    await expect(
      db.query(
        "INSERT INTO ledger_leaves (recorded_at, day, kind, manifest_sha256, signed_at) VALUES ($1, '2026-11-20', 'approval', $2, $1)",
        [T, HEX],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'ledger_leaves_check' });
  });
});
