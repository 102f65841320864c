/**
 * Reads of the verify host's public routes, from the page's own origin (the page is served by the verify host:
 * src/public-page). Nothing here needs, or sends, a credential.
 */
import { almatyDate, isCalendarDate } from '@ooh/protocol';

/** An answer other than 2xx: status, the problem code when there is one, Retry-After of a 429. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | null,
    readonly retryAfter: number | null,
  ) {
    super(`HTTP ${status}${code ? ` ${code}` : ''}`);
    this.name = 'HttpError';
  }
}

/** The host could not be reached, or its answer could not be read. */
export class NetworkError extends Error {
  constructor(readonly kind: 'network' | 'parse') {
    super(kind);
    this.name = 'NetworkError';
  }
}

async function request(path: string): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(path, { credentials: 'omit', headers: { accept: 'application/json, */*' } });
  } catch {
    throw new NetworkError('network');
  }
  if (!response.ok) {
    let code: string | null = null;
    try {
      const body = (await response.json()) as { code?: unknown };
      if (typeof body.code === 'string') code = body.code;
    } catch {
      // Not a problem document.
    }
    const retry = Number(response.headers.get('retry-after'));
    throw new HttpError(response.status, code, Number.isFinite(retry) && retry > 0 ? retry : null);
  }
  return response;
}

export async function getJson<T>(path: string): Promise<T> {
  const response = await request(path);
  try {
    return (await response.json()) as T;
  } catch {
    throw new NetworkError('parse');
  }
}

export async function getText(path: string): Promise<string> {
  return (await request(path)).text();
}

/** The JSON answer, or null for a 404 (a day not sealed, a block not digested, an approval that does not exist). */
export async function getJsonOrNull<T>(path: string): Promise<T | null> {
  try {
    return await getJson<T>(path);
  } catch (error) {
    if (error instanceof HttpError && error.status === 404) return null;
    throw error;
  }
}

/** The platform's Almaty day, as the verify host wrote it into the page; the browser's own as a fallback. */
export function platformToday(): string {
  const meta = document.querySelector('meta[name="ooh-today"]')?.getAttribute('content') ?? '';
  if (isCalendarDate(meta)) return meta;
  return almatyDate(Date.now());
}
