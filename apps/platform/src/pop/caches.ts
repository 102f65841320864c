import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import { GROUP_COMMIT_DEFAULTS, GroupCommitter } from './group-commit.js';
import { DeviceLookupBatcher } from './lookup.js';

/**
 * What proof of play keeps between requests, one per platform (ctx.caches.pop): the agent channels' shared reading
 * query with the approvals' facts it keeps by version, the group committer of agent batches, and the month partitions
 * of pop_records known to exist. Each batch sees the database as its query or group found it (a kept approval is
 * used only at the version its query read); the batcher and the committer hold the work of the requests in flight,
 * which have all been answered once the listeners are closed.
 */
export class PopCaches {
  readonly lookups: DeviceLookupBatcher;
  readonly committer: GroupCommitter;
  /** Month partitions of pop_records known to exist (they are never dropped while the platform runs). */
  readonly partitions = new Set<string>();

  constructor(ctx: { db: Db; log?: Pick<Logger, 'debug' | 'warn'> }) {
    this.lookups = new DeviceLookupBatcher(ctx.db);
    this.committer = new GroupCommitter(ctx.db, GROUP_COMMIT_DEFAULTS, (error) => {
      // A mark moved by another instance is expected now and then, and so is a receive day sealed while a group was
      // on its way (around midnight); anything else is worth a look.
      const code = (error as { code?: string }).code;
      if (code === 'PHWM1' || code === 'PSEAL') ctx.log?.debug({ err: error }, 'pop group rolled back');
      else ctx.log?.warn({ err: error }, 'pop group rolled back; its batches are stored one by one');
    });
  }

  clear(): void {
    this.partitions.clear();
    this.lookups.approvals.clear();
  }
}
