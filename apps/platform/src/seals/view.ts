import { formatAlmaty, type StatsSeal, type StatsSealBody } from '@ooh/protocol';
import type { Db } from '../db/pool.js';
import { ledgerInfoOfLeaf } from '../ledger/digest.js';
import type { SealRow } from './repository.js';

/**
 * spec StatsSeal: day, signed_at (Asia/Almaty time), body (the signed canonical JSON, parsed back), signature
 * (base64 of the CMS DER), ledger (null until the ledger day that holds the seal has been digested).
 */
export async function sealView(db: Db, row: SealRow): Promise<StatsSeal> {
  return {
    day: row.day,
    signed_at: formatAlmaty(row.signed_at),
    body: JSON.parse(row.body.toString('utf8')) as StatsSealBody,
    signature: row.signature.toString('base64'),
    ledger: await ledgerInfoOfLeaf(db, row.ledger_leaf_id),
  };
}
