import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { platformContext } from '../../src/context.js';
import { createPool, type Db } from '../../src/db/pool.js';
import { freePort } from '../../src/db/embedded.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createDraft, organisation, structures, upload } from '../approvals/helpers.js';
import { png } from '../approvals/media-fixtures.js';
import {
  agentBody,
  answerOf,
  batchCount,
  createOperator,
  insertDevice,
  play,
  postTelemetry,
  T0,
} from '../pop/helpers.js';
import { capturedLog } from '../support/log.js';
import { canMountTmpfs, mountTmpfs } from '../support/tmpfs.js';
import { apiCall, type TestPlatform, startTestPlatform } from '../support/platform.js';

/*
 * A platform whose database does not answer, or whose disk is full, answers 503 service_unavailable with Retry-After
 * (players and CMS systems send the same again later), never 500 internal_error (a bug, to a caller and to an
 * operator), stores nothing meanwhile, and says so in its log once per burst. Real parts: a pool to a port nobody
 * listens on; PostgreSQL's own disk_full error (SQLSTATE 53100, raised where PostgreSQL raises it, in the write);
 * a full filesystem (a 64 kB tmpfs) under the media files.
 */

function unavailable(
  res: { statusCode: number; headers: Record<string, unknown>; body: string },
  retry: string,
) {
  expect(res.statusCode, res.body).toBe(503);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(JSON.parse(res.body)).toMatchObject({ code: 'service_unavailable', status: 503 });
  expect(res.headers['retry-after']).toBe(retry);
}

let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform({ now: T0 });
});
afterAll(async () => {
  await p?.close();
});

describe('a database that does not answer', () => {
  let dead: Db;
  let servers: Servers;
  let lines: Record<string, unknown>[];
  beforeAll(async () => {
    // The same platform on a pool to a port nobody listens on: PostgreSQL stopped, or not yet started.
    dead = createPool(`postgresql://ooh:nothing@127.0.0.1:${await freePort()}/ooh`, { max: 2 });
    const captured = capturedLog();
    lines = captured.lines;
    servers = await buildServers(platformContext({ ...p.ctx, db: dead, log: captured.log }));
  });
  afterAll(async () => {
    if (servers) await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
    await dead?.end();
  });

  test('every host answers 503 with Retry-After, and the log says so once for the burst', async () => {
    const operator = await createOperator(p, 1);
    const device = await insertDevice(p.ctx.db, operator.structures[0]!);
    const answers = [
      await apiCall(servers.api, p.adminKey, 'GET', '/api/v1/console/organisations'),
      await apiCall(servers.api, operator.key, 'POST', '/api/v1/creatives/lookup', {
        sha256: ['a'.repeat(64)],
      }),
      await postTelemetry(servers, device, agentBody(device, 1, [play(1)])),
      await servers.verify.inject({ method: 'GET', url: '/v1/stats-seals/2026-11-19' }),
    ];
    for (const res of answers) unavailable(res, '5');
    const ready = await servers.api.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    const reports = lines.filter((l) => l['unavailable'] === 'database');
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({
      level: 50,
      code: 'ECONNREFUSED',
      msg: 'requests answered 503: the database does not answer or cannot take writes',
    });
    expect(lines.filter((l) => l['msg'] === 'unhandled error')).toEqual([]);
  });
});

describe("PostgreSQL's disk full", () => {
  test('a batch is answered 503 and nothing of it is stored; sent again once there is room, it is counted once', async () => {
    const operator = await createOperator(p, 1);
    const device = await insertDevice(p.ctx.db, operator.structures[0]!);
    const body = agentBody(device, 1, [play(1), play(2)]);
    // What PostgreSQL raises when it cannot extend a table's file: SQLSTATE 53100, in the batch's own write.
    await p.ctx.db.query(`
      CREATE FUNCTION test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'could not extend file "base/16384/16500": No space left on device'
          USING ERRCODE = 'disk_full';
      END $$;
      CREATE TRIGGER test_disk_full BEFORE INSERT ON pop_batches FOR EACH ROW EXECUTE FUNCTION test_disk_full();
    `);
    try {
      unavailable(await postTelemetry(p.servers, device, body), '5');
      expect(await batchCount(p.ctx.db, `device:${device.id}`)).toBe(0);
    } finally {
      await p.ctx.db.query('DROP TRIGGER test_disk_full ON pop_batches; DROP FUNCTION test_disk_full()');
    }
    const stored = await postTelemetry(p.servers, device, body);
    expect(stored.statusCode, stored.body).toBe(200);
    expect(answerOf(stored)).toMatchObject({ accepted: 2, duplicate: false });
    expect(answerOf(await postTelemetry(p.servers, device, body))).toMatchObject({
      accepted: 2,
      duplicate: true,
    });
    expect(await batchCount(p.ctx.db, `device:${device.id}`)).toBe(1);
  });
});

describe.skipIf(!canMountTmpfs())('a full disk under the media files', () => {
  let dataDir: string;
  let unmount: (() => void) | null = null;
  let full: TestPlatform;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-full-disk-'));
    const media = path.join(dataDir, 'media');
    await mkdir(media);
    unmount = mountTmpfs(media, '64k');
    full = await startTestPlatform({ dataDir, now: new Date('2026-11-20T16:30:00+05:00') });
  });
  afterAll(async () => {
    await full?.close();
    unmount?.();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  test('an upload is answered 503 with Retry-After, leaves no partial file, and one that fits is kept', async () => {
    const operator = await organisation(full, 'operator');
    const site = await structures(full, operator.id, 1);
    const draft = await createDraft(full, operator.key, { structure_ids: site.map((s) => s.id) });
    // 200 kB on 64 kB: the disk fills while the upload is written, before the file is looked at.
    const large = await upload(
      full,
      operator.key,
      draft.id,
      Buffer.concat([png(8, 8), randomBytes(200_000)]),
      'image/png',
    );
    unavailable(large, '60');
    expect(await readdir(path.join(dataDir, 'media', 'tmp'))).toEqual([]);
    const small = await upload(full, operator.key, draft.id, png(8, 8), 'image/png');
    expect(small.statusCode, small.body).toBe(200);
  });
});
