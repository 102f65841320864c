import { realSleep, type Sleep } from '@ooh/agent';

/**
 * Time as the simulated players see it. A {@link VirtualClock} is one process's view of virtual time: it stands
 * still until the time driver moves it, and every agent sleep registered with it resolves when virtual time
 * reaches its deadline. Sleeps are counted per owner (one owner per agent), so the driver can tell when every
 * agent has finished what the last step woke it for ("quiescent") before it moves time again: virtual time never
 * runs ahead of the work it causes, however loaded the machine is.
 */
export interface TimeSource {
  /** Virtual (true) time in epoch milliseconds. */
  now(): number;
  /** A sleep counted for `owner` (an agent), for the agent's loops and its display. */
  sleepFor(owner: string): Sleep;
}

interface Sleeper {
  at: number;
  order: number;
  owner: string;
  done: boolean;
  resolve: () => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

interface OwnerState {
  /** Loops of the agent that sleep between work (shipping, renewal, revocations, media recheck, playback). */
  expected: number;
  sleeping: number;
  /** Consecutive settles that timed out with this owner short of `expected` at the same count. */
  stalls: number;
  stalledAt: number;
}

export interface SettleResult {
  /** True when every owner was asleep; false when the fallback timeout ended the wait. */
  quiescent: boolean;
  /** Owners that were still awake when the fallback timeout ended the wait. */
  awake: string[];
}

export interface VirtualClockOptions {
  /** Real milliseconds a settle waits for quiescence before giving up on it (default 5000). */
  fallbackMs?: number;
  /** Called when an owner's expected loop count is lowered after repeated stalls. */
  onAdjust?: (owner: string, expected: number, was: number) => void;
}

/** Consecutive stalls at one count after which that count is taken as the owner's number of loops. */
const STALLS_BEFORE_ADJUST = 3;

/** A binary min-heap of sleepers by (deadline, order). */
class SleeperHeap {
  private readonly items: Sleeper[] = [];

  get size(): number {
    return this.items.length;
  }

  all(): readonly Sleeper[] {
    return this.items;
  }

  peek(): Sleeper | undefined {
    return this.items[0];
  }

  push(item: Sleeper): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): Sleeper | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < items.length && before(items[left]!, items[smallest]!)) smallest = left;
        if (right < items.length && before(items[right]!, items[smallest]!)) smallest = right;
        if (smallest === i) break;
        [items[i], items[smallest]] = [items[smallest]!, items[i]!];
        i = smallest;
      }
    }
    return top;
  }
}

function before(a: Sleeper, b: Sleeper): boolean {
  return a.at < b.at || (a.at === b.at && a.order < b.order);
}

export class VirtualClock implements TimeSource {
  private current: number;
  private order = 0;
  private readonly heap = new SleeperHeap();
  private readonly owners = new Map<string, OwnerState>();
  /** Owners being stopped: their sleeps end at once (time does not move while an agent shuts down). */
  private readonly released = new Set<string>();
  private changeWaiters: (() => void)[] = [];
  private readonly fallbackMs: number;

  constructor(
    startMs: number,
    private readonly options: VirtualClockOptions = {},
  ) {
    this.current = startMs;
    this.fallbackMs = options.fallbackMs ?? 5000;
  }

  now(): number {
    return this.current;
  }

  /** Counts `owner`'s sleeps; the clock is quiescent only while `expected` of them sleep. */
  register(owner: string, expected: number): void {
    this.released.delete(owner);
    const state = this.owners.get(owner);
    if (state) state.expected = expected;
    else this.owners.set(owner, { expected, sleeping: 0, stalls: 0, stalledAt: -1 });
  }

  /** Stops waiting for `owner` (stopped, killed). Its sleeps still resolve normally. */
  unregister(owner: string): void {
    this.owners.delete(owner);
    this.changed();
  }

  /**
   * The owner is shutting down: its pending sleeps end now and later ones at once, since virtual time stands still
   * while the simulator waits for an agent to stop (an agent may sleep a last time on its way out).
   */
  release(owner: string): void {
    this.owners.delete(owner);
    this.released.add(owner);
    for (const sleeper of this.heap.all()) if (sleeper.owner === owner) this.wake(sleeper);
    this.changed();
  }

  expectedLoops(owner: string): number | null {
    return this.owners.get(owner)?.expected ?? null;
  }

  sleepFor(owner: string): Sleep {
    return (ms, signal) => this.sleep(owner, ms, signal);
  }

  /** Earliest deadline of a pending sleep, or null when nothing sleeps. */
  nextDeadline(): number | null {
    for (;;) {
      const top = this.heap.peek();
      if (!top) return null;
      if (!top.done) return top.at;
      this.heap.pop();
    }
  }

  /** Moves virtual time to `at` (never backwards) and wakes every sleep due by then, earliest first. */
  advanceTo(at: number): void {
    if (at < this.current) throw new RangeError(`virtual time cannot go back (${at} < ${this.current})`);
    this.current = at;
    for (;;) {
      const top = this.heap.peek();
      if (!top || top.at > at) break;
      this.heap.pop();
      this.wake(top);
    }
  }

  /**
   * Waits until every registered owner sleeps in as many sleeps as it has loops (twice in a row, one macrotask
   * apart, so work queued by the last wake-up is seen), or until the fallback timeout.
   */
  async settle(): Promise<SettleResult> {
    const deadline = performance.now() + this.fallbackMs;
    let stable = 0;
    for (;;) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (this.quiescent()) {
        stable += 1;
        if (stable >= 2) {
          for (const state of this.owners.values()) state.stalls = 0;
          return { quiescent: true, awake: [] };
        }
        continue;
      }
      stable = 0;
      if (performance.now() >= deadline) return { quiescent: false, awake: this.noteStalls() };
      await this.nextChange(Math.min(5, Math.max(1, deadline - performance.now())));
    }
  }

  private quiescent(): boolean {
    for (const state of this.owners.values()) if (state.sleeping < state.expected) return false;
    return true;
  }

  /**
   * An owner that stays short of its expected loops at the same count settle after settle has fewer loops than
   * expected (one ended, e.g. shipping stopped on a terminal answer): take the count it reaches.
   */
  private noteStalls(): string[] {
    const awake: string[] = [];
    for (const [owner, state] of this.owners) {
      if (state.sleeping >= state.expected) {
        state.stalls = 0;
        continue;
      }
      awake.push(owner);
      if (state.stalledAt === state.sleeping) state.stalls += 1;
      else {
        state.stalledAt = state.sleeping;
        state.stalls = 1;
      }
      if (state.stalls >= STALLS_BEFORE_ADJUST) {
        const was = state.expected;
        state.expected = state.sleeping;
        state.stalls = 0;
        this.options.onAdjust?.(owner, state.expected, was);
      }
    }
    return awake;
  }

  private sleep(owner: string, ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    if (!(ms > 0) || this.released.has(owner)) {
      // No virtual wait: continue after I/O has had its turn, as a zero timer would.
      return new Promise((resolve) => setImmediate(resolve));
    }
    return new Promise<void>((resolve) => {
      const sleeper: Sleeper = {
        at: this.current + ms,
        order: this.order++,
        owner,
        done: false,
        resolve,
        signal,
        onAbort: undefined,
      };
      if (signal) {
        sleeper.onAbort = () => this.wake(sleeper);
        signal.addEventListener('abort', sleeper.onAbort, { once: true });
      }
      this.heap.push(sleeper);
      const state = this.owners.get(owner);
      if (state) {
        state.sleeping += 1;
        // More loops asleep at once than expected: the agent has more loops than the simulator knew of.
        if (state.sleeping > state.expected) {
          this.options.onAdjust?.(owner, state.sleeping, state.expected);
          state.expected = state.sleeping;
        }
      }
      this.changed();
    });
  }

  private wake(sleeper: Sleeper): void {
    if (sleeper.done) return;
    sleeper.done = true;
    if (sleeper.signal && sleeper.onAbort) sleeper.signal.removeEventListener('abort', sleeper.onAbort);
    const state = this.owners.get(sleeper.owner);
    if (state) state.sleeping -= 1;
    sleeper.resolve();
    this.changed();
  }

  private changed(): void {
    const waiters = this.changeWaiters;
    if (waiters.length === 0) return;
    this.changeWaiters = [];
    for (const waiter of waiters) waiter();
  }

  private nextChange(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.changeWaiters.push(done);
    });
  }
}

/** Real time: the wall clock and real timers (the demo fleet, the benchmark, a player at a real site). */
export const realTime: TimeSource = {
  now: () => Date.now(),
  // The agent's own sleep: capped at Node's timer limit (callers loop), ended early by the signal.
  sleepFor: () => realSleep,
};
