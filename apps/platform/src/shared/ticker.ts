import { performance } from 'node:perf_hooks';
import type { PlatformCaches, PlatformContext } from '../context.js';
import { isDatabaseConnectionLoss, reportConnectionLoss } from '../logging.js';

/** What one kind of background work did since the process started (served on /metrics). */
export interface BackgroundWorkTally {
  ok: number;
  failed: number;
  /** When the last run that did not throw ended, by the platform's clock. */
  lastSuccess: Date | null;
  /** How long the last run took, in seconds (whatever its outcome). */
  lastRunSeconds: number | null;
}

/**
 * The runs of a platform's background work (every startTicker loop), by the loop's name: an operator alerts on a
 * loop that keeps failing, or whose last success is old (the seal scheduler, the ledger's witnesses and timestamps,
 * the media sweep, the alerts, ...). A failure is also logged, once per run, with its error.
 */
export class BackgroundRuns {
  private readonly works = new Map<string, BackgroundWorkTally>();

  record(name: string, outcome: 'ok' | 'failed', endedAt: Date, seconds: number): void {
    let tally = this.works.get(name);
    if (!tally) {
      tally = { ok: 0, failed: 0, lastSuccess: null, lastRunSeconds: null };
      this.works.set(name, tally);
    }
    tally[outcome] += 1;
    tally.lastRunSeconds = seconds;
    if (outcome === 'ok') tally.lastSuccess = endedAt;
  }

  /** Every loop that ran at least once, by name, in the order they first ran. */
  entries(): [string, Readonly<BackgroundWorkTally>][] {
    return [...this.works];
  }
}

/**
 * Background work on a short setTimeout loop: every `intervalMs` the work runs with the injected clock's time (never
 * one long timer aimed at a future instant, which a moved test clock or a suspended machine would miss). Runs never
 * overlap; an error is logged (a lost database connection as part of its burst: reportConnectionLoss) and the loop
 * goes on. Each run is counted in the platform's BackgroundRuns (ctx.caches.background), when the context has them.
 * The returned function stops the loop and waits for a run in progress.
 */
export function startTicker(
  ctx: Pick<PlatformContext, 'clock' | 'log'> & { caches?: Pick<PlatformCaches, 'background'> },
  name: string,
  intervalMs: number,
  work: (now: Date) => Promise<void>,
): () => Promise<void> {
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  const tick = () => {
    timer = null;
    if (stopped) return;
    const started = performance.now();
    const ran = (outcome: 'ok' | 'failed') =>
      ctx.caches?.background.record(name, outcome, ctx.clock.now(), (performance.now() - started) / 1000);
    running = work(ctx.clock.now())
      .then(
        () => ran('ok'),
        (error: unknown) => {
          ran('failed');
          // A connection PostgreSQL ended under a running query (a restart) is the pool's burst, not an error a
          // scheduler adds a stack to: the next run reconnects.
          if (isDatabaseConnectionLoss(error))
            reportConnectionLoss(ctx.log, error, `background work: ${name}`);
          else ctx.log.error({ err: error, ticker: name }, 'background work failed');
        },
      )
      .finally(() => {
        running = null;
        if (!stopped) {
          timer = setTimeout(tick, intervalMs);
          timer.unref();
        }
      });
  };
  timer = setTimeout(tick, 0);
  timer.unref();
  return async () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    await running;
  };
}
