import { readAtMost } from '../http/read-at-most.js';

/**
 * Where the verifier reads public data: the verify host over HTTP. Only public GET routes are used
 * (/v1/stats-seals/{day}, /v1/approvals/{number}, /v1/revocations.json, /v1/ledger/blocks/{day}, /v1/ledger/head,
 * /v1/authority-root.pem).
 */
export interface PublicSource {
  /** The URL the data comes from, for messages. */
  readonly origin: string;
  get(path: string): Promise<{ status: number; body: Buffer }>;
}

/**
 * The verify host could not be read: unreachable, an answer too large, or an answer that says the host itself failed
 * (5xx, or still 429 after the retries). The CLI exits 2 for it ("a host it cannot read"): it is not a check that
 * failed, which exit 1 keeps meaning.
 */
export class SourceError extends Error {
  /** The HTTP status the host answered with, when it answered. */
  readonly status: number | undefined;
  constructor(message: string, options?: { cause?: unknown; status?: number }) {
    super(message, options);
    this.name = 'SourceError';
    this.status = options?.status;
  }
}

const MAX_RATE_LIMITED_RETRIES = 8;
/** Seals, blocks, checkpoints, timestamp tokens and the root certificate are kilobytes; this bound is far above. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
const MAX_RETRY_AFTER_SECONDS = 120;

/**
 * A verify host reached with fetch. spec: "429 rate_limited ... Retry-After gives seconds to wait": the source
 * waits and asks again, a bounded number of times.
 */
export function httpSource(
  verifyUrl: string,
  options: { sleep?: (ms: number) => Promise<void>; fetch?: typeof fetch } = {},
): PublicSource {
  const base = verifyUrl.replace(/\/+$/, '');
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const doFetch = options.fetch ?? fetch;
  return {
    origin: base,
    async get(path: string) {
      for (let attempt = 0; ; attempt += 1) {
        let response: Response;
        try {
          response = await doFetch(`${base}${path}`, { redirect: 'error' });
        } catch (error) {
          throw new SourceError(`GET ${base}${path}: ${(error as Error).message}`, { cause: error });
        }
        // A dishonest host could answer without end: the CLI holds at most a bound of any answer.
        const { body, truncated } = await readAtMost(response, MAX_ANSWER_BYTES);
        if (truncated) {
          throw new SourceError(
            `GET ${base}${path}: the answer is larger than ${MAX_ANSWER_BYTES / 1024 / 1024} MB, more than any document of a verify host`,
          );
        }
        if (response.status === 429 && attempt < MAX_RATE_LIMITED_RETRIES) {
          const seconds = Number(response.headers.get('retry-after'));
          const wait =
            Number.isFinite(seconds) && seconds >= 0 ? Math.min(seconds, MAX_RETRY_AFTER_SECONDS) : 1;
          await sleep(wait * 1000);
          continue;
        }
        // A host that is down behind its proxy (5xx), or still busy after the retries, has said nothing about the
        // data: "could not read the verify host" (exit 2), never "a check failed" (exit 1), which would be read as
        // tampering. A 4xx is an answer about the data (404: no such seal) and is the checks' to judge.
        if (response.status >= 500 || response.status === 429) {
          throw new SourceError(`GET ${base}${path}: answered HTTP ${response.status}`, {
            status: response.status,
          });
        }
        return { status: response.status, body };
      }
    },
  };
}
