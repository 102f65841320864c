import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  type AgentCore,
  type AgentStatus,
  type Clock,
  createAgent,
  EnvelopeVerifier,
  jsonLogger,
  loadConfig,
  type ScreenPower,
  systemFreeSpace,
  type TamperState,
} from '@ooh/agent';
import { SimDisk, type SimDiskState } from '../hardware/sim-disk.js';
import type { DisplayedPlay } from '../hardware/sim-display.js';
import { SimDisplay } from '../hardware/sim-display.js';
import { SimHardware } from '../hardware/sim-hardware.js';
import type { TimeSource } from '../time/virtual-clock.js';
import { splitPemChain } from '@ooh/crypto';
import { seededRandom } from '../util/random.js';

/**
 * Envelope signature checks shared by the players of this process, per authority root: a fleet's players hold the
 * same creatives, whose CMS signatures (20-40 ms each) are then verified once per process, not once per player. Each
 * agent still judges dates, hashes, its structure and revocations itself (EnvelopeVerifier caches only the signature).
 */
const sharedVerifiers = new Map<string, EnvelopeVerifier>();

function sharedVerifier(authorityRootFile: string): EnvelopeVerifier | undefined {
  let text: string;
  try {
    text = readFileSync(authorityRootFile, 'utf8');
  } catch {
    return undefined; // the agent reports the unreadable root itself
  }
  let verifier = sharedVerifiers.get(text);
  if (!verifier) {
    verifier = new EnvelopeVerifier({ trustedRootsPem: splitPemChain(text) });
    sharedVerifiers.set(text, verifier);
  }
  return verifier;
}

/**
 * Loops the agent core runs while started with a display (apps/agent/src/agent.ts `start`): shipping, storage (disk
 * checks and retention), renewal, revocation refresh, media recheck, playback. Each sleeps between work, so a player
 * is idle exactly when this many of its sleeps are pending. (The virtual clock lowers it by itself if a loop ends,
 * see VirtualClock.)
 */
export const AGENT_LOOPS = 6;

/** How a player is set up; plain data, so it can cross to a child process. */
export interface PlayerSpec {
  /** The player's name in the simulator: its structure code. */
  id: string;
  configFile: string;
  /** Seeds the agent's randomness (renewal point, backoff jitter): runs are repeatable. */
  seed: number;
  hardware?: HardwareState;
  /** Simulated screen halted: new plays wait and are never shown (the end of a run). */
  halted?: boolean;
  /** Agent log (JSON lines); default `agent.log` beside the config. */
  logFile?: string;
}

export interface HardwareState {
  skewMs?: number;
  screen?: ScreenPower;
  tamper?: TamperState;
  /** A small simulated volume under the player's folder (SimDisk); the host's real disk when absent. */
  disk?: SimDiskState;
}

export interface HardwareOp extends HardwareState {
  /** The board clock jumps by this much. */
  jumpMs?: number;
}

/** One simulated player: the real agent core on simulated hardware and a simulated screen. */
export class SimPlayer {
  readonly hardware: SimHardware;
  readonly display: SimDisplay;
  private disk: SimDisk | null = null;
  private core: AgentCore | null = null;
  private log: WriteStream | null = null;

  constructor(
    readonly spec: PlayerSpec,
    private readonly time: TimeSource,
    onPlayed: (play: DisplayedPlay) => void,
  ) {
    this.hardware = new SimHardware(() => time.now(), spec.hardware ?? {});
    const sleep = time.sleepFor(spec.id);
    const clock = (): Clock => this.core?.clock ?? this.hardware.clock;
    this.display = new SimDisplay({
      player: spec.id,
      sleep,
      clock,
      screenPower: () => this.hardware.screenPower(),
      onPlayed,
    });
    if (spec.halted) this.halt();
    if (spec.hardware?.disk) this.disk = this.newDisk(spec.hardware.disk);
  }

  private newDisk(state: SimDiskState): SimDisk {
    const config = loadConfig(this.spec.configFile);
    return new SimDisk([config.dataDir, config.mediaDir], state);
  }

  get agent(): AgentCore | null {
    return this.core;
  }

  get running(): boolean {
    return this.core !== null;
  }

  async start(): Promise<void> {
    if (this.core) return;
    const config = loadConfig(this.spec.configFile);
    const logFile = this.spec.logFile ?? join(dirname(this.spec.configFile), 'agent.log');
    const stream = createWriteStream(logFile, { flags: 'a' });
    this.log = stream;
    const trueNow = () => new Date(this.time.now()).toISOString();
    const envelopeVerifier = sharedVerifier(config.authorityRootFile);
    const core = await createAgent({
      config,
      ...(envelopeVerifier ? { envelopeVerifier } : {}),
      hardware: this.hardware,
      display: this.display,
      sleep: this.time.sleepFor(this.spec.id),
      random: seededRandom(this.spec.seed),
      // The simulated volume when there is one (set now or later by a hardware op), else the host's.
      freeSpace: (path) => (this.disk ? this.disk.freeSpace(path) : systemFreeSpace(path)),
      // The simulated instant is added to each line, beside the machine time jsonLogger writes.
      logger: jsonLogger((line) => stream.write(`${line.slice(0, -2)},"sim_time":"${trueNow()}"}\n`)),
    });
    this.core = core;
    await core.start();
  }

  /** Stops the agent; `onAborted` runs once the agent's loops have been told to stop. */
  async stop(onAborted?: () => void): Promise<void> {
    const core = this.core;
    this.core = null;
    if (core) {
      // AgentCore.stop aborts its loops synchronously, then waits for them.
      const stopping = core.stop();
      onAborted?.();
      await stopping;
      await core.close();
    }
    const log = this.log;
    this.log = null;
    if (log) await new Promise<void>((resolve) => log.end(resolve));
  }

  status(): AgentStatus | null {
    return this.core?.status() ?? null;
  }

  applyHardware(op: HardwareOp): void {
    if (op.skewMs !== undefined) this.hardware.setSkew(op.skewMs);
    if (op.jumpMs !== undefined) this.hardware.jump(op.jumpMs);
    if (op.screen !== undefined) this.hardware.setScreenPower(op.screen);
    if (op.tamper !== undefined) this.hardware.setTamper(op.tamper);
    if (op.disk !== undefined) {
      // The agent reads the volume at its next disk check (AgentOptions.freeSpace).
      if (this.disk) this.disk.set(op.disk);
      else this.disk = this.newDisk(op.disk);
    }
  }

  hardwareState(): HardwareState {
    return {
      skewMs: this.hardware.skewMs,
      screen: this.hardware.screenPower(),
      tamper: this.hardware.tamper(),
      ...(this.disk ? { disk: this.disk.current } : {}),
    };
  }

  /** The screen stops taking new plays (the one on screen finishes): a run's end, so queues can drain. */
  halt(): void {
    this.display.halt();
  }
}
