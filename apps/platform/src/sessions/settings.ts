import { ConfigError } from '../config.js';

/**
 * Settings of console sessions, read from the platform configuration's settings (the config file's keys
 * upper-cased, then the environment; see PlatformConfig.settings and apps/platform/console/README.md).
 */
export interface SessionSettings {
  /** A session unused for this long answers 401 session_expired. */
  idleTimeoutMs: number;
  /** A session ends this long after sign-in, whatever the activity. */
  maxLifetimeMs: number;
  /** Secure cookie attribute: always, never, or auto (HTTPS request, or an https public api URL). */
  cookieSecure: 'auto' | 'always' | 'never';
  /**
   * Failed sign-ins allowed within the window from one browser known to the account (its device cookie), and from
   * one client address against one account (a browser without it); beyond, 429 with Retry-After.
   */
  maxFailuresPerEmail: number;
  /** Failed sign-ins allowed against one account from browsers that do not know it, whatever their address. */
  maxFailuresPerAccount: number;
  /**
   * Failed sign-ins of one client address (against any accounts) after which its attempts are slowed down, by
   * `slowDownStepMs` more for each failure beyond, at most 2 s. Never refused: behind a proxy, an address is many
   * people.
   */
  maxFailuresPerAddress: number;
  slowDownStepMs: number;
  /** Window of the sign-in rate limit. */
  failureWindowMs: number;
}

export const SESSION_SETTINGS_ENV = {
  idleTimeoutMs: 'CONSOLE_IDLE_TIMEOUT_MINUTES',
  maxLifetimeMs: 'CONSOLE_SESSION_MAX_HOURS',
  cookieSecure: 'CONSOLE_COOKIE_SECURE',
  maxFailuresPerEmail: 'CONSOLE_LOGIN_MAX_FAILURES',
  maxFailuresPerAccount: 'CONSOLE_LOGIN_MAX_FAILURES_PER_ACCOUNT',
  maxFailuresPerAddress: 'CONSOLE_LOGIN_MAX_FAILURES_PER_ADDRESS',
  slowDownStepMs: 'CONSOLE_LOGIN_SLOW_DOWN_MS',
  failureWindowMs: 'CONSOLE_LOGIN_WINDOW_MINUTES',
} as const;

const MINUTE_MS = 60_000;

export const DEFAULT_SESSION_SETTINGS: SessionSettings = {
  idleTimeoutMs: 30 * MINUTE_MS,
  maxLifetimeMs: 12 * 60 * MINUTE_MS,
  cookieSecure: 'auto',
  maxFailuresPerEmail: 5,
  maxFailuresPerAccount: 20,
  maxFailuresPerAddress: 20,
  slowDownStepMs: 100,
  failureWindowMs: 15 * MINUTE_MS,
};

/** Throws ConfigError naming every bad value at once. */
export function sessionSettings(env: NodeJS.ProcessEnv = process.env): SessionSettings {
  const problems: string[] = [];
  const number = (key: keyof typeof SESSION_SETTINGS_ENV, unitMs: number, max: number): number => {
    const name = SESSION_SETTINGS_ENV[key];
    const raw = env[name];
    const fallback = DEFAULT_SESSION_SETTINGS[key] as number;
    if (raw === undefined || raw.trim() === '') return fallback;
    const value = Number(raw.trim());
    if (!Number.isInteger(value) || value < 1 || value > max) {
      problems.push(`${name}: "${raw}" is not a whole number from 1 to ${max}`);
      return fallback;
    }
    return value * unitMs;
  };
  const secure = env[SESSION_SETTINGS_ENV.cookieSecure]?.trim() || DEFAULT_SESSION_SETTINGS.cookieSecure;
  if (secure !== 'auto' && secure !== 'always' && secure !== 'never') {
    problems.push(`${SESSION_SETTINGS_ENV.cookieSecure}: "${secure}" is not auto, always or never`);
  }
  const settings: SessionSettings = {
    idleTimeoutMs: number('idleTimeoutMs', MINUTE_MS, 24 * 60),
    maxLifetimeMs: number('maxLifetimeMs', 60 * MINUTE_MS, 24 * 30),
    cookieSecure: secure === 'always' || secure === 'never' ? secure : 'auto',
    maxFailuresPerEmail: number('maxFailuresPerEmail', 1, 1000),
    maxFailuresPerAccount: number('maxFailuresPerAccount', 1, 100_000),
    maxFailuresPerAddress: number('maxFailuresPerAddress', 1, 100_000),
    slowDownStepMs: number('slowDownStepMs', 1, 2000),
    failureWindowMs: number('failureWindowMs', MINUTE_MS, 24 * 60),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return settings;
}
