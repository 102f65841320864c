import { LIMITS, type RecordFlag } from '@ooh/protocol';
import type { Db, DbClient } from '../db/pool.js';
import type { DisclosureRules } from './disclosure.js';

export interface OpenDataSettings {
  published: boolean;
  publishedChangedAt: Date | null;
  /** The values in force: the overrides, or the spec's defaults. */
  rules: DisclosureRules;
  /** The stored overrides (null: the default). */
  overrides: { [K in keyof DisclosureRules]: number | null };
}

/** spec "Limits": "open-data disclosure | min 3 operators and 3 advertisers per cell ..., at most 70 percent of
 * plays by one party, release lag 1 full month". */
export const DEFAULT_RULES: DisclosureRules = {
  minOperators: LIMITS.openDataMinOperators,
  minAdvertisers: LIMITS.openDataMinAdvertisers,
  maxPartySharePct: LIMITS.openDataMaxPartySharePct,
  lagMonths: LIMITS.openDataLagMonths,
};

export async function readSettings(db: Db | DbClient): Promise<OpenDataSettings> {
  const { rows } = await db.query<{
    published: boolean;
    published_changed_at: Date | null;
    min_operators: number | null;
    min_advertisers: number | null;
    max_party_share_pct: number | null;
    lag_months: number | null;
  }>(
    `SELECT published, published_changed_at, min_operators, min_advertisers, max_party_share_pct, lag_months
       FROM open_data_settings`,
  );
  const row = rows[0];
  if (!row) throw new Error('open_data_settings has no row (migration 050 not applied?)');
  const overrides = {
    minOperators: row.min_operators,
    minAdvertisers: row.min_advertisers,
    maxPartySharePct: row.max_party_share_pct,
    lagMonths: row.lag_months,
  };
  return {
    published: row.published,
    publishedChangedAt: row.published_changed_at,
    overrides,
    rules: {
      minOperators: overrides.minOperators ?? DEFAULT_RULES.minOperators,
      minAdvertisers: overrides.minAdvertisers ?? DEFAULT_RULES.minAdvertisers,
      maxPartySharePct: overrides.maxPartySharePct ?? DEFAULT_RULES.maxPartySharePct,
      lagMonths: overrides.lagMonths ?? DEFAULT_RULES.lagMonths,
    },
  };
}

export async function setPublished(db: Db, published: boolean, now: Date): Promise<void> {
  // The change time moves only when the switch really changes.
  await db.query(
    `UPDATE open_data_settings
        SET published_changed_at = CASE WHEN published = $1 THEN published_changed_at ELSE $2 END,
            published = $1`,
    [published, now],
  );
}

/** Sets the given overrides; a null value returns to the default, an absent key is left as it is. */
export async function setRules(
  db: Db,
  changes: Partial<{ [K in keyof DisclosureRules]: number | null }>,
  now: Date,
): Promise<void> {
  const has = (key: keyof DisclosureRules) => key in changes;
  await db.query(
    `UPDATE open_data_settings
        SET min_operators = CASE WHEN $1 THEN $2::integer ELSE min_operators END,
            min_advertisers = CASE WHEN $3 THEN $4::integer ELSE min_advertisers END,
            max_party_share_pct = CASE WHEN $5 THEN $6::integer ELSE max_party_share_pct END,
            lag_months = CASE WHEN $7 THEN $8::integer ELSE lag_months END,
            updated_at = $9`,
    [
      has('minOperators'),
      changes.minOperators ?? null,
      has('minAdvertisers'),
      changes.minAdvertisers ?? null,
      has('maxPartySharePct'),
      changes.maxPartySharePct ?? null,
      has('lagMonths'),
      changes.lagMonths ?? null,
      now,
    ],
  );
}

/** The district and format codes of the structures (every structure, retired ones too), in code order. */
export async function structureCodes(db: Db | DbClient): Promise<{ districts: string[]; formats: string[] }> {
  const { rows } = await db.query<{ districts: string[] | null; formats: string[] | null }>(
    `SELECT (SELECT array_agg(DISTINCT district ORDER BY district) FROM structures) AS districts,
            (SELECT array_agg(DISTINCT format ORDER BY format) FROM structures) AS formats`,
  );
  const byCode = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return {
    districts: [...(rows[0]?.districts ?? [])].sort(byCode),
    formats: [...(rows[0]?.formats ?? [])].sort(byCode),
  };
}

/** Counted plays of a month by cell and party. */
export interface MonthPlaysRow {
  district: string;
  format: string;
  daypart: string;
  slot: 'gov' | 'emergency' | null;
  operatorId: string;
  /** The organisation that submitted the approval's submission; null for slot plays. */
  submitterId: string | null;
  /** What the submission names: advertiser_name and advertiser_bin; null for slot plays. */
  advertiserName: string | null;
  advertiserBin: string | null;
  plays: number;
}

/**
 * Flags that say the play was not covered by the approval it names: outside the approval's dates, on a structure the
 * approval does not name, after the approval was revoked, or of other media. DESIGN.md section 7: "Only counted,
 * billable plays enter"; such a play is counted (section 5: flags are "accepted and counted") but no approval made it
 * billable, so open data leaves it out (the dictionary's basis says so). The other flags (structure_mismatch,
 * screen_off, timing_mismatch, timing_missing) are about the report, not the approval: those plays stay in.
 * The flags are the ones ingestion stored with the play (src/pop/judge.ts), judged once, on the approval as it was
 * when the play came in.
 */
export const NOT_BILLABLE_FLAGS: readonly RecordFlag[] = [
  'approval_not_valid_on_day',
  'approval_not_for_structure',
  'approval_revoked',
  'media_mismatch',
];

/**
 * Counted plays (pop_records of kind play: plays taken from accepted batches, flagged ones included) whose Almaty day
 * lies in [firstDay, endDay), billable ones (an approval number the platform issued, and no flag of
 * NOT_BILLABLE_FLAGS; with the advertiser its submission names and the organisation that submitted it) and slot ones
 * apart. The daypart comes from the hour of the play's start: `hours` maps the
 * epoch hour (floor(epoch seconds / 3600)) of every hour of the month to its daypart, computed with the Almaty
 * calendar of @ooh/protocol (DESIGN.md section 8), so no time zone rule is applied in SQL. A play without a start
 * has the daypart `unknownDaypart`.
 */
export async function monthPlays(
  db: Db | DbClient,
  range: { firstDay: string; endDay: string },
  hours: { epochHours: number[]; dayparts: string[]; unknownDaypart: string },
): Promise<MonthPlaysRow[]> {
  const { rows } = await db.query<{
    district: string;
    format: string;
    daypart: string;
    slot: 'gov' | 'emergency' | null;
    operator_id: string;
    submitter_id: string | null;
    advertiser_name: string | null;
    advertiser_bin: string | null;
    plays: number;
  }>(
    `SELECT st.district, st.format, coalesce(h.daypart, $5) AS daypart, r.slot,
            st.organisation_id AS operator_id, sub.organisation_id AS submitter_id, sub.advertiser_name,
            sub.advertiser_bin, count(*)::bigint AS plays
       FROM pop_records r
       JOIN structures st ON st.id = r.structure_id
       LEFT JOIN approvals a ON r.slot IS NULL AND a.number = r.approval_number
       LEFT JOIN submissions sub ON sub.id = a.submission_id
       LEFT JOIN unnest($3::bigint[], $4::text[]) AS h(epoch_hour, daypart)
              ON h.epoch_hour = floor(extract(epoch FROM r.start_at) / 3600)::bigint
      WHERE r.kind = 'play'
        AND r.day >= $1::date AND r.day < $2::date
        -- partition pruning: a play is received at most 300 s before its start and, to be taken, within 90 days
        -- of it (DESIGN.md section 5)
        AND r.receive_day >= $1::date - 1 AND r.receive_day < $2::date + 92
        AND (r.slot IS NOT NULL OR sub.id IS NOT NULL)
        AND NOT (r.flags && $6::text[])
      GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`,
    [
      range.firstDay,
      range.endDay,
      hours.epochHours,
      hours.dayparts,
      hours.unknownDaypart,
      NOT_BILLABLE_FLAGS,
    ],
  );
  return rows.map((r) => ({
    district: r.district,
    format: r.format,
    daypart: r.daypart,
    slot: r.slot,
    operatorId: r.operator_id,
    submitterId: r.slot === null ? r.submitter_id : null,
    advertiserName: r.slot === null ? r.advertiser_name : null,
    advertiserBin: r.slot === null ? r.advertiser_bin : null,
    plays: Number(r.plays),
  }));
}

/** Month (YYYY-MM) of the earliest counted play, or null when there is none. */
export async function firstPlayMonth(db: Db | DbClient): Promise<string | null> {
  const { rows } = await db.query<{ month: string | null }>(
    `SELECT to_char(min(day), 'YYYY-MM') AS month FROM play_counts`,
  );
  return rows[0]?.month ?? null;
}

export interface ReleaseSummary {
  month: string;
  csvSha256: string;
  csvBytes: number;
  dictionarySha256: string;
  dictionaryBytes: number;
  builtAt: Date;
}

export async function listReleases(db: Db | DbClient): Promise<ReleaseSummary[]> {
  const { rows } = await db.query<{
    month: string;
    csv_sha256: string;
    csv_bytes: number;
    dictionary_sha256: string;
    dictionary_bytes: number;
    built_at: Date;
  }>(
    `SELECT month, csv_sha256, octet_length(csv) AS csv_bytes, dictionary_sha256,
            octet_length(dictionary) AS dictionary_bytes, built_at
       FROM open_data_releases ORDER BY month`,
  );
  return rows.map((r) => ({
    month: r.month,
    csvSha256: r.csv_sha256,
    csvBytes: Number(r.csv_bytes),
    dictionarySha256: r.dictionary_sha256,
    dictionaryBytes: Number(r.dictionary_bytes),
    builtAt: r.built_at,
  }));
}

export type ReleaseFile = 'csv' | 'dictionary';

export async function releaseFile(
  db: Db,
  month: string,
  file: ReleaseFile,
): Promise<{ bytes: Buffer; sha256: string } | null> {
  const { rows } = await db.query<{ bytes: Buffer; sha256: string }>(
    file === 'csv'
      ? 'SELECT csv AS bytes, csv_sha256 AS sha256 FROM open_data_releases WHERE month = $1'
      : 'SELECT dictionary AS bytes, dictionary_sha256 AS sha256 FROM open_data_releases WHERE month = $1',
    [month],
  );
  return rows[0] ?? null;
}

export async function releaseExists(db: Db | DbClient, month: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM open_data_releases WHERE month = $1', [month]);
  return rows.length > 0;
}

export interface NewRelease {
  month: string;
  csv: Buffer;
  csvSha256: string;
  dictionary: Buffer;
  dictionarySha256: string;
  builtAt: Date;
  rules: DisclosureRules;
}

/** Stores a release once; false when the month already has one (it is never replaced). */
export async function insertRelease(client: DbClient, release: NewRelease): Promise<boolean> {
  const { rowCount } = await client.query(
    `INSERT INTO open_data_releases (month, csv, csv_sha256, dictionary, dictionary_sha256, built_at, min_operators,
                                     min_advertisers, max_party_share_pct, lag_months)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (month) DO NOTHING`,
    [
      release.month,
      release.csv,
      release.csvSha256,
      release.dictionary,
      release.dictionarySha256,
      release.builtAt,
      release.rules.minOperators,
      release.rules.minAdvertisers,
      release.rules.maxPartySharePct,
      release.rules.lagMonths,
    ],
  );
  return rowCount === 1;
}
