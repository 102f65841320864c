// Examples built from the spec's tables, shared by the schema tests.
import {
  ApprovalEnvelope,
  ApprovalManifest,
  Category,
  CmsBatch,
  CreativeEntry,
  CreativeLookupItem,
  CreativeLookupRequest,
  CreativeLookupResponse,
  CreativeStatus,
  DictionaryCode,
  DictionaryEntry,
  Envelope,
  ExternalRefs,
  FieldErrorSchema,
  LedgerInfo,
  LedgerProof,
  LocalizedText,
  OpenDataDictionary,
  PopAnswer,
  PopAnswerItem,
  PopRecord,
  ProblemDocumentSchema,
  RenewAnswer,
  RenewRequest,
  RevocationList,
  SignedTelemetryBatch,
  Src,
  StatsSeal,
  StatsSealBody,
  Submission,
  SubmissionCreateRequest,
  TelemetryBatch,
} from '@ooh/protocol';
import type { TSchema } from '@sinclair/typebox';

export const UUID_A = '0b6f1c1e-5c7e-4f7a-9a43-2f9f6a1e0c11';
export const UUID_B = '7d3c2a10-11aa-4b8e-8f00-9e1d5c3b2a01';
export const HASH_A = 'a'.repeat(64);
export const HASH_B = '0123456789abcdef'.repeat(4);

export const text = (en: string) => ({ en, ru: `${en} (ru)`, kk: `${en} (kk)` });

export const createRequest: SubmissionCreateRequest = {
  advertiser_name: 'Acme LLP',
  advertiser_bin: '123456789012',
  period_from: '2026-12-01',
  period_to: '2026-12-31',
  structure_ids: [UUID_A, UUID_B],
  structure_set_ids: [UUID_B],
  channel: 'programmatic',
  external_refs: { crid: 'cr-77', adomain: ['acme.kz', 'shop.acme.com'], dsp: 'dsp-1', ssp: 'ssp-9' },
  fast_track: true,
  category_id: 1003,
  declared_daily_plays: { [UUID_A]: 120, [UUID_B]: 0 },
};

export const submission: Submission = {
  id: UUID_A,
  number: 'SUB-2026-000123',
  state: 'draft',
  advertiser_name: 'Acme LLP',
  period_from: '2026-12-01',
  period_to: null,
  declared_daily_plays: { [UUID_A]: 120 },
  category_id: 1003,
  category: { id: 1003, parent_id: 1002, tier: 2, name: text('Bars') },
  channel: 'programmatic',
  fast_track: true,
  external_refs: { crid: 'cr-77', adomain: ['acme.kz'] },
  review_due_at: null,
};

export const lookupResponse: CreativeLookupResponse = {
  items: [
    {
      sha256: HASH_A,
      approvals: [
        {
          status: 'valid',
          approval_number: 'APP-2026-00042',
          submission_number: 'SUB-2026-000123',
          valid_from: '2026-12-01',
          valid_until: '2026-12-31',
          structures: ['ALM-0001', 'ALM-0002'],
          category_id: 1003,
          duration_ms: 15000,
          width: 1920,
          height: 1080,
          envelope_url: 'https://api.example.kz/api/v1/approvals/APP-2026-00042/envelope',
        },
        {
          status: 'pending',
          approval_number: null,
          submission_number: 'SUB-2026-000124',
          valid_from: '2027-01-01',
          valid_until: '2027-01-31',
          structures: [],
          category_id: null,
          duration_ms: null,
          width: null,
          height: null,
          envelope_url: null,
        },
      ],
    },
    { sha256: HASH_B, approvals: [] },
  ],
  revocation_list_version: null,
};

export const popAnswer: PopAnswer = {
  batch_seq: 12,
  received: 4,
  accepted: 2,
  duplicates: 1,
  refused: 1,
  flagged: 1,
  duplicate: false,
  items: [
    { index: 0, status: 'duplicate' },
    { index: 2, status: 'refused', reason: 'time_in_future' },
    { index: 3, status: 'flagged', flags: ['structure_mismatch', 'screen_off'] },
  ],
};

export const dictionary: OpenDataDictionary = {
  version: '2026-11',
  licence: { status: 'draft', description: text('Licence to be decided by the city') },
  basis: { name: 'Decision 12', code: 'D-12', description: text('Legal basis') },
  files: [
    { name: 'plays-2026-10.csv', description: text('Play counts') },
    { name: 'dictionary.json', description: text('This dictionary') },
  ],
  tables: [{ name: 'plays', description: text('Plays per cell') }],
  columns: [
    { name: 'row', description: text('Row code') },
    { name: 'col', description: text('Column code') },
  ],
  statuses: [
    { code: 'published', description: text('Value published') },
    { code: 'withheld_parties', description: text('Too few operators or advertisers') },
  ],
  codes: {
    district: [{ code: 'almaly', name: text('Almaly') }],
    format: [{ code: 'billboard', name: text('Billboard') }],
    daypart: [
      { code: 'night', name: text('Night'), start_hour: 0, end_hour: 6 },
      { code: 'late', name: text('Late'), start_hour: 21, end_hour: 24 },
    ],
  },
  disclosure: {
    min_operators: 3,
    min_advertisers: 3,
    max_party_share_pct: 70,
    lag_months: 1,
    description: text('Disclosure rules'),
  },
};

export const statsSeal: StatsSeal = {
  day: '2026-11-20',
  signed_at: '2026-11-21T00:05:00+05:00',
  body: {
    v: 1,
    env: 'test',
    day: '2026-11-20',
    batch_count: 3,
    record_count: 2710,
    root: 'f'.repeat(64),
    prev_seal_sha256: '0'.repeat(64),
  },
  signature: 'MIIGzAYJKoZIhvcNAQcCoIIGvTCCBrkCAQExDTALBglghkgBZQMEAgEw',
  ledger: {
    day: '2026-11-21',
    status: 'digested',
    block_height: 5,
    digest: 'd'.repeat(64),
    proof: {
      v: 1,
      day: '2026-11-21',
      leaf: {
        kind: 'stats_seal',
        approval_number: null,
        manifest_sha256: 'e'.repeat(64),
        signed_at: '2026-11-21T00:05:00+05:00',
        revoked_at: null,
      },
      leaf_sha256: 'c'.repeat(64),
      index: 2,
      leaf_count: 3,
      path: [{ side: 'left', hash: 'b'.repeat(64) }],
      merkle_root: 'a'.repeat(64),
      anchor_sha256: '9'.repeat(64),
      digest: 'd'.repeat(64),
    },
  },
};

/** Every wire schema of the package, by its exported name. */
export const ALL_SCHEMAS: Record<string, TSchema> = {
  SubmissionCreateRequest,
  ExternalRefs,
  Category,
  Submission,
  CreativeEntry,
  CreativeStatus,
  CreativeLookupRequest,
  CreativeLookupItem,
  CreativeLookupResponse,
  PopRecord,
  Src,
  TelemetryBatch,
  SignedTelemetryBatch,
  CmsBatch,
  PopAnswer,
  PopAnswerItem,
  RenewRequest,
  RenewAnswer,
  LocalizedText,
  OpenDataDictionary,
  DictionaryEntry,
  DictionaryCode,
  StatsSeal,
  StatsSealBody,
  LedgerProof,
  LedgerInfo,
  ApprovalManifest,
  Envelope,
  ApprovalEnvelope,
  RevocationList,
  ProblemDocumentSchema,
  FieldErrorSchema,
};
