import { type Dirent, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FreeSpace } from '@ooh/agent';

/** A player's simulated volume: its size and what other software takes of it (plain data: crosses to a child). */
export interface SimDiskState {
  capacityBytes: number;
  /** Taken by everything but the player's own folder (the system, other software's logs, caches). */
  otherBytes: number;
}

/**
 * The volume a simulated player's data and media live on, for the agent's disk watch (AgentOptions.freeSpace): a
 * small board's flash of `capacityBytes`, of which other software takes `otherBytes` and the player's folders (its
 * data_dir: the SQLite file and WAL, keys; its media_dir) what they really take on the host's disk, read at each
 * call. So the play log's growth during an outage, and the space retention gives back, move the free space as they
 * would on a player, while the host's real disk stays as it is.
 */
export class SimDisk {
  constructor(
    private readonly folders: readonly string[],
    private state: SimDiskState,
  ) {}

  get current(): SimDiskState {
    return { ...this.state };
  }

  set(change: Partial<SimDiskState>): void {
    this.state = { ...this.state, ...change };
  }

  /** Bytes the player's folders take now. */
  folderBytes(): number {
    return this.folders.reduce((sum, folder) => sum + sizeOf(folder), 0);
  }

  readonly freeSpace: FreeSpace = async () => {
    const used = this.state.otherBytes + this.folderBytes();
    return {
      freeBytes: Math.max(0, this.state.capacityBytes - used),
      totalBytes: this.state.capacityBytes,
    };
  };
}

function sizeOf(path: string): number {
  let entries: Dirent[];
  try {
    entries = readdirSync(path, { withFileTypes: true });
  } catch {
    return 0;
  }
  let total = 0;
  for (const entry of entries) {
    const full = join(path, entry.name);
    if (entry.isDirectory()) total += sizeOf(full);
    else if (entry.isFile()) {
      try {
        total += statSync(full).size;
      } catch {
        // removed meanwhile (a WAL reset, a rename)
      }
    }
  }
  return total;
}
