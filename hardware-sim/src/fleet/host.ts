import type { AgentStatus } from '@ooh/agent';
import type { DisplayedPlay } from '../hardware/sim-display.js';
import type { DomainIdle, TimeDomain } from '../time/driver.js';
import { realTime, type TimeSource, VirtualClock } from '../time/virtual-clock.js';
import {
  AGENT_LOOPS,
  type HardwareOp,
  type HardwareState,
  type PlayerSpec,
  SimPlayer,
} from './sim-player.js';

/**
 * Where players run: this process ({@link LocalHost}) or a child process (`ChildHost`, for power cuts and to use
 * more cores). Both answer the same calls; each is a time domain with its own copy of virtual time.
 */
export interface PlayerHost extends TimeDomain {
  add(spec: PlayerSpec): Promise<void>;
  start(id: string): Promise<void>;
  stop(id: string): Promise<void>;
  hardware(id: string, op: HardwareOp): Promise<HardwareState>;
  halt(id: string): Promise<void>;
  status(id: string): Promise<AgentStatus | null>;
  /** Records not yet acknowledged by the platform, per running player. */
  queues(): Promise<Record<string, number>>;
  close(): Promise<void>;
}

export interface LocalHostOptions {
  name: string;
  /** Virtual time starting here, or real time when null. */
  virtualStartMs: number | null;
  fallbackMs?: number;
  onPlayed: (play: DisplayedPlay) => void;
  onWarning?: (message: string) => void;
}

export class LocalHost implements PlayerHost {
  readonly name: string;
  readonly clock: VirtualClock | null;
  private readonly time: TimeSource;
  private readonly players = new Map<string, SimPlayer>();

  constructor(private readonly options: LocalHostOptions) {
    this.name = options.name;
    this.clock =
      options.virtualStartMs === null
        ? null
        : new VirtualClock(options.virtualStartMs, {
            ...(options.fallbackMs !== undefined ? { fallbackMs: options.fallbackMs } : {}),
            onAdjust: (owner, expected, was) =>
              options.onWarning?.(
                expected < was
                  ? `player ${owner}: only ${expected} of its ${was} agent loops still sleep (one ended); waiting for ${expected}`
                  : `player ${owner}: ${expected} agent loops sleep at once (${was} expected); waiting for ${expected}`,
              ),
          });
    this.time = this.clock ?? realTime;
  }

  player(id: string): SimPlayer {
    const player = this.players.get(id);
    if (!player) throw new Error(`no player ${id} on host ${this.name}`);
    return player;
  }

  ids(): string[] {
    return [...this.players.keys()];
  }

  async add(spec: PlayerSpec): Promise<void> {
    if (this.players.has(spec.id)) throw new Error(`player ${spec.id} is already on host ${this.name}`);
    this.players.set(spec.id, new SimPlayer(spec, this.time, this.options.onPlayed));
  }

  async start(id: string): Promise<void> {
    const player = this.player(id);
    this.clock?.register(id, AGENT_LOOPS);
    try {
      await player.start();
    } catch (error) {
      this.clock?.unregister(id);
      throw error;
    }
  }

  async stop(id: string): Promise<void> {
    this.clock?.unregister(id);
    await this.player(id).stop(() => this.clock?.release(id));
  }

  async hardware(id: string, op: HardwareOp): Promise<HardwareState> {
    const player = this.player(id);
    player.applyHardware(op);
    return player.hardwareState();
  }

  async halt(id: string): Promise<void> {
    this.player(id).halt();
  }

  async status(id: string): Promise<AgentStatus | null> {
    return this.player(id).status();
  }

  async queues(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const [id, player] of this.players) {
      const status = player.status();
      if (status) out[id] = status.queue.depth;
    }
    return out;
  }

  async advanceTo(at: number): Promise<DomainIdle> {
    if (!this.clock) return { next: null, awake: [] };
    const began = performance.now();
    this.clock.advanceTo(at);
    const settled = await this.clock.settle();
    return { next: this.clock.nextDeadline(), awake: settled.awake, settleMs: performance.now() - began };
  }

  async close(): Promise<void> {
    await Promise.all([...this.players.keys()].map((id) => this.stop(id).catch(() => {})));
    this.players.clear();
  }
}
