import { chmod, lstat, mkdir, mkdtemp, readFile, rm, stat, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { bootstrap } from '../../src/bootstrap.js';
import { TestClock } from '../../src/clock.js';
import {
  credentialsFile,
  type EmbeddedCluster,
  openEmbeddedCluster,
  socketFolderPath,
} from '../../src/db/embedded.js';
import { postgresUser } from '../../src/db/embedded-process.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool, type Db } from '../../src/db/pool.js';
import { LEGACY_PASSWORD, startLegacyCluster } from './legacy-cluster.js';

// Real clusters in temp folders, stopped and removed after the file.
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

async function clusterDir(name = 'pgdata'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-db-'));
  // PostgreSQL's user (when we are root) must be able to reach folders below it.
  await chmod(dir, 0o755);
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, name);
}

async function open(options: Parameters<typeof openEmbeddedCluster>[0]): Promise<EmbeddedCluster> {
  const cluster = await openEmbeddedCluster({ fsync: false, ...options });
  cleanups.push(() => cluster.stop());
  return cluster;
}

function pool(url: string): Db {
  const db = createPool(url, { max: 2, applicationName: 'ooh-test' });
  cleanups.push(() => db.end());
  return db;
}

/** Connects as `user` with `password` through the cluster's socket; resolves with the SQLSTATE of a refusal. */
async function loginError(cluster: EmbeddedCluster, user: string, password: string): Promise<string | null> {
  const client = new pg.Client({
    host: cluster.socketDir,
    port: cluster.port,
    user,
    password,
    database: 'postgres',
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return null;
  } catch (error) {
    return (error as { code?: string }).code ?? 'unknown';
  } finally {
    await client.end().catch(() => {});
  }
}

const mode = async (file: string) => (await stat(file)).mode & 0o777;

/** What the platform role owns, and what anyone else owns, among the database's own objects. */
async function ownership(db: Db): Promise<{ others: string[]; relations: number; routines: number }> {
  const { rows } = await db.query<{ kind: string; name: string; owner: string }>(
    `SELECT 'relation' AS kind, c.oid::regclass::text AS name, pg_get_userbyid(c.relowner) AS owner
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'S', 'v', 'm', 'i', 'I')
     UNION ALL
     SELECT 'routine', p.oid::regprocedure::text, pg_get_userbyid(p.proowner)
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
     UNION ALL
     SELECT 'type', t.oid::regtype::text, pg_get_userbyid(t.typowner)
       FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public'
     UNION ALL
     SELECT 'schema', nspname, pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'public'
     UNION ALL
     SELECT 'database', datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()`,
  );
  return {
    others: rows.filter((r) => r.owner !== 'ooh_platform').map((r) => `${r.kind} ${r.name} (${r.owner})`),
    relations: rows.filter((r) => r.kind === 'relation').length,
    routines: rows.filter((r) => r.kind === 'routine').length,
  };
}

async function role(db: Db) {
  const { rows } = await db.query(
    `SELECT current_user AS user, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls
       FROM pg_roles WHERE rolname = current_user`,
  );
  return rows[0];
}

const platformRole = {
  user: 'ooh_platform',
  rolsuper: false,
  rolcreatedb: false,
  rolcreaterole: false,
  rolreplication: false,
  rolbypassrls: false,
};

describe('the embedded PostgreSQL nobody else can use', () => {
  test('a new cluster keeps two random passwords in a 0600 file and takes only scram-sha-256 over a private socket', async () => {
    const dir = await clusterDir();
    const cluster = await open({ dir });
    expect(cluster.setUp).toBe('created');
    expect(cluster.owner).toBeNull();

    const file = credentialsFile(dir);
    expect(file).toBe(`${dir}-credentials.json`);
    expect(await mode(file)).toBe(0o600);
    const credentials = JSON.parse(await readFile(file, 'utf8'));
    expect(credentials).toEqual({
      v: 1,
      superuser: { user: 'postgres', password: expect.stringMatching(/^[A-Za-z0-9_-]{32}$/) },
      platform: { user: 'ooh_platform', password: expect.stringMatching(/^[A-Za-z0-9_-]{32}$/) },
      database: 'postgres',
      setup: 1,
    });
    expect(credentials.superuser.password).not.toBe(credentials.platform.password);

    // Only PostgreSQL's user (and root) may enter the socket folder.
    const socket = await lstat(cluster.socketDir);
    expect(cluster.socketDir).toBe(`${dir}-socket`);
    expect(socket.mode & 0o777).toBe(0o700);
    expect(socket.uid).toBe((await postgresUser()).uid);
    const hba = (await readFile(path.join(dir, 'pg_hba.conf'), 'utf8'))
      .split('\n')
      .filter((line) => line.trim() && !line.startsWith('#'));
    expect(hba).toEqual(['local all all scram-sha-256']);

    const db = pool(cluster.url);
    expect(await role(db)).toEqual(platformRole);
    const { rows: settings } = await db.query(
      `SELECT current_setting('listen_addresses') AS listen, current_setting('password_encryption') AS encryption,
              current_setting('unix_socket_permissions') AS permissions`,
    );
    expect(settings[0]).toEqual({ listen: '', encryption: 'scram-sha-256', permissions: '0700' });
    // Not a superuser: the password hashes are out of its reach.
    await expect(db.query('SELECT rolpassword FROM pg_authid')).rejects.toMatchObject({ code: '42501' });

    // Every migration runs as the platform role, and what they make is its own.
    await migrate(db);
    const owned = await ownership(db);
    expect(owned.others).toEqual([]);
    expect(owned.relations).toBeGreaterThan(50);

    const superuser = pool(cluster.superuserUrl);
    expect(
      (await superuser.query('SELECT rolsuper FROM pg_roles WHERE rolname = current_user')).rows,
    ).toEqual([{ rolsuper: true }]);
    expect(await loginError(cluster, 'ooh_platform', 'not-the-password')).toBe('28P01');
    expect(await loginError(cluster, 'postgres', LEGACY_PASSWORD)).toBe('28P01');
  });

  test('a data directory of the earlier version is moved over once, keeping every row; its old password is refused', async () => {
    const dir = await clusterDir();
    const clock = new TestClock(new Date('2026-11-20T06:00:00Z'), { frozen: true });

    // The earlier version: superuser postgres with the password from the source, TCP, tables owned by postgres.
    const legacy = await startLegacyCluster(dir);
    cleanups.push(() => legacy.stop());
    const legacyDb = createPool(legacy.url, { max: 2 });
    await migrate(legacyDb);
    const before = await bootstrap(legacyDb, clock, { keyName: 'made by the earlier version' });
    await legacyDb.query("SELECT pop_records_partition('2026-11-20')");
    const { rows: legacyOwners } = await legacyDb.query(
      "SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class WHERE relname IN ('api_keys', 'pop_records_2026_11')",
    );
    expect(legacyOwners).toEqual([{ owner: 'postgres' }]);
    await legacyDb.end();
    await legacy.stop();

    const moved = await open({ dir });
    expect(moved.setUp).toBe('moved');
    const db = pool(moved.url);
    expect(await role(db)).toEqual(platformRole);
    const { rows: keys } = await db.query('SELECT id, name FROM api_keys');
    expect(keys).toEqual([{ id: before.keyId, name: 'made by the earlier version' }]);
    const { rows: organisations } = await db.query('SELECT id FROM organisations');
    expect(organisations).toEqual([{ id: before.organisationId }]);
    // Tables, their sequences, the partition, the functions, the schema and the database: all the role's now.
    const owned = await ownership(db);
    expect(owned.others).toEqual([]);
    expect(owned.relations).toBeGreaterThan(50);
    expect(owned.routines).toBeGreaterThan(5);
    // And the role can go on: migrations, a new month's partition, writes.
    expect(await migrate(db)).toEqual([]);
    await db.query("SELECT pop_records_partition('2026-12-01')");
    await bootstrap(db, clock, { keyName: 'made after the move' });
    expect((await db.query('SELECT count(*)::int AS n FROM api_keys')).rows).toEqual([{ n: 2 }]);

    // The old password no longer opens it, and nothing listens on its old TCP port.
    expect(await loginError(moved, 'postgres', LEGACY_PASSWORD)).toBe('28P01');
    const tcp = new pg.Client({
      host: '127.0.0.1',
      port: legacy.port,
      user: 'postgres',
      password: LEGACY_PASSWORD,
      database: 'postgres',
    });
    await expect(tcp.connect()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(await mode(credentialsFile(dir))).toBe(0o600);
    const credentials = await readFile(credentialsFile(dir), 'utf8');
    await db.end();
    await moved.stop();

    // A second start finds it set up: nothing is moved again, the passwords stay.
    const again = await open({ dir });
    expect(again.setUp).toBeNull();
    expect(await readFile(credentialsFile(dir), 'utf8')).toBe(credentials);
    const db2 = pool(again.url);
    expect((await db2.query('SELECT count(*)::int AS n FROM api_keys')).rows).toEqual([{ n: 2 }]);
  });

  test('a command uses the cluster a platform serves, which goes on serving; a second platform is refused naming the pid', async () => {
    const dir = await clusterDir();
    const serving = await open({ dir, what: 'the platform' });
    const command = await openEmbeddedCluster({ dir, use: 'command', what: 'platform bootstrap' });
    expect(command.owner).toEqual({ pid: process.pid, what: 'the platform' });
    expect(command.url).toBe(serving.url);
    const commandDb = createPool(command.url, { max: 1 });
    expect((await commandDb.query('SELECT current_user AS user')).rows).toEqual([{ user: 'ooh_platform' }]);
    await commandDb.end();
    await command.stop();
    // The command's stop leaves the platform's cluster running.
    const db = pool(serving.url);
    expect((await db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);

    await expect(openEmbeddedCluster({ dir, what: 'a second platform' })).rejects.toMatchObject({
      name: 'EmbeddedDatabaseError',
      code: 'in_use',
      message: expect.stringContaining(`in use by the platform (pid ${process.pid})`),
    });
  });

  test('a command waits for another command to be done with its cluster, then runs one of its own', async () => {
    const dir = await clusterDir();
    const first = await open({ dir, use: 'command', what: 'platform bootstrap' });
    let secondOpened = false;
    const second = openEmbeddedCluster({ dir, use: 'command', fsync: false }).then((cluster) => {
      secondOpened = true;
      cleanups.push(() => cluster.stop());
      return cluster;
    });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(secondOpened).toBe(false);
    await first.stop();
    const cluster = await second;
    expect(cluster.owner).toBeNull();
    expect(cluster.setUp).toBeNull();
    const db = pool(cluster.url);
    expect((await db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  test('a data directory too deep for a socket path gets a private socket folder in /tmp, the same by any path; a link there is refused', async () => {
    const deep = path.join(await clusterDir('d'), 'a'.repeat(40), 'b'.repeat(40), 'pgdata');
    await mkdir(path.dirname(deep), { recursive: true });
    const folder = socketFolderPath(deep);
    expect(folder).toMatch(/^\/tmp\/ooh-pg-[0-9a-f]{16}$/);
    cleanups.push(() => rm(folder, { recursive: true, force: true }));

    // Someone who made that name first (a link to a folder of theirs) does not get the socket.
    const decoy = await clusterDir('decoy');
    await mkdir(decoy);
    await symlink(decoy, folder);
    await expect(openEmbeddedCluster({ dir: deep, fsync: false })).rejects.toMatchObject({
      code: 'socket_folder',
    });
    await rm(folder);

    const cluster = await open({ dir: deep });
    expect(cluster.socketDir).toBe(folder);
    expect((await lstat(folder)).mode & 0o777).toBe(0o700);
    const db = pool(cluster.url);
    expect((await db.query('SELECT current_user AS user')).rows).toEqual([{ user: 'ooh_platform' }]);

    // Reached through a link, it is the same cluster (the same socket folder): refused, and its running server is
    // not taken for one a killed process left behind.
    const link = `${path.dirname(path.dirname(deep))}-link`;
    await symlink(path.dirname(path.dirname(deep)), link);
    cleanups.push(() => rm(link, { force: true }));
    await expect(
      openEmbeddedCluster({
        dir: path.join(link, path.basename(path.dirname(deep)), 'pgdata'),
        fsync: false,
      }),
    ).rejects.toMatchObject({ code: 'in_use' });
    expect((await db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});
