import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import type { PlatformConfig } from './config.js';
import {
  type Family,
  listenMetrics,
  type MetricsListener,
  type PlatformMetrics,
  renderMetrics,
} from './http/metrics.js';
import { platformExecArgv } from './heap.js';
import { openDatabase } from './platform.js';

/*
 * Several server processes on the same four ports (PLATFORM_WORKERS; docs/decisions.md "Proof of play: ingestion
 * at speed"). Node's cluster module: the primary holds the listening sockets and hands each new connection to a
 * worker in turn; every worker is a whole platform (four hosts, its own pool). This is safe because everything
 * shared lives in PostgreSQL (DESIGN.md section 2: "Several platform processes may run against one database").
 *
 * The primary opens the database first (the embedded PostgreSQL when DATABASE_URL is unset, and the migrations),
 * then starts the workers with DATABASE_URL pointing at it. Worker 0 alone runs the schedulers (seals, ledger,
 * open data, city events); they take PostgreSQL locks anyway, so this only spares the others the polling. A
 * worker that dies is started again; SIGTERM, SIGINT or SIGHUP stops the workers, then the pool and the database.
 */

/** Set by the primary in a worker's environment. */
export const WORKER_INDEX_ENV = 'PLATFORM_WORKER_INDEX';

export interface WorkerRole {
  index: number;
  /** Whether this process runs the schedulers. */
  schedulers: boolean;
}

/** This process's place in a cluster, or null when it is not a worker. */
export function workerRole(): WorkerRole | null {
  if (!cluster.isWorker) return null;
  const index = Number(process.env[WORKER_INDEX_ENV] ?? 0);
  return { index, schedulers: index === 0 };
}

/** Messages from a worker to the primary. */
interface ListeningMessage {
  type: 'platform-listening';
  urls: Record<string, string>;
}

/** The primary asks every worker for its metrics at each scrape; each answers with its families. */
interface MetricsRequest {
  type: 'platform-metrics-request';
  id: number;
}
interface MetricsAnswer {
  type: 'platform-metrics';
  id: number;
  families: Family[];
}

/** A worker answers the primary's metrics requests with its own (the primary serves METRICS_PORT for all). */
export function answerMetricsRequests(metrics: PlatformMetrics): void {
  if (!cluster.isWorker) return;
  process.on('message', (message: unknown) => {
    const request = message as MetricsRequest | null;
    if (request?.type !== 'platform-metrics-request') return;
    void metrics.collect().then(
      (families) =>
        process.send?.({ type: 'platform-metrics', id: request.id, families } satisfies MetricsAnswer),
      () =>
        process.send?.({ type: 'platform-metrics', id: request.id, families: [] } satisfies MetricsAnswer),
    );
  });
}

const METRICS_WAIT_MS = 5000;

/**
 * The metrics of every live worker, each sample labelled worker="<index>" (a scrape of a port the workers share
 * would reach one worker at random). A worker that does not answer in time is left out of this scrape, which
 * ooh_worker_metrics_answered 0 says.
 */
function gatherMetrics(workers: Map<number, Worker>): Promise<string> {
  const id = Math.floor(Math.random() * 2 ** 31);
  return Promise.all(
    [...workers.entries()]
      .filter(([, worker]) => !worker.isDead())
      .map(
        ([index, worker]) =>
          new Promise<{ labels: Record<string, string>; families: Family[] }>((resolve) => {
            const done = (families: Family[], answered: boolean) => {
              clearTimeout(timer);
              worker.off('message', onMessage);
              const flag: Family = {
                name: 'ooh_worker_metrics_answered',
                help: 'Whether the worker answered this scrape (1) or is missing from it (0).',
                type: 'gauge',
                samples: [{ labels: {}, value: answered ? 1 : 0 }],
              };
              resolve({ labels: { worker: String(index) }, families: [flag, ...families] });
            };
            const onMessage = (message: unknown) => {
              const answer = message as MetricsAnswer | null;
              if (answer?.type === 'platform-metrics' && answer.id === id) done(answer.families, true);
            };
            const timer = setTimeout(() => done([], false), METRICS_WAIT_MS);
            worker.on('message', onMessage);
            worker.send({ type: 'platform-metrics-request', id } satisfies MetricsRequest);
          }),
      ),
  ).then(renderMetrics);
}

const isListening = (message: unknown): message is ListeningMessage =>
  typeof message === 'object' &&
  message !== null &&
  (message as { type?: unknown }).type === 'platform-listening';

/** Tells the primary (when there is one) that this worker serves, and at which addresses. */
export function reportListening(urls: Record<string, string>): void {
  if (cluster.isWorker) process.send?.({ type: 'platform-listening', urls } satisfies ListeningMessage);
}

/** A worker stops when its primary is gone (killed): the listening sockets went with it. */
export function exitWithPrimary(onExit: () => void): void {
  if (cluster.isWorker) cluster.worker?.on('disconnect', onExit);
}

const RESTART_DELAY_MS = 1000;

export interface StopSignals {
  /** From now on SIGINT, SIGTERM and SIGHUP go to `stop`; one that came before goes to it at once. */
  handle(stop: (signal: NodeJS.Signals) => void): void;
}

/**
 * Takes SIGINT, SIGTERM and SIGHUP (a closed terminal) from now on, so that none ends the process while it starts
 * and leaves behind what it started: one that comes before `handle` is kept for it; a second one leaves at once.
 */
export function holdStopSignals(): StopSignals {
  let stop: ((signal: NodeJS.Signals) => void) | null = null;
  let held: NodeJS.Signals | null = null;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (stop) stop(signal);
      else if (held) process.exit(130);
      else held = signal;
    });
  }
  return {
    handle: (handler) => {
      stop = handler;
      if (held) handler(held);
    },
  };
}

/**
 * Runs the primary: opens the database, starts `config.workers` workers and keeps them running. Resolves with the
 * exit code once stopped; rejects when a worker fails before all of them served once (a broken configuration).
 */
export async function runPrimary(
  config: PlatformConfig,
  log: Logger,
  onListening: (urls: Record<string, string>) => void,
  signals: StopSignals = holdStopSignals(),
): Promise<number> {
  const database = await openDatabase(config, log);
  let stopping = false;
  let started = false;
  const workers = new Map<number, Worker>();
  let metricsListener: MetricsListener | null = null;

  // The workers get this process's Node arguments and the old generation's growth (heap.ts), unless given.
  cluster.setupPrimary({ execArgv: platformExecArgv(process.execArgv) });
  const fork = (index: number): Worker => {
    const worker = cluster.fork({
      DATABASE_URL: database.url,
      [WORKER_INDEX_ENV]: String(index),
    });
    workers.set(index, worker);
    return worker;
  };

  const stopped = new Promise<number>((resolve, reject) => {
    let listening = 0;
    const stop = async (signal: string, failure?: Error) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'stopping workers');
      await Promise.all(
        [...workers.values()].map(
          (worker) =>
            new Promise<void>((done) => {
              if (worker.isDead()) return done();
              worker.once('exit', () => done());
              worker.process.kill('SIGTERM');
            }),
        ),
      );
      await metricsListener?.close();
      await database.close().catch((error) => log.error({ err: error }, 'error while closing the database'));
      if (failure) reject(failure);
      else resolve(0);
    };
    signals.handle((signal) => void stop(signal));

    cluster.on('message', (_worker, message: unknown) => {
      if (!isListening(message)) return;
      listening += 1;
      if (!started && listening === config.workers) {
        started = true;
        onListening(message.urls);
      }
    });
    cluster.on('exit', (worker, code, signal) => {
      const index = [...workers.entries()].find(([, w]) => w === worker)?.[0];
      if (index === undefined || stopping) return;
      if (!started) {
        // A worker that cannot start once will not start again: stop and say so.
        void stop(
          'worker failed',
          new Error(`platform worker ${index} exited (${signal ?? code}) before it served`),
        );
        return;
      }
      log.error({ worker: index, code, signal }, 'platform worker died; starting it again');
      setTimeout(() => {
        if (!stopping) fork(index);
      }, RESTART_DELAY_MS).unref();
    });
  });

  if (config.metrics) metricsListener = await listenMetrics(config.metrics, () => gatherMetrics(workers));
  // A signal held while the database opened has stopped it already: no worker then.
  for (let index = 0; index < config.workers && !stopping; index += 1) fork(index);
  return stopped;
}
