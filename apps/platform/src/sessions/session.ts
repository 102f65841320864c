import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { SessionResolver } from '../auth/plugin.js';
import type { Principal } from '../auth/principal.js';
import type { PlatformContext } from '../context.js';
import { ProblemError } from '../http/problem.js';
import { CSRF_HEADER, sessionToken } from './cookies.js';
import { findSession, type SessionRow, touchSession } from './repository.js';
import { sessionScopes } from './scopes.js';
import { type SessionSettings, sessionSettings } from './settings.js';

/** A new session token (cookie value, 32 random bytes) and the id stored for it (its SHA-256). */
export function newSessionToken(): { token: string; id: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, id: sessionIdOf(token) };
}

export function sessionIdOf(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function newCsrfToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Expired when idle for longer than the idle timeout, or past its absolute end. */
export function isExpired(
  session: Pick<SessionRow, 'last_seen_at' | 'expires_at'>,
  now: Date,
  settings: SessionSettings,
) {
  return (
    now.getTime() >= session.expires_at.getTime() ||
    now.getTime() - session.last_seen_at.getTime() > settings.idleTimeoutMs
  );
}

/**
 * The request's console session: null without a (known) session cookie or for a disabled user, 'expired' for a
 * session past its idle timeout or end. Does not check CSRF and does not mark activity.
 */
export async function currentSession(
  ctx: PlatformContext,
  settings: SessionSettings,
  request: FastifyRequest,
): Promise<SessionRow | 'expired' | null> {
  const token = sessionToken(request);
  if (token === null) return null;
  const session = await findSession(ctx.db, sessionIdOf(token));
  if (!session || session.user.disabled_at !== null) return null;
  if (isExpired(session, ctx.clock.now(), settings)) return 'expired';
  return session;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Unsafe methods with a session cookie must repeat the session's CSRF token (403 forbidden otherwise). */
export function requireCsrf(request: FastifyRequest, session: SessionRow): void {
  if (SAFE_METHODS.has(request.method)) return;
  const given = request.headers[CSRF_HEADER];
  const expected = Buffer.from(session.csrf_token, 'utf8');
  const presented = Buffer.from(typeof given === 'string' ? given : '', 'utf8');
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) {
    throw new ProblemError(
      'forbidden',
      'a console session must send its CSRF token in X-CSRF-Token on this method',
    );
  }
}

/**
 * The principal of a console session: the user's organisation with the scopes of its kind and the user's role.
 * id is the console user's id (stable for audit records; the session id changes at every sign-in).
 */
export function sessionPrincipal(session: SessionRow): Principal {
  const { user } = session;
  return {
    type: 'session',
    id: user.id,
    organisation: { id: user.organisation_id, name: user.organisation_name, kind: user.organisation_kind },
    scopes: new Set(sessionScopes(user.organisation_kind, user.role)),
    routes: null,
  };
}

/**
 * The session resolver for authenticateRoutes (src/auth/plugin.ts): API keys are tried first by the plugin; this
 * answers a session principal, null (no session: 401 unauthenticated) or 'expired' (401 session_expired), and
 * refuses an unsafe method without the CSRF token (403 forbidden).
 */
export function consoleSessionResolver(
  ctx: PlatformContext,
  settings: SessionSettings = sessionSettings(ctx.config.settings),
): SessionResolver {
  return async (request) => {
    const session = await currentSession(ctx, settings, request);
    if (session === null || session === 'expired') return session;
    requireCsrf(request, session);
    await touchSession(ctx.db, session.id, ctx.clock.now());
    return sessionPrincipal(session);
  };
}
