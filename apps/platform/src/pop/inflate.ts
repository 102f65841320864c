import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { LIMITS } from '@ooh/protocol';
import { ProblemError } from '../http/problem.js';

const gunzipAsync = promisify(gunzip);

export type BodyEncoding = 'identity' | 'gzip';

/**
 * spec CMS headers: "Content-Encoding (optional; gzip only)"; Errors: "415 unsupported_media_type: ... an
 * encoding other than gzip (CMS channel)". `identity` is the absence of an encoding.
 */
export function bodyEncoding(header: string | string[] | undefined): BodyEncoding {
  if (header === undefined) return 'identity';
  const value = (Array.isArray(header) ? header.join(',') : header).trim().toLowerCase();
  if (value === '' || value === 'identity') return 'identity';
  if (value === 'gzip') return 'gzip';
  throw new ProblemError(
    'unsupported_media_type',
    `Content-Encoding ${value} is not accepted; send gzip or nothing`,
  );
}

const tooLarge = (detail: string) => new ProblemError('body_too_large', detail);

/**
 * The bytes on the wire, refused with 413 body_too_large as soon as they pass `maxBytes` (before reading at
 * all when Content-Length already says so).
 */
export function readWire(
  stream: Readable,
  contentLength: string | undefined,
  maxBytes: number,
): Promise<Buffer> {
  const declared = contentLength === undefined ? Number.NaN : Number(contentLength);
  if (declared > maxBytes) {
    return Promise.reject(tooLarge(`the body is ${declared} bytes on the wire; at most ${maxBytes}`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const cleanup = () => {
      stream.removeListener('data', onData);
      stream.removeListener('end', onEnd);
      stream.removeListener('error', onError);
    };
    const onData = (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      length += bytes.length;
      if (length > maxBytes) {
        cleanup();
        stream.pause();
        reject(tooLarge(`the body is over ${maxBytes} bytes on the wire`));
        return;
      }
      chunks.push(bytes);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(new ProblemError('invalid_json', 'the body could not be read', { cause: error }));
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.resume();
  });
}

/**
 * Decompresses a gzip body within the spec's limits: "16 MB after decompression; a compressed body may not
 * inflate to more than 20 times its size". zlib stops as soon as the output passes the bound (maxOutputLength
 * is checked chunk by chunk), so a bomb is never inflated into memory; the work runs on libuv's pool.
 */
export async function inflateBounded(
  wire: Buffer,
  limits: { maxBytes: number; maxRatio: number } = {
    maxBytes: LIMITS.cmsInflatedMaxBytes,
    maxRatio: LIMITS.cmsInflateRatioMax,
  },
): Promise<Buffer> {
  const bound = Math.min(limits.maxBytes, limits.maxRatio * wire.length);
  try {
    return await gunzipAsync(wire, { maxOutputLength: Math.max(bound, 1) });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw tooLarge(
        `the body inflates beyond ${bound} bytes (at most ${limits.maxBytes} bytes and ${limits.maxRatio} times ` +
          `its ${wire.length} bytes on the wire)`,
      );
    }
    throw new ProblemError('invalid_json', 'the body is not valid gzip', { cause: error });
  }
}

/**
 * The exact bytes of a stored batch body (migration 062): a body kept as the gzip bytes it came in is restored
 * by gunzip, and must come back at its recorded length.
 */
export async function storedBody(
  stored: Buffer,
  encoding: BodyEncoding,
  size: number | null,
): Promise<Buffer> {
  if (encoding === 'identity') return stored;
  const bytes = await gunzipAsync(stored, { maxOutputLength: Math.max(size ?? 0, 1) });
  if (bytes.length !== size) {
    throw new Error(`a stored gzip body restored to ${bytes.length} bytes instead of ${size}`);
  }
  return bytes;
}
