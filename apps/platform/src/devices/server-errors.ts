import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import type { PlatformContext } from '../context.js';
import type { Db } from '../db/pool.js';
import { ProblemError } from '../http/problem.js';

/*
 * 5xx answers given to authenticated devices (issue "Trust under attack", item 4: "`agent status` and the fleet page
 * show a device that is stuck and why"; migration 069). A player resends a batch the platform answered 5xx until it
 * is taken; the fleet shows such a device as stuck, since when, how often and with what answer.
 *
 * Cheap and bounded: one upsert per 5xx answer to a device the request authenticated (request.authenticatedDeviceId:
 * its signature verified or its client certificate accepted), nothing on any other answer, one row per device.
 */

/**
 * One more 5xx answer to `deviceId`. A run of 5xx answers ends when a batch of records of the device is stored after
 * the run's last answer: the next 5xx then starts a new run (since = now, one answer) instead of adding to the old one.
 * A batch of no records does not end it: the agent sends one to learn whether the platform takes batches at all while
 * its own batch keeps failing (apps/agent/README.md, "Nothing resent forever").
 */
export const RECORD_SERVER_ERROR_SQL = `
  INSERT INTO device_server_errors AS e (device_id, since, last_at, answers, batch_seq, status, code, route)
  VALUES ($1, $2, $2, 1, $3, $4, $5, $6)
  ON CONFLICT (device_id) DO UPDATE SET
    since = CASE WHEN EXISTS (SELECT 1 FROM pop_batches b
                               WHERE b.owner = 'device:' || e.device_id AND b.received_at >= e.last_at
                                 AND (b.answer->>'received')::int > 0)
                 THEN EXCLUDED.since ELSE e.since END,
    answers = CASE WHEN EXISTS (SELECT 1 FROM pop_batches b
                                 WHERE b.owner = 'device:' || e.device_id AND b.received_at >= e.last_at
                                 AND (b.answer->>'received')::int > 0)
                   THEN 1 ELSE e.answers + 1 END,
    last_at = greatest(e.last_at, EXCLUDED.last_at),
    batch_seq = EXCLUDED.batch_seq,
    status = EXCLUDED.status,
    code = EXCLUDED.code,
    route = EXCLUDED.route`;

export interface ServerErrorAnswer {
  deviceId: string;
  at: Date;
  status: number;
  code: string;
  batchSeq: number | null;
  route: string | null;
}

export async function recordServerError(db: Db, answer: ServerErrorAnswer): Promise<void> {
  await db.query(RECORD_SERVER_ERROR_SQL, [
    answer.deviceId,
    answer.at,
    answer.batchSeq,
    answer.status,
    answer.code.slice(0, 64),
    answer.route?.slice(0, 200) ?? null,
  ]);
}

/** The batch_seq of a telemetry body already parsed, when it has one (the body of a 5xx may be anything). */
function batchSeqOf(request: FastifyRequest): number | null {
  const body = request.body as { batch_seq?: unknown } | null | undefined;
  if (typeof body !== 'object' || body === null || Buffer.isBuffer(body)) return null;
  const seq = body.batch_seq;
  return typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0 ? seq : null;
}

/**
 * Records every 5xx answer of this host (and of the plugins registered after this call in the same scope: Fastify
 * hands a scope's hooks to the plugins registered in it later) that went to an authenticated device. The problem code
 * comes from the error the error handler turned into the answer; an error that is not a ProblemError is answered
 * internal_error.
 */
export function recordServerErrorsOf(app: FastifyInstance, ctx: PlatformContext): void {
  const codes = new WeakMap<FastifyRequest, string>();
  app.addHook('onError', async (request, _reply, error: FastifyError | ProblemError) => {
    codes.set(request, error instanceof ProblemError ? error.code : 'internal_error');
  });
  app.addHook('onResponse', async (request, reply) => {
    const deviceId = request.authenticatedDeviceId;
    if (reply.statusCode < 500 || reply.statusCode > 599 || deviceId === undefined) return;
    try {
      await recordServerError(ctx.db, {
        deviceId,
        at: ctx.clock.now(),
        status: reply.statusCode,
        code: codes.get(request) ?? `http_${reply.statusCode}`,
        batchSeq: batchSeqOf(request),
        route: `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}`,
      });
    } catch (error) {
      // The answer is gone already; a database that failed the request may fail this too.
      request.log.warn({ err: error, device: deviceId }, 'a 5xx answer to a device could not be recorded');
    }
  });
}
