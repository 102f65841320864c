import { timeStampReply } from '@ooh/crypto';
import { isCalendarDate } from '@ooh/protocol';
import type { Feature } from '../context.js';
import { ProblemError } from '../http/problem.js';
import {
  DEFAULT_PUBLIC_RATE_LIMIT,
  type PublicRateLimit,
  PublicRateLimiter,
} from '../http/public-rate-limit.js';
import { findTimestamp, startTimestampJob, type TsaFetch, tsaSettings } from './timestamp.js';

export interface LedgerTimestampOptions {
  /** Public rate limit of the timestamp route, per client address and instance. */
  rateLimit?: PublicRateLimit;
  /** Interval of the timestamp job; null: no job (tests that drive it themselves). */
  intervalMs?: number | null;
  fetch?: TsaFetch;
}

/** RFC 3161 §3.4: the media type of a TimeStampResp. */
export const TIMESTAMP_REPLY_TYPE = 'application/timestamp-reply';

/**
 * RFC 3161 timestamps of the ledger blocks (issue 23; src/ledger/timestamp.ts): the public token of a block, and the
 * background job that gets them when LEDGER_TSA_URL is set.
 */
export function createLedgerTimestampFeature(options: LedgerTimestampOptions = {}): Feature {
  return {
    name: 'ledger-timestamps',
    verify(app, ctx) {
      const limiter = new PublicRateLimiter(options.rateLimit ?? DEFAULT_PUBLIC_RATE_LIMIT);
      // The token as the TSA's granted answer, so `openssl ts -verify -digest <digest> -in timestamp.tsr` reads it.
      app.get<{ Params: { day: string } }>('/v1/ledger/blocks/:day/timestamp.tsr', async (request, reply) => {
        limiter.take(request.ip);
        const day = request.params.day;
        if (!isCalendarDate(day))
          throw new ProblemError('not_found', `no ledger block ${day}: not a calendar day`);
        const row = await findTimestamp(ctx.db, day);
        if (!row?.token)
          throw new ProblemError('not_found', `the ledger block of ${day} has no timestamp (yet)`);
        return reply
          .type(TIMESTAMP_REPLY_TYPE)
          .header('cache-control', 'public, max-age=3600')
          .header('content-disposition', `attachment; filename="ledger-${day}.tsr"`)
          .send(Buffer.from(timeStampReply(row.token)));
      });
    },
    start(ctx) {
      const settings = tsaSettings(ctx.config);
      if (!settings || options.intervalMs === null) return async () => {};
      ctx.log.info({ tsa: settings.url, pinned: settings.certFile }, 'ledger blocks get RFC 3161 timestamps');
      return startTimestampJob(ctx, settings, {
        ...(options.intervalMs === undefined ? {} : { intervalMs: options.intervalMs }),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      });
    },
  };
}

export const ledgerTimestampFeature: Feature = createLedgerTimestampFeature();
