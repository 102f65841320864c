import { type Static, Type } from '@sinclair/typebox';
import {
  ADVERTISER_BIN_PATTERN,
  DOMAIN_MAX_CHARS,
  DOMAIN_PATTERN,
  LIMITS,
  SUBMISSION_NUMBER_PATTERN,
  UUID_PATTERN,
} from '../limits.js';
import type { FieldError } from '../problems.js';
import { SUBMISSION_CHANNELS } from '../vocabulary.js';
import { CalendarDate, DateTime, LocalizedText, Nullable, StringEnum, Uuid } from './common.js';

/** spec: "channel: direct or programmatic". */
export const SubmissionChannelSchema = StringEnum(SUBMISSION_CHANNELS);

/**
 * spec: "external_refs fields: crid (string, creative id in the partner's system), adomain (array of string,
 * advertiser domains as in OpenRTB adomain), dsp (string, demand-side platform identifier), ssp (string, supply-side
 * platform identifier). Unknown keys are refused."
 */
export const ExternalRefs = Type.Object(
  {
    crid: Type.Optional(Type.String()),
    adomain: Type.Optional(Type.Array(Type.String({ pattern: DOMAIN_PATTERN, maxLength: DOMAIN_MAX_CHARS }))),
    dsp: Type.Optional(Type.String()),
    ssp: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);
export type ExternalRefs = Static<typeof ExternalRefs>;

/** spec: declared_daily_plays "plays per day per chosen structure, keyed by structure id". */
export const DeclaredDailyPlays = Type.Record(
  Type.String({ pattern: UUID_PATTERN }),
  Type.Integer({ minimum: 0 }),
  {
    additionalProperties: false,
  },
);
export type DeclaredDailyPlays = Static<typeof DeclaredDailyPlays>;

/** Request body of POST {base_url}/api/v1/submissions (spec "create a draft"). */
export const SubmissionCreateRequest = Type.Object({
  // spec: "up to 300 characters"
  advertiser_name: Type.String({ minLength: 1, maxLength: LIMITS.advertiserNameMaxChars }),
  // spec: "12 digits"
  advertiser_bin: Type.Optional(Type.String({ pattern: ADVERTISER_BIN_PATTERN })),
  period_from: CalendarDate,
  period_to: CalendarDate,
  // spec: "operators: up to 200 of their own structures; agencies: up to 2000 structures of any operators". The
  // role-dependent limit, counted after set expansion, is the platform's; the schema holds the larger one.
  structure_ids: Type.Array(Uuid, { maxItems: LIMITS.agencyStructuresMax }),
  structure_set_ids: Type.Optional(Type.Array(Uuid)),
  channel: Type.Optional(SubmissionChannelSchema),
  external_refs: Type.Optional(ExternalRefs),
  fast_track: Type.Optional(Type.Boolean()),
  category_id: Type.Optional(Type.Integer({ minimum: 1 })),
  declared_daily_plays: Type.Optional(DeclaredDailyPlays),
});
export type SubmissionCreateRequest = Static<typeof SubmissionCreateRequest>;

/**
 * Rules across fields of a create request that a JSON Schema does not say well. Call after the schema accepted
 * the body; every broken rule is one field error.
 */
export function checkSubmissionCreateRules(request: SubmissionCreateRequest): FieldError[] {
  const errors: FieldError[] = [];
  const programmatic = request.channel === 'programmatic';
  // spec: "external_refs ... only with channel programmatic"
  if (request.external_refs !== undefined && !programmatic) {
    errors.push({
      path: '/external_refs',
      code: 'not_allowed',
      message: 'external_refs is allowed only with channel programmatic',
    });
  }
  // spec: "fast_track ... only with channel programmatic"
  if (request.fast_track === true && !programmatic) {
    errors.push({
      path: '/fast_track',
      code: 'not_allowed',
      message: 'fast_track is allowed only with channel programmatic',
    });
  }
  // ISO dates compare as text.
  if (request.period_to < request.period_from) {
    errors.push({ path: '/period_to', code: 'out_of_range', message: 'period_to is before period_from' });
  }
  return errors;
}

/** spec: "Category with names in the three console languages". */
export const CategoryName = LocalizedText;
export type CategoryName = LocalizedText;

/**
 * spec: "Shape: id (integer), parent_id (integer), tier (integer), name {en, ru, kk} (strings)".
 * parent_id is also allowed to be null: tier-1 rows of the IAB Ad Product Taxonomy 2.0 have no parent, and a
 * response schema that cannot serialise them would turn a good answer into a 500.
 */
export const Category = Type.Object({
  id: Type.Integer(),
  parent_id: Nullable(Type.Integer()),
  tier: Type.Integer({ minimum: 1 }),
  name: CategoryName,
});
export type Category = Static<typeof Category>;

/** spec "Submission (response of creation, 201)". */
export const Submission = Type.Object({
  id: Uuid,
  number: Type.String({ pattern: SUBMISSION_NUMBER_PATTERN }),
  state: Type.String(),
  advertiser_name: Type.String(),
  period_from: Nullable(CalendarDate),
  period_to: Nullable(CalendarDate),
  declared_daily_plays: Type.Optional(DeclaredDailyPlays),
  category_id: Type.Optional(Nullable(Type.Integer())),
  category: Type.Optional(Nullable(Category)),
  channel: Type.Optional(SubmissionChannelSchema),
  fast_track: Type.Optional(Type.Boolean()),
  external_refs: Type.Optional(ExternalRefs),
  // spec: "Deadline of a fast-track review in Almaty time (offset +05:00)"
  review_due_at: Type.Optional(Nullable(DateTime)),
});
export type Submission = Static<typeof Submission>;
