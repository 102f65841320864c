import type { ApprovalFacts } from './judge.js';

/*
 * The facts of the approvals agent batches name, kept by each platform process between lookups (docs/decisions.md,
 * "Approvals' facts are kept between agent lookups, by version"). An entry holds the facts as a lookup read them and
 * the approval's cache_version at that moment (migration 080: a new number from a sequence at every change of the
 * approval or of its structures). The lookup reads the cache_version of every approval it names in its own snapshot and uses an
 * entry only when the versions are equal: each batch is judged by the facts the database held when its query ran,
 * as if nothing were kept, and a revocation takes effect on the next lookup, in every process.
 */

/** An approval covering more structures than this is read for the batch's structures only, and not kept. */
export const KEPT_STRUCTURES_PER_APPROVAL = 5000;

export interface ApprovalCacheLimits {
  /** Entries kept at most (the least recently used go first). */
  maxApprovals: number;
  /** Structure ids kept at most, over all entries. */
  maxStructureIds: number;
}

/**
 * A city's approvals in force, each with the structures it covers (a structure id kept costs about 100 bytes: its
 * 36-character string and its place in a Set, so 500 000 are about 50 MB a process).
 */
export const APPROVAL_CACHE_DEFAULTS: ApprovalCacheLimits = {
  maxApprovals: 20_000,
  maxStructureIds: 500_000,
};

interface Entry {
  version: string;
  facts: ApprovalFacts;
}

export class ApprovalCache {
  /** In order of use: the first is the least recently used. */
  private readonly entries = new Map<string, Entry>();
  private structureIds = 0;

  constructor(private readonly limits: ApprovalCacheLimits = APPROVAL_CACHE_DEFAULTS) {}

  get size(): number {
    return this.entries.size;
  }

  /** Of `numbers`, those that have no entry. */
  missing(numbers: Iterable<string>): string[] {
    const missing: string[] = [];
    for (const number of numbers) if (!this.entries.has(number)) missing.push(number);
    return missing;
  }

  /** The facts kept for `number` if they were read at `version`; undefined otherwise. */
  get(number: string, version: string): ApprovalFacts | undefined {
    const entry = this.entries.get(number);
    if (entry === undefined || entry.version !== version) return undefined;
    // Most recently used: last in the map's order.
    this.entries.delete(number);
    this.entries.set(number, entry);
    return entry.facts;
  }

  /**
   * Keeps `facts`, read at `version`, for `number`. A lookup whose query ran before another's may come back later
   * with older facts: an entry is only ever replaced by a higher version (versions come from one sequence).
   */
  set(number: string, version: string, facts: ApprovalFacts): void {
    const held = this.entries.get(number);
    if (held !== undefined) {
      if (BigInt(held.version) > BigInt(version)) return;
      this.remove(number);
    }
    this.entries.set(number, { version, facts });
    this.structureIds += facts.structureIds.size;
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.limits.maxApprovals && this.structureIds <= this.limits.maxStructureIds)
        break;
      this.remove(oldest);
    }
  }

  /** Forgets `number` (it is no longer in the database). */
  remove(number: string): void {
    const entry = this.entries.get(number);
    if (entry === undefined) return;
    this.entries.delete(number);
    this.structureIds -= entry.facts.structureIds.size;
  }

  clear(): void {
    this.entries.clear();
    this.structureIds = 0;
  }
}
