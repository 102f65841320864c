import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { chmod, open, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { EmbeddedDatabaseError } from './embedded-process.js';

/*
 * Roles and passwords of an embedded cluster (issue "Trust under attack", item 2: "A random password made on first
 * start, kept in a 0600 file in the data directory; scram-sha-256; the platform connects as a role that owns the
 * schema but is not a superuser").
 *
 * `<cluster>-credentials.json` (`${DATA_DIR}/pgdata-credentials.json` for the platform), mode 0600, holds two random
 * passwords: the superuser's, used only to set the cluster up (here), and the platform role's, which the pool and
 * the migrations use. The file is written before the cluster is given the passwords, so a crash in between loses
 * nothing: the next start sets the passwords again from it.
 */

export const SUPERUSER = 'postgres';
export const PLATFORM_ROLE = 'ooh_platform';
/** The platform's database: the one every earlier data directory already holds its tables in. */
export const DATABASE = 'postgres';
/**
 * The superuser password of every data directory made before this version (it was written in the source, and is
 * public in its history). Tried only to set such a directory up once; after that the cluster refuses it.
 */
const LEGACY_PASSWORD = 'ooh-embedded';
/** Bumped when the set-up below changes; a cluster set up by an older version is set up again once. */
export const SETUP_VERSION = 1;

export interface Credentials {
  v: 1;
  superuser: { user: string; password: string };
  platform: { user: string; password: string };
  database: string;
  /** The SETUP_VERSION this cluster was last set up with; 0: not yet. */
  setup: number;
}

export function credentialsFile(clusterDir: string): string {
  return `${clusterDir}-credentials.json`;
}

const password = () => randomBytes(24).toString('base64url');

export function newCredentials(): Credentials {
  return {
    v: 1,
    superuser: { user: SUPERUSER, password: password() },
    platform: { user: PLATFORM_ROLE, password: password() },
    database: DATABASE,
    setup: 0,
  };
}

/** The file's credentials; null when there is no file. */
export async function readCredentials(file: string): Promise<Credentials | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    throw new EmbeddedDatabaseError(
      'credentials_unreadable',
      `cannot read ${file} (${code}): run this as the user that runs the platform`,
      { cause: error },
    );
  }
  const parsed = parseCredentials(text);
  if (!parsed) {
    throw new EmbeddedDatabaseError(
      'credentials_unreadable',
      `${file} is not a credentials file of this platform`,
    );
  }
  // Kept private whatever happened to it since.
  await chmod(file, 0o600);
  return parsed;
}

function parseCredentials(text: string): Credentials | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const c = value as Partial<Credentials> | null;
  const name = (n: unknown): n is string => typeof n === 'string' && /^[a-z_][a-z0-9_]{0,62}$/.test(n);
  const login = (l: unknown): l is { user: string; password: string } =>
    typeof l === 'object' &&
    l !== null &&
    name((l as { user?: unknown }).user) &&
    typeof (l as { password?: unknown }).password === 'string' &&
    (l as { password: string }).password.length >= 16;
  if (
    !c ||
    c.v !== 1 ||
    !login(c.superuser) ||
    !login(c.platform) ||
    !name(c.database) ||
    !Number.isInteger(c.setup)
  ) {
    return null;
  }
  return {
    v: 1,
    superuser: c.superuser,
    platform: c.platform,
    database: c.database,
    setup: c.setup!,
  };
}

/** Writes the file whole or not at all (temp file, fsync, rename), mode 0600. */
export async function writeCredentials(file: string, credentials: Credentials): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  await unlink(temp).catch(() => {});
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(`${JSON.stringify(credentials, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
  const dir = await open(path.dirname(file), 'r').catch(() => null);
  await dir
    ?.sync()
    .catch(() => {})
    .finally(() => dir.close());
}

/**
 * The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 7677; PostgreSQL's own format,
 * `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`). ALTER ROLE is given the verifier, so the
 * password itself never reaches the server (nor a log line of a failed statement). Our passwords are ASCII, which
 * SASLprep leaves as they are.
 */
export function scramVerifier(plain: string, salt = randomBytes(16), iterations = 4096): string {
  const salted = pbkdf2Sync(plain, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/**
 * Hands every object of the database's own schemas that the superuser owns to the platform role: schemas, tables
 * (partitioned ones and each partition), views, sequences (those of a table's column move with it), routines and
 * types of their own (a table's row type and an array type move with what they belong to). Run as the superuser.
 */
const handOver = (role: string) => `
DO $$
DECLARE
  superuser oid := (SELECT oid FROM pg_roles WHERE rolname = current_user);
  item record;
BEGIN
  FOR item IN
    SELECT n.nspname FROM pg_namespace n
     WHERE n.nspowner = superuser AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
  LOOP
    EXECUTE format('ALTER SCHEMA %I OWNER TO ${role}', item.nspname);
  END LOOP;
  FOR item IN
    SELECT c.oid, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relowner = superuser AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
       AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
     ORDER BY c.relkind = 'S', c.oid
  LOOP
    IF (SELECT relowner FROM pg_class WHERE oid = item.oid) = superuser THEN
      EXECUTE format('ALTER %s %s OWNER TO ${role}',
        CASE item.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE'
          WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
        item.oid::regclass);
    END IF;
  END LOOP;
  FOR item IN
    SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE p.proowner = superuser AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
  LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO ${role}', item.oid::regprocedure);
  END LOOP;
  FOR item IN
    SELECT t.oid FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
     WHERE t.typowner = superuser AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
       AND (t.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')
       AND NOT EXISTS (SELECT FROM pg_type e WHERE e.typarray = t.oid)
       AND NOT EXISTS (SELECT FROM pg_range r WHERE r.rngmultitypid = t.oid)
  LOOP
    IF (SELECT typowner FROM pg_type WHERE oid = item.oid) = superuser THEN
      EXECUTE format('ALTER TYPE %s OWNER TO ${role}', item.oid::regtype);
    END IF;
  END LOOP;
END
$$`;

export interface SocketAddress {
  socketDir: string;
  port: number;
}

/**
 * Sets the cluster up as `credentials` say, in one transaction: the superuser's password, the platform role
 * (LOGIN, not a superuser, no CREATEDB/CREATEROLE) with its password, the database and its `public` schema owned by
 * that role, and every object the superuser owned handed to it. Idempotent. Returns 'moved' when the cluster still
 * had the password of the versions before this one (a data directory made by them, moved over now), else 'created'.
 */
export async function setUpRoles(
  address: SocketAddress,
  credentials: Credentials,
): Promise<'created' | 'moved'> {
  const connect = async (password: string) => {
    const client = new pg.Client({
      host: address.socketDir,
      port: address.port,
      user: credentials.superuser.user,
      password,
      database: credentials.database,
      application_name: 'ooh-platform-setup',
    });
    client.on('error', () => {});
    try {
      await client.connect();
      return client;
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
  };
  const refused = (error: unknown) => (error as { code?: string }).code === '28P01';
  let client: pg.Client;
  let moved = false;
  try {
    client = await connect(credentials.superuser.password);
  } catch (error) {
    if (!refused(error)) throw setupFailure(error);
    try {
      client = await connect(LEGACY_PASSWORD);
      moved = true;
    } catch (legacy) {
      if (!refused(legacy)) throw setupFailure(legacy);
      throw new EmbeddedDatabaseError(
        'credentials_rejected',
        `the embedded PostgreSQL in ${address.socketDir} refuses the superuser password of its credentials file`,
        { cause: error },
      );
    }
  }
  const literal = (plain: string) => client.escapeLiteral(scramVerifier(plain));
  try {
    await client.query('BEGIN');
    // Names come from the credentials file, checked there to be plain lower-case identifiers.
    const role = credentials.platform.user;
    await client.query(
      `DO $$ BEGIN
         IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${role}') THEN CREATE ROLE ${role}; END IF;
       END $$`,
    );
    await client.query(
      `ALTER ROLE ${role} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
         PASSWORD ${literal(credentials.platform.password)}`,
    );
    await client.query(
      `ALTER ROLE ${credentials.superuser.user} WITH PASSWORD ${literal(credentials.superuser.password)}`,
    );
    await client.query(`ALTER DATABASE ${credentials.database} OWNER TO ${role}`);
    await client.query(`ALTER SCHEMA public OWNER TO ${role}`);
    await client.query(handOver(role));
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw setupFailure(error);
  } finally {
    await client.end().catch(() => {});
  }
  return moved ? 'moved' : 'created';
}

function setupFailure(error: unknown): EmbeddedDatabaseError {
  const e = error as { code?: string; message?: string };
  return new EmbeddedDatabaseError(
    'setup_failed',
    `the embedded PostgreSQL could not be set up (${e.code ?? 'error'}: ${e.message ?? String(error)})`,
    { cause: error },
  );
}
