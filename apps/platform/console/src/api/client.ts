/**
 * The console talks only to the public and console APIs of the api host (same origin, session cookie) and to the
 * public verify host. Problem documents become ApiError with their stable code.
 */
export interface FieldError {
  path: string;
  code: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly errors: FieldError[] = [],
    readonly retryAfterSeconds: number | null = null,
  ) {
    super(detail || code);
    this.name = 'ApiError';
  }
}

let csrfToken: string | null = null;
let onSessionLost: ((code: 'session_expired' | 'unauthenticated') => void) | null = null;

export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

/** Called when an API call finds the session gone (expired or signed out elsewhere). */
export function onSessionEnded(handler: (code: 'session_expired' | 'unauthenticated') => void): void {
  onSessionLost = handler;
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

async function problemOf(response: Response): Promise<ApiError> {
  let code = 'http_error';
  let detail = `${response.status} ${response.statusText}`;
  let errors: FieldError[] = [];
  try {
    const doc = (await response.json()) as { code?: unknown; detail?: unknown; errors?: unknown };
    if (typeof doc.code === 'string') code = doc.code;
    if (typeof doc.detail === 'string') detail = doc.detail;
    if (Array.isArray(doc.errors)) errors = doc.errors as FieldError[];
  } catch {
    // not a problem document
  }
  const retry = Number(response.headers.get('retry-after'));
  return new ApiError(
    response.status,
    code,
    detail,
    errors,
    Number.isFinite(retry) && retry > 0 ? retry : null,
  );
}

function sessionLost(error: ApiError, path: string): void {
  if (error.status !== 401 || path === '/api/v1/console/session') return;
  if (error.code === 'session_expired' || error.code === 'unauthenticated') onSessionLost?.(error.code);
}

/**
 * A request that got no answer at all (offline, the platform down, the connection cut) rejects with the browser's own
 * TypeError ("Failed to fetch", in English whatever the page's language); it becomes the console's network_error,
 * which says what to do in the reader's language.
 */
export async function reach(request: () => Promise<Response>): Promise<Response> {
  try {
    return await request();
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiError(0, 'network_error', error instanceof Error ? error.message : String(error));
  }
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json, application/problem+json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (UNSAFE.has(method) && csrfToken) headers['x-csrf-token'] = csrfToken;
  const response = await reach(() =>
    fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }),
  );
  if (!response.ok) {
    const error = await problemOf(response);
    sessionLost(error, path);
    throw error;
  }
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

export const get = <T>(path: string) => api<T>('GET', path);
export const post = <T>(path: string, body?: unknown) => api<T>('POST', path, body ?? {});
export const put = <T>(path: string, body?: unknown) => api<T>('PUT', path, body ?? {});
export const patch = <T>(path: string, body: unknown) => api<T>('PATCH', path, body);
export const del = <T>(path: string) => api<T>('DELETE', path);

/**
 * PUT of a file as the raw body, with upload progress (fetch cannot report it). `onProgress` gets 0..1.
 */
export function uploadFile<T>(path: string, file: Blob, onProgress: (fraction: number) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', path);
    xhr.withCredentials = true;
    xhr.setRequestHeader('content-type', file.type || 'application/octet-stream');
    xhr.setRequestHeader('accept', 'application/json, application/problem+json');
    if (csrfToken) xhr.setRequestHeader('x-csrf-token', csrfToken);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onerror = () => reject(new ApiError(0, 'network_error', 'the upload did not reach the platform'));
    xhr.onload = () => {
      const text = xhr.responseText;
      let doc: Record<string, unknown> = {};
      try {
        doc = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      } catch {
        doc = {};
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(1);
        resolve(doc as T);
        return;
      }
      const error = new ApiError(
        xhr.status,
        typeof doc['code'] === 'string' ? doc['code'] : 'http_error',
        typeof doc['detail'] === 'string' ? doc['detail'] : `${xhr.status}`,
        Array.isArray(doc['errors']) ? (doc['errors'] as FieldError[]) : [],
      );
      sessionLost(error, path);
      reject(error);
    };
    xhr.send(file);
  });
}

/** The public verify host (its address comes with the page: <meta name="ooh-verify-url">). */
export function verifyUrl(): string {
  const meta = document.querySelector('meta[name="ooh-verify-url"]')?.getAttribute('content') ?? '';
  return meta.replace(/\/$/, '');
}

/** GET on the verify host, without credentials. */
export async function verifyGet<T>(path: string, as: 'json' | 'text' = 'json'): Promise<T> {
  const response = await reach(() => fetch(`${verifyUrl()}${path}`, { credentials: 'omit' }));
  if (!response.ok) throw await problemOf(response);
  return (as === 'json' ? await response.json() : await response.text()) as T;
}
