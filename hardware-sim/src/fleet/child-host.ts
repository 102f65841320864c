import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AgentStatus } from '@ooh/agent';
import type { DisplayedPlay } from '../hardware/sim-display.js';
import type { DomainIdle } from '../time/driver.js';
import type { PlayerHost } from './host.js';
import type { HardwareOp, HardwareState, PlayerSpec } from './sim-player.js';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Messages between a {@link ChildHost} and its process (host-main.ts). */
export type HostRequest =
  | { id: number; op: 'add'; spec: PlayerSpec }
  | { id: number; op: 'start' | 'stop' | 'halt' | 'status'; player: string }
  | { id: number; op: 'hardware'; player: string; change: HardwareOp }
  | { id: number; op: 'queues' | 'close' }
  | { id: number; op: 'advance'; at: number };

export type HostMessage =
  | { type: 'ready' }
  | { type: 'reply'; id: number; ok: true; value: unknown }
  | { type: 'reply'; id: number; ok: false; error: string }
  | { type: 'played'; play: DisplayedPlay }
  | { type: 'warning'; message: string };

export interface ChildHostOptions {
  name: string;
  virtualStartMs: number | null;
  fallbackMs?: number;
  onPlayed: (play: DisplayedPlay) => void;
  onWarning?: (message: string) => void;
  /** Called once when the process ends (killed, crashed, closed). */
  onExit?: (code: number | null, signal: NodeJS.Signals | null) => void;
}

/** The host program beside this module: TypeScript sources (run with tsx) or the built JavaScript. */
const FROM_SOURCES = import.meta.url.endsWith('.ts');
const HOST_MAIN = fileURLToPath(new URL(FROM_SOURCES ? './host-main.ts' : './host-main.js', import.meta.url));
/** The repository root, so `--import tsx` resolves wherever the simulator was started from. */
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * Players in a child process: a power cut is a real SIGKILL of that process, in the middle of whatever its agents
 * were doing (an SQLite transaction, a batch on the wire). Ground truth crosses to the parent as each play ends.
 */
export class ChildHost implements PlayerHost {
  readonly name: string;
  private readonly child: ChildProcess;
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; op: string }
  >();
  private exited = false;
  private readonly exitPromise: Promise<void>;

  private constructor(private readonly options: ChildHostOptions) {
    this.name = options.name;
    this.child = fork(HOST_MAIN, [], {
      execArgv: [
        ...(FROM_SOURCES ? ['--conditions=source', '--import', 'tsx'] : []),
        // SIM_HOST_CPU_PROF=<dir>: a CPU profile of each host process, for finding what a fleet spends its time on.
        ...(process.env['SIM_HOST_CPU_PROF']
          ? ['--cpu-prof', `--cpu-prof-dir=${process.env['SIM_HOST_CPU_PROF']}`]
          : []),
      ],
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        SIM_HOST_NAME: options.name,
        SIM_HOST_VIRTUAL_START: options.virtualStartMs === null ? '' : String(options.virtualStartMs),
        SIM_HOST_FALLBACK_MS: options.fallbackMs === undefined ? '' : String(options.fallbackMs),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
    });
    this.child.on('message', (message: HostMessage) => this.onMessage(message));
    this.exitPromise = new Promise<void>((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exited = true;
        for (const [id, waiter] of this.pending) {
          // An advance interrupted by a power cut simply ends; anything else failed.
          if (waiter.op === 'advance') waiter.resolve({ next: null, awake: [] } satisfies DomainIdle);
          else waiter.reject(new Error(`host ${this.name} ended (${signal ?? code}) during ${waiter.op}`));
          this.pending.delete(id);
        }
        options.onExit?.(code, signal);
        resolve();
      });
    });
  }

  static async spawn(options: ChildHostOptions): Promise<ChildHost> {
    const host = new ChildHost(options);
    await new Promise<void>((resolve, reject) => {
      const onMessage = (message: HostMessage) => {
        if (message.type === 'ready') {
          host.child.off('message', onMessage);
          resolve();
        }
      };
      host.child.on('message', onMessage);
      host.child.once('exit', (code) =>
        reject(new Error(`host ${options.name} exited with ${code} while starting`)),
      );
    });
    return host;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.exited;
  }

  /** Power cut: SIGKILL, no chance to finish anything. Resolves once the process is gone. */
  async kill(): Promise<void> {
    if (!this.exited) this.child.kill('SIGKILL');
    await this.exitPromise;
  }

  add(spec: PlayerSpec): Promise<void> {
    return this.request({ op: 'add', spec }) as Promise<void>;
  }

  start(id: string): Promise<void> {
    return this.request({ op: 'start', player: id }) as Promise<void>;
  }

  stop(id: string): Promise<void> {
    return this.request({ op: 'stop', player: id }) as Promise<void>;
  }

  halt(id: string): Promise<void> {
    return this.request({ op: 'halt', player: id }) as Promise<void>;
  }

  hardware(id: string, change: HardwareOp): Promise<HardwareState> {
    return this.request({ op: 'hardware', player: id, change }) as Promise<HardwareState>;
  }

  status(id: string): Promise<AgentStatus | null> {
    return this.request({ op: 'status', player: id }) as Promise<AgentStatus | null>;
  }

  queues(): Promise<Record<string, number>> {
    return this.request({ op: 'queues' }) as Promise<Record<string, number>>;
  }

  async advanceTo(at: number): Promise<DomainIdle> {
    if (this.exited) return { next: null, awake: [] };
    return this.request({ op: 'advance', at }) as Promise<DomainIdle>;
  }

  async close(): Promise<void> {
    if (this.exited) return;
    try {
      await this.request({ op: 'close' });
    } catch {
      // ended on its own meanwhile
    }
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000);
    await this.exitPromise;
    clearTimeout(timer);
  }

  private request(body: DistributiveOmit<HostRequest, 'id'>): Promise<unknown> {
    if (this.exited) return Promise.reject(new Error(`host ${this.name} has ended`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, op: body.op });
      this.child.send({ ...body, id } as HostRequest);
    });
  }

  private onMessage(message: HostMessage): void {
    switch (message.type) {
      case 'played':
        this.options.onPlayed(message.play);
        return;
      case 'warning':
        this.options.onWarning?.(`${this.name}: ${message.message}`);
        return;
      case 'reply': {
        const waiter = this.pending.get(message.id);
        if (!waiter) return;
        this.pending.delete(message.id);
        if (message.ok) waiter.resolve(message.value);
        else waiter.reject(new Error(message.error));
        return;
      }
      default:
        return;
    }
  }
}
