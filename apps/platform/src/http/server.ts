import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { type FieldError, hasLoneSurrogate, PROBLEM_MEDIA_TYPE, problemDocument } from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Logger } from 'pino';
import type { PlatformMetrics } from './metrics.js';
import { parseJsonBytes } from './json.js';
import { ProblemError, sendProblem } from './problem.js';
import { attachProblemResponses } from './responses.js';
import {
  RETRY_AFTER_SECONDS,
  reportUnavailable,
  UNAVAILABLE_DETAIL,
  unavailableBecause,
} from './unavailable.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The exact bytes of a JSON body as received (bodies are signed over these). */
    rawBody?: Buffer;
    /**
     * The device a telemetry request was authenticated as (its signature verified, or its client certificate
     * accepted); set by the proof-of-play routes, read by whatever records what the device was answered.
     */
    authenticatedDeviceId?: string;
  }
  interface FastifyContextConfig {
    /**
     * The body is kept byte for byte and judged record by record (the proof-of-play batches): a NUL or an odd key in
     * one record refuses that record, not the batch, so the host's check of every body does not apply.
     */
    bodyJudgedPerRecord?: boolean;
    /**
     * The route reads a JSON body it checks itself (no body schema): a request without one is 400 `invalid_json`,
     * as one whose body is empty (routes with a body schema are known by it).
     */
    jsonBody?: boolean;
  }
}

/** Methods whose requests carry the body a route reads. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/**
 * Whether the route needs a JSON body: its own say (`jsonBody`), or a body schema. A schema by media type
 * (`{content: {'application/json': ...}}`) makes the body optional, as Fastify has it: such a route takes a request
 * without one (approve: the requested terms).
 */
function readsJsonBody(request: FastifyRequest): boolean {
  if (request.routeOptions.config?.jsonBody === true) return true;
  const schema = request.routeOptions.schema?.body;
  return typeof schema === 'object' && schema !== null && !Object.hasOwn(schema, 'content');
}

/**
 * The answer to a request that is not well-formed HTTP, written on the socket (no request object exists): 400
 * `invalid_json`, the code of a body that is not what it claims to be (also Fastify's own code for a Content-Length
 * that does not match the body), and the connection closes. A connection already reset gets nothing.
 */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const detail =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 'the request headers are too large'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'the request did not arrive in time'
        : `the request is not well-formed HTTP (${error.code ?? 'unreadable'}): is its Content-Length that of the body?`;
  const body = JSON.stringify(problemDocument('invalid_json', detail));
  socket.end(
    `HTTP/1.1 400 Bad Request\r\nContent-Type: ${PROBLEM_MEDIA_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Whether a request announces a body (a length, or a chunked transfer). */
function announcesBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return (length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined;
}

/** PostgreSQL errors a client's value can raise (SQLSTATE): refused as 422 `validation_failed`, never 500. */
const CLIENT_VALUE_SQLSTATES: ReadonlySet<string> = new Set([
  '22021', // character_not_in_repertoire: a NUL or an invalid byte sequence in a text
  '22P05', // untranslatable_character: U+0000 in jsonb
  '22001', // string_data_right_truncation: a text longer than its column
  '22003', // numeric_value_out_of_range
  '22007', // invalid_datetime_format
  '22008', // datetime_field_overflow: a day or an instant out of range
  '22P02', // invalid_text_representation: a malformed number, uuid, ...
  '2201B', // invalid_regular_expression
  '22025', // invalid_escape_sequence
  '22P03', // invalid_binary_representation
  '54000', // program_limit_exceeded: a value or an array too large
  '54001', // statement_too_complex: a value too deep
]);

export type HostName = 'api' | 'agents' | 'devices' | 'verify';

/**
 * How long a whole request may take to arrive, per host. Fastify's default is no limit at all, so a client that
 * announced a body it never sends held its socket for ever. api: a media upload of up to 150 MB over a slow link;
 * agents: a CMS batch of up to 4 MB; devices and verify: small bodies. Node checks every 30 s, so a request may
 * run up to 30 s over.
 */
export const REQUEST_TIMEOUT_MS: Readonly<Record<HostName, number>> = {
  api: 600_000,
  agents: 120_000,
  devices: 60_000,
  verify: 60_000,
};

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
  /**
   * Proxies whose X-Forwarded-For names the client (PlatformConfig.trustProxy). Empty or absent: request.ip is
   * the peer address and the header is ignored, so no caller can choose the address it is limited under.
   */
  trustProxy?: readonly string[];
  /**
   * How long a whole request may take to arrive, headers and body (default REQUEST_TIMEOUT_MS of the host). A
   * request still incomplete then is answered 400 and its connection closed: a body announced longer than it is, or
   * sent a byte at a time, holds no socket for long.
   */
  requestTimeoutMs?: number;
  /** How often Node looks for requests over their time (default 30 s; tests make it short). */
  connectionsCheckingIntervalMs?: number;
  /** Where the host's requests are counted (the metrics listener, src/http/metrics.ts). */
  metrics?: PlatformMetrics;
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
    // The router's own refusals (a path parameter over 100 characters, a malformed percent-encoding) as problem
    // documents: such a path names nothing, as a malformed id does (404 not_found).
    frameworkErrors: (error, _request, reply) => {
      const code = (error as { code?: string }).code;
      if (code === 'FST_ERR_MAX_PARAM_LENGTH' || code === 'FST_ERR_BAD_URL') {
        return sendProblem(reply, 'not_found', 'no such path: a path parameter is malformed or too long');
      }
      return sendProblem(reply, 'internal_error', 'an internal error occurred');
    },
    trustProxy: options.trustProxy && options.trustProxy.length > 0 ? [...options.trustProxy] : false,
    // A request Node's HTTP parser cannot read (a Content-Length that lies about the body, a malformed request
    // line or header, headers over 16 kB) gets a problem document too, never Fastify's plain JSON.
    clientErrorHandler: answerClientError,
    ajv: {
      customOptions: {
        allErrors: true,
        removeAdditional: false,
        coerceTypes: false,
        useDefaults: false,
      },
    },
    requestTimeout: options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS[options.name],
    ...(options.connectionsCheckingIntervalMs === undefined
      ? {}
      : { http: { connectionsCheckingInterval: options.connectionsCheckingIntervalMs } }),
    ...(options.https
      ? {
          https: (options.connectionsCheckingIntervalMs === undefined
            ? options.https
            : {
                ...(options.https as object),
                connectionsCheckingInterval: options.connectionsCheckingIntervalMs,
              }) as never,
        }
      : {}),
  }) as unknown as FastifyInstance;
  // Node reads a headers timeout longer than the request timeout as the other way round (the headers would get the
  // request's time, and the request the headers' 60 s): the headers never get longer than the whole request.
  app.server.headersTimeout = Math.min(app.server.headersTimeout, app.server.requestTimeout);

  options.metrics?.instrument(app, options.name);
  const now = options.now;
  // Callback hooks here and below, not async ones: every request passes them, and a promise each is work for nothing.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    if (now) reply.header('date', now().toUTCString());
    // Answered before its body was read (a refused credential or signature, an upload refused before or while it
    // streams): the connection closes after the answer, so Node does not read and discard the rest of a body
    // nobody asked for (issue "Trust under attack", item 3).
    if (!request.raw.complete && announcesBody(request)) reply.header('connection', 'close');
    done(null, payload);
  });

  // JSON bodies are parsed here, keeping the raw bytes for signature checks.
  app.removeAllContentTypeParsers();
  const parseJson = (
    request: FastifyRequest,
    body: Buffer,
    done: (err: Error | null, body?: unknown) => void,
  ) => {
    request.rawBody = body;
    let value: unknown;
    try {
      value = parseJsonBytes(body);
    } catch (error) {
      done(error as Error, undefined);
      return;
    }
    done(null, value);
  };
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJson);
  app.addContentTypeParser(/^application\/[a-z0-9.-]+\+json$/, { parseAs: 'buffer' }, parseJson);

  // A body in a content coding nobody here decodes: 415 before it is read (RFC 9110 section 15.5.16). The
  // proof-of-play routes decide for themselves (the CMS channel takes gzip, the agent channels nothing); every other
  // route reads its body as sent, so a gzip or br body was parsed as if it were plain and a labelled plain one taken.
  app.addHook('preParsing', (request, reply, payload, done) => {
    const coding = request.headers['content-encoding'];
    if (
      coding === undefined ||
      request.routeOptions.config?.bodyJudgedPerRecord ||
      !announcesBody(request) ||
      /^\s*(identity\s*)?$/i.test(coding)
    ) {
      done(null, payload);
      return;
    }
    reply.header('accept-encoding', 'identity');
    done(
      new ProblemError(
        'unsupported_media_type',
        `Content-Encoding ${coding} is not accepted here: send the body as it is`,
      ),
    );
  });

  // Before any route: every route of the host, in any scope, answers its errors through the problem schema.
  app.addHook('onRoute', attachProblemResponses);
  registerMethodNotAllowed(app);

  // Every parsed JSON body, before its route's schema and handler (issue "Trust under attack", item 4): no NUL in a
  // text or a key (PostgreSQL cannot store it), no __proto__, constructor or prototype key (merged into an object,
  // such a key could change what it inherits), no nesting deeper than any request of the interface needs.
  app.addHook('preValidation', (request, _reply, done) => {
    const body = request.body;
    // spec: "400 invalid_json: body is not JSON". No body at all, sent without a Content-Type, is not JSON either:
    // it was a 422 at the body's root, where the same empty body labelled application/json was 400.
    if (body === undefined && BODY_METHODS.has(request.method) && readsJsonBody(request)) {
      done(new ProblemError('invalid_json', 'the body is empty: send a JSON document (application/json)'));
      return;
    }
    if (
      request.routeOptions.config?.bodyJudgedPerRecord ||
      typeof body !== 'object' ||
      body === null ||
      Buffer.isBuffer(body) ||
      typeof (body as { pipe?: unknown }).pipe === 'function'
    ) {
      done();
      return;
    }
    const errors = hostileFields(body);
    if (errors.length > 0) {
      done(new ProblemError('validation_failed', `${errors.length} field error(s)`, { errors }));
      return;
    }
    done();
  });

  const answerUnrouted = (request: FastifyRequest, reply: FastifyReply) => {
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
  };
  // A request no route serves is answered before its body is read (the not-found handler itself comes after the
  // body is parsed and checked): nobody makes the platform read or parse a body for a path that takes none, with or
  // without a credential. The connection closes after the answer when a body was announced (onSend above).
  app.addHook('onRequest', (request, reply, done) => {
    if (request.is404) {
      answerUnrouted(request, reply);
      return;
    }
    done();
  });
  app.setNotFoundHandler(answerUnrouted);

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
    // A client's value that JSON and the route's checks allow but PostgreSQL cannot hold: the data exceptions a
    // value sent to it can raise, and its program limits (an array or a value too large or deep). The client's
    // input, not an internal failure: 422, logged for the operator. The rest of class 22 (division by zero, an
    // invalid parameter of our own SQL, ...) stays a 500: only a bug of ours raises it.
    if (typeof fe.code === 'string' && CLIENT_VALUE_SQLSTATES.has(fe.code)) {
      request.log.warn({ err: error }, 'a value of the request could not be stored');
      const errors = nulFields(request);
      return sendProblem(
        reply,
        'validation_failed',
        errors.length > 0
          ? 'a text in the request holds a NUL character (U+0000), which cannot be stored'
          : 'a value in the request cannot be stored (out of range, too long, malformed or too large)',
        errors.length > 0 ? errors : undefined,
      );
    }
    // The database or the disk, not the request: 503 with a time to come back, logged once per burst.
    const unavailable = unavailableBecause(error);
    if (unavailable) {
      reportUnavailable(options.logger, unavailable, error);
      return sendProblem(reply, 'service_unavailable', UNAVAILABLE_DETAIL[unavailable], undefined, {
        'retry-after': String(RETRY_AFTER_SECONDS[unavailable]),
      });
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, 'internal_error', `an internal error occurred (request ${request.id})`);
  });

  const HostStatus = Type.Object({ status: Type.String(), host: Type.String() });
  app.get('/healthz', { logLevel: 'warn', schema: { response: { 200: HostStatus } } }, async () => ({
    status: 'ok',
    host: options.name,
  }));
  app.get(
    '/readyz',
    { logLevel: 'warn', schema: { response: { 200: HostStatus } } },
    async (_request, reply) => {
      try {
        await options.ready?.();
        return { status: 'ready', host: options.name };
      } catch (error) {
        return sendProblem(reply, 'service_unavailable', `not ready: ${(error as Error).message}`);
      }
    },
  );

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

/** Keys that, merged into a plain object, reach its prototype chain. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);
/** Deeper than any body of the interface (a submission nests three levels). */
const MAX_BODY_DEPTH = 32;

const pointer = (path: string, key: string) => `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;

// A lone surrogate: PostgreSQL's text would store it as U+FFFD and its jsonb refuses it naming no field.
const LONE_SURROGATE_MESSAGE = 'not Unicode text: a lone UTF-16 surrogate cannot be stored';

/**
 * The fields of a parsed body that no route takes: a text or key with U+0000 or a lone surrogate, a key that reaches
 * a prototype, a value nested deeper than MAX_BODY_DEPTH. Walks without recursion (a body of 100,000 nested arrays is
 * one error), at most 20 errors.
 */
export function hostileFields(body: unknown): FieldError[] {
  const errors: FieldError[] = [];
  const pending: { value: unknown; path: string; depth: number }[] = [{ value: body, path: '', depth: 0 }];
  while (pending.length > 0 && errors.length < 20) {
    const { value, path, depth } = pending.pop()!;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) {
        errors.push({
          path: path || '/',
          code: 'format',
          message: 'a NUL character (U+0000) cannot be stored',
        });
      } else if (hasLoneSurrogate(value)) {
        errors.push({ path: path || '/', code: 'format', message: LONE_SURROGATE_MESSAGE });
      }
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (depth >= MAX_BODY_DEPTH) {
      errors.push({
        path: path || '/',
        code: 'too_deep',
        message: `nested deeper than ${MAX_BODY_DEPTH} levels`,
      });
      continue;
    }
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i -= 1) {
        pending.push({ value: value[i], path: `${path}/${i}`, depth: depth + 1 });
      }
      continue;
    }
    for (const key of Object.keys(value)) {
      const at = pointer(path, key);
      if (FORBIDDEN_KEYS.has(key)) {
        errors.push({ path: at, code: 'not_allowed', message: `the key ${key} is not taken` });
      } else if (key.includes('\u0000')) {
        errors.push({ path: at, code: 'format', message: 'a NUL character (U+0000) cannot be stored' });
      } else if (hasLoneSurrogate(key)) {
        errors.push({ path: at, code: 'format', message: LONE_SURROGATE_MESSAGE });
      } else {
        pending.push({ value: (value as Record<string, unknown>)[key], path: at, depth: depth + 1 });
      }
    }
  }
  return errors;
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
  /** The route's schema as Fastify compiles it (the problem responses attached). */
  schema: unknown;
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
          schema: route.schema,
        });
    }
    const source = route.url
      .split('/')
      .map((part) =>
        part.startsWith(':') ? '[^/]+' : part === '*' ? '.*' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
      )
      .join('/');
    // The path exactly as registered: the router serves no other form (a trailing slash is another path), so a 405
    // there would name methods that path does not take.
    const pattern = new RegExp(`^${source}$`);
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
