import type { FastifyReply, FastifyRequest } from 'fastify';
import type { PlatformConfig } from '../config.js';
import type { SessionSettings } from './settings.js';

/** The console session cookie (issue "The console"): HttpOnly, SameSite=Strict, Path=/. */
export const SESSION_COOKIE = 'ooh_session';
/** Header that must repeat the session's CSRF token on unsafe methods. */
export const CSRF_HEADER = 'x-csrf-token';

const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** The session token of the request's Cookie header, if it holds a well-formed one. */
export function sessionToken(request: FastifyRequest): string | null {
  const header = request.headers.cookie;
  if (typeof header !== 'string') return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== SESSION_COOKIE) continue;
    const value = part.slice(eq + 1).trim();
    return TOKEN.test(value) ? value : null;
  }
  return null;
}

/**
 * Secure is set when the request came over HTTPS, when the public api URL is https (TLS ends at a proxy in
 * front of the platform), or always/never when configured so.
 */
function secure(request: FastifyRequest, config: PlatformConfig, settings: SessionSettings): boolean {
  if (settings.cookieSecure !== 'auto') return settings.cookieSecure === 'always';
  return request.protocol === 'https' || config.publicUrls.api.startsWith('https:');
}

export function setSessionCookie(
  reply: FastifyReply,
  request: FastifyRequest,
  token: string,
  maxAgeSeconds: number,
  config: PlatformConfig,
  settings: SessionSettings,
): void {
  const attributes = [
    `${SESSION_COOKIE}=${token}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${maxAgeSeconds}`,
  ];
  if (secure(request, config, settings)) attributes.push('Secure');
  reply.header('set-cookie', attributes.join('; '));
}

export function clearSessionCookie(
  reply: FastifyReply,
  request: FastifyRequest,
  config: PlatformConfig,
  settings: SessionSettings,
): void {
  setSessionCookie(reply, request, '', 0, config, settings);
}
