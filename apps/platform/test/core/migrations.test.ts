import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { MIGRATIONS_DIR, MigrationError, migrate, readMigrations } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const open: TestDatabase[] = [];
afterEach(async () => {
  while (open.length) await open.pop()!.drop();
});
async function fresh(upTo?: number) {
  const d = await createTestDatabase(upTo === undefined ? { migrate: false } : { upTo });
  open.push(d);
  return d;
}
const NOW = new Date('2026-11-20T06:00:00Z');

describe('migration runner', () => {
  test('files are numbered NNN_name.sql without gaps in meaning (unique numbers, ascending)', async () => {
    const migrations = await readMigrations();
    const versions = migrations.map((m) => m.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
  });

  test('two instances migrating at once apply each migration exactly once', async () => {
    const d = await fresh();
    const [a, b] = await Promise.all([migrate(d.db), migrate(d.db)]);
    const all = (await readMigrations()).map((m) => m.version);
    expect([...a, ...b].sort((x, y) => x - y)).toEqual(all);
    const { rows } = await d.db.query('SELECT count(*)::int AS n FROM schema_migrations');
    expect(rows[0].n).toBe(all.length);
    expect(await migrate(d.db)).toEqual([]);
  });

  test('a failing migration stops with its error and leaves nothing half-applied', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-mig-'));
    for (const f of await readdir(MIGRATIONS_DIR))
      await copyFile(path.join(MIGRATIONS_DIR, f), path.join(dir, f));
    await writeFile(
      path.join(dir, '999_broken.sql'),
      'CREATE TABLE half_done (id int);\nSELECT no_such_function();',
    );
    const d = await fresh();
    const error = await migrate(d.db, { dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationError);
    // The runner's own words, and PostgreSQL's error as the cause: undefined_function.
    expect(error).toMatchObject({
      message: expect.stringMatching(/^migration 999_broken failed: /),
      cause: { code: '42883' },
    });
    const { rows } = await d.db.query("SELECT to_regclass('half_done') AS t");
    expect(rows[0].t).toBeNull();
  });

  /** A copy of the migrations up to `upTo`, to change. */
  async function copyOfMigrations(upTo: number): Promise<string> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-mig-'));
    for (const f of await readdir(MIGRATIONS_DIR)) {
      if (Number(f.slice(0, 3)) <= upTo) await copyFile(path.join(MIGRATIONS_DIR, f), path.join(dir, f));
    }
    return dir;
  }

  test('an applied migration whose file changed is refused, naming it (issue 18: "store a checksum")', async () => {
    const dir = await copyOfMigrations(3);
    const d = await fresh();
    expect(await migrate(d.db, { dir })).toEqual([1, 2, 3]);
    const { rows } = await d.db.query<{ sha256: string }>(
      'SELECT sha256 FROM schema_migrations WHERE version = 2',
    );
    expect(rows[0]!.sha256).toMatch(/^[0-9a-f]{64}$/);
    const second = (await readdir(dir)).find((f) => f.startsWith('002_'))!;
    const text = await readFile(path.join(dir, second), 'utf8');
    await writeFile(path.join(dir, second), `${text}\n-- edited after it was applied\n`);
    const error = await migrate(d.db, { dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toMatch(
      new RegExp(
        `migration ${second.replace('.sql', '')} has changed since it was applied.*new migration; refusing`,
      ),
    );
    // Put back as it was: accepted again.
    await writeFile(path.join(dir, second), text);
    expect(await migrate(d.db, { dir })).toEqual([]);
  });

  test('a pending migration numbered below the highest applied one is refused; one above it is applied', async () => {
    const dir = await copyOfMigrations(3);
    const d = await fresh();
    await writeFile(path.join(dir, '010_later.sql'), 'CREATE TABLE later_one (id int);');
    expect(await migrate(d.db, { dir })).toEqual([1, 2, 3, 10]);
    // Written later, numbered lower: it would run after 010, which was written after it.
    await writeFile(path.join(dir, '005_slipped_in.sql'), 'CREATE TABLE slipped_in (id int);');
    await expect(migrate(d.db, { dir })).rejects.toThrow(
      /migration 005_slipped_in is not applied, but the database already has migration 10.*renumber it above 10/,
    );
    const { rows } = await d.db.query("SELECT to_regclass('slipped_in') AS t");
    expect(rows[0].t).toBeNull();
    await rm(path.join(dir, '005_slipped_in.sql'));
    await writeFile(path.join(dir, '011_in_order.sql'), 'CREATE TABLE in_order (id int);');
    expect(await migrate(d.db, { dir })).toEqual([11]);
  });

  test('rows applied before checksums were kept take the file as it is, and are checked from then on', async () => {
    const dir = await copyOfMigrations(2);
    const d = await fresh();
    await migrate(d.db, { dir });
    // As a database migrated by an older runner: no checksum recorded.
    await d.db.query('UPDATE schema_migrations SET sha256 = NULL');
    expect(await migrate(d.db, { dir })).toEqual([]);
    const { rows } = await d.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM schema_migrations WHERE sha256 IS NULL',
    );
    expect(rows[0]!.n).toBe(0);
    const first = (await readdir(dir)).find((f) => f.startsWith('001_'))!;
    await writeFile(path.join(dir, first), '-- changed\n');
    await expect(migrate(d.db, { dir })).rejects.toThrow(/has changed since it was applied/);
  });

  test('a database with a migration this code does not know is refused', async () => {
    const d = await fresh(1);
    await d.db.query("INSERT INTO schema_migrations (version, name) VALUES (998, 'from_the_future')");
    await expect(migrate(d.db)).rejects.toThrow(/998 \(from_the_future\).*refusing/);
  });
});

describe('each migration keeps seeded data', () => {
  test('002 cms_installations: organisations and structures from 001 stay, installations reference them', async () => {
    const d = await fresh(1);
    const { rows: orgs } = await d.db.query(
      "INSERT INTO organisations (name, kind, created_at) VALUES ('Op', 'operator', $1) RETURNING id",
      [NOW],
    );
    const { rows: st } = await d.db.query(
      "INSERT INTO structures (organisation_id, code, district, format, created_at) VALUES ($1, 'S1', 'almaly', 'billboard', $2) RETURNING id",
      [orgs[0].id, NOW],
    );
    await migrate(d.db, { upTo: 2 });
    const { rows: inst } = await d.db.query(
      "INSERT INTO cms_installations (organisation_id, name, kind, created_at) VALUES ($1, 'cms', 'x', $2) RETURNING id",
      [orgs[0].id, NOW],
    );
    await d.db.query(
      "INSERT INTO cms_players (installation_id, external_id, structure_id, mapped_at) VALUES ($1, 'p1', $2, $3)",
      [inst[0].id, st[0].id, NOW],
    );
    const { rows } = await d.db.query('SELECT code FROM structures');
    expect(rows).toEqual([{ code: 'S1' }]);
  });

  test('003 submissions and 004 approvals: seeded submissions survive and take approvals', async () => {
    const d = await fresh(2);
    const { rows: orgs } = await d.db.query(
      "INSERT INTO organisations (name, kind, created_at) VALUES ('Adv', 'advertiser', $1) RETURNING id",
      [NOW],
    );
    await migrate(d.db, { upTo: 3 });
    const { rows: sub } = await d.db.query(
      `INSERT INTO submissions (number, organisation_id, advertiser_name, period_from, period_to, created_at, updated_at)
       VALUES ('SUB-2026-000001', $1, 'Tea', '2026-01-01', '2026-01-31', $2, $2) RETURNING id, state, channel, fast_track`,
      [orgs[0].id, NOW],
    );
    expect(sub[0]).toMatchObject({ state: 'draft', channel: 'direct', fast_track: false });
    await migrate(d.db, { upTo: 4 });
    await d.db.query(
      `INSERT INTO approvals (number, submission_id, media_sha256, valid_from, valid_until, issued_at)
       VALUES ('APR-2026-000001', $1, $2, '2026-01-01', '2026-01-31', $3)`,
      [sub[0].id, 'ab'.repeat(32), NOW],
    );
    await expect(
      d.db.query(
        `INSERT INTO approvals (number, submission_id, media_sha256, valid_from, valid_until, issued_at)
         VALUES ('APR-2026-000002', $1, 'NOT-HEX', '2026-01-01', '2026-01-31', $2)`,
        [sub[0].id, NOW],
      ),
    ).rejects.toMatchObject({ code: '23514', constraint: 'approvals_media_sha256_check' });
    const { rows } = await d.db.query('SELECT number FROM submissions');
    expect(rows).toEqual([{ number: 'SUB-2026-000001' }]);
  });

  test('the whole chain applies on top of seeded data from every earlier step', async () => {
    const d = await fresh(4);
    await d.db.query("INSERT INTO organisations (name, kind, created_at) VALUES ('Auth', 'authority', $1)", [
      NOW,
    ]);
    await migrate(d.db);
    const { rows } = await d.db.query('SELECT kind FROM organisations');
    expect(rows).toEqual([{ kind: 'authority' }]);
  });
});
