import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { splitPemChain } from '@ooh/crypto';
import { LIMITS } from '@ooh/protocol';
import type { Dispatcher } from 'undici';
import {
  type ClockTrust,
  CorrectedClock,
  EARLIEST_PLAUSIBLE,
  realSleep,
  type Sleep,
  systemMonotonic,
} from './clock.js';
import type { AgentConfig } from './config/config.js';
import { AgentError } from './errors.js';
import { createBoardHardware, type Hardware } from './hardware/hardware.js';
import { FileCredentials } from './identity/file-credentials.js';
import { AgentState } from './log/agent-state.js';
import { type Database, openAgentDatabase, openAgentDatabaseReadOnly } from './log/database.js';
import { PlayLog, settleTimesByClock } from './log/play-log.js';
import { StatusRecorder } from './log/status-recorder.js';
import { jsonLogger, type Logger } from './logger.js';
import type { EnvelopeVerifier } from './media/envelope.js';
import { MediaLibrary } from './media/library.js';
import { RevocationStore } from './media/revocations.js';
import { createHttpClient, type HttpClient, observeServerDates } from './net/http-client.js';
import { reportTlsRefusals, type TlsRefusal, tlsRefusals } from './net/tls-refusals.js';
import type { Display } from './playback/display.js';
import { type DisplayMode, ModeTracker } from './playback/mode.js';
import { PlaybackScheduler } from './playback/scheduler.js';
import { type RenewalCheck, RenewalManager } from './renewal/renewal.js';
import { BatchStore } from './shipping/batch-store.js';
import { DiskWatch, type FreeSpace, systemFreeSpace } from './storage/disk.js';
import {
  LAST_PRUNE_KEY,
  type LastPrune,
  StorageMaintenance,
  type StorageStatus,
  storageStatus,
} from './storage/maintenance.js';
import { type ShippingAlert, Shipper, type ShippingStatus, shippingTrouble } from './shipping/shipper.js';

const CLOCK_OFFSET_KEY = 'clock.offset_ms';
/** CorrectedClock.heldOffset of the running agent, for `agent status`; absent when none is held. */
const CLOCK_HELD_KEY = 'clock.held_offset_ms';
/** CorrectedClock.refusedOffset, kept until a Date header is taken again (a later run's too). */
const CLOCK_REFUSED_KEY = 'clock.refused_offset_ms';

export interface AgentOptions {
  config: AgentConfig;
  /** Default: the board named in the config (the stub that reads nothing when none is named). */
  hardware?: Hardware;
  /** The screen. Without one the agent verifies media, ships and renews, but plays nothing. */
  display?: Display;
  /** An undici dispatcher for every HTTP call (tests, simulators). */
  dispatcher?: Dispatcher;
  logger?: Logger;
  random?: () => number;
  sleep?: Sleep;
  /** Free space of a path's volume (default fs.statfs): the simulator's disk, tests. */
  freeSpace?: FreeSpace;
  /**
   * Envelope signature checks shared by agents in one process (a simulator's fleet): each envelope's CMS signature is
   * then verified once for all of them instead of once per agent. Used only when it pins the same authority roots as
   * this agent's config; otherwise the agent keeps its own.
   */
  envelopeVerifier?: EnvelopeVerifier;
}

export interface CertificateStatus {
  serial: string;
  not_after: string;
  days_left: number;
  state: 'valid' | 'renewal_due' | 'expired' | 'not_yet_valid';
}

export interface AgentStatus {
  device_id: string | null;
  structure: string;
  identity: {
    public_key_spki: string;
    public_key_sha256: string;
    certificate: CertificateStatus | null;
    renewal: {
      state: string;
      last_check: RenewalCheck | null;
      next_certificate_not_after: string | null;
    } | null;
  };
  /** unsettled: records whose times wait for the clock to be synced (they are not shipped before). */
  queue: { depth: number; last_seq: number; unbatched: number; unsettled: number };
  shipping: ShippingStatus;
  /**
   * offset_ms: platform minus board clock. state: see ClockTrust; `unknown` when read from disk (`agent status`
   * without the running agent), `implausible` there too when the clock is before what a correct one can show.
   * held_offset_ms: an offset a Date header showed while synced, held until a later request confirms it
   * (CorrectedClock.heldOffset); null when none is. refused_offset_ms: the offset the platform's Date header showed
   * when it was beyond max_clock_correction_ms and not taken (CorrectedClock.refusedOffset), until one is taken; null
   * when none was.
   */
  clock: {
    offset_ms: number;
    state: ClockTrust | 'unknown';
    held_offset_ms: number | null;
    refused_offset_ms: number | null;
  };
  mode: DisplayMode;
  media: { playable: number; refused: number; waiting: number } | null;
  revocation_list_version: number | null;
  /** Database size, free space and thresholds, the oldest unacknowledged record, retention (storage/maintenance.ts). */
  storage: StorageStatus;
  /** Hosts of the platform whose server certificate is refused now (net/tls-refusals.ts): nothing is sent to them. */
  network: { tls_refused: TlsRefusal[] };
}

/**
 * The agent core, wired together. No process-global state: a simulator may run many agents in one process,
 * each with its own config, data directory, hardware and display.
 */
export class AgentCore {
  readonly db: Database;
  readonly log: PlayLog;
  readonly state: AgentState;
  readonly batches: BatchStore;
  readonly clock: CorrectedClock;
  readonly credentials: FileCredentials;
  readonly http: HttpClient;
  readonly revocations: RevocationStore;
  readonly library: MediaLibrary;
  readonly modes: ModeTracker;
  readonly shipper: Shipper;
  readonly renewal: RenewalManager;
  readonly scheduler: PlaybackScheduler | null;
  readonly hardware: Hardware;
  readonly disk: DiskWatch;
  readonly storage: StorageMaintenance;
  /** Writes the records of events from outside playback (tamper), keeping any the log refuses until it takes it. */
  readonly records: StatusRecorder;
  /** This run of the agent: the epoch of its steady clock, named on records logged before the clock is synced. */
  readonly run = randomUUID();
  private readonly logger: Logger;
  private readonly sleep: Sleep;
  private controller: AbortController | null = null;
  private tasks: Promise<void>[] = [];
  private unsubscribe: (() => void)[] = [];
  private clockTrust: ClockTrust;
  private clockChecks: Promise<void> = Promise.resolve();

  constructor(private readonly options: AgentOptions) {
    const { config } = options;
    if (!config.deviceId) {
      throw new AgentError(
        'config_invalid',
        'device_id is not set: enter the id the console gave at enrolment',
      );
    }
    this.logger = options.logger ?? jsonLogger();
    this.sleep = options.sleep ?? realSleep;
    const hardware = options.hardware ?? createBoardHardware(config.board ?? undefined);
    this.hardware = hardware;
    this.credentials = FileCredentials.load({
      keyFile: config.keyFile,
      certificateFile: config.certificateFile,
      caChainFile: config.caChainFile,
      dataDir: config.dataDir,
    });
    const dbPath = join(config.dataDir, 'agent.sqlite');
    this.db = openAgentDatabase(dbPath);
    // A record logged before the clock is synced notes where it stands on the steady clock, so its times can be
    // corrected once the platform's time is known (records not yet in a batch only).
    this.log = new PlayLog(this.db, () =>
      this.clock.synced
        ? null
        : { run: this.run, steadyMs: this.clock.monotonicMs(), clockMs: this.clock.now().getTime() },
    );
    this.state = new AgentState(this.db);
    this.batches = new BatchStore(this.db);
    // A held jump belongs to the run that saw it: a new run starts unsynced and takes its first header at once.
    this.state.delete(CLOCK_HELD_KEY);
    this.clock = new CorrectedClock(
      this.hardware.clock,
      config.maxClockCorrectionMs,
      this.state.get<number>(CLOCK_OFFSET_KEY) ?? 0,
      (offset) => this.state.set(CLOCK_OFFSET_KEY, offset),
      {
        monotonic: hardware.monotonicMs ? () => hardware.monotonicMs!() : systemMonotonic,
        // A clock before the device certificate was issued is wrong, whatever it says.
        notBefore: () => this.credentials.certificate?.notBefore ?? null,
        onHeldChange: (held) =>
          held === null ? this.state.delete(CLOCK_HELD_KEY) : this.state.set(CLOCK_HELD_KEY, held),
        onRefusedChange: (refused) => {
          if (refused === null) {
            this.state.delete(CLOCK_REFUSED_KEY);
            return;
          }
          this.state.set(CLOCK_REFUSED_KEY, refused);
          this.logger.error(
            { platform_minus_board_ms: refused, max_clock_correction_ms: config.maxClockCorrectionMs },
            `the platform's clock is ${formatOffset(refused)} this board's, beyond max_clock_correction_ms: not taken. ` +
              'Set the board clock (NTP): until then approvals are judged, and plays stamped, by its day',
          );
        },
      },
    );
    this.clockTrust = this.clock.trust();
    this.disk = new DiskWatch({
      volumes: [
        { name: 'data', path: config.dataDir },
        { name: 'media', path: config.mediaDir },
      ],
      freeSpace: options.freeSpace ?? systemFreeSpace,
      warnFreeBytes: config.disk.warnFreeBytes,
      hardFreeBytes: config.disk.hardFreeBytes,
      clock: this.clock,
    });
    this.records = new StatusRecorder({
      log: this.log,
      logger: this.logger,
      clock: this.clock,
      disk: this.disk,
    });
    this.storage = new StorageMaintenance({
      db: this.db,
      dbPath,
      state: this.state,
      disk: this.disk,
      settings: config,
      clock: this.clock,
      clockSynced: () => this.clock.synced,
      monotonic: () => this.clock.monotonicMs(),
      logger: this.logger,
      sleep: this.sleep,
    });
    const authorityRoots = splitPemChain(readAuthorityRoot(config.authorityRootFile));
    this.http = observeServerDates(
      reportTlsRefusals(
        createHttpClient({
          ...(config.serverCaFile ? { serverCaPem: readFileSync(config.serverCaFile, 'utf8') } : {}),
          ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
        }),
        { state: this.state, logger: this.logger, clock: this.clock },
      ),
      this.clock,
    );
    const clockTrust = () => this.clock.trust();
    this.revocations = new RevocationStore({
      cachePath: join(config.dataDir, 'revocations.json'),
      trustedRootsPem: authorityRoots,
      clock: this.clock,
      logger: this.logger,
      http: this.http,
      verifyUrl: config.verifyUrl,
      clockTrusted: () => clockTrust() !== 'implausible',
    });
    const shared = options.envelopeVerifier;
    this.library = new MediaLibrary({
      ...(shared?.trusts(authorityRoots) ? { verifier: shared } : {}),
      mediaDir: config.mediaDir,
      structure: config.structure,
      trustedRootsPem: authorityRoots,
      revocations: this.revocations,
      clock: this.clock,
      log: this.log,
      logger: this.logger,
      stabilityMs: config.mediaStabilityMs,
      sidecarGraceMs: config.sidecarGraceMs,
      clockTrust,
    });
    this.modes = new ModeTracker({
      log: this.log,
      state: this.state,
      clock: this.clock,
      logger: this.logger,
      offlineAfterMs: config.offlineAfterMs,
      clockTrust,
      monotonic: () => this.clock.monotonicMs(),
    });
    this.shipper = new Shipper({
      batches: this.batches,
      state: this.state,
      http: this.http,
      credentials: this.credentials,
      clock: this.clock,
      deviceId: config.deviceId,
      agentsUrl: config.agentsUrl,
      devicesUrl: config.devicesUrl,
      backoff: { baseMs: config.shipping.backoffBaseMs, capMs: config.shipping.backoffCapMs },
      minIntervalMs: config.shipping.minIntervalMs,
      idleIntervalMs: config.shipping.idleIntervalMs,
      logger: this.logger,
      sleep: this.sleep,
      ...(options.random ? { random: options.random } : {}),
      clockRun: { log: this.log, run: this.run },
      onReachability: (reachable) => {
        this.modes.setReachable(reachable);
        this.scheduler?.refreshMode();
      },
    });
    this.renewal = new RenewalManager({
      credentials: this.credentials,
      http: this.http,
      devicesUrl: config.devicesUrl,
      deviceId: config.deviceId,
      clock: this.clock,
      state: this.state,
      logger: this.logger,
      checkEveryMs: config.renewalCheckMs,
      sleep: this.sleep,
      ...(options.random ? { random: options.random } : {}),
      onRenewed: () => this.resumeShippingAfterRenewal(),
    });
    // The display reads each play's start and end on the agent's corrected clock, not on the board's.
    options.display?.useClock?.(this.clock);
    this.scheduler = options.display
      ? new PlaybackScheduler({
          library: this.library,
          display: options.display,
          hardware: this.hardware,
          log: this.log,
          modes: this.modes,
          clock: this.clock,
          monotonic: () => this.clock.monotonicMs(),
          structure: config.structure,
          imageDurationMs: config.imageDurationMs,
          logger: this.logger,
          sleep: this.sleep,
          disk: this.disk,
          records: this.records,
        })
      : null;
  }

  get running(): boolean {
    return this.controller !== null;
  }

  async start(): Promise<void> {
    if (this.controller) return;
    const controller = new AbortController();
    this.controller = controller;
    const { signal } = controller;
    const config = this.options.config;
    // A misspelt key is otherwise silent: the technician reads this log when a setting seems not to take.
    for (const warning of config.warnings) this.logger.warn({ config: config.configFile }, warning);

    this.clockTrust = this.clock.trust();
    if (this.clockTrust === 'implausible') this.reportImplausibleClock();
    // The disk is known before the first play: a full one must not let a play start that could not be proven.
    await this.storage.checkDisk();
    await this.revocations.loadCache();
    await this.library.start();
    this.unsubscribe.push(
      this.revocations.onChange(() => void this.library.reevaluateAll()),
      // A Date header set the clock: records logged meanwhile get their true times, and what was waiting for
      // a plausible clock goes on at once.
      this.clock.onSync(() => {
        // A Date header was taken: one refused in an earlier run no longer speaks for the clock.
        this.state.delete(CLOCK_REFUSED_KEY);
        this.settleRecordTimes();
        void this.checkClock();
      }),
      // spec record kinds: a `tamper` record for each change of the tamper switch. Called by the hardware driver:
      // nothing may be thrown back into it, and a record the log refuses (the disk full) is kept and written later.
      this.hardware.onTamperChange((tamperState) => {
        this.logger.warn({ state: tamperState }, 'tamper switch changed');
        if (this.records.record({ kind: 'tamper', at: this.clock.now(), detail: { state: tamperState } })) {
          this.shipper.wake();
        }
      }),
      // Below the warning threshold it is reported (a mode_change); below the hard one, only slot content plays.
      this.disk.onChange((report) => {
        const fields = {
          state: report.state,
          free_bytes: report.freeBytes,
          write_failure: report.writeFailure,
        };
        if (report.state === 'ok') this.logger.info(fields, 'disk space back above the thresholds');
        else this.logger.warn(fields, `disk space ${report.state}`);
        // Records the log refused are tried again; a record of the change that cannot be written (the disk) is
        // written at a later playback step.
        this.records.flush();
        this.scheduler?.refreshMode();
      }),
    );
    if (!this.scheduler) this.logger.warn({}, 'no display attached: media are verified but nothing plays');

    const task = (name: string, work: () => Promise<void>) => {
      this.tasks.push(
        work().catch((error: unknown) => this.logger.error({ err: error, task: name }, 'agent task stopped')),
      );
    };
    task('shipping', () => this.shipper.run(signal));
    task('storage', () => this.storage.run(signal));
    task('renewal', () => this.renewal.run(signal));
    task('revocations', () =>
      this.every(config.revocationRefreshMs, signal, async () => {
        await this.revocations.refresh();
      }),
    );
    task('media-recheck', () =>
      // Dates roll over at Almaty midnight and approvals expire: look again regularly. A board clock set by
      // its own NTP (no Date header involved) is noticed here too.
      this.every(
        config.mediaRecheckMs,
        signal,
        async () => {
          // Records the log refused (the disk) are tried again, with or without a display's playback steps.
          this.records.flush();
          await this.checkClock();
          await this.library.reevaluateAll();
        },
        false,
      ),
    );
    if (this.scheduler) {
      const scheduler = this.scheduler;
      task('playback', () => scheduler.run(signal));
    }
  }

  /**
   * Shipping stopped by `device_unauthorized` (its certificate refused: past its grace after a renewal whose answer
   * was lost, say) starts again once a renewal stored a new certificate, which may be what it lacked; it no longer
   * waits for a restart. Any other terminal answer would be the same with the new certificate: it stays stopped.
   */
  private resumeShippingAfterRenewal(): void {
    const controller = this.controller;
    const shipping = this.shipper.status();
    if (!controller || shipping.state !== 'stopped' || shipping.alert?.code !== 'device_unauthorized') return;
    this.logger.info(
      { alert: shipping.alert },
      'certificate renewed: shipping, stopped by a refused certificate, starts again',
    );
    const signal = controller.signal;
    this.tasks.push(
      this.shipper
        .run(signal)
        .catch((error: unknown) => this.logger.error({ err: error, task: 'shipping' }, 'agent task stopped')),
    );
  }

  async stop(): Promise<void> {
    const controller = this.controller;
    if (!controller) return;
    controller.abort();
    await Promise.all(this.tasks);
    await this.clockChecks;
    this.tasks = [];
    for (const off of this.unsubscribe.splice(0)) off();
    this.records.close();
    await this.library.stop();
    this.controller = null;
  }

  /** Stops (if running) and releases the database and connections. */
  async close(): Promise<void> {
    await this.stop();
    await this.http.close();
    await this.hardware.close?.();
    this.state.delete(CLOCK_HELD_KEY);
    this.db.close();
  }

  status(): AgentStatus {
    return buildStatus({
      config: this.options.config,
      credentials: this.credentials,
      log: this.log,
      shipping: this.shipper.status(),
      clockOffsetMs: this.clock.offset,
      clockState: this.clock.trust(),
      clockHeldOffsetMs: this.clock.heldOffset,
      clockRefusedOffsetMs: this.clock.refusedOffset ?? this.state.get<number>(CLOCK_REFUSED_KEY) ?? null,
      now: this.clock.now(),
      mode: this.modes.current,
      library: this.library,
      revocationVersion: this.revocations.version,
      lastRenewalCheck: this.renewal.last,
      storage: this.storage.status(),
      tlsRefused: tlsRefusals(this.state),
    });
  }

  /**
   * Acts on a change of how far the clock can be trusted (serialised; cheap when nothing changed). Leaving
   * `implausible`: the revocation list and every media file are judged again, now by a plausible clock.
   * Entering it: media files wait, nothing plays, nothing is judged by dates.
   */
  checkClock(): Promise<void> {
    const run = this.clockChecks.then(async () => {
      const trust = this.clock.trust();
      const was = this.clockTrust;
      this.clockTrust = trust;
      if (trust === was || !this.controller) return;
      if (trust === 'implausible') {
        this.reportImplausibleClock();
      } else if (was === 'implausible') {
        this.logger.info({ clock: this.clock.now().toISOString(), trust }, 'clock set: judging media again');
        if (this.revocations.version === null) await this.revocations.loadCache();
        void this.revocations.refresh().catch(() => undefined);
      } else {
        return;
      }
      await this.library.reevaluateAll();
      this.scheduler?.refreshMode();
    });
    this.clockChecks = run.catch((error: unknown) =>
      this.logger.error({ err: error }, 'acting on a clock change failed'),
    );
    return this.clockChecks;
  }

  private settleRecordTimes(): void {
    try {
      const settled = settleTimesByClock(this.log, this.run, this.clock);
      if (settled.corrected + settled.unchanged + settled.asStamped > 0) {
        this.logger.info({ ...settled }, 'clock synced: times of records logged before it settled');
      }
    } catch (error) {
      this.logger.error({ err: error }, 'settling record times failed; shipping will try again');
    }
  }

  private reportImplausibleClock(): void {
    this.logger.warn(
      {
        clock: this.clock.now().toISOString(),
        earliest_plausible: this.clock.earliestPlausible().toISOString(),
      },
      'clock implausible (not set?): waiting for it; media are not judged and nothing plays meanwhile',
    );
  }

  private async every(
    intervalMs: number,
    signal: AbortSignal,
    work: () => Promise<void>,
    immediately = true,
  ): Promise<void> {
    if (!immediately) await this.sleep(intervalMs, signal);
    while (!signal.aborted) {
      try {
        await work();
      } catch (error) {
        this.logger.warn({ err: error }, 'periodic task failed');
      }
      await this.sleep(intervalMs, signal);
    }
  }
}

export async function createAgent(options: AgentOptions): Promise<AgentCore> {
  return new AgentCore(options);
}

export function certificateStatus(
  certificate: { serialHex: string; notBefore: Date; notAfter: Date } | null,
  now: Date,
): CertificateStatus | null {
  if (!certificate) return null;
  const msLeft = certificate.notAfter.getTime() - now.getTime();
  const state: CertificateStatus['state'] =
    now.getTime() < certificate.notBefore.getTime()
      ? 'not_yet_valid'
      : now.getTime() >= certificate.notAfter.getTime()
        ? 'expired'
        : msLeft < LIMITS.selfRenewDaysLeft * 86_400_000
          ? 'renewal_due'
          : 'valid';
  return {
    serial: certificate.serialHex,
    not_after: certificate.notAfter.toISOString(),
    days_left: Math.floor(msLeft / 86_400_000),
    state,
  };
}

export function buildStatus(args: {
  config: AgentConfig;
  credentials: FileCredentials;
  log: PlayLog;
  shipping: ShippingStatus;
  clockOffsetMs: number;
  clockState: ClockTrust | 'unknown';
  clockHeldOffsetMs: number | null;
  clockRefusedOffsetMs: number | null;
  now: Date;
  mode: DisplayMode;
  library: MediaLibrary | null;
  revocationVersion: number | null;
  lastRenewalCheck: RenewalCheck | null;
  storage: StorageStatus;
  tlsRefused?: TlsRefusal[];
}): AgentStatus {
  const stats = args.log.stats();
  const files = args.library?.files() ?? null;
  const renewal = args.credentials.renewalState;
  return {
    device_id: args.config.deviceId,
    structure: args.config.structure,
    identity: {
      public_key_spki: args.credentials.publicKeySpki,
      public_key_sha256: args.credentials.publicKeySha256,
      certificate: certificateStatus(args.credentials.certificate, args.now),
      renewal:
        renewal || args.lastRenewalCheck
          ? {
              state: renewal?.state ?? 'none',
              last_check: args.lastRenewalCheck,
              next_certificate_not_after: args.credentials.nextCertificate?.notAfter.toISOString() ?? null,
            }
          : null,
    },
    queue: {
      depth: stats.queueDepth,
      last_seq: stats.lastSeq,
      unbatched: stats.unbatched,
      unsettled: stats.unsettled,
    },
    shipping: args.shipping,
    clock: {
      offset_ms: args.clockOffsetMs,
      state: args.clockState,
      held_offset_ms: args.clockHeldOffsetMs,
      refused_offset_ms: args.clockRefusedOffsetMs,
    },
    mode: args.mode,
    media: files
      ? {
          playable: files.filter((f) => f.status === 'playable').length,
          refused: files.filter((f) => f.status === 'refused').length,
          waiting: files.filter((f) => f.status === 'waiting' || f.status === 'not_yet_valid').length,
        }
      : null,
    revocation_list_version: args.revocationVersion,
    storage: args.storage,
    network: { tls_refused: args.tlsRefused ?? [] },
  };
}

/**
 * Status read from disk without starting the agent (`agent status`): identity, certificate expiry, queue
 * depth, last successful send, clock offset, remembered mode. Safe while the agent runs (WAL readers).
 */
export async function readStatus(
  config: AgentConfig,
  options: { freeSpace?: FreeSpace } = {},
): Promise<AgentStatus> {
  // Read only, beside a running agent or a stopped one: no file renamed, no play log created, migrated or
  // checkpointed.
  const credentials = FileCredentials.load(
    {
      keyFile: config.keyFile,
      certificateFile: config.certificateFile,
      caChainFile: config.caChainFile,
      dataDir: config.dataDir,
    },
    { readOnly: true },
  );
  const dbPath = join(config.dataDir, 'agent.sqlite');
  // No play log yet (installed, never run): what the agent starts with, an empty log in memory.
  const db = existsSync(dbPath) ? openAgentDatabaseReadOnly(dbPath) : openAgentDatabase(':memory:');
  try {
    const state = new AgentState(db);
    const offset = state.get<number>(CLOCK_OFFSET_KEY) ?? 0;
    const now = new Date(Date.now() + offset);
    // The disk as it is now (no memory of the running agent's state: the thresholds alone decide).
    const disk = await new DiskWatch({
      volumes: [
        { name: 'data', path: config.dataDir },
        { name: 'media', path: config.mediaDir },
      ],
      freeSpace: options.freeSpace ?? systemFreeSpace,
      warnFreeBytes: config.disk.warnFreeBytes,
      hardFreeBytes: config.disk.hardFreeBytes,
      clock: { now: () => now },
    }).check();
    const revocations = new RevocationStore({
      cachePath: join(config.dataDir, 'revocations.json'),
      trustedRootsPem: splitPemChain(readAuthorityRoot(config.authorityRootFile)),
      clock: { now: () => now },
      logger: { info() {}, warn() {}, error() {} },
    });
    await revocations.loadCache();
    const alert = state.get<ShippingAlert>('shipping.alert') ?? null;
    return buildStatus({
      config,
      credentials,
      log: new PlayLog(db),
      shipping: {
        state: alert ? 'stopped' : 'not_running',
        lastSend: state.get<{ at: string; batch_seq: number }>('shipping.last_send') ?? null,
        alert,
        consecutiveFailures: 0,
        ...shippingTrouble(new BatchStore(db)),
      },
      clockOffsetMs: offset,
      clockHeldOffsetMs: state.get<number>(CLOCK_HELD_KEY) ?? null,
      clockRefusedOffsetMs: state.get<number>(CLOCK_REFUSED_KEY) ?? null,
      // Without the running agent nothing says whether the clock was synced; an impossible one still shows.
      clockState:
        now.getTime() <
        Math.max(EARLIEST_PLAUSIBLE.getTime(), credentials.certificate?.notBefore.getTime() ?? 0)
          ? 'implausible'
          : 'unknown',
      now,
      mode: state.get<DisplayMode>('display.mode') ?? 'normal',
      library: null,
      revocationVersion: revocations.version,
      lastRenewalCheck: null,
      storage: storageStatus({
        db,
        dbPath,
        settings: config,
        disk,
        now,
        lastPrune: state.get<LastPrune>(LAST_PRUNE_KEY) ?? null,
      }),
      tlsRefused: tlsRefusals(state),
    });
  } finally {
    db.close();
  }
}

/**
 * The authority's root certificate(s), which every approval envelope and the revocation list are checked against.
 * A missing or unreadable file is a configuration problem, said in one line with what to do, not a stack trace.
 */
function readAuthorityRoot(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (cause) {
    const why = (cause as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new AgentError(
      'config_invalid',
      `authority_root_file ${path} cannot be read (${why}): save authority-root.pem from the console's enrolment ` +
        "page (or the verify host's /v1/authority-root.pem) and run 'agent install <folder>', or fix the path",
      { cause },
    );
  }
}

/** An offset as a person reads it: "31 d 2 h ahead of", "26 h behind" (platform minus board), before "this board's". */
export function formatOffset(offsetMs: number): string {
  const hours = Math.round(Math.abs(offsetMs) / 3_600_000);
  const text = hours >= 48 ? `${Math.floor(hours / 24)} d ${hours % 24} h` : `${hours} h`;
  return `${text} ${offsetMs >= 0 ? 'ahead of' : 'behind'}`;
}
