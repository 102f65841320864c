import { almatyDate } from '@ooh/protocol';
import type { PlatformContext } from '../context.js';
import { digestEndedLedgerDays } from '../ledger/digest.js';
import { startTicker } from '../shared/ticker.js';
import { recordFirstDay, type SealRow } from './repository.js';
import { sealEndedDays } from './seal.js';

/** How often the scheduler looks for ended days. Short, so a moved test clock is noticed quickly. */
export const DEFAULT_SEAL_INTERVAL_MS = 5000;

export interface SchedulerRun {
  seals: SealRow[];
  blocks: { day: string; block_height: number }[];
}

/**
 * One pass of the scheduler (DESIGN.md section 6): records the platform's first day, seals every ended unsealed day
 * in order (a day missed while the platform was down is sealed when it comes back, before later days), then digests
 * every ended ledger day in order. Whatever another instance is doing meanwhile is skipped, not waited for.
 */
export async function runSealScheduler(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'caches'>,
): Promise<SchedulerRun> {
  const now = ctx.clock.now();
  await recordFirstDay(ctx.db, almatyDate(now), now);
  const seals = await sealEndedDays(ctx);
  const blocks = await digestEndedLedgerDays(ctx);
  return { seals, blocks: blocks.map((b) => ({ day: b.day, block_height: b.block_height })) };
}

/**
 * Runs the scheduler now and then every `intervalMs` (a chain of short timers, never one long timer: the clock is
 * injected and may jump). Returns a stop function that waits for a pass under way.
 */
export function startSealScheduler(
  ctx: Pick<PlatformContext, 'db' | 'clock' | 'config' | 'log' | 'caches'>,
  options: { intervalMs?: number } = {},
): () => Promise<void> {
  return startTicker(ctx, 'seals', options.intervalMs ?? DEFAULT_SEAL_INTERVAL_MS, async () => {
    const { seals, blocks } = await runSealScheduler(ctx);
    for (const seal of seals) ctx.log.info({ day: seal.day, body_sha256: seal.body_sha256 }, 'day sealed');
    for (const block of blocks) ctx.log.info(block, 'ledger block digested');
  });
}
