import { hash as nodeHash } from 'node:crypto';
import { canonicalize, cmsSign } from '@ooh/crypto';
import { addDays, almatyDate, almatyDayEnd, type StatsSealBody } from '@ooh/protocol';
import { hexEncode, MerkleRootBuilder } from '@ooh/verify';
import { type Authority, loadAuthority } from '../authority/index.js';
import type { PlatformContext } from '../context.js';
import { type Db, type DbClient, isUniqueViolation } from '../db/pool.js';
import { ZERO_SHA256 } from '../ledger/digest.js';
import { recordLedgerLeaf } from '../ledger/leaves.js';
import {
  earliestActivityDay,
  findSeal,
  firstSealDay,
  insertSeal,
  FIRST_PAGE_KEY,
  LEAF_PAGE_SQL,
  type LeafPage,
  lastSeal,
  SEAL_LOCK,
  type SealRow,
} from './repository.js';

export type SealErrorCode = 'day_not_ended' | 'before_first_day' | 'busy';

/** Why a day cannot be sealed now (mapped to problem codes by the routes). */
export class SealError extends Error {
  constructor(
    readonly code: SealErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'SealError';
  }
}

/** Leaves per page: bounded memory (640 kB of hashes) whatever the day holds. */
const PAGE_LEAVES = 20_000;
const HASH_LENGTH = 32;

export interface DayLeaves {
  batchCount: number;
  recordCount: number;
  /** Hex Merkle root over the leaves ordered by receive time then batch number. */
  root: string;
}

/**
 * The leaves of every accepted batch received on `day`, read page by page in leaf order and folded into the root
 * as they come (constant memory). The next page is asked for before the current one is folded. Runs inside the
 * caller's REPEATABLE READ transaction, so every page comes from the same snapshot.
 */
export async function computeDayLeaves(client: DbClient, day: string): Promise<DayLeaves> {
  // The tree rule is @ooh/verify's; node:crypto hashes its nodes (a day may hold millions of leaves).
  const tree = new MerkleRootBuilder({ sha256: (bytes) => nodeHash('sha256', bytes, 'buffer') });
  let recordCount = 0;
  const readPage = (at: string, id: number) =>
    client.query<LeafPage>(LEAF_PAGE_SQL, [day, at, id, PAGE_LEAVES]).then((r) => r.rows[0]!);
  let next: Promise<LeafPage> | null = readPage(FIRST_PAGE_KEY.at, FIRST_PAGE_KEY.id);
  try {
    while (next) {
      const page: LeafPage = await next;
      next =
        page.n === PAGE_LEAVES && page.last_at !== null && page.last_id !== null
          ? readPage(page.last_at, page.last_id)
          : null;
      if (page.unsafe) throw new Error(`day ${day}: a batch number or batch_seq is beyond 2^53 - 1`);
      if (page.hashes.length !== page.n * HASH_LENGTH)
        throw new Error(`day ${day}: a page of leaves is malformed`);
      for (let offset = 0; offset < page.hashes.length; offset += HASH_LENGTH) {
        tree.addSync(page.hashes.subarray(offset, offset + HASH_LENGTH));
      }
      recordCount += page.plays;
    }
  } finally {
    // A page still in flight when folding failed: settle it (the caller rolls back).
    await next?.catch(() => {});
  }
  return { batchCount: tree.count, recordCount, root: hexEncode(tree.rootSync()) };
}

/** spec StatsSeal body: {v: 1, env, day, batch_count, record_count, root, prev_seal_sha256}. */
export function sealBody(args: {
  env: 'test' | 'prod';
  day: string;
  leaves: DayLeaves;
  prevSealSha256: string;
}): StatsSealBody {
  return {
    v: 1,
    env: args.env,
    day: args.day,
    batch_count: args.leaves.batchCount,
    record_count: args.leaves.recordCount,
    root: args.leaves.root,
    prev_seal_sha256: args.prevSealSha256,
  };
}

/** The seal's time: whole seconds, as the CMS signingTime carries it. */
function wholeSeconds(instant: Date): Date {
  return new Date(Math.floor(instant.getTime() / 1000) * 1000);
}

/**
 * 'busy': another instance holds the sealing lock; 'writers_busy': a transaction storing batches of the day did not
 * finish within DAY_LOCK_TIMEOUT_MS; 'out_of_order': another instance sealed meanwhile.
 */
type SealOutcome = { seal: SealRow; created: boolean } | 'busy' | 'writers_busy' | 'out_of_order';

/** How long the sealing of a day waits for the transactions storing its batches (they take milliseconds). */
export const DAY_LOCK_TIMEOUT_MS = 30_000;
/** SQLSTATE lock_not_available: lock_timeout ran out. */
const LOCK_NOT_AVAILABLE = '55P03';

async function sealOne(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config'>,
  authority: Authority,
  day: string,
  isFirst: boolean,
  wait: boolean,
): Promise<SealOutcome> {
  const client = await ctx.db.connect();
  let locked = false;
  let firstLocked = false;
  let dayLocked = false;
  try {
    // A session lock taken before the transaction begins, so the REPEATABLE READ snapshot is taken after it and
    // sees a seal committed by the instance that held the lock before.
    if (wait) {
      await client.query('SELECT pg_advisory_lock($1)', [SEAL_LOCK]);
    } else {
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [
        SEAL_LOCK,
      ]);
      if (!rows[0]?.ok) return 'busy';
    }
    locked = true;
    // The day's lock, exclusive (migration 064): waits until every transaction storing batches under `day` has
    // committed, and makes those that come later wait for the seal and store under the next day. Taken before the
    // snapshot, so the snapshot holds every batch of the day. A writer held up for long (a lock somewhere) makes
    // this attempt give up rather than hang: nothing is sealed, and the next attempt waits again.
    await client.query(`SELECT set_config('lock_timeout', $1, false)`, [`${DAY_LOCK_TIMEOUT_MS}ms`]);
    try {
      // The first seal also waits for every writer that looked before any seal existed, whatever day it stores
      // under (migration 086): one storing under a day before `day` would otherwise be in no seal.
      if (isFirst) {
        await client.query('SELECT pop_first_seal_lock()');
        firstLocked = true;
      }
      await client.query('SELECT pop_seal_day_lock($1::date)', [day]);
    } catch (error) {
      if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) return 'writers_busy';
      throw error;
    } finally {
      await client.query('RESET lock_timeout');
    }
    dayLocked = true;
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    try {
      const outcome = await sealInTransaction(ctx, client, authority, day, isFirst);
      await client.query(outcome === 'out_of_order' || !outcome.created ? 'ROLLBACK' : 'COMMIT');
      return outcome;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      // The primary key is the last line of defence: someone sealed the day after all.
      if (isUniqueViolation(error)) return 'out_of_order';
      throw error;
    }
  } finally {
    // A connection that cannot unlock is closed instead: ending the session releases its locks.
    let unlocked = true;
    if (dayLocked) {
      unlocked = await client.query('SELECT pop_seal_day_unlock($1::date)', [day]).then(
        () => true,
        () => false,
      );
    }
    if (firstLocked && unlocked) {
      unlocked = await client.query('SELECT pop_first_seal_unlock()').then(
        () => true,
        () => false,
      );
    }
    if (locked && unlocked) {
      unlocked = await client.query('SELECT pg_advisory_unlock($1)', [SEAL_LOCK]).then(
        () => true,
        () => false,
      );
    }
    client.release(!unlocked);
  }
}

/** Whether a batch is stored under a day before `day`. */
async function storedBefore(client: DbClient, day: string): Promise<boolean> {
  const { rows } = await client.query('SELECT 1 FROM pop_batches WHERE receive_day < $1::date LIMIT 1', [
    day,
  ]);
  return rows.length > 0;
}

async function sealInTransaction(
  ctx: Pick<PlatformContext, 'clock' | 'config'>,
  client: DbClient,
  authority: Authority,
  day: string,
  isFirst: boolean,
): Promise<Exclude<SealOutcome, 'busy' | 'writers_busy'>> {
  const existing = await findSeal(client, day);
  if (existing) return { seal: existing, created: false };
  const previous = await lastSeal(client);
  if (previous ? previous.day !== addDays(day, -1) : !isFirst) return 'out_of_order';
  // The chain starts at the earliest day anything was stored under: a batch of an earlier day, committed while this
  // seal waited for its writer (migration 086), moves the start back (sealUpTo looks again).
  if (!previous && (await storedBefore(client, day))) return 'out_of_order';
  const leaves = await computeDayLeaves(client, day);
  const body = sealBody({
    // A day sealed under a settable clock is a test seal whatever PLATFORM_ENV says (loadConfig refuses prod with
    // --test-clock; this covers a configuration built in code).
    env: ctx.config.testClock ? 'test' : ctx.config.env,
    day,
    leaves,
    prevSealSha256: previous ? previous.body_sha256 : ZERO_SHA256,
  });
  const bodyBytes = Buffer.from(canonicalize(body), 'utf8');
  const bodySha256 = nodeHash('sha256', bodyBytes, 'hex');
  const now = ctx.clock.now();
  const signedAt = wholeSeconds(now);
  const signature = Buffer.from(
    await cmsSign({
      content: bodyBytes,
      signerCertificatePem: authority.sealSigner.certPem,
      signerKey: authority.sealSigner.key,
      signingTime: signedAt,
      // The issuing CA travels in the signature, so the root alone verifies it (DESIGN.md section 4).
      extraCertificatesPem: authority.chainPem,
    }),
  );
  // DESIGN.md section 6: a 'stats_seal' leaf in the ledger of the day the seal is made.
  const leaf = await recordLedgerLeaf(
    client,
    { kind: 'stats_seal', manifestSha256: bodySha256, signedAt },
    now,
  );
  const seal: SealRow = {
    day,
    prev_day: previous ? previous.day : null,
    signed_at: signedAt,
    body: bodyBytes,
    body_sha256: bodySha256,
    signature,
    ledger_leaf_id: leaf.id,
  };
  await insertSeal(client, seal);
  return { seal, created: true };
}

const MAX_RETRIES = 5;

/** The first day of the seal chain: the first seal's, else the earliest activity, else `fallback`. */
async function chainStartDay(db: Db, fallback: string | null): Promise<string | null> {
  return (await firstSealDay(db)) ?? (await earliestActivityDay(db)) ?? fallback;
}

/**
 * Seals every ended, unsealed day from the first unsealed one up to `day`, in order, one transaction each.
 * `wait`: block on the sealing lock (console, tests) or stop when another instance holds it (scheduler).
 * Returns the seals it made.
 */
export async function sealUpTo(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'caches'>,
  day: string,
  options: { wait: boolean },
): Promise<SealRow[]> {
  const made: SealRow[] = [];
  let authority: Authority | null = null;
  let retries = 0;
  for (;;) {
    const last = await lastSeal(ctx.db);
    const next = last ? addDays(last.day, 1) : await chainStartDay(ctx.db, day);
    if (next === null || next > day) return made;
    // spec: "a day is sealed once, after it is over".
    if (ctx.clock.now().getTime() < almatyDayEnd(next).getTime()) return made;
    authority ??= await loadAuthority(ctx);
    const outcome = await sealOne(ctx, authority, next, last === null, options.wait);
    if (outcome === 'busy') return made;
    if (outcome === 'writers_busy') {
      if (options.wait) {
        throw new SealError('busy', `batches of ${next} are still being stored; try again in a moment`);
      }
      return made;
    }
    // Another instance sealed meanwhile: look again (a few times; more means something else is wrong).
    if (outcome === 'out_of_order') {
      retries += 1;
      if (retries > MAX_RETRIES) throw new SealError('busy', `day ${next} could not be sealed in order`);
      continue;
    }
    retries = 0;
    if (outcome.created) made.push(outcome.seal);
  }
}

/**
 * Seals `day` now if it is not sealed yet (and, first, any unsealed day before it: the chain has no gaps).
 * Idempotent: returns the seal, new or existing, and whether this call made it.
 */
export async function sealDay(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'caches'>,
  day: string,
): Promise<{ seal: SealRow; created: boolean }> {
  const existing = await findSeal(ctx.db, day);
  if (existing) return { seal: existing, created: false };
  if (ctx.clock.now().getTime() < almatyDayEnd(day).getTime()) {
    throw new SealError('day_not_ended', `day ${day} has not ended yet (Asia/Almaty)`);
  }
  const first = await chainStartDay(ctx.db, day);
  if (first !== null && day < first) {
    throw new SealError('before_first_day', `the seal chain starts on ${first}; ${day} is before it`);
  }
  const made = await sealUpTo(ctx, day, { wait: true });
  const seal = made.find((s) => s.day === day) ?? (await findSeal(ctx.db, day));
  if (!seal) throw new SealError('busy', `day ${day} could not be sealed`);
  return { seal, created: made.some((s) => s.day === day) };
}

/**
 * The scheduler seals a day this long after it ends: another instance whose clock runs a little behind may still
 * be receiving batches for it (the console route seals at once: an operator's explicit decision).
 */
export const SCHEDULER_GRACE_MS = 30_000;

/** Seals every ended, unsealed day up to yesterday (scheduler), once SCHEDULER_GRACE_MS have passed. */
export async function sealEndedDays(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'caches'>,
): Promise<SealRow[]> {
  const yesterday = addDays(almatyDate(new Date(ctx.clock.now().getTime() - SCHEDULER_GRACE_MS)), -1);
  return sealUpTo(ctx, yesterday, { wait: false });
}
