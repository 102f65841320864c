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
  timeoutMs?: number;
  /** Largest response body read; a longer one is an error. */
  maxResponseBytes?: number;
}

/**
 * HTTP(S) with undici. Plain requests share one pool; each client-certificate pair gets its own Agent
 * (`connect: {cert, key, ca}`), because TLS client identity is fixed per connection. Server certificates are
 * always verified: there is no switch to turn that off.
 */
export function createHttpClient(options: HttpClientOptions = {}): HttpClient {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const maxBytes = options.maxResponseBytes ?? 16 * 1024 * 1024;
  const plain =
    options.dispatcher ??
    new Agent({
      connect: {
        ...(options.serverCaPem ? { secureContext: createSecureContext({ ca: options.serverCaPem }) } : {}),
        timeout: timeoutMs,
      },
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
      agent = new Agent({ connect: { secureContext, timeout: timeoutMs } });
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
    const response = await request(url, {
      method,
      headers,
      ...(body ? { body } : {}),
      dispatcher: dispatcherFor(tls),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of response.body) {
      const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      total += buffer.length;
      if (total > maxBytes) {
        response.body.destroy();
        throw new Error(`response from ${url} exceeds ${maxBytes} bytes`);
      }
      chunks.push(buffer);
    }
    const flat: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(response.headers)) {
      flat[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
    }
    return { status: response.statusCode, headers: flat, body: Buffer.concat(chunks) };
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
 * Every answer of the platform carries a `Date` header (DESIGN.md §5: "the agent may use [it] to correct its
 * clock"): this client hands each one to the clock, so the first call of a run (the revocation list, a
 * renewal, a batch) sets the clock, not only a batch's answer.
 */
export function observeServerDates(http: HttpClient, clock: DateObserver): HttpClient {
  const observed = async (call: () => Promise<HttpResponse>): Promise<HttpResponse> => {
    const sentAt = clock.baseNow();
    const response = await call();
    clock.observeServerDate(response.headers['date'], sentAt, clock.baseNow());
    return response;
  };
  return {
    post: (url, body, headers, tls) => observed(() => http.post(url, body, headers, tls)),
    get: (url, tls) => observed(() => http.get(url, tls)),
    close: () => http.close(),
  };
}
