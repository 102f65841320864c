import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { bootstrap } from '../../src/bootstrap.js';
import { TestClock } from '../../src/clock.js';
import { loadConfig, type PlatformConfig } from '../../src/config.js';
import { closePlatformCaches, type PlatformContext, platformContext } from '../../src/context.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createTestDatabase, type TestDatabase } from './database.js';

export interface TestPlatform {
  ctx: PlatformContext;
  servers: Servers;
  clock: TestClock;
  database: TestDatabase;
  adminKey: string;
  close(): Promise<void>;
}

/**
 * A platform on its own fresh database, with a frozen test clock and a
 * bootstrapped authority admin key; servers are used through inject().
 */
export async function startTestPlatform(
  options: { now?: Date; config?: Partial<PlatformConfig>; dataDir?: string } = {},
): Promise<TestPlatform> {
  const database = await createTestDatabase();
  const clock = new TestClock(options.now ?? new Date('2026-11-20T06:00:00Z'), { frozen: true });
  const config = {
    ...loadConfig({
      env: {},
      overrides: { env: 'test', testClock: true, logLevel: 'silent', databaseUrl: database.url },
    }),
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...options.config,
  };
  const log = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
  const ctx = platformContext({ config, db: database.db, clock, testClock: clock, log });
  const servers = await buildServers(ctx);
  const { key } = await bootstrap(database.db, clock);
  return {
    ctx,
    servers,
    clock,
    database,
    adminKey: key,
    close: async () => {
      await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
      await closePlatformCaches(ctx.caches);
      await database.drop();
    },
  };
}

export type OrgKind = 'authority' | 'operator' | 'agency' | 'advertiser';

/** Calls the api host as a key holder. */
export function apiCall(
  app: FastifyInstance,
  key: string | null,
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  body?: unknown,
): Promise<LightMyRequestResponse> {
  return app.inject({
    method,
    url,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
}

/** Creates an organisation with one API key holding `scopes`. */
export async function createOrganisation(
  p: TestPlatform,
  kind: OrgKind,
  scopes: string[],
  name = `${kind} ${Math.random().toString(36).slice(2, 8)}`,
): Promise<{ id: string; key: string; keyId: string }> {
  const org = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/organisations', {
    name,
    kind,
  });
  if (org.statusCode !== 201) throw new Error(`organisation: ${org.statusCode} ${org.body}`);
  const id = org.json<{ id: string }>().id;
  const key = await apiCall(
    p.servers.api,
    p.adminKey,
    'POST',
    `/api/v1/console/organisations/${id}/api-keys`,
    {
      name: 'test key',
      scopes,
    },
  );
  if (key.statusCode !== 201) throw new Error(`api key: ${key.statusCode} ${key.body}`);
  const k = key.json<{ id: string; key: string }>();
  return { id, key: k.key, keyId: k.id };
}

let structureCounter = 0;
export async function createStructure(
  p: TestPlatform,
  organisationId: string,
  fields: { code?: string; district?: string; format?: string } = {},
): Promise<{ id: string; code: string }> {
  structureCounter += 1;
  const res = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/structures', {
    organisation_id: organisationId,
    code: fields.code ?? `ST-${process.pid}-${structureCounter}-${Math.random().toString(36).slice(2, 6)}`,
    district: fields.district ?? 'almaly',
    format: fields.format ?? 'billboard',
  });
  if (res.statusCode !== 201) throw new Error(`structure: ${res.statusCode} ${res.body}`);
  return res.json<{ id: string; code: string }>();
}
