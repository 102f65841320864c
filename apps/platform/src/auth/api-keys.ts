import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../db/pool.js';
import type { OrganisationKind, Principal } from './principal.js';

const KEY_PREFIX = 'ooh_';

/** A new API key: 32 random bytes; only its SHA-256 is stored. */
export function generateApiKey(): { key: string; hash: Buffer } {
  const key = `${KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { key, hash: hashApiKey(key) };
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

export function looksLikeApiKey(key: string): boolean {
  return key.startsWith(KEY_PREFIX) && /^[A-Za-z0-9_-]{20,200}$/.test(key);
}

interface KeyRow {
  id: string;
  scopes: string[];
  routes: string[] | null;
  organisation_id: string;
  organisation_name: string;
  organisation_kind: OrganisationKind;
}

/** Resolves a presented key to its principal at `now`; null when unknown, revoked or expired (migration 068). */
export async function findApiKeyPrincipal(db: Db, key: string, now: Date): Promise<Principal | null> {
  if (!looksLikeApiKey(key)) return null;
  const { rows } = await db.query<KeyRow>({
    name: 'auth-api-key',
    text: `SELECT k.id, k.scopes, k.routes, o.id AS organisation_id, o.name AS organisation_name, o.kind AS organisation_kind
             FROM api_keys k JOIN organisations o ON o.id = k.organisation_id
            WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $2)`,
    values: [hashApiKey(key), now],
  });
  const row = rows[0];
  if (!row) return null;
  return {
    type: 'api_key',
    id: row.id,
    organisation: { id: row.organisation_id, name: row.organisation_name, kind: row.organisation_kind },
    scopes: new Set(row.scopes),
    routes: row.routes,
  };
}

/** How often a key's last_used_at is written, at most, per platform process. */
export const LAST_USED_EVERY_MS = 60_000;

/**
 * Records that keys were used, at most once a minute per key and process (the CMS channel calls ten times a second
 * per key: a write per call would double its writes for a figure nobody reads to the second).
 */
export class KeyUse {
  private readonly written = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly onError: (error: unknown) => void,
  ) {}

  note(keyId: string, now: Date): void {
    const last = this.written.get(keyId);
    if (last !== undefined && now.getTime() - last < LAST_USED_EVERY_MS && now.getTime() >= last) return;
    if (this.written.size > 100_000) this.written.clear();
    this.written.set(keyId, now.getTime());
    this.db
      .query(
        'UPDATE api_keys SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)',
        [keyId, now],
      )
      .catch(this.onError);
  }
}
