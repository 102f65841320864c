import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { type AgentStatus, loadConfig } from '@ooh/agent';
import type { Progress } from '@ooh/progress';
import { formatAlmaty } from '@ooh/protocol';
import { LocalHost } from '../fleet/host.js';
import { enrolPlayer, issueCreatives, placeCreative, type StructureInfo } from '../fleet/provision.js';
import { explainCallFailure } from '../platform/call-failure.js';
import { ConsoleClient, PlatformCallError, type PlatformUrls } from '../platform/console-client.js';
import { type AgentLogSummary, readAgentLog } from '../truth/agent-log.js';
import { pause, withDeadline } from '../util/deadline.js';
import {
  claimFolder,
  type FolderClaim,
  FolderInUse,
  LOCK_FILE,
  type LockHolder,
  liveHolder,
} from '../util/folder-lock.js';

/**
 * `hardware-sim player`: commissioning at a real site. Steps, each named when it fails: `structure` (find it),
 * `approve` (a test creative for it, today), `enrol` (a simulated player with a client certificate), `play` (the
 * creative shown), `send` (the play answered by the platform), `count` (the platform's count for the device).
 *
 * A failure is one line on stderr, `hardware-sim: player: <step> failed: <what is wrong>: <what to do>`, with what it
 * left behind. Nothing is left enrolled silently: a device enrolled before a failure or a Ctrl-C is revoked with the
 * admin key (and if that fails too, its id is named so it can be revoked in the console); the API key issued to the
 * structure's operator for the run is revoked at the end whatever happened. Exit 0 commissioned, 1 a step failed,
 * 2 a --dir it may not use (checked before any call to the platform), 128 + the signal's number when stopped by one
 * (130 Ctrl-C, 143 SIGTERM: a CI cancel, `kill`, docker stop).
 */

export type CommissioningStep = 'structure' | 'approve' | 'enrol' | 'play' | 'send' | 'count';

export interface CommissionIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** A step that failed: what was wrong and what to do. */
export class CommissioningFailure extends Error {
  constructor(
    readonly step: CommissioningStep,
    readonly what: string,
    readonly action: string,
    options?: { cause?: unknown },
  ) {
    super(`${step} failed: ${what}`, options);
    this.name = 'CommissioningFailure';
  }
}

/** Ctrl-C: the reason the run's AbortSignal carries. */
class Interrupted extends Error {
  constructor() {
    super('interrupted');
    this.name = 'Interrupted';
  }
}

const ANSWER_WAIT_MS = 90_000;
/** One call to the platform: no answer within it is "did not answer in time". */
const CALL_TIMEOUT_MS = 60_000;
const CLEANUP_TIMEOUT_MS = 5_000;

/** What went wrong in a step, said for a technician: the host, the platform's answer, what to check. */
export function describeFailure(
  step: CommissioningStep,
  host: string,
  error: unknown,
  /** The --platform name of `host`: the one to check. */
  option: keyof PlatformUrls = 'api',
): CommissioningFailure {
  const { what, action } = explainCallFailure(host, error, option);
  return new CommissioningFailure(step, what, action, { cause: error });
}

/**
 * Why `--dir` may not be used, or null: a folder that is not empty (it may be a real player's, or the last
 * commissioning's) would have its agent.json, certificates and device key overwritten by the enrolment; a folder
 * another run has claimed (its lock, util/folder-lock.ts) is that run's. Read only: a refused folder is not written.
 */
export function refuseDir(dir: string): string | null {
  const action =
    'choose another folder (new or empty) or leave --dir out (a temporary folder is made); remove this one only if nothing in it is needed';
  let entries: string[];
  try {
    if (!statSync(dir).isDirectory()) {
      return `--dir ${dir} is not a folder: ${action}; nothing was done`;
    }
    entries = readdirSync(dir).sort();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    return `--dir ${dir} cannot be read (${code ?? 'error'}): ${action}; nothing was done`;
  }
  const holder = entries.includes(LOCK_FILE) ? liveHolder(dir) : null;
  // This run's own lock (looked at again once claimed) is not another's.
  if (holder !== null && (holder === 'unknown' || holder.pid !== process.pid)) {
    return inUse(dir, holder === 'unknown' ? null : holder);
  }
  // A lock left by a run that was killed is taken over (claimFolder): it alone does not make the folder used.
  entries = entries.filter((name) => !name.startsWith(LOCK_FILE));
  if (entries.length === 0) return null;
  let device = '';
  try {
    const raw = JSON.parse(readFileSync(join(dir, 'agent.json'), 'utf8')) as { device_id?: unknown };
    if (typeof raw.device_id === 'string') device = ` (device ${raw.device_id})`;
  } catch {
    // no agent.json, or not one: the folder's contents are named instead
  }
  const shown = entries.length > 3 ? `${entries.slice(0, 3).join(', ')}, …` : entries.join(', ');
  const holds = entries.includes('agent.json')
    ? `already holds a player${device}`
    : `is not empty (${shown})`;
  return `--dir ${dir} ${holds}: ${action}; nothing was done, nothing in it was changed`;
}

function inUse(dir: string, holder: LockHolder | null): string {
  const who = holder ? `${holder.command} (pid ${holder.pid})` : 'another hardware-sim command';
  return `--dir ${dir} is in use by another run, ${who}: wait for it to end, or choose another folder (new or empty) or leave --dir out; nothing was done, nothing in it was changed`;
}

/**
 * Claims `--dir` for this run before anything else (util/folder-lock.ts): of two runs started at the same instant on
 * one empty folder, both find it empty, and only one gets the lock. Made if it does not exist (and removed again by
 * {@link releaseDir} if nothing was put in it). A refusal as for {@link refuseDir}.
 */
function claimDir(dir: string): { claim: FolderClaim; made: boolean } | { refused: string } {
  const refused = refuseDir(dir);
  if (refused) return { refused };
  const made = !existsSync(dir);
  try {
    mkdirSync(dir, { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    return {
      refused: `--dir ${dir} cannot be made (${code}): choose another folder or leave --dir out; nothing was done`,
    };
  }
  let claim: FolderClaim;
  try {
    claim = claimFolder(dir, 'hardware-sim player');
  } catch (error) {
    if (error instanceof FolderInUse) return { refused: inUse(dir, error.holder) };
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    return {
      refused: `--dir ${dir} cannot be written (${code}): choose another folder or leave --dir out; nothing was done`,
    };
  }
  // Looked at again now that it is ours: another run may have filled it and left between the look and the claim.
  const filled = refuseDir(dir);
  if (filled) {
    claim.release();
    return { refused: filled };
  }
  return { claim, made };
}

/** The files a run put in `dir` (its lock aside). */
function holdsFiles(dir: string): boolean {
  try {
    return readdirSync(dir).some((name) => !name.startsWith(LOCK_FILE));
  } catch {
    return false;
  }
}

/** Gives up the claim; a folder this run made and put nothing in is removed. */
function releaseDir(dir: string, claimed: { claim: FolderClaim; made: boolean }): void {
  claimed.claim.release();
  if (claimed.made && !holdsFiles(dir)) rmSync(dir, { recursive: true, force: true });
}

interface StructureRow {
  id: string;
  code: string;
  organisation_id: string;
  retired_at?: string | null;
}

/**
 * Runs the commissioning; Ctrl-C (SIGINT), SIGTERM or SIGHUP stops it within seconds, the device it enrolled revoked.
 * Only one run per process listens to them; a second signal exits at once.
 */
export async function commissionCommand(
  args: { urls: PlatformUrls; adminKey: string; structureCode: string; dir: string | undefined },
  io: CommissionIo,
  progress: Progress,
): Promise<number> {
  let claimed: { claim: FolderClaim; made: boolean } | null = null;
  if (args.dir !== undefined) {
    const result = claimDir(resolve(args.dir));
    if ('refused' in result) {
      io.err(`hardware-sim: player: ${result.refused}\n`);
      return 2;
    }
    claimed = result;
  }
  const controller = new AbortController();
  let stoppedBy: NodeJS.Signals | null = null;
  const exitCode = (signal: NodeJS.Signals) => 128 + (os.constants.signals[signal] ?? 0);
  const onSignal = (signal: NodeJS.Signals) => {
    if (stoppedBy) process.exit(exitCode(signal));
    stoppedBy = signal;
    controller.abort(new Interrupted());
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  const run = new Commissioning(args, io, progress, controller.signal);
  try {
    await run.all();
    await run.revokeKey();
    return 0;
  } catch (error) {
    progress.done();
    const interrupted = controller.signal.aborted;
    const failure = interrupted
      ? null
      : error instanceof CommissioningFailure
        ? error
        : describeFailure(run.step, args.urls[run.optionOf(run.step)], error, run.optionOf(run.step));
    const leftBehind = await run.cleanUp();
    io.err(
      interrupted
        ? `hardware-sim: player: interrupted${stoppedBy === 'SIGINT' ? '' : ` (${stoppedBy})`} during ${run.step}; ${leftBehind}\n`
        : `hardware-sim: player: ${failure!.step} failed: ${failure!.what}: ${failure!.action}; ${leftBehind}\n`,
    );
    return interrupted ? exitCode(stoppedBy ?? 'SIGINT') : 1;
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
    if (claimed) releaseDir(resolve(args.dir!), claimed);
  }
}

/** Ctrl-C, a CI cancel or `kill` (SIGTERM), a closed terminal (SIGHUP). */
const STOP_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

class Commissioning {
  step: CommissioningStep = 'structure';
  private readonly admin: ConsoleClient;
  private dir: string | null = null;
  private deviceId: string | null = null;
  private key: { id: string } | null = null;
  private operator: ConsoleClient | null = null;
  private keyRevoked = false;

  constructor(
    private readonly args: {
      urls: PlatformUrls;
      adminKey: string;
      structureCode: string;
      dir: string | undefined;
    },
    private readonly io: CommissionIo,
    private readonly progress: Progress,
    private readonly signal: AbortSignal,
  ) {
    this.admin = new ConsoleClient(args.urls.api, args.adminKey, CALL_TIMEOUT_MS, signal);
  }

  /** The --platform host a step talks to (the one to check when it fails). */
  optionOf(step: CommissioningStep): keyof PlatformUrls {
    return step === 'play' || step === 'send' ? 'devices' : 'api';
  }

  private async inStep<T>(
    step: CommissioningStep,
    option: keyof PlatformUrls,
    work: () => Promise<T>,
  ): Promise<T> {
    this.step = step;
    this.signal.throwIfAborted();
    try {
      return await work();
    } catch (error) {
      if (this.signal.aborted || error instanceof CommissioningFailure) throw error;
      throw describeFailure(step, this.args.urls[option], error, option);
    }
  }

  async all(): Promise<void> {
    const { urls, structureCode } = this.args;
    this.progress.phase('reading the structures');
    const structure = await this.inStep('structure', 'api', async () => {
      const { items } = await this.admin.call<{ items: StructureRow[] }>('GET', '/api/v1/console/structures');
      const found = items.find((s) => s.code === structureCode);
      if (!found) {
        throw new CommissioningFailure(
          'structure',
          `the platform has no structure with code ${structureCode}`,
          'check the code on the structure (the console lists them under Structures)',
        );
      }
      if (found.retired_at) {
        throw new CommissioningFailure(
          'structure',
          `structure ${structureCode} was retired on ${found.retired_at}`,
          'check the code: a structure registered again has a new one',
        );
      }
      return found;
    });
    const dir = resolve(
      this.args.dir ?? mkdtempSync(join(os.tmpdir(), `hardware-sim-player-${structureCode}-`)),
    );
    this.dir = dir;
    this.io.out(`commissioning ${structureCode} (structure ${structure.id}); files in ${dir}\n`);
    const info: StructureInfo = { id: structure.id, code: structure.code };
    this.io.out('1. approving a test creative for the structure ...\n');
    this.progress.phase('approving a test creative');
    const creative = await this.inStep('approve', 'api', async () => {
      // The structure's operator, with a key for this run (revoked at its end).
      const key = await this.admin.createApiKey(structure.organisation_id, `commissioning ${structureCode}`, [
        'write:submissions',
        'read:creatives',
        'console:fleet',
      ]);
      this.key = key;
      this.operator = this.admin.as(key.key);
      const today = formatAlmaty(new Date()).slice(0, 10);
      const [issued] = await issueCreatives({
        admin: this.admin,
        operator: this.operator,
        structures: [info],
        creatives: [{ name: `commissioning-${structureCode}`, seed: Date.now() % 1000 }],
        validFrom: today,
        validUntil: today,
        advertiser: 'Commissioning test (not billed)',
      });
      return issued!;
    });
    this.io.out(`   approval ${creative.approvalNumber}, media sha256 ${creative.sha256}\n`);
    this.io.out('2. enrolling a player (device key, client certificate) ...\n');
    this.progress.phase('enrolling the player');
    const authorityRootPem = await this.inStep('enrol', 'verify', async () => {
      const url = `${urls.verify}/v1/authority-root.pem`;
      const { status, text } = await withDeadline(url, CALL_TIMEOUT_MS, this.signal, async (signal) => {
        const response = await fetch(url, { signal });
        return { status: response.status, text: await response.text() };
      });
      if (status !== 200) {
        throw new PlatformCallError('GET', `${urls.verify}/v1/authority-root.pem`, status, null, text);
      }
      return text;
    });
    const files = await this.inStep('enrol', 'api', () =>
      enrolPlayer({
        operator: this.operator!,
        dir,
        structure: info,
        network: { agentsUrl: urls.agents, devicesUrl: urls.devices, verifyUrl: urls.verify },
        authorityRootPem,
        settings: {
          image_duration_ms: 5_000,
          shipping: {
            min_interval_ms: 1_000,
            idle_interval_ms: 2_000,
            backoff_base_ms: 1_000,
            backoff_cap_ms: 10_000,
          },
          revocation_refresh_ms: 3_600_000,
          renewal_check_ms: 3_600_000,
          media_recheck_ms: 60_000,
          offline_after_ms: 600_000,
        },
      }).then((enrolled) => {
        this.deviceId = enrolled.deviceId;
        return enrolled;
      }),
    );
    this.io.out(`   device ${files.deviceId}, certificate until ${files.certificateNotAfter ?? '(none)'}\n`);
    placeCreative(join(dir, 'media'), creative);
    this.io.out('3. playing the test creative and sending the play ...\n');
    this.progress.phase("playing and waiting for the platform's answer (at most 1:30)");
    const answered = await this.playAndSend(files.configFile);
    this.progress.done();
    const play = answered.plays.find((p) => p.acknowledged)!;
    this.io.out(
      `   play ${play.playId} (${play.durationMs} ms) answered: ${play.status}${play.reason ? ` (${play.reason})` : ''}\n`,
    );
    this.io.out(`   platform answers so far: ${JSON.stringify(answered.batches)}\n`);
    if (play.status !== 'accepted' && play.status !== 'flagged') {
      throw new CommissioningFailure(
        'send',
        `the platform answered the play ${play.status}${play.reason ? ` (${play.reason})` : ''}`,
        "check the player's clock and the approval for this structure, then run again",
      );
    }
    const counted = await this.inStep('count', 'api', async () => {
      const counts = await this.admin.playCounts({ player: `device:${files.deviceId}` });
      return counts.items.reduce((sum, row) => sum + row.plays, 0);
    });
    this.io.out(`4. the platform counts ${counted} play(s) for this device\n`);
    if (counted === 0) {
      throw new CommissioningFailure(
        'count',
        'the platform answered the play but counts none for this device',
        "run again in a minute; if it stays 0, tell the platform's operators",
      );
    }
    this.io.out('COMMISSIONED: the site reaches the platform and its plays count\n');
  }

  /** The agent core on simulated hardware until the platform answered a play, for at most 90 s. */
  private async playAndSend(configFile: string): Promise<AgentLogSummary> {
    this.step = 'play';
    const structureCode = this.args.structureCode;
    const host = new LocalHost({ name: 'commissioning', virtualStartMs: null, onPlayed: () => {} });
    const databaseFile = join(loadConfig(configFile).dataDir, 'agent.sqlite');
    const deadline = Date.now() + ANSWER_WAIT_MS;
    let last: AgentLogSummary | null = null;
    try {
      await host.add({ id: structureCode, configFile, seed: 1 });
      await host.start(structureCode);
      while (Date.now() < deadline) {
        await pause(1000, this.signal);
        this.signal.throwIfAborted();
        last = readAgentLog(databaseFile);
        if (last.plays.length > 0) this.step = 'send';
        if (last.plays.some((p) => p.acknowledged)) return last;
        this.stopOnRefusedCertificate(await host.status(structureCode));
      }
    } finally {
      await host.close();
    }
    if (!last || last.plays.length === 0) {
      const rejects = last?.rejects.map((r) => r.code).filter(Boolean) ?? [];
      throw new CommissioningFailure(
        'play',
        `no play was shown within ${ANSWER_WAIT_MS / 1000} s${rejects.length > 0 ? ` (media refused: ${[...new Set(rejects)].join(', ')})` : ''}`,
        `read agent.log in ${this.dir}`,
      );
    }
    throw new CommissioningFailure(
      'send',
      `the platform did not answer the play within ${ANSWER_WAIT_MS / 1000} s (${last.batches.attempts} send(s))`,
      `check that this site reaches ${this.args.urls.devices}; agent.log in ${this.dir} names each failed send`,
    );
  }

  /**
   * The agent refuses the devices host's TLS certificate (its status: `network.tls_refused`, kept from the first
   * refused call): no play can reach the platform, and retrying until the 90 s are up would only hide why. At a site
   * this is most often a TLS-intercepting proxy presenting its own CA's certificate.
   */
  private stopOnRefusedCertificate(status: AgentStatus | null): void {
    const devices = this.args.urls.devices;
    const origin = URL.canParse(devices) ? new URL(devices).origin : devices;
    const refusal = status?.network.tls_refused.find((r) => r.origin === origin);
    if (!refusal) return;
    // Sending is what it stops, whether or not the play has ended yet (status records go the same way).
    this.step = 'send';
    throw new CommissioningFailure(
      'send',
      `the devices host ${origin} presents a TLS certificate that is not the platform's (${refusal.detail})`,
      "this site's network may intercept TLS (a proxy or firewall inspecting HTTPS): let the devices host through untouched, or check --platform devices=; nothing was sent to it",
    );
  }

  /** Revokes what this run enrolled; says what is left behind. Bounded: a few seconds at most. */
  async cleanUp(): Promise<string> {
    const parts: string[] = [];
    // Calls of their own: the run's signal may be aborted (Ctrl-C) and the cleanup must still be made.
    const admin = new ConsoleClient(this.args.urls.api, this.args.adminKey, CLEANUP_TIMEOUT_MS);
    if (this.deviceId) {
      try {
        await admin.revokeDevice(this.deviceId);
        parts.push(`device ${this.deviceId} was enrolled and is now revoked`);
      } catch {
        parts.push(
          `device ${this.deviceId} was enrolled and could NOT be revoked: revoke it in the console (Fleet)`,
        );
      }
    } else {
      parts.push('no device was enrolled');
    }
    await this.revokeKey(admin);
    if (this.key && !this.keyRevoked) parts.push(`API key ${this.key.id} is left: revoke it in the console`);
    // A folder the run never got to make, or put nothing in (a --dir holding only this run's lock), is not named.
    if (this.dir && holdsFiles(this.dir)) parts.push(`files in ${this.dir}`);
    return parts.join('; ');
  }

  /** The operator's key made for this run: of no use after it (nobody else ever saw it). */
  async revokeKey(
    admin = new ConsoleClient(this.args.urls.api, this.args.adminKey, CLEANUP_TIMEOUT_MS),
  ): Promise<void> {
    if (!this.key || this.keyRevoked) return;
    try {
      await admin.revokeApiKey(this.key.id);
      this.keyRevoked = true;
    } catch {
      // said by cleanUp when it matters (a failed run); a successful run's key stays listed in the console
    }
  }
}
