import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { CalendarDate, DateTime, Nullable, Sha256Hex } from './common.js';

/**
 * DESIGN.md §4 "Approval envelope": `{"v":1, "body": {...manifest...}, "signature": "<base64 CMS over canonical JSON
 * of body>"}`. The manifest: `kind: "approval"`, approval_number, media_sha256, structures (codes), valid_from,
 * valid_until (Almaty dates, inclusive), category_id, duration_ms, width, height, issued_at.
 * category_id, duration_ms, width and height may be null as in the creative entry (an image has no duration).
 */
export const ApprovalManifest = Type.Object({
  kind: Type.Literal('approval'),
  approval_number: Type.String({ minLength: 1 }),
  media_sha256: Sha256Hex,
  structures: Type.Array(Type.String()),
  valid_from: CalendarDate,
  valid_until: CalendarDate,
  category_id: Nullable(Type.Integer()),
  duration_ms: Nullable(Type.Integer({ minimum: 0 })),
  width: Nullable(Type.Integer({ minimum: 0 })),
  height: Nullable(Type.Integer({ minimum: 0 })),
  issued_at: DateTime,
});
export type ApprovalManifest = Static<typeof ApprovalManifest>;

/** A signed document `{v: 1, body, signature}` whose body has the given schema. */
export function EnvelopeOf<T extends TSchema>(body: T) {
  return Type.Object({
    v: Type.Literal(1),
    body,
    // base64 of a DER CMS SignedData over the canonical JSON (RFC 8785) of body
    signature: Type.String({ minLength: 1 }),
  });
}

/** Any signed document; read `body` with its own schema after the signature verified. */
export const Envelope = EnvelopeOf(Type.Record(Type.String(), Type.Unknown()));
export type Envelope = Static<typeof Envelope>;

/** The sidecar `<file>.envelope.json` and the `envelope_url` document. */
export const ApprovalEnvelope = EnvelopeOf(ApprovalManifest);
export type ApprovalEnvelope = Static<typeof ApprovalEnvelope>;

/** DESIGN.md §4 "Revocation list": body `{"version": n, "issued_at", "revoked": [{"approval_number", "revoked_at"}]}`. */
export const RevocationListBody = Type.Object({
  version: Type.Integer({ minimum: 1 }),
  issued_at: DateTime,
  revoked: Type.Array(Type.Object({ approval_number: Type.String({ minLength: 1 }), revoked_at: DateTime })),
});
export type RevocationListBody = Static<typeof RevocationListBody>;

/** The signed revocation list as published at {verify_url}/v1/revocations.json. */
export const RevocationList = EnvelopeOf(RevocationListBody);
export type RevocationList = Static<typeof RevocationList>;
