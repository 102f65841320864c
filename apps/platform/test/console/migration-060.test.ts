import { afterEach, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const T = new Date('2026-11-20T06:00:00Z');
let database: TestDatabase | null = null;
afterEach(async () => {
  await database?.drop();
  database = null;
});

describe('migration 060 console sessions', () => {
  test('applies over seeded data; users are lower-case unique, sessions cascade with their user', async () => {
    database = await createTestDatabase({ upTo: 59 });
    const db = database.db;
    const org = (
      await db.query(
        "INSERT INTO organisations (name, kind, created_at) VALUES ('Agency', 'agency', $1) RETURNING id",
        [T],
      )
    ).rows[0].id;
    await migrate(db);

    const hash = `scrypt$32768$8$1$${'A'.repeat(24)}$${'B'.repeat(44)}`;
    const user = (
      await db.query(
        `INSERT INTO console_users (organisation_id, email, password_hash, role, created_at)
         VALUES ($1, 'a@example.kz', $2, 'admin', $3) RETURNING id`,
        [org, hash, T],
      )
    ).rows[0].id;
    await expect(
      db.query(
        `INSERT INTO console_users (organisation_id, email, password_hash, role, created_at)
         VALUES ($1, 'B@example.kz', $2, 'admin', $3)`,
        [org, hash, T],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'console_users_email_check' });
    await expect(
      db.query(
        `INSERT INTO console_users (organisation_id, email, password_hash, role, created_at)
         VALUES ($1, 'a@example.kz', $2, 'member', $3)`,
        [org, hash, T],
      ),
    ).rejects.toMatchObject({ code: '23505', constraint: 'console_users_email_key' });
    await expect(
      db.query(
        `INSERT INTO console_users (organisation_id, email, password_hash, role, created_at)
         VALUES ($1, 'c@example.kz', $2, 'owner', $3)`,
        [org, hash, T],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'console_users_role_check' });
    await expect(
      db.query(
        `INSERT INTO console_users (organisation_id, email, password_hash, role, created_at)
         VALUES ($1, 'd@example.kz', 'plain', 'member', $2)`,
        [org, T],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'console_users_password_hash_check' });

    await db.query(
      `INSERT INTO console_sessions (id, user_id, created_at, last_seen_at, expires_at, csrf_token)
       VALUES ($1, $2, $3, $3, $4, 'token')`,
      ['f'.repeat(64), user, T, new Date(T.getTime() + 3600_000)],
    );
    await expect(
      db.query(
        `INSERT INTO console_sessions (id, user_id, created_at, last_seen_at, expires_at, csrf_token)
         VALUES ('not-a-hash', $1, $2, $2, $3, 'token')`,
        [user, T, new Date(T.getTime() + 3600_000)],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'console_sessions_id_check' });
    await db.query('DELETE FROM console_users WHERE id = $1', [user]);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM console_sessions');
    expect(rows[0].n).toBe(0);

    // The organisation seeded before the migration is still there, untouched.
    const orgs = await db.query('SELECT name, kind FROM organisations WHERE id = $1', [org]);
    expect(orgs.rows).toEqual([{ name: 'Agency', kind: 'agency' }]);
  });
});
