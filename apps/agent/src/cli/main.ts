#!/usr/bin/env node
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { splitPemChain } from '@ooh/crypto';
import { type AgentStatus, createAgent, formatOffset, readStatus } from '../agent.js';
import { type AgentConfig, configTemplate, loadConfig } from '../config/config.js';
import { AgentError } from '../errors.js';
import { prepareEnrolment } from '../identity/enrolment.js';
import { findInstallFiles, installEnrolment } from '../identity/install.js';
import { jsonLogger } from '../logger.js';
import { heldRevocationConflict, type RevocationConflict } from '../media/revocations.js';

const USAGE = `usage: agent <command> [--config <file>]

commands:
  init     create the device key (P-256, mode 0600) if there is none and print what to enter in the console
           --write-config --structure <code> --agents-url <url> --devices-url <url> --verify-url <url> [--force]
             first write a complete config file (every setting at its default); an existing one is kept
             unless --force
  install <folder-or-files...> [--force]
           install what the console gave at enrolment (device-cert.pem, device-chain.pem, server-ca.pem,
           authority-root.pem, or the folder they were downloaded to): checks the certificate is for this
           player's key and issued by the chain, then writes the files to the config's paths and the device id
           (from the certificate) into the config; nothing is written when a check fails (exit 1). --force
           replaces a different device_id (the player was enrolled anew)
  status   show identity, certificate expiry, queue depth, last successful send, clock offset, a stuck batch,
           records set aside, database size, free space and retention, times in local time  [--json: UTC];
           exit 1 when the player cannot work as it is (certificate, shipping stopped or stuck, a platform host
           whose TLS certificate is refused, disk below its hard threshold, two different revocation lists of the
           version held), exit 3 when it is not enrolled (no device_id)
  run      run the agent until interrupted; logs one start-up summary line once started

The config file defaults to $AGENT_CONFIG, else agent.json. It and relative paths given on the command line are
taken from $INIT_CWD when set (the folder \`npm run agent -- ...\` was typed in), else the current folder.
Exit codes: 0 ok, 1 the player cannot work or a check refused, 2 bad arguments or config, 3 not enrolled.
`;

const COMMANDS = ['init', 'install', 'status', 'run'];

/** `agent status` when the config holds no device_id: the player was never enrolled (or not installed yet). */
export const EXIT_NOT_ENROLLED = 3;

/**
 * Where the user is: npm runs scripts from the package root but sets INIT_CWD to the folder it was typed in, so
 * `npm run agent -- init` in /srv/player finds /srv/player/agent.json, not the repository's.
 */
function userDir(): string {
  const initCwd = process.env['INIT_CWD'];
  return initCwd && initCwd.length > 0 ? initCwd : process.cwd();
}

function parseCommandLine(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
      force: { type: 'boolean', default: false },
      'write-config': { type: 'boolean', default: false },
      structure: { type: 'string' },
      'agents-url': { type: 'string' },
      'devices-url': { type: 'string' },
      'verify-url': { type: 'string' },
    },
  });
}

export async function main(
  argv: string[],
  out: (text: string) => void = (t) => process.stdout.write(t),
  err: (text: string) => void = (t) => process.stderr.write(t),
): Promise<number> {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    // node:util throws a TypeError (ERR_PARSE_ARGS_*) for an unknown option or a missing value: bad input, not a bug.
    return usage(err, (error as Error).message);
  }
  const { values, positionals } = parsed;
  const [command, ...extra] = positionals;
  // The command is checked before the config is read: help and a typo need no config file to be answered.
  if (values.help) {
    out(USAGE);
    return 0;
  }
  if (!command) return usage(err, 'no command given');
  if (!COMMANDS.includes(command)) return usage(err, `unknown command "${command}"`);
  if (command === 'install') {
    if (extra.length === 0) return usage(err, 'install needs the files the console gave, or their folder');
  } else if (extra.length > 0) {
    return usage(err, `${command} takes no arguments (got "${extra.join(' ')}")`);
  }
  const here = userDir();
  const configPath = resolve(here, values.config ?? (process.env['AGENT_CONFIG'] || 'agent.json'));
  if (values['write-config']) {
    if (command !== 'init') return usage(err, '--write-config goes with init');
    const missing = ['structure', 'agents-url', 'devices-url', 'verify-url'].filter(
      (name) => !values[name as 'structure'],
    );
    if (missing.length > 0) {
      return usage(err, `init --write-config needs ${missing.map((name) => `--${name}`).join(', ')}`);
    }
    if (existsSync(configPath) && !values.force) {
      err(`agent: ${configPath} exists; it was kept (--force to replace it)
`);
      return 1;
    }
    const template = configTemplate({
      structure: values.structure!,
      agentsUrl: values['agents-url']!,
      devicesUrl: values['devices-url']!,
      verifyUrl: values['verify-url']!,
    });
    mkdirSync(dirname(configPath), { recursive: true });
    writeFileSync(configPath, `${JSON.stringify(template, null, 2)}\n`);
    out(`Wrote ${configPath} (every setting at its default).\n`);
  }
  const config = loadConfig(configPath);
  // `run` logs them at start (createAgent); here the technician who just edited the file sees them at once.
  if (command !== 'run') {
    for (const warning of config.warnings) err(`agent: warning: ${configPath}: ${warning}\n`);
  }

  switch (command) {
    case 'init': {
      const info = await prepareEnrolment(config);
      out(
        [
          info.created
            ? `Created device key ${info.keyFile} (mode 0600).`
            : `Device key ${info.keyFile} already exists; it was kept.`,
          '',
          'Enter in the console (device enrolment):',
          `  structure:        ${config.structure}`,
          `  public key:       ${info.publicKeySpki}`,
          `  key fingerprint:  ${info.publicKeySha256}`,
          '',
          'Certificate request (optional, for a client certificate):',
          info.csrPem.trim(),
          '',
          config.deviceId
            ? `device_id is set (${config.deviceId}).`
            : 'Then download the files the console gives (certificate, chain, server CA, authority root) and run\n' +
              '  agent install <the folder they are in>\n' +
              'which checks them, puts them in place and writes the device id into the config file.',
          '',
        ].join('\n'),
      );
      return 0;
    }
    case 'install': {
      const files = findInstallFiles(extra.map((path) => resolve(here, path)));
      let result: ReturnType<typeof installEnrolment>;
      try {
        result = installEnrolment(config, files, { now: new Date(), force: values.force });
      } catch (error) {
        if (error instanceof AgentError && error.code === 'install_refused') {
          err(`agent: refused, nothing was written: ${error.message}\n`);
          return 1;
        }
        throw error;
      }
      out(
        [
          `Installed device ${result.deviceId}: certificate serial ${result.certificate.serialHex}, expires ${formatLocalTime(result.certificate.notAfter)}.`,
          ...result.written.map((path) => `  wrote ${path}`),
          ...(files.chain ? [] : ['  (no chain given: the one in place was kept)']),
          'Next: agent status, then agent run.',
          '',
        ].join('\n'),
      );
      return 0;
    }
    case 'status': {
      if (!config.deviceId) {
        // Before `agent install` the authority root and the certificate are not there yet: nothing else to read.
        const text = [
          'device:          (not enrolled: device_id not set)',
          `structure:       ${config.structure}`,
          existsSync(config.keyFile)
            ? 'next:            enrol the key `agent init` printed in the console, then `agent install <the downloaded files>`'
            : 'next:            `agent init` (creates the device key), enrol it in the console, then `agent install`',
          '',
        ].join('\n');
        out(
          values.json
            ? `${JSON.stringify({ device_id: null, structure: config.structure, enrolled: false }, null, 2)}\n`
            : text,
        );
        return EXIT_NOT_ENROLLED;
      }
      const status = await readStatus(config);
      // Two different lists signed with the version held (a platform restored from a backup): readStatus cannot tell.
      const revocationConflict = await heldRevocationConflict({
        cachePath: join(config.dataDir, 'revocations.json'),
        trustedRootsPem: splitPemChain(readFileSync(config.authorityRootFile, 'utf8')),
        now: new Date(Date.now() + status.clock.offset_ms),
      });
      out(
        values.json
          ? `${JSON.stringify(revocationConflict ? { ...status, revocation_conflict: revocationConflict } : status, null, 2)}\n`
          : formatStatus(status, revocationConflict),
      );
      // Non-zero whenever the player cannot work as it is: a technician's script checks the exit status. A stuck
      // batch is such a case (the records behind it wait); records set aside alone are not (shipping goes on). A disk
      // below its hard threshold is (billable content stops); below the warning threshold only is not.
      const certificate = status.identity.certificate?.state;
      return certificate === 'expired' ||
        certificate === 'not_yet_valid' ||
        status.shipping.alert ||
        status.shipping.stuck ||
        status.network.tls_refused.length > 0 ||
        status.clock.refused_offset_ms !== null ||
        status.storage.disk.state === 'full' ||
        revocationConflict !== null
        ? 1
        : 0;
    }
    case 'run': {
      const logger = jsonLogger();
      const agent = await createAgent({ config, logger });
      await agent.start();
      logger.info(startupSummary(agent.status(), config), 'agent started');
      await new Promise<void>((resolveStop) => {
        const stop = () => resolveStop();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      await agent.close();
      return 0;
    }
    default:
      return usage(err, `unknown command "${command}"`);
  }
}

function usage(err: (text: string) => void, problem: string): number {
  err(`agent: ${problem}\n\n${USAGE}`);
  return 2;
}

/**
 * A time as the technician's clock shows it, with the zone: `2026-11-20 11:01:00 +05:00`. The player's own time
 * zone (TZ, else the system's); --json keeps UTC ISO strings for scripts.
 */
export function formatLocalTime(at: Date | string): string {
  const date = typeof at === 'string' ? new Date(at) : at;
  if (Number.isNaN(date.getTime())) return String(at);
  const pad = (n: number) => String(n).padStart(2, '0');
  const offset = -date.getTimezoneOffset();
  const zone = `${offset < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())} ${zone}`;
}

/** The one line `agent run` logs once started: what a technician checks first in a log. */
export function startupSummary(status: AgentStatus, config: AgentConfig): Record<string, unknown> {
  const certificate = status.identity.certificate;
  return {
    device_id: status.device_id,
    structure: status.structure,
    agents_url: config.agentsUrl,
    devices_url: config.devicesUrl,
    verify_url: config.verifyUrl,
    // Certificate channel (mTLS to the devices host) while the certificate is usable, else the signed channel.
    channel:
      certificate && (certificate.state === 'valid' || certificate.state === 'renewal_due')
        ? 'certificate'
        : 'signed',
    queue_depth: status.queue.depth,
    media: status.media,
    certificate_not_after: certificate?.not_after ?? null,
    certificate_days_left: certificate?.days_left ?? null,
    revocation_list_version: status.revocation_list_version,
    mode: status.mode,
  };
}

/** What each refusal of a server certificate means, for a technician (net/http-client.ts TransportErrorCode). */
const TLS_REFUSAL_WORDS: Record<string, string> = {
  tls_untrusted: "presents a certificate not issued by the platform's CA",
  tls_wrong_host: 'presents a certificate for another host',
  tls_expired: 'presents an expired certificate',
  tls_not_yet_valid: 'presents a certificate not valid yet (clock?)',
  tls_refused: "does not set up TLS with the platform's certificate",
};

export function formatStatus(
  status: AgentStatus,
  revocationConflict: RevocationConflict | null = null,
): string {
  const t = formatLocalTime;
  const certificate = status.identity.certificate;
  const lines = [
    `device:          ${status.device_id ?? '(not enrolled: device_id not set)'}`,
    `structure:       ${status.structure}`,
    `public key:      sha256 ${status.identity.public_key_sha256}`,
    certificate
      ? `certificate:     ${certificate.state.toUpperCase()} serial ${certificate.serial}, expires ${t(certificate.not_after)} (${certificate.days_left} days)`
      : 'certificate:     none (signed channel only)',
  ];
  if (certificate?.state === 'expired') {
    lines.push('                 the certificate has EXPIRED: renewal is impossible; enrol the device again');
  }
  if (certificate?.state === 'not_yet_valid') {
    // Not expired: issued after the instant the clock shows, so the clock is the likelier fault.
    lines.push('                 certificate not yet valid (clock?): check the board clock');
  }
  if (status.identity.renewal) lines.push(`renewal:         ${status.identity.renewal.state}`);
  lines.push(
    `queue:           ${status.queue.depth} records not yet acknowledged (last seq ${status.queue.last_seq})`,
    `last send:       ${status.shipping.lastSend ? `${t(status.shipping.lastSend.at)} (batch ${status.shipping.lastSend.batch_seq})` : 'never'}`,
  );
  if (status.shipping.alert) {
    lines.push(
      `SHIPPING STOPPED: ${status.shipping.alert.status} ${status.shipping.alert.code} on batch ${status.shipping.alert.batch_seq} at ${t(status.shipping.alert.at)}`,
    );
  }
  const stuck = status.shipping.stuck;
  if (stuck) {
    lines.push(
      `STUCK:           batch ${stuck.batch_seq} (${stuck.records} records) failing since ${t(stuck.since)}: ${stuck.attempts} sends, ${stuck.failures} failed (${stuck.server_errors} answered 5xx); last: ${stuck.last_answer ?? 'unknown'}`,
      '                 the records behind it wait; it is resent with backoff (see apps/agent/README.md, "Nothing resent forever")',
    );
  }
  for (const refusal of status.network.tls_refused) {
    lines.push(
      `TLS REFUSED:     ${refusal.origin} ${TLS_REFUSAL_WORDS[refusal.kind] ?? refusal.kind} (${refusal.kind}) since ${t(refusal.since)}, ${refusal.attempts} call(s), last ${t(refusal.last_at)}`,
      '                 nothing was sent to it; check the network (a proxy, DNS) and server_ca_file',
    );
  }
  const setAside = status.shipping.setAside;
  if (setAside.records > 0) {
    lines.push(
      `set aside:       ${setAside.records} record(s) the platform could not take while it took others (kept, not sent again)`,
    );
    for (const record of setAside.newest) {
      lines.push(
        `                 seq ${record.seq} ${record.kind} logged ${t(record.logged_at)}, set aside ${t(record.set_aside_at)}: ${record.reason}`,
      );
    }
  }
  lines.push(
    `clock offset:    ${status.clock.offset_ms} ms (platform minus board clock)${
      status.clock.state === 'implausible'
        ? '; the clock is IMPLAUSIBLE (not set?): nothing plays until it is'
        : status.clock.state === 'unknown'
          ? ''
          : `; ${status.clock.state}`
    }`,
    ...heldClockLines(status),
    ...refusedClockLines(status),
    `mode:            ${status.mode}`,
    `revocations:     ${status.revocation_list_version === null ? 'no list yet' : `version ${status.revocation_list_version}`}`,
    ...(revocationConflict
      ? [
          `REVOCATION LIST CONFLICT: two different lists signed as version ${revocationConflict.version} ` +
            `(differing: ${revocationConflict.differing.join(', ') || 'revoked_at or issued_at only'}); ` +
            'every approval either names stays revoked. The platform was restored from a backup: tell its operator',
        ]
      : []),
    ...storageLines(status),
    '',
  );
  return lines.join('\n');
}

/**
 * A jump of the clock a Date header showed once and the running agent holds until a later request confirms it
 * (CorrectedClock.heldOffset): nothing when none is held.
 */
function heldClockLines(status: AgentStatus): string[] {
  const held = status.clock.held_offset_ms;
  if (held === null) return [];
  const jump = (held - status.clock.offset_ms) / 1000;
  return [
    `clock held:      a jump of ${jump >= 0 ? '+' : ''}${jump.toFixed(1)} s (to ${held} ms) seen once, held until a later request confirms it`,
  ];
}

/**
 * The platform's time refused as beyond max_clock_correction_ms: the board clock is that far off, and only someone
 * setting it can help (CorrectedClock.refusedOffset).
 */
function refusedClockLines(status: AgentStatus): string[] {
  const refused = status.clock.refused_offset_ms;
  if (refused === null) return [];
  return [
    `clock refused:   the platform's clock is ${formatOffset(refused)} this board's, beyond max_clock_correction_ms: not taken; set the board clock (NTP)`,
  ];
}

/** Bytes as a person reads them: 1.5 GiB, 312.0 MiB, 48.0 KiB, 900 B. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** 3 d 4 h, 2 h 5 min, 12 min, 40 s. */
function formatAge(seconds: number): string {
  const d = Math.floor(seconds / 86_400);
  const h = Math.floor((seconds % 86_400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  if (d > 0) return `${d} d ${h} h`;
  if (h > 0) return `${h} h ${m} min`;
  if (m > 0) return `${m} min`;
  return `${seconds} s`;
}

function storageLines(status: AgentStatus): string[] {
  const { database, disk, oldest_unacknowledged: oldest, retention } = status.storage;
  const days = (ms: number) => `${Math.round((ms / 86_400_000) * 10) / 10} days`;
  const lines = [
    `database:        ${formatBytes(database.file_bytes + database.wal_bytes)} (file ${formatBytes(database.file_bytes)} + wal ${formatBytes(database.wal_bytes)})${
      database.vacuum === 'pending'
        ? '; incremental vacuum not on yet (turned on by the agent once it can)'
        : ''
    }`,
    `disk:            ${
      disk.state === 'unknown' ? 'UNKNOWN' : disk.state.toUpperCase()
    }, ${disk.free_bytes === null ? 'free space unknown' : `${formatBytes(disk.free_bytes)} free`} (warning below ${formatBytes(disk.warn_free_bytes)}, hard below ${formatBytes(disk.hard_free_bytes)})`,
  ];
  for (const volume of disk.volumes) {
    lines.push(
      `                 ${volume.name} ${volume.path}: ${
        volume.free_bytes === null
          ? `cannot be read (${volume.error ?? 'unknown'})`
          : `${formatBytes(volume.free_bytes)} free of ${formatBytes(volume.total_bytes ?? 0)}`
      }`,
    );
  }
  if (disk.state === 'full') {
    lines.push(
      '                 DISK FULL: only authority slot content plays until space is back (apps/agent/README.md, "Retention and disk space")',
    );
  } else if (disk.state === 'low') {
    lines.push('                 disk space LOW: answered history is kept one day only; free some space');
  }
  if (disk.write_failure) lines.push(`                 a write failed: ${disk.write_failure}`);
  lines.push(
    oldest
      ? `oldest unacked:  seq ${oldest.seq}, logged ${formatLocalTime(oldest.logged_at)} (${formatAge(oldest.age_seconds)} ago)`
      : 'oldest unacked:  none (every record answered by the platform)',
    `retention:       answered batches kept ${days(retention.keep_acknowledged_ms)}, records set aside ${days(retention.keep_set_aside_ms)}; ${retention.kept.records} records in ${retention.kept.batches} batches kept`,
  );
  const last = retention.last_prune;
  lines.push(
    last
      ? `                 last pass ${formatLocalTime(last.at)}: ${last.records} records in ${last.batches} batches removed, ${formatBytes(last.bytes_freed)} given back${last.under_pressure ? ' (disk pressure: answered history kept one day only)' : ''}`
      : '                 no retention pass yet',
  );
  return lines;
}

const invokedDirectly =
  process.argv[1] !== undefined && import.meta.url === new URL(`file://${resolve(process.argv[1])}`).href;
if (invokedDirectly) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      if (error instanceof AgentError) {
        process.stderr.write(`agent: ${error.code}: ${error.message}\n`);
        process.exitCode = 2;
      } else {
        process.stderr.write(`agent: ${(error as Error).stack ?? String(error)}\n`);
        process.exitCode = 1;
      }
    },
  );
}
