import { generateApiKey } from './auth/api-keys.js';
import type { Clock } from './clock.js';
import { withTransaction, type Db } from './db/pool.js';

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
