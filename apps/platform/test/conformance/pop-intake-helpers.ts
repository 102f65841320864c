import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import {
  cmsPlay,
  createOperator,
  type Event,
  insertApproval,
  type Operator,
  registerSource,
  type TestSource,
} from '../pop/helpers.js';
import type { PopWorld } from '../pop/world.js';
import { apiCall } from '../support/platform.js';

/*
 * Helpers of the black-box conformance tests of the two proof-of-play intake endpoints
 * (spec: POST {agents_url}/s/v1/telemetry and POST {base_url}/api/v1/pop/batches). Everything is observed through
 * HTTP: the batch answer, problem documents, and the console's counted plays (GET /api/v1/console/pop/counts).
 */

export interface PopAnswerItem {
  index: number;
  status: 'duplicate' | 'refused' | 'flagged';
  reason?: string;
  flags?: string[];
}

export interface PopAnswer {
  batch_seq: number;
  received: number;
  accepted: number;
  duplicates: number;
  refused: number;
  flagged: number;
  duplicate: boolean;
  items: PopAnswerItem[];
}

const ANSWER_FIELDS = [
  'accepted',
  'batch_seq',
  'duplicate',
  'duplicates',
  'flagged',
  'items',
  'received',
  'refused',
].sort();

/**
 * A 200 batch answer, checked against every row of the spec's "Batch answer (PopAnswer)" table:
 * the required fields and their types; items only for records not plainly accepted, each with an index from 0
 * into the records read, a status of duplicate, refused or flagged, a reason on refused records, flags on flagged
 * ones; the counts agreeing with the items.
 */
export function popAnswerOf(res: LightMyRequestResponse): PopAnswer {
  expect(res.statusCode, res.body.slice(0, 600)).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const answer = res.json<PopAnswer>();
  expect(Object.keys(answer).sort()).toEqual(ANSWER_FIELDS);
  for (const field of ['batch_seq', 'received', 'accepted', 'duplicates', 'refused', 'flagged'] as const) {
    expect(Number.isInteger(answer[field]), field).toBe(true);
    expect(answer[field], field).toBeGreaterThanOrEqual(0);
  }
  expect(typeof answer.duplicate).toBe('boolean');
  expect(Array.isArray(answer.items)).toBe(true);
  // "received: Records read from the body": every record is accepted (flagged included), a duplicate or refused.
  expect(answer.received).toBe(answer.accepted + answer.duplicates + answer.refused);
  // "flagged: Accepted records that carry a flag".
  expect(answer.flagged).toBeLessThanOrEqual(answer.accepted);
  const seen = new Set<number>();
  for (const item of answer.items) {
    expect(Number.isInteger(item.index)).toBe(true);
    expect(item.index).toBeGreaterThanOrEqual(0);
    expect(item.index).toBeLessThan(answer.received);
    expect(seen.has(item.index), `index ${item.index} listed twice`).toBe(false);
    seen.add(item.index);
    expect(['duplicate', 'refused', 'flagged']).toContain(item.status);
    if (item.status === 'refused') {
      expect(typeof item.reason).toBe('string');
      expect(item.flags).toBeUndefined();
    } else if (item.status === 'flagged') {
      expect(Array.isArray(item.flags) && item.flags.length > 0).toBe(true);
      expect(item.reason).toBeUndefined();
    } else {
      expect(item.reason).toBeUndefined();
      expect(item.flags).toBeUndefined();
    }
  }
  const of = (status: PopAnswerItem['status']) => answer.items.filter((i) => i.status === status).length;
  expect(of('duplicate')).toBe(answer.duplicates);
  expect(of('refused')).toBe(answer.refused);
  expect(of('flagged')).toBe(answer.flagged);
  return answer;
}

/** A problem document (spec "Errors": media type application/problem+json with a stable code). */
export function expectProblem(res: LightMyRequestResponse, status: number, code: string): void {
  expect(res.statusCode, res.body.slice(0, 600)).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.json<{ code: string }>().code).toBe(code);
}

/** Plays counted for a player, as the console shows them (GET /api/v1/console/pop/counts?player=). */
export async function countedViaConsole(
  world: PopWorld,
  playerKey: string,
  filter: { slot?: boolean; attested?: boolean } = {},
): Promise<number> {
  const res = await apiCall(
    world.platform.servers.api,
    world.adminKey,
    'GET',
    `/api/v1/console/pop/counts?player=${encodeURIComponent(playerKey)}`,
  );
  expect(res.statusCode, res.body).toBe(200);
  const items = res.json<{ items: { slot: string | null; attested: boolean; plays: number }[] }>().items;
  return items
    .filter((i) => filter.slot === undefined || (i.slot !== null) === filter.slot)
    .filter((i) => filter.attested === undefined || i.attested === filter.attested)
    .reduce((sum, i) => sum + i.plays, 0);
}

export const devicePlayer = (device: { id: string }) => `device:${device.id}`;
export const cmsPlayer = (source: { id: string }, external: string) => `cms:${source.id}:${external}`;

export interface CmsSetup {
  operator: Operator;
  source: TestSource;
  /** An approval issued for both of the operator's structures. */
  approval: string;
  /** A clean CMS play of `player` under `approval`. */
  record(player: string, seq: number, fields?: Event, end?: Date): Event;
}

/**
 * An operator of its own (its own API key, so its own call tokens and records-an-hour bucket), with two structures,
 * an approval covering both and a CMS installation whose players screen-1 and screen-2 are mapped to them.
 */
export async function cmsSetup(world: PopWorld): Promise<CmsSetup> {
  const operator = await createOperator(world.platform, 2);
  const approval = `A-CONF-${randomUUID().slice(0, 8)}`;
  await insertApproval(world.db, operator.id, {
    number: approval,
    structureIds: operator.structures.map((s) => s.id),
  });
  const source = await registerSource(world.platform, operator, {
    'screen-1': operator.structures[0]!,
    'screen-2': operator.structures[1]!,
  });
  return {
    operator,
    source,
    approval,
    record: (player, seq, fields = {}, end) =>
      cmsPlay(player, seq, { approval_number: approval, ...fields }, end),
  };
}
