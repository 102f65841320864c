/*
 * CSV as RFC 4180 says: fields separated by commas, records ended by CRLF (also the last one), a field holding a
 * comma, a double quote, CR or LF is enclosed in double quotes with its quotes doubled. The file is UTF-8 without a
 * byte order mark and starts with a header record.
 */

export function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

export function csvRecord(fields: readonly string[]): string {
  return `${fields.map(csvField).join(',')}\r\n`;
}
