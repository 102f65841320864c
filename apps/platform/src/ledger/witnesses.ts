import { randomInt } from 'node:crypto';
import { type BackoffPolicy, backoffDelayMs } from '@ooh/protocol';
import {
  COSIGNATURE_SKEW_SECONDS,
  checkSignature,
  type NoteSignature,
  parseNote,
  type Vkey,
} from '@ooh/verify';
import type { PlatformContext } from '../context.js';
import type { Db } from '../db/pool.js';
import { readAtMost } from '../http/read-at-most.js';
import { startTicker } from '../shared/ticker.js';
import {
  blockHeaders,
  type CheckpointRow,
  findCheckpoint,
  makeCheckpoints,
  markAnchored,
  newestCheckpoint,
  proofLine,
  storeCosignature,
} from './checkpoint.js';
import { type LedgerSettings, ledgerSettings, type WitnessConfig } from './settings.js';

/*
 * Submitting checkpoints to witnesses (c2sp.org/tlog-witness "add-checkpoint"), in the background: a witness that is
 * down delays `anchored` and nothing else. Sealing and intake never wait for it (they run in their own features and
 * transactions); this job only reads blocks and writes checkpoints, cosignatures and witness state.
 */

/** tlog-witness: "The client MUST NOT send more than 63 consistency proof lines." A witness further behind is
 * brought up in steps of 63 blocks, through the checkpoints kept for every block. */
export const MAX_PROOF_LINES = 63;
/** The most of a witness's answer read: a few signature lines, a tree size or an error text. */
const MAX_ANSWER_BYTES = 64 * 1024;
/** One lock for the submitting job across instances (a witness must see sizes in order). */
const WITNESS_LOCK = 0x05ea1_0003;
export const WITNESS_BACKOFF: BackoffPolicy = { baseMs: 10_000, capMs: 3_600_000 };
const REQUEST_TIMEOUT_MS = 10_000;
/** How many 409 answers one pass follows (each names the size the witness holds). */
const MAX_RESYNCS = 3;
export const DEFAULT_WITNESS_INTERVAL_MS = 5000;

export interface WitnessRow {
  vkey: string;
  name: string;
  url: string;
  cosigned_size: number;
  last_cosigned_at: Date | null;
  failures: number;
  next_attempt_at: Date | null;
  last_error: string | null;
}

export async function witnessRows(db: Db): Promise<WitnessRow[]> {
  const { rows } = await db.query<WitnessRow>(
    `SELECT vkey, name, url, cosigned_size, last_cosigned_at, failures, next_attempt_at, last_error
       FROM ledger_witnesses ORDER BY name`,
  );
  return rows;
}

export type Submission =
  | { outcome: 'cosigned'; size: number }
  | { outcome: 'up_to_date'; size: number }
  | { outcome: 'failed'; error: string };

export interface WitnessTransport {
  post(url: string, body: string): Promise<{ status: number; contentType: string; body: string }>;
}

export const fetchTransport: WitnessTransport = {
  async post(url, body) {
    const response = await fetch(url, {
      method: 'POST',
      body,
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      redirect: 'error',
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    // A cosignature answer is a few signature lines: an answer beyond 64 kB is cut there and read no further (it
    // fails as not signature lines), so a witness cannot make the platform hold an answer of any size.
    const { body: bytes } = await readAtMost(response, MAX_ANSWER_BYTES);
    return {
      status: response.status,
      contentType: response.headers.get('content-type') ?? '',
      body: bytes.toString('utf8'),
    };
  },
};

/** tlog-witness add-checkpoint body: "old <m>", the proof lines, an empty line, the checkpoint. */
export function addCheckpointBody(oldSize: number, proof: string[], checkpointNote: string): string {
  return `old ${oldSize}\n${proof.map((l) => `${l}\n`).join('')}\n${checkpointNote}`;
}

/**
 * Brings one witness up to the newest checkpoint: submits the checkpoint min(newest, cosigned + 63) with the block
 * preimages in between, follows a 409 to the size the witness says it holds, and keeps each cosignature that verifies
 * against the witness's configured key. Never throws for the witness's sake: an error is the outcome.
 */
export async function submitToWitness(
  ctx: Pick<PlatformContext, 'db' | 'clock'>,
  witness: WitnessConfig,
  transport: WitnessTransport = fetchTransport,
): Promise<Submission> {
  const newest = await newestCheckpoint(ctx.db);
  if (!newest) return { outcome: 'up_to_date', size: 0 };
  let resyncs = 0;
  let last: Submission = { outcome: 'up_to_date', size: 0 };
  /** The size a 409 said the witness holds: the next request's `old`, never recorded as cosigned (only a verified
   * cosignature is). Null until a 409 of this pass. */
  let claimed: number | null = null;
  for (;;) {
    const { rows } = await ctx.db.query<{ cosigned_size: number }>(
      'SELECT cosigned_size FROM ledger_witnesses WHERE vkey = $1',
      [witness.vkey.text],
    );
    const cosignedSize = rows[0]?.cosigned_size ?? 0;
    if (claimed === null && cosignedSize >= newest.size) {
      return last.outcome === 'cosigned' ? last : { outcome: 'up_to_date', size: cosignedSize };
    }
    const oldSize: number = claimed ?? cosignedSize;
    // A witness that never cosigned gets the newest checkpoint with old size 0 and no proof (tlog-witness: "If the
    // old size is zero, the consistency proof MUST be empty"); one behind gets at most 63 blocks at a time. One that
    // says it holds our newest size gets that checkpoint again with old = its size and no proof (tlog-witness: "If the
    // old size matches the checkpoint size, the witness MUST check that the root hashes are also identical"): it
    // cosigns our head, or answers 422 for another head of that size.
    const target = oldSize === 0 ? newest.size : Math.min(newest.size, oldSize + MAX_PROOF_LINES);
    const checkpoint: CheckpointRow | null =
      target === newest.size ? newest : await findCheckpoint(ctx.db, target);
    if (!checkpoint) return { outcome: 'failed', error: `no checkpoint of size ${target}` };
    const proof = oldSize === 0 ? [] : (await blockHeaders(ctx.db, oldSize, target)).map(proofLine);
    let answer: Awaited<ReturnType<WitnessTransport['post']>>;
    try {
      answer = await transport.post(
        `${witness.url}/add-checkpoint`,
        addCheckpointBody(oldSize, proof, checkpoint.note),
      );
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      return { outcome: 'failed', error: `unreachable: ${cause ?? (error as Error).message}` };
    }
    if (answer.status === 409) {
      // tlog-witness: "The response body MUST consist of the tree size of the latest cosigned checkpoint in decimal,
      // followed by a newline ... Content-Type of text/x.tlog.size."
      const match = /^(0|[1-9][0-9]*)\n$/.exec(answer.body);
      const size = match ? Number(match[1]) : Number.NaN;
      if (!answer.contentType.startsWith('text/x.tlog.size') || !Number.isSafeInteger(size)) {
        return { outcome: 'failed', error: 'HTTP 409 without a text/x.tlog.size body' };
      }
      // A 409 naming the very `old` we sent contradicts itself ("if it doesn't match ... 409"): a failure, never a
      // size taken as cosigned.
      if (size === oldSize || resyncs >= MAX_RESYNCS)
        return { outcome: 'failed', error: `HTTP 409: witness at ${size}, asked with old ${oldSize}` };
      if (size > newest.size) {
        return {
          outcome: 'failed',
          error: `witness holds size ${size}, beyond this ledger's ${newest.size}`,
        };
      }
      resyncs += 1;
      claimed = size;
      continue;
    }
    if (answer.status !== 200) {
      return { outcome: 'failed', error: `HTTP ${answer.status}: ${answer.body.trim().slice(0, 200)}` };
    }
    const now = ctx.clock.now();
    const cosigned = await acceptCosignature(checkpoint, answer.body, witness.vkey, now);
    if ('error' in cosigned) return { outcome: 'failed', error: cosigned.error };
    await storeCosignature(ctx.db, checkpoint.size, cosigned.signature, cosigned.at, now);
    await ctx.db.query(
      `UPDATE ledger_witnesses SET cosigned_size = $2, last_cosigned_at = $3, failures = 0, next_attempt_at = NULL,
              last_error = NULL
        WHERE vkey = $1`,
      [witness.vkey.text, checkpoint.size, now],
    );
    claimed = null;
    last = { outcome: 'cosigned', size: checkpoint.size };
  }
}

/**
 * tlog-witness: "The client MUST ignore any cosignatures from unknown keys. To parse the response, the client MAY
 * concatenate it to the checkpoint, and use a note verification function configured with the witness keys it trusts."
 * That function is @ooh/verify's, the one that checks every note signature. The answer must add signature lines only:
 * the concatenated note must read as the checkpoint's own text. The cosignature's time must be one every verifier
 * accepts: not after `now` + COSIGNATURE_SKEW_SECONDS (@ooh/verify's checkCosignedCheckpoint refuses those as
 * `future`), which also keeps it inside the range of a JavaScript Date and of a PostgreSQL timestamptz.
 */
export async function acceptCosignature(
  checkpoint: Pick<CheckpointRow, 'note'>,
  body: string,
  vkey: Vkey,
  now: Date,
): Promise<{ signature: NoteSignature; at: Date } | { error: string }> {
  const own = parseNote(checkpoint.note);
  const answered = body.endsWith('\n') ? parseNote(checkpoint.note + body) : null;
  if (!own || !answered || answered.text !== own.text)
    return { error: 'the answer is not signature lines ("— <name> <base64>", each ending in a newline)' };
  for (const sig of answered.signatures.slice(own.signatures.length)) {
    const check = await checkSignature(own.text, sig, [vkey]);
    if (check.state === 'invalid') return { error: `a cosignature of ${vkey.name} does not verify` };
    if (check.state === 'valid' && check.timestamp !== null) {
      if (check.timestamp > Math.floor(now.getTime() / 1000) + COSIGNATURE_SKEW_SECONDS) {
        return {
          error: `the cosignature of ${vkey.name} is dated ${check.timestamp}, more than ${COSIGNATURE_SKEW_SECONDS} s after this platform's clock`,
        };
      }
      return { signature: sig, at: new Date(check.timestamp * 1000) };
    }
  }
  return { error: `no cosignature of ${vkey.name} in the answer` };
}

/** An error text as PostgreSQL's text type takes it: a witness's answer may hold a NUL byte, which it refuses. */
function printable(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '?');
}

async function withWitnessLock<T>(db: Db, work: () => Promise<T>): Promise<T | 'busy'> {
  const client = await db.connect();
  try {
    const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [
      WITNESS_LOCK,
    ]);
    if (!rows[0]?.ok) return 'busy';
    try {
      return await work();
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [WITNESS_LOCK]);
    }
  } finally {
    client.release();
  }
}

export interface WitnessRun {
  checkpoints: number[];
  submissions: { witness: string; result: Submission }[];
  anchored: number[];
}

/**
 * One pass: makes the missing checkpoints, records the configured witnesses, submits to each witness that is due
 * (never before its backoff ends), then marks the blocks a quorum has cosigned `anchored`. `force`: ignore backoff.
 */
export async function runWitnessJob(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'caches'>,
  options: { transport?: WitnessTransport; force?: boolean; random?: () => number } = {},
): Promise<WitnessRun | 'busy'> {
  const settings: LedgerSettings = ledgerSettings(ctx.config);
  return withWitnessLock(ctx.db, async () => {
    const checkpoints = await makeCheckpoints(ctx);
    const submissions: WitnessRun['submissions'] = [];
    for (const witness of settings.witnesses) {
      const { rows } = await ctx.db.query<WitnessRow>(
        `INSERT INTO ledger_witnesses (vkey, name, url) VALUES ($1, $2, $3)
         ON CONFLICT (vkey) DO UPDATE SET url = EXCLUDED.url
         RETURNING vkey, name, url, cosigned_size, last_cosigned_at, failures, next_attempt_at, last_error`,
        [witness.vkey.text, witness.vkey.name, witness.url],
      );
      const row = rows[0]!;
      const now = ctx.clock.now();
      if (!options.force && row.next_attempt_at && row.next_attempt_at.getTime() > now.getTime()) continue;
      // One witness's failure of any kind (an answer our database refuses, a bug in reading it) is that witness's
      // failure, recorded with its backoff: the witnesses after it are still asked and markAnchored still runs.
      let result: Submission;
      try {
        result = await submitToWitness(ctx, witness, options.transport);
      } catch (error) {
        result = { outcome: 'failed', error: `error: ${(error as Error).message ?? String(error)}` };
      }
      if (result.outcome === 'failed') {
        const failures = row.failures + 1;
        const delay = backoffDelayMs(
          WITNESS_BACKOFF,
          failures,
          options.random ?? (() => randomInt(1_000_000) / 1_000_000),
        );
        await ctx.db.query(
          `UPDATE ledger_witnesses SET failures = $2, next_attempt_at = $3, last_error = $4 WHERE vkey = $1`,
          [witness.vkey.text, failures, new Date(ctx.clock.now().getTime() + delay), printable(result.error)],
        );
      }
      submissions.push({ witness: witness.vkey.name, result });
    }
    const anchored = await markAnchored(
      ctx.db,
      settings.witnesses.map((w) => ({ name: w.vkey.name, keyId: w.vkey.id })),
      settings.quorum,
    );
    return { checkpoints, submissions, anchored };
  });
}

/**
 * How a witness's failure is logged. A witness holding another history than this ledger's (422: the checkpoint does
 * not extend what it holds; or it holds a size beyond ours), as after a restore from a backup, is a fork: nothing
 * later is anchored by it until someone acts, so it is an error with its own words, not the warning of a witness
 * that is down or refuses for a while (audit J finding 4).
 */
export function witnessFailureLine(error: string): { level: 'error' | 'warn'; message: string } {
  if (/^HTTP 422\b/.test(error) || /^witness holds size \d+, beyond this ledger's/.test(error)) {
    return {
      level: 'error',
      message:
        'ledger witness holds another history than this ledger (a fork, as after a restore): someone must look',
    };
  }
  return { level: 'warn', message: 'ledger witness refused or down' };
}

/** The job on a chain of short timers (src/shared/ticker.ts), beside the seal scheduler, never inside it. */
export function startWitnessJob(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'log' | 'caches'>,
  options: { intervalMs?: number; transport?: WitnessTransport } = {},
): () => Promise<void> {
  return startTicker(ctx, 'ledger-witnesses', options.intervalMs ?? DEFAULT_WITNESS_INTERVAL_MS, async () => {
    const run = await runWitnessJob(ctx, options.transport ? { transport: options.transport } : {});
    if (run === 'busy') return;
    for (const size of run.checkpoints) ctx.log.info({ size }, 'ledger checkpoint made');
    for (const { witness, result } of run.submissions) {
      if (result.outcome === 'cosigned')
        ctx.log.info({ witness, size: result.size }, 'ledger checkpoint cosigned');
      else if (result.outcome === 'failed') {
        const said = witnessFailureLine(result.error);
        ctx.log[said.level]({ witness, error: result.error }, said.message);
      }
    }
    if (run.anchored.length > 0) ctx.log.info({ blocks: run.anchored }, 'ledger blocks anchored');
  });
}
