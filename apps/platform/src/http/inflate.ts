import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { LIMITS } from '@ooh/protocol';
import { ProblemError } from './problem.js';

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
    return Promise.reject(
      tooLarge(
        `the body is ${declared} bytes on the wire; at most ${maxBytes}: send fewer records per batch`,
      ),
    );
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
        reject(tooLarge(`the body is over ${maxBytes} bytes on the wire: send fewer records per batch`));
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
  /** Who sent it (an organisation's id): its share of the inflation slots (Slots). */
  caller: string,
  limits: { maxBytes: number; maxRatio: number } = {
    maxBytes: LIMITS.cmsInflatedMaxBytes,
    maxRatio: LIMITS.cmsInflateRatioMax,
  },
): Promise<Buffer> {
  const bound = Math.min(limits.maxBytes, limits.maxRatio * wire.length);
  const release = await inflations.acquire(caller);
  try {
    return await gunzipAsync(wire, { maxOutputLength: Math.max(bound, 1) });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      // Say which limit was hit and what the sender can change (issue "The spec to the letter, second pass", 9).
      const byRatio = limits.maxRatio * wire.length < limits.maxBytes;
      throw tooLarge(
        byRatio
          ? `the body inflates to more than ${limits.maxRatio} times its ${wire.length} bytes on the wire, which ` +
              `the spec refuses ("a compressed body may not inflate to more than 20 times its size"): compress it ` +
              'less (gzip level 1) or send it uncompressed (up to 4 MB)'
          : `the body inflates beyond ${limits.maxBytes} bytes, the spec's limit after decompression: send fewer ` +
              'records per batch',
      );
    }
    throw new ProblemError('invalid_json', 'the body is not valid gzip', { cause: error });
  } finally {
    release();
  }
}

/**
 * Bounds how many bodies this process inflates at once (issue "Trust under attack", item 3): each may take 16 MB and
 * a core's worth of libuv's pool, and one event loop serves all four hosts. Beyond the slots a few wait their turn;
 * beyond those, 503 service_unavailable with Retry-After (the sender resends the same bytes: nothing was stored).
 *
 * The places are shared fairly between callers (an organisation), and none is left idle for fairness' sake:
 * - a caller alone may take every place (an operator's CMS sending many batches at once is not throttled here);
 * - when every place is taken and a caller comes that holds at least two places fewer than the caller holding the
 *   most, that caller's newest waiting body is turned away, 429 rate_limited with Retry-After (spec Errors: "rate
 *   limit exceeded; Retry-After gives seconds to wait"; nothing was stored, it resends the same bytes), and the
 *   newcomer takes its place; otherwise the newcomer gets the 503. So one operator's flood of gzip batches cannot
 *   turn every other operator away, and the places end up shared about evenly between those who want them;
 * - a freed slot goes to the waiting caller that inflates the fewest bodies at that moment (the oldest among
 *   equals), so a newcomer does not wait behind another caller's queue.
 */
export class Slots {
  private used = 0;
  private readonly waiting: { caller: string; start: () => void; refuse: (error: Error) => void }[] = [];
  /** Per caller: the slots it inflates in and the places it holds (inflating + waiting). */
  private readonly callers = new Map<string, { inflating: number; places: number }>();

  constructor(
    readonly size: number,
    readonly maxWaiting: number,
  ) {}

  /** Places `caller` holds now (inflating and waiting). */
  placesOf(caller: string): number {
    return this.callers.get(caller)?.places ?? 0;
  }

  acquire(caller: string): Promise<() => void> {
    const mine = this.callers.get(caller) ?? { inflating: 0, places: 0 };
    if (this.used < this.size) {
      this.used += 1;
      mine.inflating += 1;
      mine.places += 1;
      this.callers.set(caller, mine);
      return Promise.resolve(this.releaser(caller));
    }
    if (this.waiting.length >= this.maxWaiting && !this.makeRoomFor(mine.places)) {
      return Promise.reject(
        new ProblemError(
          'service_unavailable',
          'too many compressed bodies are being inflated; send it again',
          {
            headers: { 'retry-after': '1' },
          },
        ),
      );
    }
    mine.places += 1;
    this.callers.set(caller, mine);
    return new Promise((resolve, reject) =>
      this.waiting.push({ caller, start: () => resolve(this.releaser(caller)), refuse: reject }),
    );
  }

  /**
   * Every place is taken: turns away the newest waiting body of the caller holding the most places, if it holds at
   * least two more than a caller holding `places` (so that callers with about equal shares do not push each other
   * out). True when a place was freed.
   */
  private makeRoomFor(places: number): boolean {
    let heaviest: string | null = null;
    let most = -1;
    for (const entry of this.waiting) {
      const held = this.callers.get(entry.caller)!.places;
      if (held > most) {
        heaviest = entry.caller;
        most = held;
      }
    }
    if (heaviest === null || most < places + 2) return false;
    let newest = -1;
    for (const [index, entry] of this.waiting.entries()) if (entry.caller === heaviest) newest = index;
    const [entry] = this.waiting.splice(newest, 1);
    const theirs = this.callers.get(heaviest)!;
    theirs.places -= 1;
    entry!.refuse(
      new ProblemError(
        'rate_limited',
        `another organisation needs a place: this organisation holds ${most} of the ${this.size + this.maxWaiting} ` +
          "places of this server's for compressed bodies; send it again in a moment",
        { headers: { 'retry-after': '1' } },
      ),
    );
    return true;
  }

  private releaser(caller: string): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const mine = this.callers.get(caller)!;
      mine.inflating -= 1;
      mine.places -= 1;
      if (mine.places === 0) this.callers.delete(caller);
      const next = this.fairestWaiting();
      if (next === null) {
        this.used -= 1;
        return;
      }
      const [entry] = this.waiting.splice(next, 1);
      // Its place is already counted; the slot passes to it.
      this.callers.get(entry!.caller)!.inflating += 1;
      entry!.start();
    };
  }

  /** The index of the waiting entry whose caller inflates the fewest bodies now, the oldest among equals. */
  private fairestWaiting(): number | null {
    let best: number | null = null;
    let bestInflating = Number.POSITIVE_INFINITY;
    for (const [index, entry] of this.waiting.entries()) {
      const inflating = this.callers.get(entry.caller)!.inflating;
      if (inflating < bestInflating) {
        best = index;
        bestInflating = inflating;
      }
    }
    return best;
  }
}

/** Two at once per process (a worker per core: PLATFORM_WORKERS), eight waiting, shared fairly (Slots). */
export const inflations = new Slots(2, 8);

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
