import { validationFailed } from '../http/problem.js';
import { resolveTarget, targetPolicy } from './targets.js';

/** How long a registration waits for the name servers. */
export const REGISTRATION_LOOKUP_MS = 5000;

/**
 * The URL of a new webhook subscription, as every subscription route takes it (the console's and the exchange
 * partners'): a URL, without credentials, whose target is a public address unless WEBHOOK_ALLOWED_TARGETS names it
 * (src/city-events/targets.ts). A name that does not resolve from here yet is taken: every delivery checks again.
 * Anything else is 422 validation_failed at /url.
 */
export async function subscriptionUrl(text: string, settings: NodeJS.ProcessEnv): Promise<URL> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw validationFailed([{ path: '/url', code: 'format', message: 'not a URL' }]);
  }
  if (url.username || url.password) {
    throw validationFailed([{ path: '/url', code: 'not_allowed', message: 'no credentials in the URL' }]);
  }
  // Bounded (audit K finding 2): a name server that does not answer holds a registration no longer than this; the
  // name is then taken as one that does not resolve yet, which every delivery checks again.
  let timer: NodeJS.Timeout | undefined;
  const target = await Promise.race([
    resolveTarget(url, targetPolicy(settings)),
    new Promise<{ ok: false; why: 'unresolvable'; reason: string }>((resolve) => {
      timer = setTimeout(
        () => resolve({ ok: false, why: 'unresolvable', reason: 'no answer in time' }),
        REGISTRATION_LOOKUP_MS,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  if (!target.ok && target.why !== 'unresolvable') {
    throw validationFailed([{ path: '/url', code: 'not_allowed', message: target.reason }]);
  }
  return url;
}
