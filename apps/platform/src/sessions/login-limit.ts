import type { Db } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';

export interface LimitSubject {
  /**
   * 'device:<token sha256>', 'pair:<client address>|<email>', 'email:<address>' (untrusted browsers) or
   * 'ip:<client address>'.
   */
  subject: string;
  /** Failures allowed within the window; beyond, the attempt is refused (429). Infinity: counted, never refused. */
  max: number;
}

export type Reservation =
  | {
      ok: true;
      failureIds: number[];
      /** Failures within the window per subject, before this attempt. */
      failures: Map<string, number>;
    }
  | { ok: false; retryAfterSeconds: number };

/**
 * Takes one sign-in attempt against every subject, or refuses with the time until the oldest failure in the window
 * leaves it. The attempt is recorded as a failure BEFORE the password is checked (and taken back on success), so
 * attempts running at the same time on several instances can never pass the limit together; the subjects are
 * locked in a fixed order in PostgreSQL.
 */
export async function reserveAttempt(
  db: Db,
  subjects: readonly LimitSubject[],
  now: Date,
  windowMs: number,
): Promise<Reservation> {
  const ordered = [...subjects].sort((a, b) => (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0));
  const since = new Date(now.getTime() - windowMs);
  return withTransaction(db, async (client) => {
    let retryAfterMs = 0;
    const counted = new Map<string, number>();
    for (const { subject, max } of ordered) {
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 60))', [
        `console-login:${subject}`,
      ]);
      const { rows } = await client.query<{ failures: number; oldest: Date | null }>(
        `SELECT count(*)::int AS failures, min(failed_at) AS oldest
           FROM console_login_failures WHERE subject = $1 AND failed_at > $2`,
        [subject, since],
      );
      const { failures, oldest } = rows[0]!;
      counted.set(subject, failures);
      if (failures >= max && oldest) {
        retryAfterMs = Math.max(retryAfterMs, oldest.getTime() + windowMs - now.getTime());
      }
    }
    if (retryAfterMs > 0)
      return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)) };
    const failureIds: number[] = [];
    for (const { subject } of ordered) {
      const { rows } = await client.query<{ id: number }>(
        'INSERT INTO console_login_failures (subject, failed_at) VALUES ($1, $2) RETURNING id',
        [subject, now],
      );
      failureIds.push(rows[0]!.id);
    }
    return { ok: true, failureIds, failures: counted };
  });
}

/**
 * A successful sign-in: its reserved attempt was no failure, and the earlier failures of this browser and of this
 * address against this account are forgiven (strangers' failures against the account, or from the address against
 * other accounts, stay).
 */
export async function attemptSucceeded(
  db: Db,
  failureIds: readonly number[],
  forgiven: readonly string[],
): Promise<void> {
  await db.query(
    'DELETE FROM console_login_failures WHERE id = ANY($1::bigint[]) OR subject = ANY($2::text[])',
    [failureIds, forgiven],
  );
}
