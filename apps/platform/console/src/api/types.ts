/**
 * Shapes of the answers the console reads. The spec's resources (Submission, Category, Creative entry, the lookup
 * answer, the open-data dictionary, the stats seal) are @ooh/protocol's, derived from its TypeBox schemas: import them
 * from there. What follows are the platform's console routes (apps/platform/src, not in the spec) as the console reads
 * them, and the spec's Submission with what those routes add to it.
 */
import type {
  AlertView,
  CertificateView,
  DeviceActivityAnswer,
  DeviceView,
  FleetItem,
  FleetList,
  OrganisationKind,
  Submission,
} from '@ooh/protocol';

export type { EnrolAnswer, FleetSort, FleetState } from '@ooh/protocol';

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

/** A certificate of a device as GET /api/v1/console/devices/{id} gives it (its history, the device page). */
export type DeviceCertificate = CertificateView;

/** The fields GET /api/v1/console/devices (FleetItem) and GET /api/v1/console/devices/{id} (DeviceView) share. */
type DeviceCommon =
  | 'device_id'
  | 'structure_id'
  | 'structure_code'
  | 'organisation_id'
  | 'created_at'
  | 'revoked_at'
  | 'force_renewal_until';

/**
 * A device as the console holds it: an element of GET /api/v1/console/devices, or GET /api/v1/console/devices/{id}
 * (its keys, certificates and re-enrolment): the shared fields, and those of either answer when present.
 */
export type Device = Pick<FleetItem, DeviceCommon> &
  Partial<Omit<FleetItem, DeviceCommon>> &
  Partial<Pick<DeviceView, 'keys' | 'certificates' | 're_enrolled_at'>>;

/** GET /api/v1/console/devices/{id}/activity: the device page's batches, clock offset, rejects and refusals. */
export type DeviceActivity = DeviceActivityAnswer;

/** A fleet alert (GET /api/v1/console/alerts, and the open ones in the fleet list; apps/platform/docs/alerts.md). */
export type Alert = AlertView;

export type { FleetList };

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
// ---- reports (GET /api/v1/console/reports/...): CampaignListItem, CampaignReport, PlaysAnswer, FleetHealth and
// their parts are @ooh/protocol's (schemas/console.ts), the schemas the platform answers through.

// GET /api/v1/console/submissions/decided: RegisterPage, RegisterItem are @ooh/protocol's (schemas/console.ts).
