import { es256Sign } from '@ooh/crypto';
import { compiledCheck, PopAnswer } from '@ooh/protocol';
import type { CorrectedClock, Sleep } from '../clock.js';
import { realSleep } from '../clock.js';
import type { DeviceCredentials } from '../identity/device-credentials.js';
import type { AgentState } from '../log/agent-state.js';
import { type PlayLog, settleTimesBySyncedClock } from '../log/play-log.js';
import { rfc3339 } from '../log/records.js';
import type { Logger } from '../logger.js';
import type { HttpClient, HttpResponse, TlsIdentity } from '../net/http-client.js';
import { problemCode } from '../net/http-client.js';
import { type BackoffPolicy, backoffDelayMs, retryAfterMs } from './backoff.js';
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

export interface ShippingStatus {
  state: 'idle' | 'sending' | 'backing_off' | 'stopped' | 'not_running';
  lastSend: { at: string; batch_seq: number } | null;
  alert: ShippingAlert | null;
  consecutiveFailures: number;
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
  /** Pause when nothing is queued before looking again (a new record also wakes the loop). */
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
 * Ships batches in order, one in flight (DESIGN.md §5, §9). `sendOnce` is one step and never sleeps, so
 * tests drive it directly; `run` is the loop around it.
 */
export class Shipper {
  private failures = 0;
  private staleInARow = 0;
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
    };
  }

  /** Cuts short an idle or backoff wait (new records were logged, or a test wants the next step now). */
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
    let batch = batches.pendingOrCut({
      deviceId,
      now: clock.now(),
      ...(this.options.maxEvents !== undefined ? { maxEvents: this.options.maxEvents } : {}),
    });
    if (!batch) return { kind: 'idle' };

    if (state.get<number>(STALE_STATE_KEY) === batch.batchSeq) {
      // The platform's last answer for this batch was stale_request, so it stored nothing: the same events
      // are signed again under the same batch_seq with ts read NOW (DESIGN.md §5), not when the answer came,
      // else a backoff longer than the 300 s window made every resend stale again, for ever. The mark goes
      // before the send: if this answer is lost, the next try resends these very bytes, which the platform
      // may hold (a fresh ts then would be another body under the same batch_seq: 409 batch_conflict).
      batch = batches.refreshTs(batch.batchSeq, deviceId, clock.now());
      state.delete(STALE_STATE_KEY);
    }

    const identity = this.options.credentials.tlsIdentity(clock.now(), this.failures);
    const channel: Channel = identity ? 'certificate' : 'signed';
    batches.noteAttempt(batch.batchSeq, channel);

    let response: HttpResponse;
    const sentAt = clock.baseNow();
    try {
      response = await this.post(batch, channel, identity);
    } catch (error) {
      this.options.onReachability?.(false);
      return this.retryLater(batch, `network: ${(error as Error).message}`);
    }
    clock.observeServerDate(response.headers['date'], sentAt, clock.baseNow());
    this.options.onReachability?.(true);
    return this.handleResponse(batch, channel, identity, response);
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
        waitMs = this.options.idleIntervalMs;
      } else if (outcome.kind === 'answered') {
        waitMs = this.options.minIntervalMs;
      } else {
        this.state = 'backing_off';
        waitMs = outcome.delayMs;
      }
      await this.wait(waitMs, signal, outcome.kind !== 'retry');
    }
    this.state = 'idle';
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

  private handleResponse(
    batch: StoredBatch,
    channel: Channel,
    identity: TlsIdentity | null,
    response: HttpResponse,
  ): SendOutcome {
    const { batches, state, clock, logger } = this.options;
    if (response.status === 200) {
      const answer = parseAnswer(response.body);
      if (!answer || answer.batch_seq !== batch.batchSeq) {
        logger.warn({ batch_seq: batch.batchSeq }, 'platform answer unreadable or for another batch');
        return this.retryLater(batch, 'answer_invalid');
      }
      // Records count as sent only now, after the answer is stored.
      batches.storeAnswer(batch.batchSeq, response.body.toString('utf8'), clock.now());
      state.set(SEND_STATE_KEY, { at: rfc3339(clock.now()), batch_seq: batch.batchSeq });
      state.delete(ALERT_STATE_KEY);
      this.options.credentials.confirm(identity);
      this.failures = 0;
      this.staleInARow = 0;
      return { kind: 'answered', batchSeq: batch.batchSeq, answer, channel };
    }

    const code = problemCode(response);
    if (response.status === 429) {
      // spec: "429 rate_limited ... Retry-After gives seconds to wait; on the agent channel resend the same bytes"
      const wait = retryAfterMs(response.headers['retry-after'], clock.now());
      this.failures++;
      return {
        kind: 'retry',
        batchSeq: batch.batchSeq,
        delayMs: wait ?? backoffDelayMs(this.options.backoff, this.failures, this.random),
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
    return this.retryLater(batch, `http ${response.status}${code ? ` ${code}` : ''}`);
  }

  private retryLater(batch: StoredBatch | null, reason: string): SendOutcome {
    this.failures++;
    const delayMs = backoffDelayMs(this.options.backoff, this.failures, this.random);
    const batchSeq = batch?.batchSeq ?? 0;
    this.options.logger.warn(
      { batch_seq: batchSeq, reason, delay_ms: delayMs },
      batch ? 'batch not answered; will resend' : 'nothing sent; will try again',
    );
    return { kind: 'retry', batchSeq, delayMs, reason };
  }

  /**
   * Records logged while the clock was not synced (a board clock 10 minutes fast, before the first Date
   * header) carry times the platform would refuse (time_in_future) or misplace. Before they are cut:
   * - if some are of this run and the clock is not synced, ask the platform for the time (any answer carries
   *   a Date header; see probeClock);
   * - synced: correct them by the steady clock (PlayLog.settleTimes) and go on;
   * - clock implausible (1970): send nothing yet;
   * - otherwise (the platform's Date is beyond max_clock_correction_ms, or they are of an earlier run, whose
   *   steady clock is gone): they keep the times they carry, there are none better.
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
      const settled = settleTimesBySyncedClock(clockRun.log, clockRun.run, clock);
      if (settled.corrected > 0 || settled.asStamped > 0) {
        logger.info({ ...settled }, 'times of records logged before the clock was synced settled');
      }
      return null;
    }
    if (clock.trust() === 'implausible') return this.retryLater(null, 'clock not set');
    const settled = clockRun.log.settleTimes(clockRun.run, null);
    logger.warn(
      { ...settled, clock_offset_ms: clock.offset },
      "records logged before the clock was synced keep their times: the platform's time could not be taken",
    );
    return null;
  }

  /**
   * One request to the platform for its Date header; false when it could not be reached. It goes to the very
   * route that will judge the records, by the channel that will carry them: an empty POST, refused at once
   * (400 invalid_json: nothing read, nothing stored, no batch_seq taken). It is the one route every deployment
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
      return true;
    } catch (error) {
      this.options.logger.warn({ err: error }, 'platform unreachable for the time');
      return false;
    }
  }
}

function parseAnswer(body: Buffer): PopAnswer | null {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return compiledCheck(PopAnswer).Check(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

export function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
