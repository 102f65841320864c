import type { BatchExportLine } from '@ooh/verify';
import type { Db } from '../db/pool.js';
import { type BodyEncoding, storedBody } from '../http/inflate.js';
import { RECEIVED_AT_SQL } from './leaf.js';

/**
 * Metadata rows per FETCH; bodies are then read in groups of at most BODY_GROUP_BYTES, counted as restored (a CMS
 * body may be 16 MB, kept as the gzip bytes it came in).
 */
const META_ROWS = 2000;
const BODY_GROUP_BYTES = 8 * 1024 * 1024;

/**
 * One line of the export of a sealed day: the leaf fields (DESIGN.md section 6) and the body as received, base64
 * (decompressed on the CMS channel: the bytes body_sha256 covers, restored when stored as gzip).
 * An auditor recomputes each body_sha256, the leaves, `root` and `record_count` from these lines alone: the line is
 * the one @ooh/verify's verifySealBatches (ooh-verify --batches) reads.
 */
export type ExportLine = BatchExportLine;

/**
 * The batches received on `day` in leaf order, as NDJSON lines, read through a cursor in one REPEATABLE READ
 * transaction (a consistent view however long the download takes). Memory stays bounded: metadata in pages,
 * bodies in groups of a few megabytes.
 */
export async function* exportDayBatches(db: Db, day: string): AsyncGenerator<string> {
  const client = await db.connect();
  let open = false;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    open = true;
    await client.query(
      `DECLARE export_batches NO SCROLL CURSOR FOR
       SELECT b.id, b.owner, b.batch_seq, b.body_sha256, ${RECEIVED_AT_SQL} AS received_at, coalesce(b.body_size, octet_length(b.body)) AS size
         FROM pop_batches b WHERE b.receive_day = $1 ORDER BY b.received_at, b.id`,
      [day],
    );
    for (;;) {
      const { rows } = await client.query<{
        id: number;
        owner: string;
        batch_seq: number;
        body_sha256: string;
        received_at: string;
        size: number;
      }>(`FETCH ${META_ROWS} FROM export_batches`);
      if (rows.length === 0) break;
      let start = 0;
      while (start < rows.length) {
        let end = start;
        let bytes = 0;
        do {
          bytes += rows[end]!.size;
          end += 1;
        } while (end < rows.length && bytes + rows[end]!.size <= BODY_GROUP_BYTES);
        const group = rows.slice(start, end);
        const { rows: bodies } = await client.query<{
          id: number;
          body: Buffer;
          body_encoding: BodyEncoding;
          body_size: number | null;
        }>('SELECT id, body, body_encoding, body_size FROM pop_batches WHERE id = ANY($1::int8[])', [
          group.map((r) => r.id),
        ]);
        const byId = new Map<number, Buffer>();
        for (const b of bodies) byId.set(b.id, await storedBody(b.body, b.body_encoding, b.body_size));
        let chunk = '';
        for (const r of group) {
          const line: ExportLine = {
            batch: r.id,
            owner: r.owner,
            seq: r.batch_seq,
            body_sha256: r.body_sha256,
            received_at: r.received_at,
            body: (byId.get(r.id) ?? Buffer.alloc(0)).toString('base64'),
          };
          chunk += `${JSON.stringify(line)}\n`;
        }
        yield chunk;
        start = end;
      }
    }
    await client.query('COMMIT');
    open = false;
  } finally {
    if (open) await client.query('ROLLBACK').catch(() => {});
    client.release();
  }
}
