import { almatyDate, ApprovalManifest, formatAlmaty, isCalendarDate } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import type { Db } from '../db/pool.js';
import type { Feature } from '../context.js';
import { ProblemError } from '../http/problem.js';
import { TextBody } from '../http/responses.js';
import {
  DEFAULT_PUBLIC_RATE_LIMIT,
  type PublicRateLimit,
  PublicRateLimiter,
} from '../http/public-rate-limit.js';
import { cosignaturesOf, findCheckpoint, newestCheckpoint, publishedNote } from './checkpoint.js';
import { blockLeaves, ledgerInfoOfLeaf } from './digest.js';
import { loadLedgerKey, ledgerVkey } from './key.js';
import { type BlockRow, findBlock, lastBlock, leafIdsOfApproval } from './repository.js';
import {
  type ApprovalPublicState,
  ApprovalPublicStatus,
  LedgerBlock,
  LedgerBlockHead,
  LedgerWitnesses,
} from './schema.js';
import { ledgerSettings } from './settings.js';
import { blockTimestampField } from './timestamp.js';
import { startWitnessJob, type WitnessTransport, witnessRows } from './witnesses.js';

export interface LedgerOptions {
  /** Public rate limit of the ledger routes, per client address and instance. */
  rateLimit?: PublicRateLimit;
  /** Interval of the witness job; null: no job (tests that drive it themselves). */
  witnessIntervalMs?: number | null;
  transport?: WitnessTransport;
}

/** A checkpoint size in a path: a whole number from 1, else nothing is there. */
function sizeParam(text: string): number | null {
  return /^[1-9][0-9]{0,8}$/.test(text) ? Number(text) : null;
}

/** c2sp.org/tlog-checkpoint: a signed note; served as text, as tlog-tiles serves its checkpoint. */
const NOTE_TYPE = 'text/plain; charset=utf-8';
const CheckpointNote = TextBody('text/plain');

function headOf(block: BlockRow): LedgerBlockHead {
  return {
    day: block.day,
    block_height: block.block_height,
    status: block.status,
    leaf_count: block.leaf_count,
    merkle_root: block.merkle_root,
    anchor_sha256: block.anchor_sha256,
    digest: block.digest,
    digested_at: formatAlmaty(block.digested_at),
    anchored_by: block.anchored_by ?? null,
  };
}

interface ApprovalPublicRow {
  number: string;
  media_sha256: string;
  valid_from: string;
  valid_until: string;
  issued_at: Date;
  revoked_at: Date | null;
  manifest_sha256: string | null;
  envelope: string | null;
  structures: string[];
}

async function findApprovalPublic(db: Db, number: string): Promise<ApprovalPublicRow | null> {
  const { rows } = await db.query<ApprovalPublicRow>(
    `SELECT a.number, a.media_sha256, to_char(a.valid_from, 'YYYY-MM-DD') AS valid_from,
            to_char(a.valid_until, 'YYYY-MM-DD') AS valid_until, a.issued_at, a.revoked_at, a.manifest_sha256,
            a.envelope,
            ARRAY(SELECT st.code FROM approval_structures aps JOIN structures st ON st.id = aps.structure_id
                   WHERE aps.approval_id = a.id ORDER BY st.code) AS structures
       FROM approvals a WHERE a.number = $1`,
    [number],
  );
  return rows[0] ?? null;
}

/** The manifest inside a stored envelope, when it is one. */
function manifestOf(envelope: string | null): ApprovalManifest | null {
  if (envelope === null) return null;
  try {
    const parsed: unknown = JSON.parse(envelope);
    const body = (parsed as { body?: unknown } | null)?.body;
    return Value.Check(ApprovalManifest, body) ? body : null;
  } catch {
    return null;
  }
}

function approvalState(row: ApprovalPublicRow, now: Date): ApprovalPublicState {
  if (row.revoked_at && row.revoked_at.getTime() <= now.getTime()) return 'revoked';
  // Approval validity is in Almaty calendar days, inclusive (DESIGN.md sections 4 and 8).
  const today = almatyDate(now);
  if (today < row.valid_from) return 'not_yet_valid';
  if (today > row.valid_until) return 'expired';
  return 'valid';
}

/**
 * The public ledger (issue "Daily stats seals, the public ledger, and a verifier anyone can run"; DESIGN.md
 * section 6): digested blocks with their leaves, the head, and the public status of an approval with its proofs.
 */
export function createLedgerFeature(options: LedgerOptions = {}): Feature {
  return {
    name: 'ledger',
    verify(app, ctx) {
      const limiter = new PublicRateLimiter(options.rateLimit ?? DEFAULT_PUBLIC_RATE_LIMIT);

      app.get(
        '/v1/ledger/head',
        { schema: { response: { 200: LedgerBlockHead } } },
        async (request, reply) => {
          limiter.take(request.ip);
          const block = await lastBlock(ctx.db);
          if (!block) throw new ProblemError('not_found', 'no ledger block has been digested yet');
          reply.header('cache-control', 'public, max-age=60');
          return headOf(block);
        },
      );

      app.get<{ Params: { day: string } }>(
        '/v1/ledger/blocks/:day',
        { schema: { response: { 200: LedgerBlock } } },
        async (request, reply) => {
          limiter.take(request.ip);
          const day = request.params.day;
          if (!isCalendarDate(day))
            throw new ProblemError('not_found', `no ledger block ${day}: not a calendar day`);
          const block = await findBlock(ctx.db, day);
          if (!block) throw new ProblemError('not_found', `the ledger block of ${day} is not digested`);
          const { leaves } = await blockLeaves(ctx.db, day);
          const timestamp = await blockTimestampField(ctx, day);
          reply.header('cache-control', 'public, max-age=3600');
          return { ...headOf(block), leaves, ...(timestamp ? { timestamp } : {}) };
        },
      );

      // Issue 23: the newest checkpoint of the ledger head with every cosignature collected so far.
      app.get(
        '/v1/ledger/checkpoint',
        { schema: { response: { 200: CheckpointNote } } },
        async (request, reply) => {
          limiter.take(request.ip);
          const checkpoint = await newestCheckpoint(ctx.db);
          if (!checkpoint) throw new ProblemError('not_found', 'no ledger checkpoint has been made yet');
          const cosignatures = await cosignaturesOf(ctx.db, checkpoint.size);
          return reply
            .type(NOTE_TYPE)
            .header('cache-control', 'public, max-age=60')
            .send(publishedNote(checkpoint, cosignatures));
        },
      );

      // Every earlier checkpoint stays here; cosignatures may still be added to it (a witness that was down).
      app.get<{ Params: { size: string } }>(
        '/v1/ledger/checkpoints/:size',
        { schema: { response: { 200: CheckpointNote } } },
        async (request, reply) => {
          limiter.take(request.ip);
          const size = sizeParam(request.params.size);
          const checkpoint = size === null ? null : await findCheckpoint(ctx.db, size);
          if (!checkpoint)
            throw new ProblemError('not_found', `no ledger checkpoint of size ${request.params.size}`);
          const cosignatures = await cosignaturesOf(ctx.db, checkpoint.size);
          return reply
            .type(NOTE_TYPE)
            .header('cache-control', 'public, max-age=60')
            .send(publishedNote(checkpoint, cosignatures));
        },
      );

      app.get(
        '/v1/ledger/witnesses',
        { schema: { response: { 200: LedgerWitnesses } } },
        async (request, reply): Promise<LedgerWitnesses> => {
          limiter.take(request.ip);
          const settings = ledgerSettings(ctx.config);
          const key = await loadLedgerKey(ctx);
          const newest = await newestCheckpoint(ctx.db);
          const { rows } = await ctx.db.query<{ anchored: number | null }>(
            `SELECT max(block_height) AS anchored FROM ledger_blocks WHERE status = 'anchored'`,
          );
          const known = new Map((await witnessRows(ctx.db)).map((w) => [w.vkey, w]));
          reply.header('cache-control', 'public, max-age=60');
          return {
            origin: settings.origin,
            ledger_vkey: ledgerVkey(settings.origin, key),
            quorum: settings.quorum,
            checkpoint: newest
              ? {
                  size: newest.size,
                  anchored_size: rows[0]?.anchored ?? null,
                  url: `${ctx.config.publicUrls.verify}/v1/ledger/checkpoints/${newest.size}`,
                }
              : null,
            witnesses: settings.witnesses.map((w) => {
              const row = known.get(w.vkey.text);
              const cosigned = row?.cosigned_size ?? 0;
              return {
                name: w.vkey.name,
                vkey: w.vkey.text,
                url: w.url,
                cosigned_size: cosigned,
                last_cosigned_at: row?.last_cosigned_at ? formatAlmaty(row.last_cosigned_at) : null,
                state: row?.last_error ? 'failing' : newest && cosigned < newest.size ? 'behind' : 'ok',
              };
            }),
          };
        },
      );

      app.get<{ Params: { number: string } }>(
        '/v1/approvals/:number',
        { schema: { response: { 200: ApprovalPublicStatus } } },
        async (request, reply) => {
          limiter.take(request.ip);
          const number = request.params.number;
          const row = await findApprovalPublic(ctx.db, number);
          if (!row) throw new ProblemError('not_found', `approval ${number} does not exist`);
          const leaves = await leafIdsOfApproval(ctx.db, number);
          const approvalLeaf = leaves.find((l) => l.kind === 'approval');
          const revocationLeaf = leaves.find((l) => l.kind === 'revocation');
          const now = ctx.clock.now();
          reply.header('cache-control', 'public, max-age=60');
          return {
            approval_number: row.number,
            status: approvalState(row, now),
            valid_from: row.valid_from,
            valid_until: row.valid_until,
            structures: row.structures,
            media_sha256: row.media_sha256,
            issued_at: formatAlmaty(row.issued_at, { milliseconds: true }),
            revoked_at: row.revoked_at ? formatAlmaty(row.revoked_at, { milliseconds: true }) : null,
            manifest_sha256: row.manifest_sha256,
            manifest: manifestOf(row.envelope),
            ledger: {
              approval: approvalLeaf ? await ledgerInfoOfLeaf(ctx.db, approvalLeaf.id) : null,
              revocation: revocationLeaf ? await ledgerInfoOfLeaf(ctx.db, revocationLeaf.id) : null,
            },
          };
        },
      );
    },

    // The ledger key is made at start like the authority's others, so a broken AUTHORITY_LEDGER_KEY stops the start;
    // then checkpoints and witness submissions run in the background.
    async start(ctx) {
      await loadLedgerKey(ctx);
      if (options.witnessIntervalMs === null) return async () => {};
      return startWitnessJob(ctx, {
        ...(options.witnessIntervalMs === undefined ? {} : { intervalMs: options.witnessIntervalMs }),
        ...(options.transport ? { transport: options.transport } : {}),
      });
    },
  };
}

export const ledgerFeature: Feature = createLedgerFeature();
