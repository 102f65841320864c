import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, open, readdir } from 'node:fs/promises';
import path from 'node:path';

/** What a copy wrote: the bytes read from the source, as written and hashed in one pass. */
export interface CopiedFile {
  size: number;
  sha256: string;
}

/**
 * Copies `source` to a new file `target` (never over one), mode `mode`, hashing the bytes as they are written, and
 * fsyncs it. Null when the source is gone (a relation dropped, a media file swept while the backup ran): PostgreSQL's
 * docs say such a file is no error, WAL replay recreates what the backup needs.
 */
export async function copyFileHashed(
  source: string,
  target: string,
  mode: number,
): Promise<CopiedFile | null> {
  let input: ReturnType<typeof createReadStream>;
  try {
    const handle = await open(source, 'r');
    input = handle.createReadStream();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const output = await open(target, 'wx', mode);
  const hash = createHash('sha256');
  let size = 0;
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      hash.update(chunk);
      size += chunk.length;
      let written = 0;
      while (written < chunk.length) {
        const { bytesWritten } = await output.write(chunk, written, chunk.length - written);
        written += bytesWritten;
      }
    }
    await output.sync();
  } finally {
    input.destroy();
    await output.close();
  }
  // The mode asked for, whatever the umask took away.
  await chmod(target, mode);
  return { size, sha256: hash.digest('hex') };
}

/** SHA-256 and size of a file's bytes. */
export async function hashFile(file: string): Promise<CopiedFile> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    size += chunk.length;
  }
  return { size, sha256: hash.digest('hex') };
}

/** fsync of a folder: the names written into it survive a power cut. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Every entry under `root`, depth first, as paths relative to it with '/' separators; links are not followed. */
export async function listTree(
  root: string,
  skip: (relative: string, isDirectory: boolean) => boolean = () => false,
): Promise<{ files: string[]; directories: string[]; others: string[] }> {
  const files: string[] = [];
  const directories: string[] = [];
  const others: string[] = [];
  const walk = async (relative: string) => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await readdir(path.join(root, relative), { withFileTypes: true });
    } catch (error) {
      // A folder removed under us (a temporary one): nothing of it is needed.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && relative !== '') return;
      throw error;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const name = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (skip(name, entry.isDirectory())) continue;
      if (entry.isDirectory()) {
        directories.push(name);
        await walk(name);
      } else if (entry.isFile()) {
        files.push(name);
      } else {
        others.push(name);
      }
    }
  };
  await walk('');
  return { files, directories, others };
}

/** Whether `inner` is `outer` or lies inside it. */
export function isInside(inner: string, outer: string): boolean {
  const relative = path.relative(outer, inner);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}
