import { deflateSync } from 'node:zlib';

/**
 * Demo and test creatives: real PNG files built byte by byte (no encoder needed), each with its own content and so
 * its own SHA-256. The picture is a diagonal gradient with a band whose position depends on `seed`.
 */
export function pngCreative(width: number, height: number, seed: number): Buffer {
  const ihdr = Buffer.concat([u32(width), u32(height), Buffer.from([8, 2, 0, 0, 0])]); // 8-bit RGB
  const rows: Buffer[] = [];
  const band = (seed * 37) % Math.max(1, height);
  for (let y = 0; y < height; y += 1) {
    const row = Buffer.alloc(1 + width * 3);
    for (let x = 0; x < width; x += 1) {
      const inBand = Math.abs(y - band) < Math.max(2, height / 10);
      row[1 + x * 3] = inBand ? 255 : (x * 255) / width;
      row[2 + x * 3] = inBand ? (seed * 53) & 0xff : (y * 255) / height;
      row[3 + x * 3] = (seed * 97 + x + y) & 0xff;
    }
    rows.push(row);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

function chunk(type: string, data: Buffer): Buffer {
  const typed = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  return Buffer.concat([u32(data.length), typed, u32(crc32(typed))]);
}

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
