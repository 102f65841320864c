import { deflateSync } from 'node:zlib';

// Small but well-formed media files built byte by byte, so tests need no encoder on the machine.
// `seed` changes a few content bytes: same dimensions, another SHA-256.

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};
const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n & 0xffff);
  return b;
};

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const byte of bytes) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A real PNG (8-bit greyscale), decodable by any viewer. */
export function png(width: number, height: number, seed = 0): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const typed = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    return Buffer.concat([u32(data.length), typed, u32(crc32(typed))]);
  };
  const ihdr = Buffer.concat([u32(width), u32(height), Buffer.from([8, 0, 0, 0, 0])]);
  const rows: Buffer[] = [];
  for (let y = 0; y < height; y += 1) {
    const row = Buffer.alloc(1 + width);
    for (let x = 0; x < width; x += 1) row[1 + x] = (x + y + seed) & 0xff;
    rows.push(row);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** JPEG headers: SOI, APP0 (JFIF, with the seed in its thumbnail-less padding), SOF0, EOI. */
export function jpeg(width: number, height: number, seed = 0): Buffer {
  const app0 = Buffer.concat([
    Buffer.from('JFIF\0', 'latin1'),
    Buffer.from([1, 2, 0]),
    u16(72),
    u16(72),
    Buffer.from([0, 0]),
  ]);
  const com = Buffer.from(`seed ${seed}`, 'latin1');
  const sof0 = Buffer.concat([Buffer.from([8]), u16(height), u16(width), Buffer.from([1, 1, 0x11, 0])]);
  const segment = (marker: number, data: Buffer) =>
    Buffer.concat([Buffer.from([0xff, marker]), u16(data.length + 2), data]);
  return Buffer.concat([
    Buffer.from([0xff, 0xd8]),
    segment(0xe0, app0),
    segment(0xfe, com),
    segment(0xc0, sof0),
    Buffer.from([0xff, 0xd9]),
  ]);
}

/** A lossless WebP (VP8L) header with its dimensions; the seed goes into trailing payload bytes. */
export function webp(width: number, height: number, seed = 0): Buffer {
  const bits = (width - 1) | ((height - 1) << 14);
  const vp8l = Buffer.concat([
    Buffer.from([0x2f]),
    Buffer.from([bits & 0xff, (bits >> 8) & 0xff, (bits >> 16) & 0xff, (bits >> 24) & 0x0f]),
    Buffer.from([seed & 0xff, 0, 0]),
  ]);
  const padded = vp8l.length % 2 === 0 ? vp8l : Buffer.concat([vp8l, Buffer.from([0])]);
  const le32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    return b;
  };
  const chunkBody = Buffer.concat([Buffer.from('VP8L', 'latin1'), le32(vp8l.length), padded]);
  return Buffer.concat([
    Buffer.from('RIFF', 'latin1'),
    le32(4 + chunkBody.length),
    Buffer.from('WEBP', 'latin1'),
    chunkBody,
  ]);
}

const box = (type: string, ...payload: Buffer[]) => {
  const body = Buffer.concat(payload);
  return Buffer.concat([u32(8 + body.length), Buffer.from(type, 'latin1'), body]);
};
const fullBox = (type: string, version: number, flags: number, ...payload: Buffer[]) =>
  box(type, Buffer.from([version, (flags >> 16) & 0xff, (flags >> 8) & 0xff, flags & 0xff]), ...payload);
const MATRIX = Buffer.concat([
  u32(0x00010000),
  u32(0),
  u32(0),
  u32(0),
  u32(0x00010000),
  u32(0),
  u32(0),
  u32(0),
  u32(0x40000000),
]);

/**
 * An MP4 with one H.264 video track of `durationMs` (timescale 1000, one sample per second), its moov
 * before or after the mdat. The samples are not decodable video, only well-formed boxes.
 */
export function mp4(
  width: number,
  height: number,
  durationMs: number,
  options: { seed?: number; moovLast?: boolean; mdatBytes?: number } = {},
): Buffer {
  const samples = Math.max(1, Math.ceil(durationMs / 1000));
  const sampleSize = Math.max(4, Math.floor((options.mdatBytes ?? samples * 4) / samples));
  const mdatPayload = Buffer.alloc(samples * sampleSize, (options.seed ?? 0) & 0xff);
  const ftyp = box(
    'ftyp',
    Buffer.from('isom', 'latin1'),
    u32(512),
    Buffer.from('isomiso2avc1mp41', 'latin1'),
  );
  const build = (chunkOffset: number) => {
    const mvhd = fullBox(
      'mvhd',
      0,
      0,
      u32(0),
      u32(0),
      u32(1000),
      u32(durationMs),
      u32(0x00010000),
      u16(0x0100),
      Buffer.alloc(10),
      MATRIX,
      Buffer.alloc(24),
      u32(2),
    );
    const tkhd = fullBox(
      'tkhd',
      0,
      3,
      u32(0),
      u32(0),
      u32(1),
      u32(0),
      u32(durationMs),
      Buffer.alloc(8),
      u16(0),
      u16(0),
      u16(0),
      u16(0),
      MATRIX,
      u32(width << 16),
      u32(height << 16),
    );
    const mdhd = fullBox('mdhd', 0, 0, u32(0), u32(0), u32(1000), u32(durationMs), u16(0x55c4), u16(0));
    const hdlr = fullBox(
      'hdlr',
      0,
      0,
      u32(0),
      Buffer.from('vide', 'latin1'),
      Buffer.alloc(12),
      Buffer.from('VideoHandler\0', 'latin1'),
    );
    const sps = Buffer.from([0x67, 0x42, 0x00, 0x1e, 0x95, 0xa8, 0x14, 0x01, 0x6e, 0x40]);
    const pps = Buffer.from([0x68, 0xce, 0x3c, 0x80]);
    const avcC = box(
      'avcC',
      Buffer.from([1, 0x42, 0x00, 0x1e, 0xff, 0xe1]),
      u16(sps.length),
      sps,
      Buffer.from([1]),
      u16(pps.length),
      pps,
    );
    const avc1 = box(
      'avc1',
      Buffer.alloc(6),
      u16(1),
      u16(0),
      u16(0),
      Buffer.alloc(12),
      u16(width),
      u16(height),
      u32(0x00480000),
      u32(0x00480000),
      u32(0),
      u16(1),
      Buffer.alloc(32),
      u16(0x0018),
      u16(0xffff),
      avcC,
    );
    const stbl = box(
      'stbl',
      fullBox('stsd', 0, 0, u32(1), avc1),
      fullBox('stts', 0, 0, u32(1), u32(samples), u32(Math.floor(durationMs / samples))),
      fullBox('stsc', 0, 0, u32(1), u32(1), u32(samples), u32(1)),
      fullBox('stsz', 0, 0, u32(sampleSize), u32(samples)),
      fullBox('stco', 0, 0, u32(1), u32(chunkOffset)),
    );
    const minf = box(
      'minf',
      fullBox('vmhd', 0, 1, u16(0), Buffer.alloc(6)),
      box('dinf', fullBox('dref', 0, 0, u32(1), fullBox('url ', 0, 1))),
      stbl,
    );
    return box('moov', mvhd, box('trak', tkhd, box('mdia', mdhd, hdlr, minf)));
  };
  const mdat = box('mdat', mdatPayload);
  if (options.moovLast) {
    return Buffer.concat([ftyp, mdat, build(ftyp.length + 8)]);
  }
  const moovLength = build(0).length;
  return Buffer.concat([ftyp, build(ftyp.length + moovLength + 8), mdat]);
}
