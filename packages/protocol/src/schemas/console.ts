import { type Static, Type } from '@sinclair/typebox';
import { Nullable, StringEnum } from './common.js';

/*
 * The answers of the platform's console routes (apps/platform/src, not in the spec): the platform serializes through
 * these schemas (a field built there and not listed here does not leave), and the console reads their `Static<>`
 * types, imported as types only, so no TypeBox enters its bundle. One statement of each answer for both sides.
 */

const Int = Type.Integer();
const Num = Type.Number();
const Str = Type.String();
const NullableNum = Nullable(Num);
const NullableStr = Nullable(Str);
const Ints = Type.Array(Int);
const Bucket = StringEnum(['day', 'hour']);
const Almaty = Type.Literal('Asia/Almaty');

export const ReportZone = StringEnum(['Asia/Almaty', 'UTC']);
export type ReportZone = Static<typeof ReportZone>;

/** Whether the viewer sees the whole campaign or only the structures its organisation operates. */
export const ReportScope = StringEnum(['full', 'own_structures']);
export type ReportScope = Static<typeof ReportScope>;

const reportTotals = {
  plays: Int,
  flagged: Int,
  unflagged: Int,
  attested: Int,
  /** Declared plays of the compared days (campaign live the whole day, and the day over), and their plays. */
  declared: Int,
  plays_compared: Int,
  deviation_pct: NullableNum,
  compared_days: Int,
  days_outside_band: Int,
};
export const ReportTotals = Type.Object(reportTotals);
export type ReportTotals = Static<typeof ReportTotals>;

/** GET /api/v1/console/reports/campaigns: a campaign as the reports list shows it. */
export const CampaignListItem = Type.Object({
  submission_id: Str,
  submission_number: Str,
  advertiser_name: Str,
  submitted_by: Str,
  /** First and last day of the campaign's approvals (Almaty dates). */
  valid_from: Str,
  valid_until: Str,
  approvals: Type.Array(
    Type.Object({ approval_number: Str, valid_from: Str, valid_until: Str, revoked: Type.Boolean() }),
  ),
  /** Structures the viewer sees of the campaign. */
  structures: Int,
  /** Declared plays per day, summed over those structures. */
  declared_daily_plays: Int,
  /** Counted plays so far on those structures (running counters), flagged ones included. */
  plays: Int,
  flagged: Int,
  scope: ReportScope,
});
export type CampaignListItem = Static<typeof CampaignListItem>;

export const CampaignList = Type.Object({ items: Type.Array(CampaignListItem) });
export type CampaignList = Static<typeof CampaignList>;

export const ReportCell = Type.Object({
  day: Str,
  structure_id: Str,
  live_hours: Num,
  declared: Nullable(Int),
  compared: Type.Boolean(),
  plays: Int,
  flagged: Int,
  attested: Int,
  deviation_pct: NullableNum,
  outside_band: Nullable(Type.Boolean()),
});
export type ReportCell = Static<typeof ReportCell>;

/** GET /api/v1/console/reports/campaigns/{id}: the campaign report. */
export const CampaignReport = Type.Object({
  report: Type.Object({
    generated_at: Str,
    time_zone: ReportZone,
    scope: ReportScope,
    viewer_organisation: Str,
    band_pct: Num,
  }),
  campaign: Type.Object({
    submission_id: Str,
    submission_number: Str,
    advertiser_name: Str,
    advertiser_bin: NullableStr,
    submitted_by: Str,
    period_from: NullableStr,
    period_to: NullableStr,
    category_id: Nullable(Int),
  }),
  approvals: Type.Array(
    Type.Object({
      approval_number: Str,
      media_sha256: Str,
      valid_from: Str,
      valid_until: Str,
      issued_at: Str,
      revoked_at: NullableStr,
      manifest_sha256: NullableStr,
      structure_ids: Type.Array(Str),
      ledger_url: Str,
    }),
  ),
  structures: Type.Array(
    Type.Object({
      structure_id: Str,
      code: Str,
      address: NullableStr,
      district: Str,
      format: Str,
      operator: Str,
      /** Declared plays per day; null when none was declared. */
      declared_daily_plays: Nullable(Int),
      /** false: plays of the campaign were counted here although no approval covers the structure (flagged). */
      covered: Type.Boolean(),
      totals: ReportTotals,
    }),
  ),
  days: Type.Array(Type.Object({ day: Str, live_hours: Num, ...reportTotals })),
  /** The hours (in the zone) that hold plays, in order: the first instant, its day and hour of day, the plays and
   * the flagged ones among them. Hours without plays are left out. */
  hours: Type.Array(Type.Object({ start: Str, day: Str, hour: Int, plays: Int, flagged: Int })),
  cells: Type.Array(ReportCell),
  totals: ReportTotals,
  flags: Type.Array(Type.Object({ flag: Str, plays: Int })),
  seals: Type.Array(
    Type.Object({
      receive_day: Str,
      plays: Int,
      sealed: Type.Boolean(),
      signed_at: NullableStr,
      body_sha256: NullableStr,
      root: NullableStr,
      batch_count: Nullable(Int),
      record_count: Nullable(Int),
      ledger: Nullable(Type.Object({ day: Str, status: Str, block_height: Int, digest: Str })),
      url: Str,
    }),
  ),
  verification: Type.Object({
    verify_url: Str,
    authority_root_url: Str,
    authority_root_sha256: Str,
    ledger_head_url: Str,
  }),
  consistency: Type.Object({ counted_plays: Int, recorded_plays: Int, agree: Type.Boolean() }),
});
export type CampaignReport = Static<typeof CampaignReport>;

const playsSeries = {
  plays: Ints,
  flagged: Ints,
  attested: Ints,
  /** Declared plays of the day where a campaign was live the whole day (also today and later, for reference); null
   * where none was. Totals compare only days that are over. */
  declared: Type.Array(Nullable(Int)),
};
export const PlaysSeries = Type.Object(playsSeries);
export type PlaysSeries = Static<typeof PlaysSeries>;

/** GET /api/v1/console/reports/plays: plays per day (or per hour) by structure and campaign. */
export const PlaysAnswer = Type.Object({
  bucket: Bucket,
  from: Str,
  to: Str,
  time_zone: Almaty,
  days: Type.Array(Str),
  /** bucket=hour: the first instant of each Almaty hour from `from` to the end of `to` (RFC 3339, +05:00); the
   * series are indexed by these hours, and declared is null in every hour (declared plays are per day). Totals stay
   * those of the days, as in the daily answer. */
  hours: Type.Optional(Type.Array(Str)),
  /** declared and plays_compared: over the days that are over (as the campaign report compares them). */
  totals: Type.Object({
    plays: Int,
    flagged: Int,
    attested: Int,
    slot: Int,
    declared: Int,
    plays_compared: Int,
  }),
  structures: Type.Array(Type.Object({ structure_id: Str, code: Str, slot: Ints, ...playsSeries })),
  campaigns: Type.Array(
    Type.Object({
      submission_id: Str,
      submission_number: Str,
      advertiser_name: Str,
      /** Over the range; declared and plays_compared over the days that are over. */
      totals: Type.Object({ plays: Int, flagged: Int, declared: Int, plays_compared: Int }),
      ...playsSeries,
    }),
  ),
  /** Plays under approval numbers the platform never issued (flagged approval_unknown). */
  unknown_approvals: Type.Object({ plays: Ints, flagged: Ints }),
  /** Authority content (slot gov / emergency): counted apart, never billed. */
  slots: Type.Object({ gov: Ints, emergency: Ints }),
});
export type PlaysAnswer = Static<typeof PlaysAnswer>;

export const FleetHealthBucket = Type.Object({
  /** First instant of the bucket, Almaty time. */
  start: Str,
  /** Its end (exclusive), or now for the bucket under way. */
  end: Str,
  partial: Type.Boolean(),
  /** Devices expected to report: enrolled, not revoked, and having sent a batch before the bucket ended. */
  devices_expected: Int,
  devices_reporting: Int,
  devices_silent: Int,
  /** Queue lag of the newest batch of each reporting device in the bucket (as on the fleet page), in seconds. */
  queue_lag_p50_seconds: NullableNum,
  queue_lag_p95_seconds: NullableNum,
  queue_lag_max_seconds: NullableNum,
  /** Reporting devices with at least one play reported with the screen off (flag screen_off) in the bucket. */
  screen_off_devices: Int,
  screen_off_share_pct: NullableNum,
});
export type FleetHealthBucket = Static<typeof FleetHealthBucket>;

/** GET /api/v1/console/reports/fleet-health. */
export const FleetHealth = Type.Object({
  bucket: Bucket,
  time_zone: Almaty,
  generated_at: Str,
  /** Devices in the viewer's fleet that are not revoked, and those of them that never sent a batch. */
  devices: Int,
  devices_never_reported: Int,
  items: Type.Array(FleetHealthBucket),
});
export type FleetHealth = Static<typeof FleetHealth>;

/** An organisation's kind (organisations.kind). */
export const OrganisationKind = StringEnum(['authority', 'operator', 'agency', 'advertiser']);
export type OrganisationKind = Static<typeof OrganisationKind>;

/** A decided submission's state in the authority's register. */
export const RegisterState = StringEnum(['approved', 'rejected', 'revoked']);
export type RegisterState = Static<typeof RegisterState>;

export const RegisterEvent = Type.Object({
  event: StringEnum(['created', 'sent', 'approved', 'rejected', 'revoked']),
  at: Str,
  /** Who: the submitting organisation, or the authority's key or console user; null where nothing was stored. */
  by: Nullable(
    Type.Object({
      kind: StringEnum(['organisation', 'api_key', 'console_user', 'console_session']),
      name: Str,
    }),
  ),
  approval_number: Type.Optional(Str),
  reason: Type.Optional(Str),
});
export type RegisterEvent = Static<typeof RegisterEvent>;

export const RegisterItem = Type.Object({
  submission_id: Str,
  number: Str,
  state: RegisterState,
  advertiser_name: Str,
  advertiser_bin: NullableStr,
  organisation: Type.Object({ id: Str, name: Str, kind: OrganisationKind }),
  period_from: NullableStr,
  period_to: NullableStr,
  decided_at: NullableStr,
  approval: Nullable(
    Type.Object({
      number: Str,
      valid_from: Str,
      valid_until: Str,
      issued_at: Str,
      revoked_at: NullableStr,
      revoke_reason: NullableStr,
    }),
  ),
  reject_reason: NullableStr,
  history: Type.Array(RegisterEvent),
});
export type RegisterItem = Static<typeof RegisterItem>;

/** GET /api/v1/console/submissions/decided: the authority's register of decided submissions, a page of it. */
export const RegisterPage = Type.Object({
  items: Type.Array(RegisterItem),
  total: Int,
  limit: Int,
  offset: Int,
});
export type RegisterPage = Static<typeof RegisterPage>;

// ---- proof of play (apps/platform/src/pop/routes.ts) ----

/** GET /api/v1/console/pop/counts: counted plays per player, structure, day and approval or slot. */
export const PlayCountItem = Type.Object({
  player: Str,
  structure_id: Str,
  day: Str,
  approval_number: NullableStr,
  slot: NullableStr,
  attested: Type.Boolean(),
  plays: Int,
  flagged: Int,
});
export type PlayCountItem = Static<typeof PlayCountItem>;
export const PlayCountsAnswer = Type.Object({ items: Type.Array(PlayCountItem) });
export type PlayCountsAnswer = Static<typeof PlayCountsAnswer>;

/** GET /api/v1/console/pop/quality: flagged records by flag and refused records by reason, over receive days. */
export const PopQualityAnswer = Type.Object({
  from: Str,
  to: Str,
  flags: Type.Array(Type.Object({ flag: Str, records: Int })),
  refusals: Type.Array(Type.Object({ reason: Str, records: Int })),
});
export type PopQualityAnswer = Static<typeof PopQualityAnswer>;

/** The events a player sent that are not plays. */
export const DeviceEventKind = StringEnum(['reject', 'mode_change', 'tamper']);
export type DeviceEventKind = Static<typeof DeviceEventKind>;

/** GET /api/v1/console/pop/devices/{id}/events: a device's reject, mode_change and tamper events. */
export const DeviceEvent = Type.Object({
  batch: Int,
  index: Int,
  kind: DeviceEventKind,
  seq: Nullable(Int),
  at: NullableStr,
  code: NullableStr,
  detail: Type.Unknown(),
  receive_day: Str,
});
export type DeviceEvent = Static<typeof DeviceEvent>;
export const DeviceEventsAnswer = Type.Object({ items: Type.Array(DeviceEvent) });
export type DeviceEventsAnswer = Static<typeof DeviceEventsAnswer>;
