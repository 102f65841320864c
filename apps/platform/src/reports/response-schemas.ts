import { type TSchema, Type } from '@sinclair/typebox';
import { Nullable } from '../http/responses.js';

/*
 * The answers of the report routes, field by field as campaign.ts (CampaignReport), list.ts (CampaignListItem),
 * plays.ts (PlaysAnswer) and fleet-health.ts (FleetHealth) build them: the routes serialize through these, so a
 * field added there and not here does not leave.
 */

const Int = Type.Integer();
const Num = Type.Number();
const Str = Type.String();
const NullableNum = Nullable(Num);
const NullableStr = Nullable(Str);
const Counts = (item: TSchema) => Type.Array(item);

const ReportTotals = {
  plays: Int,
  flagged: Int,
  unflagged: Int,
  attested: Int,
  declared: Int,
  plays_compared: Int,
  deviation_pct: NullableNum,
  compared_days: Int,
  days_outside_band: Int,
};

export const CampaignListAnswer = Type.Object({
  items: Type.Array(
    Type.Object({
      submission_id: Str,
      submission_number: Str,
      advertiser_name: Str,
      submitted_by: Str,
      valid_from: Str,
      valid_until: Str,
      approvals: Type.Array(
        Type.Object({ approval_number: Str, valid_from: Str, valid_until: Str, revoked: Type.Boolean() }),
      ),
      structures: Int,
      declared_daily_plays: Int,
      plays: Int,
      flagged: Int,
      scope: Str,
    }),
  ),
});

export const CampaignReportAnswer = Type.Object({
  report: Type.Object({
    generated_at: Str,
    time_zone: Str,
    scope: Str,
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
      declared_daily_plays: Nullable(Int),
      covered: Type.Boolean(),
      totals: Type.Object(ReportTotals),
    }),
  ),
  days: Type.Array(Type.Object({ day: Str, live_hours: Num, ...ReportTotals })),
  hours: Type.Array(Type.Object({ start: Str, day: Str, hour: Int, plays: Int, flagged: Int })),
  cells: Type.Array(
    Type.Object({
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
    }),
  ),
  totals: Type.Object(ReportTotals),
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

const PlaysSeries = {
  plays: Counts(Int),
  flagged: Counts(Int),
  attested: Counts(Int),
  declared: Counts(Nullable(Int)),
};

export const PlaysReportAnswer = Type.Object({
  bucket: Str,
  from: Str,
  to: Str,
  time_zone: Str,
  days: Type.Array(Str),
  hours: Type.Optional(Type.Array(Str)),
  totals: Type.Object({
    plays: Int,
    flagged: Int,
    attested: Int,
    slot: Int,
    declared: Int,
    plays_compared: Int,
  }),
  structures: Type.Array(Type.Object({ structure_id: Str, code: Str, slot: Counts(Int), ...PlaysSeries })),
  campaigns: Type.Array(
    Type.Object({
      submission_id: Str,
      submission_number: Str,
      advertiser_name: Str,
      totals: Type.Object({ plays: Int, flagged: Int, declared: Int, plays_compared: Int }),
      ...PlaysSeries,
    }),
  ),
  unknown_approvals: Type.Object({ plays: Counts(Int), flagged: Counts(Int) }),
  slots: Type.Object({ gov: Counts(Int), emergency: Counts(Int) }),
});

export const FleetHealthAnswer = Type.Object({
  bucket: Str,
  time_zone: Str,
  generated_at: Str,
  devices: Int,
  devices_never_reported: Int,
  items: Type.Array(
    Type.Object({
      start: Str,
      end: Str,
      partial: Type.Boolean(),
      devices_expected: Int,
      devices_reporting: Int,
      devices_silent: Int,
      queue_lag_p50_seconds: NullableNum,
      queue_lag_p95_seconds: NullableNum,
      queue_lag_max_seconds: NullableNum,
      screen_off_devices: Int,
      screen_off_share_pct: NullableNum,
    }),
  ),
});
