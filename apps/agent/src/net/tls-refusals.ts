import type { Clock } from '../clock.js';
import type { AgentState } from '../log/agent-state.js';
import { rfc3339 } from '../log/records.js';
import type { Logger } from '../logger.js';
import { type HttpClient, type HttpResponse, isTlsRefusal, type TransportErrorCode } from './http-client.js';

/** agent_state key: the hosts whose TLS certificate is refused now, by origin (`agent status` reads it). */
export const TLS_REFUSED_STATE_KEY = 'network.tls_refused';

/** A host of the platform whose server certificate the agent refuses (a hostile network, a DNS answer elsewhere). */
export interface TlsRefusal {
  origin: string;
  /** Why (TransportErrorCode): another CA, another host name, expired, not yet valid, another TLS failure. */
  kind: TransportErrorCode;
  detail: string;
  /** First refusal of this kind (RFC 3339), the latest, and how many calls were refused since the first. */
  since: string;
  last_at: string;
  attempts: number;
}

/** The refusals the agent's state holds, newest first. */
export function tlsRefusals(state: AgentState): TlsRefusal[] {
  const held = state.get<Record<string, TlsRefusal>>(TLS_REFUSED_STATE_KEY) ?? {};
  return Object.values(held).sort((a, b) => b.last_at.localeCompare(a.last_at));
}

/**
 * Reports the calls refused because the server's certificate is not the platform's: nothing of such a call was sent
 * (TLS comes before the request), the caller retries as after any network failure (with its backoff, records stay
 * queued), and the refusal is logged once per origin and kind, not once per retry (a player behind a hostile network
 * for a week would otherwise log it thousands of times); `agent status` shows it, with since when and how many calls.
 * The first answer from that origin clears it, and says so.
 */
export function reportTlsRefusals(
  http: HttpClient,
  options: { state: AgentState; logger: Logger; clock: Clock },
): HttpClient {
  const { state, logger, clock } = options;
  const held = () => state.get<Record<string, TlsRefusal>>(TLS_REFUSED_STATE_KEY) ?? {};

  function refused(origin: string, kind: TransportErrorCode, detail: string): void {
    const all = held();
    const at = rfc3339(clock.now());
    const before = all[origin];
    if (before?.kind === kind) {
      all[origin] = { ...before, detail, last_at: at, attempts: before.attempts + 1 };
    } else {
      all[origin] = { origin, kind, detail, since: at, last_at: at, attempts: 1 };
      logger.error(
        { origin, kind, detail },
        "the server's TLS certificate is not the platform's: nothing was sent to it; calls to it are retried and " +
          'this is said once, `agent status` shows it until it answers with the right certificate',
      );
    }
    state.set(TLS_REFUSED_STATE_KEY, all);
  }

  function answered(origin: string): void {
    const all = held();
    const before = all[origin];
    if (!before) return;
    delete all[origin];
    if (Object.keys(all).length === 0) state.delete(TLS_REFUSED_STATE_KEY);
    else state.set(TLS_REFUSED_STATE_KEY, all);
    logger.info(
      { origin, kind: before.kind, since: before.since, attempts: before.attempts },
      "the server's TLS certificate is the platform's again",
    );
  }

  const watched = async (url: string, call: () => Promise<HttpResponse>): Promise<HttpResponse> => {
    const origin = new URL(url).origin;
    try {
      const response = await call();
      answered(origin);
      return response;
    } catch (error) {
      if (isTlsRefusal(error)) refused(error.origin, error.code, error.message);
      throw error;
    }
  };
  return {
    post: (url, body, headers, tls) => watched(url, () => http.post(url, body, headers, tls)),
    get: (url, tls) => watched(url, () => http.get(url, tls)),
    close: () => http.close(),
  };
}
