import type { OrganisationKind } from '../auth/principal.js';
import type { Db, DbClient } from '../db/pool.js';
import type { ConsoleRole } from './scopes.js';

export interface ConsoleUserRow {
  id: string;
  organisation_id: string;
  organisation_name: string;
  organisation_kind: OrganisationKind;
  email: string;
  password_hash: string;
  role: ConsoleRole;
  created_at: Date;
  disabled_at: Date | null;
}

const USER_COLUMNS = `u.id, u.organisation_id, o.name AS organisation_name, o.kind AS organisation_kind, u.email,
  u.password_hash, u.role, u.created_at, u.disabled_at`;

export async function findUserByEmail(db: Db, email: string): Promise<ConsoleUserRow | null> {
  const { rows } = await db.query<ConsoleUserRow>(
    `SELECT ${USER_COLUMNS} FROM console_users u JOIN organisations o ON o.id = u.organisation_id WHERE u.email = $1`,
    [email],
  );
  return rows[0] ?? null;
}

export async function findUser(db: Db, id: string): Promise<ConsoleUserRow | null> {
  const { rows } = await db.query<ConsoleUserRow>(
    `SELECT ${USER_COLUMNS} FROM console_users u JOIN organisations o ON o.id = u.organisation_id WHERE u.id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

export async function usersOfOrganisation(db: Db, organisationId: string): Promise<ConsoleUserRow[]> {
  const { rows } = await db.query<ConsoleUserRow>(
    `SELECT ${USER_COLUMNS} FROM console_users u JOIN organisations o ON o.id = u.organisation_id
      WHERE u.organisation_id = $1 ORDER BY u.email`,
    [organisationId],
  );
  return rows;
}

export async function insertUser(
  db: Db,
  user: { organisationId: string; email: string; passwordHash: string; role: ConsoleRole },
  now: Date,
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO console_users (organisation_id, email, password_hash, role, created_at)
     VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [user.organisationId, user.email, user.passwordHash, user.role, now],
  );
  return rows[0]!.id;
}

/** Disables a user and ends every session of it at once. */
export async function disableUser(client: DbClient, id: string, now: Date): Promise<boolean> {
  const { rowCount } = await client.query(
    'UPDATE console_users SET disabled_at = COALESCE(disabled_at, $2) WHERE id = $1',
    [id, now],
  );
  await client.query('DELETE FROM console_sessions WHERE user_id = $1', [id]);
  return (rowCount ?? 0) > 0;
}

export interface SessionRow {
  id: string;
  created_at: Date;
  last_seen_at: Date;
  expires_at: Date;
  csrf_token: string;
  user: ConsoleUserRow;
}

export async function insertSession(
  db: Db,
  session: { id: string; userId: string; csrfToken: string; expiresAt: Date },
  now: Date,
): Promise<void> {
  await db.query(
    `INSERT INTO console_sessions (id, user_id, created_at, last_seen_at, expires_at, csrf_token)
     VALUES ($1, $2, $3, $3, $4, $5)`,
    [session.id, session.userId, now, session.expiresAt, session.csrfToken],
  );
}

export async function findSession(db: Db, id: string): Promise<SessionRow | null> {
  const { rows } = await db.query<
    ConsoleUserRow & {
      session_id: string;
      session_created_at: Date;
      last_seen_at: Date;
      expires_at: Date;
      csrf_token: string;
    }
  >(
    `SELECT s.id AS session_id, s.created_at AS session_created_at, s.last_seen_at, s.expires_at, s.csrf_token,
            ${USER_COLUMNS}
       FROM console_sessions s
       JOIN console_users u ON u.id = s.user_id
       JOIN organisations o ON o.id = u.organisation_id
      WHERE s.id = $1`,
    [id],
  );
  const row = rows[0];
  if (!row) return null;
  const { session_id, session_created_at, last_seen_at, expires_at, csrf_token, ...user } = row;
  return { id: session_id, created_at: session_created_at, last_seen_at, expires_at, csrf_token, user };
}

/** Marks activity; never moves last_seen_at backwards (two instances with slightly different clocks). */
export async function touchSession(db: Db, id: string, now: Date): Promise<void> {
  await db.query('UPDATE console_sessions SET last_seen_at = GREATEST(last_seen_at, $2) WHERE id = $1', [
    id,
    now,
  ]);
}

export async function deleteSession(db: Db, id: string): Promise<void> {
  await db.query('DELETE FROM console_sessions WHERE id = $1', [id]);
}

/** Removes sessions and sign-in failures that can no longer matter (called now and then at sign-in). */
export async function pruneSessions(db: Db, before: Date): Promise<void> {
  await db.query('DELETE FROM console_sessions WHERE expires_at < $1 OR last_seen_at < $1', [before]);
  await db.query('DELETE FROM console_login_failures WHERE failed_at < $1', [before]);
}

/** The user a device cookie (its token's SHA-256) belongs to, if any (migration 067). */
export async function deviceOwner(db: Db, tokenSha256: string): Promise<string | null> {
  const { rows } = await db.query<{ user_id: string }>(
    'SELECT user_id FROM console_devices WHERE token_sha256 = $1',
    [tokenSha256],
  );
  return rows[0]?.user_id ?? null;
}

export async function insertDevice(db: Db, device: { id: string; userId: string }, now: Date): Promise<void> {
  await db.query(
    'INSERT INTO console_devices (token_sha256, user_id, created_at, last_used_at) VALUES ($1, $2, $3, $3)',
    [device.id, device.userId, now],
  );
}

export async function touchDevice(db: Db, tokenSha256: string, now: Date): Promise<void> {
  await db.query('UPDATE console_devices SET last_used_at = $2 WHERE token_sha256 = $1', [tokenSha256, now]);
}
