import {
  createCsr,
  es256Sign,
  exportPrivateKeyPem,
  generateEs256KeyPair,
  importPrivateKey,
} from '@ooh/crypto';
import { compiledCheck, LIMITS, RenewAnswer } from '@ooh/protocol';
import type { Clock, Sleep } from '../clock.js';
import { realSleep } from '../clock.js';
import { type FileCredentials, isValidAt } from '../identity/file-credentials.js';
import type { AgentState } from '../log/agent-state.js';
import type { Logger } from '../logger.js';
import type { HttpClient, HttpResponse } from '../net/http-client.js';
import { isTlsRefusal, problemCode } from '../net/http-client.js';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const PLAN_KEY = 'renewal.plan';
const EXPIRED_KEY = 'renewal.expired_reported';
const NOT_YET_VALID_KEY = 'renewal.not_yet_valid_reported';

export type RenewalCheck =
  | { result: 'no_certificate' }
  | { result: 'not_due'; daysLeft: number }
  | { result: 'scheduled'; at: string }
  | { result: 'renewed'; notAfter: string }
  | { result: 'awaiting_confirmation' }
  | { result: 'expired'; notAfter: string }
  /** The certificate's notBefore is still to come: almost surely the clock, not the certificate. */
  | { result: 'not_yet_valid'; notBefore: string }
  | { result: 'refused'; status: number; code: string | null }
  | { result: 'failed'; reason: string };

export interface RenewalOptions {
  credentials: FileCredentials;
  http: HttpClient;
  devicesUrl: string;
  deviceId: string | null;
  clock: Clock;
  state: AgentState;
  logger: Logger;
  random?: () => number;
  sleep?: Sleep;
  /** How often to look (at most an hour: Node caps timers at 2^31-1 ms, and the wall clock may jump). */
  checkEveryMs?: number;
  /** A new certificate was stored and is used from now on. */
  onRenewed?: () => void;
}

/**
 * Self-renewal of the device certificate (spec: "A player renews on its own when less than 30 days are
 * left"; DESIGN.md §9). Each check reads the wall clock; renewal starts at a random point once fewer than
 * 30 days are left, so a fleet enrolled on one day does not renew in one burst.
 */
export class RenewalManager {
  private lastCheck: RenewalCheck | null = null;
  private readonly random: () => number;
  private readonly sleep: Sleep;

  constructor(private readonly options: RenewalOptions) {
    this.random = options.random ?? Math.random;
    this.sleep = options.sleep ?? realSleep;
  }

  get last(): RenewalCheck | null {
    return this.lastCheck;
  }

  async run(signal: AbortSignal): Promise<void> {
    const every = Math.min(this.options.checkEveryMs ?? HOUR_MS, HOUR_MS);
    while (!signal.aborted) {
      try {
        await this.check();
      } catch (error) {
        this.options.logger.error({ err: error }, 'renewal check failed');
      }
      await this.sleep(every, signal);
    }
  }

  async check(): Promise<RenewalCheck> {
    this.lastCheck = await this.checkOnce();
    return this.lastCheck;
  }

  private async checkOnce(): Promise<RenewalCheck> {
    const { credentials, clock, state, logger } = this.options;
    const now = clock.now();
    const certificate = credentials.certificate;
    if (!certificate) return { result: 'no_certificate' };
    const renewal = credentials.renewalState;
    if (renewal?.state === 'issued') return { result: 'awaiting_confirmation' };
    if (renewal && renewal.for_serial !== certificate.serialHex) {
      // A certificate was installed by hand since: the old request is moot.
      logger.warn(
        { for_serial: renewal.for_serial },
        'dropping a renewal request made for another certificate',
      );
      state.delete(PLAN_KEY);
    }

    if (now.getTime() < certificate.notBefore.getTime()) {
      // Not "expired": a certificate issued after the instant the clock shows. Said once per certificate; the
      // check goes on each hour and finds it valid once the clock is set.
      if (state.get<string>(NOT_YET_VALID_KEY) !== certificate.serialHex) {
        logger.warn(
          {
            serial: certificate.serialHex,
            not_before: certificate.notBefore.toISOString(),
            clock: now.toISOString(),
          },
          'device certificate not yet valid (clock?): waiting for the clock to be set',
        );
        state.set(NOT_YET_VALID_KEY, certificate.serialHex);
      }
      return { result: 'not_yet_valid', notBefore: certificate.notBefore.toISOString() };
    }
    if (!isValidAt(certificate, now)) {
      // Reported once, clearly, rather than retried in a loop: mTLS with an expired certificate cannot work.
      // Telemetry falls back to the signed channel; a technician must enrol the device again.
      if (state.get<string>(EXPIRED_KEY) !== certificate.serialHex) {
        logger.error(
          { serial: certificate.serialHex, not_after: certificate.notAfter.toISOString() },
          'device certificate has expired: renewal impossible, re-enrolment needed',
        );
        state.set(EXPIRED_KEY, certificate.serialHex);
      }
      return { result: 'expired', notAfter: certificate.notAfter.toISOString() };
    }

    const msLeft = certificate.notAfter.getTime() - now.getTime();
    if (msLeft >= LIMITS.selfRenewDaysLeft * DAY_MS) {
      return { result: 'not_due', daysLeft: Math.floor(msLeft / DAY_MS) };
    }
    const plannedAt = this.plannedAt(certificate.serialHex, certificate.notAfter, now);
    if (now.getTime() < plannedAt.getTime()) return { result: 'scheduled', at: plannedAt.toISOString() };
    return this.renew(now);
  }

  /**
   * A random point in the first half of the last 30 days (never before now), kept across restarts so that
   * restarting does not draw again. The second half is left for retries.
   */
  private plannedAt(serialHex: string, notAfter: Date, now: Date): Date {
    const saved = this.options.state.get<{ serial: string; at: string }>(PLAN_KEY);
    if (saved?.serial === serialHex) return new Date(saved.at);
    const windowStart = Math.max(now.getTime(), notAfter.getTime() - LIMITS.selfRenewDaysLeft * DAY_MS);
    const windowEnd = Math.max(windowStart, notAfter.getTime() - (LIMITS.selfRenewDaysLeft / 2) * DAY_MS);
    const at = new Date(windowStart + Math.floor(this.random() * (windowEnd - windowStart)));
    this.options.state.set(PLAN_KEY, { serial: serialHex, at: at.toISOString() });
    this.options.logger.info({ at: at.toISOString() }, 'certificate renewal planned');
    return at;
  }

  private async renew(now: Date): Promise<RenewalCheck> {
    const { credentials, http, logger } = this.options;
    let renewal = credentials.renewalState;
    if (renewal?.state !== 'requested' || renewal.for_serial !== credentials.certificate?.serialHex) {
      const keyPair = generateEs256KeyPair();
      const csr = await createCsr({
        subject: `CN=device ${this.options.deviceId ?? 'unknown'}`,
        keyPair,
      });
      renewal = credentials.beginRenewal(exportPrivateKeyPem(keyPair.privateKey), csr, now);
    }
    // A lost answer is recovered by sending the same CSR again (DESIGN.md §9).
    const body = Buffer.from(JSON.stringify({ csr: renewal.csr }), 'utf8');
    const identity = credentials.currentIdentity();
    if (!identity) return { result: 'no_certificate' };
    let response: HttpResponse;
    try {
      response = await http.post(
        `${this.options.devicesUrl.replace(/\/+$/, '')}/d/v1/renew`,
        body,
        {
          'content-type': 'application/json',
          // spec: renew is "Authenticated by the device client certificate ... and header X-Service-Signature"
          'x-service-signature': es256Sign(importPrivateKey(identity.keyPem), body),
        },
        identity,
      );
    } catch (error) {
      // A refused server certificate is said once by the transport (net/tls-refusals.ts), not at every check.
      if (!isTlsRefusal(error))
        logger.warn({ err: error }, 'renewal call failed; will retry at the next check');
      return { result: 'failed', reason: (error as Error).message };
    }
    if (response.status !== 200) {
      const code = problemCode(response) ?? null;
      logger.warn({ status: response.status, code }, 'renewal refused; will retry at the next check');
      return { result: 'refused', status: response.status, code };
    }
    let answer: unknown;
    try {
      answer = JSON.parse(response.body.toString('utf8'));
    } catch {
      return { result: 'failed', reason: 'renewal answer is not JSON' };
    }
    if (!compiledCheck(RenewAnswer).Check(answer))
      return { result: 'failed', reason: 'renewal answer malformed' };
    try {
      await credentials.storeIssued(
        {
          certificatePem: answer.certificate_pem,
          chainPem: answer.chain_pem,
          deviceId: answer.device_id,
          oldValidUntil: answer.old_valid_until,
        },
        { deviceId: this.options.deviceId, now },
      );
    } catch (error) {
      // The old pair stays; the same CSR goes again at the next check (a platform that issued a good certificate
      // for it answers with that one).
      logger.error({ err: error }, 'renewal answer refused; the current certificate is kept');
      return { result: 'failed', reason: (error as Error).message };
    }
    logger.info({ not_after: answer.not_after }, 'certificate renewed; the new pair is used from now on');
    this.options.onRenewed?.();
    return { result: 'renewed', notAfter: answer.not_after };
  }
}
