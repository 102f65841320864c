import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, readdir, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { PlatformConfig } from '../config.js';
import { postgresUser } from '../db/embedded-process.js';
import { createLogger } from '../logging.js';
import { openDatabase, type PlatformDatabase } from '../platform.js';
import { StartError } from '../start-errors.js';
import {
  advancePastLostInterval,
  describeAdvance,
  newestRecordedActivity,
  type RestoreAdvance,
} from './advance.js';
import { BackupError } from './errors.js';
import { copyFileHashed, hashFile, listTree, syncDirectory } from './files.js';
import { DATA_FOLDER, type Manifest, readManifest } from './manifest.js';
import { holdForTest, latestCodeMigration, STARTING_MARK } from './take.js';

/*
 * `platform restore <backup>`: a backup made by `platform backup` into an empty (or absent) DATA_DIR. Every file is
 * checked against the manifest (no file missing, none added, each one's size and SHA-256) before anything is
 * written; nothing in DATA_DIR is ever written over. The files go into `DATA_DIR/.restoring` first and are moved
 * to their places once all are copied (and checked again as they are copied). The next `platform run` starts
 * PostgreSQL on the copy: the backup_label makes it replay the WAL from the backup's start to past its stop, and
 * only then does it accept connections.
 *
 * `.restoring` is also the restore's claim on DATA_DIR: created (exclusively) before the first copy and removed
 * after the last move, and every platform command refuses to start while it is there (restoreUnderWay), so a
 * platform started by mistake during a restore neither initialises a database nor writes secrets that the
 * restore would then mix with the backup's. A platform that was already starting when the claim was made has
 * written into DATA_DIR by the time the files are moved: the folder is checked to hold only `.restoring` right after
 * the claim and again right before the moves, and the restore stops, moving nothing, if it does not.
 *
 * That last look alone leaves a window: a platform that found no claim, then wrote its first file only after the
 * restore's last look. So every other platform command first puts its own mark in DATA_DIR (`.starting-<pid>`,
 * markStart) and only then looks for the claim, and keeps the mark until it has written what it writes at start.
 * Each side makes its mark, then looks for the other's: whichever looks second finds the first one's, so at least
 * one of them stops, and a restore never moves files into a folder a platform is initialising. The mark is left out
 * of backups.
 *
 * Then the restored database's numbers are skipped past the interval after the backup (src/backup/advance.ts): the
 * embedded PostgreSQL is started on the restored files (replaying the WAL), migrated, advanced and stopped while
 * `.restoring` still holds DATA_DIR, so no platform ever serves the database before its numbers are advanced. With
 * DATABASE_URL the database must have been restored with the server's tools before this command, which advances it
 * there (and refuses before copying anything when it cannot reach it).
 */

export interface RestoreOptions {
  config: PlatformConfig;
  source: string;
  say: (line: string) => void;
  /** Tests only (PLATFORM_BACKUP_TEST_HOLD): once half of the files are copied, waits until this file is removed. */
  holdFile?: string | undefined;
  /** The restore's time (the end of the interval whose numbers are skipped); the system clock by default. */
  now?: () => Date;
}

export interface RestoreSummary {
  dataDir: string;
  manifest: Manifest;
  advance: RestoreAdvance;
}

const STAGING = '.restoring';

/**
 * Puts this process's mark in `dataDir` (creating the folder if needed): from now on a restore into it stops before
 * moving anything into place. Look for a restore's claim (restoreUnderWay) only after this, and release the mark once
 * the command has written what it writes at start, or has stopped; a folder this call made is removed again if
 * nothing else was written into it.
 */
export async function markStart(dataDir: string): Promise<{ release: () => Promise<void> }> {
  const dir = path.resolve(dataDir);
  const created = !existsSync(dir);
  const mark = path.join(dir, `${STARTING_MARK}${process.pid}`);
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(mark, `${process.pid}\n`, { mode: 0o600 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new StartError(
      code === 'EEXIST' || code === 'ENOTDIR'
        ? `DATA_DIR ${dir} is not a folder (a file has its name, or a part of its path): set DATA_DIR to a folder`
        : `DATA_DIR ${dir} cannot be written (${code}): make it writable by this user, or set DATA_DIR to a folder that is`,
      2,
    );
  }
  // The marks of commands killed while they started (their processes gone) protect nothing: removed.
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const pid = Number(name.slice(STARTING_MARK.length));
    if (!name.startsWith(STARTING_MARK) || !Number.isSafeInteger(pid) || pid === process.pid) continue;
    if (!processAlive(pid)) await rm(path.join(dir, name), { force: true });
  }
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      await rm(mark, { force: true });
      if (created) await rmdir(dir).catch(() => {});
    },
  };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive, another user's.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * The restore's claim in `dataDir`, when there is one: a restore is under way, or was interrupted (killed). Every
 * platform command that uses DATA_DIR refuses to start while it is there.
 */
export function restoreUnderWay(dataDir: string): string | null {
  const staging = path.join(path.resolve(dataDir), STAGING);
  return existsSync(staging) ? staging : null;
}

/** The refusal of a command (`platform run`, `npm start`, ...) started on a DATA_DIR a restore has claimed (`staging`). */
export function restoreUnderWayError(command: string, staging: string): BackupError {
  return new BackupError(
    'restore_under_way',
    `${command}: ${staging} exists: a restore into this DATA_DIR is under way, or was interrupted; ` +
      `wait for it to finish, or, if no restore runs, remove the DATA_DIR's contents and run the restore again`,
    { exitCode: 2 },
  );
}

export async function restoreBackup(options: RestoreOptions): Promise<RestoreSummary> {
  const { config, say } = options;
  const source = path.resolve(options.source);
  const dataDir = path.resolve(config.dataDir);
  if (!existsSync(source)) {
    throw new BackupError('not_a_backup', `platform restore: ${source} does not exist`, { exitCode: 2 });
  }
  if (source.endsWith('.partial')) {
    throw new BackupError(
      'incomplete_backup',
      `platform restore: ${source} is a backup that was interrupted (a .partial folder), not a backup; restore from a complete one`,
      { exitCode: 2 },
    );
  }
  const manifest = await readManifest(source);

  // A backup of a newer version holds migrations this code does not know: its platform would refuse the database.
  const ours = await latestCodeMigration();
  const theirs = manifest.database.kind === 'embedded' ? manifest.database.latest_migration : null;
  if (theirs !== null && (ours === null || theirs > ours)) {
    throw new BackupError(
      'backup_newer',
      `platform restore: the backup's database is at migration ${theirs}, newer than this platform's ${ours}; ` +
        `restore it with platform ${manifest.platform.version} or later`,
      { exitCode: 2 },
    );
  }
  if (manifest.database.kind === 'embedded' && config.databaseUrl) {
    throw new BackupError(
      'database_mismatch',
      'platform restore: the backup holds the embedded PostgreSQL, but DATABASE_URL is set; unset it to restore ' +
        'the embedded database (a platform with DATABASE_URL would never read it)',
      { exitCode: 2 },
    );
  }
  if (manifest.database.kind === 'external' && !config.databaseUrl) {
    throw new BackupError(
      'database_mismatch',
      "platform restore: the backup's database is a PostgreSQL server's (DATABASE_URL), but DATABASE_URL is not " +
        "set: restore that database with the server's own tools, set DATABASE_URL to it and run the restore again",
      { exitCode: 2 },
    );
  }
  if (existsSync(dataDir)) refuseUnlessEmpty(dataDir, await readdir(dataDir));

  const data = path.join(source, DATA_FOLDER);
  await checkBackup(data, manifest);
  say(`backup checked: ${manifest.files.length} files, every SHA-256 as in its manifest`);
  // The server's database, restored by its operator first: reached before anything is copied.
  const createdDataDir = !existsSync(dataDir);
  const external =
    manifest.database.kind === 'external'
      ? await openExternalDatabase(config).catch(async (error: unknown) => {
          if (createdDataDir) await rmdir(dataDir).catch(() => {});
          throw error;
        })
      : null;
  try {
    return await restoreInto(options, manifest, data, { dataDir, createdDataDir }, external);
  } finally {
    await external?.close();
  }
}

async function restoreInto(
  options: RestoreOptions,
  manifest: Manifest,
  data: string,
  { dataDir, createdDataDir }: { dataDir: string; createdDataDir: boolean },
  external: PlatformDatabase | null,
): Promise<RestoreSummary> {
  const { config, say } = options;
  const now = options.now ?? (() => new Date());

  // The claim: from here every platform command refuses this DATA_DIR (and a second restore finds it taken).
  await mkdir(dataDir, { recursive: true });
  const staging = path.join(dataDir, STAGING);
  try {
    await mkdir(staging, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') refuseUnlessEmpty(dataDir, [STAGING]);
    throw error;
  }
  try {
    // Written meanwhile (while the backup was checked): a platform started on it, or another restore.
    refuseUnlessEmpty(dataDir, await readdir(dataDir), STAGING);
    await copyInto(staging, data, manifest, options.holdFile);
    // The last look before anything is moved into place: a platform that was starting when the claim was made.
    refuseUnlessEmpty(dataDir, await readdir(dataDir), STAGING);
  } catch (error) {
    // The copy is this command's: gone with its claim, so a failed restore leaves DATA_DIR as it found it.
    await rm(staging, { recursive: true, force: true });
    if (createdDataDir) await rmdir(dataDir).catch(() => {});
    throw error;
  }

  for (const name of await readdir(staging)) await rename(path.join(staging, name), path.join(dataDir, name));
  await syncDirectory(dataDir);
  // The claim (now empty) stays until the numbers are advanced: a platform started meanwhile refuses DATA_DIR.
  let advance: RestoreAdvance;
  try {
    advance = external
      ? await advanceRestored(external, manifest, now())
      : await withRestoredDatabase(config, (database) => advanceRestored(database, manifest, now()));
  } catch (error) {
    throw new BackupError(
      'advance_failed',
      `platform restore: the files are in DATA_DIR ${dataDir}, but the database's numbers could not be advanced ` +
        `past the backup (${(error as Error).message}); ${staging} is left, so no platform starts on a database that ` +
        'would issue numbers again that players and integrators already hold: empty DATA_DIR and run the restore again',
      { cause: error },
    );
  }
  await rmdir(staging);
  await syncDirectory(dataDir);
  for (const line of describeAdvance(advance)) say(line);
  return { dataDir, manifest, advance };
}

/** When the restored database's backup was taken: pg_backup_stop's time, else the earliest it can have been. */
async function backupTakenAt(database: PlatformDatabase, manifest: Manifest): Promise<Date> {
  if (manifest.database.kind === 'embedded' && manifest.database.stopped_at !== undefined) {
    return new Date(manifest.database.stopped_at);
  }
  const created = new Date(manifest.created_at);
  const newest = await newestRecordedActivity(database.db);
  return newest !== null && newest < created ? newest : created;
}

async function advanceRestored(
  database: PlatformDatabase,
  manifest: Manifest,
  now: Date,
): Promise<RestoreAdvance> {
  return advancePastLostInterval(database.db, await backupTakenAt(database, manifest), now);
}

const quietLogger = (config: PlatformConfig) =>
  createLogger({ ...config, logLevel: config.logLevel === 'info' ? 'warn' : config.logLevel });

/**
 * The restored embedded PostgreSQL, started (replaying the backup's WAL), migrated as `platform run` would, used,
 * then stopped.
 */
async function withRestoredDatabase<T>(
  config: PlatformConfig,
  use: (database: PlatformDatabase) => Promise<T>,
): Promise<T> {
  const database = await openDatabase(config, quietLogger(config), {
    use: 'command',
    what: 'platform restore',
  });
  try {
    return await use(database);
  } finally {
    await database.close();
  }
}

/** DATABASE_URL's database (openDatabase makes DATA_DIR, which is empty, when absent: nothing is written in it). */
async function openExternalDatabase(config: PlatformConfig): Promise<PlatformDatabase> {
  try {
    return await openDatabase(config, quietLogger(config), { use: 'command', what: 'platform restore' });
  } catch (error) {
    throw new BackupError(
      'database_unreachable',
      `platform restore: the database of DATABASE_URL cannot be used (${(error as Error).message}): restore it ` +
        "with the server's own tools first, then run this command, which skips its approval, submission and " +
        'revocation list numbers past the backup; nothing was restored',
      { exitCode: 2, cause: error },
    );
  }
}

/**
 * Refuses a DATA_DIR that holds anything but `mine` (the restore's own claim, once made): a restore writes into an
 * empty or absent folder only.
 */
function refuseUnlessEmpty(dataDir: string, present: string[], mine?: string): void {
  const others = present.filter((name) => name !== mine);
  if (mine === undefined && others.length === 1 && others[0] === STAGING) {
    throw new BackupError(
      'data_dir_not_empty',
      `platform restore: DATA_DIR ${dataDir} holds only ${STAGING}: a restore is under way, or was interrupted; ` +
        `if no restore runs, remove ${path.join(dataDir, STAGING)} and run the restore again`,
      { exitCode: 2 },
    );
  }
  if (others.length === 0) return;
  // Only marks: a platform command starting on an empty folder (with data beside them, the folder is simply not empty).
  const starting = others.every((name) => name.startsWith(STARTING_MARK)) ? others[0] : undefined;
  if (starting !== undefined) {
    const pid = starting.slice(STARTING_MARK.length);
    throw new BackupError(
      'data_dir_not_empty',
      `platform restore: a platform command (process ${pid}) is starting on DATA_DIR ${dataDir}` +
        `${mine === undefined ? '' : '; nothing was moved into place'}: stop it and run the restore again ` +
        `(if no such process runs, remove ${path.join(dataDir, starting)})`,
      { exitCode: 2 },
    );
  }
  const named = `${others.slice(0, 3).join(', ')}${others.length > 3 ? ', ...' : ''}`;
  throw new BackupError(
    'data_dir_not_empty',
    mine === undefined
      ? `platform restore: DATA_DIR ${dataDir} is not empty (${named}); a restore writes into an empty or absent ` +
          'folder only, never over data'
      : `platform restore: ${named} appeared in DATA_DIR ${dataDir} while the restore ran (a platform started on ` +
          'it?); nothing was moved into place: stop it, empty DATA_DIR and run the restore again',
    { exitCode: 2 },
  );
}

/** Copies the backup's files into `staging`, each checked again as it is copied, with their modes and owners. */
async function copyInto(
  staging: string,
  data: string,
  manifest: Manifest,
  holdFile: string | undefined,
): Promise<void> {
  // Parents before children (the manifest lists them so); modes set once the files are in.
  const directories = [...manifest.directories].sort(
    (a, b) => a.path.split('/').length - b.path.split('/').length,
  );
  for (const dir of directories) await mkdir(path.join(staging, dir.path), { recursive: true, mode: 0o700 });
  const half = Math.floor(manifest.files.length / 2);
  for (const [index, file] of manifest.files.entries()) {
    if (index === half && holdFile) await holdForTest(holdFile);
    const copied = await copyFileHashed(path.join(data, file.path), path.join(staging, file.path), file.mode);
    if (!copied || copied.sha256 !== file.sha256 || copied.size !== file.size) {
      throw corrupt(file.path, 'changed while it was restored');
    }
  }
  for (const dir of directories) await chmod(path.join(staging, dir.path), dir.mode);

  // PostgreSQL runs as its own user when the platform runs as root (src/db/embedded-process.ts): its files are its.
  if (manifest.database.kind === 'embedded') {
    const user = await postgresUser();
    if (user.other) {
      const tree = await listTree(path.join(staging, 'pgdata'));
      await chown(path.join(staging, 'pgdata'), user.uid, user.gid);
      for (const entry of [...tree.directories, ...tree.files]) {
        await chown(path.join(staging, 'pgdata', entry), user.uid, user.gid);
      }
    }
  }
  const deepestFirst = [...directories].sort((a, b) => b.path.split('/').length - a.path.split('/').length);
  for (const dir of deepestFirst) await syncDirectory(path.join(staging, dir.path));
  await syncDirectory(staging);
}

const corrupt = (relative: string, what: string) =>
  new BackupError(
    'backup_corrupt',
    `platform restore: the backup's ${relative} ${what}: the backup is damaged; nothing was restored`,
  );

/** The backup's data/ folder holds exactly the manifest's files, each of its size and SHA-256. */
async function checkBackup(data: string, manifest: Manifest): Promise<void> {
  const tree = await listTree(data);
  const listed = new Map(manifest.files.map((f) => [f.path, f]));
  for (const file of tree.files) {
    if (!listed.has(file)) throw corrupt(file, 'is not in its manifest');
  }
  if (tree.others.length > 0) throw corrupt(tree.others[0]!, 'is not a regular file');
  const present = new Set(tree.files);
  for (const file of manifest.files) {
    if (!present.has(file.path)) throw corrupt(file.path, 'is missing');
    const found = await hashFile(path.join(data, file.path));
    if (found.size !== file.size)
      throw corrupt(file.path, `has ${found.size} bytes, its manifest says ${file.size}`);
    if (found.sha256 !== file.sha256) throw corrupt(file.path, 'does not have the SHA-256 of its manifest');
  }
}
