import { ConfigError } from '../config.js';

/**
 * Settings of the approvals feature, read from the platform configuration's settings (the config file's keys
 * upper-cased, then the environment; see PlatformConfig.settings and docs/approvals.md).
 */
export interface ApprovalSettings {
  /** Largest media upload in bytes; beyond it 413 body_too_large. */
  mediaMaxBytes: number;
  /** Working hours from sending to review_due_at on a fast-track submission (DESIGN.md section 8). */
  fastTrackReviewHours: number;
}

export const SETTINGS_ENV = {
  mediaMaxBytes: 'MEDIA_MAX_BYTES',
  fastTrackReviewHours: 'FAST_TRACK_REVIEW_HOURS',
} as const;

export const DEFAULT_SETTINGS: ApprovalSettings = {
  mediaMaxBytes: 200 * 1024 * 1024,
  fastTrackReviewHours: 4,
};

/** Throws ConfigError naming every bad value at once. */
export function approvalSettings(env: NodeJS.ProcessEnv = process.env): ApprovalSettings {
  const problems: string[] = [];
  const read = (key: keyof ApprovalSettings, valid: (n: number) => boolean): number => {
    const name = SETTINGS_ENV[key];
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return DEFAULT_SETTINGS[key];
    const value = Number(raw.trim());
    if (!valid(value)) {
      problems.push(`${name}: "${raw}" is not allowed`);
      return DEFAULT_SETTINGS[key];
    }
    return value;
  };
  const settings = {
    mediaMaxBytes: read('mediaMaxBytes', (n) => Number.isSafeInteger(n) && n > 0),
    fastTrackReviewHours: read('fastTrackReviewHours', (n) => Number.isFinite(n) && n > 0 && n <= 24 * 30),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return settings;
}
