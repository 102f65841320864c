import {
  PLAY_ID_PATTERN,
  type PopAnswer,
  type PopChannel,
  type PopRecord,
  parseDateTime,
} from '@ooh/protocol';
import type { PlatformContext } from '../context.js';
import { ProblemError } from '../http/problem.js';
import {
  type ApprovalFacts,
  almatyDayOf,
  type CountedPlayIds,
  judgeRecords,
  numberedPlayers,
  type Player,
  startHourOf,
  type Settled,
  settle,
  type Verdict,
} from './judge.js';
import {
  findBatch,
  findCountedPlays,
  type PlayCandidates,
  readPlayerStates,
  type StoredBatch,
} from './batch-context.js';
import type { Bucket } from './rate-limits.js';
import { ensureRecordPartition, type StoreResult, storeBatch, storeBatchStreaming } from './store.js';

/*
 * What both channels share once the caller is authenticated, in the order of DESIGN.md section 5:
 * "... authentication -> idempotency -> freshness -> rate limits -> per-record judgement".
 * The channel's reading query has already fetched, in one query, the stored batch under (owner, batch_seq),
 * the players' high-water marks and the approvals the records name; storing is one transaction.
 */

export interface IngestInput {
  /** 'device:<uuid>' or 'source:<uuid>' (DESIGN.md section 6). */
  owner: string;
  batchSeq: number;
  channel: 'agent' | 'cert' | 'cms' | 'legacy';
  /** The exact bytes as received (decompressed on the CMS channel). */
  body: Buffer;
  /** The gzip bytes the body came in when smaller (CMS channel): stored in its place (NewBatch.gzipped). */
  gzipped?: Buffer;
  bodySha256: string;
  /** What the reading query found under (owner, batch_seq). */
  existing: StoredBatch | null;
  records: readonly unknown[];
  recordChannel: PopChannel;
  attested: boolean;
  receivedAt: Date;
  /** The freshness check (agent channel): throws stale_request. Runs after idempotency. */
  checkFresh?: () => void;
  /** Rate-limit buckets, all taken or none. */
  buckets: readonly Bucket[];
  /** Seconds the buckets would make the batch wait, looked at by the reading query (CMS channel). */
  rateWait?: number;
  /**
   * A batch number taken by the reading query: the records are then judged a part at a time and copied while
   * the rest is judged (storeBatchStreaming; CMS channel).
   */
  streamBatchId?: number;
  playerOf: (record: PopRecord) => Player | null;
  /** High-water marks read with the batch's context (players not listed: 0). */
  marks: ReadonlyMap<string, number>;
  /** Each player's newest counted play start (epoch ms), read with the marks (migration 065). */
  newestPlayStarts: ReadonlyMap<string, number>;
  approvals: ReadonlyMap<string, ApprovalFacts>;
  /** A legacy batch (DESIGN.md section 5: "The earlier batch format is a body without schema"). */
  legacy: boolean;
  /** Whether the owner already had a service.pop/1 batch accepted (for the legacy rule). */
  hadPopBatch: boolean;
  /** The play records counted for the seal: elements of kind play in the body. */
  recordCount: number;
}

/** spec: "A repeat of the same batch_seq with the same content is answered duplicate true and counted once". */
function repeatAnswer(stored: StoredBatch, bodySha256: string, batchSeq: number): PopAnswer {
  if (stored.bodySha256 !== bodySha256) {
    // spec: "the same batch_seq with other content is 409 batch_conflict".
    throw new ProblemError(
      'batch_conflict',
      `batch_seq ${batchSeq} is already taken by a batch with other content`,
    );
  }
  return { ...stored.answer, duplicate: true };
}

const legacyAfterPop = () =>
  new ProblemError(
    'legacy_after_pop',
    'this device has had a service.pop/1 batch accepted; the earlier batch format is no longer taken',
  );

/** Approval numbers of the plays of a batch (read before judging, with the batch's context). */
export function approvalNumbersOf(records: readonly unknown[]): string[] {
  const numbers = new Set<string>();
  for (const record of records) {
    if (typeof record !== 'object' || record === null) continue;
    const r = record as Record<string, unknown>;
    const number = r['approval_number'];
    // A number with U+0000 is refused (judge.ts) and cannot be a query parameter.
    if (
      r['kind'] === 'play' &&
      r['slot'] === undefined &&
      typeof number === 'string' &&
      !number.includes('\u0000')
    ) {
      numbers.add(number);
    }
  }
  return [...numbers];
}

/**
 * The plays of a batch whose play_id must be looked for among the plays counted before (migration 065): those that
 * start at or before their player's newest counted start. A resent play carries the start it had; a play that
 * starts later was never counted. Read from the raw records, before judging: a record the judgement refuses costs
 * a lookup at most.
 */
export function playCandidates(
  records: readonly unknown[],
  playerOf: (record: PopRecord) => Player | null,
  newestPlayStarts: ReadonlyMap<string, number>,
): PlayCandidates {
  const candidates: PlayCandidates = { playerKeys: [], hours: [], playIds: [] };
  if (newestPlayStarts.size === 0) return candidates;
  const iso = new Map<number, string>();
  const isoOf = (ms: number) => {
    let text = iso.get(ms);
    if (text === undefined) {
      text = new Date(ms).toISOString();
      iso.set(ms, text);
    }
    return text;
  };
  for (const record of records) {
    if (typeof record !== 'object' || record === null) continue;
    const r = record as Record<string, unknown>;
    const playId = r['play_id'];
    const start = r['start'];
    if (r['kind'] !== 'play' || typeof playId !== 'string' || typeof start !== 'string') continue;
    const player = playerOf(r as PopRecord);
    const newest = player ? newestPlayStarts.get(player.key) : undefined;
    if (newest === undefined) continue;
    // Most plays are new, and most starts come in the canonical UTC form, where text order is time order.
    if (start.length === 24 && start.endsWith('Z') && start > isoOf(newest)) continue;
    const startMs = parseDateTime(start)?.getTime();
    if (startMs === undefined || startMs > newest || !PLAY_ID.test(playId)) continue;
    candidates.playerKeys.push(player!.key);
    candidates.hours.push(startHourOf(startMs));
    candidates.playIds.push(playId);
  }
  return candidates;
}
const PLAY_ID = new RegExp(PLAY_ID_PATTERN);

/** Another instance moving the same player's mark at the same moment is rare; a few rounds settle it. */
const MAX_ROUNDS = 8;

export async function ingestBatch(ctx: PlatformContext, input: IngestInput): Promise<PopAnswer> {
  // Idempotency: "a batch_seq already stored with the same body hash is answered with the stored answer and
  // duplicate: true, even if its ts is now old; with another body hash, 409 batch_conflict".
  if (input.existing) return repeatAnswer(input.existing, input.bodySha256, input.batchSeq);
  // spec: "409 legacy_after_pop: batch in the earlier format from a device that has had a service.pop/1 batch
  // accepted; do not retry".
  if (input.legacy && input.hadPopBatch) throw legacyAfterPop();
  // Freshness: "ts within 300 s, agent channel only: else 401 stale_request, nothing stored".
  input.checkFresh?.();

  // Rate limits (DESIGN.md section 5: before the per-record judgement): a batch the buckets would refuse is refused
  // before it costs more. The tokens themselves are taken when it is stored.
  if (input.rateWait !== undefined && input.rateWait > 0) throw rateLimited(input.rateWait);

  // Per-record judgement: everything but the high-water marks.
  const judgeContext = {
    channel: input.recordChannel,
    receivedAt: input.receivedAt,
    attested: input.attested,
    playerOf: input.playerOf,
    approval: (number: string) => input.approvals.get(number),
  };
  const receiveDay = almatyDayOf(input.receivedAt);
  await ensureRecordPartition(ctx.db, receiveDay, ctx.caches.pop.partitions);
  const base = {
    owner: input.owner,
    batchSeq: input.batchSeq,
    channel: input.channel,
    body: input.body,
    ...(input.gzipped ? { gzipped: input.gzipped } : {}),
    bodySha256: input.bodySha256,
    receivedAt: input.receivedAt,
    receiveDay,
    recordCount: input.recordCount,
    attested: input.attested,
  };
  const answerOf = (settled: Settled): PopAnswer => ({
    batch_seq: input.batchSeq,
    received: settled.received,
    accepted: settled.accepted,
    duplicates: settled.duplicates,
    refused: settled.refused,
    flagged: settled.flagged,
    duplicate: false,
    items: settled.items,
  });

  let marks: ReadonlyMap<string, number> = input.marks;
  // The plays counted before are read after the marks (a play counted in between moved a mark, so the store's
  // compare-and-set catches it; read the other way round, it could slip between the two reads).
  let counted: CountedPlayIds = await findCountedPlays(
    ctx.db,
    playCandidates(input.records, input.playerOf, input.newestPlayStarts),
  );
  let verdicts: Verdict[] | null = null;
  let round = 1;
  const readAgain = async (judged: readonly Verdict[]) => {
    const states = await readPlayerStates(ctx.db, numberedPlayers(judged));
    marks = states.marks;
    counted = await findCountedPlays(
      ctx.db,
      playCandidates(input.records, input.playerOf, states.newestPlayStarts),
    );
  };
  if (input.streamBatchId !== undefined) {
    // A large batch: judged a part at a time, each part copied while the next is judged.
    const judged: Verdict[] = [];
    const streamed = await storeBatchStreaming(ctx.db, {
      batchId: input.streamBatchId,
      batch: base,
      records: input.records.length,
      judge: (from, to) => {
        const part = judgeRecords(input.records, judgeContext, from, to);
        for (const verdict of part) judged.push(verdict);
        return part;
      },
      readMarks: marks,
      countedPlayIds: counted,
      buckets: input.buckets,
      legacy: input.legacy,
      answerOf,
      now: () => ctx.clock.now(),
    });
    const outcome = await outcomeOf(ctx, input, streamed.result, streamed.answer, round);
    if (outcome !== 'judge again') return outcome;
    verdicts = judged.length === input.records.length ? judged : judgeRecords(input.records, judgeContext);
    await readAgain(verdicts);
    round += 1;
  }
  verdicts ??= judgeRecords(input.records, judgeContext);
  for (; ; round += 1) {
    const settled = settle(verdicts, marks, counted);
    const answer = answerOf(settled);
    const entry = {
      batch: { ...base, answer },
      settled,
      readMarks: marks,
      buckets: input.buckets,
      legacy: input.legacy,
      now: () => ctx.clock.now(),
    };
    // Agent batches are small and many: they are written in groups, one transaction and one WAL flush for all the
    // batches that arrived meanwhile (group-commit.ts). A CMS batch of up to 10 000 records is a group of its own.
    const result = await (input.recordChannel === 'agent'
      ? ctx.caches.pop.committer.store(entry)
      : storeBatch(ctx.db, entry));
    const outcome = await outcomeOf(ctx, input, result, answer, round);
    if (outcome !== 'judge again') return outcome;
    await readAgain(verdicts);
  }
}

/** spec: "429 rate_limited ... Retry-After gives seconds to wait". */
export function rateLimited(wait: number): ProblemError {
  const seconds = Math.max(1, Math.ceil(wait));
  return new ProblemError('rate_limited', `rate limit reached; retry in ${seconds} s`, {
    headers: { 'retry-after': String(seconds) },
  });
}

/** The answer to give for a store's result, or 'judge again' (a mark moved meanwhile). */
async function outcomeOf(
  ctx: PlatformContext,
  input: IngestInput,
  result: StoreResult,
  answer: PopAnswer,
  round: number,
): Promise<PopAnswer | 'judge again'> {
  switch (result.kind) {
    case 'stored':
      return answer;
    case 'rate_limited':
      throw rateLimited(result.wait);
    case 'taken': {
      // Another instance stored this (owner, batch_seq) meanwhile: answer as a repeat.
      const stored = await findBatch(ctx.db, input.owner, input.batchSeq);
      if (stored) return repeatAnswer(stored, input.bodySha256, input.batchSeq);
      // Not stored: the legacy guard of the statement found a service.pop/1 batch accepted meanwhile.
      if (input.legacy) throw legacyAfterPop();
      throw new Error(`batch ${input.owner}/${input.batchSeq} was neither stored nor found`);
    }
    case 'marks_moved':
      if (round >= MAX_ROUNDS) {
        throw new ProblemError('service_unavailable', 'the players of this batch are busy; send it again', {
          headers: { 'retry-after': '1' },
        });
      }
      return 'judge again';
  }
}
