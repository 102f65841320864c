import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import {
  type AgentConfig,
  AgentError,
  type AgentStatus,
  loadConfig,
  openAgentDatabase,
  readStatus,
  systemFreeSpace,
} from '@ooh/agent';
import { type AgentLogSummary, readAgentLog } from '../truth/agent-log.js';
import { LogSnapshotError, snapshotAgentLog } from '../truth/log-snapshot.js';

/**
 * `hardware-sim check <player-folder | agent.json | data-folder> [--json]`: a real player's queue, read-only, while
 * its agent runs or not. Nothing is written into the player's folder (the play log is read from a copy:
 * truth/log-snapshot.ts). A target it cannot inspect is one line, `hardware-sim: check: <code>: <what is wrong>:
 * <what to do>`, and with --json a `{"target", "problem": {code, message, action}}` document on stdout.
 *
 * Exit codes: 0 nothing wrong; 1 the player has a problem (PROBLEM lines, or its play log is missing, empty or
 * damaged); 2 not inspected (not a player, not readable, a config or key the agent refuses, a log from a newer agent).
 */

export interface CheckIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

export type CheckProblemCode =
  | 'target_missing'
  | 'target_unreadable'
  | 'not_a_player'
  | 'data_dir_missing'
  | 'log_missing'
  | 'log_unreadable'
  | 'log_empty'
  | 'log_corrupt'
  | 'log_newer'
  | 'log_copy_failed'
  | AgentError['code'];

/** Why a target could not be inspected: a stable code, what is wrong, what to do, and the exit code. */
export class CheckProblem extends Error {
  constructor(
    readonly code: CheckProblemCode,
    message: string,
    readonly action: string,
    readonly exitCode: 1 | 2,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'CheckProblem';
  }
}

const RUN_AS_OWNER = "run check as the player's user (or with sudo)";
const COPY_ROOM =
  'free space there, or set TMPDIR to a folder with room for a copy of the play log (on another volume); the player was not inspected';
/** Errors of a write that failed for want of room or rights where the copy is made, not because of the log. */
const COPY_WRITE_ERROR =
  /^(ENOSPC|EDQUOT|EROFS|EACCES|EPERM|ENOENT|ENOTDIR|EIO|SQLITE_FULL|SQLITE_READONLY|SQLITE_CANTOPEN|SQLITE_IOERR)/;

/** The temporary copy could not be made: check answers that, not a stack trace (exit 2: not inspected). */
function copyProblem(where: string, cause: unknown): CheckProblem {
  const code = errnoOf(cause) ?? 'error';
  return new CheckProblem(
    'log_copy_failed',
    `no copy of the play log could be made in ${where} (${code})`,
    COPY_ROOM,
    2,
    { cause },
  );
}

const GIVE_PLAYER =
  "give the player's folder (the one holding agent.json, e.g. /var/lib/ooh-player), its agent.json or its data folder";

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | null)?.code;
}

/** The player's agent.json for a folder, a config file or a data folder (agent.json beside it). */
export function findConfig(target: string): string {
  const path = resolve(target);
  let stat: ReturnType<typeof statSync>;
  try {
    stat = statSync(path);
  } catch (cause) {
    const code = errnoOf(cause);
    if (code === 'EACCES' || code === 'EPERM') {
      throw new CheckProblem('target_unreadable', `${path} cannot be read (${code})`, RUN_AS_OWNER, 2, {
        cause,
      });
    }
    throw new CheckProblem('target_missing', `${path} does not exist`, `check the path: ${GIVE_PLAYER}`, 2, {
      cause,
    });
  }
  if (stat.isFile()) {
    // A config is a JSON object: a file that does not start as one (the play log, an image) is not a broken config
    // to "fix" but the wrong file; the play log above all must not be touched.
    const start = firstBytes(path);
    if (start !== null && !/^\s*\{/.test(start.replace(/^\uFEFF/, ''))) {
      const what = start.startsWith('SQLite format 3\0') ? 'a SQLite database (the play log?)' : 'not JSON';
      throw new CheckProblem('not_a_player', `${path} is ${what}, not a player's agent.json`, GIVE_PLAYER, 2);
    }
    return path;
  }
  if (!stat.isDirectory()) {
    throw new CheckProblem('not_a_player', `${path} is neither a folder nor a file`, GIVE_PLAYER, 2);
  }
  for (const candidate of [join(path, 'agent.json'), join(dirname(path), 'agent.json')]) {
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch (cause) {
      const code = errnoOf(cause);
      if (code === 'EACCES' || code === 'EPERM') {
        throw new CheckProblem(
          'target_unreadable',
          `${dirname(candidate)} cannot be read (${code})`,
          RUN_AS_OWNER,
          2,
          { cause },
        );
      }
    }
  }
  throw new CheckProblem('not_a_player', `no agent.json in ${path} or beside it`, GIVE_PLAYER, 2);
}

/** The first bytes of a file (as latin1), or null if it cannot be read (loadConfig then says why). */
function firstBytes(path: string): string | null {
  try {
    const fd = openSync(path, 'r');
    try {
      const buffer = Buffer.alloc(64);
      return buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, 0)).toString('latin1');
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
}

/** What to do about each error the agent core raises while its files are read. */
function agentProblem(error: AgentError, configFile: string): CheckProblem {
  const errno = errnoOf(error.cause);
  if (errno === 'EACCES' || errno === 'EPERM') {
    return new CheckProblem('target_unreadable', error.message, RUN_AS_OWNER, 2, { cause: error });
  }
  const actions: Partial<Record<AgentError['code'], string>> = {
    config_missing: `check the path: ${GIVE_PLAYER}`,
    config_invalid: `fix ${configFile} (its keys: apps/agent/README.md, "CLI"), or give the player's own agent.json`,
    identity_missing:
      "restore the player's data folder (its device key), or set the player up again (agent init)",
    identity_invalid: "install the console's enrolment files again (agent install <folder>)",
    database_newer:
      'this hardware-sim is older than the agent on the player: check with the version the player runs',
  };
  return new CheckProblem(
    error.code === 'database_newer' ? 'log_newer' : error.code,
    error.message,
    actions[error.code] ?? 'see apps/agent/README.md',
    2,
    { cause: error },
  );
}

function logProblem(error: LogSnapshotError): CheckProblem {
  switch (error.code) {
    case 'log_missing':
      return new CheckProblem(
        error.code,
        error.message,
        'the agent has not run with this config yet (start it), or its log was moved: look for it before starting the agent',
        1,
        { cause: error },
      );
    case 'log_unreadable':
      return new CheckProblem(error.code, error.message, RUN_AS_OWNER, 2, { cause: error });
    case 'log_empty':
      return new CheckProblem(
        error.code,
        error.message,
        'it holds no play: stop the agent, move the file aside and start the agent again (it makes a new log)',
        1,
        { cause: error },
      );
    case 'log_copy_failed':
      return new CheckProblem(error.code, error.message, COPY_ROOM, 2, { cause: error });
    case 'log_corrupt':
      return new CheckProblem(
        error.code,
        error.message,
        "do not delete it (plays not yet sent are in it): stop the agent, copy the player's data folder for support, check the disk",
        1,
        { cause: error },
      );
  }
}

interface Inspection {
  configFile: string;
  config: AgentConfig;
  status: AgentStatus;
  log: AgentLogSummary;
}

/**
 * Reads the player as its agent would, from a copy of its play log (in a temporary folder, removed after): opening
 * the log itself, even read-only, leaves SQLite's -wal and -shm beside it, so readStatus is given the copy (`dataDir` the copy's folder, with the
 * revocation list and renewal state beside it; key and certificates are read where they are). What readStatus says
 * of the data folder's volume and files is then said of the real ones.
 */
async function inspect(target: string): Promise<Inspection> {
  const configFile = findConfig(target);
  let config: AgentConfig;
  try {
    config = loadConfig(configFile);
  } catch (error) {
    if (error instanceof AgentError) throw agentProblem(error, configFile);
    throw error;
  }
  const dataDir = config.dataDir;
  let dataStat: ReturnType<typeof statSync> | null = null;
  try {
    dataStat = statSync(dataDir);
  } catch (cause) {
    const code = errnoOf(cause);
    if (code === 'EACCES' || code === 'EPERM') {
      throw new CheckProblem('target_unreadable', `${dataDir} cannot be read (${code})`, RUN_AS_OWNER, 2, {
        cause,
      });
    }
  }
  if (!dataStat?.isDirectory()) {
    throw new CheckProblem(
      'data_dir_missing',
      `the data folder ${dataDir} named by ${configFile} does not exist`,
      "fix data_dir in agent.json, or restore the player's data folder (its key and play log)",
      2,
    );
  }
  const databaseFile = join(dataDir, 'agent.sqlite');
  let copyDir: string;
  try {
    copyDir = mkdtempSync(join(os.tmpdir(), 'hardware-sim-check-'));
  } catch (cause) {
    throw copyProblem(os.tmpdir(), cause);
  }
  try {
    try {
      snapshotAgentLog(databaseFile, join(copyDir, 'agent.sqlite'));
    } catch (error) {
      if (error instanceof LogSnapshotError) throw logProblem(error);
      throw error;
    }
    // readStatus reads a log of this build's schema only, and never migrates one; the copy is this command's to
    // bring up to date, so a player running an older agent is read as this build reads it.
    try {
      openAgentDatabase(join(copyDir, 'agent.sqlite')).close();
    } catch (error) {
      if (error instanceof AgentError) throw agentProblem(error, configFile);
      // Migrating the copy writes to it: a full temporary folder fails here too.
      if (COPY_WRITE_ERROR.test(errnoOf(error) ?? '')) throw copyProblem(copyDir, error);
      throw error;
    }
    copyIfThere(join(dataDir, 'revocations.json'), join(copyDir, 'revocations.json'));
    // A renewal being promoted is finished by whoever loads the credentials (renaming the key and certificate
    // files): that is the agent's to do at its next start, never an inspection's. Such a state is not copied.
    const renewal = join(dataDir, 'renewal.json');
    if (existsSync(renewal) && !readFileSync(renewal, 'utf8').includes('"promoting"')) {
      copyIfThere(renewal, join(copyDir, 'renewal.json'));
    }
    let status: AgentStatus;
    try {
      status = await readStatus(
        { ...config, dataDir: copyDir },
        { freeSpace: (path) => systemFreeSpace(path === copyDir ? dataDir : path) },
      );
    } catch (error) {
      if (error instanceof AgentError) throw agentProblem(error, configFile);
      throw error;
    }
    status.storage.database.file_bytes = sizeOf(databaseFile);
    status.storage.database.wal_bytes = sizeOf(`${databaseFile}-wal`);
    for (const volume of status.storage.disk.volumes) if (volume.path === copyDir) volume.path = dataDir;
    const log = readAgentLog(join(copyDir, 'agent.sqlite'));
    return { configFile, config: { ...config, dataDir }, status, log };
  } finally {
    rmSync(copyDir, { recursive: true, force: true });
  }
}

/** A file of the player's copied into the temporary folder; a failure to write there is a `log_copy_failed`. */
function copyIfThere(from: string, to: string): void {
  if (!existsSync(from)) return;
  const bytes = readFileSync(from);
  try {
    writeFileSync(to, bytes, { mode: 0o600 });
  } catch (cause) {
    throw copyProblem(dirname(to), cause);
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

export async function checkCommand(target: string, json: boolean, io: CheckIo): Promise<number> {
  let inspection: Inspection;
  try {
    inspection = await inspect(target);
  } catch (error) {
    if (!(error instanceof CheckProblem)) throw error;
    // One line for whoever reads the terminal; with --json the same as a document a fleet script reads.
    io.err(`hardware-sim: check: ${error.code}: ${error.message}: ${error.action}\n`);
    if (json) {
      io.out(
        `${JSON.stringify({ target: resolve(target), problem: { code: error.code, message: error.message, action: error.action } }, null, 2)}\n`,
      );
    }
    return error.exitCode;
  }
  const { configFile, config, status, log } = inspection;
  const unsent = log.plays.filter((p) => !p.acknowledged).length;
  const refused = log.answered.filter((a) => a.status === 'refused');
  const flagged = log.answered.filter((a) => a.status === 'flagged');
  const problems: string[] = [];
  if (status.shipping.alert)
    problems.push(
      `shipping stopped: ${status.shipping.alert.code} on batch ${status.shipping.alert.batch_seq}`,
    );
  if (status.identity.certificate?.state === 'expired')
    problems.push('the certificate has expired: enrol the device again');
  if (log.batches.terminal.length > 0)
    problems.push(`batches refused for good: ${log.batches.terminal.join(', ')}`);
  const stuck = status.shipping.stuck;
  if (stuck)
    problems.push(
      `batch ${stuck.batch_seq} stuck since ${stuck.since}: ${stuck.failures} failed sends, last ${stuck.last_answer ?? 'unknown'}`,
    );
  // apps/agent/README.md "Retention and disk space": below the hard threshold only slot content plays.
  const storage = status.storage;
  if (storage.disk.state === 'full')
    problems.push(
      `the disk is full (${storage.disk.free_bytes ?? '?'} bytes free, hard threshold ${storage.disk.hard_free_bytes}): only slot content plays`,
    );
  if (json) {
    io.out(
      `${JSON.stringify({ config: configFile, config_warnings: config.warnings, status, log: { ...log, plays: undefined, answered: undefined }, unsent, refused, flagged, problems }, null, 2)}\n`,
    );
    return problems.length > 0 ? 1 : 0;
  }
  const certificate = status.identity.certificate;
  const lines = [
    `player          ${configFile}`,
    `device          ${status.device_id ?? '(not enrolled)'} at ${status.structure}`,
    `certificate     ${certificate ? `${certificate.state} until ${certificate.not_after} (${certificate.days_left} days)` : 'none: signed channel only'}`,
    `clock offset    ${status.clock.offset_ms} ms`,
    `mode            ${status.mode}`,
    `queue           ${status.queue.depth} record(s) not acknowledged (${status.queue.unbatched} not yet in a batch); last seq ${status.queue.last_seq}`,
    `plays           ${log.plays.length} logged, ${unsent} not yet acknowledged`,
    `batches         ${log.batches.cut} cut, ${log.batches.answered} answered (${log.batches.duplicateAnswers} as repeats), ${log.batches.attempts} sends`,
    `answers         ${log.batches.received} received, ${log.batches.accepted} accepted, ${log.batches.duplicates} duplicates, ${log.batches.refused} refused, ${log.batches.flagged} flagged`,
    `last send       ${status.shipping.lastSend ? `${status.shipping.lastSend.at} (batch ${status.shipping.lastSend.batch_seq})` : 'never'}`,
    `revocations     ${status.revocation_list_version === null ? 'no list yet' : `version ${status.revocation_list_version}`}`,
    `storage         database ${mib(storage.database.file_bytes)} + wal ${mib(storage.database.wal_bytes)}; disk ${storage.disk.state}, ${storage.disk.free_bytes === null ? '?' : mib(storage.disk.free_bytes)} free (warning below ${mib(storage.disk.warn_free_bytes)}, hard below ${mib(storage.disk.hard_free_bytes)}); oldest unacknowledged ${storage.oldest_unacknowledged ? `seq ${storage.oldest_unacknowledged.seq}, logged ${storage.oldest_unacknowledged.logged_at}` : 'none'}; ${storage.retention.kept.records} records kept`,
  ];
  if (refused.length > 0) {
    const reasons = new Map<string, number>();
    for (const r of refused) reasons.set(r.reason ?? '?', (reasons.get(r.reason ?? '?') ?? 0) + 1);
    lines.push(`refused         ${[...reasons].map(([reason, n]) => `${n} ${reason}`).join(', ')}`);
  }
  if (flagged.length > 0) {
    const flags = new Map<string, number>();
    for (const f of flagged) for (const flag of f.flags ?? []) flags.set(flag, (flags.get(flag) ?? 0) + 1);
    lines.push(`flagged         ${[...flags].map(([flag, n]) => `${n} ${flag}`).join(', ')}`);
  }
  // Records the platform could not take while it took others (apps/agent/README.md, "Nothing resent forever"): kept on
  // the player, never counted; not a problem of the player's own (the exit code stays).
  const setAside = status.shipping.setAside;
  if (setAside.records > 0) {
    lines.push(`set aside       ${setAside.records} record(s) the platform could not take`);
    for (const record of setAside.newest) {
      lines.push(
        `set aside       seq ${record.seq} ${record.kind} (${record.set_aside_at}): ${record.reason}`,
      );
    }
  }
  for (const reject of log.rejects.slice(-10)) {
    lines.push(`reject          ${reject.at} ${reject.code} ${reject.file ?? ''}`);
  }
  // Not problems (the exit code stays): a key the agent ignores, misspelt or from a newer agent.
  for (const warning of config.warnings) lines.push(`warning         ${warning}`);
  for (const problem of problems) lines.push(`PROBLEM         ${problem}`);
  io.out(`${lines.join('\n')}\n`);
  return problems.length > 0 ? 1 : 0;
}
