import type { Dir } from 'node:fs';
import { lstat, opendir } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Db, DbClient } from '../db/pool.js';
import { anyMediaNamed, isMediaNamed, tryLockMediaHash, unnamedHashes } from './repository.js';
import { CONTENT_NAME, mediaDir, mediaTmpDir, removeRegularFile, TEMP_NAME } from './store.js';

/*
 * The sweep of what a crash leaves in the media folder (the removal after a replaced draft's media, release.ts, runs
 * in the request; this catches what it could not):
 * - a temporary file in media/tmp of an upload the process died during;
 * - a content file no row names: the process died after a replacement's COMMIT and before its unlink, or after
 *   keepUpload and before COMMIT (the transaction then rolled back).
 * Only names the platform writes are looked at (a 64-hex hash in media/, a uuid in media/tmp/), only regular files
 * are removed (lstat; never through a symbolic link), and nothing outside those two folders.
 */

const HOUR_MS = 3_600_000;

/**
 * A temporary file is removed a day after it was last written. An upload in progress writes it with every chunk, so
 * only the time since the last write counts: the probe, the wait for the submission's lock and the hash's lock, and
 * a client that stalls until the server's timeouts end the request. Those are seconds to minutes; a day leaves a
 * margin of hundreds, also against the wall clock being stepped, and costs at most a day of one dead upload's bytes.
 */
export const TEMP_MAX_AGE_MS = 24 * HOUR_MS;

/**
 * An unnamed content file is removed a day after it was last written. The hash's lock, not the age, is what keeps
 * the sweep from an upload that is about to name the file; the age gives an operator a day to notice a database that
 * is not the one the media folder belongs to (a restore, a wrong DATABASE_URL) before files go.
 */
export const UNNAMED_MAX_AGE_MS = 24 * HOUR_MS;

/** Once at start, then hourly: what it removes is rare (crashes), and a day old before it is removed anyway. */
export const SWEEP_INTERVAL_MS = HOUR_MS;

/** One instance sweeps at a time (a session lock, like the seals and the witnesses); another skips its turn. */
const MEDIA_SWEEP_LOCK = 0x00_0f_f0_0d_50;

/** The unnamed content files asked of the database at once. */
const BATCH = 500;

export interface MediaSweep {
  tempFiles: number;
  tempBytes: number;
  unnamedFiles: number;
  unnamedBytes: number;
  /** Unnamed files whose hash an upload or a remover held meanwhile: looked at again by the next sweep. */
  busy: number;
  /** Files that could not be removed (permissions, ...): each is logged with its name and error code. */
  failed: number;
  /**
   * Old content files kept because the database names no media at all: a database that is not the one the media
   * folder belongs to (a fresh one, a wrong DATABASE_URL) would otherwise have every file removed.
   */
  keptForEmptyDatabase: number;
}

export interface SweepOptions {
  /** The wall clock's time: file ages are read from modification times, which the system's clock wrote. */
  now: Date;
  tempMaxAgeMs?: number;
  unnamedMaxAgeMs?: number;
}

/**
 * One sweep of `${dataDir}/media`, or 'busy' when another instance is sweeping. Never throws for a file that went
 * away meanwhile (another remover was first); a file it cannot remove is logged and counted, and the sweep goes on.
 */
export async function sweepMedia(
  ctx: { db: Db; dataDir: string; log: Logger },
  options: SweepOptions,
): Promise<MediaSweep | 'busy'> {
  const client = await ctx.db.connect();
  let broken = false;
  try {
    const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [
      MEDIA_SWEEP_LOCK,
    ]);
    if (rows[0]?.ok !== true) return 'busy';
    try {
      const result: MediaSweep = {
        tempFiles: 0,
        tempBytes: 0,
        unnamedFiles: 0,
        unnamedBytes: 0,
        busy: 0,
        failed: 0,
        keptForEmptyDatabase: 0,
      };
      const nowMs = options.now.getTime();
      await sweepTemporary(ctx, nowMs - (options.tempMaxAgeMs ?? TEMP_MAX_AGE_MS), result);
      await sweepUnnamed(ctx, client, nowMs - (options.unnamedMaxAgeMs ?? UNNAMED_MAX_AGE_MS), result);
      return result;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MEDIA_SWEEP_LOCK]).catch(() => {
        broken = true;
      });
    }
  } finally {
    client.release(broken);
  }
}

/** The names in `dir` (opendir: streamed, never the whole listing in memory); none when it is not there. */
async function* namesIn(dir: string): AsyncGenerator<string> {
  let handle: Dir;
  try {
    handle = await opendir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return;
    throw error;
  }
  for await (const entry of handle) yield entry.name;
}

async function removeCounted(
  ctx: { log: Logger },
  file: string,
  modifiedBeforeMs: number,
  result: MediaSweep,
): Promise<number | null> {
  try {
    return await removeRegularFile(file, { modifiedBeforeMs });
  } catch (error) {
    result.failed += 1;
    ctx.log.warn(
      { file: path.basename(file), code: (error as NodeJS.ErrnoException).code },
      'media sweep could not remove a file',
    );
    return null;
  }
}

async function sweepTemporary(
  ctx: { dataDir: string; log: Logger },
  modifiedBeforeMs: number,
  result: MediaSweep,
): Promise<void> {
  const dir = mediaTmpDir(ctx.dataDir);
  // The platform makes media/tmp a folder; anything else there (a link elsewhere) is not swept.
  const stats = await lstat(dir).catch(() => null);
  if (!stats?.isDirectory()) return;
  for await (const name of namesIn(dir)) {
    if (!TEMP_NAME.test(name)) continue;
    const bytes = await removeCounted(ctx, path.join(dir, name), modifiedBeforeMs, result);
    if (bytes !== null) {
      result.tempFiles += 1;
      result.tempBytes += bytes;
    }
  }
}

async function sweepUnnamed(
  ctx: { db: Db; dataDir: string; log: Logger },
  client: DbClient,
  modifiedBeforeMs: number,
  result: MediaSweep,
): Promise<void> {
  const dir = mediaDir(ctx.dataDir);
  const guarded = !(await anyMediaNamed(client));
  let batch: string[] = [];
  const flush = async () => {
    const unnamed = await unnamedHashes(client, batch);
    batch = [];
    if (guarded) {
      result.keptForEmptyDatabase += unnamed.length;
      return;
    }
    for (const sha256 of unnamed) await removeUnderLock(ctx, client, sha256, modifiedBeforeMs, result);
  };
  for await (const name of namesIn(dir)) {
    if (!CONTENT_NAME.test(name)) continue;
    // Only old regular files are asked about; the age is checked again under the lock, before the unlink.
    const stats = await lstat(path.join(dir, name)).catch(() => null);
    if (!stats?.isFile() || stats.mtimeMs >= modifiedBeforeMs) continue;
    batch.push(name);
    if (batch.length >= BATCH) await flush();
  }
  await flush();
  if (result.keptForEmptyDatabase > 0) {
    ctx.log.warn(
      { files: result.keptForEmptyDatabase },
      'media sweep: the database names no media file at all, so the old files of the media folder were kept; is it the database this data folder belongs to?',
    );
  }
}

/** "Is it still named? then unlink", under the hash's lock; a hash an upload holds now is left for the next sweep. */
async function removeUnderLock(
  ctx: { dataDir: string; log: Logger },
  client: DbClient,
  sha256: string,
  modifiedBeforeMs: number,
  result: MediaSweep,
): Promise<void> {
  await client.query('BEGIN');
  try {
    if (!(await tryLockMediaHash(client, sha256))) result.busy += 1;
    else if (!(await isMediaNamed(client, sha256))) {
      const file = path.join(mediaDir(ctx.dataDir), sha256);
      const bytes = await removeCounted(ctx, file, modifiedBeforeMs, result);
      if (bytes !== null) {
        result.unnamedFiles += 1;
        result.unnamedBytes += bytes;
      }
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/** Whether a sweep removed or failed anything an operator should see in the log. */
export function sweepWorthLogging(sweep: MediaSweep): boolean {
  return sweep.tempFiles + sweep.unnamedFiles + sweep.failed > 0;
}
