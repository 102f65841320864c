import { LIMITS } from '@ooh/protocol';

/*
 * The rate limits of the spec's "Limits" table as token buckets kept in PostgreSQL (DESIGN.md section 2: "rate
 * limits ... are enforced in PostgreSQL"), so that every platform instance draws from the same buckets.
 */

export interface Bucket {
  key: string;
  capacity: number;
  perSecond: number;
  cost: number;
}

/**
 * SQL: seconds until the buckets named by the four array parameters would all hold their cost at `at` (0: now),
 * read without taking or locking anything. The arithmetic of pop_take_tokens (020_pop.sql).
 */
export const rateLook = (keys: string, capacities: string, perSecond: string, costs: string, at: string) => `(
  SELECT coalesce(max(CASE WHEN have + 1e-9 < t.cost THEN (t.cost - have) / t.per_second ELSE 0 END), 0)
    FROM unnest(${keys}::text[], ${capacities}::float8[], ${perSecond}::float8[], ${costs}::float8[])
         AS t(key, capacity, per_second, cost)
    LEFT JOIN pop_rate_buckets rb ON rb.bucket_key = t.key,
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
 * limits on batches and records, taken when a batch is stored (DESIGN.md section 5's order).
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
