import {
  CmsBatch,
  collectFieldErrors,
  LIMITS,
  POP_SCHEMA,
  SignedTelemetryBatch,
  TelemetryBatch,
} from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import { ProblemError, validationFailed } from '../http/problem.js';

/*
 * The batch-level checks of DESIGN.md section 5, in its order: "size and media type -> JSON -> schema value" (the
 * size and JSON steps are the route's). What comes out is typed; the records themselves are judged one by one
 * later (spec CMS rule 2: "Records are judged one by one").
 */

/** 'pop': schema service.pop/1. 'legacy': DESIGN.md section 5 "The earlier batch format is a body without schema". */
export type BatchFormat = 'pop' | 'legacy';

export interface AgentBatch {
  format: BatchFormat;
  /** Lowercase; present on the signed channel (spec: device_id "signed channel"). */
  deviceId: string | null;
  /** The agent's clock as sent (spec: ts "signed channel"). */
  ts: string | null;
  batchSeq: number;
  events: unknown[];
}

export interface CmsBatchBody {
  sourceId: string;
  batchSeq: number;
  records: unknown[];
}

/**
 * The earlier format: the batch without `schema`. Its other fields are read as in service.pop/1 (the platform has
 * no other description of it); on the signed channel device_id and ts are inside the signed bytes all the same.
 */
const SignedLegacyBatch = Type.Omit(SignedTelemetryBatch, ['schema']);
const CertificateLegacyBatch = Type.Omit(TelemetryBatch, ['schema']);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function requireObject(value: unknown): Record<string, unknown> {
  if (!isPlainObject(value)) {
    throw validationFailed([{ path: '/', code: 'type', message: 'the body must be a JSON object' }]);
  }
  return value;
}

/** 413 batch_too_large before any field check: the count is a size limit, not a field error. */
function requireCount(list: unknown, max: number, what: string): void {
  if (Array.isArray(list) && list.length > max) {
    throw new ProblemError(
      'batch_too_large',
      `at most ${max} ${what} per batch; this one has ${list.length}`,
    );
  }
}

/**
 * Body of POST /s/v1/telemetry (`signed`) or POST /d/v1/telemetry (`certificate`).
 * spec: "schema ... service.pop/1"; DESIGN.md section 5: "Any other unknown schema is 400 schema_unknown".
 */
export function readAgentBatch(value: unknown, channel: 'signed' | 'certificate'): AgentBatch {
  const body = requireObject(value);
  const format: BatchFormat = 'schema' in body ? 'pop' : 'legacy';
  if (format === 'pop' && body['schema'] !== POP_SCHEMA) {
    throw new ProblemError('schema_unknown', `schema must be ${POP_SCHEMA}`);
  }
  // spec Limits: "agent telemetry body: at most 1 MB; at most 1000 events".
  requireCount(body['events'], LIMITS.telemetryEventsMax, 'events');
  const schema =
    format === 'pop'
      ? channel === 'signed'
        ? SignedTelemetryBatch
        : TelemetryBatch
      : channel === 'signed'
        ? SignedLegacyBatch
        : CertificateLegacyBatch;
  const errors = collectFieldErrors(schema, body);
  if (errors.length > 0) throw validationFailed(errors);
  const deviceId = body['device_id'];
  const ts = body['ts'];
  return {
    format,
    deviceId: typeof deviceId === 'string' ? deviceId.toLowerCase() : null,
    ts: typeof ts === 'string' ? ts : null,
    batchSeq: body['batch_seq'] as number,
    events: body['events'] as unknown[],
  };
}

/** Body of POST /api/v1/pop/batches (spec "CMS batch for many players"). */
export function readCmsBatch(value: unknown): CmsBatchBody {
  const body = requireObject(value);
  if ('schema' in body && body['schema'] !== POP_SCHEMA) {
    throw new ProblemError('schema_unknown', `schema must be ${POP_SCHEMA}`);
  }
  // spec: "records ... at most 10 000"; Errors: "413 batch_too_large: too many events/records".
  requireCount(body['records'], LIMITS.cmsRecordsMax, 'records');
  const errors = collectFieldErrors(CmsBatch, body);
  if (errors.length > 0) throw validationFailed(errors);
  return {
    sourceId: (body['source_id'] as string).toLowerCase(),
    batchSeq: body['batch_seq'] as number,
    records: body['records'] as unknown[],
  };
}

/** DESIGN.md section 6: "record_count counts the elements of kind play in the sealed bodies". */
export function countPlays(records: readonly unknown[]): number {
  let plays = 0;
  for (const record of records) if (isPlainObject(record) && record['kind'] === 'play') plays += 1;
  return plays;
}
