import { existsSync, readFileSync } from 'node:fs';
import {
  compiledCheck,
  RevocationList,
  type RevocationListBody,
  RevocationListBody as BodySchema,
} from '@ooh/protocol';
import { parsePems, type VerificationErrorCode, verifySignedDocument } from '@ooh/verify';
import type { Clock } from '../clock.js';
import { writeFileAtomic } from '../fs/atomic.js';
import type { Logger } from '../logger.js';
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
  | 'deferred';

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
  const result = await verifySignedDocument(text, isListBody, roots, now);
  return result.ok ? { ok: true, body: result.body } : { ok: false, code: result.error.code };
}

export interface RevocationStoreOptions {
  /** File where the last verified list is kept (its signed form, verified again when read). */
  cachePath: string;
  trustedRootsPem: string[];
  clock: Clock;
  logger: Logger;
  http?: HttpClient;
  /** `{verify_url}`; the list is at `{verify_url}/v1/revocations.json`. */
  verifyUrl?: string;
  /** False while the clock is implausible: a list is then neither judged nor refused, only kept for later. */
  clockTrusted?: () => boolean;
}

/**
 * The revocation list: fetched from the verify host, signature checked, cached on disk, refreshed
 * periodically by the agent. A list with a lower version than the one held is refused (no rollback).
 */
export class RevocationStore implements RevocationIndex {
  private body: RevocationListBody | null = null;
  private revoked = new Set<string>();
  private readonly listeners = new Set<() => void>();
  /** The 404 of a platform without a list is said once (at info), not every refresh. */
  private noneNoted = false;

  constructor(private readonly options: RevocationStoreOptions) {}

  get version(): number | null {
    return this.body?.version ?? null;
  }

  /**
   * DESIGN.md §9: a file is playable only when "the revocation list does not name it". A name on the list is enough,
   * whatever its revoked_at says against this player's clock: the platform revoked it by its own clock before it
   * signed the list, and a player whose clock runs behind (not synced yet, or offered the list by a technician) would
   * otherwise go on showing a revoked approval until its clock caught up.
   */
  isRevoked(approvalNumber: string): boolean {
    return this.revoked.has(approvalNumber);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reads the cached list, if any, verifying it again (the disk is not trusted more than the network). */
  async loadCache(): Promise<boolean> {
    if (!existsSync(this.options.cachePath)) return false;
    // A 1970 clock would find the list's signature "not yet valid" and throw a good list away.
    if (this.options.clockTrusted?.() === false) return false;
    const text = readFileSync(this.options.cachePath, 'utf8');
    const checked = await verifyRevocationList(text, this.options.trustedRootsPem, this.options.clock.now());
    if (!checked.ok) {
      this.options.logger.warn(
        { path: this.options.cachePath, code: checked.code },
        'cached revocation list does not verify; ignored',
      );
      return false;
    }
    this.accept(checked.body);
    return true;
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
    if (this.options.clockTrusted?.() === false) return 'deferred';
    const checked = await verifyRevocationList(text, this.options.trustedRootsPem, this.options.clock.now());
    if (!checked.ok) {
      this.options.logger.warn({ code: checked.code }, 'revocation list refused: signature or shape invalid');
      return 'invalid';
    }
    const body = checked.body;
    const held = this.body?.version ?? 0;
    if (body.version < held) {
      this.options.logger.warn({ offered: body.version, held }, 'older revocation list refused');
      return 'older_refused';
    }
    if (body.version === held) return 'unchanged';
    writeFileAtomic(this.options.cachePath, text, 0o644);
    this.accept(body);
    return 'updated';
  }

  private accept(body: RevocationListBody): void {
    this.body = body;
    this.revoked = new Set(body.revoked.map((entry) => entry.approval_number));
    for (const listener of this.listeners) listener();
  }
}
