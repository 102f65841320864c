import { Readable } from 'node:stream';
import { isCalendarDate, StatsSeal } from '@ooh/protocol';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { TextBody } from '../http/responses.js';
import { AUTHORITY_ADMIN } from '../shared/auth-grants.js';
import { exportDayBatches } from './export.js';
import {
  DEFAULT_PUBLIC_RATE_LIMIT,
  type PublicRateLimit,
  PublicRateLimiter,
} from '../http/public-rate-limit.js';
import { findSeal } from './repository.js';
import { startSealScheduler } from './scheduler.js';
import { SealError, sealDay } from './seal.js';
import { sealView } from './view.js';

export interface SealsOptions {
  /** Public rate limit of GET /v1/stats-seals/{day}, per client address and instance. */
  rateLimit?: PublicRateLimit;
  /** Scheduler interval; null: no scheduler (tests that drive sealing themselves). */
  schedulerIntervalMs?: number | null;
}

/** spec: "404 (nothing there, or not visible to the caller)": a malformed or future day names nothing. */
function sealDayParam(day: string | undefined): string {
  if (day === undefined || !isCalendarDate(day)) {
    throw new ProblemError('not_found', `no seal for ${day ?? ''}: not a calendar day YYYY-MM-DD`);
  }
  return day;
}

function consoleDayParam(day: string | undefined): string {
  if (day === undefined || !isCalendarDate(day)) {
    throw validationFailed([{ path: 'params:/day', code: 'format', message: 'a calendar day YYYY-MM-DD' }]);
  }
  return day;
}

function sealProblem(error: unknown): never {
  if (error instanceof SealError) {
    throw new ProblemError(error.code === 'busy' ? 'service_unavailable' : 'state_conflict', error.message, {
      cause: error,
    });
  }
  throw error;
}

/**
 * Daily stats seals (issue "Daily stats seals, the public ledger, and a verifier anyone can run"; spec StatsSeal and
 * GET {verify_url}/v1/stats-seals/{day}; DESIGN.md section 6).
 */
export function createSealsFeature(options: SealsOptions = {}): Feature {
  return {
    name: 'seals',

    verify(app, ctx) {
      const limiter = new PublicRateLimiter(options.rateLimit ?? DEFAULT_PUBLIC_RATE_LIMIT);
      app.get<{ Params: { day: string }; Querystring: { format?: string } }>(
        '/v1/stats-seals/:day',
        { schema: { response: { 200: StatsSeal } } },
        async (request, reply) => {
          limiter.take(request.ip);
          const day = sealDayParam(request.params.day);
          const format = request.query.format;
          // spec: "Query parameter format (string, optional): p7s".
          if (format !== undefined && format !== 'p7s') {
            throw validationFailed([
              { path: 'querystring:/format', code: 'not_allowed', message: 'format is p7s or absent' },
            ]);
          }
          const row = await findSeal(ctx.db, day);
          if (!row) throw new ProblemError('not_found', `day ${day} is not sealed`);
          if (format === 'p7s') {
            // spec: "the signature itself (PKCS#7 with body attached), media type application/pkcs7-signature".
            return reply
              .type('application/pkcs7-signature')
              .header('content-disposition', `attachment; filename="stats-seal-${day}.p7s"`)
              .header('cache-control', 'public, max-age=3600')
              .send(row.signature);
          }
          const seal = await sealView(ctx.db, row);
          // The ledger field fills in once the seal's block is digested: cache briefly until then.
          reply.header('cache-control', seal.ledger ? 'public, max-age=3600' : 'public, max-age=60');
          return seal;
        },
      );
    },

    api(app, ctx) {
      // For operators and tests: seal an ended day now if it is not sealed yet (idempotent).
      app.post<{ Params: { day: string } }>(
        '/api/v1/console/seals/:day',
        { config: { auth: AUTHORITY_ADMIN }, schema: { response: { 200: StatsSeal, 201: StatsSeal } } },
        async (request, reply) => {
          const day = consoleDayParam(request.params.day);
          const { seal, created } = await sealDay(ctx, day).catch(sealProblem);
          return reply.code(created ? 201 : 200).send(await sealView(ctx.db, seal));
        },
      );

      // The batches of a sealed day for an auditor: NDJSON, one line per batch in leaf order (leaf fields and the
      // body as received, decompressed on the CMS channel, base64), so root and record_count can be recomputed.
      app.get<{ Params: { day: string } }>(
        '/api/v1/console/seals/:day/batches',
        {
          config: { auth: AUTHORITY_ADMIN },
          schema: { response: { 200: TextBody('application/x-ndjson') } },
        },
        async (request, reply) => {
          const day = consoleDayParam(request.params.day);
          if (!(await findSeal(ctx.db, day))) throw new ProblemError('not_found', `day ${day} is not sealed`);
          return reply
            .type('application/x-ndjson')
            .header('content-disposition', `attachment; filename="stats-seal-${day}-batches.ndjson"`)
            .send(Readable.from(exportDayBatches(ctx.db, day)));
        },
      );
    },

    start(ctx) {
      const interval = options.schedulerIntervalMs === undefined ? undefined : options.schedulerIntervalMs;
      if (interval === null) return async () => {};
      return startSealScheduler(ctx, interval === undefined ? {} : { intervalMs: interval });
    },
  };
}

export const sealsFeature: Feature = createSealsFeature();
