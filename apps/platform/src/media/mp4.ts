import type { FileHandle } from 'node:fs/promises';
import { MediaError } from './errors.js';

/**
 * Width, height and duration of an MP4, read from the few boxes that state them (ISO/IEC 14496-12, the ISO base media
 * file format): the movie header (mvhd), the movie extends header of a fragmented file (mvex/mehd), and of the first
 * video track (handler `vide`) its track header (tkhd), media header (mdhd) and first sample entry (stsd).
 *
 * Written here rather than read through a general parser: mp4box parsed every sample table of the movie and built a
 * list of every sample, so a 652-byte upload declaring two billion samples grew an array until V8 aborted the whole
 * process (a fatal error, not an exception). Only box headers and those fixed-size fields are read, each from its
 * position in the file, so a moov after a large mdat costs a few small reads and no count in the file decides how
 * much is allocated.
 */
export interface Mp4Facts {
  width: number;
  height: number;
  durationMs: number;
}

interface Box {
  type: string;
  /** Where its content begins (after the header) and where the box ends, in the file. */
  start: number;
  end: number;
}

// A file of more boxes than this in one container is not a movie anyone made; it is refused rather than walked.
const MAX_BOXES_PER_CONTAINER = 10_000;
const FIXED_16_16 = 65_536;
const UNKNOWN_DURATION_32 = 0xffff_ffff;

const mismatch = (message: string) => new MediaError('content_mismatch', message);

class Reader {
  constructor(
    private readonly handle: FileHandle,
    readonly size: number,
  ) {}

  /** Exactly `length` bytes at `position`, or a refusal when the file ends first. */
  async bytes(position: number, length: number): Promise<Buffer> {
    if (position + length > this.size) throw mismatch('the MP4 ends inside a box');
    const buffer = Buffer.alloc(length);
    await this.handle.read(buffer, 0, length, position);
    return buffer;
  }

  /** The boxes of a container from `start` to `end` (the file's top level: 0 to its size). */
  async *boxes(start: number, end: number): AsyncGenerator<Box> {
    let position = start;
    for (let count = 0; position + 8 <= end; count += 1) {
      if (count >= MAX_BOXES_PER_CONTAINER) throw mismatch('the MP4 holds too many boxes');
      const header = await this.bytes(position, 8);
      const type = header.toString('latin1', 4, 8);
      let size = header.readUInt32BE(0);
      let headerSize = 8;
      if (size === 1) {
        const large = (await this.bytes(position + 8, 8)).readBigUInt64BE(0);
        if (large > BigInt(Number.MAX_SAFE_INTEGER)) throw mismatch(`the MP4 box ${type} is too large`);
        size = Number(large);
        headerSize = 16;
      } else if (size === 0) {
        // "box extends to the end of the file" (section 4.2): here, to the end of its container.
        size = end - position;
      }
      if (size < headerSize || position + size > end) {
        throw mismatch(`the MP4 box ${JSON.stringify(type)} does not fit in its container`);
      }
      yield { type, start: position + headerSize, end: position + size };
      position += size;
    }
  }

  async find(container: { start: number; end: number }, type: string): Promise<Box | null> {
    for await (const box of this.boxes(container.start, container.end)) if (box.type === type) return box;
    return null;
  }

  /** The content of a small box whose fields are read, at most `length` bytes of it. */
  async content(box: Box, length: number): Promise<Buffer> {
    if (box.end - box.start < length) throw mismatch(`the MP4 box ${box.type} is too short`);
    return this.bytes(box.start, length);
  }
}

/** A 64-bit unsigned field, or null when it cannot be a safe integer. */
function uint64(buffer: Buffer, offset: number): number | null {
  const value = buffer.readBigUInt64BE(offset);
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : null;
}

/**
 * timescale and duration of a movie (mvhd) or media (mdhd) header: both full boxes with the same layout up to the
 * duration (version 1: 64-bit times and duration; version 0: 32-bit). A duration of all ones is unknown.
 */
async function timescaleAndDuration(
  reader: Reader,
  box: Box,
): Promise<{ timescale: number; duration: number | null }> {
  const version = (await reader.content(box, 1))[0];
  if (version === 1) {
    const fields = await reader.content(box, 32);
    const raw = fields.readBigUInt64BE(24);
    return {
      timescale: fields.readUInt32BE(20),
      duration: raw === 0xffff_ffff_ffff_ffffn ? null : uint64(fields, 24),
    };
  }
  const fields = await reader.content(box, 20);
  const duration = fields.readUInt32BE(16);
  return { timescale: fields.readUInt32BE(12), duration: duration === UNKNOWN_DURATION_32 ? null : duration };
}

const milliseconds = (duration: number | null, timescale: number): number | null =>
  duration !== null && duration > 0 && timescale > 0 ? Math.round((duration * 1000) / timescale) : null;

interface VideoTrack {
  width: number;
  height: number;
  /** The media's own length (mdhd), the last resort for the duration. */
  durationMs: number | null;
}

/** The track's facts if it is a video track (handler `vide`), else null. */
async function videoTrack(reader: Reader, trak: Box): Promise<VideoTrack | null> {
  const mdia = await reader.find(trak, 'mdia');
  if (!mdia) return null;
  const hdlr = await reader.find(mdia, 'hdlr');
  // hdlr: version and flags (4), pre_defined (4), handler_type (4).
  if (!hdlr || (await reader.content(hdlr, 12)).toString('latin1', 8, 12) !== 'vide') return null;
  let width = 0;
  let height = 0;
  const tkhd = await reader.find(trak, 'tkhd');
  if (tkhd) {
    // After version and flags: times, track_ID, reserved and duration (32 bytes in version 1, 20 in version 0), then
    // reserved (8), layer, alternate_group, volume, reserved (2 each), the matrix (36), width and height (16.16).
    const version = (await reader.content(tkhd, 1))[0];
    const at = version === 1 ? 4 + 32 + 16 + 36 : 4 + 20 + 16 + 36;
    const fields = await reader.content(tkhd, at + 8);
    width = fields.readUInt32BE(at) / FIXED_16_16;
    height = fields.readUInt32BE(at + 4) / FIXED_16_16;
  }
  const minf = await reader.find(mdia, 'minf');
  const stbl = minf ? await reader.find(minf, 'stbl') : null;
  const stsd = stbl ? await reader.find(stbl, 'stsd') : null;
  if (stsd && !(width > 0 && height > 0)) {
    // stsd: version and flags (4), entry_count (4), then the first VisualSampleEntry: its header (8), reserved (6),
    // data_reference_index (2), pre_defined (2), reserved (2), pre_defined (12), width (2), height (2).
    const fields = await reader.content(stsd, 8 + 36);
    if (fields.readUInt32BE(4) > 0) {
      width = fields.readUInt16BE(8 + 32);
      height = fields.readUInt16BE(8 + 34);
    }
  }
  const mdhd = await reader.find(mdia, 'mdhd');
  const media = mdhd ? await timescaleAndDuration(reader, mdhd) : null;
  return { width, height, durationMs: media ? milliseconds(media.duration, media.timescale) : null };
}

/**
 * Reads the facts of an MP4 whose first box is ftyp (checked by the caller). MediaError('content_mismatch') when the
 * file has no movie header, no video track, no width or height, or no duration.
 */
export async function readMp4Facts(handle: FileHandle, size: number): Promise<Mp4Facts> {
  const reader = new Reader(handle, size);
  const moov = await reader.find({ start: 0, end: size }, 'moov');
  if (!moov) throw mismatch('the MP4 has no readable movie header');
  const mvhd = await reader.find(moov, 'mvhd');
  if (!mvhd) throw mismatch('the MP4 has no readable movie header');
  const movie = await timescaleAndDuration(reader, mvhd);
  let video: VideoTrack | null = null;
  let fragmentDuration: number | null = null;
  for await (const box of reader.boxes(moov.start, moov.end)) {
    if (box.type === 'trak' && video === null) video = await videoTrack(reader, box);
    if (box.type === 'mvex') {
      // Fragmented files may leave the movie duration at 0 and give it in mehd, in the movie's timescale.
      const mehd = await reader.find(box, 'mehd');
      if (mehd) {
        const version = (await reader.content(mehd, 1))[0];
        const fields = await reader.content(mehd, version === 1 ? 12 : 8);
        fragmentDuration = version === 1 ? uint64(fields, 4) : fields.readUInt32BE(4);
      }
    }
  }
  if (!video) throw mismatch('the MP4 holds no video track');
  if (!(video.width > 0 && video.height > 0)) throw mismatch('the MP4 video has no width or height');
  const durationMs =
    milliseconds(movie.duration, movie.timescale) ??
    milliseconds(fragmentDuration, movie.timescale) ??
    video.durationMs;
  if (durationMs === null) throw mismatch('the MP4 does not state its duration');
  return { width: Math.round(video.width), height: Math.round(video.height), durationMs };
}
