import type { Db } from '../db/pool.js';
import { ApprovalCache } from './approval-cache.js';
import { type DeviceForTelemetry, type DeviceLookup, findDevicesForTelemetry } from './batch-context.js';

/*
 * The agent channels' reading query, shared by the batches that arrive together (docs/decisions.md "Proof of
 * play: ingestion at speed"): lookups asked while a query is running wait for the next one, which answers all of
 * them in one query and reads the approvals they name once. Under light load a query holds one lookup and
 * nothing waits. Each batch still gets what the database held when its query ran: the approvals' facts are kept
 * between queries (`approvals`), but used only at the version the query read (approval-cache.ts).
 */

interface Pending {
  lookup: DeviceLookup;
  resolve: (device: DeviceForTelemetry | null) => void;
  reject: (error: unknown) => void;
}

export class DeviceLookupBatcher {
  private queue: Pending[] = [];
  private running = 0;
  private scheduled = false;
  /** The facts of the approvals batches named, by version. */
  readonly approvals = new ApprovalCache();

  constructor(
    private readonly db: Db,
    private readonly options: { concurrency: number; maxLookups: number } = {
      concurrency: 2,
      maxLookups: 256,
    },
  ) {}

  find(lookup: DeviceLookup): Promise<DeviceForTelemetry | null> {
    return new Promise((resolve, reject) => {
      this.queue.push({ lookup, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.running >= this.options.concurrency) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.running < this.options.concurrency && this.queue.length > 0) {
      const taken = this.queue.splice(0, this.options.maxLookups);
      this.running += 1;
      void findDevicesForTelemetry(
        this.db,
        taken.map((p) => p.lookup),
        this.approvals,
      )
        .then(
          (devices) => {
            for (const [i, p] of taken.entries()) p.resolve(devices[i] ?? null);
          },
          (error: unknown) => {
            for (const p of taken) p.reject(error);
          },
        )
        .finally(() => {
          this.running -= 1;
          if (this.queue.length > 0) this.schedule();
        });
    }
  }
}
