import { statfs } from 'node:fs/promises';
import type { Clock } from '../clock.js';
import { rfc3339 } from '../log/records.js';

/** Space on the volume holding a path. */
export interface VolumeSpace {
  freeBytes: number;
  totalBytes: number;
}

/**
 * Free space of the volume holding `path`: `fs.statfs` on a player (blocks available to the agent's user, not the
 * ones kept for root); the simulator's disk or a test's numbers otherwise (AgentOptions.freeSpace).
 */
export type FreeSpace = (path: string) => Promise<VolumeSpace>;

export const systemFreeSpace: FreeSpace = async (path) => {
  const stats = await statfs(path);
  return { freeBytes: stats.bavail * stats.bsize, totalBytes: stats.blocks * stats.bsize };
};

/**
 * - `ok`: free space at or above the warning threshold;
 * - `low`: below `disk.warn_free_bytes`: reported (`agent status`, a mode_change record, the fleet page), plays go on,
 *   and acknowledged history is given up early (storage/maintenance.ts);
 * - `full`: below `disk.hard_free_bytes`, or a play's record could not be written: content whose plays must be proven
 *   stops (only authority slot content plays) until the space is back.
 */
export type DiskState = 'ok' | 'low' | 'full';

export interface VolumeReport {
  /** Which directory: the play log's (`data_dir`) or the media's (`media_dir`). */
  name: string;
  path: string;
  freeBytes: number | null;
  totalBytes: number | null;
  /** Why the volume could not be read (the check goes on with the others). */
  error?: string;
}

export interface DiskReport {
  state: DiskState;
  /** The least free space among the volumes (null when none could be read). */
  freeBytes: number | null;
  volumes: VolumeReport[];
  checkedAt: string;
  /** A write that failed for lack of space (or an I/O fault) since the last one that succeeded. */
  writeFailure: string | null;
}

export interface DiskWatchOptions {
  volumes: { name: string; path: string }[];
  freeSpace: FreeSpace;
  warnFreeBytes: number;
  hardFreeBytes: number;
  clock: Clock;
}

/**
 * A state is left only once the space is this far above its threshold (a tenth of it), so a disk hovering at a
 * threshold does not switch the screen's content back and forth with every write.
 */
export function hysteresisBytes(threshold: number): number {
  return Math.ceil(threshold / 10);
}

/** The state for `freeBytes`, from `current` (see {@link hysteresisBytes}). */
export function diskStateFor(
  freeBytes: number,
  current: DiskState,
  thresholds: { warnFreeBytes: number; hardFreeBytes: number },
): DiskState {
  const { warnFreeBytes, hardFreeBytes } = thresholds;
  if (freeBytes < hardFreeBytes) return 'full';
  if (current === 'full' && freeBytes < hardFreeBytes + hysteresisBytes(hardFreeBytes)) return 'full';
  if (freeBytes < warnFreeBytes) return 'low';
  if (current !== 'ok' && freeBytes < warnFreeBytes + hysteresisBytes(warnFreeBytes)) return 'low';
  return 'ok';
}

/** Watches the free space of the volumes of the play log and the media (DiskState). */
export class DiskWatch {
  private spaceState: DiskState = 'ok';
  private last: DiskReport | null = null;
  private failure: string | null = null;
  private readonly listeners = new Set<(report: DiskReport) => void>();

  constructor(private readonly options: DiskWatchOptions) {}

  get thresholds(): { warnFreeBytes: number; hardFreeBytes: number } {
    return { warnFreeBytes: this.options.warnFreeBytes, hardFreeBytes: this.options.hardFreeBytes };
  }

  /** The state now: `full` while a write failure stands, whatever the space says. */
  get state(): DiskState {
    return this.failure ? 'full' : this.spaceState;
  }

  /** The last check (null before the first), with the state as it stands now. */
  report(): DiskReport | null {
    return this.last ? { ...this.last, state: this.state, writeFailure: this.failure } : null;
  }

  onChange(listener: (report: DiskReport) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reads every volume's free space and moves the state; listeners hear of a change of state. */
  async check(): Promise<DiskReport> {
    const before = this.state;
    const volumes: VolumeReport[] = [];
    for (const volume of this.options.volumes) {
      try {
        const space = await this.options.freeSpace(volume.path);
        volumes.push({ ...volume, freeBytes: space.freeBytes, totalBytes: space.totalBytes });
      } catch (error) {
        volumes.push({ ...volume, freeBytes: null, totalBytes: null, error: (error as Error).message });
      }
    }
    const known = volumes.flatMap((v) => (v.freeBytes === null ? [] : [v.freeBytes]));
    const freeBytes = known.length > 0 ? Math.min(...known) : null;
    // A volume that cannot be read says nothing: the state stays as it was.
    if (freeBytes !== null) this.spaceState = diskStateFor(freeBytes, this.spaceState, this.thresholds);
    this.last = {
      state: this.state,
      freeBytes,
      volumes,
      checkedAt: rfc3339(this.options.clock.now()),
      writeFailure: this.failure,
    };
    if (this.state !== before) this.emit();
    return this.report()!;
  }

  /** A write of the play log failed for lack of space or an I/O fault: `full` until one succeeds. */
  noteWriteFailure(what: string): void {
    const before = this.state;
    this.failure = what.slice(0, 300);
    if (this.state !== before) this.emit();
  }

  noteWriteSuccess(): void {
    if (this.failure === null) return;
    const before = this.state;
    this.failure = null;
    if (this.state !== before) this.emit();
  }

  private emit(): void {
    const report = this.report() ?? {
      state: this.state,
      freeBytes: null,
      volumes: [],
      checkedAt: rfc3339(this.options.clock.now()),
      writeFailure: this.failure,
    };
    for (const listener of [...this.listeners]) listener(report);
  }
}
