/**
 * Agent benchmark (wired into `npm run bench` by the root runner):
 * - plays logged per second with synchronous FULL on a real file (one transaction per play, as in service);
 * - agent core RSS idle, and peak RSS while shipping a 100,000-record backlog (goal: under 150 MB) to a sink that
 *   checks signatures and counts plays (bench/sink.ts), not the platform. The core runs in its own process, bundled
 *   with esbuild and run by plain node, so the figures are the agent's alone (no test runner, no TypeScript loader,
 *   no platform in the process).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createProgress } from '@ooh/progress';
import { build } from 'esbuild';
import { openAgentDatabase } from '../src/log/database.js';
import { PlayLog } from '../src/log/play-log.js';
import { BenchSink, setUpOnSink } from './sink.js';
import { createTestPki } from '../test/helpers/pki.js';
import { tempDir } from '../test/helpers/temp.js';

const AGENT_ROOT = join(import.meta.dirname, '..');
const BACKLOG = 100_000;
const LOGGED_PLAYS = 2000;
const SHA = 'c'.repeat(64);

function play(i: number, end: Date) {
  return {
    playId: `bench-${i}`,
    approvalNumber: 'APP-2026-000001',
    mediaSha256: SHA,
    start: new Date(end.getTime() - 10_000),
    end,
    structure: 'ALM-0001',
    screenPower: 'on' as const,
  };
}

async function bundleChild(): Promise<string> {
  const outDir = join(AGENT_ROOT, 'node_modules', '.cache', 'agent-bench');
  mkdirSync(outDir, { recursive: true });
  const outfile = join(outDir, 'agent-bench-child.mjs');
  await build({
    entryPoints: [join(AGENT_ROOT, 'bench', 'agent-bench-child.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['source'],
    logLevel: 'error',
    banner: {
      js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
    },
    plugins: [
      {
        name: 'external-except-workspaces',
        setup(plugin) {
          // Our workspaces are bundled from source; every other package is loaded from node_modules.
          plugin.onResolve({ filter: /^[^./]/ }, (args) =>
            args.path.startsWith('@ooh/') ? undefined : { path: args.path, external: true },
          );
        },
      },
    ],
  });
  return outfile;
}

async function runChild(
  script: string,
  mode: 'idle' | 'ship',
  configPath: string,
): Promise<Record<string, number>> {
  const child = spawn(process.execPath, [script, mode, configPath], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const line = stdout.trim().split('\n').pop() ?? '';
  if (code !== 0 || !line.startsWith('{'))
    throw new Error(`bench child (${mode}) failed (${code}): ${stderr}`);
  return JSON.parse(line) as Record<string, number>;
}

export async function run(): Promise<Record<string, number>> {
  const dir = tempDir('agent-bench-');
  const sink = await BenchSink.start();
  // The setup's progress on stderr, on a terminal only (@ooh/progress); drawn after the in-process timing of 1.
  const progress = createProgress();
  try {
    // 1. Plays logged per second, synchronous FULL.
    const logDb = openAgentDatabase(join(dir.path, 'log-bench', 'agent.sqlite'));
    const log = new PlayLog(logDb);
    const end = new Date();
    const started = performance.now();
    for (let i = 0; i < LOGGED_PLAYS; i++) log.appendPlay(play(i, end));
    const playsPerSecond = LOGGED_PLAYS / ((performance.now() - started) / 1000);
    logDb.close();

    progress.phase('bundling the agent core');
    const pki = await createTestPki();
    const script = await bundleChild();
    const fast = {
      shipping: { min_interval_ms: 0, idle_interval_ms: 200, backoff_base_ms: 100, backoff_cap_ms: 2000 },
    };

    // 2. Idle RSS.
    progress.phase('measuring: idle agent');
    const idle = await setUpOnSink({ dir: join(dir.path, 'idle'), sink, pki, overrides: fast });
    const idleResult = await runChild(script, 'idle', idle.configPath);

    // 3. RSS while shipping a 100,000-record backlog.
    const ship = await setUpOnSink({ dir: join(dir.path, 'ship'), sink, pki, overrides: fast });
    const backlogDb = openAgentDatabase(join(ship.config.dataDir, 'agent.sqlite'));
    const backlog = new PlayLog(backlogDb);
    const now = new Date();
    progress.phase('filling the backlog', { total: BACKLOG, unit: 'plays' });
    backlog.inTransaction(() => {
      for (let i = 0; i < BACKLOG; i++) {
        backlog.appendPlay(play(i, now));
        progress.tick();
      }
    });
    backlogDb.close();
    progress.phase(`measuring: shipping ${BACKLOG.toLocaleString('en-US')} plays`);
    const shipResult = await runChild(script, 'ship', ship.configPath);
    const shipped = sink.playCount(ship.deviceId);
    if (shipped !== BACKLOG) throw new Error(`the sink counted ${shipped} of ${BACKLOG} plays`);

    return {
      plays_logged_per_s_sync_full: Math.round(playsPerSecond),
      rss_idle_mb: round1(idleResult['rss_mb']!),
      rss_shipping_100k_backlog_peak_mb: round1(shipResult['rss_mb']!),
      heap_total_at_shipping_peak_mb: round1(shipResult['heap_total_mb']!),
      external_at_shipping_peak_mb: round1(shipResult['external_mb']!),
      backlog_ship_seconds: round1(shipResult['seconds']!),
      backlog_records_per_s: Math.round(BACKLOG / shipResult['seconds']!),
      backlog_batches: shipResult['last_batch']!,
    };
  } finally {
    progress.done();
    await sink.close();
    dir.cleanup();
    rmSync(join(AGENT_ROOT, 'node_modules', '.cache', 'agent-bench'), { recursive: true, force: true });
    // Leave no empty folders behind (non-recursive: anything else in them stays).
    for (const folder of [join(AGENT_ROOT, 'node_modules', '.cache'), join(AGENT_ROOT, 'node_modules')]) {
      try {
        rmdirSync(folder);
      } catch {
        // not empty, or not there
      }
    }
  }
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
