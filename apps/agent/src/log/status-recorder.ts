import type { Clock } from '../clock.js';
import { AgentError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { PlayLog } from './play-log.js';
import type { StatusInput } from './records.js';

/** What the recorder tells the disk watch (storage/disk.ts DiskWatch): a write refused, and the first one after. */
export interface RecorderDisk {
  noteWriteFailure(what: string): void;
  noteWriteSuccess(): void;
}

export interface StatusRecorderOptions {
  log: PlayLog;
  logger: Logger;
  clock: Clock;
  disk?: RecorderDisk;
}

/** Records kept in memory at most while the log refuses writes; beyond, new ones are counted as lost. */
const MAX_KEPT = 10_000;

interface KeptRecord {
  input: StatusInput;
  since: Date;
}

/**
 * Writes status records that must not be lost: a `tamper` change, reported by the hardware driver, and the reject of a
 * play whose file changed on screen (scheduler.ts). None is lost to a storage fault and no error reaches the caller:
 * a driver's callback must never get the play log's SQLITE_FULL. A record the log refuses for lack of space or an I/O fault is kept in memory, in order,
 * and written before the next one and at every {@link flush} (each playback step, each media recheck, a change of the
 * disk's state), as the plays (scheduler.ts, `unlogged`) and the mode changes (mode.ts, at the next update) are. It
 * has no loop of its own: the simulator tells an agent idle by the number of its loops asleep. The disk counts as full
 * from the refusal until one is written. Only while the process lives: the disk that refused the record cannot take a
 * file of it either.
 */
export class StatusRecorder {
  private kept: KeptRecord[] = [];
  private lost = 0;
  private failing = false;

  constructor(private readonly options: StatusRecorderOptions) {}

  /** Records kept because the log refused them, oldest first. */
  status(): { kind: StatusInput['kind']; at: string; since: string }[] {
    return this.kept.map((k) => ({
      kind: k.input.kind,
      at: k.input.at.toISOString(),
      since: k.since.toISOString(),
    }));
  }

  /**
   * Writes `input` after any record kept earlier, or keeps it. Never throws. True when it is written now (false:
   * kept, or dropped as invalid).
   */
  record(input: StatusInput): boolean {
    if (this.kept.length >= MAX_KEPT) {
      this.lost++;
      this.options.logger.error(
        { kind: input.kind, lost: this.lost },
        'too many records wait for the log: this one is lost',
      );
      return false;
    }
    const entry = { input, since: this.options.clock.now() };
    this.kept.push(entry);
    this.flush();
    return !this.kept.includes(entry);
  }

  /** Writes the kept records, oldest first, as far as the log takes them now. True when none is left. */
  flush(): boolean {
    while (this.kept.length > 0) {
      const pending = this.kept[0]!;
      try {
        this.options.log.appendStatus(pending.input);
      } catch (error) {
        if (error instanceof AgentError && error.code === 'record_invalid') {
          // Never writable: trying again cannot help.
          this.options.logger.error({ err: error, kind: pending.input.kind }, 'a record is invalid: dropped');
          this.kept.shift();
          continue;
        }
        const message = (error as Error).message;
        this.options.disk?.noteWriteFailure(`${pending.input.kind} record: ${message}`);
        if (!this.failing) {
          this.options.logger.error(
            { err: error, kind: pending.input.kind, kept: this.kept.length },
            'a record could not be written: kept, written again as soon as the log takes it',
          );
        }
        this.failing = true;
        return false;
      }
      this.kept.shift();
      if (this.failing || this.kept.length > 0) {
        this.options.logger.info(
          {
            kind: pending.input.kind,
            at: pending.input.at.toISOString(),
            since: pending.since.toISOString(),
          },
          'a record kept while the log refused writes is written now',
        );
      }
    }
    if (this.failing) {
      this.failing = false;
      this.options.disk?.noteWriteSuccess();
      if (this.lost > 0) {
        this.options.logger.error({ lost: this.lost }, 'records were lost while the log refused writes');
        this.lost = 0;
      }
    }
    return true;
  }

  /** Writes what it can at a stop, and names each record it could not: it is lost with the process. */
  close(): void {
    if (this.flush()) return;
    for (const k of this.kept) {
      this.options.logger.error(
        { kind: k.input.kind, at: k.input.at.toISOString(), detail: k.input.detail },
        'stopping with a record the log could not take: it is lost',
      );
    }
    this.kept = [];
  }
}
