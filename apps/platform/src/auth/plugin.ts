import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../db/pool.js';
import { ProblemError } from '../http/problem.js';
import { findApiKeyPrincipal, KeyUse } from './api-keys.js';
import type { Principal, RouteAuth } from './principal.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
}

/** A console session resolver can be plugged in beside API keys (console issue). */
export type SessionResolver = (request: FastifyRequest) => Promise<Principal | null | 'expired'>;

export interface AuthOptions {
  db: Db;
  /** The platform clock: keys expire, and their last use is recorded, in its time. */
  now: () => Date;
  sessions?: SessionResolver;
}

/**
 * Authenticates every route registered inside `scope` (an encapsulated plugin
 * context: public routes live in their own context, never exempted by URL).
 * Order of refusals: 401 unauthenticated / invalid_api_key / session_expired,
 * then 403 key_scope_denied, key_route_denied, forbidden (spec "Authentication").
 */
export function authenticateRoutes(scope: FastifyInstance, options: AuthOptions): void {
  scope.addHook('onRoute', (route) => {
    if (!route.config || !(route.config as { auth?: RouteAuth }).auth) {
      throw new Error(
        `route ${route.method} ${route.url} is in an authenticated context but declares no auth`,
      );
    }
  });
  // onRequest: before a byte of the body is read, inflated or parsed (issue "Trust under attack", item 3: "no work
  // is done for a caller who has not shown a credential"). Credentials are headers (Authorization, the session
  // cookie and its CSRF header); the route's auth requirement is known from routing. A refused request's body is
  // never read: the connection closes after the answer (http/server.ts).
  const keyUse = new KeyUse(options.db, (error) =>
    scope.log.warn({ err: error }, 'API key use not recorded'),
  );
  scope.addHook('onRequest', async (request) => {
    request.principal = await authenticate(request, options, keyUse);
    authorize(request, request.principal);
  });
}

async function authenticate(
  request: FastifyRequest,
  options: AuthOptions,
  keyUse: KeyUse,
): Promise<Principal> {
  const header = request.headers.authorization;
  if (header !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new ProblemError('invalid_api_key', 'Authorization must be "Bearer <API key>"');
    const now = options.now();
    const principal = await findApiKeyPrincipal(options.db, match[1]!, now);
    if (!principal) throw new ProblemError('invalid_api_key', 'the API key is unknown, revoked or expired');
    keyUse.note(principal.id, now);
    return principal;
  }
  if (options.sessions) {
    const session = await options.sessions(request);
    if (session === 'expired') throw new ProblemError('session_expired', 'the console session has expired');
    if (session) return session;
  }
  throw new ProblemError('unauthenticated', 'send an API key (Authorization: Bearer <key>) or sign in');
}

export function routeId(request: FastifyRequest): string {
  return `${request.method} ${request.routeOptions.url ?? request.url}`;
}

function authorize(request: FastifyRequest, principal: Principal): void {
  const auth = request.routeOptions.config.auth;
  if (!auth) throw new ProblemError('forbidden', 'this route takes no credentials');
  const byScope = auth.anyOf.filter((g) => principal.scopes.has(g.scope));
  if (byScope.length === 0) {
    throw new ProblemError(
      'key_scope_denied',
      `this call needs scope ${[...new Set(auth.anyOf.map((g) => g.scope))].join(' or ')}`,
    );
  }
  if (principal.routes !== null && !principal.routes.includes(routeId(request))) {
    throw new ProblemError('key_route_denied', `this key is not allowed to call ${routeId(request)}`);
  }
  const byKind = byScope.filter((g) => !g.kinds || g.kinds.includes(principal.organisation.kind));
  if (byKind.length === 0) {
    throw new ProblemError(
      'forbidden',
      `organisations of kind ${principal.organisation.kind} may not call this`,
    );
  }
}

/** The principal of an authenticated route (set by the onRequest hook). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('principalOf() used on a route without authentication');
  return request.principal;
}
