import type { Db, DbClient } from '../db/pool.js';

/*
 * Which media files are still needed, and the lock that keeps "is it needed? then remove it" from racing an upload.
 *
 * A file at `${dataDir}/media/<sha256>` is needed while a row names its hash in:
 * - submission_media: GET /api/v1/submissions/{id}/media reads the file from disk (the moderation preview), and an
 *   approval is issued from it;
 * - approvals: an approval always names its submission's file (only a draft's media changes, and a draft has no
 *   approval), so this adds nothing today; it is asked all the same, so that the file of an issued approval is never
 *   removed whatever later becomes of submission_media.
 * Other tables name hashes too (proof-of-play records, device refusals, ledger leaves) but never read a file.
 */

/**
 * The first key of every media hash lock ("MEDI"). Advisory locks of the two-key form share one key space with the
 * receive-day locks (migration 064: first key 0x5EA1DA1, second the day's number): a class of their own keeps a hash
 * from ever meeting a day's lock, which the seal waits for.
 */
const MEDIA_LOCK_CLASS = 0x4d454449;

/**
 * The advisory lock of one hash: the two-key form, the media class and the hash's first 32 bits. Two hashes sharing
 * those bits only wait for each other, for the length of a rename or an unlink.
 */
function hashLockKeys(sha256: string): [number, number] {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error(`not a SHA-256: ${sha256}`);
  return [MEDIA_LOCK_CLASS, Number.parseInt(sha256.slice(0, 8), 16) | 0];
}

/**
 * Takes the hash's lock until the end of the transaction. An upload takes it before moving its file to the content
 * address (keepUpload) and keeps it to COMMIT; a remover takes it around "is it still named? then unlink". So a
 * remover never sees a file unnamed that an upload has found there and is about to name.
 */
export async function lockMediaHash(client: DbClient, sha256: string): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', hashLockKeys(sha256));
}

/** The same lock if nobody holds it; false when an upload or another remover is at this hash now. */
export async function tryLockMediaHash(client: DbClient, sha256: string): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>(
    'SELECT pg_try_advisory_xact_lock($1::int4, $2::int4) AS ok',
    hashLockKeys(sha256),
  );
  return rows[0]?.ok === true;
}

/** Whether any row names the hash (asked under the hash's lock, in a statement of its own: it sees every COMMIT before the lock was granted). */
export async function isMediaNamed(db: Db | DbClient, sha256: string): Promise<boolean> {
  const { rows } = await db.query<{ named: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM submission_media WHERE media_sha256 = $1)
         OR EXISTS (SELECT 1 FROM approvals WHERE media_sha256 = $1) AS named`,
    [sha256],
  );
  return rows[0]?.named === true;
}

/** The hashes of `hashes` that no row names (the sweep's first pass, without locks; each is asked again under its lock). */
export async function unnamedHashes(db: Db | DbClient, hashes: string[]): Promise<string[]> {
  if (hashes.length === 0) return [];
  const { rows } = await db.query<{ sha256: string }>(
    `SELECT h AS sha256 FROM unnest($1::text[]) AS h
      WHERE NOT EXISTS (SELECT 1 FROM submission_media m WHERE m.media_sha256 = h)
        AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.media_sha256 = h)`,
    [hashes],
  );
  return rows.map((r) => r.sha256);
}

/** Whether the database names any media file at all (the sweep's guard against a wrong, empty database). */
export async function anyMediaNamed(db: Db | DbClient): Promise<boolean> {
  const { rows } = await db.query<{ any: boolean }>('SELECT EXISTS (SELECT 1 FROM submission_media) AS any');
  return rows[0]?.any === true;
}
