#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { holdForTest, takeBackup } from './backup/take.js';
import { markStart, restoreBackup, restoreUnderWay, restoreUnderWayError } from './backup/restore.js';
import { bootstrap } from './bootstrap.js';
import { loadConfig, type PlatformConfig } from './config.js';
import { featureSettingProblems } from './settings-check.js';
import { checkListeners, StartError, startFailure } from './start-errors.js';
import { createLogger, openDatabase, startPlatform } from './platform.js';
import { systemClock } from './clock.js';
import { HEAP_GROWING_PERCENT, setsHeapGrowth } from './heap.js';
import {
  answerMetricsRequests,
  exitWithPrimary,
  holdStopSignals,
  reportListening,
  runPrimary,
  workerRole,
} from './cluster.js';

const USAGE = `usage: platform [run] [--test-clock] [--config FILE]
       platform bootstrap [--config FILE]
       platform backup TARGET [--config FILE]
       platform restore BACKUP [--config FILE]

  backup   a consistent copy of DATA_DIR into the new folder TARGET, while the platform runs or not: the embedded
           PostgreSQL's online physical backup (with the WAL it needs), the secrets (modes kept), the media files
           and a manifest of every file's SHA-256; written as TARGET.partial and renamed when whole. With
           DATABASE_URL the database is the server's to back up (pg_basebackup): secrets and media only
  restore  checks every file of BACKUP against its manifest, then copies it into an empty or absent DATA_DIR
           (never over anything), starts the copy's database once and moves its approval and submission
           numbers and revocation list version past what the lost time after the backup could have used

Environment: API_PORT AGENTS_PORT DEVICES_PORT VERIFY_PORT HOST DATA_DIR DATABASE_URL
             PLATFORM_ENV (test|prod) LOG_LEVEL LOG_FORMAT (json|pretty) CONFIG_FILE
             PUBLIC_{API,AGENTS,DEVICES,VERIFY}_URL METRICS_PORT METRICS_HOST METRICS_TOKEN
             PLATFORM_WORKERS (processes serving the ports: a number or auto; default 1)
             EMBEDDED_PG_PORT TRUST_PROXY (addresses, CIDR ranges, loopback, linklocal, uniquelocal)
             and the features' settings (MEDIA_MAX_BYTES, WEBHOOK_ALLOWED_TARGETS, ...): the README's table
             lists every variable; a config file takes them in lower case`;

/**
 * What an operator with DATABASE_URL must do for the database: the server's own physical backup, named exactly, its
 * password left out (pg_basebackup asks for it, or takes PGPASSWORD).
 */
function externalDatabaseHint(databaseUrl: string, target: string): string {
  const url = new URL(databaseUrl);
  const host = url.searchParams.get('host') ?? (url.hostname || 'localhost');
  const port = url.port || '5432';
  const user = decodeURIComponent(url.username) || 'postgres';
  return [
    'the database is NOT in this backup: DATABASE_URL names a PostgreSQL server, whose data is backed up with its own',
    'tools (a role with REPLICATION, or a superuser):',
    `  pg_basebackup --host=${host} --port=${port} --username=${user} --pgdata=${target}-database --wal-method=stream --checkpoint=fast --progress`,
  ].join('\n');
}

/** The configuration once read, for naming the variable behind a failure. */
let config: PlatformConfig | null = null;
/** This command's mark in DATA_DIR while it starts (markStart): released on every way out. */
let startMark: { release: () => Promise<void> } | null = null;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'test-clock': { type: 'boolean', default: false },
      config: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const command = positionals[0] ?? 'run';
  if (!['run', 'bootstrap', 'backup', 'restore'].includes(command)) {
    throw new StartError(
      `platform: unknown command "${command}"; the commands are run, bootstrap, backup and restore (platform --help)`,
      2,
    );
  }
  const folderArgument = command === 'backup' || command === 'restore';
  if (folderArgument && positionals.length !== 2) {
    throw new StartError(
      `platform ${command}: takes one folder, ${command === 'backup' ? 'the new backup' : 'the backup'} (platform --help)`,
      2,
    );
  }
  if (!folderArgument && positionals.length > 1) {
    throw new StartError(
      `platform ${command}: takes no argument, not "${positionals[1]}" (platform --help)`,
      2,
    );
  }
  // Every bad value at once: the core settings' and every feature's (README: "a line per bad value").
  config = loadConfig({
    file: values.config,
    testClock: values['test-clock'] === true,
    alsoCheck: featureSettingProblems,
  });
  const settings = config;
  // A restore's claim on DATA_DIR: nothing else may initialise, write or copy it meanwhile. This command's own mark
  // goes in first and the claim is looked for after it, so that a restore claiming the folder at the same moment
  // finds the mark (src/backup/restore.ts); the mark goes once what the command writes at start is written.
  // (A backup of a DATA_DIR that does not exist is refused as such, with nothing made.)
  if (command !== 'restore' && (command !== 'backup' || existsSync(settings.dataDir))) {
    startMark = await markStart(settings.dataDir);
    const restoring = restoreUnderWay(settings.dataDir);
    if (restoring) throw restoreUnderWayError(`platform ${command}`, restoring);
    // Tests only: holds the command here, past its look for a claim and before it writes anything.
    const hold = process.env['PLATFORM_START_TEST_HOLD'];
    if (hold) await holdForTest(hold);
  }
  // From here a Ctrl-C waits for what is starting (the embedded PostgreSQL runs in its own process group, so it is
  // this process that stops it), then stops it cleanly; a second one leaves at once.
  const signals = holdStopSignals();

  if (command === 'backup') {
    const summary = await takeBackup({
      config: settings,
      target: positionals[1]!,
      say: (line) => console.error(line),
      // Tests only: pauses the copy half-way (src/backup/take.ts).
      holdFile: process.env['PLATFORM_BACKUP_TEST_HOLD'],
    });
    if (summary.database.kind === 'external') {
      console.error(externalDatabaseHint(settings.databaseUrl!, summary.target));
    }
    console.error(
      `backup complete: ${summary.files} files, ${(summary.bytes / 1048576).toFixed(1)} MiB; ` +
        `restore with: platform restore ${summary.target}`,
    );
    console.log(summary.target);
    return 0;
  }
  if (command === 'restore') {
    const summary = await restoreBackup({
      config: settings,
      source: positionals[1]!,
      say: (line) => console.error(line),
      // Tests only: pauses the copy half-way (src/backup/restore.ts).
      holdFile: process.env['PLATFORM_BACKUP_TEST_HOLD'],
    });
    console.error(
      summary.manifest.database.kind === 'embedded'
        ? `restored into ${summary.dataDir}; the next platform run serves it`
        : `restored the secrets and media files into ${summary.dataDir}, and advanced the numbers of DATABASE_URL's ` +
            'database (restored with its own tools first)',
    );
    return 0;
  }

  if (command === 'bootstrap') {
    // Same configuration, no listeners: open the database, migrate, bootstrap.
    const log = createLogger({
      ...settings,
      logLevel: settings.logLevel === 'info' ? 'warn' : settings.logLevel,
    });
    // Beside a running platform, its cluster is used (issue "A newcomer's two commands", item 2).
    const database = await openDatabase(settings, log, { use: 'command', what: 'platform bootstrap' });
    if (database.embedded?.owner) {
      console.error(
        `using the embedded PostgreSQL of ${database.embedded.owner.what} (pid ${database.embedded.owner.pid})`,
      );
    }
    try {
      const result = await bootstrap(database.db, systemClock);
      console.error(
        result.created
          ? `created the authority organisation ${result.organisationId}`
          : 'authority organisation exists',
      );
      console.error(`admin API key ${result.keyId} (scope console:admin), shown once on the next line;`);
      console.error(`  revoke it with DELETE /api/v1/console/api-keys/${result.keyId} or in the console`);
      console.log(result.key);
    } finally {
      await database.close();
    }
    return 0;
  }

  const running = (urls: Record<string, string>, processes: number) =>
    console.error(
      [
        processes > 1 ? `platform running (${processes} processes):` : 'platform running:',
        `  api      ${urls['api']}/api/v1`,
        `  agents   ${urls['agents']}/s/v1`,
        `  devices  ${urls['devices']}/d/v1`,
        `  verify   ${urls['verify']}/v1`,
        settings.metrics ? `  metrics  http://${settings.metrics.host}:${settings.metrics.port}/metrics` : '',
        settings.testClock ? '  test clock ON: PUT /api/v1/console/clock sets the time' : '',
      ]
        .filter(Boolean)
        .join('\n'),
    );

  // PLATFORM_WORKERS > 1: this process is the primary of a cluster (src/cluster.ts).
  const role = workerRole();
  // A port another program holds stops the start here, before the database is opened or migrated.
  if (role === null) await checkListeners(settings);
  if (role === null && settings.workers > 1) {
    return runPrimary(
      settings,
      createLogger(settings),
      (urls) => {
        void startMark?.release();
        running(urls, settings.workers);
      },
      signals,
    );
  }

  const platform = await startPlatform({
    config: settings,
    ...(role
      ? {
          schedulers: role.schedulers,
          applicationName: `ooh-platform-w${role.index}`,
          // The primary serves the metrics of every worker on METRICS_PORT.
          metricsListener: false,
        }
      : {}),
  });
  await startMark?.release();
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    platform.ctx.log.info({ signal }, 'stopping');
    await platform.close();
    process.exit(0);
  };
  signals.handle((signal) => void stop(signal));
  if (role) {
    answerMetricsRequests(platform.metrics);
    reportListening(platform.urls);
    // The primary holds the listening sockets: without it this worker can only leave.
    exitWithPrimary(() => void stop('primary gone'));
  } else {
    running(platform.urls, 1);
    if (!setsHeapGrowth(process.execArgv)) {
      platform.ctx.log.info(
        `started without --heap-growing-percent: full garbage collections about once a second under load; ` +
          `start node with --heap-growing-percent=${HEAP_GROWING_PERCENT} (README, "Running the platform")`,
      );
    }
  }
  return new Promise<number>(() => {});
}

main(process.argv.slice(2)).then(
  async (code) => {
    await startMark?.release();
    process.exit(code);
  },
  async (error: unknown) => {
    await startMark?.release().catch(() => {});
    // One plain line naming the problem and what to do, without a stack; 2 for arguments and configuration.
    const { line, exitCode } = startFailure(error, config);
    console.error(line);
    process.exit(exitCode);
  },
);
