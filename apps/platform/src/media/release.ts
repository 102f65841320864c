import type { Db } from '../db/pool.js';
import { isMediaNamed, lockMediaHash } from './repository.js';
import { mediaPath, removeRegularFile } from './store.js';

/** How long a remover waits for the hash's lock: its holders hold it for a rename and a COMMIT, or a query and an unlink. */
const LOCK_WAIT_MS = 5000;

/** lock_timeout ran out (SQLSTATE lock_not_available). */
const isLockTimeout = (error: unknown) => (error as { code?: string }).code === '55P03';

export type ReleaseOutcome =
  /** Removed: no row named the hash. */
  | { outcome: 'removed'; bytes: number }
  /** Kept: a row names it (another submission, or an upload that committed meanwhile). */
  | { outcome: 'named' }
  /** No regular file there (already removed, or never there). */
  | { outcome: 'missing' }
  /** The lock was held longer than LOCK_WAIT_MS: left for the sweep (sweep.ts). */
  | { outcome: 'busy' };

/**
 * Removes the content file of `sha256` if no row names it any more: after a draft's media was replaced (once the
 * replacing transaction committed, so a rollback never loses a file its row still names), and after an upload that
 * moved its file into place but did not commit. Under the hash's lock, so an upload that found the file there and is
 * about to name it (between keepUpload and its COMMIT) is waited for, then seen.
 */
export async function releaseMedia(db: Db, dataDir: string, sha256: string): Promise<ReleaseOutcome> {
  const client = await db.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    try {
      await client.query("SELECT set_config('lock_timeout', $1, true)", [`${LOCK_WAIT_MS}ms`]);
      await lockMediaHash(client, sha256);
      if (await isMediaNamed(client, sha256)) {
        await client.query('COMMIT');
        return { outcome: 'named' };
      }
      // Unlinked while the lock is held: no upload can find the file there and count on it meanwhile.
      const bytes = await removeRegularFile(mediaPath(dataDir, sha256));
      await client.query('COMMIT');
      return bytes === null ? { outcome: 'missing' } : { outcome: 'removed', bytes };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      if (isLockTimeout(error)) return { outcome: 'busy' };
      throw error;
    }
  } finally {
    client.release(broken);
  }
}
