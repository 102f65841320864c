import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { AgentError } from '../errors.js';

/**
 * The agent's configuration, read from one JSON file (snake_case keys on disk, camelCase here). Relative
 * paths are relative to the directory of the file. Example:
 *
 * ```json
 * {
 *   "device_id": "6f1c…",               // from the console at enrolment; needed for `agent run`
 *   "structure": "ALM-0001",
 *   "platform": {
 *     "agents_url": "https://agents.example.kz",
 *     "devices_url": "https://devices.example.kz",
 *     "verify_url": "https://verify.example.kz"
 *   },
 *   "data_dir": "data",
 *   "media_dir": "media",
 *   "authority_root_file": "authority-root.pem"
 * }
 * ```
 */
export interface AgentConfig {
  /** Path of the file this was read from (null when built in memory). */
  configFile: string | null;
  /**
   * Keys this agent does not know, each with its full path (`unknown key "shiping" (ignored; did you mean
   * "shipping"?)`): a misspelling, or a key of a newer agent. Reported, never refused, so a config written for a
   * newer agent still starts an older one. The agent logs them at start; `agent init|status` and
   * `hardware-sim check` show them.
   */
  warnings: string[];
  deviceId: string | null;
  structure: string;
  agentsUrl: string;
  devicesUrl: string;
  verifyUrl: string;
  dataDir: string;
  mediaDir: string;
  /** The pinned authority root that signs approval envelopes and revocation lists (DESIGN.md §4). */
  authorityRootFile: string;
  /** CA bundle trusted for the platform's TLS server certificates; system roots when null. */
  serverCaFile: string | null;
  /** Device private key (P-256, PKCS#8 PEM, mode 0600). */
  keyFile: string;
  /** Device client certificate (PEM); absent until the console issued one. */
  certificateFile: string;
  /** Chain up to the device CA (PEM), sent after the client certificate. */
  caChainFile: string;
  /** Hardware driver name; null = no board (the stub that reads nothing). */
  board: string | null;
  imageDurationMs: number;
  shipping: {
    minIntervalMs: number;
    idleIntervalMs: number;
    backoffBaseMs: number;
    backoffCapMs: number;
  };
  revocationRefreshMs: number;
  /** At most an hour (DESIGN.md §9: renewal "checked against the wall clock at least hourly"). */
  renewalCheckMs: number;
  mediaRecheckMs: number;
  offlineAfterMs: number;
  /** Largest clock correction taken from the platform's Date header. */
  maxClockCorrectionMs: number;
  mediaStabilityMs: number;
  sidecarGraceMs: number;
  /**
   * What the play log keeps (README "Retention and disk space"): batches the platform answered, with their records,
   * for `keepAcknowledgedMs` after the answer; records set aside (never taken by the platform) for `keepSetAsideMs`.
   * Nothing the platform has not answered is ever removed.
   */
  retention: {
    keepAcknowledgedMs: number;
    keepSetAsideMs: number;
    /** How often acknowledged batches past their time are removed (and the file's space given back). */
    pruneIntervalMs: number;
  };
  /**
   * Free space on the volumes of `data_dir` and `media_dir`: below `warnFreeBytes` the player reports it; below
   * `hardFreeBytes` it stops playing content whose plays must be proven (only authority slot content plays).
   */
  disk: {
    warnFreeBytes: number;
    hardFreeBytes: number;
    checkIntervalMs: number;
  };
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const MIB = 1024 * 1024;

export const CONFIG_DEFAULTS = {
  imageDurationMs: 10_000,
  shipping: {
    // spec Limits: "429 for more than one batch every 10 seconds (burst of 3 allowed)"
    minIntervalMs: 10_000,
    idleIntervalMs: 60_000,
    backoffBaseMs: 2_000,
    backoffCapMs: 10 * 60_000,
  },
  revocationRefreshMs: HOUR_MS,
  renewalCheckMs: HOUR_MS,
  mediaRecheckMs: 60_000,
  offlineAfterMs: 10 * 60_000,
  maxClockCorrectionMs: 24 * HOUR_MS,
  mediaStabilityMs: 2_000,
  sidecarGraceMs: 30_000,
  retention: {
    // Four weeks of answered history for `agent check`, `hardware-sim check` and a technician's audit.
    keepAcknowledgedMs: 28 * DAY_MS,
    // Twice the platform's too_old horizon (90 days): by then a record set aside can never be counted any more,
    // and a technician has had three months more to read it off the player.
    keepSetAsideMs: 180 * DAY_MS,
    pruneIntervalMs: HOUR_MS,
  },
  disk: {
    warnFreeBytes: 512 * MIB,
    hardFreeBytes: 128 * MIB,
    checkIntervalMs: 60_000,
  },
} as const;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function loadConfig(path: string): AgentConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new AgentError('config_missing', `cannot read config file ${path}`, { cause });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (cause) {
    throw new AgentError('config_invalid', `config file ${path} is not JSON`, { cause });
  }
  return parseConfig(raw, dirname(resolve(path)), resolve(path));
}

/**
 * Parses the on-disk form; every problem is listed in one AgentError('config_invalid'). Keys it does not read
 * become `warnings` (and are named in that error too: a misspelt `platfrom` explains "platform is required").
 */
/**
 * A platform URL in plain HTTP to a host other than this machine: anyone on the network between player and platform
 * can answer for the platform there (the platform's answers are not signed): take a batch's records as counted when
 * they never arrived, or set the clock by its Date header. Said, not refused: a site may have a reason (a proxy on the
 * player's own network), and loopback (the simulator, tests) is no network.
 */
function plainHttpWarnings(urls: Record<string, string>): string[] {
  const warnings: string[] = [];
  for (const [key, value] of Object.entries(urls)) {
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      continue;
    }
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    const loopback = host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
    if (parsed.protocol === 'http:' && !loopback) {
      warnings.push(
        `platform.${key} is plain http to ${parsed.host}: the network between player and platform can answer for the platform (use https)`,
      );
    }
  }
  return warnings;
}

export function parseConfig(raw: unknown, baseDir: string, configFile: string | null = null): AgentConfig {
  const problems: string[] = [];
  /** Full paths of the keys the parser reads: whatever else the file holds is unknown to this agent. */
  const known = new Set<string>(['platform', 'shipping', 'retention', 'disk']);
  const root = asObject(raw, '', problems);
  const platform = asObject(root['platform'], 'platform', problems);
  const shipping = root['shipping'] === undefined ? {} : asObject(root['shipping'], 'shipping', problems);
  const retention = root['retention'] === undefined ? {} : asObject(root['retention'], 'retention', problems);
  const disk = root['disk'] === undefined ? {} : asObject(root['disk'], 'disk', problems);

  const str = (
    object: Record<string, unknown>,
    key: string,
    path: string,
    required: boolean,
  ): string | null => {
    known.add(path);
    const value = object[key];
    if (value === undefined || value === null) {
      if (required) problems.push(`${path} is required`);
      return null;
    }
    if (typeof value !== 'string' || value.length === 0) {
      problems.push(`${path} must be a non-empty string`);
      return null;
    }
    return value;
  };
  const url = (key: string): string => {
    const value = str(platform, key, `platform.${key}`, true);
    if (value === null) return '';
    try {
      const parsed = new URL(value);
      if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
        problems.push(`platform.${key} must be http(s)`);
    } catch {
      problems.push(`platform.${key} is not a URL`);
    }
    return value.replace(/\/+$/, '');
  };
  const int = (
    object: Record<string, unknown>,
    key: string,
    path: string,
    fallback: number,
    min = 0,
  ): number => {
    known.add(path);
    const value = object[key];
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
      problems.push(`${path} must be an integer >= ${min}`);
      return fallback;
    }
    return value;
  };
  const path = (key: string, fallback: string | null): string | null => {
    const value = str(root, key, key, false);
    const chosen = value ?? fallback;
    if (chosen === null) return null;
    return isAbsolute(chosen) ? chosen : join(baseDir, chosen);
  };

  const deviceId = str(root, 'device_id', 'device_id', false);
  if (deviceId !== null && !UUID.test(deviceId)) problems.push('device_id must be a UUID');
  const structure = str(root, 'structure', 'structure', true) ?? '';
  const agentsUrl = url('agents_url');
  const devicesUrl = url('devices_url');
  const verifyUrl = url('verify_url');
  const dataDir = path('data_dir', 'data')!;
  const inData = (name: string) => join(dataDir, name);
  const authorityRootFile = str(root, 'authority_root_file', 'authority_root_file', true);
  const renewalCheckMs = int(
    root,
    'renewal_check_ms',
    'renewal_check_ms',
    CONFIG_DEFAULTS.renewalCheckMs,
    1000,
  );
  if (renewalCheckMs > HOUR_MS) problems.push('renewal_check_ms must be at most one hour');
  const board = str(root, 'board', 'board', false);
  const keepAcknowledgedMs = int(
    retention,
    'keep_acknowledged_ms',
    'retention.keep_acknowledged_ms',
    CONFIG_DEFAULTS.retention.keepAcknowledgedMs,
  );
  const keepSetAsideMs = int(
    retention,
    'keep_set_aside_ms',
    'retention.keep_set_aside_ms',
    CONFIG_DEFAULTS.retention.keepSetAsideMs,
  );
  // A record set aside is the only copy of a play the platform never counted: never kept shorter than answered ones.
  if (keepSetAsideMs < keepAcknowledgedMs) {
    problems.push('retention.keep_set_aside_ms must be at least retention.keep_acknowledged_ms');
  }
  const warnFreeBytes = int(
    disk,
    'warn_free_bytes',
    'disk.warn_free_bytes',
    CONFIG_DEFAULTS.disk.warnFreeBytes,
  );
  const hardFreeBytes = int(
    disk,
    'hard_free_bytes',
    'disk.hard_free_bytes',
    CONFIG_DEFAULTS.disk.hardFreeBytes,
  );
  if (hardFreeBytes > warnFreeBytes)
    problems.push('disk.hard_free_bytes must not be above disk.warn_free_bytes');

  const config: Omit<AgentConfig, 'warnings'> = {
    configFile,
    deviceId: deviceId?.toLowerCase() ?? null,
    structure,
    agentsUrl,
    devicesUrl,
    verifyUrl,
    dataDir,
    mediaDir: path('media_dir', 'media')!,
    authorityRootFile: authorityRootFile
      ? isAbsolute(authorityRootFile)
        ? authorityRootFile
        : join(baseDir, authorityRootFile)
      : '',
    serverCaFile: path('server_ca_file', null),
    keyFile: path('key_file', inData('device-key.pem'))!,
    certificateFile: path('certificate_file', inData('device-cert.pem'))!,
    caChainFile: path('ca_chain_file', inData('device-chain.pem'))!,
    board: board === 'none' ? null : board,
    imageDurationMs: int(
      root,
      'image_duration_ms',
      'image_duration_ms',
      CONFIG_DEFAULTS.imageDurationMs,
      1000,
    ),
    shipping: {
      minIntervalMs: int(
        shipping,
        'min_interval_ms',
        'shipping.min_interval_ms',
        CONFIG_DEFAULTS.shipping.minIntervalMs,
      ),
      idleIntervalMs: int(
        shipping,
        'idle_interval_ms',
        'shipping.idle_interval_ms',
        CONFIG_DEFAULTS.shipping.idleIntervalMs,
      ),
      backoffBaseMs: int(
        shipping,
        'backoff_base_ms',
        'shipping.backoff_base_ms',
        CONFIG_DEFAULTS.shipping.backoffBaseMs,
        1,
      ),
      backoffCapMs: int(
        shipping,
        'backoff_cap_ms',
        'shipping.backoff_cap_ms',
        CONFIG_DEFAULTS.shipping.backoffCapMs,
        1,
      ),
    },
    revocationRefreshMs: int(
      root,
      'revocation_refresh_ms',
      'revocation_refresh_ms',
      CONFIG_DEFAULTS.revocationRefreshMs,
      1000,
    ),
    renewalCheckMs,
    mediaRecheckMs: int(root, 'media_recheck_ms', 'media_recheck_ms', CONFIG_DEFAULTS.mediaRecheckMs, 100),
    offlineAfterMs: int(root, 'offline_after_ms', 'offline_after_ms', CONFIG_DEFAULTS.offlineAfterMs),
    maxClockCorrectionMs: int(
      root,
      'max_clock_correction_ms',
      'max_clock_correction_ms',
      CONFIG_DEFAULTS.maxClockCorrectionMs,
    ),
    mediaStabilityMs: int(root, 'media_stability_ms', 'media_stability_ms', CONFIG_DEFAULTS.mediaStabilityMs),
    sidecarGraceMs: int(root, 'sidecar_grace_ms', 'sidecar_grace_ms', CONFIG_DEFAULTS.sidecarGraceMs),
    retention: {
      keepAcknowledgedMs,
      keepSetAsideMs,
      pruneIntervalMs: int(
        retention,
        'prune_interval_ms',
        'retention.prune_interval_ms',
        CONFIG_DEFAULTS.retention.pruneIntervalMs,
        1000,
      ),
    },
    disk: {
      warnFreeBytes,
      hardFreeBytes,
      checkIntervalMs: int(
        disk,
        'check_interval_ms',
        'disk.check_interval_ms',
        CONFIG_DEFAULTS.disk.checkIntervalMs,
        1000,
      ),
    },
  };
  // Only the levels with a fixed set of keys; an unknown key's own contents are not looked into.
  const warnings = [
    ...unknownKeys(root, '', known),
    ...unknownKeys(platform, 'platform.', known),
    ...unknownKeys(shipping, 'shipping.', known),
    ...unknownKeys(retention, 'retention.', known),
    ...unknownKeys(disk, 'disk.', known),
    ...plainHttpWarnings({ agents_url: agentsUrl, devices_url: devicesUrl, verify_url: verifyUrl }),
  ];
  if (problems.length > 0) {
    throw new AgentError('config_invalid', `invalid agent config: ${[...problems, ...warnings].join('; ')}`);
  }
  return { ...config, warnings };
}

function unknownKeys(object: Record<string, unknown>, prefix: string, known: Set<string>): string[] {
  return Object.keys(object)
    .filter((key) => !known.has(prefix + key))
    .map((key) => {
      const hint = likelyMeant(prefix, key, known);
      return `unknown key "${prefix}${key}" (ignored${hint ? `; did you mean "${hint}"?` : ''})`;
    });
}

/**
 * The known key a technician most likely meant: one at the same level spelt nearly alike (case, `_` and `-`
 * aside: `deviceId` → `device_id`), else the same name at another level (`agents_url` → `platform.agents_url`).
 */
function likelyMeant(prefix: string, key: string, known: Set<string>): string | null {
  const fold = (name: string) => name.toLowerCase().replace(/[_-]/g, '');
  const wanted = fold(key);
  const limit = wanted.length <= 4 ? 1 : 2;
  let best: { path: string; distance: number } | null = null;
  for (const path of known) {
    if (!path.startsWith(prefix) || path.slice(prefix.length).includes('.')) continue;
    const distance = editDistance(wanted, fold(path.slice(prefix.length)));
    if (distance <= limit && (best === null || distance < best.distance)) best = { path, distance };
  }
  if (best) return best.path;
  for (const path of known) {
    if (path === key || path.endsWith(`.${key}`)) return path;
  }
  return null;
}

/** Levenshtein distance (names are short: the plain two-row table). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}

function asObject(value: unknown, path: string, problems: string[]): Record<string, unknown> {
  if (typeof value === 'object' && value !== null && !Array.isArray(value))
    return value as Record<string, unknown>;
  problems.push(`${path || 'config'} must be an object`);
  return {};
}

/**
 * `agent init --write-config`: a complete agent.json with every setting at its default (so a technician sees what
 * can be set, with the spelling the parser reads) and the platform addresses given. `device_id` stays null until
 * `agent install` takes it from the certificate the console issued; `server_ca_file` stays null (system roots) until
 * `agent install` is given the console's server-ca.pem.
 */
export function configTemplate(args: {
  structure: string;
  agentsUrl: string;
  devicesUrl: string;
  verifyUrl: string;
}): Record<string, unknown> {
  const d = CONFIG_DEFAULTS;
  return {
    device_id: null,
    structure: args.structure,
    platform: { agents_url: args.agentsUrl, devices_url: args.devicesUrl, verify_url: args.verifyUrl },
    data_dir: 'data',
    media_dir: 'media',
    authority_root_file: 'authority-root.pem',
    server_ca_file: null,
    key_file: 'data/device-key.pem',
    certificate_file: 'data/device-cert.pem',
    ca_chain_file: 'data/device-chain.pem',
    board: 'none',
    image_duration_ms: d.imageDurationMs,
    shipping: {
      min_interval_ms: d.shipping.minIntervalMs,
      idle_interval_ms: d.shipping.idleIntervalMs,
      backoff_base_ms: d.shipping.backoffBaseMs,
      backoff_cap_ms: d.shipping.backoffCapMs,
    },
    revocation_refresh_ms: d.revocationRefreshMs,
    renewal_check_ms: d.renewalCheckMs,
    media_recheck_ms: d.mediaRecheckMs,
    offline_after_ms: d.offlineAfterMs,
    max_clock_correction_ms: d.maxClockCorrectionMs,
    media_stability_ms: d.mediaStabilityMs,
    sidecar_grace_ms: d.sidecarGraceMs,
    retention: {
      keep_acknowledged_ms: d.retention.keepAcknowledgedMs,
      keep_set_aside_ms: d.retention.keepSetAsideMs,
      prune_interval_ms: d.retention.pruneIntervalMs,
    },
    disk: {
      warn_free_bytes: d.disk.warnFreeBytes,
      hard_free_bytes: d.disk.hardFreeBytes,
      check_interval_ms: d.disk.checkIntervalMs,
    },
  };
}
