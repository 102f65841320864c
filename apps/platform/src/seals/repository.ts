import type { Db, DbClient } from '../db/pool.js';
import { LEAF_JSON_SQL, MAX_EXACT_INTEGER } from './leaf.js';

/** Advisory lock of the sealing transaction: one instance seals at a time (DESIGN.md section 6). */
export const SEAL_LOCK = 0x05ea1_0001;

export interface SealRow {
  day: string;
  prev_day: string | null;
  signed_at: Date;
  /** Canonical JSON of the body, exactly as signed. */
  body: Buffer;
  body_sha256: string;
  /** CMS SignedData, DER. */
  signature: Buffer;
  ledger_leaf_id: number;
}

const SEAL_COLUMNS = `to_char(day, 'YYYY-MM-DD') AS day, to_char(prev_day, 'YYYY-MM-DD') AS prev_day, signed_at,
  body, body_sha256, signature, ledger_leaf_id`;

export async function findSeal(db: Db | DbClient, day: string): Promise<SealRow | null> {
  const { rows } = await db.query<SealRow>(`SELECT ${SEAL_COLUMNS} FROM stats_seals WHERE day = $1`, [day]);
  return rows[0] ?? null;
}

export async function lastSeal(db: Db | DbClient): Promise<SealRow | null> {
  const { rows } = await db.query<SealRow>(
    `SELECT ${SEAL_COLUMNS} FROM stats_seals ORDER BY day DESC LIMIT 1`,
  );
  return rows[0] ?? null;
}

export async function firstSealDay(db: Db | DbClient): Promise<string | null> {
  const { rows } = await db.query<{ day: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day FROM stats_seals ORDER BY day LIMIT 1`,
  );
  return rows[0]?.day ?? null;
}

/**
 * The earliest day anything happened: the platform's first day, the first receive day of a batch, the first day
 * of a ledger leaf. Null when none is known.
 */
export async function earliestActivityDay(db: Db | DbClient): Promise<string | null> {
  const { rows } = await db.query<{ day: string | null }>(
    `SELECT to_char(least(
        (SELECT first_day FROM seal_epoch),
        (SELECT min(receive_day) FROM pop_batches),
        (SELECT min(day) FROM ledger_leaves)), 'YYYY-MM-DD') AS day`,
  );
  return rows[0]?.day ?? null;
}

/** Records the platform's first day once; later calls keep the first one. */
export async function recordFirstDay(db: Db, day: string, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO seal_epoch (singleton, first_day, recorded_at) VALUES (true, $1, $2) ON CONFLICT DO NOTHING`,
    [day, now],
  );
}

export async function insertSeal(
  client: DbClient,
  seal: Omit<SealRow, 'signed_at'> & { signed_at: Date },
): Promise<void> {
  await client.query(
    `INSERT INTO stats_seals (day, prev_day, signed_at, body, body_sha256, signature, ledger_leaf_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [
      seal.day,
      seal.prev_day,
      seal.signed_at,
      seal.body,
      seal.body_sha256,
      seal.signature,
      seal.ledger_leaf_id,
    ],
  );
}

/**
 * One page of the leaves of a day, in leaf order (receive time, then batch number) after the key ($2 received_at,
 * $3 id), at most $4 of them: the leaf hashes concatenated (32 bytes each), their play count, and the key of the
 * last one to continue from. The ORDER BY names the table's columns, so the index (receive_day, received_at, id)
 * gives the order and the key without a sort. PostgreSQL hashes the leaves while this process folds the previous
 * page into the tree: the two cores share the work.
 */
export const LEAF_PAGE_SQL = `WITH page AS MATERIALIZED (
    SELECT b.id, b.received_at, b.record_count, b.batch_seq,
           sha256(convert_to(${LEAF_JSON_SQL}, 'UTF8')) AS leaf_hash
      FROM pop_batches b
     WHERE b.receive_day = $1 AND (b.received_at, b.id) > ($2::timestamptz, $3::int8)
     ORDER BY b.received_at, b.id
     LIMIT $4)
  SELECT count(*)::int8 AS n,
         coalesce(sum(p.record_count), 0)::int8 AS plays,
         coalesce(bool_or(p.id > ${MAX_EXACT_INTEGER} OR p.batch_seq > ${MAX_EXACT_INTEGER}), false) AS unsafe,
         coalesce(string_agg(p.leaf_hash, ''::bytea ORDER BY p.received_at, p.id), ''::bytea) AS hashes,
         (SELECT l.received_at::text FROM page l ORDER BY l.received_at DESC, l.id DESC LIMIT 1) AS last_at,
         (SELECT l.id FROM page l ORDER BY l.received_at DESC, l.id DESC LIMIT 1) AS last_id
    FROM page p`;

export interface LeafPage {
  n: number;
  plays: number;
  unsafe: boolean;
  hashes: Buffer;
  /** received_at of the last leaf as PostgreSQL's text (exact to the microsecond in this session). */
  last_at: string | null;
  last_id: number | null;
}

/** Key before every leaf of a day. */
export const FIRST_PAGE_KEY = { at: '-infinity', id: 0 } as const;
