#!/usr/bin/env node
import { chmodSync, existsSync, mkdtempSync, statSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { type AgentConfig, AgentError, type AgentStatus, loadConfig, readStatus } from '@ooh/agent';
import {
  createProgress,
  type Env,
  enterTypedInDirectory,
  PROGRESS_FLAGS,
  type Progress,
  progressMode,
} from '@ooh/progress';
import { formatAlmaty } from '@ooh/protocol';
import { LocalHost } from '../fleet/host.js';
import { enrolPlayer, issueCreatives, placeCreative, type StructureInfo } from '../fleet/provision.js';
import { ConsoleClient, type PlatformUrls } from '../platform/console-client.js';
import { spawnPlatform } from '../platform/spawn.js';
import { loadScenario, ScenarioError } from '../scenario/load.js';
import { formatDatabaseReport, type PlatformAccess, runScenario } from '../scenario/run.js';
import { Scenario } from '../scenario/schema.js';
import { readAgentLog } from '../truth/agent-log.js';
import { formatReconciliation } from '../truth/reconcile.js';

const USAGE = `usage: hardware-sim <command> ...

  run <scenario.json> [--dir DIR] [--spawn | --platform api=URL,agents=URL,devices=URL,verify=URL --admin-key KEY]
        run a scenario (JSON, see hardware-sim/scenarios/) with a simulated fleet, then reconcile what the screens
        showed with what the platform counted; exit 1 on any loss or double count. Without --platform the
        simulator starts a platform of its own (--test-clock, embedded PostgreSQL unless DATABASE_URL is set).
        A given platform must run with --test-clock for virtual time.

  player --platform api=URL,agents=URL,devices=URL,verify=URL --admin-key KEY --structure CODE [--dir DIR]
        commissioning at a real site: enrol one simulated player for the structure, play an approved test
        creative, send the play, and show the platform's answer and count. Real time; takes about a minute.

  check <player-folder | agent.json | data-folder> [--json]
        inspect a real player's queue: identity, certificate, queue depth, unsent batches, the platform's
        answers (refused and flagged records), rejects. Read-only; safe while the agent runs.

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
        return await playerCommand(
          parsePlatform(values.platform),
          values['admin-key'],
          values.structure,
          values.dir,
          io,
          progressFor(io, values),
        );
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
  const dir = resolve(values.dir ?? mkdtempSync(join(os.tmpdir(), `hardware-sim-${scenario.name}-`)));
  // An embedded PostgreSQL started by root runs as another user: it must be able to reach its folder.
  if (!values.dir) chmodSync(dir, 0o755);
  say(
    `scenario ${scenario.name}: ${scenario.fleet.players} players for ${scenario.time.duration}; files in ${dir}\n`,
  );
  const terminate = scenario.fleet.network === 'terminate';
  let access: PlatformAccess;
  let spawned: Awaited<ReturnType<typeof spawnPlatform>> | null = null;
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
      });
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
    return result.ok ? 0 : 1;
  } finally {
    // A failure's reason is written after this: the line is off the terminal by then.
    progress.done();
    await spawned?.stop();
  }
}

// --- player (commissioning) ---------------------------------------------------------------------------

async function playerCommand(
  urls: PlatformUrls,
  adminKey: string,
  structureCode: string,
  dirOption: string | undefined,
  io: CliIo,
  progress: Progress,
): Promise<number> {
  try {
    return await commission(
      urls,
      adminKey,
      structureCode,
      dirOption,
      {
        ...io,
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

async function commission(
  urls: PlatformUrls,
  adminKey: string,
  structureCode: string,
  dirOption: string | undefined,
  io: CliIo,
  progress: Progress,
): Promise<number> {
  progress.phase('reading the structures');
  const admin = new ConsoleClient(urls.api, adminKey);
  const { items } = await admin.call<{ items: { id: string; code: string; organisation_id: string }[] }>(
    'GET',
    '/api/v1/console/structures',
  );
  const structure = items.find((s) => s.code === structureCode);
  if (!structure) {
    io.err(`no structure with code ${structureCode}\n`);
    return 1;
  }
  const dir = resolve(dirOption ?? mkdtempSync(join(os.tmpdir(), `hardware-sim-player-${structureCode}-`)));
  io.out(`commissioning ${structureCode} (structure ${structure.id}); files in ${dir}\n`);
  // The structure's operator, with a key for this commissioning run.
  const key = await admin.createApiKey(structure.organisation_id, `commissioning ${structureCode}`, [
    'write:submissions',
    'read:creatives',
    'console:fleet',
  ]);
  const operator = admin.as(key.key);
  const today = formatAlmaty(new Date()).slice(0, 10);
  const info: StructureInfo = { id: structure.id, code: structure.code };
  io.out('1. approving a test creative for the structure ...\n');
  progress.phase('approving a test creative');
  const [creative] = await issueCreatives({
    admin,
    operator,
    structures: [info],
    creatives: [{ name: `commissioning-${structureCode}`, seed: Date.now() % 1000 }],
    validFrom: today,
    validUntil: today,
    advertiser: 'Commissioning test (not billed)',
  });
  io.out(`   approval ${creative!.approvalNumber}, media sha256 ${creative!.sha256}\n`);
  io.out('2. enrolling a player (device key, client certificate) ...\n');
  progress.phase('enrolling the player');
  const rootResponse = await fetch(`${urls.verify}/v1/authority-root.pem`);
  const files = await enrolPlayer({
    operator,
    dir,
    structure: info,
    network: { agentsUrl: urls.agents, devicesUrl: urls.devices, verifyUrl: urls.verify },
    authorityRootPem: await rootResponse.text(),
    settings: {
      image_duration_ms: 5_000,
      shipping: {
        min_interval_ms: 1_000,
        idle_interval_ms: 2_000,
        backoff_base_ms: 1_000,
        backoff_cap_ms: 10_000,
      },
      revocation_refresh_ms: 3_600_000,
      renewal_check_ms: 3_600_000,
      media_recheck_ms: 60_000,
      offline_after_ms: 600_000,
    },
  });
  io.out(`   device ${files.deviceId}, certificate until ${files.certificateNotAfter ?? '(none)'}\n`);
  placeCreative(join(dir, 'media'), creative!);
  io.out('3. playing the test creative and sending the play ...\n');
  progress.phase("playing and waiting for the platform's answer (at most 1:30)");
  const host = new LocalHost({ name: 'commissioning', virtualStartMs: null, onPlayed: () => {} });
  await host.add({ id: structureCode, configFile: files.configFile, seed: 1 });
  await host.start(structureCode);
  const dataDir = loadConfig(files.configFile).dataDir;
  const deadline = Date.now() + 90_000;
  let answered: ReturnType<typeof readAgentLog> | null = null;
  try {
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1000));
      const log = readAgentLog(join(dataDir, 'agent.sqlite'));
      if (log.plays.some((p) => p.acknowledged)) {
        answered = log;
        break;
      }
    }
  } finally {
    await host.close();
  }
  if (!answered) {
    io.err('   no play was answered within 90 s: see agent.log in the folder above\n');
    return 1;
  }
  progress.done();
  const play = answered.plays.find((p) => p.acknowledged)!;
  io.out(
    `   play ${play.playId} (${play.durationMs} ms) answered: ${play.status}${play.reason ? ` (${play.reason})` : ''}\n`,
  );
  io.out(`   platform answers so far: ${JSON.stringify(answered.batches)}\n`);
  const counts = await admin.playCounts({ player: `device:${files.deviceId}` });
  const counted = counts.items.reduce((sum, row) => sum + row.plays, 0);
  io.out(`4. the platform counts ${counted} play(s) for this device\n`);
  const ok = play.status === 'accepted' || play.status === 'flagged';
  io.out(ok ? 'COMMISSIONED: the site reaches the platform and its plays count\n' : 'NOT COMMISSIONED\n');
  return ok && counted > 0 ? 0 : 1;
}

// --- check --------------------------------------------------------------------------------------------

function findConfig(target: string): string {
  const path = resolve(target);
  if (!existsSync(path)) throw new UsageError(`check: ${path} does not exist`);
  if (statSync(path).isFile()) return path;
  for (const candidate of [join(path, 'agent.json'), join(dirname(path), 'agent.json')]) {
    if (existsSync(candidate)) return candidate;
  }
  throw new UsageError(`check: no agent.json in ${path} or beside it`);
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

async function checkCommand(target: string, json: boolean, io: CliIo): Promise<number> {
  const configFile = findConfig(target);
  let config: AgentConfig;
  let status: AgentStatus;
  try {
    config = loadConfig(configFile);
    status = await readStatus(config);
  } catch (error) {
    // The player's own files are broken (config, key, database): say what the agent would say, no stack trace.
    if (!(error instanceof AgentError)) throw error;
    io.err(`hardware-sim: check: ${error.code}: ${error.message}\n`);
    return 2;
  }
  const log = readAgentLog(join(config.dataDir, 'agent.sqlite'));
  const unsent = log.plays.filter((p) => !p.acknowledged).length;
  const refused = log.answered.filter((a) => a.status === 'refused');
  const flagged = log.answered.filter((a) => a.status === 'flagged');
  const problems: string[] = [];
  if (status.shipping.alert)
    problems.push(
      `shipping stopped: ${status.shipping.alert.code} on batch ${status.shipping.alert.batch_seq}`,
    );
  if (status.identity.certificate?.state === 'expired')
    problems.push('the certificate has expired: enrol the device again');
  if (log.batches.terminal.length > 0)
    problems.push(`batches refused for good: ${log.batches.terminal.join(', ')}`);
  const stuck = status.shipping.stuck;
  if (stuck)
    problems.push(
      `batch ${stuck.batch_seq} stuck since ${stuck.since}: ${stuck.failures} failed sends, last ${stuck.last_answer ?? 'unknown'}`,
    );
  // apps/agent/README.md "Retention and disk space": below the hard threshold only slot content plays.
  const storage = status.storage;
  if (storage.disk.state === 'full')
    problems.push(
      `the disk is full (${storage.disk.free_bytes ?? '?'} bytes free, hard threshold ${storage.disk.hard_free_bytes}): only slot content plays`,
    );
  if (json) {
    io.out(
      `${JSON.stringify({ config: configFile, config_warnings: config.warnings, status, log: { ...log, plays: undefined, answered: undefined }, unsent, refused, flagged, problems }, null, 2)}\n`,
    );
    return problems.length > 0 ? 1 : 0;
  }
  const certificate = status.identity.certificate;
  const lines = [
    `player          ${configFile}`,
    `device          ${status.device_id ?? '(not enrolled)'} at ${status.structure}`,
    `certificate     ${certificate ? `${certificate.state} until ${certificate.not_after} (${certificate.days_left} days)` : 'none: signed channel only'}`,
    `clock offset    ${status.clock.offset_ms} ms`,
    `mode            ${status.mode}`,
    `queue           ${status.queue.depth} record(s) not acknowledged (${status.queue.unbatched} not yet in a batch); last seq ${status.queue.last_seq}`,
    `plays           ${log.plays.length} logged, ${unsent} not yet acknowledged`,
    `batches         ${log.batches.cut} cut, ${log.batches.answered} answered (${log.batches.duplicateAnswers} as repeats), ${log.batches.attempts} sends`,
    `answers         ${log.batches.received} received, ${log.batches.accepted} accepted, ${log.batches.duplicates} duplicates, ${log.batches.refused} refused, ${log.batches.flagged} flagged`,
    `last send       ${status.shipping.lastSend ? `${status.shipping.lastSend.at} (batch ${status.shipping.lastSend.batch_seq})` : 'never'}`,
    `revocations     ${status.revocation_list_version === null ? 'no list yet' : `version ${status.revocation_list_version}`}`,
    `storage         database ${mib(storage.database.file_bytes)} + wal ${mib(storage.database.wal_bytes)}; disk ${storage.disk.state}, ${storage.disk.free_bytes === null ? '?' : mib(storage.disk.free_bytes)} free (warning below ${mib(storage.disk.warn_free_bytes)}, hard below ${mib(storage.disk.hard_free_bytes)}); oldest unacknowledged ${storage.oldest_unacknowledged ? `seq ${storage.oldest_unacknowledged.seq}, logged ${storage.oldest_unacknowledged.logged_at}` : 'none'}; ${storage.retention.kept.records} records kept`,
  ];
  if (refused.length > 0) {
    const reasons = new Map<string, number>();
    for (const r of refused) reasons.set(r.reason ?? '?', (reasons.get(r.reason ?? '?') ?? 0) + 1);
    lines.push(`refused         ${[...reasons].map(([reason, n]) => `${n} ${reason}`).join(', ')}`);
  }
  if (flagged.length > 0) {
    const flags = new Map<string, number>();
    for (const f of flagged) for (const flag of f.flags ?? []) flags.set(flag, (flags.get(flag) ?? 0) + 1);
    lines.push(`flagged         ${[...flags].map(([flag, n]) => `${n} ${flag}`).join(', ')}`);
  }
  // Records the platform could not take while it took others (apps/agent/README.md, "Nothing resent forever"): kept on
  // the player, never counted; not a problem of the player's own (the exit code stays).
  const setAside = status.shipping.setAside;
  if (setAside.records > 0) {
    lines.push(`set aside       ${setAside.records} record(s) the platform could not take`);
    for (const record of setAside.newest) {
      lines.push(
        `set aside       seq ${record.seq} ${record.kind} (${record.set_aside_at}): ${record.reason}`,
      );
    }
  }
  for (const reject of log.rejects.slice(-10)) {
    lines.push(`reject          ${reject.at} ${reject.code} ${reject.file ?? ''}`);
  }
  // Not problems (the exit code stays): a key the agent ignores, misspelt or from a newer agent.
  for (const warning of config.warnings) lines.push(`warning         ${warning}`);
  for (const problem of problems) lines.push(`PROBLEM         ${problem}`);
  io.out(`${lines.join('\n')}\n`);
  return problems.length > 0 ? 1 : 0;
}

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
