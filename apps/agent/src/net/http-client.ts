import { createSecureContext } from 'node:tls';
import { Agent, type Dispatcher, request } from 'undici';

/** A client certificate and key for mutual TLS (the device certificate channel, DESIGN.md §2). */
export interface TlsIdentity {
  /** Stable id of this pair (e.g. the certificate serial), used to reuse connections. */
  id: string;
  keyPem: string;
  certificatePem: string;
  /** Chain up to the device CA, sent after the leaf. */
  chainPem: string;
}

export interface HttpResponse {
  status: number;
  headers: Record<string, string | undefined>;
  body: Buffer;
}

export interface HttpClient {
  post(
    url: string,
    body: Uint8Array,
    headers: Record<string, string>,
    tls?: TlsIdentity,
  ): Promise<HttpResponse>;
  get(url: string, tls?: TlsIdentity): Promise<HttpResponse>;
  close(): Promise<void>;
}

export interface HttpClientOptions {
  /** CA certificates trusted for the platform's server certificates; system roots when absent. */
  serverCaPem?: string;
  /**
   * A dispatcher used for every request instead of undici's connection pools (tests: `MockAgent`).
   * With it, mutual TLS is the dispatcher's business.
   */
  dispatcher?: Dispatcher;
  /** Connecting, and silence while waiting for the headers or between two parts of a body. */
  timeoutMs?: number;
  /**
   * The whole exchange, from the request to the last byte of the answer: a server that drips its answer a byte at a
   * time resets `timeoutMs` with every byte, never this.
   */
  deadlineMs?: number;
  /** Largest response body read; a longer one is an error. */
  maxResponseBytes?: number;
}

/** Largest response body read by default: the revocation list is the largest answer the platform gives a player. */
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
/** Largest header section of an answer (undici's default is Node's --max-http-header-size; this does not move). */
export const MAX_HEADER_BYTES = 16 * 1024;
export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_DEADLINE_MS = 120_000;

/**
 * Why an exchange got no answer the agent can use, as a stable code (STYLE.md: errors are values with codes):
 * - `tls_untrusted`: the server's certificate does not chain to `server_ca_file` (another CA, self-signed);
 * - `tls_wrong_host`: it chains, but names another host;
 * - `tls_expired`, `tls_not_yet_valid`: it chains and names the host, but is not valid by the agent's clock;
 * - `tls_refused`: any other failure to set up TLS (a plain-HTTP answer on the HTTPS port, a handshake refused);
 * - `timeout`: no complete answer within the deadline (a server that hangs or drips);
 * - `response_too_large`: a body beyond the agent's limit (cut there, never read whole);
 * - `network`: anything else (refused, reset, name not found).
 * In every `tls_*` case not one byte of the request was sent: TLS is set up before the request is written.
 */
export type TransportErrorCode =
  | 'tls_untrusted'
  | 'tls_wrong_host'
  | 'tls_expired'
  | 'tls_not_yet_valid'
  | 'tls_refused'
  | 'timeout'
  | 'response_too_large'
  | 'network';

export class TransportError extends Error {
  readonly code: TransportErrorCode;
  /** `https://host:port` of the request. */
  readonly origin: string;

  constructor(code: TransportErrorCode, origin: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TransportError';
    this.code = code;
    this.origin = origin;
  }
}

/** A failure to set up TLS with a certificate of the platform (see TransportErrorCode). */
export function isTlsRefusal(error: unknown): error is TransportError {
  return error instanceof TransportError && error.code.startsWith('tls_');
}

const TLS_UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
]);

/** The code of an error thrown by undici or node:tls (looked for along its causes). */
function errorCodes(error: unknown): string[] {
  const codes: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    current = (current as { cause?: unknown }).cause;
  }
  return codes;
}

function classify(error: unknown, origin: string, timedOut: boolean): TransportError {
  if (error instanceof TransportError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const codes = errorCodes(error);
  const has = (test: (code: string) => boolean) => codes.find(test);
  const untrusted = has((code) => TLS_UNTRUSTED.has(code));
  if (untrusted)
    return new TransportError('tls_untrusted', origin, `tls_untrusted: ${message} (${untrusted})`, {
      cause: error,
    });
  if (has((code) => code === 'ERR_TLS_CERT_ALTNAME_INVALID'))
    return new TransportError('tls_wrong_host', origin, `tls_wrong_host: ${message}`, { cause: error });
  if (has((code) => code === 'CERT_HAS_EXPIRED'))
    return new TransportError('tls_expired', origin, `tls_expired: ${message}`, { cause: error });
  if (has((code) => code === 'CERT_NOT_YET_VALID'))
    return new TransportError('tls_not_yet_valid', origin, `tls_not_yet_valid: ${message}`, { cause: error });
  const tls = has(
    (code) => code.startsWith('CERT_') || code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_'),
  );
  if (tls)
    return new TransportError('tls_refused', origin, `tls_refused: ${message} (${tls})`, { cause: error });
  if (
    timedOut ||
    has(
      (code) =>
        code === 'UND_ERR_HEADERS_TIMEOUT' ||
        code === 'UND_ERR_BODY_TIMEOUT' ||
        code === 'UND_ERR_CONNECT_TIMEOUT',
    )
  )
    return new TransportError('timeout', origin, `timeout: ${message}`, { cause: error });
  if (has((code) => code === 'UND_ERR_HEADERS_OVERFLOW'))
    return new TransportError(
      'response_too_large',
      origin,
      `response_too_large: headers beyond ${MAX_HEADER_BYTES} bytes`,
      { cause: error },
    );
  return new TransportError('network', origin, message, { cause: error });
}

/**
 * HTTP(S) with undici. Plain requests share one pool; each client-certificate pair gets its own Agent
 * (`connect: {cert, key, ca}`), because TLS client identity is fixed per connection. Server certificates are
 * always verified: there is no switch to turn that off.
 *
 * What an answer may not do (the network between player and platform is not trusted): redirect (undici's `request`
 * follows none: a 3xx is an answer like any other, its Location never visited, so no batch or CSR goes elsewhere);
 * send more than `maxResponseBytes` of body (refused from its Content-Length, else cut as it passes the limit) or
 * more than MAX_HEADER_BYTES of headers; take longer than `deadlineMs` in all; be decoded (no Accept-Encoding is
 * sent and no Content-Encoding is undone: a compressed body is bytes that do not parse). Every failure is a
 * {@link TransportError}.
 */
export function createHttpClient(options: HttpClientOptions = {}): HttpClient {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  const maxBytes = options.maxResponseBytes ?? MAX_RESPONSE_BYTES;
  const plain =
    options.dispatcher ??
    new Agent({
      connect: {
        ...(options.serverCaPem ? { secureContext: createSecureContext({ ca: options.serverCaPem }) } : {}),
        timeout: timeoutMs,
      },
      maxHeaderSize: MAX_HEADER_BYTES,
    });
  const tlsAgents = new Map<string, Agent>();

  function dispatcherFor(tls: TlsIdentity | undefined): Dispatcher {
    if (options.dispatcher || !tls) return plain;
    let agent = tlsAgents.get(tls.id);
    if (!agent) {
      // One secure context per pair, not one per connection (building it parses the key and every
      // certificate); TLS sessions are resumed from undici's per-origin session cache.
      const secureContext = createSecureContext({
        cert: joinPem(tls.certificatePem, tls.chainPem),
        key: tls.keyPem,
        ...(options.serverCaPem ? { ca: options.serverCaPem } : {}),
      });
      agent = new Agent({ connect: { secureContext, timeout: timeoutMs }, maxHeaderSize: MAX_HEADER_BYTES });
      tlsAgents.set(tls.id, agent);
    }
    return agent;
  }

  async function send(
    method: 'GET' | 'POST',
    url: string,
    body: Uint8Array | undefined,
    headers: Record<string, string>,
    tls: TlsIdentity | undefined,
  ): Promise<HttpResponse> {
    const origin = new URL(url).origin;
    const deadline = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      deadline.abort(
        new TransportError(
          'timeout',
          origin,
          `timeout: no complete answer from ${origin} within ${deadlineMs} ms`,
        ),
      );
    }, deadlineMs);
    timer.unref?.();
    try {
      const response = await request(url, {
        method,
        headers,
        ...(body ? { body } : {}),
        dispatcher: dispatcherFor(tls),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: deadline.signal,
      });
      const declared = Number(response.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) {
        response.body.destroy();
        throw new TransportError(
          'response_too_large',
          origin,
          `response_too_large: ${origin} announced ${declared} bytes, beyond ${maxBytes}`,
        );
      }
      const chunks: Buffer[] = [];
      let total = 0;
      for await (const chunk of response.body) {
        const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
        total += buffer.length;
        if (total > maxBytes) {
          response.body.destroy();
          throw new TransportError(
            'response_too_large',
            origin,
            `response_too_large: the answer from ${origin} exceeds ${maxBytes} bytes`,
          );
        }
        chunks.push(buffer);
      }
      const flat: Record<string, string | undefined> = {};
      for (const [name, value] of Object.entries(response.headers)) {
        flat[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
      }
      return { status: response.statusCode, headers: flat, body: Buffer.concat(chunks) };
    } catch (error) {
      throw classify(
        timedOut && !(error instanceof TransportError) ? deadline.signal.reason : error,
        origin,
        timedOut,
      );
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    post: (url, body, headers, tls) => send('POST', url, body, headers, tls),
    get: (url, tls) => send('GET', url, undefined, {}, tls),
    async close() {
      const agents = [...tlsAgents.values()];
      tlsAgents.clear();
      await Promise.all(agents.map((agent) => agent.close()));
      if (!options.dispatcher) await (plain as Agent).close();
    },
  };
}

function joinPem(certificatePem: string, chainPem: string): string {
  const leaf = certificatePem.trim();
  const chain = chainPem.trim();
  return chain ? `${leaf}\n${chain}\n` : `${leaf}\n`;
}

/** Reads a problem document's `code` (spec "Errors"), or undefined when the body is not one. */
export function problemCode(response: HttpResponse): string | undefined {
  try {
    const parsed: unknown = JSON.parse(response.body.toString('utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'code' in parsed) {
      const code = (parsed as { code: unknown }).code;
      return typeof code === 'string' ? code : undefined;
    }
  } catch {
    // not JSON: no code
  }
  return undefined;
}

/** What {@link observeServerDates} needs of a clock (CorrectedClock). */
export interface DateObserver {
  baseNow(): Date;
  observeServerDate(dateHeader: string | undefined, sentAt: Date, receivedAt: Date): boolean;
}

/**
 * Whether an answer may be a copy a cache on the way stored earlier and handed back now: its `Date` then says when
 * the platform made it, not the time now (RFC 9110 §6.6.1: the origin's clock when it generated the message), and a
 * clock set by it is set back by the copy's age. The platform serves the revocation list `public, max-age=60`, so a
 * proxy or CDN in front of the verify host may answer with a copy up to a minute old (more, with `stale-if-error`).
 *
 * - An `Age` above 0: a cache says it held the answer that long (RFC 9111 §5.1: "the response was not generated or
 *   validated by the origin server for this request"). Date + Age is no better: a cache counts `Age` from the
 *   `Date` by its own clock (RFC 9111 §4.2.3, `apparent_age`), so a cache whose clock is ahead adds its error, and
 *   `Age` has whole seconds.
 * - A POST's answer: never a stored copy (RFC 9111 §4: a stored answer is reused only for a request whose method
 *   allows it; RFC 9110 §9.3.3: a POST's answer may serve a later GET, never a POST). Batches, the shipper's clock
 *   probe and renewal are POSTs.
 * - A GET's answer: a copy unless it says no shared cache may store it (`Cache-Control: no-store`, RFC 9111
 *   §5.2.2.5; unqualified `private`, §5.2.2.7). Without either, a cache may store it, by its `max-age` or by heuristic
 *   (§4.2.2: a 404 too), and not every cache says so: nginx's `proxy_cache` sends no `Age`, nor does an HTTP/1.0 one.
 */
export function mayBeCachedCopy(method: 'GET' | 'POST', headers: HttpResponse['headers']): boolean {
  const age = headers['age'];
  // RFC 9111 §5.1: Age is delta-seconds; a value that is not one is a cache saying something all the same.
  if (age !== undefined && age.trim() !== '0') return true;
  if (method === 'POST') return false;
  const directives = cacheControlDirectives(headers['cache-control']);
  // A qualified `private="field"` only keeps those fields from a shared cache: the answer may still be stored.
  return !(directives.has('no-store') || directives.get('private') === null);
}

/** The directives of a Cache-Control field (RFC 9111 §5.2), lower-cased, each with its argument (null: none). */
function cacheControlDirectives(field: string | undefined): Map<string, string | null> {
  const directives = new Map<string, string | null>();
  if (!field) return directives;
  const directive = /\s*([^\s=,]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^,]*))?\s*(?:,|$)/gy;
  for (let match = directive.exec(field); match; match = directive.exec(field)) {
    const name = (match[1] ?? '').toLowerCase();
    if (!directives.has(name)) directives.set(name, match[2]?.trim() ?? null);
    if (directive.lastIndex >= field.length) break;
  }
  return directives;
}

/**
 * Every answer of the platform carries a `Date` header (DESIGN.md §5: "the agent may use [it] to correct its
 * clock"): this client hands the clock each one that the platform made for this very request, so the first call
 * of a run that POSTs (a batch, the shipper's clock probe, a renewal) sets the clock, not only a batch's answer.
 * An answer a cache may have kept ({@link mayBeCachedCopy}: the revocation list) is not the time now.
 */
export function observeServerDates(http: HttpClient, clock: DateObserver): HttpClient {
  const observed = async (
    method: 'GET' | 'POST',
    call: () => Promise<HttpResponse>,
  ): Promise<HttpResponse> => {
    const sentAt = clock.baseNow();
    const response = await call();
    if (!mayBeCachedCopy(method, response.headers)) {
      clock.observeServerDate(response.headers['date'], sentAt, clock.baseNow());
    }
    return response;
  };
  return {
    post: (url, body, headers, tls) => observed('POST', () => http.post(url, body, headers, tls)),
    get: (url, tls) => observed('GET', () => http.get(url, tls)),
    close: () => http.close(),
  };
}
