import { gunzipSync } from 'node:zlib';
import { looksLikeBroadsign, readBroadsign } from './broadsign.js';
import { ExportError, type Format, type ReadResult } from './source.js';
import { looksLikeXibo, readXibo } from './xibo.js';

/** The text of an export file: Broadsign gzips playlogs older than 3 days, so a gzip file is read through. */
export function exportText(bytes: Buffer): string {
  let data = bytes;
  if (bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      data = gunzipSync(bytes);
    } catch (cause) {
      throw new ExportError('unreadable', `the gzip file cannot be read: ${(cause as Error).message}`);
    }
  }
  const text = data.toString('utf8');
  if (text.includes('\uFFFD') && !data.includes(Buffer.from('\uFFFD', 'utf8'))) {
    throw new ExportError('unreadable', 'the file is not UTF-8 text');
  }
  return text;
}

/** Which format a file is in, from its first line. */
export function detectFormat(text: string): Format {
  const firstLine = (text.replace(/^\uFEFF/, '').split(/\r?\n/, 1)[0] ?? '').trim();
  if (looksLikeXibo(firstLine)) return 'xibo';
  if (looksLikeBroadsign(firstLine)) return 'broadsign';
  throw new ExportError(
    'unknown_format',
    'the file is neither a Xibo proof-of-play export (a CSV with the header Stat Date,Type,FromDT,...) nor a ' +
      'Broadsign playlog (tab-separated, a player id first): name it with --format xibo or --format broadsign',
  );
}

export function readExport(text: string, options: { format?: Format; timeZone: string | null }): ReadResult {
  const format = options.format ?? detectFormat(text);
  return format === 'xibo' ? readXibo(text, options.timeZone) : readBroadsign(text, options.timeZone);
}
