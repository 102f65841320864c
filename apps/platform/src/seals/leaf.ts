/**
 * A batch leaf of a stats seal (DESIGN.md section 6): `{"batch": <platform batch number>, "owner":
 * "device:<uuid>" | "source:<uuid>", "seq": <batch_seq>, "body_sha256": "<hex>", "received_at": "<UTC, 6 decimals,
 * Z>"}`. spec body.root: "A leaf is the SHA-256 of the canonical JSON of: batch number, its owner, its sequence
 * number, the SHA-256 of its body, its receive time (UTC, microseconds)".
 */
export interface SealLeaf {
  batch: number;
  owner: string;
  seq: number;
  body_sha256: string;
  received_at: string;
}

/**
 * received_at as the leaf carries it, formatted by PostgreSQL (a JS Date has only milliseconds):
 * '2026-11-20T04:00:00.123456Z'. For a query on `pop_batches b`.
 */
export const RECEIVED_AT_SQL = `to_char(b.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * The leaf's canonical JSON (RFC 8785) written by PostgreSQL, for a query on `pop_batches b`: members in RFC 8785
 * order (batch, body_sha256, owner, received_at, seq). Exact without any escaping because the table's CHECK
 * constraints (migration 020) allow only [0-9a-f:-] in owner and hex in body_sha256; integers are written as
 * PostgreSQL writes an int8, which is ECMAScript's Number-to-String for every integer below 2^53 (the sealing query
 * refuses larger ones). A test proves the text equals canonicalize() for random rows.
 */
export const LEAF_JSON_SQL = `'{"batch":' || b.id || ',"body_sha256":"' || b.body_sha256 || '","owner":"' || b.owner
  || '","received_at":"' || ${RECEIVED_AT_SQL} || '","seq":' || b.batch_seq || '}'`;

/** The largest integer canonical JSON may carry (DESIGN.md section 4: "Integers beyond 2^53 never appear"). */
export const MAX_EXACT_INTEGER = 9_007_199_254_740_991;
