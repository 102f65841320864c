import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { access, lstat, mkdir, rename, rm, unlink } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { MediaError } from './errors.js';

/** Media files are kept by content: `${dataDir}/media/<sha256>`; uploads land in `media/tmp` first. */
export function mediaDir(dataDir: string): string {
  return path.join(dataDir, 'media');
}

/** The name of a content file: the SHA-256 of its bytes in lowercase hex. */
export const CONTENT_NAME = /^[0-9a-f]{64}$/;
/** The name of an upload's temporary file (randomUUID). */
export const TEMP_NAME = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function mediaPath(dataDir: string, sha256: string): string {
  if (!CONTENT_NAME.test(sha256)) throw new Error(`not a SHA-256: ${sha256}`);
  return path.join(mediaDir(dataDir), sha256);
}

export function mediaTmpDir(dataDir: string): string {
  return path.join(mediaDir(dataDir), 'tmp');
}

export interface ReceivedFile {
  tempPath: string;
  sha256: string;
  size: number;
}

/** Counts and hashes the bytes that pass; past `maxBytes` it fails with MediaError('too_large'). */
class HashingLimit extends Transform {
  readonly hash = createHash('sha256');
  size = 0;
  constructor(private readonly maxBytes: number) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.byteLength;
    if (this.size > this.maxBytes) {
      done(new MediaError('too_large', `the file is over the limit of ${this.maxBytes} bytes`));
      return;
    }
    this.hash.update(chunk);
    done(null, chunk);
  }
}

/**
 * Streams an upload to a temporary file while computing its SHA-256, never holding the file in memory.
 * The temporary file is removed on any failure.
 */
export async function receiveUpload(
  body: NodeJS.ReadableStream,
  options: { dataDir: string; maxBytes: number },
): Promise<ReceivedFile> {
  const tmpDir = mediaTmpDir(options.dataDir);
  await mkdir(tmpDir, { recursive: true });
  const tempPath = path.join(tmpDir, randomUUID());
  const counter = new HashingLimit(options.maxBytes);
  const out = createWriteStream(tempPath, { mode: 0o640 });
  try {
    // Not stream.pipeline: it would destroy the request on a refusal, and with it the socket that must
    // still carry the 413 answer. On failure the body is only unpiped; the server closes the connection.
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (error: unknown) => {
        if (settled) return;
        settled = true;
        (body as NodeJS.ReadableStream).unpipe(counter);
        counter.destroy();
        out.destroy();
        reject(error);
      };
      body.on('error', fail);
      counter.on('error', fail);
      out.on('error', fail);
      out.on('finish', () => {
        settled = true;
        resolve();
      });
      body.pipe(counter).pipe(out);
    });
  } catch (error) {
    await rm(tempPath, { force: true });
    throw error;
  }
  return { tempPath, sha256: counter.hash.digest('hex'), size: counter.size };
}

/** Moves a checked upload to its content address; a file already there is the same bytes and is kept. */
export async function keepUpload(dataDir: string, file: ReceivedFile): Promise<string> {
  const target = mediaPath(dataDir, file.sha256);
  try {
    await access(target);
    await rm(file.tempPath, { force: true });
  } catch {
    await rename(file.tempPath, target);
  }
  return target;
}

export async function discardUpload(file: ReceivedFile): Promise<void> {
  await rm(file.tempPath, { force: true });
}

const isMissing = (error: unknown) => (error as NodeJS.ErrnoException).code === 'ENOENT';

/**
 * Removes `file` if it is a regular file (last written before `modifiedBeforeMs`, if given), never what a symbolic
 * link there points to (lstat, then unlink, which removes a link itself and is only reached for a regular file). Its
 * size, or null when nothing was removed: not there (another remover was first; never an error), not a regular file,
 * or written since (left alone).
 */
export async function removeRegularFile(
  file: string,
  options: { modifiedBeforeMs?: number } = {},
): Promise<number | null> {
  let size: number;
  try {
    const stats = await lstat(file);
    if (!stats.isFile()) return null;
    if (options.modifiedBeforeMs !== undefined && stats.mtimeMs >= options.modifiedBeforeMs) return null;
    size = stats.size;
  } catch (error) {
    if (isMissing(error)) return null;
    throw error;
  }
  try {
    await unlink(file);
  } catch (error) {
    if (isMissing(error)) return null;
    throw error;
  }
  return size;
}
