import { type Static, Type } from '@sinclair/typebox';
import { DateTime, Nullable, StringEnum, Uuid } from './common.js';

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
  /**
   * Plays under approval numbers the platform never issued (flagged approval_unknown), or under the approval of a
   * campaign the viewer may not see (another organisation's, covering none of its structures).
   */
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

// ---- fleet alerts (apps/platform/src/alerts; apps/platform/docs/alerts.md) ----

/**
 * The kinds of fleet alert: device_silent ("a device silent for a configurable time"), screen_off ("a screen reported
 * off during its operating hours"), queue_lag ("a queue lag over an hour"), cms_player_no_plays ("a mapped CMS player
 * that sends batches with no plays").
 */
export const ALERT_KINDS = ['device_silent', 'screen_off', 'queue_lag', 'cms_player_no_plays'] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];

export const ALERT_RESOLUTIONS = ['cleared', 'not_monitored'] as const;
export type AlertResolution = (typeof ALERT_RESOLUTIONS)[number];

/** One alert as the console and the fleet list show it (times in UTC, like the rest of the fleet list). */
export const AlertView = Type.Object({
  id: Uuid,
  kind: StringEnum(ALERT_KINDS),
  state: StringEnum(['open', 'resolved']),
  organisation_id: Uuid,
  /** The device (agent channel); null for a CMS player. */
  device_id: Nullable(Uuid),
  /** The CMS installation and the player's external id; null for a device. */
  cms_installation_id: Nullable(Uuid),
  player: NullableStr,
  structure_id: Uuid,
  structure_code: Str,
  /** When the condition began. */
  since: DateTime,
  /** The newest sign of life: the device's newest batch; a CMS player's newest counted play (its start). */
  last_seen_at: Nullable(DateTime),
  opened_at: DateTime,
  resolved_at: Nullable(DateTime),
  resolution: Nullable(StringEnum(ALERT_RESOLUTIONS)),
  /** The figures of the condition: thresholds in force, the lag measured, the operating hours (docs/alerts.md). */
  detail: Type.Record(Str, Type.Union([Str, Num, Type.Null()])),
});
export type AlertView = Static<typeof AlertView>;

export const AlertList = Type.Object({ items: Type.Array(AlertView) });
export type AlertList = Static<typeof AlertList>;

// ---- devices and the fleet (apps/platform/src/devices) ----

const NullableDateTime = Nullable(DateTime);
const NullableInteger = Nullable(Type.Integer({ minimum: 0 }));
const NullableString = NullableStr;
const Count = Type.Integer({ minimum: 0 });
const Counted = Count;

/** Answer of enrolment and re-enrolment; the certificate fields only when a CSR was given. */
export const EnrolAnswer = Type.Object({
  device_id: Uuid,
  structure_code: Type.String(),
  certificate_pem: Type.Optional(Type.String()),
  chain_pem: Type.Optional(Type.String()),
  not_after: Type.Optional(DateTime),
});
export type EnrolAnswer = Static<typeof EnrolAnswer>;

export const CertificateView = Type.Object({
  serial: Type.String(),
  state: Type.Union([
    Type.Literal('current'),
    Type.Literal('previous-until'),
    Type.Literal('superseded'),
    Type.Literal('revoked'),
  ]),
  not_before: DateTime,
  not_after: DateTime,
  issued_at: DateTime,
  issued_by: Type.String(),
  first_used_at: Nullable(DateTime),
  replaced_at: Nullable(DateTime),
  old_valid_until: Nullable(DateTime),
  key_fingerprint: Type.String(),
  certificate_pem: Type.String(),
});
export type CertificateView = Static<typeof CertificateView>;

export const DeviceView = Type.Object({
  device_id: Uuid,
  structure_id: Uuid,
  structure_code: Type.String(),
  organisation_id: Uuid,
  created_at: DateTime,
  re_enrolled_at: Nullable(DateTime),
  revoked_at: Nullable(DateTime),
  /** End of the live force-renewal grant, or null. */
  force_renewal_until: Nullable(DateTime),
  keys: Type.Array(
    Type.Object({
      fingerprint: Type.String(),
      public_key: Type.String(),
      registered_at: DateTime,
      accepted_until: Nullable(DateTime),
    }),
  ),
  certificates: Type.Array(CertificateView),
});
export type DeviceView = Static<typeof DeviceView>;

/**
 * The disk state a player last reported (issue "A player that runs for years on a small disk"; apps/agent/README.md
 * "Retention and disk space"): `low` below its warning threshold (its answered history goes early), `full` below its
 * hard one (only authority slot content plays: nothing billable until space is back), `ok` when it came back.
 * `at` is the record's own time. The agent reports it in the detail of a mode_change record, as sent; a value of
 * another shape is not shown (the device's word, never trusted to be well formed).
 */
export const DeviceStorage = Type.Object({
  state: Type.Union([Type.Literal('ok'), Type.Literal('low'), Type.Literal('full')]),
  free_bytes: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
  at: Type.Union([DateTime, Type.Null()]),
});
export type DeviceStorage = Static<typeof DeviceStorage>;

/**
 * A device the platform keeps answering 5xx (migration 069): since its first 5xx after its newest stored batch of
 * records, how many 5xx answers since, the last one, the batch it answered (null when not a batch) and its problem
 * code.
 */
const Stuck = Type.Object({
  since: DateTime,
  count: Type.Integer({ minimum: 1 }),
  last_at: DateTime,
  batch_seq: NullableInteger,
  reason: Type.String(),
});

const RecentRefusal = Type.Object({
  at: DateTime,
  reason: Type.String(),
  subject: NullableString,
  serial: NullableString,
  address: NullableString,
  device_id: Type.Union([Uuid, Type.Null()]),
});

/**
 * Whether a device reports (issue 22, item 2: "reporting, silent"): `revoked`; `never_reported` (no batch yet: no alert
 * either, docs/alerts.md); `silent` (its newest batch is older than the silence threshold of the alerts,
 * ALERT_DEVICE_SILENT_MINUTES, counted from the start of the platform's watch at the earliest, as the device_silent
 * alert counts it); else `reporting`.
 */
export const DeviceStatus = Type.Union([
  Type.Literal('reporting'),
  Type.Literal('silent'),
  Type.Literal('never_reported'),
  Type.Literal('revoked'),
]);
export type DeviceStatus = Static<typeof DeviceStatus>;

export const FleetItem = Type.Object({
  device_id: Uuid,
  structure_id: Uuid,
  structure_code: Type.String(),
  organisation_id: Uuid,
  created_at: DateTime,
  revoked_at: NullableDateTime,
  force_renewal_until: NullableDateTime,
  certificate_not_after: NullableDateTime,
  last_batch_at: NullableDateTime,
  last_batch_seq: NullableInteger,
  queue_lag_seconds: NullableInteger,
  stuck: Type.Union([Stuck, Type.Null()]),
  handshake_refusals_24h: Count,
  /** The disk state the player last reported; null if it never did (src/devices/storage.ts, migration 074). */
  storage: Type.Union([DeviceStorage, Type.Null()]),
  status: DeviceStatus,
  /** The newest mode_change record the player sent went to screen_off (at any hour; the alert only in operating hours). */
  screen_off: Type.Boolean(),
  /** Kinds of the device's open alerts (src/alerts). */
  open_alerts: Type.Array(StringEnum(ALERT_KINDS)),
});
export type FleetItem = Static<typeof FleetItem>;

/** The whole fleet the caller sees, counted by state (whatever the page, search and filter). */
export const FleetSummary = Type.Object({
  devices: Count,
  reporting: Count,
  silent: Count,
  never_reported: Count,
  screen_off: Count,
  /** Not revoked, the current certificate ends within EXPIRY_WARNING_DAYS (or has ended). */
  expiring: Count,
  /** Devices with at least one refused handshake or certificate in the last 24 hours. */
  refused: Count,
  stuck: Count,
  revoked: Count,
});
export type FleetSummary = Static<typeof FleetSummary>;

/** GET /api/v1/console/devices (apps/platform/console/README.md "Fleet"; src/devices/README.md). */
export const FleetList = Type.Object({
  /** The devices of the page asked for (offset, limit), searched, filtered and sorted. */
  items: Type.Array(FleetItem),
  /** Devices that match the search and the filter, over every page. */
  total: Count,
  offset: Count,
  limit: Type.Integer({ minimum: 1 }),
  sort: Type.String(),
  order: Type.String(),
  summary: FleetSummary,
  handshake_refusals: Type.Object({
    last_24h: Count,
    recent: Type.Array(RecentRefusal, { maxItems: 20 }),
  }),
  /** Open alerts of the devices and CMS players the caller sees, newest first (src/alerts, docs/alerts.md). */
  alerts: Type.Array(AlertView),
});
export type FleetList = Static<typeof FleetList>;

/** GET /api/v1/console/devices/{id}/activity: what the device page shows beside its certificates. */
export const DeviceActivity = Type.Object({
  /** Newest first, at most DEVICE_ACTIVITY_BATCHES: each stored batch and the answer it got. */
  batches: Type.Array(
    Type.Object({
      batch_seq: Counted,
      channel: Type.String(),
      received_at: DateTime,
      /** Plays in the body (spec: record_count). */
      record_count: Counted,
      queue_lag_seconds: Type.Union([Counted, Type.Null()]),
      /** The agent's clock (the signed body's ts) minus the platform's at receipt; null without ts. */
      clock_offset_ms: Type.Union([Type.Integer(), Type.Null()]),
      answer: Type.Object({
        received: Counted,
        accepted: Counted,
        duplicates: Counted,
        refused: Counted,
        flagged: Counted,
        duplicate: Type.Boolean(),
        /** Refused records by reason. */
        refusals: Type.Array(Type.Object({ reason: Type.String(), records: Counted })),
      }),
    }),
  ),
  /** The agent's clock offset by its newest signed batch (null: none sent a ts). */
  clock_offset: Type.Union([Type.Object({ ms: Type.Integer(), at: DateTime }), Type.Null()]),
  /** The player's reject events (it refused to show a creative), newest first. */
  rejects: Type.Array(
    Type.Object({
      at: Nullable(DateTime),
      received_at: DateTime,
      seq: Type.Union([Counted, Type.Null()]),
      code: Nullable(Type.String()),
      approval_number: Nullable(Type.String()),
      media_sha256: Nullable(Type.String()),
      /** The file the player refused and why, in its own words (apps/agent/src/media/library.ts). */
      file: Nullable(Type.String()),
      reason: Nullable(Type.String()),
    }),
  ),
  /** Its refused handshakes and certificates, newest first (migration 070). */
  refusals: Type.Array(
    Type.Object({
      at: DateTime,
      reason: Type.String(),
      serial: Nullable(Type.String()),
      address: Nullable(Type.String()),
      refusals: Counted,
    }),
  ),
});
export type DeviceActivity = Static<typeof DeviceActivity>;

export const DeviceActivityAnswer = Type.Composite([Type.Object({ device: FleetItem }), DeviceActivity]);
export type DeviceActivityAnswer = Static<typeof DeviceActivityAnswer>;
