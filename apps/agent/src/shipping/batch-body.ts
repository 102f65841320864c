import { POP_SCHEMA } from '@ooh/protocol';
import { rfc3339 } from '../log/records.js';

export interface BatchHeader {
  deviceId: string;
  /** Agent clock at signing time (spec: "within 300 seconds of the platform clock"). */
  ts: Date;
  batchSeq: number;
  /** Hex SHA-256 of the previous batch body; '' for the first (spec: "empty for the first"). */
  prevSha256: string;
  /** When the batch was cut (spec: "when the player cut the batch"). */
  sentAt: Date;
}

/**
 * The exact bytes of a `service.pop/1` batch. The events are spliced in as the JSON texts stored when each
 * record was logged, so rebuilding a batch from the log (for a stale_request re-sign) yields the same events
 * byte for byte; only `ts` differs.
 */
export function buildBatchBody(header: BatchHeader, eventJsons: readonly string[]): Buffer {
  return Buffer.from(batchHead(header) + eventJsons.join(',') + ']}', 'utf8');
}

/**
 * The body in two parts around the events: SQLite joins the stored event texts between them, so the body
 * is made as bytes in one piece and no large JS string exists (the heap stays flat while a long backlog
 * ships). `prefix + events.join(',') + suffix` equals {@link buildBatchBody}.
 */
export function batchBodyParts(header: BatchHeader): { prefix: string; suffix: string } {
  return { prefix: batchHead(header), suffix: ']}' };
}

/** Bytes the body takes besides its events (the events add their lengths plus one comma between each). */
export function batchOverheadBytes(header: BatchHeader): number {
  return Buffer.byteLength(batchHead(header)) + 2;
}

function batchHead(header: BatchHeader): string {
  const head = JSON.stringify({
    schema: POP_SCHEMA,
    device_id: header.deviceId,
    ts: rfc3339(header.ts),
    batch_seq: header.batchSeq,
    prev_sha256: header.prevSha256,
    sent_at: rfc3339(header.sentAt),
  });
  return `${head.slice(0, -1)},"events":[`;
}
