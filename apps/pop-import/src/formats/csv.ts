/*
 * CSV as RFC 4180 writes it and PHP's fputcsv (Xibo's exporter) produces it: comma-separated fields, a field quoted
 * when it holds a comma, a quote, a space or a line break, a quote inside doubled. Lines end in LF or CRLF; a UTF-8
 * byte order mark before the first field is dropped.
 */

export interface CsvRow {
  /** 1-based line of the file where the row begins (a quoted field may span lines). */
  line: number;
  fields: string[];
}

export class CsvError extends Error {
  constructor(
    message: string,
    readonly line: number,
  ) {
    super(message);
    this.name = 'CsvError';
  }
}

/** Every row of `text`; empty lines are skipped. A quote left open at the end is refused with its line. */
export function parseCsv(text: string): CsvRow[] {
  const rows: CsvRow[] = [];
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let line = 1;
  const length = text.length;
  while (i < length) {
    const startLine = line;
    const fields: string[] = [];
    let field = '';
    let endOfRow = false;
    let fieldStarted = false;
    while (i < length && !endOfRow) {
      const ch = text[i]!;
      if (ch === '"' && !fieldStarted) {
        // A quoted field: up to the closing quote, "" standing for one quote.
        const quotedFrom = line;
        i += 1;
        for (;;) {
          if (i >= length) throw new CsvError('a quoted field is not closed', quotedFrom);
          const c = text[i]!;
          if (c === '"') {
            if (text[i + 1] === '"') {
              field += '"';
              i += 2;
              continue;
            }
            i += 1;
            break;
          }
          if (c === '\n') line += 1;
          field += c;
          i += 1;
        }
        fieldStarted = true;
        continue;
      }
      if (ch === ',') {
        fields.push(field);
        field = '';
        fieldStarted = false;
        i += 1;
        continue;
      }
      if (ch === '\r' && text[i + 1] === '\n') {
        i += 2;
        line += 1;
        endOfRow = true;
        continue;
      }
      if (ch === '\n') {
        i += 1;
        line += 1;
        endOfRow = true;
        continue;
      }
      field += ch;
      fieldStarted = true;
      i += 1;
    }
    fields.push(field);
    if (fields.length === 1 && fields[0] === '') continue;
    rows.push({ line: startLine, fields });
  }
  return rows;
}
