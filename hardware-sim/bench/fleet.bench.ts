/**
 * Fleet benchmark (wired into `npm run bench` by the root runner): the largest fleet this machine simulates at
 * real-time pace, one play every 15 s per player (the target is 10,000 players, about 670 plays/s), and what the
 * platform spends serving it.
 *
 * A platform of its own runs as a child process (embedded PostgreSQL, real clock); the players run the real agent
 * core in two child processes. The fleet grows in steps (BENCH_FLEET_SIZES, default 1000,2000,...,6000,8000,10000);
 * at each size, after a warm-up, plays shown are counted over a window and compared with N / 15 s. The ladder stops
 * at the first size that falls below 90 % of the pace, or when the time budget is spent (BENCH_FLEET_BUDGET_S,
 * default 720 s). CPU and memory of the platform process, its PostgreSQL and the fleet processes are read from /proc. Setting a player up (enrolment, and the agent verifying its envelopes at start)
 * costs tens of milliseconds here, so within the budget the ladder may end before the target: the figures per size
 * say how far it got and at what cost.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createProgress } from '@ooh/progress';
import { addDays, almatyDate } from '@ooh/protocol';
import { Fleet } from '../src/fleet/fleet.js';
import { spawnPlatform } from '../src/platform/spawn.js';

const PLAY_MS = 15_000;
/**
 * Past every player's first batch (shipping's idle interval, 60 s, after start: nothing is queued then), so that the
 * window measures the steady state (a batch every 10 s on a kept-alive connection), not each player's first TLS
 * handshake and secure context. BENCH_FLEET_WARMUP_S overrides it.
 */
const WARMUP_MS = Number(process.env['BENCH_FLEET_WARMUP_S'] ?? 75) * 1000;
/**
 * A whole number of plays per player (players start together and stay in step), and a whole shipping cycle: a
 * player ships at least once every idle interval (60 s), so every player's batches fall in the window.
 */
const WINDOW_MS = 60_000;
const PACE = 0.9;
const PLAYERS_PER_HOST = 2500;

interface ProcessSample {
  cpuSeconds: number;
  rssBytes: number;
}

const TICKS = 100; // USER_HZ on Linux

interface ProcInfo {
  pid: number;
  ppid: number;
  cmdline: string;
  /** Own CPU plus that of its ended, reaped children (a PostgreSQL backend's time lands on the postmaster). */
  cpuSeconds: number;
  rssBytes: number;
}

function processes(): ProcInfo[] {
  if (!existsSync('/proc')) return [];
  const out: ProcInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
      out.push({
        pid,
        ppid: Number(fields[1]),
        cmdline,
        cpuSeconds: ticks / TICKS,
        rssBytes: Number(fields[21]) * 4096,
      });
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/** CPU seconds and resident memory of the processes `match` picks (given all processes, to follow parents). */
function sample(match: (process: ProcInfo, all: ProcInfo[]) => boolean): ProcessSample {
  const all = processes();
  let cpuSeconds = 0;
  let rssBytes = 0;
  for (const info of all) {
    if (!match(info, all)) continue;
    cpuSeconds += info.cpuSeconds;
    rssBytes += info.rssBytes;
  }
  return { cpuSeconds, rssBytes };
}

export async function run(): Promise<Record<string, number>> {
  const sizes = (process.env['BENCH_FLEET_SIZES'] ?? '1000,2000,3000,4000,5000,6000,8000,10000')
    .split(',')
    .map(Number);
  const budgetMs = Number(process.env['BENCH_FLEET_BUDGET_S'] ?? 720) * 1000;
  const began = performance.now();
  const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'ooh-fleet-bench-'));
  // The embedded PostgreSQL may run as another user (when started by root): let it reach its folder.
  chmodSync(dir, 0o755);
  const platformDir = join(dir, 'platform');
  // Progress on stderr, on a terminal only (@ooh/progress): enrolling and starting each size's players, then the
  // warm-up and the window (what is measured runs in other processes).
  const progress = createProgress();
  progress.phase('starting a platform');
  const platform = await spawnPlatform({ dataDir: platformDir, env: { LOG_LEVEL: 'error' } }).catch(
    (error: unknown) => {
      progress.done();
      throw error;
    },
  );
  const isPlatform = (p: ProcInfo) =>
    p.ppid === process.pid && p.cmdline.includes('apps/platform/src/main.ts') && p.cmdline.includes(' run');
  // The platform's own PostgreSQL: its postmaster (started on the platform's data folder) and that one's backends.
  const isPostgres = (p: ProcInfo, all: ProcInfo[]) => {
    const postmaster = all.find((q) => q.cmdline.includes(`${platformDir}/pgdata`));
    return postmaster !== undefined && (p.pid === postmaster.pid || p.ppid === postmaster.pid);
  };
  const isFleet = (p: ProcInfo) =>
    p.cmdline.includes('hardware-sim/src/fleet/host-main.ts') && p.ppid === process.pid;
  const fleet = await Fleet.create({
    dir: join(dir, 'fleet'),
    platform: { urls: platform.urls, adminKey: platform.adminKey },
    // At least two processes (both cores), and at most PLAYERS_PER_HOST players in one: each player holds about five
    // file descriptors (its SQLite file, -wal and -shm, its log, a kept-alive connection), and a process may open
    // 20,000 here (ulimit -n).
    placement: { mode: 'children', count: Math.max(2, Math.ceil(Math.max(...sizes) / PLAYERS_PER_HOST)) },
    progress,
    settings: {
      image_duration_ms: PLAY_MS,
      media_recheck_ms: 3_600_000,
      revocation_refresh_ms: 3_600_000,
      shipping: { min_interval_ms: 10_000, idle_interval_ms: 60_000 },
    },
  });
  const figures: Record<string, number> = {};
  let largestAtPace = 0;
  try {
    const today = almatyDate(new Date());
    let enrolled = 0;
    for (const [level, size] of sizes.entries()) {
      const left = budgetMs - (performance.now() - began);
      // A level needs its provisioning (about 25 ms a player here), warm-up and window.
      if (left < WARMUP_MS + WINDOW_MS + (size - enrolled) * 25) break;
      const provisionStart = performance.now();
      await fleet.provision({
        players: Array.from(
          { length: size - enrolled },
          (_, i) => `BENCH-${String(enrolled + i + 1).padStart(5, '0')}`,
        ),
        creatives: [{ name: `bench-${level}`, seed: 500 + level }],
        validFrom: addDays(today, -1),
        validUntil: addDays(today, 2),
      });
      await fleet.startAll();
      const perPlayerMs = (performance.now() - provisionStart) / (size - enrolled);
      enrolled = size;
      progress.phase(`${size.toLocaleString('en-US')} players: warming up (${WARMUP_MS / 1000} s)`);
      await new Promise((resolve) => setTimeout(resolve, WARMUP_MS));
      progress.phase(`${size.toLocaleString('en-US')} players: measuring (${WINDOW_MS / 1000} s)`);

      const shown0 = fleet.groundTruth.count;
      const p0 = sample(isPlatform);
      const pg0 = sample(isPostgres);
      const f0 = sample(isFleet);
      const t0 = performance.now();
      await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
      const seconds = (performance.now() - t0) / 1000;
      const p1 = sample(isPlatform);
      const pg1 = sample(isPostgres);
      const f1 = sample(isFleet);
      const queues = await fleet.queues();
      const backlog = Object.values(queues).reduce((a, b) => a + b, 0);
      const playsPerSecond = (fleet.groundTruth.count - shown0) / seconds;
      const expected = size / (PLAY_MS / 1000);
      const pace = playsPerSecond / expected;
      const prefix = `n${size}`;
      figures[`${prefix}_plays_per_s`] = playsPerSecond;
      figures[`${prefix}_pace`] = pace;
      figures[`${prefix}_queue_backlog_records`] = backlog;
      figures[`${prefix}_platform_cpu_pct`] = ((p1.cpuSeconds - p0.cpuSeconds) / seconds) * 100;
      figures[`${prefix}_platform_rss_mb`] = p1.rssBytes / 1e6;
      figures[`${prefix}_postgres_cpu_pct`] = ((pg1.cpuSeconds - pg0.cpuSeconds) / seconds) * 100;
      figures[`${prefix}_fleet_cpu_pct`] = ((f1.cpuSeconds - f0.cpuSeconds) / seconds) * 100;
      figures[`${prefix}_fleet_rss_mb`] = f1.rssBytes / 1e6;
      figures[`${prefix}_setup_ms_per_player`] = perPlayerMs;
      // Per play shown in the window: CPU of the agent cores (the fleet processes), and of the platform with its
      // PostgreSQL; the platform's share of the three.
      const plays = fleet.groundTruth.count - shown0;
      const fleetCpu = f1.cpuSeconds - f0.cpuSeconds;
      const platformCpu = p1.cpuSeconds - p0.cpuSeconds + (pg1.cpuSeconds - pg0.cpuSeconds);
      figures[`${prefix}_fleet_cpu_ms_per_play`] = plays > 0 ? (fleetCpu * 1000) / plays : 0;
      figures[`${prefix}_platform_cpu_ms_per_play`] = plays > 0 ? (platformCpu * 1000) / plays : 0;
      figures[`${prefix}_platform_share_pct`] =
        fleetCpu + platformCpu > 0 ? (platformCpu / (fleetCpu + platformCpu)) * 100 : 0;
      // At pace: the screens keep up and shipping keeps up (the backlog stays within a minute of plays).
      if (pace >= PACE && backlog <= size * 6) largestAtPace = size;
      else break;
    }
  } finally {
    progress.done();
    await fleet.close();
    await platform.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  // What the CPU alone would allow: players per core-percent at the largest size at pace, over all the cores.
  const busy = largestAtPace
    ? ['platform_cpu_pct', 'postgres_cpu_pct', 'fleet_cpu_pct'].reduce(
        (sum, key) => sum + (figures[`n${largestAtPace}_${key}`] ?? 0),
        0,
      )
    : 0;
  // CPU per player at that size, in percent of one core per 1,000 players: the agent side (the fleet processes) and
  // the platform's (platform and PostgreSQL). 10,000 players on 2 cores need the two to add up to under 20.
  const per1000 = (keys: string[]) =>
    largestAtPace
      ? (keys.reduce((sum, key) => sum + (figures[`n${largestAtPace}_${key}`] ?? 0), 0) * 1000) /
        largestAtPace
      : 0;
  return {
    largest_fleet_at_real_time_pace: largestAtPace,
    cpu_bound_estimate_players: busy > 0 ? Math.floor((largestAtPace * os.cpus().length * 100) / busy) : 0,
    fleet_cpu_pct_per_1000_players: per1000(['fleet_cpu_pct']),
    platform_cpu_pct_per_1000_players: per1000(['platform_cpu_pct', 'postgres_cpu_pct']),
    target_players: 10_000,
    cores: os.cpus().length,
    ...figures,
    elapsed_s: (performance.now() - began) / 1000,
  };
}
