import { appendFileSync } from 'node:fs';
import type { DisplayedPlay } from '../hardware/sim-display.js';

/**
 * The simulator's ground truth: every play a simulated screen showed, as it ended. Kept in memory by player and,
 * when a file is given, appended to it as JSON lines the moment it arrives (so a report can be made again, and a
 * simulator crash loses nothing it had seen).
 */
export class GroundTruth {
  private readonly byPlayer = new Map<string, DisplayedPlay[]>();
  private total = 0;

  constructor(private readonly file: string | null = null) {}

  record(play: DisplayedPlay): void {
    let list = this.byPlayer.get(play.player);
    if (!list) {
      list = [];
      this.byPlayer.set(play.player, list);
    }
    list.push(play);
    this.total += 1;
    if (this.file) appendFileSync(this.file, `${JSON.stringify(play)}\n`);
  }

  get count(): number {
    return this.total;
  }

  plays(player: string): readonly DisplayedPlay[] {
    return this.byPlayer.get(player) ?? [];
  }

  players(): string[] {
    return [...this.byPlayer.keys()];
  }
}
