#!/usr/bin/env node
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  createProgress,
  type Env,
  enterTypedInDirectory,
  PROGRESS_FLAGS,
  type Progress,
  progressMode,
} from '@ooh/progress';
import { formatAlmaty } from '@ooh/protocol';
import { explainCallFailure } from '../platform/call-failure.js';
import { ConsoleClient, PlatformCallError, type PlatformUrls } from '../platform/console-client.js';
import { spawnPlatform } from '../platform/spawn.js';
import { loadScenario, ScenarioError } from '../scenario/load.js';
import { formatDatabaseReport, type PlatformAccess, runScenario } from '../scenario/run.js';
import { Scenario } from '../scenario/schema.js';
import { formatReconciliation } from '../truth/reconcile.js';
import { claimFolder, type FolderClaim, FolderInUse } from '../util/folder-lock.js';
import { checkCommand } from './check.js';
import { commissionCommand } from './commission.js';

const USAGE = `usage: hardware-sim <command> ...

  run <scenario.json> [--dir DIR] [--spawn | --platform api=URL,agents=URL,devices=URL,verify=URL --admin-key KEY]
        run a scenario (JSON, see hardware-sim/scenarios/) with a simulated fleet, then reconcile what the screens
        showed with what the platform counted; exit 1 on any loss or double count. Without --platform the
        simulator starts a platform of its own (--test-clock, embedded PostgreSQL unless DATABASE_URL is set).
        A given platform must run with --test-clock for virtual time.

  player --platform api=URL,agents=URL,devices=URL,verify=URL --admin-key KEY --structure CODE [--dir DIR]
        commissioning at a real site: enrol one simulated player for the structure, play an approved test
        creative, send the play, and show the platform's answer and count. Real time; takes about a minute.
        Exit 1 names the step that failed and what to do; a device it enrolled is revoked. Ctrl-C: exit 130.
        --dir must be new or empty (exit 2 otherwise, before anything is done).

  check <player-folder | agent.json | data-folder> [--json]
        inspect a real player's queue: identity, certificate, queue depth, unsent batches, the platform's
        answers (refused and flagged records), rejects. Read-only (writes nothing in the player's folder); safe
        while the agent runs. Exit 0 ok, 1 a problem on the player, 2 not inspected (the line says why).

  schema
        print the scenario JSON schema.

  run and player draw their progress on stderr when it is a terminal (not in CI, not in a pipe); --progress
  draws it anyway, --no-progress never (or OOH_PROGRESS=1 / 0). stdout holds the output alone.
`;

export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  /** Whether `err` is a terminal: the progress of run and player is drawn there (@ooh/progress). */
  isTty: boolean;
  /** The terminal's width, so the progress line never wraps. */
  columns?: number | undefined;
  /** Default process.env (CI, TERM, NO_COLOR, OOH_PROGRESS). */
  env?: Env;
}

const defaultIo: CliIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  isTty: process.stderr.isTTY === true,
  get columns() {
    return process.stderr.columns;
  },
};

/** Bad input on the command line: answered with the problem and the usage, exit code 2. */
class UsageError extends Error {}

function parseCommandLine(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      dir: { type: 'string' },
      platform: { type: 'string' },
      'admin-key': { type: 'string' },
      spawn: { type: 'boolean', default: false },
      structure: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
      ...PROGRESS_FLAGS,
    },
  });
}

/** The progress line of one command, on `io.err`, when it is a terminal (or the flags say so). */
function progressFor(io: CliIo, flags: { progress?: boolean; 'no-progress'?: boolean }): Progress {
  const env = io.env ?? process.env;
  return createProgress({
    stream: {
      write: io.err,
      isTTY: io.isTty,
      get columns() {
        return io.columns;
      },
    },
    mode: progressMode(flags, env),
    env,
  });
}

export async function main(argv: string[], io: CliIo = defaultIo): Promise<number> {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    // node:util throws a TypeError (ERR_PARSE_ARGS_*) for an unknown option or a missing value: bad input, not a bug.
    return usage(io, (error as Error).message);
  }
  const { values, positionals } = parsed;
  const [command, target] = positionals;
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  if (!command) return usage(io, 'no command given');
  try {
    switch (command) {
      case 'schema':
        io.out(`${JSON.stringify(Scenario, null, 2)}\n`);
        return 0;
      case 'run': {
        if (!target) return usage(io, 'run needs a scenario file');
        // Checked before anything starts: a typo in a URL should not cost a platform start.
        // --spawn (a platform of its own, the default) and --platform (a given one) are the usage's alternatives:
        // both at once would silently run against the given platform.
        if (values.spawn && values.platform) return usage(io, '--spawn and --platform exclude each other');
        const urls = values.platform ? parsePlatform(values.platform) : null;
        if (urls && !values['admin-key']) return usage(io, '--platform needs --admin-key');
        return await runCommand(
          target,
          { dir: values.dir, urls, adminKey: values['admin-key'] },
          io,
          progressFor(io, values),
        );
      }
      case 'player': {
        if (!values.platform || !values['admin-key'] || !values.structure) {
          return usage(io, 'player needs --platform, --admin-key and --structure');
        }
        const urls = parsePlatform(values.platform);
        const progress = progressFor(io, values);
        try {
          return await commissionCommand(
            { urls, adminKey: values['admin-key'], structureCode: values.structure, dir: values.dir },
            {
              // Every line goes through the progress line, which is taken off the terminal first.
              out: (text) => progress.print(text, io.out),
              err: (text) => progress.print(text, io.err),
            },
            progress,
          );
        } finally {
          progress.done();
        }
      }
      case 'check': {
        if (!target) return usage(io, 'check needs a player folder');
        return await checkCommand(target, values.json === true, io);
      }
      default:
        return usage(io, `unknown command ${command}`);
    }
  } catch (error) {
    if (error instanceof UsageError) return usage(io, error.message);
    throw error;
  }
}

function usage(io: CliIo, problem: string): number {
  io.err(`hardware-sim: ${problem}\n\n${USAGE}`);
  return 2;
}

const PLATFORM_HOSTS = ['api', 'agents', 'devices', 'verify'] as const;

/** `api=URL,agents=URL,devices=URL,verify=URL` (the four hosts of one platform); a UsageError otherwise. */
export function parsePlatform(text: string): PlatformUrls {
  const urls: Partial<PlatformUrls> = {};
  for (const part of text.split(',')) {
    const equals = part.indexOf('=');
    const name = part.slice(0, Math.max(equals, 0));
    const url = equals < 0 ? '' : part.slice(equals + 1);
    if (!url || !(PLATFORM_HOSTS as readonly string[]).includes(name)) {
      throw new UsageError(`--platform: "${part}" is not name=URL (names: ${PLATFORM_HOSTS.join(', ')})`);
    }
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
      throw new UsageError(`--platform: ${name}=${url} is not an http(s) URL`);
    }
    urls[name as keyof PlatformUrls] = url.replace(/\/+$/, '');
  }
  for (const name of PLATFORM_HOSTS) {
    if (!urls[name]) throw new UsageError(`--platform: ${name}=URL is missing`);
  }
  return urls as PlatformUrls;
}

// --- run ------------------------------------------------------------------------------------------------

async function runCommand(
  file: string,
  values: { dir: string | undefined; urls: PlatformUrls | null; adminKey: string | undefined },
  io: CliIo,
  progress: Progress,
): Promise<number> {
  let scenario: Scenario;
  try {
    scenario = loadScenario(file);
  } catch (error) {
    if (error instanceof ScenarioError) {
      io.err(`${error.message}\n`);
      return 2;
    }
    throw error;
  }
  // Every line of output goes through the progress line, which is taken off the terminal first.
  const say = (text: string) => progress.print(text, io.out);
  // A given platform is asked first, before any folder is made: its host and what to do, not a bare "fetch failed".
  if (values.urls && values.adminKey) {
    const problem = await checkGivenPlatform(values.urls, values.adminKey, scenario.time.virtual !== false);
    if (problem) {
      io.err(`hardware-sim: run: ${problem}; nothing was run\n`);
      return 1;
    }
  }
  // A --dir is this run's alone while it runs (util/folder-lock.ts): a second run there would start a platform on the
  // first one's PostgreSQL and add players to its fleet.
  let claim: FolderClaim | null = null;
  if (values.dir) {
    const given = resolve(values.dir);
    mkdirSync(given, { recursive: true });
    try {
      claim = claimFolder(given, 'hardware-sim run');
    } catch (error) {
      if (!(error instanceof FolderInUse)) throw error;
      const who = error.holder
        ? `${error.holder.command} (pid ${error.holder.pid})`
        : 'another hardware-sim command';
      io.err(
        `hardware-sim: run: another run uses this --dir ${given}: ${who}: wait for it to end, or give another --dir; nothing was started\n`,
      );
      return 1;
    }
  }
  const dir = resolve(values.dir ?? mkdtempSync(join(os.tmpdir(), `hardware-sim-${scenario.name}-`)));
  // An embedded PostgreSQL started by root runs as another user: it must be able to reach its folder.
  if (!values.dir) chmodSync(dir, 0o755);
  let finished = false;
  say(
    `scenario ${scenario.name}: ${scenario.fleet.players} players for ${scenario.time.duration}; files in ${dir}\n`,
  );
  const terminate = scenario.fleet.network === 'terminate';
  let access: PlatformAccess;
  let spawned: Awaited<ReturnType<typeof spawnPlatform>> | null = null;
  // Ctrl-C, a CI cancel or `kill` (SIGTERM), a closed terminal (SIGHUP): the platform this run started, and its
  // PostgreSQL, are stopped before exiting (128 + the signal's number). A second signal exits at once.
  let spawning = false;
  let stopping: NodeJS.Signals | null = null;
  const exitCode = (signal: NodeJS.Signals) => 128 + (os.constants.signals[signal] ?? 0);
  const stopAndExit = async (signal: NodeJS.Signals): Promise<never> => {
    progress.done();
    const platform = spawned ? 'the platform it started was stopped' : 'no platform of its own was running';
    await spawned?.stop().catch(() => {});
    claim?.release();
    io.err(`hardware-sim: run: stopped by ${signal}; ${platform}; files in ${dir}\n`);
    process.exit(exitCode(signal));
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(exitCode(signal));
    stopping = signal;
    // While the platform starts there is nothing to stop yet: it is stopped as soon as it has started.
    if (!spawning) void stopAndExit(signal);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  try {
    if (values.urls && values.adminKey) {
      access = {
        urls: values.urls,
        adminKey: values.adminKey,
        clock: scenario.time.virtual === false ? null : 'http',
        ...(terminate ? { clientCertHeader: 'x-client-cert' } : {}),
      };
    } else {
      say('starting a platform (test clock, embedded PostgreSQL unless DATABASE_URL is set) ...\n');
      progress.phase('starting a platform');
      spawning = true;
      spawned = await spawnPlatform({
        dataDir: join(dir, 'platform'),
        testClock: scenario.time.virtual !== false,
        ...(terminate
          ? {
              env: {
                DEVICES_TLS_TERMINATION: 'proxy',
                DEVICES_CLIENT_CERT_HEADER: 'x-client-cert',
                DEVICES_TRUSTED_PROXIES: '127.0.0.1',
              },
            }
          : {}),
      })
        .catch(async (error: unknown) => {
          // A signal during the start (Ctrl-C reaches the platform too): the signal is the story, not its failure.
          if (stopping) await stopAndExit(stopping);
          throw error;
        })
        .finally(() => {
          spawning = false;
        });
      if (stopping) await stopAndExit(stopping);
      access = {
        urls: spawned.urls,
        adminKey: spawned.adminKey,
        clock: scenario.time.virtual === false ? null : 'http',
        restart: (downMs) => spawned!.restart(downMs),
        ...(terminate ? { clientCertHeader: 'x-client-cert' } : {}),
      };
    }
    // The run itself: how far through the scenario's time, with the virtual clock and the plays shown so far.
    let running = false;
    let detail = '';
    const result = await runScenario(scenario, {
      dir: join(dir, 'fleet'),
      platform: access,
      progress,
      onProgress: (p) => {
        if (!running) {
          running = true;
          progress.phase(`running ${scenario.name}`, { total: 1, count: false, detail: () => detail });
        }
        detail =
          `${formatAlmaty(p.virtualNow).slice(0, 16).replace('T', ' ')}  shown ${p.shown.toLocaleString('en-US')}` +
          (p.step ? `  ${p.step}` : '');
        progress.update(p.fraction);
      },
      log: (line) => say(`${line}\n`),
    });
    progress.done();
    const totals = result.reconciliation.totals;
    const rows: [string, string][] = [
      ['scenario', scenario.name],
      ['players', String(scenario.fleet.players)],
      ['virtual time', scenario.time.duration],
      ['real time', `${result.realSeconds.toFixed(1)} s (${result.steps} steps)`],
      ['plays shown', totals.played.toLocaleString('en-US')],
      ['plays counted', totals.counted.toLocaleString('en-US')],
      [
        'network',
        result.network
          ? `${result.network.refused} refused, ${result.network.dropped} answers dropped`
          : 'direct',
      ],
      ['queues drained', result.drained ? 'yes' : 'NO'],
      ['warnings', String(result.warnings.length)],
    ];
    const width = Math.max(...rows.map(([k]) => k.length));
    io.out(`\n${rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n')}\n\n`);
    // The play logs over the run (scenarios with report.database_every; the largest file always).
    const database = formatDatabaseReport(result.database);
    if (database) io.out(`${database}\n`);
    io.out(formatReconciliation(result.reconciliation));
    finished = true;
    return result.ok ? 0 : 1;
  } finally {
    // A failure's reason is written after this: the line is off the terminal by then.
    progress.done();
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
    if (!stopping) await spawned?.stop();
    claim?.release();
    // A temporary folder a failed run put no file in (its empty fleet/ folder) tells nothing: not left behind.
    if (!values.dir && !finished && !holdsAnyFile(dir)) rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether a file (not only folders) is anywhere under `dir`. */
function holdsAnyFile(dir: string): boolean {
  try {
    return readdirSync(dir, { withFileTypes: true }).some(
      (entry) => !entry.isDirectory() || holdsAnyFile(join(dir, entry.name)),
    );
  } catch {
    return true;
  }
}

/** How long `run` waits for a given platform's first answer. */
const GIVEN_PLATFORM_TIMEOUT_MS = 15_000;

/**
 * Asks a given platform (`run --platform`) whether it can be used: reachable, the admin key taken, and, for virtual
 * time, started with --test-clock (its clock route exists only then: apps/platform/src/clock/routes.ts). Null when it
 * can; otherwise what is wrong, naming api=, and what to do.
 */
async function checkGivenPlatform(
  urls: PlatformUrls,
  adminKey: string,
  testClock: boolean,
): Promise<string | null> {
  const client = new ConsoleClient(urls.api, adminKey, GIVEN_PLATFORM_TIMEOUT_MS);
  try {
    if (testClock) await client.clock();
    else await client.listOrganisations();
    return null;
  } catch (error) {
    if (
      testClock &&
      error instanceof PlatformCallError &&
      error.status === 404 &&
      error.code === 'not_found'
    ) {
      return (
        `the platform at --platform api=${urls.api} does not run with --test-clock (GET /api/v1/console/clock: HTTP 404 not_found): ` +
        'start it with `platform run --test-clock` (virtual time moves its clock), give a scenario with "time": {"virtual": false}, or leave --platform out (run then starts a platform of its own)'
      );
    }
    const { what, action } = explainCallFailure(urls.api, error, 'api');
    return `the platform at --platform api=${urls.api}: ${what}: ${action}, or leave --platform out (run then starts a platform of its own)`;
  }
}

const STOP_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** An error's message followed by those of its causes: "fetch failed: connect ECONNREFUSED 127.0.0.1:1". */
export function reasonOf(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const message = e instanceof Error ? e.message : String(e);
    if (message && !parts.includes(message)) parts.push(message);
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join(': ') || 'unknown error';
}

const invokedDirectly =
  process.argv[1] !== undefined && import.meta.url === new URL(`file://${resolve(process.argv[1])}`).href;
if (invokedDirectly) {
  enterTypedInDirectory('sim');
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      // A field technician reads the reason (with its causes: "fetch failed" says little without the refused
      // connection behind it); the stack is for whoever debugs the simulator.
      const stack = process.env['HARDWARE_SIM_STACK'] === '1';
      process.stderr.write(
        `hardware-sim: ${stack ? ((error as Error).stack ?? String(error)) : reasonOf(error)}\n` +
          (stack ? '' : '(HARDWARE_SIM_STACK=1 prints the stack trace)\n'),
      );
      process.exitCode = 1;
    },
  );
}
