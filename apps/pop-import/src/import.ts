import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { PopAnswer } from '@ooh/protocol';
import type { Progress } from '@ooh/progress';
import { exportText, readExport } from './formats/read.js';
import type { Format } from './formats/source.js';
import type { MappingFile } from './mapping.js';
import { fingerprintOf, mapPlays, type PlannedBatch, planBatches } from './plan.js';
import { type SendOptions, sendBatch, specPacing } from './send.js';
import { ImportState, type StoredBatch, StateError, storedToCounters } from './state.js';
import { addAnswer, emptySent, notSentOf, type Summary, storedAnswerOf } from './summary.js';

/*
 * One run of `pop import` (issue 20 item 2): read the export, map it, plan its batches (or find the plan of an
 * earlier run of the same export), and send, in batch_seq order:
 *  1. batches an earlier run left unanswered, from their stored bytes (a later plan numbers above them, so they must
 *     reach the platform first: a record under its player's mark would be taken as a duplicate);
 *  2. this export's batches: all of them when it was imported before (the same bytes again; the platform answers
 *     each one already received duplicate: true, and counts nothing twice), else the new plan's.
 */

export interface ImportOptions {
  file: string;
  format?: Format;
  timeZone: string | null;
  mapping: MappingFile;
  stateFolder: string;
  firstBatchSeq?: number;
  dryRun?: boolean;
  /** Where and how to send; unused by a dry run. */
  send: Omit<SendOptions, 'onWait'>;
  progress: Progress;
  /** When the plan was made (kept in the state for people; never in the bytes). */
  now?: () => Date;
  /** Smaller batches than the spec's limits (tests). */
  limits?: { maxRecords?: number; maxBytes?: number };
}

export class PlanMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PlanMismatchError';
  }
}

interface ToSend {
  batchSeq: number;
  body: Buffer;
  records: number;
  /** Export lines of the records, when the batch is this export's. */
  lines: number[] | null;
}

export async function runImport(options: ImportOptions): Promise<Summary> {
  const { progress } = options;
  const name = path.basename(options.file);
  progress.phase(`reading ${name}`);
  const read = readExport(exportText(readFileSync(options.file)), {
    ...(options.format ? { format: options.format } : {}),
    timeZone: options.timeZone,
  });
  const mapped = mapPlays(read.plays, options.mapping);
  const fingerprint = fingerprintOf(mapped.plays);
  const summary: Summary = {
    file: name,
    format: read.format,
    fingerprint,
    rows: read.rows,
    plays: read.plays.length,
    not_plays: read.notPlays,
    not_sent: notSentOf([...read.refused, ...mapped.refused].sort((a, b) => a.line - b.line)),
    imported_before: false,
    batches: { planned: 0, first_batch_seq: null, last_batch_seq: null },
    earlier_batches_sent: 0,
    sent: emptySent(),
    stopped: null,
    pending: 0,
  };
  const sourceId = options.send.sourceId;
  const state = ImportState.open(options.stateFolder, sourceId, {
    lock: !options.dryRun,
    ...(options.firstBatchSeq === undefined ? {} : { firstBatchSeq: options.firstBatchSeq }),
  });
  try {
    state.checkTimeZone(options.timeZone);
    const earlier: ToSend[] = [];
    for (const { entry, batch } of state.unanswered()) {
      if (entry.fingerprint === fingerprint) continue;
      const body = state.pendingBody(batch);
      if (body === null) {
        throw new StateError(
          'bytes_missing',
          `batch ${batch.batch_seq} of the import of ${entry.file} (${entry.planned_at}) was never answered and ` +
            `its bytes are gone from ${state.pendingFile(batch.batch_seq)}: import ${entry.file} again first`,
        );
      }
      earlier.push({ batchSeq: batch.batch_seq, body, records: batch.records, lines: null });
    }

    let planned: PlannedBatch[];
    const before = state.findImport(fingerprint);
    if (before) {
      summary.imported_before = true;
      planned = planBatches(mapped.plays, sourceId, storedToCounters(before.start), options.limits).batches;
      checkSamePlan(planned, before.batches);
    } else {
      const plan = planBatches(mapped.plays, sourceId, state.counters, options.limits);
      planned = plan.batches;
      if (planned.length > 0 && !options.dryRun) {
        state.commitPlan({
          fingerprint,
          file: name,
          format: read.format,
          plannedAt: (options.now ?? (() => new Date()))(),
          timeZone: options.timeZone,
          start: plan.start,
          end: plan.end,
          batches: planned,
        });
      }
    }
    summary.batches = {
      planned: planned.length,
      first_batch_seq: planned[0]?.batchSeq ?? null,
      last_batch_seq: planned.at(-1)?.batchSeq ?? null,
    };
    if (options.dryRun) return summary;

    // In batch_seq order whatever the imports: a batch sent after one numbered above it would find its players'
    // marks moved past its records, and they would be taken as duplicates.
    const queue: ToSend[] = [
      ...earlier,
      ...planned.map((b) => ({ batchSeq: b.batchSeq, body: b.body, records: b.records, lines: b.lines })),
    ].sort((a, b) => a.batchSeq - b.batchSeq);
    const sent = summary.sent;
    progress.phase('sending batches', {
      total: queue.length,
      unit: 'batches',
      detail: () => `accepted ${sent.accepted.toLocaleString('en-US')}`,
    });
    const clock = { now: options.send.now ?? Date.now, sleep: options.send.sleep ?? defaultSleep };
    const sendOptions: SendOptions = {
      ...options.send,
      pacing: options.send.pacing ?? specPacing(clock),
    };
    for (const batch of queue) {
      const result = await sendBatch(batch, sendOptions);
      if (result.kind === 'stopped') {
        summary.stopped = {
          batch_seq: batch.batchSeq,
          status: result.status,
          code: result.code,
          detail: result.detail,
        };
        break;
      }
      const stored = storedAnswerOf(result.answer);
      state.recordAnswer(batch.batchSeq, stored);
      addAnswer(sent, stored);
      if (batch.lines === null) summary.earlier_batches_sent += 1;
      else if (!result.answer.duplicate) noteRefusedLines(sent.refused_lines, result.answer, batch.lines);
      progress.tick();
    }
    summary.pending = state.unanswered().length;
    return summary;
  } finally {
    state.close();
  }
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A re-run must make the very bytes it made before; anything else would be a conflict, so nothing is sent. */
function checkSamePlan(planned: readonly PlannedBatch[], stored: readonly StoredBatch[]): void {
  const same =
    planned.length === stored.length &&
    planned.every((b, i) => b.batchSeq === stored[i]!.batch_seq && b.sha256 === stored[i]!.sha256);
  if (!same) {
    throw new PlanMismatchError(
      'this export was imported before, but its batches come out different now (another version of the ' +
        'importer?); nothing was sent, as other bytes under a batch_seq already taken are refused batch_conflict',
    );
  }
}

function noteRefusedLines(into: Record<string, number[]>, answer: PopAnswer, lines: readonly number[]): void {
  for (const item of answer.items) {
    if (item.status !== 'refused') continue;
    const reason = item.reason ?? 'unknown';
    const list = into[reason] ?? [];
    into[reason] = list;
    const line = lines[item.index];
    if (list.length < 5 && line !== undefined) list.push(line);
  }
}
