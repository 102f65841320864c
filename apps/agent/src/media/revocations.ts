import { existsSync, readFileSync } from 'node:fs';
import {
  compiledCheck,
  RevocationList,
  type RevocationListBody,
  RevocationListBody as BodySchema,
} from '@ooh/protocol';
import { canonicalize, parsePems, type VerificationErrorCode, verifySignedDocument } from '@ooh/verify';
import type { Clock } from '../clock.js';
import { writeFileAtomic } from '../fs/atomic.js';
import { type Logger, silentLogger } from '../logger.js';
import { type HttpClient, isTlsRefusal } from '../net/http-client.js';
import type { RevocationIndex } from './envelope.js';

export type RevocationRefresh =
  | 'updated'
  | 'unchanged'
  | 'older_refused'
  | 'invalid'
  | 'unreachable'
  /** The verify host answered 404: no approval has been revoked yet, so there is no list (a fresh platform). */
  | 'none_published'
  /** Fetched but not judged: the clock cannot be trusted yet (its signature is checked at a date). */
  | 'deferred'
  /**
   * A verified list of the version held but with other contents (a platform restored from a backup, its signer
   * misused): an error, logged and shown by `agent status`; every approval either list names is revoked.
   */
  | 'conflict';

export type RevocationListCheck =
  | { ok: true; body: RevocationListBody }
  /** `not_a_list`: not JSON, or not of the list's shape; else the code of @ooh/verify that refused it. */
  | { ok: false; code: VerificationErrorCode | 'not_a_list' };

const isListBody = (body: unknown): body is RevocationListBody => compiledCheck(BodySchema).Check(body);

/**
 * Verifies a signed revocation list `{v:1, body:{version, issued_at, revoked}, signature}` (DESIGN.md §4) with
 * @ooh/verify's verifySignedDocument: the CMS verifies against the pinned root with every certificate of its chain
 * valid at `now`, and its content is the canonical JSON of `body`.
 */
export async function verifyRevocationList(
  text: string,
  trustedRootsPem: string[],
  now: Date,
): Promise<RevocationListCheck> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, code: 'not_a_list' };
  }
  if (!compiledCheck(RevocationList).Check(parsed)) return { ok: false, code: 'not_a_list' };
  let roots: ReturnType<typeof parsePems>;
  try {
    roots = parsePems(trustedRootsPem);
  } catch {
    return { ok: false, code: 'malformed' };
  }
  // Revocation lists are signed by the envelope signer, never the seal signer (@ooh/verify signer-role.ts).
  const result = await verifySignedDocument(text, isListBody, roots, now, 'envelope');
  return result.ok ? { ok: true, body: result.body } : { ok: false, code: result.error.code };
}

export interface RevocationStoreOptions {
  /** File where the last verified list is kept (its signed form, verified again when read). */
  cachePath: string;
  /**
   * File of the other verified lists still needed (signed forms, verified again when read): those naming an approval
   * the newest does not, and one of the newest's version with other contents. Default: beside cachePath,
   * `<name>.kept.json`.
   */
  keptPath?: string;
  trustedRootsPem: string[];
  clock: Clock;
  logger: Logger;
  http?: HttpClient;
  /** `{verify_url}`; the list is at `{verify_url}/v1/revocations.json`. */
  verifyUrl?: string;
  /** False while the clock is implausible: a list is then neither judged nor refused, only kept for later. */
  clockTrusted?: () => boolean;
}

/** A list verified, with its signed text (what is kept on disk) and its canonical body (what identifies it). */
interface HeldList {
  text: string;
  body: RevocationListBody;
  canonical: string;
}

/** Two verified lists of one version with different contents: both are held, and this says so. */
export interface RevocationConflict {
  version: number;
  /** Approvals named by one of the lists and not by the other, sorted. */
  differing: string[];
}

const KEPT_FORMAT = 'ooh-agent-revocation-lists/1';

const namesOf = (list: HeldList) => list.body.revoked.map((entry) => entry.approval_number);

/**
 * The revocation list: fetched from the verify host, signature checked, cached on disk, refreshed
 * periodically by the agent. A list with a lower version than the one held is refused (no rollback).
 *
 * A revocation is never undone: DESIGN.md §4 and the spec know no way to lift one (each list names every approval
 * revoked), so an approval named by any list this player has verified stays revoked, whatever a list verified
 * later says. A newer list that lacks one, or a list of the held version with other contents, can only come from a
 * platform that lost what it had published (restored from a backup; audit I, finding 3). The lists that still name
 * something the newest does not are kept beside it (keptPath), so the union survives a restart; a same-version
 * list with other contents is also an error (the log, `conflict`, `agent status` exit 1) for as long as that
 * version is the newest held.
 */
export class RevocationStore implements RevocationIndex {
  /** The newest list held (highest version; of two with the same version, the first verified). */
  private newest: HeldList | null = null;
  /** The other lists still needed (see the class comment). */
  private kept: HeldList[] = [];
  private revoked = new Set<string>();
  private readonly listeners = new Set<() => void>();
  /** The 404 of a platform without a list is said once (at info), not every refresh. */
  private noneNoted = false;

  constructor(private readonly options: RevocationStoreOptions) {}

  get version(): number | null {
    return this.newest?.body.version ?? null;
  }

  /** A list of the newest version held with other contents, verified too; null when there is none. */
  get conflict(): RevocationConflict | null {
    const newest = this.newest;
    if (!newest) return null;
    const rivals = this.kept.filter((list) => list.body.version === newest.body.version);
    if (rivals.length === 0) return null;
    const all = [newest, ...rivals].map((list) => new Set(namesOf(list)));
    const union = new Set(all.flatMap((names) => [...names]));
    return {
      version: newest.body.version,
      differing: [...union].filter((name) => !all.every((names) => names.has(name))).sort(),
    };
  }

  /**
   * DESIGN.md §9: a file is playable only when "the revocation list does not name it". A name on the list is enough,
   * whatever its revoked_at says against this player's clock: the platform revoked it by its own clock before it
   * signed the list, and a player whose clock runs behind (not synced yet, or offered the list by a technician) would
   * otherwise go on showing a revoked approval until its clock caught up. Any list verified counts, not only the
   * newest (see the class comment).
   */
  isRevoked(approvalNumber: string): boolean {
    return this.revoked.has(approvalNumber);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private get keptPath(): string {
    return this.options.keptPath ?? this.options.cachePath.replace(/(\.json)?$/, '.kept.json');
  }

  /** Reads the cached lists, if any, verifying each again (the disk is not trusted more than the network). */
  async loadCache(): Promise<boolean> {
    const { cachePath, logger } = this.options;
    // A 1970 clock would find the list's signature "not yet valid" and throw a good list away.
    if (this.options.clockTrusted?.() === false) return false;
    const cached = existsSync(cachePath)
      ? await this.verifiedFromDisk(readFileSync(cachePath, 'utf8'), cachePath)
      : null;
    const kept: HeldList[] = [];
    for (const text of this.keptTexts()) {
      const list = await this.verifiedFromDisk(text, this.keptPath);
      if (list) kept.push(list);
    }
    const lists = cached ? [cached, ...kept] : kept;
    if (lists.length === 0) return false;
    // The cache is the newest held; without it (lost, or refused), the highest kept version stands in.
    const newest = cached ?? lists.reduce((a, b) => (b.body.version > a.body.version ? b : a));
    this.hold(
      newest,
      lists.filter((list) => list !== newest),
    );
    const conflict = this.conflict;
    if (conflict) {
      logger.error(
        { version: conflict.version, differing: conflict.differing },
        'two different revocation lists are signed with the version held: every approval either names stays revoked',
      );
    }
    this.changed();
    return cached !== null;
  }

  private keptTexts(): string[] {
    if (!existsSync(this.keptPath)) return [];
    try {
      const file = JSON.parse(readFileSync(this.keptPath, 'utf8')) as { format?: unknown; lists?: unknown };
      if (file.format === KEPT_FORMAT && Array.isArray(file.lists)) {
        return file.lists.filter((text): text is string => typeof text === 'string');
      }
    } catch {
      // Said below, as for a list that does not verify.
    }
    this.options.logger.warn(
      { path: this.keptPath, code: 'not_a_list' },
      'kept revocation lists unreadable; ignored',
    );
    return [];
  }

  private async verifiedFromDisk(text: string, path: string): Promise<HeldList | null> {
    const checked = await verifyRevocationList(text, this.options.trustedRootsPem, this.options.clock.now());
    if (!checked.ok) {
      this.options.logger.warn(
        { path, code: checked.code },
        'cached revocation list does not verify; ignored',
      );
      return null;
    }
    return { text, body: checked.body, canonical: canonicalize(checked.body) };
  }

  async refresh(): Promise<RevocationRefresh> {
    const { http, verifyUrl, logger } = this.options;
    if (!http || !verifyUrl) return 'unreachable';
    let text: string;
    try {
      const response = await http.get(`${verifyUrl.replace(/\/+$/, '')}/v1/revocations.json`);
      if (response.status === 404) {
        // spec: GET /v1/revocations.json is 404 until the first approval is revoked. Nothing is wrong: the agent
        // holds no list and none exists. Said once; after a list was served, a 404 is said once more.
        if (!this.noneNoted) {
          logger.info({}, 'no revocation list published yet (nothing revoked); looking again every refresh');
          this.noneNoted = true;
        }
        return 'none_published';
      }
      if (response.status !== 200) {
        logger.warn({ status: response.status }, 'revocation list not fetched');
        return 'unreachable';
      }
      this.noneNoted = false;
      text = response.body.toString('utf8');
    } catch (error) {
      // A refused server certificate is said once by the transport (net/tls-refusals.ts), not at every refresh.
      if (!isTlsRefusal(error)) logger.warn({ err: error }, 'revocation list not fetched');
      return 'unreachable';
    }
    return this.offer(text);
  }

  /** Considers a signed list from anywhere (the network, a technician's USB stick). */
  async offer(text: string): Promise<RevocationRefresh> {
    const { logger } = this.options;
    if (this.options.clockTrusted?.() === false) return 'deferred';
    const checked = await verifyRevocationList(text, this.options.trustedRootsPem, this.options.clock.now());
    if (!checked.ok) {
      logger.warn({ code: checked.code }, 'revocation list refused: signature or shape invalid');
      return 'invalid';
    }
    const offered: HeldList = { text, body: checked.body, canonical: canonicalize(checked.body) };
    const newest = this.newest;
    const held = newest?.body.version ?? 0;
    const alreadyKept = this.kept.some((list) => list.canonical === offered.canonical);

    if (!newest || offered.body.version > held) {
      const before = new Set(this.revoked);
      this.hold(offered, newest ? [newest, ...this.kept] : this.kept);
      this.persist();
      const stillRevoked = [...before].filter(
        (name) => !offered.body.revoked.some((e) => e.approval_number === name),
      );
      if (stillRevoked.length > 0) {
        // spec and DESIGN §4: each list names every revoked approval, and nothing lifts a revocation.
        logger.warn(
          { version: offered.body.version, held, kept_revoked: stillRevoked.sort() },
          'newer revocation list lacks approvals an earlier list revoked (a platform restored from a backup?); they stay revoked',
        );
      }
      this.changed();
      return 'updated';
    }
    if (offered.body.version === held) {
      if (offered.canonical === newest.canonical) return 'unchanged';
      // "Versions never repeat, so equal versions mean equal facts" (pop-ingestion.md): these two do not.
      if (!alreadyKept) {
        const grows = namesOf(offered).some((name) => !this.revoked.has(name));
        this.hold(newest, [...this.kept, offered]);
        this.persist();
        logger.error(
          { version: held, differing: this.conflict?.differing ?? [] },
          'two different revocation lists are signed with the version held: every approval either names stays revoked',
        );
        if (grows) this.changed();
      }
      return 'conflict';
    }
    const added = namesOf(offered).filter((name) => !this.revoked.has(name));
    if (added.length > 0) {
      // Older, so not held as the list; but what it revoked stays revoked.
      this.hold(newest, [...this.kept, offered]);
      this.persist();
      logger.warn(
        { offered: offered.body.version, held, kept_revoked: added.sort() },
        'older revocation list refused',
      );
      this.changed();
    } else {
      logger.warn({ offered: offered.body.version, held }, 'older revocation list refused');
    }
    return 'older_refused';
  }

  /**
   * Holds `newest` as the list and of `others` those still needed: naming an approval the newest does not, or of
   * its version with other contents (one of each contents).
   */
  private hold(newest: HeldList, others: HeldList[]): void {
    const named = new Set(namesOf(newest));
    const kept: HeldList[] = [];
    for (const list of others) {
      if (list.canonical === newest.canonical || kept.some((k) => k.canonical === list.canonical)) continue;
      if (list.body.version === newest.body.version || namesOf(list).some((name) => !named.has(name))) {
        kept.push(list);
      }
    }
    this.newest = newest;
    this.kept = kept;
    this.revoked = new Set([newest, ...kept].flatMap(namesOf));
  }

  /** The kept lists first: a power cut between the two writes leaves a list in both files, never in neither. */
  private persist(): void {
    if (this.kept.length > 0 || existsSync(this.keptPath)) {
      const file = { format: KEPT_FORMAT, lists: this.kept.map((list) => list.text) };
      writeFileAtomic(this.keptPath, `${JSON.stringify(file)}\n`, 0o644);
    }
    if (this.newest) writeFileAtomic(this.options.cachePath, this.newest.text, 0o644);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

/**
 * For `agent status`, beside a running agent or a stopped one: the conflict between the lists held on disk (each
 * verified again at `now`), if any. Reads only.
 */
export async function heldRevocationConflict(options: {
  cachePath: string;
  trustedRootsPem: string[];
  now: Date;
}): Promise<RevocationConflict | null> {
  const store = new RevocationStore({
    cachePath: options.cachePath,
    trustedRootsPem: options.trustedRootsPem,
    clock: { now: () => options.now },
    logger: silentLogger,
  });
  await store.loadCache();
  return store.conflict;
}
