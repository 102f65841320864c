import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type AgentStatus, loadConfig } from '@ooh/agent';
import type { Progress } from '@ooh/progress';
import type { DisplayedPlay } from '../hardware/sim-display.js';
import { NetworkSegment } from '../network/segment.js';
import { createProxyTls, type ProxyTls } from '../network/tls-identity.js';
import { ConsoleClient, type PlatformUrls } from '../platform/console-client.js';
import { pngCreative } from '../platform/creatives.js';
import { type PlatformClock, TimeDriver } from '../time/driver.js';
import { readAgentLog, type AgentLogSummary } from '../truth/agent-log.js';
import { GroundTruth } from '../truth/ground-truth.js';
import { type Reconciliation, reconcile } from '../truth/reconcile.js';
import { seedOf } from '../util/random.js';
import { ChildHost } from './child-host.js';
import { LocalHost, type PlayerHost } from './host.js';
import {
  type AgentSettings,
  authorityRoot,
  type CreativeSpec,
  createOperator,
  createStructures,
  DEFAULT_AGENT_SETTINGS,
  enrolPlayer,
  type IssuedCreative,
  issueCreatives,
  mapLimit,
  type Operator,
  type PlayerFiles,
  placeCreative,
  type StructureInfo,
} from './provision.js';
import type { HardwareOp, HardwareState, PlayerSpec } from './sim-player.js';

/**
 * A simulated fleet against a real platform: provisioning through the console API, players on simulated hardware
 * in this process or in child processes, virtual time moved together with the platform's test clock, faults on
 * demand, and at the end a reconciliation of the simulator's ground truth with the platform's counts.
 */

export type Placement =
  | { mode: 'in-process' }
  /** Players spread over `count` child processes (more cores; a power cut takes a whole process). */
  | { mode: 'children'; count: number }
  /** One child process per player: a power cut is one player's SIGKILL. */
  | { mode: 'child-per-player' };

export interface VirtualTimeOptions {
  startMs: number;
  minStepMs?: number;
  maxStepMs?: number;
  /** How the platform's clock follows: a test's own clock, `http` (PUT /api/v1/console/clock), or not at all. */
  platformClock: PlatformClock | 'http' | null;
  /** Real ms a step waits for busy players before moving on anyway (default 5000). */
  fallbackMs?: number;
}

export interface FleetOptions {
  dir: string;
  platform: { urls: PlatformUrls; adminKey: string };
  /** Operator organisation name (unique per run). */
  name?: string;
  /** Virtual time, or real time when omitted. */
  time?: VirtualTimeOptions;
  placement?: Placement;
  /** A fault proxy between players and platform; players talk to the platform directly when omitted. */
  network?: { devicesMode: 'tunnel' | 'terminate'; clientCertHeader?: string } | null;
  settings?: Partial<Omit<AgentSettings, 'shipping'>> & { shipping?: Partial<AgentSettings['shipping']> };
  log?: (line: string) => void;
  /** The command line's progress line (@ooh/progress): enrolling, starting, draining and reconciling a fleet. */
  progress?: FleetProgress;
}

/** What the fleet reports its long steps to. */
export type FleetProgress = Pick<Progress, 'phase' | 'tick'>;

export interface ProvisionOptions {
  players: number | string[];
  creatives: CreativeSpec[];
  validFrom: string;
  validUntil: string;
  /** Players enrolled with a client certificate (certificate channel); default all. */
  certificates?: boolean | ((index: number) => boolean);
  district?: string;
  format?: string;
}

/** fleet.json: what a run provisioned, so a later run can take the same players up again. */
export interface FleetManifest {
  operator: string | null;
  players: { id: string; device_id: string; structure_id: string; dir: string }[];
  creatives: {
    name: string;
    file: string;
    sha256: string;
    approval: string;
    valid_from: string;
    valid_until: string;
  }[];
}

export interface FleetPlayer {
  id: string;
  files: PlayerFiles;
  host: PlayerHost | null;
  running: boolean;
  powerCuts: number;
  hardware: HardwareState;
  halted: boolean;
  dataDir: string;
  mediaDir: string;
}

export class Fleet {
  readonly admin: ConsoleClient;
  readonly groundTruth: GroundTruth;
  readonly driver: TimeDriver | null;
  readonly players = new Map<string, FleetPlayer>();
  readonly warnings: string[] = [];
  segment: NetworkSegment | null = null;
  operator: Operator | null = null;
  structures: StructureInfo[] = [];
  creatives: IssuedCreative[] = [];
  private readonly hosts: PlayerHost[] = [];
  private authorityRootPem: string | null = null;
  private proxyTls: ProxyTls | null = null;
  private readonly settings: AgentSettings;
  private readonly runId = randomBytes(3).toString('hex');
  private closed = false;

  private constructor(readonly options: FleetOptions) {
    mkdirSync(options.dir, { recursive: true });
    this.admin = new ConsoleClient(options.platform.urls.api, options.platform.adminKey);
    this.groundTruth = new GroundTruth(join(options.dir, 'ground-truth.ndjson'));
    this.settings = {
      ...DEFAULT_AGENT_SETTINGS,
      ...options.settings,
      shipping: { ...DEFAULT_AGENT_SETTINGS.shipping, ...options.settings?.shipping },
    };
    const time = options.time;
    if (time) {
      const platformClock: PlatformClock | null =
        time.platformClock === 'http'
          ? { set: async (at) => void (await this.admin.setClock(at, true)) }
          : time.platformClock;
      this.driver = new TimeDriver({
        startMs: time.startMs,
        platformClock,
        ...(time.minStepMs !== undefined ? { minStepMs: time.minStepMs } : {}),
        ...(time.maxStepMs !== undefined ? { maxStepMs: time.maxStepMs } : {}),
      });
    } else {
      this.driver = null;
    }
  }

  static async create(options: FleetOptions): Promise<Fleet> {
    const fleet = new Fleet(options);
    if (options.network) {
      const mode = options.network.devicesMode;
      if (mode === 'terminate') fleet.proxyTls = await createProxyTls();
      fleet.segment = await NetworkSegment.start({
        name: 'fleet',
        upstream: options.platform.urls,
        devicesMode: mode,
        ...(fleet.proxyTls ? { tls: fleet.proxyTls } : {}),
        ...(options.network.clientCertHeader ? { clientCertHeader: options.network.clientCertHeader } : {}),
      });
    }
    await fleet.driver?.sync();
    return fleet;
  }

  private log(line: string): void {
    this.options.log?.(line);
  }

  /** Virtual now (or real now) in ms. */
  now(): number {
    return this.driver?.now() ?? Date.now();
  }

  // --- provisioning ---------------------------------------------------------------------------------------

  /** Operator, structures, approved creatives, and every player enrolled with its media in place. */
  async provision(plan: ProvisionOptions): Promise<void> {
    const name = this.options.name ?? `Simulated operator ${this.runId}`;
    this.operator ??= await createOperator(this.admin, name);
    const codes =
      typeof plan.players === 'number'
        ? Array.from(
            { length: plan.players },
            (_, i) => `SIM-${this.runId}-${String(i + 1).padStart(4, '0')}`,
          )
        : plan.players;
    this.log(`creating ${codes.length} structures`);
    this.options.progress?.phase(`creating ${codes.length.toLocaleString('en-US')} structures`);
    const structures = await createStructures(this.admin, this.operator.id, codes, {
      ...(plan.district ? { district: plan.district } : {}),
      ...(plan.format ? { format: plan.format } : {}),
    });
    this.structures.push(...structures);
    const operatorClient = this.admin.as(this.operator.key);
    this.log(`approving ${plan.creatives.length} creatives`);
    this.options.progress?.phase(`approving ${plan.creatives.length} creatives`);
    const issued =
      plan.creatives.length === 0
        ? []
        : await issueCreatives({
            admin: this.admin,
            operator: operatorClient,
            structures,
            creatives: plan.creatives,
            validFrom: plan.validFrom,
            validUntil: plan.validUntil,
          });
    this.creatives.push(...issued);
    this.authorityRootPem ??= await authorityRoot(this.options.platform.urls.verify);
    this.log(`enrolling ${structures.length} players`);
    this.options.progress?.phase('enrolling players', { total: structures.length, unit: 'players' });
    const certificateFor = (i: number) =>
      typeof plan.certificates === 'function' ? plan.certificates(i) : plan.certificates !== false;
    const files = await mapLimit(structures, 8, async (structure, i) => {
      const enrolled = await enrolPlayer({
        operator: operatorClient,
        dir: join(this.options.dir, 'players', structure.code),
        structure,
        network: this.networkFor(),
        authorityRootPem: this.authorityRootPem!,
        settings: this.settings,
        certificate: certificateFor(i),
      });
      this.options.progress?.tick();
      return enrolled;
    });
    const chain = files.find((f) => f.chainPem)?.chainPem;
    if (chain && this.segment) this.segment.trustClientCas(chain);
    for (const file of files) {
      const config = loadConfig(file.configFile);
      const player: FleetPlayer = {
        id: file.id,
        files: file,
        host: null,
        running: false,
        powerCuts: 0,
        hardware: {},
        halted: false,
        dataDir: config.dataDir,
        mediaDir: config.mediaDir,
      };
      this.players.set(file.id, player);
      for (const creative of issued) {
        if (creative.structureCodes.includes(file.id)) placeCreative(player.mediaDir, creative);
      }
    }
    this.saveManifest();
  }

  private saveManifest(): void {
    const manifest: FleetManifest = {
      operator: this.operator?.id ?? null,
      players: [...this.players.values()].map((p) => ({
        id: p.id,
        device_id: p.files.deviceId,
        structure_id: p.files.structure.id,
        dir: p.files.dir,
      })),
      creatives: this.creatives.map((c) => ({
        name: c.name,
        file: c.fileName,
        sha256: c.sha256,
        approval: c.approvalNumber,
        valid_from: c.validFrom,
        valid_until: c.validUntil,
      })),
    };
    writeFileSync(join(this.options.dir, 'fleet.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  }

  /**
   * Takes up the players a previous run provisioned in this folder (fleet.json), as they are on disk: their keys,
   * certificates, logs and media. Returns false when there is nothing to take up.
   */
  adopt(): boolean {
    const file = join(this.options.dir, 'fleet.json');
    if (!existsSync(file)) return false;
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as FleetManifest;
    for (const saved of manifest.players ?? []) {
      const configFile = join(saved.dir, 'agent.json');
      if (!existsSync(configFile)) continue;
      const config = loadConfig(configFile);
      this.players.set(saved.id, {
        id: saved.id,
        files: {
          id: saved.id,
          dir: saved.dir,
          configFile,
          deviceId: saved.device_id,
          structure: { id: saved.structure_id, code: saved.id },
          certificateNotAfter: null,
          chainPem: null,
        },
        host: null,
        running: false,
        powerCuts: 0,
        hardware: {},
        halted: false,
        dataDir: config.dataDir,
        mediaDir: config.mediaDir,
      });
    }
    this.creatives.push(
      ...(manifest.creatives ?? []).map((c) => ({
        name: c.name,
        fileName: c.file,
        sha256: c.sha256,
        bytes: Buffer.alloc(0),
        approvalNumber: c.approval,
        validFrom: c.valid_from,
        validUntil: c.valid_until,
        structureCodes: [],
        envelopeText: '',
      })),
    );
    return this.players.size > 0;
  }

  private networkFor() {
    const urls = this.segment?.urls ?? this.options.platform.urls;
    return {
      agentsUrl: urls.agents,
      devicesUrl: urls.devices,
      verifyUrl: urls.verify,
      ...(this.proxyTls ? { extraServerCaPem: this.proxyTls.caPem } : {}),
    };
  }

  player(id: string): FleetPlayer {
    const player = this.players.get(id);
    if (!player) throw new Error(`no player ${id} in the fleet`);
    return player;
  }

  ids(): string[] {
    return [...this.players.keys()];
  }

  // --- running --------------------------------------------------------------------------------------------

  private onPlayed = (play: DisplayedPlay) => this.groundTruth.record(play);
  private onWarning = (message: string) => {
    this.warnings.push(message);
    this.log(`warning: ${message}`);
  };

  private async newHost(name: string): Promise<PlayerHost> {
    const placement = this.options.placement ?? { mode: 'in-process' };
    const virtualStartMs = this.driver ? this.driver.now() : null;
    const fallbackMs = this.options.time?.fallbackMs;
    const common = {
      name,
      virtualStartMs,
      ...(fallbackMs !== undefined ? { fallbackMs } : {}),
      onPlayed: this.onPlayed,
      onWarning: this.onWarning,
    };
    const host: PlayerHost =
      placement.mode === 'in-process' ? new LocalHost(common) : await ChildHost.spawn(common);
    this.hosts.push(host);
    this.driver?.addDomain(host);
    return host;
  }

  private async hostFor(index: number, id: string): Promise<PlayerHost> {
    const placement = this.options.placement ?? { mode: 'in-process' };
    if (placement.mode === 'child-per-player') return this.newHost(`player-${id}`);
    const wanted = placement.mode === 'in-process' ? 1 : placement.count;
    const slot = index % wanted;
    const live = this.hosts.filter((h) => !(h instanceof ChildHost) || h.alive);
    return live[slot] ?? this.newHost(placement.mode === 'in-process' ? 'local' : `host-${slot + 1}`);
  }

  private spec(player: FleetPlayer): PlayerSpec {
    return {
      id: player.id,
      configFile: player.files.configFile,
      seed: seedOf(player.id, player.powerCuts),
      hardware: player.hardware,
      halted: player.halted,
    };
  }

  /** Starts every player not running (in parallel, in batches). */
  async startAll(ids?: string[]): Promise<void> {
    const waiting = (ids ?? this.ids()).filter((id) => !this.player(id).running);
    // The whole fleet at its start is shown; one player back after a power cut is not (a run's own line stays).
    const progress = ids === undefined ? this.options.progress : undefined;
    progress?.phase('starting players', { total: waiting.length, unit: 'players' });
    // Hosts first (sequentially: several child processes starting at once compete for the same cores).
    for (const [i, id] of waiting.entries()) this.player(id).host ??= await this.hostFor(i, id);
    await mapLimit(waiting, 16, async (id) => {
      const player = this.player(id);
      await player.host!.add(this.spec(player)).catch((error: Error) => {
        if (!error.message.includes('already on host')) throw error;
      });
      await player.host!.start(id);
      player.running = true;
      progress?.tick();
    });
    await this.driver?.sync();
  }

  async stop(id: string): Promise<void> {
    const player = this.player(id);
    if (!player.running || !player.host) return;
    await player.host.stop(id);
    player.running = false;
  }

  /**
   * A power cut: the player's process is SIGKILLed (whatever it was doing: an SQLite transaction, a batch on the
   * wire, a play on screen). Needs placement `child-per-player` (or takes the whole child process down).
   * With `delayMs`, the cut lands that many real milliseconds later, i.e. in the middle of the next steps.
   */
  async powerCut(id: string, options: { delayMs?: number } = {}): Promise<void> {
    const player = this.player(id);
    const host = player.host;
    if (!(host instanceof ChildHost)) throw new Error('a power cut needs players in child processes');
    if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
    this.driver?.removeDomain(host);
    await host.kill();
    for (const other of this.players.values()) {
      if (other.host === host) {
        other.running = false;
        other.host = null;
        other.powerCuts += 1;
      }
    }
  }

  /** Power back: the player boots again at the current (virtual) time. */
  async powerOn(id: string): Promise<void> {
    const player = this.player(id);
    if (player.running) return;
    await this.startAll([id]);
  }

  async hardware(id: string, op: HardwareOp): Promise<void> {
    const player = this.player(id);
    if (player.host && player.running) player.hardware = await player.host.hardware(id, op);
    else {
      const next = { ...player.hardware, ...op };
      if (op.jumpMs !== undefined) next.skewMs = (player.hardware.skewMs ?? 0) + op.jumpMs;
      delete (next as HardwareOp).jumpMs;
      player.hardware = next;
    }
    await this.driver?.sync();
  }

  async status(id: string): Promise<AgentStatus | null> {
    const player = this.player(id);
    return player.host && player.running ? player.host.status(id) : null;
  }

  /** Replaces a creative's file on one player's disk with other bytes (same name): HASH_MISMATCH. */
  replaceMedia(id: string, creative: IssuedCreative, seed = 999): void {
    const player = this.player(id);
    writeFileSync(join(player.mediaDir, creative.fileName), pngCreative(64, 32, seed));
  }

  /** Places (again) an issued creative with its envelope in one player's media folder. */
  placeMedia(id: string, creative: IssuedCreative): void {
    placeCreative(this.player(id).mediaDir, creative);
  }

  // --- time -----------------------------------------------------------------------------------------------

  private requireDriver(): TimeDriver {
    if (!this.driver) throw new Error('this fleet runs in real time');
    return this.driver;
  }

  advance(ms: number, onStep?: (now: number) => Promise<void> | void): Promise<void> {
    return this.requireDriver().advance(ms, onStep);
  }

  runUntil(at: number, onStep?: (now: number) => Promise<void> | void): Promise<void> {
    return this.requireDriver().runUntil(at, onStep);
  }

  jumpTo(at: number): Promise<void> {
    return this.requireDriver().jumpTo(at);
  }

  // --- the end of a run -----------------------------------------------------------------------------------

  async queues(): Promise<Record<string, number>> {
    const all: Record<string, number> = {};
    for (const host of this.hosts) {
      if (host instanceof ChildHost && !host.alive) continue;
      Object.assign(all, await host.queues());
    }
    return all;
  }

  /**
   * Halts every screen (the play on screen finishes, nothing new starts) and moves time on until every player's
   * queue is empty or `maxMs` has passed.
   */
  async drain(options: { maxMs?: number; stepMs?: number } = {}): Promise<boolean> {
    for (const player of this.players.values()) {
      player.halted = true;
      if (player.host && player.running) await player.host.halt(player.id);
    }
    const driver = this.requireDriver();
    const until = driver.now() + (options.maxMs ?? 6 * 3_600_000);
    const step = options.stepMs ?? 5 * 60_000;
    let left = 0;
    this.options.progress?.phase('draining queues', {
      detail: () => `${left.toLocaleString('en-US')} record(s) queued`,
    });
    for (;;) {
      const queues = await this.queues();
      left = Object.values(queues).reduce((sum, depth) => sum + depth, 0);
      if (left === 0) return true;
      if (driver.now() >= until) {
        this.log(`drain: ${left} record(s) still queued`);
        return false;
      }
      await driver.advance(step);
    }
  }

  readLog(id: string): AgentLogSummary {
    return readAgentLog(join(this.player(id).dataDir, 'agent.sqlite'));
  }

  /**
   * Reads every player's log and the platform's counts, and reconciles them with the ground truth. `completeLog` puts
   * back what the agent's retention removed from a log (scenario/log-archive.ts).
   */
  async reconcile(
    options: {
      allowedRefusals?: number;
      completeLog?: (id: string, log: AgentLogSummary) => AgentLogSummary;
    } = {},
  ): Promise<Reconciliation> {
    const logs = new Map<string, AgentLogSummary>();
    this.options.progress?.phase("reading the players' logs", { total: this.players.size, unit: 'players' });
    for (const player of this.players.values()) {
      try {
        const log = this.readLog(player.id);
        logs.set(player.id, options.completeLog ? options.completeLog(player.id, log) : log);
      } catch (error) {
        this.onWarning(`${player.id}: ${(error as Error).message}`);
      }
      this.options.progress?.tick();
    }
    this.options.progress?.phase("reading the platform's counts");
    const { items } = await this.admin.playCounts();
    const mine = new Set([...this.players.values()].map((p) => `device:${p.files.deviceId}`));
    return reconcile({
      players: [...this.players.values()].map((p) => ({ id: p.id, deviceId: p.files.deviceId })),
      groundTruth: this.groundTruth,
      logs,
      counts: items.filter((row) => mine.has(row.player)),
      powerCuts: new Map([...this.players.values()].map((p) => [p.id, p.powerCuts])),
      approvalOfSha: new Map(this.creatives.map((c) => [c.sha256, c.approvalNumber])),
      ...(options.allowedRefusals !== undefined ? { allowedRefusals: options.allowedRefusals } : {}),
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const player of this.players.values()) player.running = false;
    await Promise.all(this.hosts.map((host) => host.close().catch(() => {})));
    await this.segment?.close();
  }
}
