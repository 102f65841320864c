import { validationFailed } from '../http/problem.js';
import { resolveTarget, targetPolicy } from './targets.js';

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
  const target = await resolveTarget(url, targetPolicy(settings));
  if (!target.ok && target.why !== 'unresolvable') {
    throw validationFailed([{ path: '/url', code: 'not_allowed', message: target.reason }]);
  }
  return url;
}
