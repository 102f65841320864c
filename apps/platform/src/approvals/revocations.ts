import { formatAlmaty, type RevocationListBody } from '@ooh/protocol';
import type { Authority } from '../authority/index.js';
import type { Db, DbClient } from '../db/pool.js';
import { documentText, type SignedDocument, signDocument } from './envelope.js';

// One publisher at a time across instances: versions are consecutive and each holds every revocation
// committed before it. A restore's advance (src/backup/advance.ts) takes it too.
export const REVOCATION_LIST_LOCK = 0x00_0f_f0_0d_30;

/**
 * Publishes the next revocation list (DESIGN.md section 4) in the caller's transaction: version n+1
 * (1 for the first), every revoked approval ordered by revocation time then number, signed like an
 * envelope. Timestamps are Almaty RFC 3339 with milliseconds, as in the ledger. After a restore, n is at least
 * the restore's floor (restore_advances): the versions the lost interval published are in players' hands, and
 * pop-ingestion.md's "Versions never repeat, so equal versions mean equal facts" must hold for them too.
 */
export async function publishRevocationList(
  client: DbClient,
  authority: Authority,
  now: Date,
): Promise<SignedDocument<RevocationListBody>> {
  await client.query('SELECT pg_advisory_xact_lock($1)', [REVOCATION_LIST_LOCK]);
  const { rows: last } = await client.query<{ version: number | null; issued_at: Date | null }>(
    'SELECT version, issued_at FROM revocation_lists ORDER BY version DESC LIMIT 1',
  );
  // Without a restore the table is empty and this is the newest version + 1, as before.
  const { rows: floor } = await client.query<{ floor: number | null }>(
    'SELECT max(revocation_list_version_floor) AS floor FROM restore_advances',
  );
  const version = Math.max(last[0]?.version ?? 0, floor[0]?.floor ?? 0) + 1;
  const { rows: revoked } = await client.query<{ number: string; revoked_at: Date }>(
    'SELECT number, revoked_at FROM approvals WHERE revoked_at IS NOT NULL ORDER BY revoked_at, number',
  );
  // `now` was read when the caller's request began, before this lock: a revocation that read the clock later may
  // have taken the lock first. A list is never issued before the list it follows nor before a revocation it holds,
  // so issued_at runs forward with the versions.
  const issuedAt = new Date(
    Math.max(
      now.getTime(),
      last[0]?.issued_at?.getTime() ?? 0,
      ...revoked.slice(-1).map((r) => r.revoked_at.getTime()),
    ),
  );
  const body: RevocationListBody = {
    version,
    issued_at: formatAlmaty(issuedAt, { milliseconds: true }),
    revoked: revoked.map((r) => ({
      approval_number: r.number,
      revoked_at: formatAlmaty(r.revoked_at, { milliseconds: true }),
    })),
  };
  const document = await signDocument(body, authority, issuedAt);
  await client.query(
    'INSERT INTO revocation_lists (version, issued_at, body, signature) VALUES ($1, $2, $3, $4)',
    [version, issuedAt, JSON.stringify(body), document.signature],
  );
  return document;
}

/** The newest signed revocation list as its document text (documentText); null before the first revocation. */
export async function latestRevocationListText(db: Db | DbClient): Promise<string | null> {
  const { rows } = await db.query<{ body: RevocationListBody; signature: string }>(
    'SELECT body, signature FROM revocation_lists ORDER BY version DESC LIMIT 1',
  );
  const row = rows[0];
  return row ? documentText({ v: 1, body: row.body, signature: row.signature }) : null;
}
