import type { FastifyReply, FastifyRequest } from 'fastify';
import type { PlatformConfig } from '../config.js';
import type { SessionSettings } from './settings.js';

/** The console session cookie (issue "The console"): HttpOnly, SameSite=Strict, Path=/. */
export const SESSION_COOKIE = 'ooh_session';
/** Header that must repeat the session's CSRF token on unsafe methods. */
export const CSRF_HEADER = 'x-csrf-token';

const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** The browser's device cookie (migration 067): set at sign-in, sent back to the sign-in route only. */
export const DEVICE_COOKIE = 'ooh_device';
/** A browser stays known for half a year after its last sign-in. */
export const DEVICE_COOKIE_MAX_AGE_SECONDS = 183 * 24 * 3600;

/** The value of cookie `name` in the request's Cookie header, if it is a well-formed token. */
function cookieToken(request: FastifyRequest, name: string): string | null {
  const header = request.headers.cookie;
  if (typeof header !== 'string') return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    return TOKEN.test(value) ? value : null;
  }
  return null;
}

/** The session token of the request's Cookie header, if it holds a well-formed one. */
export function sessionToken(request: FastifyRequest): string | null {
  return cookieToken(request, SESSION_COOKIE);
}

/** The device token of the request's Cookie header, if it holds a well-formed one. */
export function deviceToken(request: FastifyRequest): string | null {
  return cookieToken(request, DEVICE_COOKIE);
}

/** Sets the device cookie: HttpOnly, SameSite=Strict, sent only to the sign-in route. */
export function setDeviceCookie(
  reply: FastifyReply,
  request: FastifyRequest,
  token: string,
  config: PlatformConfig,
  settings: SessionSettings,
): void {
  const attributes = [
    `${DEVICE_COOKIE}=${token}`,
    'Path=/api/v1/console/session',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${DEVICE_COOKIE_MAX_AGE_SECONDS}`,
  ];
  if (secure(request, config, settings)) attributes.push('Secure');
  reply.header('set-cookie', attributes.join('; '));
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
