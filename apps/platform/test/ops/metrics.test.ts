import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../src/db/embedded.js';
import { createPool } from '../../src/db/pool.js';
import { FEATURES } from '../../src/features.js';
import {
  listenMetrics,
  type MetricsListener,
  PlatformMetrics,
  renderMetrics,
} from '../../src/http/metrics.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { runSealScheduler, startSealScheduler } from '../../src/seals/index.js';
import { startTicker } from '../../src/shared/ticker.js';
import { startSealPlatform } from '../seals/helpers.js';
import {
  agentBody,
  createOperator,
  insertDevice,
  play,
  postTelemetry,
  sendBatch,
  T0,
  type TestDevice,
} from '../pop/helpers.js';
import type { TestPlatform } from '../support/platform.js';
import { canMountTmpfs, mountTmpfs } from '../support/tmpfs.js';

/*
 * Issue "What a newcomer tripped over", item 7: /metrics in the Prometheus text format, on a listener of its own.
 * The hosts are real Fastify servers with every feature; the metrics listener is scraped over HTTP.
 */

let p: TestPlatform;
let servers: Servers;
let metrics: PlatformMetrics;
let listener: MetricsListener;
let device: TestDevice;
const TOKEN = 'a-scrape-token-of-some-length';

beforeAll(async () => {
  p = await startSealPlatform(T0);
  metrics = new PlatformMetrics({
    db: p.ctx.db,
    now: () => p.clock.now(),
    background: p.ctx.caches.background,
  });
  servers = await buildServers(p.ctx, FEATURES, { metrics });
  const operator = await createOperator(p, 1);
  device = await insertDevice(p.ctx.db, operator.structures[0]!);
  listener = await listenMetrics({ host: '127.0.0.1', port: 0, token: TOKEN }, async () =>
    renderMetrics([{ labels: {}, families: await metrics.collect() }]),
  );
});
afterAll(async () => {
  await listener?.close();
  metrics?.close();
  if (servers) await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
  await p?.close();
});

const scrape = async () => {
  const res = await fetch(listener.url, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  return res.text();
};

/** The value of one sample, by its exact name and labels as written; undefined when absent. */
const sample = (text: string, series: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

describe('the metrics listener', () => {
  test('answers only GET /metrics, and only with the token when one is set', async () => {
    expect((await fetch(listener.url)).status).toBe(401);
    expect((await fetch(listener.url, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const other = await fetch(listener.url.replace('/metrics', '/'), {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(other.status).toBe(404);
    const post = await fetch(listener.url, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(post.status).toBe(405);
  });

  test('writes the text exposition format: HELP and TYPE once per family, every sample line well formed', async () => {
    await servers.api.inject({ method: 'GET', url: '/readyz' });
    const text = await scrape();
    const seen = new Set<string>();
    for (const line of text.trimEnd().split('\n')) {
      if (line.startsWith('# HELP ') || line.startsWith('# TYPE ')) {
        const key = line.split(' ').slice(0, 3).join(' ');
        expect(seen.has(key), `${key} twice`).toBe(false);
        seen.add(key);
        continue;
      }
      expect(line).toMatch(
        /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*\})? (-?[0-9.e+-]+|\+Inf|NaN)$/,
      );
    }
    for (const family of [
      'ooh_http_requests_total counter',
      'ooh_http_request_duration_seconds histogram',
      'ooh_pop_batches_total counter',
      'ooh_pop_records_total counter',
      'ooh_pop_records_refused_total counter',
      'ooh_db_pool_connections gauge',
      'ooh_event_loop_delay_seconds gauge',
      'ooh_seal_lag_seconds gauge',
    ]) {
      expect(text).toContain(`# TYPE ${family}\n`);
    }
    expect(
      sample(text, 'ooh_http_requests_total{host="api",route="/readyz",method="GET",status="200"}'),
    ).toBe(1);
    expect(sample(text, 'ooh_db_pool_connections{state="total"}')).toBeGreaterThanOrEqual(1);
  });

  test('requests are labelled by route pattern, never by an id in the path', async () => {
    const id = '3f1c1e0a-0000-4000-8000-000000000001';
    await servers.api.inject({
      method: 'GET',
      url: `/api/v1/console/devices/${id}`,
      headers: { authorization: `Bearer ${p.adminKey}` },
    });
    await servers.api.inject({ method: 'GET', url: `/nothing/${id}` });
    const text = await scrape();
    expect(text).not.toContain(id);
    expect(
      sample(
        text,
        'ooh_http_requests_total{host="api",route="/api/v1/console/devices/:id",method="GET",status="404"}',
      ),
    ).toBe(1);
    expect(
      sample(text, 'ooh_http_requests_total{host="api",route="(unmatched)",method="GET",status="404"}'),
    ).toBe(1);
  });

  test('proof-of-play batches by outcome, records by result and refusal reason; a repeat counts no record again', async () => {
    const events = [
      play(1),
      play(2, { play_id: 'p2', duration_ms: 500, start: new Date(T0.getTime() - 60_500).toISOString() }),
      play(3, { play_id: 'p3' }),
    ];
    const first = await sendBatch(servers, device, 1, events);
    expect(first.statusCode, first.body).toBe(200);
    const answer = first.json() as { accepted: number; refused: number; items: { reason?: string }[] };
    expect(answer.refused).toBe(1);
    const again = await sendBatch(servers, device, 1, events);
    expect(again.json()).toMatchObject({ duplicate: true });
    const forged = await postTelemetry(servers, device, agentBody(device, 2, [play(4)]), {
      signature: 'A'.repeat(86),
    });
    expect(forged.statusCode).toBe(401);

    const text = await scrape();
    expect(sample(text, 'ooh_pop_batches_total{host="agents",outcome="stored"}')).toBe(1);
    expect(sample(text, 'ooh_pop_batches_total{host="agents",outcome="duplicate"}')).toBe(1);
    const forgedCode = (forged.json() as { code: string }).code;
    expect(sample(text, `ooh_pop_batches_total{host="agents",outcome="${forgedCode}"}`)).toBe(1);
    expect(sample(text, 'ooh_pop_records_total{host="agents",result="accepted"}')).toBe(answer.accepted);
    expect(sample(text, 'ooh_pop_records_total{host="agents",result="refused"}')).toBe(1);
    const reason = answer.items.find((i) => i.reason)?.reason;
    expect(sample(text, `ooh_pop_records_refused_total{host="agents",reason="${reason}"}`)).toBe(1);
    // No device id anywhere.
    expect(text).not.toContain(device.id);
  });

  test('seal lag: 0 while every ended day is sealed, then the time since the unsealed day ended', async () => {
    // Before any seal there is no sample.
    expect(sample(await scrape(), 'ooh_seal_lag_seconds')).toBeUndefined();
    try {
      // 01:00 on 2026-11-21 in Almaty: the 20th (the first day, T0's) ended and is sealed; no lag.
      p.clock.set(new Date('2026-11-20T20:00:00Z'));
      const run = await runSealScheduler(p.ctx);
      expect(run.seals.map((s) => s.day)).toEqual(['2026-11-20']);
      expect(sample(await scrape(), 'ooh_seal_lag_seconds')).toBe(0);
      // 02:00 on the 22nd with the 21st not sealed (no scheduler ran): it ended two hours ago.
      p.clock.set(new Date('2026-11-21T21:00:00Z'));
      expect(sample(await scrape(), 'ooh_seal_lag_seconds')).toBe(7200);
    } finally {
      p.clock.set(T0);
    }
  });

  test('background loops: runs by outcome, the time of the last success, the last run length', async () => {
    // Nothing ran yet: the families are there, without samples.
    const before = await scrape();
    expect(before).toContain('# TYPE ooh_background_runs_total counter');
    expect(before).not.toContain('ooh_background_runs_total{');
    // The real seal scheduler's loop, and a loop that fails every other run (as a ledger witness that does not
    // answer would), both on the platform's ticker.
    const stopSeals = startSealScheduler(p.ctx, { intervalMs: 10 });
    let runs = 0;
    const stopFlaky = startTicker(p.ctx, 'flaky', 10, async () => {
      runs += 1;
      if (runs % 2 === 1) throw new Error('the witness did not answer');
    });
    try {
      await expect.poll(() => runs, { timeout: 10_000 }).toBeGreaterThanOrEqual(4);
    } finally {
      await stopFlaky();
      await stopSeals();
    }
    const text = await scrape();
    const seals = sample(text, 'ooh_background_runs_total{work="seals",outcome="ok"}');
    expect(seals).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'ooh_background_runs_total{work="seals",outcome="failed"}')).toBe(0);
    const ok = sample(text, 'ooh_background_runs_total{work="flaky",outcome="ok"}')!;
    const failed = sample(text, 'ooh_background_runs_total{work="flaky",outcome="failed"}')!;
    expect(ok + failed).toBe(runs);
    expect(failed).toBe(Math.ceil(runs / 2));
    // The platform's clock (a test clock here): the time of the last run that did not fail.
    expect(sample(text, 'ooh_background_last_success_timestamp_seconds{work="flaky"}')).toBe(
      p.clock.now().getTime() / 1000,
    );
    const length = sample(text, 'ooh_background_last_run_seconds{work="seals"}')!;
    expect(length).toBeGreaterThan(0);
    expect(length).toBeLessThan(10);
  });
});

describe('the disks', () => {
  test('the room left on the disk of each volume, and its size', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-metrics-disk-'));
    const media = path.join(dir, 'media');
    await mkdir(media);
    const unmount = canMountTmpfs() ? mountTmpfs(media, '64k') : null;
    const mounted = unmount !== null;
    try {
      const disks = new PlatformMetrics({
        db: p.ctx.db,
        now: () => p.clock.now(),
        volumes: { data: dir, media, missing: path.join(dir, 'not-made-yet') },
      });
      const text = async () => renderMetrics([{ labels: {}, families: await disks.collect() }]);
      try {
        const before = await text();
        const free = sample(before, 'ooh_disk_free_bytes{volume="data"}')!;
        expect(free).toBeGreaterThan(0);
        expect(free).toBeLessThanOrEqual(sample(before, 'ooh_disk_size_bytes{volume="data"}')!);
        expect(before).not.toContain('volume="missing"');
        if (mounted) {
          // A disk of its own: its size, and the room a file takes.
          expect(sample(before, 'ooh_disk_size_bytes{volume="media"}')).toBe(65_536);
          expect(sample(before, 'ooh_disk_free_bytes{volume="media"}')).toBe(65_536);
          await writeFile(path.join(media, 'file'), Buffer.alloc(16_384));
          expect(sample(await text(), 'ooh_disk_free_bytes{volume="media"}')).toBe(65_536 - 16_384);
        }
      } finally {
        disks.close();
      }
    } finally {
      unmount?.();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a database that does not answer', () => {
  test('the scrape still serves every other series, the disks among them, and ooh_database_up says 0', async () => {
    expect(sample(await scrape(), 'ooh_database_up')).toBe(1);
    const dead = createPool(`postgresql://ooh:nothing@127.0.0.1:${await freePort()}/ooh`, { max: 1 });
    const down = new PlatformMetrics({
      db: dead,
      now: () => p.clock.now(),
      volumes: { data: os.tmpdir() },
    });
    try {
      const text = renderMetrics([{ labels: {}, families: await down.collect() }]);
      expect(sample(text, 'ooh_database_up')).toBe(0);
      expect(sample(text, 'ooh_disk_free_bytes{volume="data"}')).toBeGreaterThan(0);
      expect(sample(text, 'ooh_seal_lag_seconds')).toBeUndefined();
      expect(text).toContain('ooh_process_resident_memory_bytes');
    } finally {
      down.close();
      await dead.end();
    }
  });
});

describe('where the metrics are served', () => {
  test('a METRICS_HOST other machines reach needs METRICS_TOKEN; the default is loopback', async () => {
    const { loadConfig, ConfigError } = await import('../../src/config.js');
    const port = String(await freePort());
    expect(loadConfig({ env: {} }).metrics).toBeNull();
    expect(loadConfig({ env: { METRICS_PORT: port } }).metrics).toEqual({
      host: '127.0.0.1',
      port: Number(port),
      token: null,
    });
    // HOST=0.0.0.0 for the public hosts does not move the metrics off loopback.
    expect(loadConfig({ env: { METRICS_PORT: port, HOST: '0.0.0.0' } }).metrics?.host).toBe('127.0.0.1');
    expect(() => loadConfig({ env: { METRICS_PORT: port, METRICS_HOST: '0.0.0.0' } })).toThrow(ConfigError);
    expect(
      loadConfig({ env: { METRICS_PORT: port, METRICS_HOST: '0.0.0.0', METRICS_TOKEN: TOKEN } }).metrics,
    ).toEqual({ host: '0.0.0.0', port: Number(port), token: TOKEN });
    expect(() => loadConfig({ env: { METRICS_PORT: '8080' } })).toThrow(
      /METRICS_PORT: port 8080 is already used/,
    );
  });
});
