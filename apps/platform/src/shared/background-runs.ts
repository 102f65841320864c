/** What one kind of background work did since the process started (served on /metrics). */
export interface BackgroundWorkTally {
  ok: number;
  failed: number;
  /** When the last run that did not throw ended, by the platform's clock. */
  lastSuccess: Date | null;
  /** How long the last run took, in seconds (whatever its outcome). */
  lastRunSeconds: number | null;
}

/**
 * The runs of a platform's background work (every startTicker loop), by the loop's name: an operator alerts on a
 * loop that keeps failing, or whose last success is old (the seal scheduler, the ledger's witnesses and timestamps,
 * the media sweep, the alerts, ...). A failure is also logged, once per run, with its error.
 */
export class BackgroundRuns {
  private readonly works = new Map<string, BackgroundWorkTally>();

  record(name: string, outcome: 'ok' | 'failed', endedAt: Date, seconds: number): void {
    let tally = this.works.get(name);
    if (!tally) {
      tally = { ok: 0, failed: 0, lastSuccess: null, lastRunSeconds: null };
      this.works.set(name, tally);
    }
    tally[outcome] += 1;
    tally.lastRunSeconds = seconds;
    if (outcome === 'ok') tally.lastSuccess = endedAt;
  }

  /** Every loop that ran at least once, by name, in the order they first ran. */
  entries(): [string, Readonly<BackgroundWorkTally>][] {
    return [...this.works];
  }
}
