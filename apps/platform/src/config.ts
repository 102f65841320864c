import { readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** Typed platform configuration: defaults < config file < environment < command-line flags. */
export interface PlatformConfig {
  host: string;
  apiPort: number;
  agentsPort: number;
  devicesPort: number;
  verifyPort: number;
  dataDir: string;
  /** Unset: an embedded PostgreSQL runs in `${dataDir}/pgdata`. */
  databaseUrl: string | null;
  /** Names the embedded PostgreSQL's Unix socket (`.s.PGSQL.<port>`; 0: 5432). There is no TCP listener. */
  embeddedPgPort: number;
  /** Seals carry `env`: test or prod (spec StatsSeal body.env). */
  env: 'test' | 'prod';
  /** Only ever true when started with --test-clock. */
  testClock: boolean;
  logLevel: string;
  /** json (default): one JSON object a line, for collectors; pretty: one readable line per entry, for a person. */
  logFormat: 'json' | 'pretty';
  /**
   * The Prometheus listener (METRICS_PORT), or null when it is off (the default). Its own port and address, never
   * one of the four hosts: METRICS_HOST defaults to 127.0.0.1 whatever HOST is, and any other address needs
   * METRICS_TOKEN, so the series are never public by accident (docs/decisions.md "Metrics").
   */
  metrics: { host: string; port: number; token: string | null } | null;
  /** Public base URLs as callers reach them (used for envelope_url and the like). */
  publicUrls: { api: string; agents: string; devices: string; verify: string };
  /**
   * The features' own settings (MEDIA_MAX_BYTES, AUTHORITY_*, DEVICE_CA_*, DEVICES_*, CONSOLE_*, ...) by their
   * environment names: the config file's other keys upper-cased ("media_max_bytes" sets MEDIA_MAX_BYTES), then
   * the environment over them. Each feature reads and checks its own; checkFeatureSettings (platform.ts) names
   * every bad one at start.
   */
  settings: NodeJS.ProcessEnv;
  /** Server processes sharing the listeners (`platform run`; src/cluster.ts). 1: this process serves. */
  workers: number;
  /**
   * Reverse proxies whose X-Forwarded-For is believed (TRUST_PROXY): addresses, CIDR ranges and the names
   * loopback, linklocal, uniquelocal. Empty: the peer address is the client's (request.ip), whatever a header says.
   */
  trustProxy: string[];
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Source = Record<string, unknown>;

const ENV_NAMES = {
  apiPort: 'API_PORT',
  agentsPort: 'AGENTS_PORT',
  devicesPort: 'DEVICES_PORT',
  verifyPort: 'VERIFY_PORT',
  host: 'HOST',
  dataDir: 'DATA_DIR',
  databaseUrl: 'DATABASE_URL',
  embeddedPgPort: 'EMBEDDED_PG_PORT',
  env: 'PLATFORM_ENV',
  logLevel: 'LOG_LEVEL',
  logFormat: 'LOG_FORMAT',
  metricsPort: 'METRICS_PORT',
  metricsHost: 'METRICS_HOST',
  metricsToken: 'METRICS_TOKEN',
  publicApiUrl: 'PUBLIC_API_URL',
  publicAgentsUrl: 'PUBLIC_AGENTS_URL',
  publicDevicesUrl: 'PUBLIC_DEVICES_URL',
  publicVerifyUrl: 'PUBLIC_VERIFY_URL',
  workers: 'PLATFORM_WORKERS',
  trustProxy: 'TRUST_PROXY',
} as const;

/** The config file's keys of the settings above; any other key is a feature setting. */
const CORE_FILE_KEYS = new Set([
  'host',
  'api_port',
  'agents_port',
  'devices_port',
  'verify_port',
  'data_dir',
  'database_url',
  'embedded_pg_port',
  'env',
  'log_level',
  'log_format',
  'metrics_port',
  'metrics_host',
  'metrics_token',
  'public_api_url',
  'public_agents_url',
  'public_devices_url',
  'public_verify_url',
  'workers',
  'trust_proxy',
  // The variables' own names where the short keys above differ.
  'platform_env',
  'platform_workers',
]);

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv;
  /** Path of a JSON config file (CONFIG_FILE in the environment also names one). */
  file?: string | undefined;
  testClock?: boolean;
  overrides?: Partial<PlatformConfig>;
  /**
   * Further checks of the configuration, whose problems are named with loadConfig's own (settings-check.ts
   * featureSettingProblems: every feature's settings), so that a start names every bad value at once. They run on
   * the configuration as read, with the defaults standing in for the values found bad.
   */
  alsoCheck?: (config: PlatformConfig) => string[];
}

export function loadConfig(options: LoadConfigOptions = {}): PlatformConfig {
  const env = options.env ?? process.env;
  const problems: string[] = [];
  let file: Source = {};
  const filePath = options.file ?? env['CONFIG_FILE'];
  if (filePath) {
    try {
      const parsed: unknown = JSON.parse(readFileSync(filePath, 'utf8'));
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        problems.push(`config file ${filePath}: must hold a JSON object`);
      } else {
        file = parsed as Source;
      }
    } catch (error) {
      problems.push(`config file ${filePath}: ${(error as Error).message}`);
    }
  }

  const pick = (
    key: keyof typeof ENV_NAMES,
    fileKey: string,
  ): { value: unknown; origin: string } | undefined => {
    const fromEnv = env[ENV_NAMES[key]];
    if (fromEnv !== undefined && fromEnv !== '') return { value: fromEnv, origin: ENV_NAMES[key] };
    if (fileKey in file) return { value: file[fileKey], origin: `config file "${fileKey}"` };
    // The variable's own name in lower case is a key of the file too (README: "the file's keys are the variables
    // below in lower case"), also where the short key differs ("platform_env" beside "env").
    const envKey = ENV_NAMES[key].toLowerCase();
    if (envKey in file) return { value: file[envKey], origin: `config file "${envKey}"` };
    return undefined;
  };

  const port = (key: keyof typeof ENV_NAMES, fileKey: string, fallback: number): number => {
    const got = pick(key, fileKey);
    if (!got) return fallback;
    const n = typeof got.value === 'number' ? got.value : Number(String(got.value).trim());
    if (!Number.isInteger(n) || n < 0 || n > 65535) {
      problems.push(`${got.origin}: "${String(got.value)}" is not a port number (0-65535)`);
      return fallback;
    }
    return n;
  };
  const text = (key: keyof typeof ENV_NAMES, fileKey: string, fallback: string | null): string | null => {
    const got = pick(key, fileKey);
    if (!got) return fallback;
    if (typeof got.value !== 'string' || got.value.trim() === '') {
      problems.push(`${got.origin}: must be a non-empty string`);
      return fallback;
    }
    return got.value.trim();
  };

  const host = text('host', 'host', '127.0.0.1')!;
  const apiPort = port('apiPort', 'api_port', 8080);
  const agentsPort = port('agentsPort', 'agents_port', 8081);
  const devicesPort = port('devicesPort', 'devices_port', 8443);
  const verifyPort = port('verifyPort', 'verify_port', 8082);
  const embeddedPgPort = port('embeddedPgPort', 'embedded_pg_port', 0);
  const dataDir = path.resolve(text('dataDir', 'data_dir', '.data')!);
  const databaseUrl = text('databaseUrl', 'database_url', null);
  if (databaseUrl !== null && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push(`DATABASE_URL: "${databaseUrl}" is not a postgres:// or postgresql:// URL`);
  }
  // Seals made under a settable clock are test seals (issue "What a newcomer tripped over", item 7): --test-clock
  // means env test, and an explicit PLATFORM_ENV=prod beside it is a contradiction, not a choice.
  const envName = text('env', 'env', options.testClock ? 'test' : 'prod');
  if (envName !== 'test' && envName !== 'prod')
    problems.push(`PLATFORM_ENV: must be test or prod, not "${envName}"`);
  else if (envName === 'prod' && options.testClock)
    problems.push('PLATFORM_ENV: prod with --test-clock; seals made under a settable clock say env test');
  const logLevel = text('logLevel', 'log_level', 'info')!;
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    problems.push(`LOG_LEVEL: "${logLevel}" is not one of fatal, error, warn, info, debug, trace, silent`);
  }
  const logFormat = text('logFormat', 'log_format', 'json')!;
  if (logFormat !== 'json' && logFormat !== 'pretty') {
    problems.push(`LOG_FORMAT: "${logFormat}" is not json or pretty`);
  }
  const metrics = (() => {
    const metricsPort = port('metricsPort', 'metrics_port', -1);
    if (metricsPort < 0) return null;
    const metricsHost = text('metricsHost', 'metrics_host', '127.0.0.1')!;
    const token = text('metricsToken', 'metrics_token', null);
    if (token !== null && token.length < 16) problems.push('METRICS_TOKEN: must be at least 16 characters');
    if (!isLoopback(metricsHost) && token === null) {
      problems.push(
        `METRICS_HOST: ${metricsHost} is reachable from other machines; set METRICS_TOKEN (scrapers send it as a bearer token), or keep METRICS_HOST at 127.0.0.1`,
      );
    }
    return { host: metricsHost, port: metricsPort, token };
  })();
  const workers = (() => {
    const got = pick('workers', 'workers');
    if (!got) return 1;
    const raw = String(got.value).trim();
    // 'auto': one process per core the machine offers.
    const n = raw === 'auto' ? os.availableParallelism() : Number(raw);
    if (!Number.isInteger(n) || n < 1 || n > 64) {
      problems.push(`${got.origin}: "${raw}" is not a number of processes (1-64) or auto`);
      return 1;
    }
    return n;
  })();
  const trustProxy = (() => {
    const got = pick('trustProxy', 'trust_proxy');
    if (!got) return [];
    const raw = Array.isArray(got.value) ? got.value.map(String) : String(got.value).split(',');
    const entries = raw.map((e) => e.trim()).filter((e) => e !== '');
    for (const entry of entries) {
      if (!isProxyEntry(entry)) {
        problems.push(
          `${got.origin}: "${entry}" is not an IP address, a CIDR range (10.0.0.0/8) or loopback, linklocal, uniquelocal`,
        );
      }
    }
    return entries;
  })();
  // The test clock is set per process (PUT /api/v1/console/clock): several processes would disagree on the time.
  if (workers > 1 && options.testClock) problems.push('--test-clock needs PLATFORM_WORKERS=1');
  const ports = {
    API_PORT: apiPort,
    AGENTS_PORT: agentsPort,
    DEVICES_PORT: devicesPort,
    VERIFY_PORT: verifyPort,
    ...(metrics ? { METRICS_PORT: metrics.port } : {}),
  };
  const seen = new Map<number, string>();
  for (const [name, value] of Object.entries(ports)) {
    if (value === 0) continue;
    const other = seen.get(value);
    if (other) problems.push(`${name}: port ${value} is already used by ${other}`);
    seen.set(value, name);
  }
  const urlOf = (key: keyof typeof ENV_NAMES, fileKey: string, scheme: string, p: number): string => {
    const given = text(key, fileKey, null);
    if (given !== null) {
      try {
        return new URL(given).toString().replace(/\/$/, '');
      } catch {
        problems.push(`${ENV_NAMES[key]}: "${given}" is not a URL`);
      }
    }
    const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
    return `${scheme}://${shownHost}:${p}`;
  };
  const publicUrls = {
    api: urlOf('publicApiUrl', 'public_api_url', 'http', apiPort),
    agents: urlOf('publicAgentsUrl', 'public_agents_url', 'http', agentsPort),
    devices: urlOf('publicDevicesUrl', 'public_devices_url', 'https', devicesPort),
    verify: urlOf('publicVerifyUrl', 'public_verify_url', 'http', verifyPort),
  };

  // Every other key of the file is a feature setting under its environment name; the environment wins.
  const settings: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(file)) {
    if (CORE_FILE_KEYS.has(key)) continue;
    if (!['string', 'number', 'boolean'].includes(typeof value)) {
      problems.push(`config file "${key}": must be a string, a number or a boolean`);
      continue;
    }
    settings[key.toUpperCase()] = String(value);
  }
  Object.assign(settings, env);

  const config: PlatformConfig = {
    host,
    apiPort,
    agentsPort,
    devicesPort,
    verifyPort,
    dataDir,
    databaseUrl,
    embeddedPgPort,
    env: envName as 'test' | 'prod',
    testClock: options.testClock ?? false,
    logLevel,
    logFormat: logFormat as 'json' | 'pretty',
    metrics,
    publicUrls,
    workers,
    trustProxy,
    settings,
    ...options.overrides,
  };
  if (options.alsoCheck) problems.push(...options.alsoCheck(config));
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** Whether a listen address reaches this machine only (loopback addresses and localhost). */
function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (net.isIPv4(host)) return host.startsWith('127.');
  return host === '::1';
}

/** One TRUST_PROXY entry: what Fastify's trustProxy (proxy-addr) takes, checked here so a typo stops the start. */
function isProxyEntry(entry: string): boolean {
  if (entry === 'loopback' || entry === 'linklocal' || entry === 'uniquelocal') return true;
  const [address, prefix, ...rest] = entry.split('/');
  if (rest.length > 0 || address === undefined) return false;
  const family = net.isIP(address);
  if (family === 0) return false;
  if (prefix === undefined) return true;
  if (!/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}
