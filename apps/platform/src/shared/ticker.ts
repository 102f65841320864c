import { performance } from 'node:perf_hooks';
import type { PlatformCaches, PlatformContext } from '../context.js';
import { isDatabaseConnectionLoss, reportConnectionLoss } from '../logging.js';

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
