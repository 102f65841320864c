import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sha256Hex } from '@ooh/crypto';
import { almatyDate } from '@ooh/protocol';
import { type Db, withTransaction } from '../../src/db/pool.js';
import { recordLedgerLeaf } from '../../src/ledger/leaves.js';
import { runSealScheduler } from '../../src/seals/index.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/** A platform on its own database and its own data folder (its own authority). */
export async function startSealPlatform(now: Date): Promise<TestPlatform & { dataDir: string }> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-seals-'));
  const p = await startTestPlatform({ now, dataDir });
  return {
    ...p,
    dataDir,
    close: async () => {
      await p.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface BatchInput {
  /** Explicit platform batch number (golden vector); otherwise the sequence gives one. */
  id?: number;
  owner: string;
  batchSeq: number;
  /** The exact body bytes. */
  body: string;
  /** UTC with microseconds, e.g. '2026-11-19T10:00:00.123456Z'. */
  receivedAt: string;
  channel?: 'agent' | 'cert' | 'cms' | 'legacy';
}

/** Elements of kind play in a body (DESIGN.md section 6), as proof of play counts them. */
export function playsIn(body: string): number {
  const parsed = JSON.parse(body) as { events?: unknown[]; records?: unknown[] };
  const list = parsed.events ?? parsed.records ?? [];
  return list.filter((r) => (r as { kind?: unknown })?.kind === 'play').length;
}

/** Inserts an accepted batch as proof of play stores it (migration 020). Returns its batch number. */
export async function insertBatch(db: Db, batch: BatchInput): Promise<number> {
  const receiveDay = almatyDate(new Date(batch.receivedAt));
  const channel = batch.channel ?? (batch.owner.startsWith('source:') ? 'cms' : 'agent');
  const { rows } = await db.query<{ id: number }>(
    `INSERT INTO pop_batches (${batch.id === undefined ? '' : 'id, '}owner, batch_seq, channel, body, body_sha256,
       received_at, receive_day, record_count, answer)
     VALUES (${batch.id === undefined ? '' : '$9, '}$1, $2, $3, $4, $5, $6::timestamptz, $7, $8, '{}'::jsonb)
     RETURNING id`,
    [
      batch.owner,
      batch.batchSeq,
      channel,
      Buffer.from(batch.body, 'utf8'),
      sha256Hex(batch.body),
      batch.receivedAt,
      receiveDay,
      playsIn(batch.body),
      ...(batch.id === undefined ? [] : [batch.id]),
    ],
  );
  return rows[0]!.id;
}

/** A service.pop/1 agent batch body with `plays` plays and one reject. */
export function agentBody(deviceId: string, batchSeq: number, plays: number, firstSeq = 1): string {
  const events: unknown[] = [];
  for (let i = 0; i < plays; i += 1) {
    events.push({
      kind: 'play',
      seq: firstSeq + i,
      play_id: `p${batchSeq}-${i}`,
      approval_number: 'APR-2026-000001',
      media_sha256: 'a'.repeat(64),
      start: '2026-11-19T10:00:00+05:00',
      end: '2026-11-19T10:00:15+05:00',
      duration_ms: 15000,
    });
  }
  events.push({
    kind: 'reject',
    seq: firstSeq + plays,
    at: '2026-11-19T10:01:00+05:00',
    code: 'HASH_MISMATCH',
  });
  return JSON.stringify({
    schema: 'service.pop/1',
    device_id: deviceId,
    ts: '2026-11-19T10:02:00+05:00',
    batch_seq: batchSeq,
    events,
  });
}

/** A service.pop/1 CMS batch body with `plays` plays. */
export function cmsBody(sourceId: string, batchSeq: number, plays: number): string {
  const records: unknown[] = [];
  for (let i = 0; i < plays; i += 1) {
    records.push({
      kind: 'play',
      seq: i + 1,
      player: 'screen-1',
      approval_number: 'APR-2026-000001',
      start: '2026-11-19T11:00:00+05:00',
      end: '2026-11-19T11:00:10+05:00',
      duration_ms: 10000,
    });
  }
  return JSON.stringify({ schema: 'service.pop/1', source_id: sourceId, batch_seq: batchSeq, records });
}

export const newDevice = (): string => `device:${randomUUID()}`;
export const newSource = (): string => `source:${randomUUID()}`;

/**
 * An approval leaf at 06:00 UTC of `day` (a block holds approvals beside seals), then the seal scheduler at 20:00 UTC,
 * 01:00 Almaty the next day: `day` is sealed and its ledger block digested.
 */
export async function approveThenSealDay(p: TestPlatform, day: string, approvalSeq: number): Promise<void> {
  p.clock.set(new Date(`${day}T06:00:00Z`));
  const now = p.clock.now();
  await withTransaction(p.database.db, (client) =>
    recordLedgerLeaf(
      client,
      {
        kind: 'approval',
        approvalNumber: `APR-2026-${String(approvalSeq).padStart(6, '0')}`,
        manifestSha256: 'c'.repeat(64),
        signedAt: now,
      },
      now,
    ),
  );
  p.clock.set(new Date(`${day}T20:00:00Z`));
  await runSealScheduler(p.ctx);
}
