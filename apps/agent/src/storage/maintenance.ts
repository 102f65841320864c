import { statSync } from 'node:fs';
import type { Database } from 'better-sqlite3';
import { type Clock, type MonotonicClock, realSleep, type Sleep, systemMonotonic } from '../clock.js';
import type { AgentConfig } from '../config/config.js';
import type { AgentState } from '../log/agent-state.js';
import { rfc3339 } from '../log/records.js';
import type { Logger } from '../logger.js';
import type { DiskReport, DiskState, DiskWatch } from './disk.js';
import { Retention, VACUUM_ONCE_MAX_LIVE_BYTES } from './retention.js';

/** What the last retention pass did (agent_state, so `agent status` shows it without the running agent). */
export interface LastPrune {
  at: string;
  batches: number;
  records: number;
  /** Bytes given back to the file system by incremental vacuum. */
  bytes_freed: number;
  /** The disk was low or full: answered history went after a day, not after keep_acknowledged_ms. */
  under_pressure: boolean;
}

export const LAST_PRUNE_KEY = 'retention.last_prune';

/**
 * Under disk pressure answered history is kept this long only (unless retention keeps less anyway): the platform holds
 * it, and the space is wanted for plays not yet proven. A day of it stays for `hardware-sim check` and a technician
 * (what the platform last answered), and it spares the file the churn of removing every batch the moment it is
 * answered.
 */
export const PRESSURE_KEEP_ACKNOWLEDGED_MS = 86_400_000;

/** The play log's file, the disk and what retention keeps, for `agent status` (snake_case like the rest of it). */
export interface StorageStatus {
  database: {
    file_bytes: number;
    wal_bytes: number;
    /** incremental: freed pages go back to the file system; pending: the one VACUUM that turns it on is still due. */
    vacuum: 'incremental' | 'pending';
  };
  disk: {
    state: DiskState | 'unknown';
    /** The least free space of the volumes of data_dir and media_dir. */
    free_bytes: number | null;
    warn_free_bytes: number;
    hard_free_bytes: number;
    volumes: {
      name: string;
      path: string;
      free_bytes: number | null;
      total_bytes: number | null;
      error?: string;
    }[];
    checked_at: string | null;
    /** A play's record that could not be written (the disk counts as full until one is). */
    write_failure: string | null;
  };
  /** The oldest record the platform has not answered yet (null: nothing waits). */
  oldest_unacknowledged: { seq: number; logged_at: string; age_seconds: number } | null;
  retention: {
    keep_acknowledged_ms: number;
    keep_set_aside_ms: number;
    kept: { records: number; batches: number };
    last_prune: LastPrune | null;
  };
}

export interface StorageMaintenanceOptions {
  db: Database;
  /** The SQLite file (its size and its -wal's are reported). */
  dbPath: string;
  state: AgentState;
  disk: DiskWatch;
  settings: Pick<AgentConfig, 'retention' | 'disk'>;
  clock: Clock;
  /**
   * Whether `clock` agrees with the platform's now (CorrectedClock.synced): only then are stamps beyond it moved back
   * to it (Retention.settleFutureStamps). Without it they wait for the clock to reach them.
   */
  clockSynced?: () => boolean;
  /** The steady clock (default `performance.now()`): `prune_interval_ms` is measured on it, never on `clock`. */
  monotonic?: MonotonicClock;
  logger: Logger;
  sleep?: Sleep;
}

/**
 * The storage loop of the agent: every `disk.check_interval_ms` it reads the free space; every
 * `retention.prune_interval_ms` (and at every check while the disk is low or full) it removes what retention lets go,
 * a small transaction at a time with the event loop free between them (the scheduler logs plays meanwhile), gives the
 * freed pages back a few at a time, checkpoints the WAL, and runs the one VACUUM an older file needs when it may.
 */
export class StorageMaintenance {
  readonly retention: Retention;
  /** Steady time of the last pass: a clock set back a year must not hold the next pass back a year. */
  private lastPruneSteadyMs: number | null = null;
  private readonly monotonic: MonotonicClock;
  private vacuumPostponedLogged = false;
  private readonly sleep: Sleep;

  constructor(private readonly options: StorageMaintenanceOptions) {
    this.retention = new Retention(options.db);
    this.sleep = options.sleep ?? realSleep;
    this.monotonic = options.monotonic ?? systemMonotonic;
  }

  /** Reads the free space now (DiskWatch listeners hear of a change of state). */
  checkDisk(): Promise<DiskReport> {
    return this.options.disk.check();
  }

  async run(signal: AbortSignal): Promise<void> {
    const { disk, settings, logger } = this.options;
    while (!signal.aborted) {
      try {
        await disk.check();
        const steadyMs = this.monotonic();
        const pressure = disk.state !== 'ok';
        if (
          pressure ||
          this.lastPruneSteadyMs === null ||
          steadyMs - this.lastPruneSteadyMs >= settings.retention.pruneIntervalMs
        ) {
          const pass = await this.prunePass(signal);
          this.lastPruneSteadyMs = steadyMs;
          // Space given back under pressure: look again at once, so the screen resumes without waiting a round.
          if (pressure && pass.bytes_freed > 0) await disk.check();
        }
      } catch (error) {
        // The disk itself may be what fails: report it and go on; the next round tries again.
        logger.error({ err: error }, 'storage maintenance failed; trying again at the next check');
      }
      await this.sleep(settings.disk.checkIntervalMs, signal);
    }
  }

  /**
   * One retention pass: removes what is due in small transactions, yielding between them, then gives the freed pages
   * back (incremental vacuum, a step at a time) and checkpoints the WAL. Under disk pressure answered history goes
   * once a day old ({@link PRESSURE_KEEP_ACKNOWLEDGED_MS}).
   */
  async prunePass(signal?: AbortSignal): Promise<LastPrune> {
    const { disk, settings, clock, logger, state } = this.options;
    const retention = this.retention;
    const now = clock.now();
    const pressure = disk.state !== 'ok';
    const keepMs = pressure
      ? Math.min(settings.retention.keepAcknowledgedMs, PRESSURE_KEEP_ACKNOWLEDGED_MS)
      : settings.retention.keepAcknowledgedMs;
    const policy = {
      acknowledgedBefore: new Date(now.getTime() - keepMs),
      setAsideBefore: new Date(now.getTime() - settings.retention.keepSetAsideMs),
    };
    await this.settleFutureStamps(now, signal);
    let batches = 0;
    let records = 0;
    for (;;) {
      if (signal?.aborted) break;
      const chunk = retention.pruneChunk(policy);
      batches += chunk.batches;
      records += chunk.records;
      if (!chunk.more) break;
      await this.yieldNow(signal);
    }
    const pageSize = this.options.db.pragma('page_size', { simple: true }) as number;
    let pagesFreed = 0;
    while (!signal?.aborted && retention.autoVacuum() === 'incremental' && retention.freePages() > 0) {
      const freed = retention.vacuumStep();
      if (freed <= 0) break;
      pagesFreed += freed;
      await this.yieldNow(signal);
    }
    retention.checkpoint();
    if (!signal?.aborted) this.maybeVacuumOnce();
    const result: LastPrune = {
      at: rfc3339(now),
      batches,
      records,
      bytes_freed: pagesFreed * pageSize,
      under_pressure: pressure,
    };
    state.set(LAST_PRUNE_KEY, result);
    if (batches > 0) {
      logger.info({ ...result }, 'retention: acknowledged batches and their records removed');
    }
    return result;
  }

  /**
   * Stamps of answered and given-up batches beyond the clock, written while it ran ahead, count from now once the clock
   * is synced (see Retention.settleFutureStamps): else a batch answered while the board clock ran a year ahead would be
   * kept a year more after the clock was set back, and a small disk fill meanwhile.
   */
  private async settleFutureStamps(now: Date, signal?: AbortSignal): Promise<void> {
    if (!this.options.clockSynced?.()) return;
    let moved = 0;
    let latest: string | null = null;
    for (;;) {
      if (signal?.aborted) break;
      const chunk = this.retention.settleFutureStamps(now);
      moved += chunk.batches;
      if (chunk.latest !== null && (latest === null || chunk.latest > latest)) latest = chunk.latest;
      if (!chunk.more) break;
      await this.yieldNow(signal);
    }
    if (moved > 0) {
      this.options.logger.warn(
        { batches: moved, latest_stamp: latest, now: rfc3339(now) },
        'retention: batches stamped after the clock (answered or given up while it ran ahead) are kept from now',
      );
    }
  }

  /**
   * The one VACUUM that brings a file made before migration 5 under incremental vacuum: only when the live data is
   * small enough that the agent's thread is held a few seconds at most ({@link VACUUM_ONCE_MAX_LIVE_BYTES}), and the
   * disk has room for the copies it makes (twice the live data) above the hard threshold. Else later: meanwhile freed
   * pages are reused, so the file does not grow, it only does not shrink. A failure (SQLITE_FULL) changes nothing.
   */
  maybeVacuumOnce(): 'incremental' | 'postponed' | 'failed' {
    const { disk, logger } = this.options;
    const retention = this.retention;
    if (retention.autoVacuum() === 'incremental') return 'incremental';
    const live = retention.liveBytes();
    const free = disk.report()?.freeBytes ?? null;
    const room = free === null || free - 2 * live >= disk.thresholds.hardFreeBytes;
    if (live > VACUUM_ONCE_MAX_LIVE_BYTES || !room) {
      if (!this.vacuumPostponedLogged) {
        logger.warn(
          { live_bytes: live, free_bytes: free, max_live_bytes: VACUUM_ONCE_MAX_LIVE_BYTES },
          'incremental vacuum not turned on yet (the file is too large or the disk too full for its one VACUUM); freed pages are reused meanwhile',
        );
        this.vacuumPostponedLogged = true;
      }
      return 'postponed';
    }
    const began = performance.now();
    try {
      retention.vacuumOnce();
      this.options.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch (error) {
      logger.warn(
        { err: error },
        'the VACUUM that turns on incremental vacuum failed; nothing changed, trying later',
      );
      return 'failed';
    }
    logger.info(
      { live_bytes: live, ms: Math.round(performance.now() - began) },
      'database file now under incremental vacuum (its one VACUUM done)',
    );
    return 'incremental';
  }

  status(): StorageStatus {
    return storageStatus({
      db: this.options.db,
      dbPath: this.options.dbPath,
      settings: this.options.settings,
      disk: this.options.disk.report(),
      now: this.options.clock.now(),
      lastPrune: this.options.state.get<LastPrune>(LAST_PRUNE_KEY) ?? null,
    });
  }

  private async yieldNow(signal?: AbortSignal): Promise<void> {
    // Lets every other task of the agent run between two transactions (a zero wait on the agent's own sleep).
    await this.sleep(0, signal);
  }
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** The storage part of `agent status`, from the database and the last disk check (null: not checked). */
export function storageStatus(args: {
  db: Database;
  dbPath: string;
  settings: Pick<AgentConfig, 'retention' | 'disk'>;
  disk: DiskReport | null;
  now: Date;
  lastPrune: LastPrune | null;
}): StorageStatus {
  const retention = new Retention(args.db);
  const oldest = retention.oldestUnacknowledged();
  const disk = args.disk;
  return {
    database: {
      file_bytes: fileSize(args.dbPath),
      wal_bytes: fileSize(`${args.dbPath}-wal`),
      vacuum: retention.autoVacuum() === 'incremental' ? 'incremental' : 'pending',
    },
    disk: {
      state: disk?.state ?? 'unknown',
      free_bytes: disk?.freeBytes ?? null,
      warn_free_bytes: args.settings.disk.warnFreeBytes,
      hard_free_bytes: args.settings.disk.hardFreeBytes,
      volumes: (disk?.volumes ?? []).map((v) => ({
        name: v.name,
        path: v.path,
        free_bytes: v.freeBytes,
        total_bytes: v.totalBytes,
        ...(v.error ? { error: v.error } : {}),
      })),
      checked_at: disk?.checkedAt ?? null,
      write_failure: disk?.writeFailure ?? null,
    },
    oldest_unacknowledged: oldest
      ? {
          seq: oldest.seq,
          logged_at: oldest.loggedAt,
          age_seconds: Math.max(0, Math.floor((args.now.getTime() - Date.parse(oldest.loggedAt)) / 1000)),
        }
      : null,
    retention: {
      keep_acknowledged_ms: args.settings.retention.keepAcknowledgedMs,
      keep_set_aside_ms: args.settings.retention.keepSetAsideMs,
      kept: retention.kept(),
      last_prune: args.lastPrune,
    },
  };
}
