import { LIMITS } from '@ooh/protocol';

/*
 * The rate limits of the spec's "Limits" table as token buckets kept in PostgreSQL (DESIGN.md section 2: "rate
 * limits ... are enforced in PostgreSQL"), so that every platform instance draws from the same buckets.
 */

export interface Bucket {
  key: string;
  /** The most a bucket holds; of a window, the most taken in any `windowMinutes`. */
  capacity: number;
  /** The refill of a bucket; of a window, its average rate (not used to judge it). */
  perSecond: number;
  cost: number;
  /**
   * A window instead of a token bucket: at most `capacity` in any `windowMinutes` minutes, kept per minute
   * (migration 082; `pop_rate_windows`). For a limit the spec gives no burst.
   */
  windowMinutes?: number;
}

/** The minutes of a bucket's window as a SQL parameter: 0 for a token bucket. */
export const windowMinutesOf = (bucket: Bucket): number => bucket.windowMinutes ?? 0;

/**
 * SQL: seconds until the buckets and windows named by the five array parameters would all take their cost at `at`
 * (0: now), read without taking or locking anything. The arithmetic of pop_take_limits (migration 082).
 */
export const rateLook = (
  keys: string,
  capacities: string,
  perSecond: string,
  costs: string,
  windowMinutes: string,
  at: string,
) => `(
  SELECT coalesce(max(CASE WHEN t.window_minutes > 0
                           THEN pop_window_wait(rw.newest_minute, rw.used, t.window_minutes, t.capacity, t.cost,
                                                ${at}::timestamptz)
                           WHEN have + 1e-9 < t.cost THEN (t.cost - have) / t.per_second ELSE 0 END), 0)
    FROM unnest(${keys}::text[], ${capacities}::float8[], ${perSecond}::float8[], ${costs}::float8[],
                ${windowMinutes}::int4[])
         AS t(key, capacity, per_second, cost, window_minutes)
    LEFT JOIN pop_rate_buckets rb ON t.window_minutes = 0 AND rb.bucket_key = t.key
    LEFT JOIN pop_rate_windows rw ON t.window_minutes > 0 AND rw.window_key = t.key,
         LATERAL (SELECT CASE WHEN rb.bucket_key IS NULL THEN t.capacity
                              ELSE least(t.capacity, rb.tokens + t.per_second
                                         * greatest(0, extract(epoch FROM (${at}::timestamptz - rb.updated_at))))
                         END AS have) AS h)`;

/**
 * spec: "agent telemetry rate: 10 batches a minute per device; 429 for more than one batch every 10 seconds
 * (burst of 3 allowed)": a burst of 3 refilled one per 10 s. That bucket never lets more than 3 + 6 = 9 batches
 * through in any minute, so "10 batches a minute" holds with it and needs no bucket of its own (one bucket is one
 * row lock on the hot path). Both channels of a device (signed and certificate) draw from the same bucket.
 */
export function agentBuckets(deviceId: string): Bucket[] {
  // The minute limit is implied (see above); keep the arithmetic visible where the constants change.
  const perMinute = LIMITS.agentBurst + 60 / LIMITS.agentMinIntervalSeconds;
  if (perMinute > LIMITS.agentBatchesPerMinute)
    throw new Error('the agent bucket would exceed 10 batches a minute');
  return [
    {
      key: `agent:${deviceId}`,
      capacity: LIMITS.agentBurst,
      perSecond: 1 / LIMITS.agentMinIntervalSeconds,
      cost: 1,
    },
  ];
}

/**
 * spec: "CMS rates: 2 batches a second per installation (burst 10); ... 2 000 000 records an hour per organisation":
 * limits on batches and records, taken when a batch is stored (DESIGN.md section 5's order). The spec gives the
 * installation's limit a burst and the organisation's none, so the records are a window, at most 2 000 000 in any
 * hour: a bucket of 2 000 000 refilled at that rate had let a quiet organisation pass nearly twice as many.
 */
export function cmsBuckets(args: {
  installationId: string;
  organisationId: string;
  records: number;
}): Bucket[] {
  return [
    {
      key: `cms-installation:${args.installationId}`,
      capacity: LIMITS.cmsInstallationBurst,
      perSecond: LIMITS.cmsBatchesPerSecondPerInstallation,
      cost: 1,
    },
    {
      key: `cms-organisation:${args.organisationId}`,
      capacity: LIMITS.cmsRecordsPerHourPerOrganisation,
      perSecond: LIMITS.cmsRecordsPerHourPerOrganisation / 3600,
      cost: args.records,
      windowMinutes: 60,
    },
  ];
}

/**
 * spec: "10 calls a second per key (burst 30) ... beyond them 429 rate_limited": every authenticated call to the CMS
 * channel takes a token, whatever becomes of it (a repeat answered duplicate, a refusal), before its body is read
 * (issue "The spec to the letter, second pass", item 1).
 */
export function cmsKeyBucket(keyId: string): Bucket {
  return {
    key: `cms-key:${keyId}`,
    capacity: LIMITS.cmsKeyBurst,
    perSecond: LIMITS.cmsCallsPerSecondPerKey,
    cost: 1,
  };
}
