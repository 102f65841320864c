import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, mkdir, open, readdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import pg from 'pg';
import type { PlatformConfig } from '../config.js';
import { openEmbeddedCluster } from '../db/embedded.js';
import { readMigrations } from '../db/migrate.js';
import { BackupError } from './errors.js';
import { copyFileHashed, isInside, listTree, syncDirectory } from './files.js';
import {
  DATA_FOLDER,
  MANIFEST_FILE,
  MANIFEST_FORMAT,
  type Manifest,
  type ManifestDatabase,
  type ManifestDirectory,
  type ManifestFile,
  migrationLabel,
} from './manifest.js';

/*
 * `platform backup <target>`: a consistent copy of a running platform's data folder (README, DATA_DIR).
 *
 * The embedded PostgreSQL is copied online with PostgreSQL's low-level API ("Making a Base Backup Using the Low
 * Level API", PostgreSQL 18 docs, section 25.3.4), on one session from start to stop:
 *  1. a temporary physical replication slot that reserves WAL at once, so that no segment the copy needs is recycled
 *     by the checkpoints that run while it copies (a backup alone does not hold WAL back);
 *  2. pg_backup_start(label, fast => true): an immediate checkpoint, whose redo location replay starts from;
 *  3. the cluster's files, without those the docs say to leave out (postmaster.pid and .opts, the contents of pg_wal,
 *     pg_replslot, pg_dynshmem, pg_notify, pg_serial, pg_snapshots, pg_stat_tmp and pg_subtrans, pgsql_tmp*,
 *     pg_internal.init); a file changed under the copy is made whole again by replaying the WAL (full-page writes are
 *     forced while a backup runs);
 *  4. pg_backup_stop(wait_for_archive => false): its backup_label (and tablespace_map) go into the copy, which is
 *     what makes PostgreSQL replay from the start's checkpoint instead of trusting pg_control;
 *  5. the WAL segments from the one holding the start to the one holding the stop, while the slot still holds them
 *     (each is checked to be there: a backup that could not be replayed is never finished).
 * Then the secrets (modes kept) and the media files (a first pass before the stop, a second one after it for files
 * that arrived meanwhile, so every file a row of the copied database names is in), then the manifest. Everything is
 * written into `<target>.partial`, fsynced, and renamed to `<target>` once whole.
 *
 * With DATABASE_URL the database is a server's, not ours to copy: the secrets and media only, and a plain line
 * saying how to back the database up with the server's own tools.
 */

export interface BackupOptions {
  config: PlatformConfig;
  target: string;
  /** A line for the operator (stderr). */
  say: (line: string) => void;
  /**
   * Tests only (PLATFORM_BACKUP_TEST_HOLD): once half of the cluster's files are copied, the command creates this
   * file and waits until it is removed, so a test can write, checkpoint or kill the command mid-copy.
   */
  holdFile?: string | undefined;
}

export interface BackupSummary {
  target: string;
  files: number;
  bytes: number;
  database: ManifestDatabase;
}

/** The data folder's entries that are not copied as files of their own. */
const PGDATA = 'pgdata';
const MEDIA = 'media';
/** The embedded PostgreSQL's socket folder and owner socket (src/db/embedded.ts): runtime only. */
const RUNTIME = new Set(['pgdata-socket']);
/** The mark of a platform command starting on DATA_DIR (restore.ts, markStart), followed by its process id. */
export const STARTING_MARK = '.starting-';

/** Folders whose contents PostgreSQL's docs say a base backup leaves out (the folders themselves are kept). */
const EMPTIED_FOLDERS = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
]);
/** Files of the cluster's top folder left out: the running server's, or written by this backup itself. */
const LEFT_OUT_FILES = new Set([
  'postmaster.pid',
  'postmaster.opts',
  'backup_label',
  'tablespace_map',
  'recovery.signal',
  'standby.signal',
]);

/** Whether a path inside the cluster (relative, '/'-separated) is left out of the copy. */
export function leftOutOfCluster(relative: string, isDirectory: boolean): boolean {
  const parts = relative.split('/');
  const name = parts.at(-1)!;
  if (name.startsWith('pgsql_tmp') || name === 'pg_internal.init') return true;
  if (parts.length === 1) return !isDirectory && LEFT_OUT_FILES.has(name);
  // Of an emptied folder's contents only pg_wal's own folders are kept (archive_status, summaries); a slot's
  // folder in pg_replslot without its state file stops PostgreSQL from starting.
  return EMPTIED_FOLDERS.has(parts[0]!) && !(isDirectory && parts[0] === 'pg_wal' && parts.length === 2);
}

export function platformVersion(): string {
  // apps/platform/package.json, from src/backup/ as from dist/backup/.
  return (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
}

export async function latestCodeMigration(): Promise<string | null> {
  const last = (await readMigrations()).at(-1);
  return last ? migrationLabel(last) : null;
}

export async function takeBackup(options: BackupOptions): Promise<BackupSummary> {
  const { config } = options;
  const dataDir = path.resolve(config.dataDir);
  const target = path.resolve(options.target);
  const partial = `${target}.partial`;
  if (existsSync(target)) {
    throw new BackupError(
      'target_exists',
      `platform backup: ${target} exists; name a new folder (a backup never writes over anything)`,
      {
        exitCode: 2,
      },
    );
  }
  if (existsSync(partial)) {
    throw new BackupError(
      'partial_left',
      `platform backup: ${partial} is left from a backup that was interrupted; remove it and run the backup again`,
      { exitCode: 2 },
    );
  }
  if (isInside(target, dataDir) || isInside(dataDir, target)) {
    throw new BackupError(
      'target_inside_data',
      `platform backup: ${target} must lie outside DATA_DIR (${dataDir})`,
      {
        exitCode: 2,
      },
    );
  }
  if (!existsSync(dataDir)) {
    throw new BackupError(
      'no_data',
      `platform backup: DATA_DIR ${dataDir} does not exist: nothing to back up`,
      {
        exitCode: 2,
      },
    );
  }
  if (!config.databaseUrl && !existsSync(path.join(dataDir, PGDATA, 'PG_VERSION'))) {
    throw new BackupError(
      'no_data',
      `platform backup: ${path.join(dataDir, PGDATA)} holds no database (start the platform once, or set DATABASE_URL)`,
      { exitCode: 2 },
    );
  }

  await mkdir(path.dirname(target), { recursive: true });
  await mkdir(partial, { mode: 0o700 });
  try {
    return await writeBackup(options, dataDir, target, partial);
  } catch (error) {
    // A backup that failed leaves nothing behind (one that was killed leaves `<target>.partial`, never `<target>`).
    await rm(partial, { recursive: true, force: true }).catch(() => {});
    throw error;
  }
}

async function writeBackup(
  options: BackupOptions,
  dataDir: string,
  target: string,
  partial: string,
): Promise<BackupSummary> {
  const { config, say } = options;
  const copy = new BackupWriter(dataDir, path.join(partial, DATA_FOLDER));
  await copy.directory('', 0o700);

  const media = async (pass: 'first' | 'second') => {
    const source = path.join(dataDir, MEDIA);
    if (!existsSync(source)) return;
    const tree = await listTree(source, (relative) => relative === 'tmp');
    for (const dir of tree.directories) await copy.directory(`${MEDIA}/${dir}`);
    await copy.directory(MEDIA);
    for (const file of tree.files) {
      const relative = `${MEDIA}/${file}`;
      if (pass === 'second' && copy.has(relative)) continue;
      await copy.file(relative, 'media');
    }
  };

  let database: ManifestDatabase;
  if (config.databaseUrl) {
    database = { kind: 'external' };
    await media('first');
  } else {
    database = await copyEmbeddedCluster(config, copy, options, () => media('first'));
    await media('second');
  }

  // The secrets and whatever else the data folder holds (authority/, device-ca/, authority-ledger/, the credentials).
  const rest = await listTree(dataDir, (relative) => {
    const top = relative.split('/')[0]!;
    return top === PGDATA || top === MEDIA || RUNTIME.has(top) || top.startsWith(STARTING_MARK);
  });
  for (const dir of rest.directories) await copy.directory(dir);
  for (const file of rest.files) await copy.file(file, 'secret');
  for (const other of rest.others) say(`left out ${path.join(dataDir, other)}: not a regular file`);
  for (const [name, where] of settingsOutside(config.settings, dataDir)) {
    say(`not in this backup: ${name}=${where} lies outside DATA_DIR; back it up with the city's key store`);
  }

  const manifest: Manifest = {
    format: MANIFEST_FORMAT,
    created_at: new Date().toISOString(),
    platform: { version: platformVersion(), latest_migration: await latestCodeMigration() },
    database,
    directories: copy.directories,
    files: copy.files,
  };
  await copy.syncAll();
  const manifestFile = await open(path.join(partial, MANIFEST_FILE), 'wx', 0o600);
  try {
    await manifestFile.writeFile(`${JSON.stringify(manifest, null, 2)}\n`);
    await manifestFile.sync();
  } finally {
    await manifestFile.close();
  }
  await syncDirectory(partial);
  // Only now is it a backup: whole, on disk, under its name.
  await rename(partial, target);
  await syncDirectory(path.dirname(target));
  return {
    target,
    files: copy.files.length,
    bytes: copy.files.reduce((sum, f) => sum + f.size, 0),
    database,
  };
}

/** Writes files and folders under the backup's data/ folder and keeps their manifest entries. */
class BackupWriter {
  readonly files: ManifestFile[] = [];
  readonly directories: ManifestDirectory[] = [];
  private readonly paths = new Set<string>();
  private readonly folders = new Set<string>();

  constructor(
    private readonly from: string,
    private readonly to: string,
  ) {}

  has(relative: string): boolean {
    return this.paths.has(relative);
  }

  /** A folder of the copy, with the source's mode (or `mode` when given); its parents first. */
  async directory(relative: string, mode?: number): Promise<void> {
    if (this.folders.has(relative)) return;
    const parent = relative.includes('/') ? relative.slice(0, relative.lastIndexOf('/')) : '';
    if (relative !== '') await this.directory(parent);
    const bits = mode ?? (await stat(path.join(this.from, relative))).mode & 0o7777;
    await mkdir(path.join(this.to, relative), { mode: 0o700 });
    this.folders.add(relative);
    if (relative !== '') this.directories.push({ path: relative, mode: bits });
  }

  /** Copies one file; a file gone meanwhile is left out. */
  async file(
    relative: string,
    kind: ManifestFile['kind'],
    from = path.join(this.from, relative),
  ): Promise<boolean> {
    let mode: number;
    try {
      mode = (await stat(from)).mode & 0o7777;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw error;
    }
    const parent = relative.includes('/') ? relative.slice(0, relative.lastIndexOf('/')) : '';
    await this.directory(parent);
    // Written 0600 in the backup whatever the source's mode; the source's mode is restored.
    const copied = await copyFileHashed(from, path.join(this.to, relative), 0o600);
    if (!copied) return false;
    this.paths.add(relative);
    this.files.push({ path: relative, kind, size: copied.size, sha256: copied.sha256, mode });
    return true;
  }

  /** A file whose bytes the backup makes (backup_label). */
  async written(relative: string, kind: ManifestFile['kind'], bytes: Buffer, mode: number): Promise<void> {
    const file = path.join(this.to, relative);
    const handle = await open(file, 'wx', 0o600);
    try {
      await handle.writeFile(bytes);
      await handle.sync();
    } finally {
      await handle.close();
    }
    this.paths.add(relative);
    this.files.push({
      path: relative,
      kind,
      size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      mode,
    });
  }

  /** fsync of every folder written, deepest first. */
  async syncAll(): Promise<void> {
    const all = [...this.folders].sort((a, b) => b.split('/').length - a.split('/').length);
    for (const relative of all) await syncDirectory(path.join(this.to, relative));
  }
}

/** The label's "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)". */
function startSegment(label: string): string {
  const match = /^START WAL LOCATION: [0-9A-F]+\/[0-9A-F]+ \(file ([0-9A-F]{24})\)$/m.exec(label);
  if (!match) throw new Error(`pg_backup_stop's backup_label names no start segment:\n${label}`);
  return match[1]!;
}

/** Segment names from `first` to `last` inclusive (same timeline), for segments of `segmentBytes`. */
export function segmentsBetween(first: string, last: string, segmentBytes: bigint): string[] {
  const perId = 0x1_0000_0000n / segmentBytes;
  const number = (name: string) =>
    BigInt(`0x${name.slice(8, 16)}`) * perId + BigInt(`0x${name.slice(16, 24)}`);
  const timeline = first.slice(0, 8);
  if (last.slice(0, 8) !== timeline) throw new Error(`the backup crossed timelines (${first} to ${last})`);
  const hex = (n: bigint) => n.toString(16).toUpperCase().padStart(8, '0');
  const names: string[] = [];
  for (let n = number(first); n <= number(last); n++)
    names.push(`${timeline}${hex(n / perId)}${hex(n % perId)}`);
  return names;
}

async function copyEmbeddedCluster(
  config: PlatformConfig,
  copy: BackupWriter,
  options: BackupOptions,
  duringBackup: () => Promise<void>,
): Promise<ManifestDatabase> {
  const { say } = options;
  const cluster = path.join(path.resolve(config.dataDir), PGDATA);
  // Beside a running platform its cluster is used; otherwise this command starts it and stops it when done.
  const embedded = await openEmbeddedCluster({
    dir: cluster,
    port: config.embeddedPgPort,
    use: 'command',
    what: 'platform backup',
  });
  say(
    embedded.owner
      ? `using the embedded PostgreSQL of ${embedded.owner.what} (pid ${embedded.owner.pid})`
      : `started the embedded PostgreSQL of ${config.dataDir} for the backup`,
  );
  try {
    // The superuser: a replication slot and pg_backup_start need it (the platform's role may do neither).
    const client = new pg.Client({
      connectionString: embedded.superuserUrl,
      application_name: 'ooh-platform-backup',
    });
    client.on('error', () => {});
    await client.connect();
    try {
      const settings = await client.query<{
        wal_level: string;
        slots: number;
        used: number;
        version: string;
        segment: string;
      }>(
        `SELECT current_setting('wal_level') AS wal_level,
                current_setting('max_replication_slots')::int AS slots,
                (SELECT count(*)::int FROM pg_replication_slots) AS used,
                current_setting('server_version') AS version,
                pg_size_bytes(current_setting('wal_segment_size'))::text AS segment`,
      );
      const s = settings.rows[0]!;
      if (s.wal_level === 'minimal') {
        throw new BackupError(
          'not_supported',
          `platform backup: the embedded PostgreSQL runs with wal_level minimal, which allows no online backup`,
        );
      }
      if (s.used >= s.slots) {
        throw new BackupError(
          'not_supported',
          `platform backup: the embedded PostgreSQL has no free replication slot (max_replication_slots ${s.slots}, ${s.used} in use)`,
        );
      }
      // Temporary: dropped when this session ends, however it ends (a killed backup holds no WAL for ever).
      const slot = `ooh_backup_${process.pid}`;
      await client.query(
        'SELECT pg_create_physical_replication_slot($1, immediately_reserve => true, temporary => true)',
        [slot],
      );
      const label = `platform backup ${new Date().toISOString()} to ${options.target}`;
      const started = await client.query<{ lsn: string }>(
        'SELECT pg_backup_start($1, fast => true)::text AS lsn',
        [label],
      );
      const startLsn = started.rows[0]!.lsn;
      say(`database backup started at WAL ${startLsn}`);

      const tree = await listTree(cluster, leftOutOfCluster);
      if (tree.others.some((o) => o.startsWith('pg_tblspc/'))) {
        throw new BackupError(
          'not_supported',
          'platform backup: the embedded PostgreSQL has tablespaces, which this backup does not copy',
        );
      }
      if (tree.others.length > 0) {
        throw new BackupError(
          'not_supported',
          `platform backup: ${path.join(cluster, tree.others[0]!)} is a link or a special file; a cluster with links is not copied`,
        );
      }
      await copy.directory(PGDATA);
      for (const dir of tree.directories) await copy.directory(`${PGDATA}/${dir}`);
      const half = Math.floor(tree.files.length / 2);
      for (const [index, file] of tree.files.entries()) {
        if (index === half && options.holdFile) await holdForTest(options.holdFile);
        await copy.file(`${PGDATA}/${file}`, 'database');
      }
      await duringBackup();

      // stopped_at: what was committed after it is not in the backup (a restore names it, src/backup/advance.ts).
      const stopped = await client.query<{
        lsn: string;
        labelfile: string;
        spcmapfile: string | null;
        stopped_at: Date;
      }>(
        `SELECT lsn::text AS lsn, labelfile, spcmapfile, clock_timestamp() AS stopped_at
           FROM pg_backup_stop(wait_for_archive => false)`,
      );
      const stop = stopped.rows[0]!;
      const stopFile = (
        await client.query<{ name: string }>('SELECT pg_walfile_name($1::pg_lsn) AS name', [stop.lsn])
      ).rows[0]!.name;
      await copy.written(`${PGDATA}/backup_label`, 'database', Buffer.from(stop.labelfile, 'utf8'), 0o600);
      if (stop.spcmapfile) {
        await copy.written(
          `${PGDATA}/tablespace_map`,
          'database',
          Buffer.from(stop.spcmapfile, 'utf8'),
          0o600,
        );
      }

      // The WAL from the start's segment to the stop's, held by the slot until this session ends.
      const first = startSegment(stop.labelfile);
      const segments = segmentsBetween(first, stopFile, BigInt(s.segment));
      const wal = path.join(cluster, 'pg_wal');
      for (const segment of segments) {
        if (!(await copy.file(`${PGDATA}/pg_wal/${segment}`, 'database', path.join(wal, segment)))) {
          throw new BackupError(
            'wal_missing',
            `platform backup: WAL segment ${segment} (needed from ${startLsn} to ${stop.lsn}) is gone from ${wal}; no backup was made`,
          );
        }
      }
      for (const name of await readdir(wal)) {
        if (name.endsWith('.history'))
          await copy.file(`${PGDATA}/pg_wal/${name}`, 'database', path.join(wal, name));
      }
      const migration = await client
        .query<{ label: string }>(
          `SELECT lpad(version::text, 3, '0') || '_' || name AS label FROM schema_migrations ORDER BY version DESC LIMIT 1`,
        )
        .then(
          (r) => r.rows[0]?.label ?? null,
          () => null,
        );
      await client.query('SELECT pg_drop_replication_slot($1)', [slot]).catch(() => {});
      say(`database backup stopped at WAL ${stop.lsn} (${segments.length} WAL segment(s) copied)`);
      return {
        kind: 'embedded',
        start_lsn: startLsn,
        stop_lsn: stop.lsn,
        timeline: Number.parseInt(first.slice(0, 8), 16),
        wal_segments: segments,
        server_version: s.version,
        latest_migration: migration,
        stopped_at: stop.stopped_at.toISOString(),
      };
    } finally {
      await client.end().catch(() => {});
    }
  } finally {
    await embedded.stop();
  }
}

export async function holdForTest(file: string): Promise<void> {
  await writeFile(file, `${process.pid}\n`, { flag: 'wx' });
  while (
    await lstat(file).then(
      () => true,
      () => false,
    )
  ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await unlink(file).catch(() => {});
}

/**
 * The platform's settings that name a key, a certificate or a file of settings: the authority's files and folder
 * (authority/pki.ts AUTHORITY_ENV, AUTHORITY_LEDGER_KEY), the device CA's, the devices host's TLS pair, the TSA's
 * certificate, the config file. Only these: the environment holds many other paths (HOME, SHELL, npm's own), which
 * are no part of the platform's state, and naming them hid the few that are.
 */
const FILE_SETTINGS =
  /^(AUTHORITY_(DIR|CHAIN_CERTS|[A-Z]+_CERT|[A-Z]+_KEY)|DEVICE_CA_(CERT|CHAIN|KEY)|DEVICES_TLS_(CERT|KEY)|LEDGER_TSA_CERT|CONFIG_FILE)$/;

/**
 * The platform's settings that name a file or folder outside DATA_DIR (a key or certificate mounted from elsewhere:
 * AUTHORITY_DIR, AUTHORITY_*, DEVICE_CA_*, DEVICES_TLS_*, AUTHORITY_LEDGER_KEY, ...): the backup holds DATA_DIR only,
 * so each is named, for the operator to keep with the backup.
 */
export function settingsOutside(settings: NodeJS.ProcessEnv, dataDir: string): [string, string][] {
  const outside: [string, string][] = [];
  for (const [name, value] of Object.entries(settings)) {
    if (!FILE_SETTINGS.test(name)) continue;
    if (!value || !value.includes('/') || value.includes('://')) continue;
    const where = path.resolve(value);
    if (isInside(where, dataDir) || !existsSync(where)) continue;
    outside.push([name, where]);
  }
  return outside.sort(([a], [b]) => a.localeCompare(b));
}
