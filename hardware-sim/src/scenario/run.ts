import { addDays, almatyDate } from '@ooh/protocol';
import { Fleet, type FleetProgress, type Placement } from '../fleet/fleet.js';
import type { PlatformUrls } from '../platform/console-client.js';
import type { PlatformClock } from '../time/driver.js';
import type { Reconciliation } from '../truth/reconcile.js';
import { parseDuration, selectPlayers } from './load.js';
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

export interface ScenarioResult {
  reconciliation: Reconciliation;
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
  const startMs =
    !scenario.time.start || scenario.time.start === 'now'
      ? Math.floor(Date.now() / 60_000) * 60_000
      : Date.parse(scenario.time.start);
  if (!Number.isFinite(startMs)) throw new Error(`time.start is not an instant: ${scenario.time.start}`);
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
    await fleet.startAll();
    const ids = fleet.ids();
    const steps = [...(scenario.steps ?? [])].sort((a, b) => parseDuration(a.at) - parseDuration(b.at));
    const report = (label: string | null) =>
      args.onProgress?.({
        fraction: Math.min(1, (fleet.now() - startMs) / duration),
        virtualNow: new Date(fleet.now()),
        shown: fleet.groundTruth.count,
        step: label,
      });
    const until = async (at: number) => {
      if (virtual) await fleet.runUntil(at, () => report(null));
      else {
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
    const drained = virtual ? await fleet.drain() : true;
    const reconciliation = await fleet.reconcile({ allowedRefusals: scenario.expect?.refused ?? 0 });
    return {
      reconciliation,
      drained,
      realSeconds: (performance.now() - began) / 1000,
      steps: fleet.driver?.stats.steps ?? 0,
      warnings: fleet.warnings,
      network: fleet.segment
        ? { refused: fleet.segment.stats.refused, dropped: fleet.segment.stats.dropped }
        : null,
      ok: drained && reconciliation.ok,
    };
  } finally {
    await fleet.close();
  }
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
    case 'platform_restart':
      if (!platform.restart)
        throw new Error('platform_restart needs a platform the simulator started (--spawn)');
      await platform.restart(parseDuration(step.down ?? '1s'));
      fleet.driver?.forgetPlatformClock();
      await fleet.driver?.sync();
      return;
  }
}
