/**
 * A time limit on one exchange with the platform, by an explicit timer. Not `AbortSignal.any([AbortSignal.timeout(ms),
 * signal])`: on Node 20 nothing holds the inner timeout signal, it is garbage-collected and never fires
 * (nodejs/node#57736), so a platform that accepts the connection and never answers stalled a call for undici's 300 s
 * instead of the limit. Here the timer holds the controller until the work is done, and is cleared then.
 */

/** No answer within the limit: `name` is `TimeoutError`, as for `AbortSignal.timeout`. */
export class AnswerTimeout extends Error {
  constructor(
    readonly url: string,
    readonly ms: number,
  ) {
    super(`${url} did not answer within ${ms / 1000} s`);
    this.name = 'TimeoutError';
  }
}

/**
 * Runs `work` with a signal that aborts after `ms` (reason: an {@link AnswerTimeout} for `url`) or when `outer`
 * aborts (its reason: Ctrl-C stays Ctrl-C). The timer and the listener on `outer` are removed when `work` settles.
 */
export async function withDeadline<T>(
  url: string,
  ms: number,
  outer: AbortSignal | undefined,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new AnswerTimeout(url, ms)), ms);
  const onOuterAbort = () => controller.abort(outer!.reason);
  if (outer?.aborted) controller.abort(outer.reason);
  else outer?.addEventListener('abort', onOuterAbort, { once: true });
  try {
    return await work(controller.signal);
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuterAbort);
  }
}

/**
 * Waits `ms`, or less if `signal` aborts (then resolves; the caller checks the signal). The listener on `signal` is
 * removed when the time is up: a loop of waits on one run's signal would otherwise add one per turn (Node's
 * MaxListenersExceededWarning from the 11th).
 */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
