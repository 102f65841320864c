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
  /** Failed sign-ins allowed per email address within the window. */
  maxFailuresPerEmail: number;
  /** Failed sign-ins allowed per client address within the window. */
  maxFailuresPerAddress: number;
  /** Window of the sign-in rate limit. */
  failureWindowMs: number;
}

export const SESSION_SETTINGS_ENV = {
  idleTimeoutMs: 'CONSOLE_IDLE_TIMEOUT_MINUTES',
  maxLifetimeMs: 'CONSOLE_SESSION_MAX_HOURS',
  cookieSecure: 'CONSOLE_COOKIE_SECURE',
  maxFailuresPerEmail: 'CONSOLE_LOGIN_MAX_FAILURES',
  maxFailuresPerAddress: 'CONSOLE_LOGIN_MAX_FAILURES_PER_ADDRESS',
  failureWindowMs: 'CONSOLE_LOGIN_WINDOW_MINUTES',
} as const;

const MINUTE_MS = 60_000;

export const DEFAULT_SESSION_SETTINGS: SessionSettings = {
  idleTimeoutMs: 30 * MINUTE_MS,
  maxLifetimeMs: 12 * 60 * MINUTE_MS,
  cookieSecure: 'auto',
  maxFailuresPerEmail: 5,
  maxFailuresPerAddress: 20,
  failureWindowMs: 15 * MINUTE_MS,
};

export function sessionSettings(env: NodeJS.ProcessEnv = process.env): SessionSettings {
  const number = (key: keyof typeof SESSION_SETTINGS_ENV, unitMs: number, max: number): number => {
    const name = SESSION_SETTINGS_ENV[key];
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return DEFAULT_SESSION_SETTINGS[key] as number;
    const value = Number(raw.trim());
    if (!Number.isInteger(value) || value < 1 || value > max) {
      throw new Error(`${name}: "${raw}" is not a whole number from 1 to ${max}`);
    }
    return value * unitMs;
  };
  const secure = env[SESSION_SETTINGS_ENV.cookieSecure]?.trim() || DEFAULT_SESSION_SETTINGS.cookieSecure;
  if (secure !== 'auto' && secure !== 'always' && secure !== 'never') {
    throw new Error(`${SESSION_SETTINGS_ENV.cookieSecure}: "${secure}" is not auto, always or never`);
  }
  return {
    idleTimeoutMs: number('idleTimeoutMs', MINUTE_MS, 24 * 60),
    maxLifetimeMs: number('maxLifetimeMs', 60 * MINUTE_MS, 24 * 30),
    cookieSecure: secure,
    maxFailuresPerEmail: number('maxFailuresPerEmail', 1, 1000),
    maxFailuresPerAddress: number('maxFailuresPerAddress', 1, 100_000),
    failureWindowMs: number('failureWindowMs', MINUTE_MS, 24 * 60),
  };
}
