#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { bootstrap } from './bootstrap.js';
import { loadConfig, type PlatformConfig } from './config.js';
import { checkFeatureSettings } from './settings-check.js';
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

Environment: API_PORT AGENTS_PORT DEVICES_PORT VERIFY_PORT HOST DATA_DIR DATABASE_URL
             PLATFORM_ENV (test|prod) LOG_LEVEL LOG_FORMAT (json|pretty) CONFIG_FILE
             PUBLIC_{API,AGENTS,DEVICES,VERIFY}_URL METRICS_PORT METRICS_HOST METRICS_TOKEN
             PLATFORM_WORKERS (processes serving the ports: a number or auto; default 1)
             EMBEDDED_PG_PORT TRUST_PROXY (addresses, CIDR ranges, loopback, linklocal, uniquelocal)
             and the features' settings (MEDIA_MAX_BYTES, WEBHOOK_ALLOWED_TARGETS, ...): the README's table
             lists every variable; a config file takes them in lower case`;

/** The configuration once read, for naming the variable behind a failure. */
let config: PlatformConfig | null = null;

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
  if (!['run', 'bootstrap'].includes(command)) {
    throw new StartError(
      `platform: unknown command "${command}"; the commands are run and bootstrap (platform --help)`,
      2,
    );
  }
  if (positionals.length > 1) {
    throw new StartError(
      `platform ${command}: takes no argument, not "${positionals[1]}" (platform --help)`,
      2,
    );
  }
  config = loadConfig({ file: values.config, testClock: values['test-clock'] === true });
  checkFeatureSettings(config);
  const settings = config;
  // From here a Ctrl-C waits for what is starting (the embedded PostgreSQL runs in its own process group, so it is
  // this process that stops it), then stops it cleanly; a second one leaves at once.
  const signals = holdStopSignals();

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
    return runPrimary(settings, createLogger(settings), (urls) => running(urls, settings.workers), signals);
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
  (code) => process.exit(code),
  (error: unknown) => {
    // One plain line naming the problem and what to do, without a stack; 2 for arguments and configuration.
    const { line, exitCode } = startFailure(error, config);
    console.error(line);
    process.exit(exitCode);
  },
);
