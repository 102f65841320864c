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

/** Resolves a presented key to its principal; null when unknown or revoked. */
export async function findApiKeyPrincipal(db: Db, key: string): Promise<Principal | null> {
  if (!looksLikeApiKey(key)) return null;
  const { rows } = await db.query<KeyRow>(
    `SELECT k.id, k.scopes, k.routes, o.id AS organisation_id, o.name AS organisation_name, o.kind AS organisation_kind
       FROM api_keys k JOIN organisations o ON o.id = k.organisation_id
      WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
    [hashApiKey(key)],
  );
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
