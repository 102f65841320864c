import type { PlatformContext } from '../context.js';

/**
 * Background work on a short setTimeout loop: every `intervalMs` the work runs with the injected clock's time (never
 * one long timer aimed at a future instant, which a moved test clock or a suspended machine would miss). Runs never
 * overlap; an error is logged and the loop goes on. The returned function stops the loop and waits for a run in
 * progress.
 */
export function startTicker(
  ctx: Pick<PlatformContext, 'clock' | 'log'>,
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
    running = work(ctx.clock.now())
      .catch((error: unknown) => ctx.log.error({ err: error, ticker: name }, 'background work failed'))
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
