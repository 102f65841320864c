import { es256Sign } from '@ooh/crypto';
import { compiledCheck, PopAnswer, type BackoffPolicy, backoffDelayMs, retryAfterMs } from '@ooh/protocol';
import type { CorrectedClock, Sleep } from '../clock.js';
import { realSleep } from '../clock.js';
import type { DeviceCredentials } from '../identity/device-credentials.js';
import type { AgentState } from '../log/agent-state.js';
import { type PlayLog, settleTimesByClock } from '../log/play-log.js';
import { rfc3339 } from '../log/records.js';
import type { Logger } from '../logger.js';
import type { HttpClient, HttpResponse, TlsIdentity } from '../net/http-client.js';
import { isTlsRefusal, problemCode } from '../net/http-client.js';

import type { BatchStore, StoredBatch } from './batch-store.js';

export type Channel = 'signed' | 'certificate';

/**
 * Answers that retrying cannot fix: the same bytes would get the same refusal (DESIGN.md §9: "terminal
 * answers ... stop and alert instead of looping").
 */
const TERMINAL_CODES = new Set([
  'device_unauthorized',
  'batch_conflict',
  'legacy_after_pop',
  'bad_signature',
  'invalid_json',
  'schema_unknown',
  'body_too_large',
  'batch_too_large',
  'unsupported_media_type',
  'validation_failed',
]);

/** After this many stale_request answers in a row the re-sign waits like any other failure. */
const STALE_IMMEDIATE_RETRIES = 2;

/**
 * A batch answered 5xx this many times is tried against the platform (README "Nothing resent forever"): does the
 * platform take a batch from this device at all (a probe), and then these bytes once more?
 */
export const POISON_AFTER_SERVER_ERRORS = 3;
/**
 * Records set aside one after another without a batch of records taken in between: beyond this the agent sets
 * nothing more aside (a platform that fails every batch of records but takes empty ones would otherwise see the
 * whole log set aside, one record at a time) and stays stuck, reported, until a batch of records is taken.
 */
export const MAX_SET_ASIDE_WITHOUT_PROGRESS = 3;
/** A pending batch whose sends failed this many times in a row is shown as stuck (`agent status`, exit 1). */
export const STUCK_AFTER_FAILURES = 3;

export type SendOutcome =
  | { kind: 'idle' }
  | { kind: 'answered'; batchSeq: number; answer: PopAnswer; channel: Channel }
  | { kind: 'retry'; batchSeq: number; delayMs: number; reason: string }
  | { kind: 'terminal'; batchSeq: number; code: string; status: number };

export interface ShippingAlert {
  code: string;
  status: number;
  batch_seq: number;
  at: string;
}

/** The oldest batch still to be answered, when its sends keep failing (STUCK_AFTER_FAILURES). */
export interface StuckBatch {
  batch_seq: number;
  records: number;
  /** First failed send of the batch (RFC 3339). */
  since: string;
  /** Sends of the batch, failed ones (of which answered 5xx). */
  attempts: number;
  failures: number;
  server_errors: number;
  /** What the last failed send got: `http 500 internal_error`, `network: ...`. */
  last_answer: string | null;
}

/** Records the platform could not take while it took others: how many, and the newest few. */
export interface SetAsideStatus {
  records: number;
  newest: { seq: number; kind: string; logged_at: string; set_aside_at: string; reason: string }[];
}

export interface ShippingStatus {
  state: 'idle' | 'sending' | 'backing_off' | 'stopped' | 'not_running';
  lastSend: { at: string; batch_seq: number } | null;
  alert: ShippingAlert | null;
  consecutiveFailures: number;
  stuck: StuckBatch | null;
  setAside: SetAsideStatus;
}

/** The stuck batch and the records set aside, as the agent's database holds them (also for `agent status`). */
export function shippingTrouble(batches: BatchStore): { stuck: StuckBatch | null; setAside: SetAsideStatus } {
  const pending = batches.pending();
  const setAside = batches.setAsideRecords();
  return {
    stuck:
      pending && pending.failures >= STUCK_AFTER_FAILURES
        ? {
            batch_seq: pending.batchSeq,
            records: pending.eventCount,
            since: pending.firstFailedAt ?? pending.sentAt,
            attempts: pending.attempts,
            failures: pending.failures,
            server_errors: pending.serverErrors,
            last_answer: pending.lastFailure,
          }
        : null,
    setAside: {
      records: setAside.count,
      newest: setAside.newest.map((r) => ({
        seq: r.seq,
        kind: r.kind,
        logged_at: r.loggedAt,
        set_aside_at: r.setAsideAt,
        reason: r.reason,
      })),
    },
  };
}

export interface ShipperOptions {
  batches: BatchStore;
  state: AgentState;
  http: HttpClient;
  credentials: DeviceCredentials;
  clock: CorrectedClock;
  deviceId: string;
  agentsUrl: string;
  devicesUrl: string;
  backoff: BackoffPolicy;
  /** Pause between two answered batches when more is queued (spec: one batch every 10 s, burst 3). */
  minIntervalMs: number;
  /**
   * Pause when nothing is queued before looking again, counted from the last call the platform answered: a record
   * queued meanwhile waits at most this long, and the next batch finds the connection of the last one still open (the
   * platform keeps an idle one 72 s), so it costs no new TLS handshake on either side.
   */
  idleIntervalMs: number;
  logger: Logger;
  random?: () => number;
  sleep?: Sleep;
  maxEvents?: number;
  /** Called whenever shipping reaches the platform or fails to (for the offline display mode). */
  onReachability?: (reachable: boolean) => void;
  /**
   * The play log and this agent run (see PlayLog ClockStamp): records logged while the clock was not synced
   * are not cut into a batch before their times are settled. Without them, records are cut as they are.
   */
  clockRun?: { log: PlayLog; run: string };
}

export const SEND_STATE_KEY = 'shipping.last_send';
export const ALERT_STATE_KEY = 'shipping.alert';
/** The batch_seq whose last answer was stale_request: its ts is taken afresh when it is next sent. */
export const STALE_STATE_KEY = 'shipping.stale_batch';
/**
 * Records [from, to] hold one the platform cannot take: the next batch starting at `from` takes at most `take` of
 * them (a bisection over records given up by a poison batch).
 */
export const RECUT_STATE_KEY = 'shipping.recut';
/** Records set aside since a batch of records was last taken (MAX_SET_ASIDE_WITHOUT_PROGRESS). */
export const SET_ASIDE_RUN_KEY = 'shipping.set_aside_without_progress';

interface Recut {
  from: number;
  to: number;
  take: number;
}

/**
 * Ships batches in order, one in flight (DESIGN.md §5, §9). `sendOnce` is one step and never sleeps, so
 * tests drive it directly; `run` is the loop around it.
 */
export class Shipper {
  private failures = 0;
  /** When the platform last answered a call of the shipper (steady clock, ms); null before the first. */
  private lastAnsweredMs: number | null = null;
  private staleInARow = 0;
  /** The reason of the last retry logged (retryLater); null after an answered batch. */
  private lastRetryReason: string | null = null;
  private state: ShippingStatus['state'] = 'idle';
  private wakeController: AbortController | null = null;
  private readonly random: () => number;
  private readonly sleep: Sleep;

  constructor(private readonly options: ShipperOptions) {
    this.random = options.random ?? Math.random;
    this.sleep = options.sleep ?? realSleep;
  }

  status(): ShippingStatus {
    return {
      state: this.state,
      lastSend: this.options.state.get<{ at: string; batch_seq: number }>(SEND_STATE_KEY) ?? null,
      alert: this.options.state.get<ShippingAlert>(ALERT_STATE_KEY) ?? null,
      consecutiveFailures: this.failures,
      ...shippingTrouble(this.options.batches),
    };
  }

  /**
   * Cuts short the idle wait (new records were logged, or a test wants the next step now); never the pause after an
   * answered batch (the spec's rate) nor a backoff.
   */
  wake(): void {
    this.wakeController?.abort();
  }

  async sendOnce(): Promise<SendOutcome> {
    const { batches, clock, deviceId, state } = this.options;
    if (!batches.pending()) {
      // A batch's bytes are final once cut: whatever the clock still owes the records goes in first.
      const held = await this.settleRecordTimes();
      if (held) return held;
    }
    const maxEvents = this.cutSize();
    const identity = this.options.credentials.tlsIdentity(clock.now(), this.failures);
    const channel: Channel = identity ? 'certificate' : 'signed';
    // The cut (or the re-sign) and the attempt about to be made: one transaction.
    const batch = batches.inTransaction(() => {
      let found = batches.pendingOrCut({
        deviceId,
        now: clock.now(),
        ...(maxEvents !== undefined ? { maxEvents } : {}),
      });
      if (!found) return null;
      if (state.get<number>(STALE_STATE_KEY) === found.batchSeq) {
        // The platform's last answer for this batch was stale_request, so it stored nothing: the same events
        // are signed again under the same batch_seq with ts read NOW (DESIGN.md §5), not when the answer came,
        // else a backoff longer than the 300 s window made every resend stale again, for ever. The mark goes
        // before the send: if this answer is lost, the next try resends these very bytes, which the platform
        // may hold (a fresh ts then would be another body under the same batch_seq: 409 batch_conflict).
        found = batches.refreshTs(found.batchSeq, deviceId, clock.now());
        state.delete(STALE_STATE_KEY);
      }
      batches.noteAttempt(found.batchSeq, channel);
      return found;
    });
    if (!batch) return { kind: 'idle' };

    const response = await this.send(batch, channel, identity, { attemptNoted: true });
    if (response instanceof Error) return this.retryLater(batch, `network: ${response.message}`);
    return this.handleResponse(batch, channel, identity, response);
  }

  /** The size of the next cut: the bisection's while one runs (README "Nothing resent forever"), else the usual. */
  private cutSize(): number | undefined {
    const recut = this.options.state.get<Recut>(RECUT_STATE_KEY);
    const usual = this.options.maxEvents;
    if (!recut) return usual;
    return usual === undefined ? recut.take : Math.min(usual, recut.take);
  }

  /** One send of a batch's bytes; the answer, or the network error. Notes the attempt and the platform's Date. */
  private async send(
    batch: StoredBatch,
    channel: Channel,
    identity: TlsIdentity | null,
    { attemptNoted = false } = {},
  ): Promise<HttpResponse | Error> {
    const { batches, clock } = this.options;
    if (!attemptNoted) batches.noteAttempt(batch.batchSeq, channel);
    const sentAt = clock.baseNow();
    let response: HttpResponse;
    try {
      response = await this.post(batch, channel, identity);
    } catch (error) {
      this.options.onReachability?.(false);
      if (batch.eventCount > 0) {
        batches.noteFailure(batch.batchSeq, {
          at: clock.now(),
          serverError: false,
          what: `network: ${(error as Error).message}`,
        });
      }
      return error as Error;
    }
    clock.observeServerDate(response.headers['date'], sentAt, clock.baseNow());
    this.lastAnsweredMs = clock.monotonicMs();
    this.options.onReachability?.(true);
    return response;
  }

  /** Sends until stopped; stops by itself on a terminal answer (after alerting). */
  async run(signal: AbortSignal): Promise<void> {
    const alert = this.options.state.get<ShippingAlert>(ALERT_STATE_KEY);
    if (alert) {
      this.options.logger.warn(
        { alert },
        'shipping was stopped by a terminal answer before this start; trying once more',
      );
    }
    while (!signal.aborted) {
      this.state = 'sending';
      let outcome: SendOutcome;
      try {
        outcome = await this.sendOnce();
      } catch (error) {
        // A local fault (e.g. the disk): report it and wait like any other failure rather than spin.
        this.options.logger.error({ err: error }, 'shipping step failed');
        this.failures++;
        outcome = {
          kind: 'retry',
          batchSeq: 0,
          delayMs: backoffDelayMs(this.options.backoff, this.failures, this.random),
          reason: 'local',
        };
      }
      if (outcome.kind === 'terminal') {
        this.state = 'stopped';
        return;
      }
      let waitMs: number;
      if (outcome.kind === 'idle') {
        this.state = 'idle';
        waitMs = this.idleWaitMs();
      } else if (outcome.kind === 'answered') {
        waitMs = this.options.minIntervalMs;
      } else {
        this.state = 'backing_off';
        waitMs = outcome.delayMs;
      }
      // Only the idle pause may be cut short by wake(): the pause after an answered batch is the spec's rate ("429 for
      // more than one batch every 10 seconds"), which a burst of wakes (a tamper switch that flaps) must not shorten.
      await this.wait(waitMs, signal, outcome.kind === 'idle');
    }
    this.state = 'idle';
  }

  /**
   * The idle pause: what is left of idle_interval since the platform last answered (see idleIntervalMs), or all of it
   * when that is longer ago. After a batch, min_interval, then an empty look: the next look comes idle_interval after
   * the batch, not min_interval + idle_interval (70 s with the defaults: just past the platform's keep-alive).
   */
  private idleWaitMs(): number {
    const idleMs = this.options.idleIntervalMs;
    if (this.lastAnsweredMs === null) return idleMs;
    const sinceMs = this.options.clock.monotonicMs() - this.lastAnsweredMs;
    return sinceMs >= 0 && sinceMs < idleMs ? idleMs - sinceMs : idleMs;
  }

  private async wait(ms: number, signal: AbortSignal, wakeable: boolean): Promise<void> {
    // Stopped during the step: no wait (a listener on an aborted signal would never fire).
    if (signal.aborted) return;
    if (ms <= 0) {
      // Let I/O run between steps even without a pause (an idle loop must never starve the event loop).
      await new Promise<void>((resolve) => setImmediate(resolve));
      return;
    }
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    if (wakeable) this.wakeController = controller;
    try {
      await this.sleep(ms, controller.signal);
    } finally {
      signal.removeEventListener('abort', onAbort);
      if (this.wakeController === controller) this.wakeController = null;
    }
  }

  private async post(
    batch: StoredBatch,
    channel: Channel,
    identity: TlsIdentity | null,
  ): Promise<HttpResponse> {
    const { http, credentials } = this.options;
    if (channel === 'certificate' && identity) {
      // DESIGN.md §5: "the client certificate identifies the device, so no signature header ... needed".
      return http.post(
        `${trimSlash(this.options.devicesUrl)}/d/v1/telemetry`,
        batch.body,
        { 'content-type': 'application/json' },
        identity,
      );
    }
    return http.post(`${trimSlash(this.options.agentsUrl)}/s/v1/telemetry`, batch.body, {
      'content-type': 'application/json',
      // spec: "ES256 signature of the exact bytes of the body"
      'x-service-signature': es256Sign(credentials.signingKey(), batch.body),
    });
  }

  private async handleResponse(
    batch: StoredBatch,
    channel: Channel,
    identity: TlsIdentity | null,
    response: HttpResponse,
    afterProbe = false,
    earlierSigning = false,
  ): Promise<SendOutcome> {
    const { batches, state, clock, logger } = this.options;
    if (response.status === 200) {
      const answer = readAnswer(response.body, batch);
      if (typeof answer === 'string') {
        // Never taken on an answer that cannot be read as the spec's: the records stay unsent, the same bytes go
        // again after a backoff (a platform that did store them answers the resend duplicate: true).
        batches.noteFailure(batch.batchSeq, { at: clock.now(), serverError: false, what: 'answer_invalid' });
        return this.retryLater(batch, 'answer_invalid', answer);
      }
      // Records count as sent only now, after the answer is stored; what the answer moves is stored with it.
      batches.inTransaction(() => {
        // An earlier signing answered: its bytes are what the platform holds, and what the next prev_sha256 names.
        if (earlierSigning) batches.restoreSigning(batch.batchSeq, batch, clock.now());
        batches.storeAnswer(batch.batchSeq, response.body.toString('utf8'), clock.now());
        state.set(SEND_STATE_KEY, { at: rfc3339(clock.now()), batch_seq: batch.batchSeq });
        state.delete(ALERT_STATE_KEY);
        this.afterTaken(batch);
      });
      this.options.credentials.confirm(identity);
      this.failures = 0;
      this.staleInARow = 0;
      this.lastRetryReason = null;
      return { kind: 'answered', batchSeq: batch.batchSeq, answer, channel };
    }

    const code = problemCode(response);
    const what = `http ${response.status}${code ? ` ${code}` : ''}`;
    if (response.status === 503) {
      // "Service unavailable": the platform (or a proxy before it) cannot serve now, whatever it is sent (its database
      // restarting, its disk full). Never the batch's fault, even right after a probe was taken: a disk full for the
      // rows of records still takes an empty probe, and proving the batch poison then would set records aside for
      // good. Resent as it is, after the Retry-After asked for, within the agent's backoff.
      batches.noteFailure(batch.batchSeq, { at: clock.now(), serverError: true, what });
      const outcome = this.retryLater(batch, what);
      return outcome.kind === 'retry'
        ? { ...outcome, delayMs: this.retryAfterDelayMs(response.headers['retry-after']) }
        : outcome;
    }
    if (response.status >= 500 && response.status <= 599) {
      const failed = batches.noteFailure(batch.batchSeq, { at: clock.now(), serverError: true, what });
      // Nothing resent forever (README): a batch the platform keeps failing while it takes other batches from this
      // device is cut again, down to the record(s) it cannot take. afterProbe: this very send came right after a
      // probe the platform took.
      if (afterProbe) return this.poisonProven(failed, what);
      if (failed.serverErrors >= POISON_AFTER_SERVER_ERRORS) return this.tryPoison(failed, channel, identity);
      return this.retryLater(batch, what);
    }
    batches.noteFailure(batch.batchSeq, { at: clock.now(), serverError: false, what });
    if (response.status === 429) {
      // spec: "429 rate_limited ... Retry-After gives seconds to wait; on the agent channel resend the same bytes"
      this.failures++;
      return {
        kind: 'retry',
        batchSeq: batch.batchSeq,
        delayMs: this.retryAfterDelayMs(response.headers['retry-after']),
        reason: 'rate_limited',
      };
    }
    if (response.status === 401 && code === 'stale_request') {
      // DESIGN.md §5: "re-signs the same events under the same batch_seq with a fresh ts": at the next send
      // (sendOnce), with the clock already corrected from the Date header of this very answer.
      state.set(STALE_STATE_KEY, batch.batchSeq);
      this.staleInARow++;
      logger.warn(
        { batch_seq: batch.batchSeq, clock_offset_ms: clock.offset },
        'stale_request: will re-sign with a fresh ts',
      );
      if (this.staleInARow <= STALE_IMMEDIATE_RETRIES) {
        return { kind: 'retry', batchSeq: batch.batchSeq, delayMs: 0, reason: 'stale_request' };
      }
      return this.retryLater(batch, 'stale_request');
    }
    if (response.status === 409 && code === 'batch_conflict' && !earlierSigning) {
      const held = await this.sendEarlierSignings(batch, channel, identity);
      if (held) return held;
    }
    if (code !== undefined && TERMINAL_CODES.has(code)) {
      const alert: ShippingAlert = {
        code,
        status: response.status,
        batch_seq: batch.batchSeq,
        at: rfc3339(clock.now()),
      };
      batches.markTerminal(batch.batchSeq, code);
      state.set(ALERT_STATE_KEY, alert);
      logger.error({ alert, channel }, 'shipping stopped: the platform refused the batch for good');
      return { kind: 'terminal', batchSeq: batch.batchSeq, code, status: response.status };
    }
    return this.retryLater(batch, what);
  }

  /**
   * 409 batch_conflict for a batch re-signed after stale_request: the platform may hold one of its earlier signings,
   * a send whose answer was lost and which committed only after a later send was answered stale_request (a platform
   * slower than the 300 s window). Each is sent again, newest first; the platform answers the one it holds with its
   * stored answer (duplicate: true; idempotency is judged before freshness, DESIGN.md §5), which is taken as the
   * batch's answer. Null when it holds none of them: the conflict stands, and stops shipping as before.
   */
  private async sendEarlierSignings(
    batch: StoredBatch,
    channel: Channel,
    identity: TlsIdentity | null,
  ): Promise<SendOutcome | null> {
    const { batches, logger } = this.options;
    for (const signing of batches.earlierSignings(batch.batchSeq)) {
      const response = await this.send(signing, channel, identity);
      if (response instanceof Error) return this.retryLater(batch, `network: ${response.message}`);
      const code = problemCode(response);
      // Not what it holds. (stale_request: it holds no batch under this number at all, so none of these.)
      if ((response.status === 409 && code === 'batch_conflict') || code === 'stale_request') continue;
      if (response.status === 200) {
        logger.warn(
          {
            batch_seq: batch.batchSeq,
            body_sha256: signing.bodySha256,
            replaced_body_sha256: batch.bodySha256,
          },
          'batch_conflict: the platform holds an earlier signing of this batch (sent before a stale_request); ' +
            'its answer is taken',
        );
      }
      return this.handleResponse(signing, channel, identity, response, false, true);
    }
    return null;
  }

  /**
   * A batch answered 5xx POISON_AFTER_SERVER_ERRORS times: is it the platform (an outage: wait, resend, never drop
   * or reorder) or this batch (a poison batch)? The platform demonstrably works if it takes a batch from this very
   * device, by the same channel, just now: a probe, a batch of no records under a new batch_seq (nothing counted, no
   * record's seq moved). Then these bytes once more, at once: a 5xx now is the batch's own doing.
   */
  private async tryPoison(
    batch: StoredBatch,
    channel: Channel,
    identity: TlsIdentity | null,
  ): Promise<SendOutcome> {
    const { batches, clock, logger, deviceId } = this.options;
    const probe = batches.cutProbe(deviceId, clock.now());
    const answer = await this.send(probe, channel, identity);
    const taken =
      !(answer instanceof Error) &&
      answer.status === 200 &&
      typeof readAnswer(answer.body, probe) !== 'string';
    if (!taken) {
      batches.abandonProbe(probe.batchSeq, clock.now());
      const got = answer instanceof Error ? `network: ${answer.message}` : `http ${answer.status}`;
      logger.warn(
        { batch_seq: batch.batchSeq, probe_batch_seq: probe.batchSeq, probe: got },
        'the platform takes no batch from this device: an outage, not this batch; resending it as it is',
      );
      return this.retryLater(batch, `outage (probe: ${got})`);
    }
    batches.storeAnswer(probe.batchSeq, (answer as HttpResponse).body.toString('utf8'), clock.now());
    const again = await this.send(batch, channel, identity);
    if (again instanceof Error) return this.retryLater(batch, `network: ${again.message}`);
    return this.handleResponse(batch, channel, identity, again, true);
  }

  /**
   * The platform took a probe from this device and then failed this batch again: the batch is one it cannot take.
   * More than one record: given up and its records cut again, the first half first (a bisection: the records stay in
   * seq order, under new batch_seq numbers, so nothing later goes before them). One record: set aside, kept, reported.
   */
  private poisonProven(batch: StoredBatch, what: string): SendOutcome {
    const { batches, state, clock, logger } = this.options;
    const now = clock.now();
    if (batch.eventCount > 1) {
      const take = Math.ceil(batch.eventCount / 2);
      batches.abandonForRecut(batch.batchSeq, now);
      state.set(RECUT_STATE_KEY, { from: batch.firstSeq, to: batch.lastSeq, take } satisfies Recut);
      logger.warn(
        { batch_seq: batch.batchSeq, first_seq: batch.firstSeq, last_seq: batch.lastSeq, take, answer: what },
        'the platform cannot take this batch while it takes others: cutting its records again, in halves',
      );
      this.failures = 0;
      return { kind: 'retry', batchSeq: batch.batchSeq, delayMs: 0, reason: 'recut' };
    }
    const run = state.get<number>(SET_ASIDE_RUN_KEY) ?? 0;
    if (run >= MAX_SET_ASIDE_WITHOUT_PROGRESS) {
      logger.error(
        { batch_seq: batch.batchSeq, seq: batch.firstSeq, set_aside_without_progress: run, answer: what },
        'the platform cannot take this record either, and no batch of records was taken since the last ones set ' +
          'aside: setting nothing more aside; resending it until the platform takes records again',
      );
      return this.retryLater(batch, what);
    }
    batches.setAside(batch.batchSeq, now, what);
    state.set(SET_ASIDE_RUN_KEY, run + 1);
    state.delete(RECUT_STATE_KEY);
    logger.error(
      { batch_seq: batch.batchSeq, seq: batch.firstSeq, answer: what },
      'record set aside: the platform cannot take it while it takes others; it is kept, and the records after it go on',
    );
    this.failures = 0;
    return { kind: 'retry', batchSeq: batch.batchSeq, delayMs: 0, reason: 'set_aside' };
  }

  /** A batch of records was taken: the bisection moves past it, and records may be set aside again. */
  private afterTaken(batch: StoredBatch): void {
    const { state } = this.options;
    state.delete(SET_ASIDE_RUN_KEY);
    const recut = state.get<Recut>(RECUT_STATE_KEY);
    if (!recut) return;
    if (batch.lastSeq >= recut.to || batch.firstSeq > recut.to) {
      state.delete(RECUT_STATE_KEY);
    } else if (batch.lastSeq >= recut.from) {
      // The first part of the suspect records was taken: the rest holds the one the platform cannot take.
      state.set(RECUT_STATE_KEY, {
        from: batch.lastSeq + 1,
        to: recut.to,
        take: recut.to - batch.lastSeq,
      } satisfies Recut);
    }
  }

  /**
   * The wait a 429 asks for (spec: "Retry-After gives seconds to wait"), within the agent's own bounds: never less
   * than the backoff of this many failures in a row (a `Retry-After: 0`, negative or unreadable, would otherwise
   * resend at once, for ever), never more than `backoff_cap_ms` (a value of years, or a date far ahead, would
   * otherwise stop shipping for as long as Node's longest timer, 24.8 days, and again). The platform's own values
   * (a few seconds) are waited as given.
   */
  private retryAfterDelayMs(header: string | undefined): number {
    const { backoff } = this.options;
    const floor = backoffDelayMs(backoff, this.failures, this.random);
    const asked = retryAfterMs(header, this.options.clock.now());
    if (asked === null || !Number.isFinite(asked)) return floor;
    return Math.min(backoff.capMs, Math.max(floor, asked));
  }

  private retryLater(batch: StoredBatch | null, reason: string, detail?: string): SendOutcome {
    this.failures++;
    const delayMs = backoffDelayMs(this.options.backoff, this.failures, this.random);
    const batchSeq = batch?.batchSeq ?? 0;
    // Said when the reason changes, not at every retry: a week behind a hostile network is one line, not thousands.
    const said = detail === undefined ? reason : `${reason}: ${detail}`;
    if (said !== this.lastRetryReason) {
      this.options.logger.warn(
        { batch_seq: batchSeq, reason, ...(detail === undefined ? {} : { detail }), delay_ms: delayMs },
        batch ? 'batch not answered; will resend' : 'nothing sent; will try again',
      );
      this.lastRetryReason = said;
    }
    return { kind: 'retry', batchSeq, delayMs, reason };
  }

  /**
   * Records logged while the clock was not synced (a board clock 10 minutes fast, before the first Date
   * header) carry times the platform would refuse (time_in_future) or misplace. Before they are cut:
   * - if some are of this run and the clock is not synced, ask the platform for the time (any answer carries
   *   a Date header; see probeClock);
   * - synced: correct them by the steady clock (PlayLog.settleTimes) and go on;
   * - clock implausible (1970): send nothing yet;
   * - otherwise (the platform's Date is beyond max_clock_correction_ms, or its answer came across a step of the
   *   board clock, which refuses it as well): records of this run take the board clock's times by the steady
   *   clock, which are the times they carry unless the board clock was set since (a board in 1970 set right by
   *   NTP while the platform was asked: never ship its 1970 stamps); records of an earlier run, whose steady clock
   *   is gone, keep the times they carry, there are none better.
   * Returns an outcome when nothing may be cut now.
   */
  private async settleRecordTimes(): Promise<SendOutcome | null> {
    const { clockRun, clock, logger } = this.options;
    if (!clockRun) return null;
    const unsettled = clockRun.log.unsettled(clockRun.run);
    if (unsettled.thisRun + unsettled.otherRuns === 0) return null;
    if (unsettled.thisRun > 0 && !clock.synced) {
      if (!(await this.probeClock())) {
        this.options.onReachability?.(false);
        return this.retryLater(null, 'clock probe: network');
      }
      this.options.onReachability?.(true);
    }
    if (clock.synced) {
      const settled = settleTimesByClock(clockRun.log, clockRun.run, clock);
      if (settled.corrected > 0 || settled.asStamped > 0) {
        logger.info({ ...settled }, 'times of records logged before the clock was synced settled');
      }
      return null;
    }
    if (clock.trust() === 'implausible') return this.retryLater(null, 'clock not set');
    const settled = settleTimesByClock(clockRun.log, clockRun.run, clock);
    logger.warn(
      { ...settled, clock_offset_ms: clock.offset },
      "records logged before the clock was synced go with the board clock's times: the platform's time could not be taken",
    );
    return null;
  }

  /**
   * One request to the platform for its Date header; false when it could not be reached. It goes to the very
   * route that will judge the records, by the channel that will carry them: an empty POST, refused at once with
   * nothing stored and no batch_seq taken (the signed channel: 401 bad_signature, the platform wants the signature
   * before it reads a body; the certificate channel: 400 invalid_json). It is the one route every deployment
   * is sure to expose to players, whatever proxy stands in front, and its Date is the clock the platform judges
   * the records by.
   */
  private async probeClock(): Promise<boolean> {
    const { http, credentials, clock } = this.options;
    const identity = credentials.tlsIdentity(clock.now(), this.failures);
    const url = identity
      ? `${trimSlash(this.options.devicesUrl)}/d/v1/telemetry`
      : `${trimSlash(this.options.agentsUrl)}/s/v1/telemetry`;
    const sentAt = clock.baseNow();
    try {
      const response = await http.post(
        url,
        new Uint8Array(0),
        { 'content-type': 'application/json' },
        identity ?? undefined,
      );
      clock.observeServerDate(response.headers['date'], sentAt, clock.baseNow());
      this.lastAnsweredMs = clock.monotonicMs();
      return true;
    } catch (error) {
      // A refused server certificate is said once by the transport (net/tls-refusals.ts), not at every probe.
      if (!isTlsRefusal(error)) this.options.logger.warn({ err: error }, 'platform unreachable for the time');
      return false;
    }
  }
}

/**
 * The platform's answer to `batch`, read as the spec's PopAnswer, or why it cannot be (an answer from a broken
 * platform or from something else on the way: the records then stay unsent and the same bytes go again later).
 * Beyond the schema, what the spec's fields say of each other (and the platform's judge holds,
 * apps/platform/src/pop/judge.ts): it answers this batch_seq; `received` is the records of this body ("Records read
 * from the body"); each record is accepted, a duplicate or refused, and flagged ones are accepted; `items` lists
 * each duplicate, refused or flagged record once, by its position in this body. An answer counting records the
 * batch does not hold (a "counted" larger than the batch) is no answer to it.
 */
export function readAnswer(
  body: Buffer,
  batch: Pick<StoredBatch, 'batchSeq' | 'eventCount'>,
): PopAnswer | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return 'not JSON';
  }
  if (!compiledCheck(PopAnswer).Check(parsed)) return 'not a PopAnswer';
  const answer = parsed;
  if (answer.batch_seq !== batch.batchSeq) return `for batch ${answer.batch_seq}`;
  if (answer.received !== batch.eventCount) {
    return `received ${answer.received} records of a batch of ${batch.eventCount}`;
  }
  if (answer.accepted + answer.duplicates + answer.refused !== answer.received) {
    return 'accepted + duplicates + refused is not received';
  }
  if (answer.flagged > answer.accepted) return 'more flagged than accepted';
  const seen = new Set<number>();
  const byStatus = { duplicate: 0, refused: 0, flagged: 0 };
  for (const item of answer.items) {
    if (item.index >= answer.received || seen.has(item.index)) return `item index ${item.index} out of place`;
    seen.add(item.index);
    byStatus[item.status]++;
  }
  if (
    byStatus.duplicate !== answer.duplicates ||
    byStatus.refused !== answer.refused ||
    byStatus.flagged !== answer.flagged
  ) {
    return 'items disagree with the counts';
  }
  return answer;
}

export function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
