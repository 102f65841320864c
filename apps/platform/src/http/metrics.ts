import { timingSafeEqual } from 'node:crypto';
import { statfs } from 'node:fs/promises';
import http from 'node:http';
import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import { addDays, almatyDayEnd } from '@ooh/protocol';
import type { FastifyInstance } from 'fastify';
import type { Db } from '../db/pool.js';
import type { BackgroundRuns } from '../shared/background-runs.js';

/*
 * Prometheus metrics (issue "What a newcomer tripped over", item 7), in the text exposition format 0.0.4, written
 * here rather than with a client library: a few counters, gauges and one histogram are all the platform keeps.
 *
 * Where: a listener of its own (METRICS_PORT, off by default) on METRICS_HOST (127.0.0.1 by default, whatever HOST
 * is), never a route of the four public hosts; an address reachable from elsewhere needs METRICS_TOKEN, sent by the
 * scraper as a bearer token (config.ts). So the series are not public by accident.
 *
 * Labels are bounded: host (4), route pattern (not the URL, so no ids), method, status, problem code, refusal
 * reason, record flag, background loop. No device, source, organisation or key ever becomes a label.
 */

type Labels = Record<string, string>;

/** One metric family as the exposition format groups it. */
export interface Family {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  samples: { suffix?: string; labels: Labels; value: number }[];
}

const labelKey = (labels: Labels) =>
  JSON.stringify(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)));

class Counter {
  readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels: Labels, by = 1): void {
    const key = labelKey(labels);
    const entry = this.values.get(key);
    if (entry) entry.value += by;
    else this.values.set(key, { labels, value: by });
  }
  family(): Family {
    return {
      name: this.name,
      help: this.help,
      type: 'counter',
      samples: [...this.values.values()].map((v) => ({ labels: v.labels, value: v.value })),
    };
  }
}

/** Buckets of request durations, in seconds: a request is expected to take milliseconds. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

class Histogram {
  readonly values = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: number[],
  ) {}
  observe(labels: Labels, value: number): void {
    const key = labelKey(labels);
    let entry = this.values.get(key);
    if (!entry) {
      entry = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.values.set(key, entry);
    }
    for (let i = 0; i < this.buckets.length; i += 1) if (value <= this.buckets[i]!) entry.counts[i]! += 1;
    entry.sum += value;
    entry.count += 1;
  }
  family(): Family {
    const samples: Family['samples'] = [];
    for (const entry of this.values.values()) {
      this.buckets.forEach((bound, i) => {
        samples.push({
          suffix: '_bucket',
          labels: { ...entry.labels, le: String(bound) },
          value: entry.counts[i]!,
        });
      });
      samples.push({ suffix: '_bucket', labels: { ...entry.labels, le: '+Inf' }, value: entry.count });
      samples.push({ suffix: '_sum', labels: entry.labels, value: entry.sum });
      samples.push({ suffix: '_count', labels: entry.labels, value: entry.count });
    }
    return { name: this.name, help: this.help, type: 'histogram', samples };
  }
}

/** What the metrics read at scrape time from the rest of the platform. */
export interface MetricsSources {
  db: Db;
  now: () => Date;
  /** The runs of the process's background work (ctx.caches.background). */
  background?: BackgroundRuns;
  /** The folders whose disks are watched: DATA_DIR (the embedded database, the secrets) and the media files. */
  volumes?: Readonly<Record<string, string>>;
}

/** How long a scrape waits for the database's answer before it says the database is down (Prometheus waits 10 s). */
const DATABASE_LOOK_MS = 3_000;

/** One process's metrics: what its four hosts counted, and what is read when scraped. */
export class PlatformMetrics {
  readonly requests = new Counter(
    'ooh_http_requests_total',
    'HTTP requests answered, by host, route pattern, method and status.',
  );
  readonly durations = new Histogram(
    'ooh_http_request_duration_seconds',
    'Time to answer an HTTP request, by host and route pattern.',
    DURATION_BUCKETS,
  );
  readonly batches = new Counter(
    'ooh_pop_batches_total',
    'Proof-of-play batches answered, by host (agents: signed, devices: certificate, api: CMS) and outcome: stored, duplicate, or the problem code of a refused batch.',
  );
  readonly records = new Counter(
    'ooh_pop_records_total',
    'Proof-of-play records of the batches answered, by host and result: accepted (counted), duplicate, refused.',
  );
  readonly refusedRecords = new Counter(
    'ooh_pop_records_refused_total',
    'Proof-of-play records refused (not counted), by host and refusal reason.',
  );
  readonly flaggedRecords = new Counter(
    'ooh_pop_records_flagged_total',
    'Proof-of-play records accepted with a flag, by host and flag.',
  );
  private readonly loopDelay: IntervalHistogram;
  private readonly startedAt = process.hrtime.bigint();

  constructor(private readonly sources: MetricsSources | null = null) {
    this.loopDelay = monitorEventLoopDelay({ resolution: 10 });
    this.loopDelay.enable();
  }

  /** Stops measuring the event loop. */
  close(): void {
    this.loopDelay.disable();
  }

  /** Counts the requests of a host (added to each host server by createHostServer). */
  instrument(app: FastifyInstance, host: string): void {
    // Callback hooks, not async ones: every request passes them, and a promise each is work for nothing.
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? '(unmatched)';
      this.requests.inc({ host, route, method: request.method, status: String(reply.statusCode) });
      this.durations.observe({ host, route }, reply.elapsedTime / 1000);
      done();
    });
    // The proof-of-play batch routes (their bodies are judged per record): the answer says what became of them.
    app.addHook('preSerialization', (request, reply, payload, done) => {
      if (request.routeOptions.config?.bodyJudgedPerRecord) this.countBatch(host, reply.statusCode, payload);
      done(null, payload);
    });
  }

  private countBatch(host: string, status: number, payload: unknown): void {
    const answer = payload as {
      code?: unknown;
      duplicate?: unknown;
      accepted?: unknown;
      duplicates?: unknown;
      items?: { status?: unknown; reason?: unknown; flags?: unknown }[];
    } | null;
    if (status >= 400) {
      this.batches.inc({ host, outcome: typeof answer?.code === 'string' ? answer.code : `http_${status}` });
      return;
    }
    if (typeof answer?.accepted !== 'number' || !Array.isArray(answer.items)) return;
    this.batches.inc({ host, outcome: answer.duplicate === true ? 'duplicate' : 'stored' });
    // A repeated batch is answered with the stored answer: its records were counted when it was stored.
    if (answer.duplicate === true) return;
    this.records.inc({ host, result: 'accepted' }, answer.accepted);
    if (typeof answer.duplicates === 'number')
      this.records.inc({ host, result: 'duplicate' }, answer.duplicates);
    for (const item of answer.items) {
      if (item.status === 'refused') {
        this.records.inc({ host, result: 'refused' });
        this.refusedRecords.inc({ host, reason: String(item.reason ?? 'unknown') });
      } else if (item.status === 'flagged' && Array.isArray(item.flags)) {
        for (const flag of item.flags) this.flaggedRecords.inc({ host, flag: String(flag) });
      }
    }
  }

  /** Every family, with the values read now (pool, event loop, seal lag). */
  async collect(): Promise<Family[]> {
    const families = [
      this.requests.family(),
      this.durations.family(),
      this.batches.family(),
      this.records.family(),
      this.refusedRecords.family(),
      this.flaggedRecords.family(),
    ];
    const gauge = (name: string, help: string, samples: Family['samples']): Family => ({
      name,
      help,
      type: 'gauge',
      samples,
    });
    const delay = this.loopDelay;
    families.push(
      gauge('ooh_event_loop_delay_seconds', 'Event-loop delay since the previous scrape: p50, p99 and max.', [
        { labels: { quantile: '0.5' }, value: delay.percentile(50) / 1e9 },
        { labels: { quantile: '0.99' }, value: delay.percentile(99) / 1e9 },
        { labels: { quantile: '1' }, value: delay.max / 1e9 },
      ]),
      gauge('ooh_process_resident_memory_bytes', 'Resident memory of the process.', [
        { labels: {}, value: process.memoryUsage().rss },
      ]),
      gauge('ooh_process_uptime_seconds', 'Seconds since the process started serving.', [
        { labels: {}, value: Number(process.hrtime.bigint() - this.startedAt) / 1e9 },
      ]),
    );
    delay.reset();
    if (this.sources) {
      const pool = this.sources.db;
      families.push(
        gauge(
          'ooh_db_pool_connections',
          'Connections of the database pool: total, idle, and queries waiting for one.',
          [
            { labels: { state: 'total' }, value: pool.totalCount },
            { labels: { state: 'idle' }, value: pool.idleCount },
            { labels: { state: 'waiting' }, value: pool.waitingCount },
          ],
        ),
      );
      // The seal lag's query is also the scrape's look at the database: down, the other series are still served
      // (the disks above all, when a full one is why), and ooh_database_up says so.
      const { family: sealLag, up } = await this.sealLag();
      families.push(
        sealLag,
        gauge(
          'ooh_database_up',
          "Whether the database answered the scrape's query: 1, or 0 (requests are answered 503).",
          [{ labels: {}, value: up ? 1 : 0 }],
        ),
      );
      if (this.sources.background) families.push(...backgroundFamilies(this.sources.background));
      if (this.sources.volumes) families.push(...(await diskFamilies(this.sources.volumes)));
    }
    return families;
  }

  /**
   * Seconds since the oldest ended day that has no seal yet ended: 0 while yesterday is sealed. A day is sealed
   * once it ends, within seconds; a growing value means the sealing has stopped. No sample before the first seal.
   */
  private async sealLag(): Promise<{ family: Family; up: boolean }> {
    const family: Family = {
      name: 'ooh_seal_lag_seconds',
      help: 'Seconds since the end of the oldest ended Almaty day without a seal (0: every ended day is sealed).',
      type: 'gauge',
      samples: [],
    };
    let rows: { day: string | null }[];
    let timer: NodeJS.Timeout | undefined;
    try {
      // A database that does not answer at all (a network between) must not hold the scrape past its timeout.
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer')), DATABASE_LOOK_MS);
      });
      const query = this.sources!.db.query<{ day: string | null }>(
        'SELECT max(day)::text AS day FROM stats_seals',
      );
      query.catch(() => {});
      ({ rows } = await Promise.race([query, late]));
    } catch {
      return { family, up: false };
    } finally {
      clearTimeout(timer);
    }
    const newest = rows[0]?.day;
    if (newest) {
      const unsealedEnd = almatyDayEnd(addDays(newest, 1));
      const lag = Math.max(0, (this.sources!.now().getTime() - unsealedEnd.getTime()) / 1000);
      family.samples.push({ labels: {}, value: lag });
    }
    return { family, up: true };
  }
}

/**
 * The background loops' runs: a counter by outcome, the time of the last success and the last run's length. A loop
 * appears once it has run; in a cluster, in the one process that runs the schedulers.
 */
function backgroundFamilies(runs: BackgroundRuns): Family[] {
  const entries = runs.entries();
  return [
    {
      name: 'ooh_background_runs_total',
      help: 'Runs of the background work (seals, ledger witnesses and timestamps, alerts, media sweep, ...), by loop and outcome: ok, or failed (the error is logged).',
      type: 'counter',
      samples: entries.flatMap(([work, t]) => [
        { labels: { work, outcome: 'ok' }, value: t.ok },
        { labels: { work, outcome: 'failed' }, value: t.failed },
      ]),
    },
    {
      name: 'ooh_background_last_success_timestamp_seconds',
      help: 'When the last run of a background loop that did not fail ended (Unix seconds, the platform clock); alert on time() minus this.',
      type: 'gauge',
      samples: entries
        .filter(([, t]) => t.lastSuccess !== null)
        .map(([work, t]) => ({ labels: { work }, value: t.lastSuccess!.getTime() / 1000 })),
    },
    {
      name: 'ooh_background_last_run_seconds',
      help: 'How long the last run of a background loop took, whatever its outcome.',
      type: 'gauge',
      samples: entries.map(([work, t]) => ({ labels: { work }, value: t.lastRunSeconds ?? 0 })),
    },
  ];
}

/**
 * The room left on the disks of DATA_DIR and of the media files (a folder of its own when instances share it): an
 * operator alerts before it runs out, when the platform would answer 503 (src/http/unavailable.ts). A folder that
 * cannot be read (not made yet) has no sample.
 */
async function diskFamilies(volumes: Readonly<Record<string, string>>): Promise<Family[]> {
  const free: Family['samples'] = [];
  const size: Family['samples'] = [];
  for (const [volume, folder] of Object.entries(volumes)) {
    const stats = await statfs(folder).catch(() => null);
    if (!stats) continue;
    free.push({ labels: { volume }, value: stats.bavail * stats.bsize });
    size.push({ labels: { volume }, value: stats.blocks * stats.bsize });
  }
  return [
    {
      name: 'ooh_disk_free_bytes',
      help: 'Bytes the platform may still write on the disk of a volume: data (DATA_DIR, the embedded database) or media.',
      type: 'gauge',
      samples: free,
    },
    {
      name: 'ooh_disk_size_bytes',
      help: 'Size of the disk of a volume: data (DATA_DIR) or media.',
      type: 'gauge',
      samples: size,
    },
  ];
}

const escapeLabel = (value: string) =>
  value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
const escapeHelp = (value: string) => value.replaceAll('\\', '\\\\').replaceAll('\n', '\\n');

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

/**
 * The text exposition format of families from one or several processes (a cluster's workers, each labelled): a
 * family's HELP and TYPE once, then all its samples.
 */
export function renderMetrics(sets: { labels: Labels; families: Family[] }[]): string {
  const merged = new Map<string, Family>();
  for (const { labels, families } of sets) {
    for (const family of families) {
      let into = merged.get(family.name);
      if (!into) {
        into = { ...family, samples: [] };
        merged.set(family.name, into);
      }
      for (const sample of family.samples)
        into.samples.push({ ...sample, labels: { ...labels, ...sample.labels } });
    }
  }
  const lines: string[] = [];
  for (const family of merged.values()) {
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} ${family.type}`);
    for (const sample of family.samples) {
      const entries = Object.entries(sample.labels);
      const labels =
        entries.length === 0 ? '' : `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}`;
      lines.push(`${family.name}${sample.suffix ?? ''}${labels} ${formatValue(sample.value)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export interface MetricsListener {
  url: string;
  close(): Promise<void>;
}

/**
 * The metrics listener: GET /metrics, nothing else; with a token, only for `Authorization: Bearer <token>`.
 * `collect` gives the text (one process's, or a cluster's gathered from its workers).
 */
export async function listenMetrics(
  options: { host: string; port: number; token: string | null },
  collect: () => Promise<string>,
): Promise<MetricsListener> {
  const expected = options.token === null ? null : Buffer.from(`Bearer ${options.token}`);
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    const answer = (status: number, text: string, headers: Record<string, string> = {}) => {
      response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...headers });
      response.end(text);
    };
    if (path !== '/metrics') return answer(404, 'not found: the metrics are at /metrics\n');
    if (request.method !== 'GET' && request.method !== 'HEAD')
      return answer(405, 'use GET\n', { allow: 'GET' });
    if (expected) {
      const given = Buffer.from(request.headers.authorization ?? '');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        return answer(401, 'send the metrics token: Authorization: Bearer <METRICS_TOKEN>\n', {
          'www-authenticate': 'Bearer realm="metrics"',
        });
      }
    }
    collect().then(
      (text) => {
        response.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE });
        response.end(request.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => answer(503, `metrics unavailable: ${(error as Error).message}\n`),
    );
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: options.host, port: options.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const shownHost = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${shownHost}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
