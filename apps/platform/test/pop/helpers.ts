import { createHash, type KeyObject, randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { es256Sign, exportPublicKeySpki, generateEs256KeyPair, publicKeyFingerprint } from '@ooh/crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { expect } from 'vitest';
import { bootstrap } from '../../src/bootstrap.js';
import { TestClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { type PlatformContext, platformContext } from '../../src/context.js';
import { createPool, type Db } from '../../src/db/pool.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { apiCall, createOrganisation, createStructure, type TestPlatform } from '../support/platform.js';

export const T0 = new Date('2026-11-20T06:00:00.000Z');
export const MEDIA = 'a'.repeat(64);
export const OTHER_MEDIA = 'b'.repeat(64);

// ---- platforms ----

export interface PopInstance {
  ctx: PlatformContext;
  servers: Servers;
  clock: TestClock;
}

/** Several platform instances (each its own servers, context and clock) on ONE database, like a scaled-out deployment. */
export interface PopCluster {
  database: TestDatabase;
  db: Db;
  instances: PopInstance[];
  adminKey: string;
  /** A TestPlatform view of instance 0 for the shared helpers. */
  platform: TestPlatform;
  /** Sets every instance's clock. */
  setNow(now: Date): void;
  close(): Promise<void>;
}

export async function startPopCluster(
  options: { instances?: number; now?: Date; dataDir?: string } = {},
): Promise<PopCluster> {
  const database = await createTestDatabase();
  const now = options.now ?? T0;
  const instances: PopInstance[] = [];
  for (let i = 0; i < (options.instances ?? 1); i += 1) {
    const clock = new TestClock(now, { frozen: true });
    const config = loadConfig({
      env: {},
      overrides: {
        env: 'test',
        testClock: true,
        logLevel: 'silent',
        databaseUrl: database.url,
        // The authority's keys (seals) live in the data folder: shared by the instances, as by processes.
        ...(options.dataDir ? { dataDir: options.dataDir } : {}),
      },
    });
    const log = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
    // Every instance has its own pool, as separate processes would.
    const db =
      i === 0 ? database.db : createPool(database.url, { max: 10, applicationName: `ooh-test-${i}` });
    const ctx = platformContext({ config, db, clock, testClock: clock, log });
    instances.push({ ctx, servers: await buildServers(ctx), clock });
  }
  const first = instances[0]!;
  const { key } = await bootstrap(database.db, first.clock);
  const close = async () => {
    for (const [i, instance] of instances.entries()) {
      await Promise.all(Object.values(instance.servers).map((s: FastifyInstance) => s.close()));
      if (i > 0) await instance.ctx.db.end();
    }
    await database.drop();
  };
  return {
    database,
    db: database.db,
    instances,
    adminKey: key,
    platform: { ctx: first.ctx, servers: first.servers, clock: first.clock, database, adminKey: key, close },
    setNow: (instant) => {
      for (const instance of instances) instance.clock.set(instant);
    },
    close,
  };
}

// ---- devices and the agent channel ----

export interface TestDevice {
  id: string;
  privateKey: KeyObject;
  structure: { id: string; code: string };
}

/**
 * A device enrolled by writing its rows (the console route is the devices feature's): a real P-256 key pair
 * whose public half is the device's accepted key.
 */
export async function insertDevice(
  db: Db,
  structure: { id: string; code: string },
  at: Date = T0,
): Promise<TestDevice> {
  const { publicKey, privateKey } = generateEs256KeyPair();
  const id = randomUUID();
  await db.query('INSERT INTO devices (id, structure_id, created_at) VALUES ($1, $2, $3)', [
    id,
    structure.id,
    at,
  ]);
  await db.query(
    `INSERT INTO device_keys (device_id, public_key_spki, fingerprint, registered_at) VALUES ($1, $2, $3, $4)`,
    [id, exportPublicKeySpki(publicKey), publicKeyFingerprint(publicKey), at],
  );
  return { id, privateKey, structure };
}

/** Adds a new key to a device, the previous ones staying accepted until `previousUntil` (a renewal). */
export async function rotateDeviceKey(
  db: Db,
  device: TestDevice,
  at: Date,
  previousUntil: Date,
): Promise<TestDevice> {
  const { publicKey, privateKey } = generateEs256KeyPair();
  await db.query(
    'UPDATE device_keys SET accepted_until = $2 WHERE device_id = $1 AND accepted_until IS NULL',
    [device.id, previousUntil],
  );
  await db.query(
    `INSERT INTO device_keys (device_id, public_key_spki, fingerprint, registered_at) VALUES ($1, $2, $3, $4)`,
    [device.id, exportPublicKeySpki(publicKey), publicKeyFingerprint(publicKey), at],
  );
  return { ...device, privateKey };
}

export interface Operator {
  id: string;
  key: string;
  keyId: string;
  structures: { id: string; code: string }[];
}

export async function createOperator(p: TestPlatform, structures = 2): Promise<Operator> {
  const org = await createOrganisation(p, 'operator', ['write:plays', 'console:fleet']);
  const list: { id: string; code: string }[] = [];
  for (let i = 0; i < structures; i += 1) list.push(await createStructure(p, org.id));
  return { ...org, structures: list };
}

export type Event = Record<string, unknown>;

/** A clean agent play: 15 s, ending a minute before T0-ish `end`. */
export function play(seq: number, fields: Event = {}, end: Date = new Date(T0.getTime() - 60_000)): Event {
  const start = new Date(end.getTime() - 15_000);
  return {
    kind: 'play',
    seq,
    play_id: `p${seq}`,
    approval_number: 'A-2026-000001',
    media_sha256: MEDIA,
    start: start.toISOString(),
    end: end.toISOString(),
    duration_ms: 15_000,
    ...fields,
  };
}

export function agentBody(
  device: { id: string },
  batchSeq: number,
  events: unknown[],
  options: { ts?: Date; schema?: string | null; extra?: Event } = {},
): Buffer {
  const body: Record<string, unknown> = {};
  if (options.schema !== null) body['schema'] = options.schema ?? 'service.pop/1';
  Object.assign(body, {
    device_id: device.id,
    ts: (options.ts ?? T0).toISOString(),
    batch_seq: batchSeq,
    prev_sha256: '',
    sent_at: (options.ts ?? T0).toISOString(),
    events,
    ...options.extra,
  });
  return Buffer.from(JSON.stringify(body), 'utf8');
}

export function sign(privateKey: KeyObject, bytes: Buffer): string {
  return es256Sign(privateKey, bytes);
}

/** POST {agents_url}/s/v1/telemetry with the device's signature over the exact bytes (unless told otherwise). */
export function postTelemetry(
  servers: Servers,
  device: TestDevice,
  body: Buffer,
  options: { signature?: string | null; headers?: Record<string, string> } = {},
): Promise<LightMyRequestResponse> {
  const signature = options.signature === undefined ? sign(device.privateKey, body) : options.signature;
  return servers.agents.inject({
    method: 'POST',
    url: '/s/v1/telemetry',
    headers: {
      'content-type': 'application/json',
      ...(signature !== null ? { 'x-service-signature': signature } : {}),
      ...options.headers,
    },
    payload: body,
  });
}

/** Signs and sends one batch of `events`. */
export function sendBatch(
  servers: Servers,
  device: TestDevice,
  batchSeq: number,
  events: unknown[],
  options: { ts?: Date; schema?: string | null } = {},
): Promise<LightMyRequestResponse> {
  return postTelemetry(servers, device, agentBody(device, batchSeq, events, options));
}

// ---- CMS ----

export interface TestSource {
  id: string;
  privateKey: KeyObject;
  operator: Operator;
}

/** A CMS installation registered through the console route, with its players mapped. */
export async function registerSource(
  p: TestPlatform,
  operator: Operator,
  players: Record<string, { id: string }> = {},
): Promise<TestSource> {
  const { publicKey, privateKey } = generateEs256KeyPair();
  const res = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/cms-installations', {
    organisation_id: operator.id,
    name: 'Test CMS',
    kind: 'test-cms',
    public_key: exportPublicKeySpki(publicKey),
  });
  expect(res.statusCode, res.body).toBe(201);
  const source: TestSource = { id: res.json<{ id: string }>().id, privateKey, operator };
  for (const [externalId, structure] of Object.entries(players))
    await mapPlayer(p, source, externalId, structure.id);
  return source;
}

export async function mapPlayer(
  p: TestPlatform,
  source: TestSource,
  externalId: string,
  structureId: string,
) {
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'PUT',
    `/api/v1/console/cms-installations/${source.id}/players/${externalId}`,
    { structure_id: structureId },
  );
  expect(res.statusCode, res.body).toBe(200);
}

export async function rotateSourceKey(p: TestPlatform, source: TestSource): Promise<TestSource> {
  const { publicKey, privateKey } = generateEs256KeyPair();
  const res = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/cms-installations/${source.id}/keys`,
    {
      public_key: exportPublicKeySpki(publicKey),
    },
  );
  expect(res.statusCode, res.body).toBe(201);
  return { ...source, privateKey };
}

/** A clean CMS play record of `player`. */
export function cmsPlay(
  player: string,
  seq: number,
  fields: Event = {},
  end: Date = new Date(T0.getTime() - 60_000),
): Event {
  return { ...play(seq, {}, end), player, play_id: `${player}-${seq}`, ...fields };
}

export function cmsBody(
  source: { id: string },
  batchSeq: number,
  records: unknown[],
  extra: Event = {},
): Buffer {
  return Buffer.from(
    JSON.stringify({
      schema: 'service.pop/1',
      source_id: source.id,
      batch_seq: batchSeq,
      prev_sha256: '',
      records,
      ...extra,
    }),
    'utf8',
  );
}

export interface CmsPostOptions {
  key?: string;
  sourceHeader?: string | null;
  signature?: string | null;
  signWith?: KeyObject;
  gzip?: boolean;
  /** Exact wire bytes (already compressed when gzip); the signature still covers `body`. */
  wire?: Buffer;
  headers?: Record<string, string>;
}

/** POST {base_url}/api/v1/pop/batches: API key, X-Service-Source, signature over the decompressed bytes. */
export function postCms(
  servers: Servers,
  source: TestSource,
  body: Buffer,
  options: CmsPostOptions = {},
): Promise<LightMyRequestResponse> {
  const signature =
    options.signature === undefined ? sign(options.signWith ?? source.privateKey, body) : options.signature;
  const wire = options.wire ?? (options.gzip ? gzipSync(body) : body);
  return servers.api.inject({
    method: 'POST',
    url: '/api/v1/pop/batches',
    headers: {
      authorization: `Bearer ${options.key ?? source.operator.key}`,
      'content-type': 'application/json',
      ...(options.gzip ? { 'content-encoding': 'gzip' } : {}),
      ...(options.sourceHeader !== null ? { 'x-service-source': options.sourceHeader ?? source.id } : {}),
      ...(signature !== null ? { 'x-service-signature': signature } : {}),
      ...options.headers,
    },
    payload: wire,
  });
}

// ---- approvals (the approvals feature issues them; flags only read the rows) ----

export interface ApprovalFixture {
  number: string;
  mediaSha256?: string;
  validFrom?: string;
  validUntil?: string;
  structureIds: string[];
  revokedAt?: Date | null;
}

/** Writes an issued approval (and the submission it needs) directly. */
export async function insertApproval(
  db: Db,
  organisationId: string,
  approval: ApprovalFixture,
): Promise<void> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO submissions (number, organisation_id, advertiser_name, created_at, updated_at)
     VALUES ($1, $2, 'Advertiser', $3, $3) RETURNING id`,
    [`SUB-2026-${randomUUID().slice(0, 8)}`, organisationId, T0],
  );
  const { rows: approvals } = await db.query<{ id: string }>(
    `INSERT INTO approvals (number, submission_id, media_sha256, valid_from, valid_until, issued_at, revoked_at,
                            revoke_reason)
     VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $7::timestamptz IS NULL THEN NULL ELSE 'test' END) RETURNING id`,
    [
      approval.number,
      rows[0]!.id,
      approval.mediaSha256 ?? MEDIA,
      approval.validFrom ?? '2026-11-01',
      approval.validUntil ?? '2026-11-30',
      T0,
      approval.revokedAt ?? null,
    ],
  );
  for (const structureId of approval.structureIds) {
    await db.query('INSERT INTO approval_structures (approval_id, structure_id) VALUES ($1, $2)', [
      approvals[0]!.id,
      structureId,
    ]);
  }
}

// ---- reading back ----

export interface Answer {
  batch_seq: number;
  received: number;
  accepted: number;
  duplicates: number;
  refused: number;
  flagged: number;
  duplicate: boolean;
  items: { index: number; status: string; reason?: string; flags?: string[] }[];
}

export function answerOf(res: LightMyRequestResponse): Answer {
  expect(res.statusCode, res.body).toBe(200);
  const answer = res.json<Answer>();
  // spec: the counts add up.
  expect(answer.received).toBe(answer.accepted + answer.duplicates + answer.refused);
  return answer;
}

export function problemOf(res: LightMyRequestResponse, status: number, code: string): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.json<{ code: string }>().code).toBe(code);
}

/** Counted plays of a player key (all days, billable and slot together unless filtered). */
export async function countedPlays(
  db: Db,
  playerKey: string,
  filter: { slot?: boolean; attested?: boolean } = {},
): Promise<number> {
  const { rows } = await db.query<{ plays: string | null }>(
    `SELECT sum(plays)::text AS plays FROM play_counts
      WHERE player_key = $1
        AND ($2::boolean IS NULL OR (slot IS NOT NULL) = $2)
        AND ($3::boolean IS NULL OR attested = $3)`,
    [playerKey, filter.slot ?? null, filter.attested ?? null],
  );
  return Number(rows[0]?.plays ?? 0);
}

export async function batchCount(db: Db, owner?: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM pop_batches WHERE ($1::text IS NULL OR owner = $1)',
    [owner ?? null],
  );
  return rows[0]!.n;
}

export const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
