import { AnswerTimeout } from '../util/deadline.js';
import { PlatformCallError, type PlatformUrls, UnexpectedAnswer } from './console-client.js';

/**
 * A failed call to the platform said for whoever runs the CLI (`player`'s steps, `run --platform`'s first look at the
 * platform): what is wrong, naming the host and the --platform option to check, and what to do.
 */
export interface CallFailure {
  what: string;
  action: string;
}

const failure = (what: string, action: string): CallFailure => ({ what, action });

const TLS_TRUST =
  /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_HAS_EXPIRED|CERT_NOT_YET_VALID|CERT_UNTRUSTED|ERR_TLS_CERT_ALTNAME_INVALID)$/;

/** The network error behind undici's "fetch failed" (its cause, or the cause's cause). */
function networkCode(error: unknown): string | null {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 4; depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && code !== 'UND_ERR_SOCKET' && e !== error) return code;
    e = e.cause;
  }
  return null;
}

/** What went wrong in a call to the platform, said for a technician: the host, the platform's answer, what to check. */
export function explainCallFailure(
  host: string,
  error: unknown,
  /** The --platform name of `host`: the one to check. */
  option: keyof PlatformUrls = 'api',
): CallFailure {
  const origin = URL.canParse(host) ? new URL(host).origin : host;
  if (error instanceof UnexpectedAnswer) {
    return failure(
      `${error.url} did not answer as the platform's ${option} host (HTTP ${error.status} ${error.contentType || 'without a content type'})`,
      `check that --platform ${option}=${origin} is the platform's ${option} host (a proxy or a captive portal may answer in its place)`,
    );
  }
  if (error instanceof PlatformCallError) {
    const answer = `HTTP ${error.status}${error.code ? ` ${error.code}` : ''}`;
    if (error.status === 401) {
      return failure(
        `the platform refused the admin key (${answer})`,
        'check --admin-key: an authority administrator API key, not revoked or expired',
      );
    }
    if (error.status === 403) {
      return failure(
        `the key may not do this (${answer})`,
        "use an authority administrator's API key (Organisations → the authority → API keys)",
      );
    }
    if (error.status === 429) {
      return failure(
        `the platform is limiting requests (${answer}${error.retryAfter ? `, retry after ${error.retryAfter} s` : ''})`,
        'wait a minute and run the command again',
      );
    }
    if (error.status >= 500) {
      return failure(
        `the platform failed (${answer})`,
        "try again in a few minutes; if it persists, tell the platform's operators the time and this structure",
      );
    }
    if (error.status === 404) {
      return failure(
        `${error.url} was not found (${answer})`,
        `check that --platform ${option}=${origin} is the platform's ${option} host`,
      );
    }
    return failure(
      `the platform refused the request (${answer}: ${error.body.slice(0, 200)})`,
      "read the platform's answer above; check the structure and the platform",
    );
  }
  const code = networkCode(error);
  if (
    (error instanceof Error && error.name === 'TimeoutError') ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT'
  ) {
    const within = error instanceof AnswerTimeout ? ` within ${error.ms / 1000} s` : ' in time';
    return failure(
      `the platform did not answer in time: no answer from ${origin}${within}`,
      'check that the platform runs and is not overloaded, and the network between this machine and it (a proxy or firewall holding connections)',
    );
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return failure(
      `the name ${URL.canParse(host) ? new URL(host).hostname : host} does not resolve (${code})`,
      "check the --platform URL and this machine's DNS",
    );
  }
  if (code && TLS_TRUST.test(code)) {
    return failure(
      `this machine does not trust the TLS certificate of ${origin} (${code})`,
      "check the --platform URL; if it is right, give this machine the platform's CA (NODE_EXTRA_CA_CERTS=ca.pem)",
    );
  }
  if (code) {
    return failure(
      `cannot reach ${origin} (${code})`,
      'check the --platform URL, that the platform runs, and the network (firewall, proxy)',
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  if (message === 'fetch failed') {
    // undici's refusals of its own (a port it will not use, say) carry a message and no code.
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : 'no answer';
    return failure(
      `cannot reach ${origin} (${cause})`,
      'check the --platform URL, that the platform runs, and the network (firewall, proxy)',
    );
  }
  return failure(message, 'run again with HARDWARE_SIM_STACK=1 and report it');
}
