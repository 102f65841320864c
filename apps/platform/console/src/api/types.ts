/**
 * Shapes of the answers the console reads. The spec's resources (Submission, Category, Creative entry, the lookup
 * answer, the open-data dictionary, the stats seal) are @ooh/protocol's, derived from its TypeBox schemas: import them
 * from there. What follows are the platform's console routes (apps/platform/src, not in the spec) as the console reads
 * them, and the spec's Submission with what those routes add to it.
 */
import type { OrganisationKind, PopAnswer, Submission } from '@ooh/protocol';

export interface SessionInfo {
  user: { id: string; email: string; role: 'admin' | 'member' };
  organisation: { id: string; name: string; kind: OrganisationKind };
  scopes: string[];
  csrf_token: string;
  idle_timeout_seconds: number;
  expires_at: string;
}

/**
 * spec "Submission" (@ooh/protocol), plus what GET /api/v1/submissions/{id} adds (structure_ids, advertiser_bin,
 * media, approval_number, approval_revoked_at, reject_reason) and the list's created_at.
 */
export interface SubmissionDetail extends Submission {
  advertiser_bin?: string | null;
  structure_ids?: string[];
  created_at?: string;
  media?: {
    sha256: string;
    media_type: string;
    size_bytes: number;
    width: number;
    height: number;
    duration_ms: number | null;
    uploaded_at: string;
  } | null;
  approval_number?: string | null;
  approval_revoked_at?: string | null;
  reject_reason?: string | null;
}

export interface Structure {
  id: string;
  code: string;
  district: string;
  format: string;
  address?: string | null;
  organisation_id?: string;
  retired_at?: string | null;
  lat?: number | null;
  lon?: number | null;
  /** OpenOOH Venue Taxonomy 1.2 id, the screen's OpenOOH and Geopath ids (issue 20 item 3). */
  venue_type_id?: number | null;
  openooh_screen_id?: string | null;
  geopath_spot_id?: string | null;
}

/** GET /api/v1/venue-types: the OpenOOH Venue Taxonomy shipped with the platform. */
export interface VenueType {
  id: number;
  parent_id: number | null;
  name: string;
  deprecated: boolean;
}

/** POST /api/v1/console/structures/import (apps/platform/src/structures/import.ts). */
export interface StructureImportAnswer {
  dry_run: boolean;
  created: number;
  unchanged: number;
  items: { index: number; code: string; status: 'created' | 'unchanged'; id: string | null }[];
}

export interface StructureSet {
  id: string;
  name: string;
  structure_ids: string[];
}

export interface MediaFacts {
  media_sha256: string;
  width: number;
  height: number;
  duration_ms: number | null;
}

export interface DeviceCertificate {
  serial: string;
  state: string;
  not_before: string;
  not_after: string;
  issued_at: string;
  /** GET /api/v1/console/devices/{id} gives the history too (the device page). */
  issued_by?: 'enrolment' | 'renewal' | 're-enrolment';
  first_used_at?: string | null;
  replaced_at?: string | null;
  old_valid_until?: string | null;
  key_fingerprint?: string;
}

/** Elements of GET /api/v1/console/devices, and GET /api/v1/console/devices/{id}. */
export interface Device {
  device_id: string;
  structure_id: string;
  structure_code: string;
  organisation_id?: string;
  created_at: string;
  revoked_at: string | null;
  force_renewal_until: string | null;
  certificates?: DeviceCertificate[];
  /** GET /api/v1/console/devices/{id}: its keys, and when it was last re-enrolled. */
  keys?: { fingerprint: string; registered_at: string; accepted_until: string | null }[];
  re_enrolled_at?: string | null;
  /** Expiry of the current certificate (list answers); else derived from certificates. */
  certificate_not_after?: string | null;
  last_batch_at?: string | null;
  last_batch_seq?: number | null;
  queue_lag_seconds?: number | null;
  /** Refused handshakes and certificates of the last 24 hours (list answers). */
  handshake_refusals_24h?: number;
  /** 5xx answers since the device's last accepted batch (list answers): the batch waits. */
  stuck?: { since: string; count: number; last_at: string; batch_seq: number | null; reason: string } | null;
  /**
   * The disk state the player last reported (list answers; null: never): low = below its warning threshold, full =
   * below its hard one (only authority slot content plays until space is back). apps/agent/README.md.
   */
  storage?: { state: 'ok' | 'low' | 'full'; free_bytes: number | null; at: string | null } | null;
  /** Reporting, silent, never reported or revoked (list answers; src/devices/fleet.ts). */
  status?: 'reporting' | 'silent' | 'never_reported' | 'revoked';
  /** The newest mode change the player sent went to screen_off (list answers). */
  screen_off?: boolean;
  /** Kinds of the device's open alerts (list answers). */
  open_alerts?: Alert['kind'][];
}

/** The states the fleet list filters on and counts (GET /api/v1/console/devices?state=). */
export type FleetState =
  | 'reporting'
  | 'silent'
  | 'never_reported'
  | 'screen_off'
  | 'expiring'
  | 'refused'
  | 'stuck'
  | 'revoked';
export type FleetSort = 'structure' | 'last_batch' | 'queue_lag';

/** GET /api/v1/console/devices/{id}/activity: the device page's batches, clock offset, rejects and refusals. */
export interface DeviceActivity {
  device: Device;
  batches: {
    batch_seq: number;
    channel: string;
    received_at: string;
    record_count: number;
    queue_lag_seconds: number | null;
    clock_offset_ms: number | null;
    /** The counts of the spec's PopAnswer the device was given, and its refusals counted by reason. */
    answer: Pick<PopAnswer, 'received' | 'accepted' | 'duplicates' | 'refused' | 'flagged' | 'duplicate'> & {
      refusals: { reason: string; records: number }[];
    };
  }[];
  clock_offset: { ms: number; at: string } | null;
  rejects: {
    at: string | null;
    received_at: string;
    seq: number | null;
    code: string | null;
    approval_number: string | null;
    media_sha256: string | null;
    file: string | null;
    reason: string | null;
  }[];
  refusals: { at: string; reason: string; serial: string | null; address: string | null; refusals: number }[];
}

/** A fleet alert (GET /api/v1/console/alerts, and the open ones in the fleet list; apps/platform/docs/alerts.md). */
export interface Alert {
  id: string;
  kind: 'device_silent' | 'screen_off' | 'queue_lag' | 'cms_player_no_plays';
  state: 'open' | 'resolved';
  organisation_id: string;
  device_id: string | null;
  cms_installation_id: string | null;
  player: string | null;
  structure_id: string;
  structure_code: string;
  since: string;
  last_seen_at: string | null;
  opened_at: string;
  resolved_at: string | null;
  resolution: 'cleared' | 'not_monitored' | null;
  detail: Record<string, string | number | null>;
}

/** GET /api/v1/console/devices: the devices and the refused handshakes of the last 24 hours. */
export interface FleetList {
  /** Open alerts of the devices and CMS players the caller sees, newest first. */
  alerts?: Alert[];
  items: Device[];
  /** Devices matching the search and the filter, on every page; the page's place. */
  total: number;
  offset: number;
  limit: number;
  /** The whole fleet the caller sees, counted by state. */
  summary: Record<FleetState | 'devices', number>;
  handshake_refusals?: {
    last_24h: number;
    recent: {
      at: string;
      reason: string;
      subject: string | null;
      serial: string | null;
      address: string | null;
      device_id: string | null;
    }[];
  };
}

export interface CmsInstallation {
  id: string;
  organisation_id: string;
  name: string;
  kind: string;
  created_at: string;
  keys?: { id: string; registered_at: string; accepted_until: string | null }[];
  players?: { external_id: string; structure_id: string; structure_code: string; mapped_at: string }[];
}

export interface Organisation {
  id: string;
  name: string;
  kind: OrganisationKind;
}

export interface ConsoleUser {
  id: string;
  organisation_id: string;
  email: string;
  role: 'admin' | 'member';
  created_at: string;
  disabled_at: string | null;
}

/** GET /api/v1/console/api-keys (never the key itself nor its hash). */
export interface ApiKey {
  id: string;
  name: string;
  organisation: { id: string; name: string; kind: OrganisationKind };
  scopes: string[];
  routes: string[] | null;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
  state: 'active' | 'expired' | 'revoked';
}

export interface OpenDataRelease {
  month: string;
  built_at: string;
  sha256: string;
  files: { name: string; url: string; sha256: string; bytes: number }[];
}

export interface OpenDataConsole {
  publication: { enabled: boolean; changed_at: string | null };
  disclosure: {
    min_operators: number;
    min_advertisers: number;
    max_party_share_pct: number;
    lag_months: number;
  };
  releases: OpenDataRelease[];
}

/** GET /api/v1/console/webhooks (apps/platform/docs/city-events.md). */
export interface Webhook {
  id: string;
  /** The operator that owns it; null: the authority's. */
  organisation_id?: string | null;
  url: string;
  types: string[];
  created_at: string;
  deliveries: { pending: number; delivered: number; failed: number };
}

/** POST /api/v1/console/webhooks: the secret only when the platform made it, shown once. */
export interface WebhookCreated {
  id: string;
  url: string;
  types: string[];
  created_at: string;
  secret?: string;
}

export interface WebhookDelivery {
  event_id: string;
  attempts: number;
  next_attempt_at: string;
  delivered_at: string | null;
  failed_at: string | null;
  last_status: number | null;
  last_error: string | null;
}

/** POST /api/v1/console/devices and .../re-enrol; the certificate fields only when a CSR was given. */
export interface EnrolAnswer {
  device_id: string;
  structure_code: string;
  certificate_pem?: string;
  chain_pem?: string;
  not_after?: string;
}

// ---- reports (GET /api/v1/console/reports/...): CampaignListItem, CampaignReport, PlaysAnswer, FleetHealth and
// their parts are @ooh/protocol's (schemas/console.ts), the schemas the platform answers through.

// GET /api/v1/console/submissions/decided: RegisterPage, RegisterItem are @ooh/protocol's (schemas/console.ts).
