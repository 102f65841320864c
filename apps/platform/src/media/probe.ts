import { open } from 'node:fs/promises';
import { imageSize } from 'image-size';
import { createFile, MP4BoxBuffer, type Movie } from 'mp4box';
import { MediaError } from './errors.js';

/**
 * Media types a submission may carry (issue "Approvals": images PNG/JPEG/WebP, video MP4), with the type
 * image-size reports for each image type.
 */
export const MEDIA_TYPES = {
  'image/png': { kind: 'image', detected: 'png' },
  'image/jpeg': { kind: 'image', detected: 'jpg' },
  'image/webp': { kind: 'image', detected: 'webp' },
  'video/mp4': { kind: 'video', detected: 'mp4' },
} as const;
export type MediaType = keyof typeof MEDIA_TYPES;

export const isMediaType = (value: string): value is MediaType => Object.hasOwn(MEDIA_TYPES, value);

/** What an upload answers besides its hash: pixels, and for a video its length. */
export interface MediaFacts {
  width: number;
  height: number;
  /** null for images. */
  duration_ms: number | null;
}

// Image headers sit at the start; EXIF before a JPEG's frame header stays well below this.
const IMAGE_HEAD_BYTES = 1024 * 1024;
const MP4_CHUNK_BYTES = 1024 * 1024;

/**
 * Reads width, height and (video) duration of a stored file, and checks that its content is what its
 * media type says; MediaError('content_mismatch') otherwise (a 422 for the caller).
 */
export async function probeMedia(file: string, mediaType: MediaType): Promise<MediaFacts> {
  return MEDIA_TYPES[mediaType].kind === 'image' ? probeImage(file, mediaType) : probeMp4(file);
}

async function probeImage(file: string, mediaType: MediaType): Promise<MediaFacts> {
  const handle = await open(file, 'r');
  let head: Uint8Array;
  try {
    const { size } = await handle.stat();
    head = new Uint8Array(Math.min(size, IMAGE_HEAD_BYTES));
    await handle.read(head, 0, head.byteLength, 0);
  } finally {
    await handle.close();
  }
  let result: ReturnType<typeof imageSize>;
  try {
    result = imageSize(head);
  } catch (error) {
    throw new MediaError('content_mismatch', `the file is not a readable ${mediaType} image`, {
      cause: error,
    });
  }
  const expected = MEDIA_TYPES[mediaType].detected;
  if (result.type !== expected) {
    throw new MediaError('content_mismatch', `the file is ${result.type ?? 'unknown'}, not ${mediaType}`);
  }
  if (!(result.width > 0 && result.height > 0)) {
    throw new MediaError('content_mismatch', 'the image has no width or height');
  }
  // EXIF orientations 5-8 turn the picture a quarter: players show it with width and height swapped.
  const turned = result.orientation !== undefined && result.orientation >= 5 && result.orientation <= 8;
  return {
    width: turned ? result.height : result.width,
    height: turned ? result.width : result.height,
    duration_ms: null,
  };
}

const FTYP = Buffer.from('ftyp', 'latin1');

/**
 * MP4 through mp4box: the file is fed in chunks from the positions mp4box asks for, so a file whose moov
 * box follows a large mdat is read without loading the media data.
 */
async function probeMp4(file: string): Promise<MediaFacts> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const head = Buffer.alloc(8);
    await handle.read(head, 0, 8, 0);
    if (size < 8 || !head.subarray(4, 8).equals(FTYP)) {
      throw new MediaError('content_mismatch', 'the file is not MP4: it does not begin with an ftyp box');
    }
    const mp4 = createFile();
    let movie: Movie | null = null;
    let failure: string | null = null;
    mp4.onReady = (info) => {
      movie = info;
    };
    mp4.onError = (module, message) => {
      failure = `${module}: ${message}`;
    };
    let position = 0;
    // Each appendBuffer answers where the next needed bytes start; stop once the movie header is read.
    for (
      let rounds = 0;
      movie === null && failure === null && position < size && rounds < 10_000;
      rounds += 1
    ) {
      const length = Math.min(MP4_CHUNK_BYTES, size - position);
      const chunk = new ArrayBuffer(length);
      await handle.read(new Uint8Array(chunk), 0, length, position);
      const next = mp4.appendBuffer(MP4BoxBuffer.fromArrayBuffer(chunk, position), position + length >= size);
      position = typeof next === 'number' && next > position ? next : position + length;
    }
    if (movie === null) mp4.flush();
    const info = movie as Movie | null;
    if (!info)
      throw new MediaError(
        'content_mismatch',
        `the MP4 has no readable movie header${failure ? ` (${failure})` : ''}`,
      );
    const video = info.videoTracks[0];
    if (!video) throw new MediaError('content_mismatch', 'the MP4 holds no video track');
    const width = video.track_width > 0 ? video.track_width : (video.video?.width ?? 0);
    const height = video.track_height > 0 ? video.track_height : (video.video?.height ?? 0);
    if (!(width > 0 && height > 0))
      throw new MediaError('content_mismatch', 'the MP4 video has no width or height');
    const duration = movieDurationMs(info, video);
    if (duration === null) throw new MediaError('content_mismatch', 'the MP4 does not state its duration');
    return { width: Math.round(width), height: Math.round(height), duration_ms: duration };
  } finally {
    await handle.close();
  }
}

function movieDurationMs(info: Movie, video: Movie['videoTracks'][number]): number | null {
  if (info.timescale > 0 && info.duration > 0) return Math.round((info.duration * 1000) / info.timescale);
  // Fragmented files may leave the movie duration at 0 and give it in mehd instead.
  if (info.fragment_duration && info.fragment_duration.den > 0 && info.fragment_duration.num > 0) {
    return Math.round((info.fragment_duration.num * 1000) / info.fragment_duration.den);
  }
  if (video.timescale > 0 && video.duration > 0) return Math.round((video.duration * 1000) / video.timescale);
  return null;
}
