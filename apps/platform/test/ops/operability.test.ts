import { readFile, mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { addDays, almatyDate, almatyDayStart } from '@ooh/protocol';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../src/db/embedded.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { type PlatformProcess, runPlatformCommand, spawnPlatform } from '../support/process.js';

/*
 * Issue "What a newcomer tripped over", item 7, through the real `platform run`: the devices host answers a load
 * balancer's health probe without a client certificate (and nothing else), /metrics on its own port, test-clock
 * seals say env test, LOG_FORMAT=pretty.
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

let d: TestDatabase;
let dataDir: string;
let admin: string;
let metricsPort: number;
let p: PlatformProcess;

beforeAll(async () => {
  d = await createTestDatabase({ migrate: false });
  cleanups.push(() => d.drop());
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-ops-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const env = { DATABASE_URL: d.url, DATA_DIR: dataDir };
  const boot = await runPlatformCommand(['bootstrap'], env);
  expect(boot.code, boot.stderr).toBe(0);
  admin = boot.stdout.trim().split('\n').at(-1)!;
  metricsPort = await freePort();
  p = await spawnPlatform(['--test-clock'], {
    ...env,
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'pretty',
  });
  cleanups.push(() => p.stop('SIGKILL'));
}, 120_000);

/** A request to the devices host without a client certificate: its status and body, or the error that ended it. */
async function devicesWithoutCertificate(
  method: string,
  pathname: string,
): Promise<{ status: number; body: string } | { error: string }> {
  const ca = await readFile(path.join(dataDir, 'device-ca', 'root-ca.pem'), 'utf8');
  return new Promise((resolve) => {
    const request = https.request(
      `${p.urls.devices}${pathname}`,
      { method, ca, agent: false },
      (response) => {
        let body = '';
        response.on('data', (c) => {
          body += c;
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      },
    );
    request.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
    request.end();
  });
}

async function refusals(): Promise<{ last_24h: number; recent: { reason: string }[] }> {
  const res = await fetch(`${p.urls.api}/api/v1/console/devices`, {
    headers: { authorization: `Bearer ${admin}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { handshake_refusals: { last_24h: number; recent: { reason: string }[] } })
    .handshake_refusals;
}

describe('the devices host behind a load balancer', () => {
  test('a probe without a client certificate gets /healthz and /readyz, is not a refusal; anything else is one', async () => {
    const before = (await refusals()).last_24h;
    expect(await devicesWithoutCertificate('GET', '/healthz')).toEqual({
      status: 200,
      body: JSON.stringify({ status: 'ok', host: 'devices' }),
    });
    expect(await devicesWithoutCertificate('GET', '/readyz')).toEqual({
      status: 200,
      body: JSON.stringify({ status: 'ready', host: 'devices' }),
    });
    expect(await devicesWithoutCertificate('HEAD', '/healthz')).toEqual({ status: 200, body: '' });
    for (let i = 0; i < 5; i += 1) {
      expect(await devicesWithoutCertificate('GET', '/healthz')).toMatchObject({ status: 200 });
    }
    // Anything else without a certificate is closed unanswered, as before, and recorded as no_certificate.
    expect(await devicesWithoutCertificate('GET', '/d/v1/whoami')).toEqual({ error: 'ECONNRESET' });
    expect(await devicesWithoutCertificate('POST', '/healthz')).toEqual({ error: 'ECONNRESET' });
    // Written at most once a second.
    const deadline = Date.now() + 10_000;
    let seen = await refusals();
    while (seen.last_24h < before + 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      seen = await refusals();
    }
    await new Promise((resolve) => setTimeout(resolve, 1500));
    seen = await refusals();
    expect(seen.last_24h).toBe(before + 2);
    expect(seen.recent.map((r) => r.reason)).toContain('no_certificate');
  });
});

describe('the metrics of the running platform', () => {
  test('are on METRICS_PORT at 127.0.0.1, with the devices probes counted', async () => {
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(
      /^ooh_http_requests_total\{host="devices",route="\/healthz",method="GET",status="200"\} \d+$/m,
    );
    expect(text).toMatch(/^ooh_db_pool_connections\{state="total"\} [1-9]/m);
    // Not on the public hosts.
    expect((await fetch(`${p.urls.api}/metrics`)).status).toBe(404);
    expect((await fetch(`${p.urls.verify}/metrics`)).status).toBe(404);
  });
});

describe('LOG_FORMAT=pretty', () => {
  test('writes one readable line per entry, not JSON', async () => {
    const lines = p
      .output()
      .split('\n')
      .filter((l) => /^\d\d:\d\d:\d\d\.\d{3} /.test(l));
    expect(lines.some((l) => /^\d\d:\d\d:\d\d\.\d{3} INFO {2}platform listening /.test(l))).toBe(true);
    expect(
      lines.some((l) => / WARN {2}device client certificate refused reason=no_certificate /.test(l)),
    ).toBe(true);
    expect(p.output()).not.toMatch(/^\{"level":/m);
  });
});

describe('a platform with a test clock', () => {
  test('seals its days with env test', async () => {
    const today = almatyDate(new Date());
    // Two hours into the next Almaty day: the scheduler (every 5 s) seals today.
    const set = await fetch(`${p.urls.api}/api/v1/console/clock`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        now: new Date(almatyDayStart(addDays(today, 1)).getTime() + 7_200_000).toISOString(),
      }),
    });
    expect(set.status).toBe(200);
    const deadline = Date.now() + 30_000;
    let res = await fetch(`${p.urls.verify}/v1/stats-seals/${today}`);
    while (res.status !== 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      res = await fetch(`${p.urls.verify}/v1/stats-seals/${today}`);
    }
    expect(res.status, p.output()).toBe(200);
    expect(((await res.json()) as { body: { env: string } }).body.env).toBe('test');
  }, 60_000);

  test('refuses PLATFORM_ENV=prod beside --test-clock, exit 2', async () => {
    const res = await runPlatformCommand(['run', '--test-clock'], {
      PLATFORM_ENV: 'prod',
      DATA_DIR: dataDir,
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toBe(
      'invalid configuration:\n  - PLATFORM_ENV: prod with --test-clock; seals made under a settable clock say env test\n',
    );
  });
});

describe('a cluster of processes', () => {
  test('serves the metrics of every worker on one port, labelled by worker', async () => {
    const port = await freePort();
    const cluster = await spawnPlatform([], {
      DATABASE_URL: d.url,
      DATA_DIR: dataDir,
      PLATFORM_WORKERS: '2',
      METRICS_PORT: String(port),
    });
    cleanups.push(() => cluster.stop('SIGKILL'));
    for (let i = 0; i < 6; i += 1) await fetch(`${cluster.urls.verify}/healthz`);
    // A worker busy at its start (worker 0 runs the schedulers) may miss a scrape: it says so, the next has it.
    const deadline = Date.now() + 30_000;
    let text = '';
    do {
      text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    } while (
      text.match(/^ooh_worker_metrics_answered\{worker="\d"\} 1$/gm)?.length !== 2 &&
      Date.now() < deadline
    );
    expect(text).toMatch(/^ooh_worker_metrics_answered\{worker="0"\} 1$/m);
    expect(text).toMatch(/^ooh_worker_metrics_answered\{worker="1"\} 1$/m);
    const served = [
      ...text.matchAll(
        /^ooh_http_requests_total\{worker="(\d)",host="verify",route="\/healthz",method="GET",status="200"\} (\d+)$/gm,
      ),
    ];
    expect(served.reduce((sum, m) => sum + Number(m[2]), 0)).toBeGreaterThanOrEqual(6);
    expect(text.match(/^# TYPE ooh_http_requests_total counter$/gm)).toHaveLength(1);
    expect(new Set([...text.matchAll(/worker="(\d)"/g)].map((m) => m[1]))).toEqual(new Set(['0', '1']));
    expect(await cluster.stop('SIGTERM'), cluster.output()).toBe(0);
  }, 120_000);
});
