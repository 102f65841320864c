import { randomUUID } from 'node:crypto';
import type { FieldError } from '@ooh/protocol';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Logger } from 'pino';
import { ProblemError, sendProblem } from './problem.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The exact bytes of a JSON body as received (bodies are signed over these). */
    rawBody?: Buffer;
  }
}

export type HostName = 'api' | 'agents' | 'devices' | 'verify';

export interface HostServerOptions {
  name: HostName;
  logger: Logger;
  /** Default body limit in bytes (routes may set their own). */
  bodyLimit?: number;
  https?: FastifyServerOptions extends { https?: infer H } ? H : unknown;
  /** Called by /readyz: throws when a dependency is not ready. */
  ready?: () => Promise<void>;
  /**
   * The platform's clock, for the Date header of every answer (players correct their clocks by it; under a test
   * clock every host must tell the same time). Default: the machine's.
   */
  now?: () => Date;
}

/**
 * One Fastify instance per host of the spec. Every error leaves as an
 * application/problem+json document with a stable code; no stack trace or
 * SQL text ever reaches a caller.
 */
export function createHostServer(options: HostServerOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger.child({ host: options.name }),
    bodyLimit: options.bodyLimit ?? 1_048_576,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[A-Za-z0-9._-]{1,64}$/.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    return503OnClosing: true,
    ajv: {
      customOptions: {
        allErrors: true,
        removeAdditional: false,
        coerceTypes: false,
        useDefaults: false,
      },
    },
    ...(options.https ? { https: options.https as never } : {}),
  }) as unknown as FastifyInstance;

  const now = options.now;
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
    if (now) reply.header('date', now().toUTCString());
  });

  // JSON bodies are parsed here, keeping the raw bytes for signature checks.
  app.removeAllContentTypeParsers();
  const parseJson = (
    request: FastifyRequest,
    body: Buffer,
    done: (err: Error | null, body?: unknown) => void,
  ) => {
    request.rawBody = body;
    if (body.length === 0) {
      done(new ProblemError('invalid_json', 'the body is empty'), undefined);
      return;
    }
    try {
      done(null, JSON.parse(body.toString('utf8')));
    } catch (error) {
      done(new ProblemError('invalid_json', `the body is not JSON: ${(error as Error).message}`), undefined);
    }
  };
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJson);
  app.addContentTypeParser(/^application\/[a-z0-9.-]+\+json$/, { parseAs: 'buffer' }, parseJson);

  registerMethodNotAllowed(app);

  app.setNotFoundHandler((request, reply) => {
    const allowed = allowedMethods(app, request.url);
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      return sendProblem(
        reply,
        'method_not_allowed',
        `${request.method} is not allowed here; use ${allowed.join(', ')}`,
      );
    }
    return sendProblem(reply, 'not_found', `no route ${request.method} ${request.url.split('?')[0]}`);
  });

  app.setErrorHandler((error: FastifyError | ProblemError, request, reply) => {
    if (error instanceof ProblemError) {
      return sendProblem(reply, error.code, error.detail, error.errors, error.headers);
    }
    const fe = error as FastifyError & { validation?: AjvLikeError[]; validationContext?: string };
    if (fe.validation) {
      const errors = fe.validation.map((v) => toFieldError(v, fe.validationContext));
      return sendProblem(reply, 'validation_failed', `${errors.length} field error(s)`, errors);
    }
    switch (fe.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return sendProblem(reply, 'body_too_large', 'the body is over the size limit of this route');
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return sendProblem(reply, 'unsupported_media_type', 'send application/json');
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return sendProblem(reply, 'invalid_json', 'the body is empty');
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return sendProblem(reply, 'invalid_json', 'Content-Length does not match the body');
      default:
        break;
    }
    if (fe.statusCode === 415) return sendProblem(reply, 'unsupported_media_type', fe.message);
    if (fe.statusCode === 413) return sendProblem(reply, 'body_too_large', fe.message);
    if (fe.statusCode === 400 && fe.code?.startsWith('FST_ERR_CTP')) {
      return sendProblem(reply, 'invalid_json', fe.message);
    }
    // A client's text or date that JSON and the route's checks allow but PostgreSQL cannot hold: a NUL character
    // (22021) or a day outside its range such as year 0000 (22008). The client's input, not an internal failure.
    if (fe.code === '22021' || fe.code === '22008') {
      const errors = fe.code === '22021' ? nulFields(request) : [];
      return sendProblem(
        reply,
        'validation_failed',
        errors.length > 0
          ? 'a text in the request holds a NUL character (U+0000), which cannot be stored'
          : 'a value in the request cannot be stored: it holds a NUL character or a date out of range',
        errors.length > 0 ? errors : undefined,
      );
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, 'internal_error', `an internal error occurred (request ${request.id})`);
  });

  app.get('/healthz', { logLevel: 'warn' }, async () => ({ status: 'ok', host: options.name }));
  app.get('/readyz', { logLevel: 'warn' }, async (_request, reply) => {
    try {
      await options.ready?.();
      return { status: 'ready', host: options.name };
    } catch (error) {
      return sendProblem(reply, 'service_unavailable', `not ready: ${(error as Error).message}`);
    }
  });

  return app;
}

interface AjvLikeError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

const KEYWORD_CODES: Record<string, string> = {
  required: 'required',
  maxLength: 'too_long',
  minLength: 'too_short',
  pattern: 'pattern',
  format: 'format',
  additionalProperties: 'unknown_key',
  maxItems: 'too_many',
  minItems: 'too_few',
  type: 'type',
  enum: 'not_allowed',
  const: 'not_allowed',
  minimum: 'out_of_range',
  maximum: 'out_of_range',
  uniqueItems: 'duplicate',
};

/**
 * The fields of a request whose text holds U+0000 (PostgreSQL text cannot), named like schema errors: '/a/0/b' in
 * the body, 'querystring:/x', 'params:/id'. At most 20.
 */
function nulFields(request: FastifyRequest): FieldError[] {
  const found: FieldError[] = [];
  const visit = (value: unknown, path: string, depth: number) => {
    if (found.length >= 20 || depth > 32) return;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) {
        found.push({
          path: path || '/',
          code: 'format',
          message: 'a NUL character (U+0000) cannot be stored',
        });
      }
    } else if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) visit(item, `${path}/${i}`, depth + 1);
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, item] of Object.entries(value)) {
        visit(item, `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`, depth + 1);
      }
    }
  };
  visit(request.params, 'params:', 0);
  visit(request.query, 'querystring:', 0);
  if (!Buffer.isBuffer(request.body)) visit(request.body, '', 0);
  return found;
}

function toFieldError(v: AjvLikeError, context?: string): FieldError {
  let path = v.instancePath;
  if (v.keyword === 'required' && typeof v.params['missingProperty'] === 'string') {
    path = `${path}/${v.params['missingProperty']}`;
  } else if (v.keyword === 'additionalProperties' && typeof v.params['additionalProperty'] === 'string') {
    path = `${path}/${v.params['additionalProperty']}`;
  }
  const prefix = context && context !== 'body' ? `${context}:` : '';
  return {
    path: `${prefix}${path || '/'}`,
    code: KEYWORD_CODES[v.keyword] ?? v.keyword,
    message: v.message ?? v.keyword,
  };
}

/** Routes of a host as registered, with their auth requirement (used by the authorisation matrix test). */
export interface RegisteredRoute {
  method: string;
  url: string;
  auth: unknown;
}
const ROUTE_LIST = new WeakMap<object, RegisteredRoute[]>();
export function registeredRoutes(app: FastifyInstance): RegisteredRoute[] {
  return ROUTE_LIST.get(app) ?? [];
}

// 405 for a known path with another method: routes are collected as they are
// added and matched by pattern when nothing else matched.
const ROUTES = Symbol('routes');
type RouteIndex = { pattern: RegExp; methods: Set<string> }[];

function registerMethodNotAllowed(app: FastifyInstance): void {
  const index: RouteIndex = [];
  const list: RegisteredRoute[] = [];
  ROUTE_LIST.set(app, list);
  (app as unknown as Record<symbol, RouteIndex>)[ROUTES] = index;
  app.addHook('onRoute', (route) => {
    for (const m of Array.isArray(route.method) ? route.method : [route.method]) {
      if (m !== 'HEAD')
        list.push({
          method: m,
          url: route.url,
          auth: (route.config as { auth?: unknown } | undefined)?.auth,
        });
    }
    const source = route.url
      .split('/')
      .map((part) =>
        part.startsWith(':') ? '[^/]+' : part === '*' ? '.*' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
      )
      .join('/');
    const pattern = new RegExp(`^${source}/?$`);
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    let entry = index.find((e) => e.pattern.source === pattern.source);
    if (!entry) {
      entry = { pattern, methods: new Set() };
      index.push(entry);
    }
    for (const m of methods) entry.methods.add(m.toUpperCase());
  });
}

function allowedMethods(app: FastifyInstance, url: string): string[] {
  const index = (app as unknown as Record<symbol, RouteIndex>)[ROUTES] ?? [];
  const path = url.split('?')[0] ?? url;
  const methods = new Set<string>();
  for (const entry of index) if (entry.pattern.test(path)) for (const m of entry.methods) methods.add(m);
  return [...methods].sort();
}
