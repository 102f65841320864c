import { open } from 'node:fs/promises';
import { imageSize } from 'image-size';
import { MediaError } from './errors.js';
import { readMp4Facts } from './mp4.js';

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

// PNG and WebP state their size at the start; a JPEG's segments are walked beyond this when needed (jpegHead).
const IMAGE_HEAD_BYTES = 1024 * 1024;

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
    // A JPEG's metadata segments (ICC profiles, XMP, Photoshop's) may push its frame header past any fixed head:
    // its segments are walked in the file instead, and image-size reads what it needs of them.
    if (mediaType === 'image/jpeg' && head[0] === 0xff && head[1] === 0xd8) {
      head = (await jpegHead(handle, size)) ?? head;
    }
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

// Start-of-frame markers (ITU T.81 table B.1): SOF0-SOF15 but DHT (C4), JPG (C8) and DAC (CC).
const isStartOfFrame = (marker: number) =>
  marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
const EXIF_HEADER = Buffer.from('Exif\0\0', 'latin1');
const SOI_AND_EMPTY_COMMENT = Buffer.from([0xff, 0xd8, 0xff, 0xfe, 0x00, 0x02]);
// Far more than any real file's metadata segments (an ICC profile takes at most 255), few enough that a file made of
// empty segments costs a few thousand 4-byte reads; a file of more is not walked to its end.
const MAX_JPEG_SEGMENTS = 4096;

/**
 * The parts of a JPEG that say its size, wherever they are in the file: SOI, an empty comment, its first EXIF
 * segment (orientation) and its frame header, then EOI. Reads only the 4-byte segment headers on the way. null when the segments do not
 * lead to a frame header (image-size then judges the plain head, and refuses it).
 */
async function jpegHead(handle: Awaited<ReturnType<typeof open>>, size: number): Promise<Uint8Array | null> {
  const header = Buffer.alloc(4);
  let exif: Buffer | null = null;
  let position = 2;
  for (let segments = 0; segments < MAX_JPEG_SEGMENTS && position + 4 <= size; segments += 1) {
    await handle.read(header, 0, 4, position);
    if (header[0] !== 0xff) return null;
    const marker = header[1]!;
    // A marker may be preceded by fill bytes 0xFF (T.81 B.1.1.2).
    if (marker === 0xff) {
      position += 1;
      continue;
    }
    // A scan or the end before any frame header: not an image whose size can be read.
    if (marker === 0xda || marker === 0xd9) return null;
    const length = header.readUInt16BE(2);
    if (length < 2 || position + 2 + length > size) return null;
    if (isStartOfFrame(marker) || (marker === 0xe1 && exif === null)) {
      const segment = Buffer.alloc(2 + length);
      await handle.read(segment, 0, segment.byteLength, position);
      if (isStartOfFrame(marker)) {
        // image-size reads the marker after each segment and never the first one's: an empty comment leads.
        return Buffer.concat([
          SOI_AND_EMPTY_COMMENT,
          ...(exif ? [exif] : []),
          segment,
          Buffer.from([0xff, 0xd9]),
        ]);
      }
      if (segment.subarray(4, 10).equals(EXIF_HEADER)) exif = segment;
    }
    position += 2 + length;
  }
  return null;
}

const FTYP = Buffer.from('ftyp', 'latin1');

/** An MP4: its first box is ftyp; the facts are read from its boxes (mp4.ts). */
async function probeMp4(file: string): Promise<MediaFacts> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const head = Buffer.alloc(8);
    await handle.read(head, 0, 8, 0);
    if (size < 8 || !head.subarray(4, 8).equals(FTYP)) {
      throw new MediaError('content_mismatch', 'the file is not MP4: it does not begin with an ftyp box');
    }
    const facts = await readMp4Facts(handle, size);
    return { width: facts.width, height: facts.height, duration_ms: facts.durationMs };
  } finally {
    await handle.close();
  }
}
