import { type Static, Type } from '@sinclair/typebox';
import { LIMITS } from '../limits.js';
import { CREATIVE_STATUSES } from '../vocabulary.js';
import { CalendarDate, Nullable, Sha256Hex, StringEnum } from './common.js';

/** spec: "valid, not_yet_valid, expired, revoked (issued approval) or pending, rejected". */
export const CreativeStatus = StringEnum(CREATIVE_STATUSES);
export type CreativeStatus = Static<typeof CreativeStatus>;

/** spec "Creative entry (element of approvals in a lookup answer)": every field is required, some nullable. */
export const CreativeEntry = Type.Object({
  status: CreativeStatus,
  approval_number: Nullable(Type.String()),
  submission_number: Nullable(Type.String()),
  valid_from: Nullable(CalendarDate),
  valid_until: Nullable(CalendarDate),
  structures: Type.Array(Type.String()),
  category_id: Nullable(Type.Integer()),
  duration_ms: Nullable(Type.Integer({ minimum: 0 })),
  width: Nullable(Type.Integer({ minimum: 0 })),
  height: Nullable(Type.Integer({ minimum: 0 })),
  envelope_url: Nullable(Type.String({ format: 'uri' })),
});
export type CreativeEntry = Static<typeof CreativeEntry>;

/**
 * spec: "{hashes: array of string, required; lowercase hexadecimal SHA-256 values; at most 500}".
 * The platform's route takes it as its body schema (unknown keys refused); its hosts' ajv collects every error, so
 * each bad hash is named in one 422.
 */
export const CreativeLookupRequest = Type.Object({
  hashes: Type.Array(Sha256Hex, { maxItems: LIMITS.lookupHashesMax }),
});
export type CreativeLookupRequest = Static<typeof CreativeLookupRequest>;

export const CreativeLookupItem = Type.Object({
  sha256: Type.String(),
  approvals: Type.Array(CreativeEntry),
});
export type CreativeLookupItem = Static<typeof CreativeLookupItem>;

/** spec: "revocation_list_version (integer or null; version of the newest signed revocation list, null before the first)". */
export const CreativeLookupResponse = Type.Object({
  items: Type.Array(CreativeLookupItem),
  revocation_list_version: Nullable(Type.Integer({ minimum: 0 })),
});
export type CreativeLookupResponse = Static<typeof CreativeLookupResponse>;
