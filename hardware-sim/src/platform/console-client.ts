/**
 * The platform as the simulator reaches it: over HTTP only, with an API key, exactly as a technician's laptop
 * would (the simulator is also a field tool). Every call checks its status and throws a {@link PlatformCallError}
 * carrying the problem document's code otherwise. The spec's resources (Submission, Category, the create request, the
 * stats seal) are @ooh/protocol's; the other answers are the platform's console routes (not in the spec), typed here
 * as far as the simulator reads them.
 */
import type {
  Category,
  DeviceEvent,
  DeviceView,
  EnrolAnswer,
  OrganisationKind,
  PlayCountItem,
  StatsSeal,
  Submission,
  SubmissionCreateRequest,
} from '@ooh/protocol';
import { withDeadline } from '../util/deadline.js';

export type { DeviceEvent, DeviceView, EnrolAnswer, OrganisationKind, PlayCountItem };

export class PlatformCallError extends Error {
  constructor(
    readonly method: string,
    readonly url: string,
    readonly status: number,
    readonly code: string | null,
    readonly body: string,
    /** The answer's Retry-After header (a 429 or 503), as sent. */
    readonly retryAfter: string | null = null,
  ) {
    super(`${method} ${url}: HTTP ${status}${code ? ` ${code}` : ''}: ${body.slice(0, 500)}`);
    this.name = 'PlatformCallError';
  }
}

export interface PlatformUrls {
  api: string;
  agents: string;
  devices: string;
  verify: string;
}

const trim = (url: string) => url.replace(/\/+$/, '');

/** An answer that is not the platform API's: not JSON where JSON is its only form. */
export class UnexpectedAnswer extends Error {
  constructor(
    readonly method: string,
    readonly url: string,
    readonly status: number,
    readonly contentType: string,
    options?: { cause?: unknown },
  ) {
    super(
      `${method} ${url}: HTTP ${status} ${contentType || 'without a content type'} is not an answer of the platform's API`,
      options,
    );
    this.name = 'UnexpectedAnswer';
  }
}

export class ConsoleClient {
  readonly apiUrl: string;

  constructor(
    apiUrl: string,
    private readonly key: string,
    private readonly timeoutMs = 60_000,
    /** Aborts every call in flight and to come (the commissioning command's Ctrl-C). */
    private readonly signal?: AbortSignal,
  ) {
    this.apiUrl = trim(apiUrl);
  }

  /** The same platform with another key. */
  as(key: string): ConsoleClient {
    return new ConsoleClient(this.apiUrl, key, this.timeoutMs, this.signal);
  }

  async call<T>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    body?: unknown,
    options: { expect?: number[]; raw?: { bytes: Uint8Array; type: string }; answer?: 'json' | 'text' } = {},
  ): Promise<T> {
    const url = `${this.apiUrl}${path}`;
    const headers: Record<string, string> = { authorization: `Bearer ${this.key}` };
    let payload: Uint8Array | string | undefined;
    if (options.raw) {
      headers['content-type'] = options.raw.type;
      payload = options.raw.bytes;
    } else if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    // The limit covers the answer's body too: a platform may send its headers and then stall.
    const { response, text } = await withDeadline(url, this.timeoutMs, this.signal, async (signal) => {
      const answer = await fetch(url, {
        method,
        headers,
        ...(payload !== undefined ? { body: payload } : {}),
        signal,
      });
      return { response: answer, text: await answer.text() };
    });
    const expected = options.expect ?? [200, 201];
    if (!expected.includes(response.status)) {
      throw new PlatformCallError(
        method,
        url,
        response.status,
        problemCode(text),
        text,
        response.headers.get('retry-after'),
      );
    }
    if (text === '') return undefined as T;
    const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
    if (options.answer === 'text') return text as T;
    // Parse, don't trust: a page that is not the API's (a captive portal, a proxy's default page) answering 200 would
    // otherwise reach the caller as its typed answer.
    if (type !== 'application/json' && !type.endsWith('+json')) {
      throw new UnexpectedAnswer(method, url, response.status, type);
    }
    try {
      return JSON.parse(text) as T;
    } catch (cause) {
      throw new UnexpectedAnswer(method, url, response.status, type, { cause });
    }
  }

  // --- organisations, keys, structures (authority administrator) ---

  createOrganisation(
    name: string,
    kind: OrganisationKind,
  ): Promise<{ id: string; name: string; kind: string }> {
    return this.call('POST', '/api/v1/console/organisations', { name, kind });
  }

  listOrganisations(): Promise<{ items: { id: string; name: string; kind: string }[] }> {
    return this.call('GET', '/api/v1/console/organisations');
  }

  createApiKey(organisationId: string, name: string, scopes: string[]): Promise<{ id: string; key: string }> {
    return this.call('POST', `/api/v1/console/organisations/${organisationId}/api-keys`, { name, scopes });
  }

  revokeApiKey(id: string): Promise<void> {
    return this.call('DELETE', `/api/v1/console/api-keys/${id}`, undefined, { expect: [204] });
  }

  createStructure(fields: {
    organisation_id: string;
    code: string;
    district: string;
    format: string;
  }): Promise<{ id: string; code: string }> {
    return this.call('POST', '/api/v1/console/structures', fields);
  }

  // --- devices ---

  enrolDevice(body: { structure_id: string; public_key: string; csr?: string }): Promise<EnrolAnswer> {
    return this.call('POST', '/api/v1/console/devices', body);
  }

  device(id: string): Promise<DeviceView> {
    return this.call('GET', `/api/v1/console/devices/${id}`);
  }

  revokeDevice(id: string): Promise<DeviceView> {
    return this.call('POST', `/api/v1/console/devices/${id}/revoke`);
  }

  // --- submissions and approvals ---

  categories(): Promise<{ items: Category[] }> {
    return this.call('GET', '/api/v1/categories');
  }

  createSubmission(body: SubmissionCreateRequest): Promise<Submission> {
    return this.call('POST', '/api/v1/submissions', body);
  }

  uploadMedia(
    submissionId: string,
    bytes: Uint8Array,
    type: string,
  ): Promise<{ media_sha256: string; width: number; height: number; duration_ms: number | null }> {
    return this.call('PUT', `/api/v1/submissions/${submissionId}/media`, undefined, { raw: { bytes, type } });
  }

  sendSubmission(submissionId: string): Promise<{ state: string }> {
    return this.call('POST', `/api/v1/submissions/${submissionId}/send`);
  }

  approve(
    submissionId: string,
    body: { valid_from?: string; valid_until?: string; structure_ids?: string[] } = {},
  ): Promise<{ approval_number: string; envelope_url: string }> {
    return this.call('POST', `/api/v1/console/submissions/${submissionId}/approve`, body);
  }

  revokeApproval(
    approvalNumber: string,
    reason: string,
  ): Promise<{ approval_number: string; revoked_at: string; revocation_list_version: number }> {
    return this.call('POST', `/api/v1/console/approvals/${approvalNumber}/revoke`, { reason });
  }

  /** The signed envelope document, as text (its bytes are what a player receives as the sidecar). */
  async envelope(approvalNumber: string): Promise<string> {
    const url = `${this.apiUrl}/api/v1/approvals/${approvalNumber}/envelope`;
    const { response, text } = await withDeadline(url, this.timeoutMs, this.signal, async (signal) => {
      const answer = await fetch(url, { headers: { authorization: `Bearer ${this.key}` }, signal });
      return { response: answer, text: await answer.text() };
    });
    if (response.status !== 200)
      throw new PlatformCallError(
        'GET',
        url,
        response.status,
        problemCode(text),
        text,
        response.headers.get('retry-after'),
      );
    return text;
  }

  // --- proof of play, seals, test clock ---

  playCounts(
    filter: { from?: string; to?: string; approval_number?: string; player?: string } = {},
  ): Promise<{ items: PlayCountItem[] }> {
    const query = new URLSearchParams(
      Object.entries(filter).filter((entry): entry is [string, string] => entry[1] !== undefined),
    ).toString();
    return this.call('GET', `/api/v1/console/pop/counts${query ? `?${query}` : ''}`);
  }

  deviceEvents(
    deviceId: string,
    kind?: 'reject' | 'mode_change' | 'tamper',
  ): Promise<{ items: DeviceEvent[] }> {
    return this.call('GET', `/api/v1/console/pop/devices/${deviceId}/events${kind ? `?kind=${kind}` : ''}`);
  }

  /** Seals an ended day now unless it is sealed already (idempotent): the day's StatsSeal. */
  seal(day: string): Promise<StatsSeal> {
    return this.call('POST', `/api/v1/console/seals/${day}`);
  }

  sealBatches(day: string): Promise<string> {
    return this.call('GET', `/api/v1/console/seals/${day}/batches`, undefined, { answer: 'text' });
  }

  setClock(now: Date, frozen = true): Promise<{ now: string; frozen: boolean }> {
    return this.call('PUT', '/api/v1/console/clock', { now: now.toISOString(), frozen });
  }

  clock(): Promise<{ now: string; frozen: boolean }> {
    return this.call('GET', '/api/v1/console/clock');
  }
}

/** The public verify host (no credentials). */
export async function fetchPublic(
  verifyUrl: string,
  path: string,
): Promise<{ status: number; text: string }> {
  const url = `${trim(verifyUrl)}${path}`;
  return withDeadline(url, 60_000, undefined, async (signal) => {
    const response = await fetch(url, { signal });
    return { status: response.status, text: await response.text() };
  });
}

function problemCode(text: string): string | null {
  try {
    const parsed: unknown = JSON.parse(text);
    if (
      typeof parsed === 'object' &&
      parsed !== null &&
      typeof (parsed as { code?: unknown }).code === 'string'
    ) {
      return (parsed as { code: string }).code;
    }
  } catch {
    // not a problem document
  }
  return null;
}
