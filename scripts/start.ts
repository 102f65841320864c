/**
 * `npm start`: the live demo. The platform on an embedded PostgreSQL in ./.data, bootstrapped, its four host URLs
 * and an admin key printed; then a demo fleet of simulated players (the real agent core on simulated screens) is
 * enrolled through the console API with a few demo creatives, and keeps playing and shipping in real time, with a
 * live line of totals. Ctrl-C stops everything cleanly; a second Ctrl-C stops at once, its PostgreSQL too (an
 * immediate shutdown). A second start takes the same demo fleet up again.
 *
 *   npm start                    platform + demo fleet of 20 players
 *   npm start -- --players 50    a bigger fleet
 *   npm start -- --no-fleet      the platform alone (as `npm run platform`, plus bootstrap and the key)
 */
import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createProgress, PROGRESS_FLAGS, progressMode } from '@ooh/progress';
import { addDays, almatyDate, formatAlmaty } from '@ooh/protocol';
import { markStart, restoreUnderWay, restoreUnderWayError } from '../apps/platform/src/backup/restore.js';
import { bootstrap, ensureDemoUser } from '../apps/platform/src/bootstrap.js';
import { holdStopSignals } from '../apps/platform/src/cluster.js';
import { loadConfig, type PlatformConfig } from '../apps/platform/src/config.js';
import { startPlatform } from '../apps/platform/src/platform.js';
import { featureSettingProblems } from '../apps/platform/src/settings-check.js';
import { checkListeners, startFailure } from '../apps/platform/src/start-errors.js';
import { Fleet } from '../hardware-sim/src/index.js';

const USAGE = `usage: npm start [-- --players N] [-- --no-fleet] [-- --new-demo-password] [-- --no-progress]

  The platform on an embedded PostgreSQL in ./.data (DATA_DIR), bootstrapped, with a demo fleet of simulated
  players. Ctrl-C stops everything.

  --players N   the demo fleet's size, 0 to 2000 (default 20, or DEMO_PLAYERS)
  --no-fleet    the platform alone (or DEMO_FLEET=0)
  --new-demo-password
                a new password for the demo's console sign-in (shown once; the first start makes one)
  --progress, --no-progress
                draw the fleet's progress line on stderr, or not (default: on a terminal only; or OOH_PROGRESS)

  The platform's own variables apply (API_PORT, HOST, DATA_DIR, LOG_FORMAT, ...: npm run platform -- --help).`;

/** Every failure of the demo's start: one plain line, no stack (issue "What a newcomer tripped over", item 6). */
function fail(error: unknown, config: PlatformConfig | null): never {
  const { line, exitCode } = startFailure(error, config, 'npm start', 'npm start -- --help');
  console.error(line);
  process.exit(exitCode);
}

let values: {
  players: string;
  'no-fleet': boolean;
  'new-demo-password': boolean;
  help: boolean;
  progress?: boolean | undefined;
  'no-progress'?: boolean | undefined;
};
try {
  values = parseArgs({
    args: process.argv.slice(2),
    options: {
      players: { type: 'string', default: process.env['DEMO_PLAYERS'] ?? '20' },
      'no-fleet': { type: 'boolean', default: process.env['DEMO_FLEET'] === '0' },
      'new-demo-password': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
      ...PROGRESS_FLAGS,
    },
  }).values;
} catch (error) {
  fail(error, null);
}
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const players = Number(values.players);
if (!Number.isInteger(players) || players < 0 || players > 2000) {
  console.error(`npm start: --players must be a whole number from 0 to 2000, not "${values.players}"`);
  process.exit(2);
}

let config: PlatformConfig;
try {
  config = loadConfig({
    env: { DATA_DIR: '.data', LOG_LEVEL: 'warn', ...process.env },
    alsoCheck: featureSettingProblems,
  });
} catch (error) {
  fail(error, null);
}
if (config.workers > 1) {
  // The demo runs the platform in this one process, beside its fleet; `npm run platform` runs workers.
  console.error(
    `npm start: PLATFORM_WORKERS=${config.workers} is for \`npm run platform\`; the demo runs one platform process`,
  );
}
// A Ctrl-C while the platform starts is kept until it has started, then stops it: its PostgreSQL runs in a process
// group of its own (Ctrl-C does not reach it) and is stopped last, after the platform's connections are closed.
const signals = holdStopSignals();
// As `platform run`: this start's mark in DATA_DIR first, then a restore's claim looked for, so that a restore into
// the same folder and this start never both go on (apps/platform/src/backup/restore.ts).
const startMark = await markStart(config.dataDir).catch((error: unknown) => fail(error, config));
const restoring = restoreUnderWay(config.dataDir);
if (restoring) {
  await startMark.release();
  fail(restoreUnderWayError('npm start', restoring), config);
}
// A port another program holds stops the start before the database is opened or migrated.
const platform = await checkListeners(config)
  .then(() => startPlatform({ config }))
  .catch(async (error: unknown) => {
    await startMark.release();
    return fail(error, config);
  });
await startMark.release();
const { key, organisationId } = await bootstrap(platform.ctx.db, platform.ctx.clock, {
  keyName: 'npm start demo admin',
}).catch(async (error: unknown) => {
  await platform.close();
  return fail(error, config);
});
// The demo's console sign-in: an authority administrator, its password shown once (issue 22, item 3).
const demoUser = await ensureDemoUser(platform.ctx.db, platform.ctx.clock, organisationId, {
  renew: values['new-demo-password'],
}).catch(async (error: unknown) => {
  await platform.close();
  return fail(error, config);
});
const signIn =
  demoUser.password === null
    ? `  sign in  ${demoUser.email}  (its password was shown when it was made; npm start -- --new-demo-password makes a new one)`
    : `  sign in  ${demoUser.email}  password ${demoUser.password}  (shown this once: note it)`;

console.log(`
Outdoor advertising approval and proof-of-play platform is running (data in ${config.dataDir}).

  api      ${platform.urls.api}/api/v1      (console and submissions; Authorization: Bearer <key>)
  agents   ${platform.urls.agents}/s/v1     (signed agent telemetry)
  devices  ${platform.urls.devices}/d/v1    (mutual TLS: telemetry, certificate renewal)
  verify   ${platform.urls.verify}/v1      (public: seals, ledger, open data)

  public page  ${platform.urls.verify}/   (anyone, no sign-in: seals checked in the browser, is this creative approved?)
  console  ${platform.urls.api}/console/
${signIn}
  admin API key (console:admin): ${key}

Open the console and sign in as above. Your own administrator: ${platform.urls.api}/console/first-admin with the key.
Or:   curl -s -H "Authorization: Bearer ${key}" ${platform.urls.api}/api/v1/console/organisations
Ctrl-C stops the platform${values['no-fleet'] || players === 0 ? '' : ', the demo fleet'} and its database.
`);

let fleet: Fleet | null = null;
/** The demo fleet while it is enrolled and started: a Ctrl-C then closes it too. */
let starting: Fleet | null = null;
let ticker: NodeJS.Timeout | null = null;
let stopping = false;

const stop = async () => {
  if (stopping) {
    // A second Ctrl-C: do not wait any longer, but leave nothing running. The embedded PostgreSQL is in a process
    // group of its own (no Ctrl-C reaches it) and would outlive this process until the next start stopped it: an
    // immediate shutdown instead, waited for here (the next start recovers from its WAL).
    console.log('stopping at once ...');
    platform.stopDatabaseNow();
    process.exit(130);
  }
  stopping = true;
  if (ticker) clearInterval(ticker);
  if (process.stdout.isTTY) process.stdout.write('\n');
  console.log('stopping ...');
  await (fleet ?? starting)
    ?.close()
    .catch((error: unknown) => console.error('demo fleet:', (error as Error).message));
  await platform.close();
  process.exit(0);
};
signals.handle(() => void stop());

if (!values['no-fleet'] && players > 0) {
  try {
    fleet = await startDemoFleet(players);
    startTicker(fleet);
  } catch (error) {
    // Stopped by a Ctrl-C during enrolment: what failed then is the interruption itself, not worth a line.
    if (!stopping) {
      console.error(
        `the demo fleet did not start (${(error as Error).message}); the platform keeps running alone.`,
      );
    }
  }
}

async function startDemoFleet(count: number): Promise<Fleet> {
  const dir = join(config.dataDir, 'demo-fleet');
  // Enrolling and starting the players draw a progress line on a terminal (stderr; nothing in a pipe or in CI).
  const progress = createProgress({ mode: progressMode(values) });
  const create = () =>
    Fleet.create({
      dir,
      progress,
      name: 'Demo outdoor operator',
      platform: { urls: platform.urls, adminKey: key },
      settings: {
        image_duration_ms: 15_000,
        media_recheck_ms: 10 * 60_000,
        revocation_refresh_ms: 5 * 60_000,
        shipping: { min_interval_ms: 10_000, idle_interval_ms: 30_000 },
      },
    });
  let demo = await create();
  starting = demo;
  // A second start takes up the same players, if the platform still knows them and they point at these URLs.
  if (demo.adopt() && (await stillValid(demo))) {
    console.log(`demo fleet: taking up the ${demo.players.size} players of ${dir}`);
  } else {
    await demo.close();
    if (existsSync(dir)) renameSync(dir, `${dir}.old-${Date.now()}`);
    demo = await create();
    starting = demo;
    if (stopping) throw new Error('stopped');
    const today = almatyDate(new Date());
    console.log(
      `demo fleet: enrolling ${count} simulated players with 4 demo creatives (takes a few seconds) ...`,
    );
    await demo.provision({
      players: Array.from({ length: count }, (_, i) => `DEMO-${String(i + 1).padStart(3, '0')}`),
      creatives: [
        { name: 'steppe-motors', width: 320, height: 160 },
        { name: 'alatau-dairy', width: 320, height: 160 },
        { name: 'city-bank', width: 320, height: 160 },
        { name: 'kok-tobe-cable-car', width: 320, height: 160 },
      ],
      validFrom: addDays(today, -1),
      validUntil: addDays(today, 365),
      // Most players ship on the certificate channel (mutual TLS), a few on the signed channel.
      certificates: (i) => i % 5 !== 4,
    });
  }
  await demo.startAll();
  progress.done();
  console.log(`demo fleet: ${demo.players.size} players playing and shipping (folders in ${dir})\n`);
  return demo;
}

async function stillValid(demo: Fleet): Promise<boolean> {
  const first = [...demo.players.values()][0];
  if (!first) return false;
  try {
    await demo.admin.device(first.files.deviceId);
  } catch {
    return false;
  }
  const { readFileSync } = await import('node:fs');
  const saved = JSON.parse(readFileSync(first.files.configFile, 'utf8')) as {
    platform?: { agents_url?: string };
  };
  return saved.platform?.agents_url === platform.urls.agents;
}

/** The live totals: one line rewritten in place on a terminal, a line every 10 s otherwise. */
function startTicker(demo: Fleet): void {
  const tty = process.stdout.isTTY === true;
  const line = async () => {
    const { rows } = await platform.ctx.db.query<{ plays: string; batches: string; seal: string | null }>(
      `SELECT (SELECT coalesce(sum(plays), 0) FROM play_counts) AS plays,
              (SELECT count(*) FROM pop_batches) AS batches,
              (SELECT max(day)::text FROM stats_seals) AS seal`,
    );
    const row = rows[0]!;
    const now = formatAlmaty(new Date()).slice(11, 19);
    return (
      `${now} Almaty  players ${demo.players.size}  shown ${demo.groundTruth.count.toLocaleString('en-US')}  ` +
      `plays counted ${Number(row.plays).toLocaleString('en-US')}  batches ${Number(row.batches).toLocaleString('en-US')}  ` +
      `last seal ${row.seal ?? 'none yet (after Almaty midnight)'}`
    );
  };
  const tick = async () => {
    try {
      const text = await line();
      if (stopping) return;
      if (tty) process.stdout.write(`\r\x1b[2K${text}`);
      else console.log(text);
    } catch (error) {
      if (!stopping) console.error('totals:', (error as Error).message);
    }
  };
  void tick();
  ticker = setInterval(() => void tick(), tty ? 1000 : 10_000);
}
