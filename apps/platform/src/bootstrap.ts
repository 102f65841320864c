import { randomBytes } from 'node:crypto';
import { generateApiKey } from './auth/api-keys.js';
import type { Clock } from './clock.js';
import { withTransaction, type Db } from './db/pool.js';
import { hashPassword } from './sessions/password.js';

export const AUTHORITY_NAME = 'City advertising authority';

/**
 * Idempotent: creates the authority organisation once; every call issues a
 * fresh admin key (keys are stored hashed, so an old one cannot be shown again).
 */
export async function bootstrap(
  db: Db,
  clock: Clock,
  options: { keyName?: string } = {},
): Promise<{ organisationId: string; created: boolean; keyId: string; key: string }> {
  return withTransaction(db, async (client) => {
    // One bootstrap at a time across instances.
    await client.query('SELECT pg_advisory_xact_lock(7001)');
    const now = clock.now();
    let created = false;
    let { rows } = await client.query<{ id: string }>(
      "SELECT id FROM organisations WHERE kind = 'authority' ORDER BY created_at LIMIT 1",
    );
    if (!rows[0]) {
      ({ rows } = await client.query<{ id: string }>(
        "INSERT INTO organisations (name, kind, created_at) VALUES ($1, 'authority', $2) RETURNING id",
        [AUTHORITY_NAME, now],
      ));
      created = true;
    }
    const organisationId = rows[0]!.id;
    const { key, hash } = generateApiKey();
    const { rows: keys } = await client.query<{ id: string }>(
      `INSERT INTO api_keys (organisation_id, name, key_hash, scopes, created_at)
       VALUES ($1, $2, $3, $4, $5) RETURNING id`,
      [
        organisationId,
        options.keyName ?? `bootstrap admin ${now.toISOString()}`,
        hash,
        ['console:admin'],
        now,
      ],
    );
    return { organisationId, created, keyId: keys[0]!.id, key };
  });
}

/** The console user `npm start` makes for a newcomer (an address of the reserved example domain, RFC 2606). */
export const DEMO_USER_EMAIL = 'demo-admin@authority.example';

/**
 * The demo's sign-in (issue "The public can check ...", item 3: "an authority user created for the demo, its
 * password generated and shown once"): an administrator of the authority made on the first `npm start`, with a
 * random password that is returned then and never again (only its scrypt hash is kept). Later starts give
 * `password: null`, unless `renew` asks for a new one (which ends the user's sessions). Never used by
 * `platform run`: a deployment makes its users in the console.
 */
export async function ensureDemoUser(
  db: Db,
  clock: Clock,
  organisationId: string,
  options: { renew?: boolean } = {},
): Promise<{ email: string; password: string | null; created: boolean }> {
  const password = randomBytes(15).toString('base64url');
  const passwordHash = await hashPassword(password);
  return withTransaction(db, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(7001)');
    const now = clock.now();
    const { rows } = await client.query<{ id: string }>('SELECT id FROM console_users WHERE email = $1', [
      DEMO_USER_EMAIL,
    ]);
    if (!rows[0]) {
      await client.query(
        `INSERT INTO console_users (organisation_id, email, password_hash, role, created_at)
         VALUES ($1, $2, $3, 'admin', $4)`,
        [organisationId, DEMO_USER_EMAIL, passwordHash, now],
      );
      return { email: DEMO_USER_EMAIL, password, created: true };
    }
    if (!options.renew) return { email: DEMO_USER_EMAIL, password: null, created: false };
    await client.query('UPDATE console_users SET password_hash = $2, disabled_at = NULL WHERE id = $1', [
      rows[0].id,
      passwordHash,
    ]);
    await client.query('DELETE FROM console_sessions WHERE user_id = $1', [rows[0].id]);
    return { email: DEMO_USER_EMAIL, password, created: false };
  });
}
