import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { BackupError } from './errors.js';

/*
 * A backup folder:
 *
 *   <target>/manifest.json   what follows, written last (a folder without it is no backup)
 *   <target>/data/...        the data folder's files at the same relative paths: pgdata/ (the embedded
 *                            PostgreSQL's physical backup, backup_label and the WAL it needs included),
 *                            pgdata-credentials.json and the other secrets, media/<sha256>
 *
 * The restore checks every file against the manifest (size and SHA-256) before it copies anything.
 */

export const MANIFEST_FILE = 'manifest.json';
export const DATA_FOLDER = 'data';
export const MANIFEST_FORMAT = 'ooh-platform-backup/1';

/** database: under pgdata/; media: media/<sha256>; secret: everything else of the data folder (keys, passwords). */
export type FileKind = 'database' | 'secret' | 'media';

export interface ManifestFile {
  path: string;
  kind: FileKind;
  size: number;
  sha256: string;
  /** Permission bits, kept on restore (0600 for keys and passwords). */
  mode: number;
}

export interface ManifestDirectory {
  path: string;
  mode: number;
}

export type ManifestDatabase =
  | {
      kind: 'embedded';
      /** pg_backup_start's and pg_backup_stop's WAL locations. */
      start_lsn: string;
      stop_lsn: string;
      timeline: number;
      /** The WAL segments copied into pgdata/pg_wal, from the one holding the start to the one holding the stop. */
      wal_segments: string[];
      server_version: string;
      /** schema_migrations' newest row at the stop ("083_submission_media_sha256"), null for a database never migrated. */
      latest_migration: string | null;
      /**
       * When pg_backup_stop returned (the database's clock): the restored database holds what was committed before
       * it and nothing after. Absent from backups made before it was recorded: the backup_label's START TIME is used.
       */
      stopped_at?: string;
    }
  | { kind: 'external' };

export interface Manifest {
  format: typeof MANIFEST_FORMAT;
  created_at: string;
  platform: { version: string; latest_migration: string | null };
  database: ManifestDatabase;
  directories: ManifestDirectory[];
  files: ManifestFile[];
}

const HEX64 = /^[0-9a-f]{64}$/;
const MIGRATION = /^\d{3}_[a-z0-9_]+$/;

/** A relative path that stays inside the data folder: no empty part, no '.' or '..', no absolute path. */
function safeRelative(value: unknown): value is string {
  if (typeof value !== 'string' || value === '' || value.includes('\0') || value.includes('\\')) return false;
  return value.split('/').every((part) => part !== '' && part !== '.' && part !== '..');
}

const isInstant = (v: unknown): v is string => typeof v === 'string' && !Number.isNaN(Date.parse(v));

const isMode = (v: unknown): v is number =>
  Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0o7777;

/** Reads and checks `<dir>/manifest.json`; every field is checked before it is used. */
export async function readManifest(dir: string): Promise<Manifest> {
  const file = path.join(dir, MANIFEST_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new BackupError(
        'incomplete_backup',
        `${dir} is no complete backup: it has no ${MANIFEST_FILE} (a backup that was interrupted leaves a ` +
          'folder without it); restore from a complete backup',
        { exitCode: 2 },
      );
    }
    throw error;
  }
  const bad = (what: string) =>
    new BackupError('not_a_backup', `${file} is not a manifest of a platform backup: ${what}`, {
      exitCode: 2,
    });
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw bad('not JSON');
  }
  const m = value as Partial<Manifest> | null;
  if (!m || typeof m !== 'object' || m.format !== MANIFEST_FORMAT)
    throw bad(`format is not ${MANIFEST_FORMAT}`);
  if (!isInstant(m.created_at)) throw bad('created_at');
  const migration = (v: unknown): v is string | null =>
    v === null || (typeof v === 'string' && MIGRATION.test(v));
  if (!m.platform || typeof m.platform.version !== 'string' || !migration(m.platform.latest_migration))
    throw bad('platform');
  const d = m.database as Partial<Extract<ManifestDatabase, { kind: 'embedded' }>> | undefined;
  if (!d || (d.kind !== 'embedded' && d.kind !== 'external')) throw bad('database.kind');
  if (d.kind === 'embedded') {
    const lsn = (v: unknown) => typeof v === 'string' && /^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/.test(v);
    if (
      !lsn(d.start_lsn) ||
      !lsn(d.stop_lsn) ||
      !Number.isInteger(d.timeline) ||
      !Array.isArray(d.wal_segments) ||
      !d.wal_segments.every((s) => typeof s === 'string' && /^[0-9A-F]{24}$/.test(s)) ||
      typeof d.server_version !== 'string' ||
      !migration(d.latest_migration) ||
      (d.stopped_at !== undefined && !isInstant(d.stopped_at))
    ) {
      throw bad('database');
    }
  }
  if (!Array.isArray(m.directories) || !Array.isArray(m.files)) throw bad('directories or files');
  for (const entry of m.directories) {
    if (!safeRelative(entry?.path) || !isMode(entry.mode))
      throw bad(`directory ${JSON.stringify(entry?.path)}`);
  }
  const seen = new Set<string>();
  for (const entry of m.files) {
    if (
      !safeRelative(entry?.path) ||
      !['database', 'secret', 'media'].includes(entry.kind) ||
      !Number.isSafeInteger(entry.size) ||
      entry.size < 0 ||
      typeof entry.sha256 !== 'string' ||
      !HEX64.test(entry.sha256) ||
      !isMode(entry.mode) ||
      seen.has(entry.path)
    ) {
      throw bad(`file ${JSON.stringify(entry?.path)}`);
    }
    seen.add(entry.path);
  }
  return m as Manifest;
}

/** "083_submission_media_sha256" */
export const migrationLabel = (m: { version: number; name: string }) =>
  `${String(m.version).padStart(3, '0')}_${m.name}`;
