import { type Static, Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { principalOf } from '../auth/plugin.js';
import type { PlatformContext } from '../context.js';
import { isUniqueViolation, withTransaction } from '../db/pool.js';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { ItemsOf, NoBody } from '../http/responses.js';
import { AUTHORITY_ADMIN } from '../shared/auth-grants.js';
import { notFound, pathUuid } from '../shared/ids.js';
import { clearSessionCookie, deviceToken, setDeviceCookie, setSessionCookie } from './cookies.js';
import { attemptSucceeded, reserveAttempt } from './login-limit.js';
import { dummyPasswordHash, hashPassword, verifyPassword } from './password.js';
import {
  type ConsoleUserRow,
  deleteSession,
  deviceOwner,
  disableUser,
  findUser,
  findUserByEmail,
  insertDevice,
  insertSession,
  insertUser,
  pruneSessions,
  type SessionRow,
  touchDevice,
  touchSession,
  usersOfOrganisation,
} from './repository.js';
import { CONSOLE_ROLES, sessionScopes } from './scopes.js';
import { currentSession, newCsrfToken, newSessionToken, requireCsrf, sessionIdOf } from './session.js';
import { type SessionSettings, sessionSettings } from './settings.js';

const EMAIL_PATTERN = '^[^\\s@]{1,64}@[^\\s@]{1,189}$';
export const PASSWORD_MIN_CHARS = 12;

const LoginBody = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
  },
  { additionalProperties: false },
);
type LoginBody = Static<typeof LoginBody>;

const UserBody = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 254, pattern: EMAIL_PATTERN }),
    password: Type.String({ minLength: PASSWORD_MIN_CHARS, maxLength: 1024 }),
    role: Type.Union(CONSOLE_ROLES.map((r) => Type.Literal(r))),
  },
  { additionalProperties: false },
);
type UserBody = Static<typeof UserBody>;

const UserView = Type.Object({
  id: Type.String(),
  organisation_id: Type.String(),
  email: Type.String(),
  role: Type.String(),
  created_at: Type.String(),
  disabled_at: Type.Union([Type.String(), Type.Null()]),
});

const SessionView = Type.Object({
  user: Type.Object({ id: Type.String(), email: Type.String(), role: Type.String() }),
  organisation: Type.Object({ id: Type.String(), name: Type.String(), kind: Type.String() }),
  scopes: Type.Array(Type.String()),
  csrf_token: Type.String(),
  idle_timeout_seconds: Type.Integer(),
  expires_at: Type.String(),
});

const normaliseEmail = (email: string) => email.trim().toLowerCase();

function userView(u: ConsoleUserRow) {
  return {
    id: u.id,
    organisation_id: u.organisation_id,
    email: u.email,
    role: u.role,
    created_at: u.created_at.toISOString(),
    disabled_at: u.disabled_at ? u.disabled_at.toISOString() : null,
  };
}

function sessionView(
  session: Pick<SessionRow, 'csrf_token' | 'expires_at' | 'user'>,
  settings: SessionSettings,
) {
  const { user } = session;
  return {
    user: { id: user.id, email: user.email, role: user.role },
    organisation: { id: user.organisation_id, name: user.organisation_name, kind: user.organisation_kind },
    scopes: sessionScopes(user.organisation_kind, user.role),
    csrf_token: session.csrf_token,
    idle_timeout_seconds: Math.round(settings.idleTimeoutMs / 1000),
    expires_at: session.expires_at.toISOString(),
  };
}

const PRUNE_AFTER_MS = 7 * 24 * 3600 * 1000;

/**
 * Console users and sessions (issue "The console"; spec Authentication: "or a console session"; apps/platform/console/README.md).
 * Sign-in, who-am-I and sign-out take no credentials (api host, public context); users are created by the
 * authority's administrators.
 */
export function createSessionsFeature(options: Partial<SessionSettings> = {}): Feature {
  return {
    name: 'sessions',
    apiPublic(app, ctx) {
      const settings = { ...sessionSettings(ctx.config.settings), ...options };

      app.post<{ Body: LoginBody }>(
        '/api/v1/console/session',
        { schema: { body: LoginBody, response: { 200: SessionView } } },
        async (request, reply) => login(ctx, settings, request, reply),
      );

      app.get(
        '/api/v1/console/session',
        { schema: { response: { 200: SessionView } } },
        async (request, reply) => {
          const session = await currentSession(ctx, settings, request);
          if (session === 'expired')
            throw new ProblemError('session_expired', 'the console session has expired');
          if (session === null) throw new ProblemError('unauthenticated', 'not signed in to the console');
          await touchSession(ctx.db, session.id, ctx.clock.now());
          // The answer carries the CSRF token: never kept by a cache.
          reply.header('cache-control', 'no-store');
          return sessionView(session, settings);
        },
      );

      app.delete(
        '/api/v1/console/session',
        { schema: { response: { 204: NoBody } } },
        async (request, reply) => {
          const session = await currentSession(ctx, settings, request);
          if (session !== null && session !== 'expired') {
            // A forged cross-site sign-out is refused like any other unsafe call.
            requireCsrf(request, session);
            await deleteSession(ctx.db, session.id);
          }
          clearSessionCookie(reply, request, ctx.config, settings);
          return reply.code(204).send();
        },
      );
    },

    api(app, ctx) {
      app.post<{ Params: { id: string }; Body: UserBody }>(
        '/api/v1/console/organisations/:id/users',
        { config: { auth: AUTHORITY_ADMIN }, schema: { body: UserBody, response: { 201: UserView } } },
        async (request, reply) => {
          const organisationId = pathUuid(request.params.id, 'organisation');
          const { rows } = await ctx.db.query('SELECT id FROM organisations WHERE id = $1', [organisationId]);
          if (rows.length === 0) throw notFound('organisation', organisationId);
          const email = normaliseEmail(request.body.email);
          const passwordHash = await hashPassword(request.body.password);
          let id: string;
          try {
            id = await insertUser(
              ctx.db,
              { organisationId, email, passwordHash, role: request.body.role },
              ctx.clock.now(),
            );
          } catch (error) {
            if (isUniqueViolation(error)) {
              throw validationFailed([
                { path: '/email', code: 'duplicate', message: `${email} already has a user` },
              ]);
            }
            throw error;
          }
          request.log.info(
            { user: id, organisation: organisationId, by: principalOf(request).id },
            'console user created',
          );
          return reply.code(201).send(userView((await findUser(ctx.db, id))!));
        },
      );

      app.get<{ Params: { id: string } }>(
        '/api/v1/console/organisations/:id/users',
        { config: { auth: AUTHORITY_ADMIN }, schema: { response: { 200: ItemsOf(UserView) } } },
        async (request) => {
          const organisationId = pathUuid(request.params.id, 'organisation');
          return { items: (await usersOfOrganisation(ctx.db, organisationId)).map(userView) };
        },
      );

      app.post<{ Params: { id: string } }>(
        '/api/v1/console/users/:id/disable',
        { config: { auth: AUTHORITY_ADMIN }, schema: { response: { 200: UserView } } },
        async (request) => {
          const id = pathUuid(request.params.id, 'user');
          const found = await withTransaction(ctx.db, (client) => disableUser(client, id, ctx.clock.now()));
          if (!found) throw notFound('user', id);
          return userView((await findUser(ctx.db, id))!);
        },
      );
    },
  };
}

/**
 * Sign-in, limited the way that keeps strangers from locking a user out (issue "Trust under attack", item 5;
 * apps/platform/console/README.md, "Sign-in limits"):
 *  - a browser that holds the account's device cookie (it signed in to the account before) is limited by its own
 *    failures only: CONSOLE_LOGIN_MAX_FAILURES in the window;
 *  - any other browser by the failures from its address against the account (CONSOLE_LOGIN_MAX_FAILURES) and by
 *    the failures against the account from all such browsers (CONSOLE_LOGIN_MAX_FAILURES_PER_ACCOUNT);
 *  - an address with many failures against any accounts (CONSOLE_LOGIN_MAX_FAILURES_PER_ADDRESS) is slowed down,
 *    never refused: behind a proxy one address is everyone (and without TRUST_PROXY the proxy is the address).
 * A correct password is refused only by failures from the same browser, or from the same address against the same
 * account by a browser that does not know it.
 */
async function login(
  ctx: PlatformContext,
  settings: SessionSettings,
  request: FastifyRequest<{ Body: LoginBody }>,
  reply: FastifyReply,
) {
  const now = ctx.clock.now();
  const email = normaliseEmail(request.body.email);
  const user = await findUserByEmail(ctx.db, email);
  const presented = deviceToken(request);
  const deviceId = presented === null ? null : sessionIdOf(presented);
  const trusted = deviceId !== null && user !== null && (await deviceOwner(ctx.db, deviceId)) === user.id;
  const addressSubject = `ip:${request.ip}`;
  const own = trusted ? `device:${deviceId}` : `pair:${request.ip}|${email}`;
  const reservation = await reserveAttempt(
    ctx.db,
    [
      { subject: own, max: settings.maxFailuresPerEmail },
      ...(trusted ? [] : [{ subject: `email:${email}`, max: settings.maxFailuresPerAccount }]),
      { subject: addressSubject, max: Number.POSITIVE_INFINITY },
    ],
    now,
    settings.failureWindowMs,
  );
  if (!reservation.ok) {
    throw new ProblemError('rate_limited', 'too many failed sign-ins; wait before trying again', {
      headers: { 'retry-after': String(reservation.retryAfterSeconds) },
    });
  }
  // Slowed down, not refused: an address with many failures against any accounts.
  const beyond = (reservation.failures.get(addressSubject) ?? 0) - settings.maxFailuresPerAddress;
  if (beyond > 0) await sleep(Math.min(MAX_SLOW_DOWN_MS, beyond * settings.slowDownStepMs));
  // The hash is checked even for an unknown address, so the answer time does not tell which addresses exist.
  const passwordOk = await verifyPassword(
    request.body.password,
    user?.password_hash ?? (await dummyPasswordHash()),
  );
  if (!user || !passwordOk || user.disabled_at !== null) {
    request.log.info({ email, trusted }, 'console sign-in failed');
    throw new ProblemError('unauthenticated', 'the email address or the password is wrong');
  }
  await attemptSucceeded(ctx.db, reservation.failureIds, [own]);
  await pruneSessions(ctx.db, new Date(now.getTime() - PRUNE_AFTER_MS));

  // The browser is known to the account from now on (or again).
  if (trusted) {
    await touchDevice(ctx.db, deviceId!, now);
  } else {
    const device = newSessionToken();
    await insertDevice(ctx.db, { id: device.id, userId: user.id }, now);
    setDeviceCookie(reply, request, device.token, ctx.config, settings);
  }
  const { token, id } = newSessionToken();
  const csrfToken = newCsrfToken();
  const expiresAt = new Date(now.getTime() + settings.maxLifetimeMs);
  await insertSession(ctx.db, { id, userId: user.id, csrfToken, expiresAt }, now);
  setSessionCookie(reply, request, token, Math.round(settings.maxLifetimeMs / 1000), ctx.config, settings);
  request.log.info({ user: user.id }, 'console sign-in');
  reply.header('cache-control', 'no-store');
  return sessionView({ csrf_token: csrfToken, expires_at: expiresAt, user }, settings);
}

const MAX_SLOW_DOWN_MS = 2000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const sessionsFeature: Feature = createSessionsFeature();
