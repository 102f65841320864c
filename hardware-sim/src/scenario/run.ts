import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { addDays, almatyDate, parseDateTimeMs } from '@ooh/protocol';
import { Fleet, type FleetProgress, type Placement } from '../fleet/fleet.js';
import { placeCreative } from '../fleet/provision.js';
import type { SimDiskState } from '../hardware/sim-disk.js';
import type { PlatformUrls } from '../platform/console-client.js';
import type { PlatformClock } from '../time/driver.js';
import type { GroundTruth } from '../truth/ground-truth.js';
import type { Reconciliation } from '../truth/reconcile.js';
import { parseDuration, selectPlayers } from './load.js';
import { LogArchive } from './log-archive.js';
import type { Scenario, ScenarioStep } from './schema.js';

export interface PlatformAccess {
  urls: PlatformUrls;
  adminKey: string;
  /** How virtual time reaches the platform: PUT /api/v1/console/clock (`http`), a clock in this process, or none. */
  clock: 'http' | PlatformClock | null;
  /** Only for a platform the simulator started itself. */
  restart?: (downMs: number) => Promise<void>;
  /** Header name when the devices host sits behind the simulator's TLS-terminating proxy. */
  clientCertHeader?: string;
}

export interface ScenarioProgress {
  fraction: number;
  virtualNow: Date;
  shown: number;
  step: string | null;
}

/** One player's play log and disk at one instant of the run (`report.database_every`). */
export interface DatabaseSample {
  at: string;
  player: string;
  /** The SQLite file and its WAL. */
  fileBytes: number;
  walBytes: number;
  /** Rows the file holds, and of them records the platform has not answered yet. */
  recordsKept: number;
  unacknowledged: number;
  /** The least free space of its data and media volumes, and the agent's disk state then. */
  freeBytes: number | null;
  disk: string;
  mode: string;
}

/** The play logs over the run: samples, and the largest file seen at any archive read. */
export interface DatabaseReport {
  samples: DatabaseSample[];
  /** Largest file + WAL of any player at any read (every few virtual hours), and when. */
  largest: { bytes: number; at: string; player: string } | null;
  /** Plays read from the logs before retention removed them (scenario/log-archive.ts). */
  archivedPlays: number;
}

/** How often the logs are read into the archive: well inside the day the agent keeps answered batches under pressure. */
const ARCHIVE_EVERY_MS = 6 * 3_600_000;

export interface ScenarioResult {
  reconciliation: Reconciliation;
  database: DatabaseReport;
  /** Every play the simulated screens showed. */
  groundTruth: GroundTruth;
  drained: boolean;
  realSeconds: number;
  steps: number;
  warnings: string[];
  network: { refused: number; dropped: number } | null;
  ok: boolean;
}

export function placementOf(text: string | undefined): Placement {
  if (!text || text === 'in-process') return { mode: 'in-process' };
  if (text === 'child-per-player') return { mode: 'child-per-player' };
  return { mode: 'children', count: Number(text.split(':')[1]) };
}

/**
 * The first instant of a scenario: "now" (the default) is the current minute; anything else must be an RFC 3339
 * instant with Z or an offset. Date.parse would read a wall time without one in the machine's time zone.
 */
export function scenarioStartMs(start: string | undefined, nowMs: number): number {
  const ms = !start || start === 'now' ? Math.floor(nowMs / 60_000) * 60_000 : parseDateTimeMs(start);
  if (!Number.isFinite(ms)) {
    throw new Error(
      `time.start is not an instant: ${start} (give "now" or an RFC 3339 time with Z or an offset)`,
    );
  }
  return ms;
}

/** Runs a scenario end to end against a platform and reconciles; the fleet's files stay in `dir`. */
export async function runScenario(
  scenario: Scenario,
  args: {
    dir: string;
    platform: PlatformAccess;
    onProgress?: (progress: ScenarioProgress) => void;
    log?: (line: string) => void;
    /** The steps before and after the run itself (enrolling, starting, draining, reconciling). */
    progress?: FleetProgress;
  },
): Promise<ScenarioResult> {
  const began = performance.now();
  const virtual = scenario.time.virtual !== false;
  const startMs = scenarioStartMs(scenario.time.start, Date.now());
  const duration = parseDuration(scenario.time.duration);
  const network = scenario.fleet.network ?? 'direct';
  const fleet = await Fleet.create({
    dir: args.dir,
    platform: { urls: args.platform.urls, adminKey: args.platform.adminKey },
    ...(virtual
      ? {
          time: {
            startMs,
            platformClock: args.platform.clock,
            minStepMs: scenario.time.step ? parseDuration(scenario.time.step) : 60_000,
          },
        }
      : {}),
    placement: placementOf(scenario.fleet.placement),
    network:
      network === 'direct'
        ? null
        : {
            devicesMode: network,
            ...(args.platform.clientCertHeader ? { clientCertHeader: args.platform.clientCertHeader } : {}),
          },
    ...(scenario.agent ? { settings: scenario.agent } : {}),
    ...(args.log ? { log: args.log } : {}),
    ...(args.progress ? { progress: args.progress } : {}),
  });
  try {
    const day = almatyDate(new Date(startMs));
    const share = scenario.fleet.certificates ?? 1;
    await fleet.provision({
      players: scenario.fleet.players,
      creatives: scenario.creatives.map((c) => ({
        name: c.name,
        ...(c.valid_days ? { validUntil: addDays(day, c.valid_days - 1) } : {}),
      })),
      validFrom: addDays(day, -1),
      validUntil: addDays(day, Math.ceil(duration / 86_400_000) + 2),
      certificates: (i) => (i + 1) / scenario.fleet.players <= share + 1e-9,
    });
    const ids = fleet.ids();
    // Authority content: in media/gov/, where the agent plays it as a slot (never billed).
    for (const spec of scenario.creatives.filter((c) => c.slot === 'gov')) {
      const creative = fleet.creatives.find((c) => c.name === spec.name)!;
      for (const id of ids) {
        const mediaDir = fleet.player(id).mediaDir;
        rmSync(join(mediaDir, creative.fileName), { force: true });
        rmSync(join(mediaDir, `${creative.fileName}.envelope.json`), { force: true });
        placeCreative(mediaDir, creative, 'gov');
      }
    }
    if (scenario.fleet.disk) {
      const disk: SimDiskState = {
        capacityBytes: scenario.fleet.disk.capacity_mb * MB,
        otherBytes: (scenario.fleet.disk.other_mb ?? 0) * MB,
      };
      for (const id of ids) await fleet.hardware(id, { disk });
    }
    await fleet.startAll();
    const archive = new LogArchive();
    const database: DatabaseReport = { samples: [], largest: null, archivedPlays: 0 };
    const sampleEvery = scenario.report?.database_every
      ? parseDuration(scenario.report.database_every)
      : null;
    let nextArchive = startMs + ARCHIVE_EVERY_MS;
    let nextSample = sampleEvery === null ? Number.POSITIVE_INFINITY : startMs;
    const archiveNow = () => {
      archive.take(ids.map((id) => ({ id, databaseFile: databaseFileOf(fleet, id) })));
      for (const id of ids) {
        const bytes = fileBytes(databaseFileOf(fleet, id)) + fileBytes(`${databaseFileOf(fleet, id)}-wal`);
        if (!database.largest || bytes > database.largest.bytes) {
          database.largest = { bytes, at: new Date(fleet.now()).toISOString(), player: id };
        }
      }
    };
    const sampleNow = async () => {
      for (const id of ids) {
        const status = await fleet.status(id);
        if (!status) continue;
        database.samples.push({
          at: new Date(fleet.now()).toISOString(),
          player: id,
          fileBytes: status.storage.database.file_bytes,
          walBytes: status.storage.database.wal_bytes,
          recordsKept: status.storage.retention.kept.records,
          unacknowledged: status.queue.depth,
          freeBytes: status.storage.disk.free_bytes,
          disk: status.storage.disk.state,
          mode: status.mode,
        });
      }
    };
    const steps = [...(scenario.steps ?? [])].sort((a, b) => parseDuration(a.at) - parseDuration(b.at));
    const report = (label: string | null) =>
      args.onProgress?.({
        fraction: Math.min(1, (fleet.now() - startMs) / duration),
        virtualNow: new Date(fleet.now()),
        shown: fleet.groundTruth.count,
        step: label,
      });
    const until = async (at: number) => {
      if (virtual) {
        // In stretches between archive reads and samples: retention must not remove a play before it is archived.
        while (fleet.now() < at) {
          if (fleet.now() >= nextSample) {
            await sampleNow();
            nextSample += sampleEvery!;
          }
          await fleet.runUntil(Math.min(at, nextArchive, nextSample), () => report(null));
          if (fleet.now() >= nextArchive) {
            archiveNow();
            nextArchive += ARCHIVE_EVERY_MS;
          }
        }
      } else {
        while (Date.now() < at) {
          await new Promise((resolve) => setTimeout(resolve, Math.min(1000, at - Date.now())));
          report(null);
        }
      }
    };
    for (const step of steps) {
      await until(startMs + parseDuration(step.at));
      report(`${step.at} ${step.action}`);
      await applyStep(fleet, step, ids, args.platform);
    }
    await until(startMs + duration);
    if (sampleEvery !== null) await sampleNow();
    const drained = virtual ? await fleet.drain() : true;
    const stillQueued = drained
      ? 0
      : Object.values(await fleet.queues()).reduce((sum, depth) => sum + depth, 0);
    archiveNow();
    database.archivedPlays = ids.reduce((sum, id) => sum + archive.count(id), 0);
    const reconciliation = await fleet.reconcile({
      allowedRefusals: scenario.expect?.refused ?? 0,
      completeLog: (id, log) => archive.merged(id, log),
    });
    // The verdict printed last is the exit code's: a run whose queues did not drain, or that showed nothing, is not
    // reconciled, even when every play it logged was counted.
    const verdict = withRunProblems(reconciliation, { drained, stillQueued });
    return {
      reconciliation: verdict,
      database,
      groundTruth: fleet.groundTruth,
      drained,
      realSeconds: (performance.now() - began) / 1000,
      steps: fleet.driver?.stats.steps ?? 0,
      warnings: fleet.warnings,
      network: fleet.segment
        ? { refused: fleet.segment.stats.refused, dropped: fleet.segment.stats.dropped }
        : null,
      ok: verdict.ok,
    };
  } finally {
    await fleet.close();
  }
}

/** The reconciliation with the run's own problems added: queues left undrained, no play shown at all. */
export function withRunProblems(
  reconciliation: Reconciliation,
  run: { drained: boolean; stillQueued: number },
): Reconciliation {
  const problems: string[] = [];
  if (!run.drained) {
    problems.push(
      `queues not drained: ${run.stillQueued} record(s) still queued when the run ended (a platform that did not take them, or a run too short for its last batches)`,
    );
  }
  if (reconciliation.totals.played === 0) {
    problems.push(
      "no play was shown: nothing to reconcile (check the scenario's duration, its players' schedules and creatives)",
    );
  }
  if (problems.length === 0) return reconciliation;
  const all = [...problems, ...reconciliation.problems];
  return { ...reconciliation, problems: all, ok: false };
}

const MB = 1024 * 1024;

function databaseFileOf(fleet: Fleet, id: string): string {
  return join(fleet.player(id).dataDir, 'agent.sqlite');
}

function fileBytes(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** The database report as a text table: each sample, and the largest file seen. */
export function formatDatabaseReport(report: DatabaseReport): string {
  const lines: string[] = [];
  const mb = (bytes: number | null) => (bytes === null ? '-' : (bytes / MB).toFixed(1));
  if (report.samples.length > 0) {
    lines.push('database size over time (MB; free: the least free space of the data and media volumes)');
    lines.push(
      `  ${'at'.padEnd(20)}${'player'.padEnd(18)}${['file', 'wal', 'records', 'unacked', 'free'].map((c) => c.padStart(10)).join('')}  disk  mode`,
    );
    for (const s of report.samples) {
      lines.push(
        `  ${s.at.slice(0, 16).replace('T', ' ').padEnd(20)}${s.player.slice(0, 17).padEnd(18)}${[
          mb(s.fileBytes),
          mb(s.walBytes),
          String(s.recordsKept),
          String(s.unacknowledged),
          mb(s.freeBytes),
        ]
          .map((c) => c.padStart(10))
          .join('')}  ${s.disk.padEnd(4)}  ${s.mode}`,
      );
    }
  }
  if (report.largest) {
    lines.push(
      `largest database: ${mb(report.largest.bytes)} MB (file + wal) at ${report.largest.at} (${report.largest.player}); ` +
        `${report.archivedPlays} answered plays kept by the simulator (the player's retention removes them)`,
    );
  }
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

async function applyStep(
  fleet: Fleet,
  step: ScenarioStep,
  ids: string[],
  platform: PlatformAccess,
): Promise<void> {
  const chosen = (selector: 'all' | number | string | string[]) =>
    selectPlayers(selector, ids.length).map((n) => ids[n - 1]!);
  const creative = (name: string) => {
    const found = fleet.creatives.find((c) => c.name === name);
    if (!found) throw new Error(`no creative ${name}`);
    return found;
  };
  switch (step.action) {
    case 'network': {
      const segment = fleet.segment!;
      if (step.down !== undefined) segment.setDown(step.down);
      if (step.latency_ms !== undefined) segment.setLatency(step.latency_ms);
      if (step.clear_drops) segment.clearDrops();
      for (const rule of step.drop_answers ?? []) {
        segment.dropAnswers({
          ...(rule.link ? { link: rule.link } : {}),
          ...(rule.path ? { pathPrefix: rule.path } : {}),
          ...(rule.count !== undefined ? { count: rule.count } : {}),
          ...(rule.probability !== undefined ? { probability: rule.probability } : {}),
        });
      }
      return;
    }
    case 'clock':
      for (const id of chosen(step.players)) {
        if (step.set_to !== undefined)
          await fleet.hardware(id, { skewMs: Date.parse(step.set_to) - fleet.now() });
        if (step.skew_seconds !== undefined) await fleet.hardware(id, { skewMs: step.skew_seconds * 1000 });
        if (step.jump_seconds !== undefined) await fleet.hardware(id, { jumpMs: step.jump_seconds * 1000 });
      }
      return;
    case 'power_cut': {
      const victims = chosen(step.players);
      await Promise.all(
        victims.map((id) => fleet.powerCut(id, { delayMs: 1 + Math.floor(Math.random() * 20) })),
      );
      if (fleet.driver) await fleet.advance(parseDuration(step.off ?? '5m'));
      for (const id of victims) await fleet.powerOn(id);
      return;
    }
    case 'screen':
      for (const id of chosen(step.players)) await fleet.hardware(id, { screen: step.power });
      return;
    case 'tamper':
      for (const id of chosen(step.players)) await fleet.hardware(id, { tamper: step.state });
      return;
    case 'replace_media':
      for (const id of chosen(step.players)) fleet.replaceMedia(id, creative(step.creative));
      return;
    case 'revoke':
      await fleet.admin.revokeApproval(
        creative(step.creative).approvalNumber,
        step.reason ?? 'revoked in a scenario',
      );
      return;
    case 'disk':
      for (const id of chosen(step.players)) {
        const current = fleet.player(id).hardware.disk ?? { capacityBytes: 4096 * MB, otherBytes: 0 };
        await fleet.hardware(id, {
          disk: {
            capacityBytes: step.capacity_mb !== undefined ? step.capacity_mb * MB : current.capacityBytes,
            otherBytes: step.other_mb !== undefined ? step.other_mb * MB : current.otherBytes,
          },
        });
      }
      return;
    case 'platform_restart':
      if (!platform.restart)
        throw new Error('platform_restart needs a platform the simulator started (--spawn)');
      await platform.restart(parseDuration(step.down ?? '1s'));
      fleet.driver?.forgetPlatformClock();
      await fleet.driver?.sync();
      return;
  }
}
