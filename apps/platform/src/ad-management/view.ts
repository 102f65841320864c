import { formatAlmaty } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';
import type { AdRow, AdStatus } from './repository.js';

/*
 * Our programmatic submissions as IAB Tech Lab Ad Management API 1.1 "collections of ads" of AdCOM 1.0 Ad objects
 * (./README.md). Times are milliseconds since the epoch, rounded down ("Dates and Times"); ids are our submission
 * ids (the partner's own creative id is in ext.crid: "a given exchange operates using either its own ad IDs or
 * bidder IDs, but not both").
 */

/** AdCOM 1.0 audit statuses (List: Audit Status Codes). */
export const AUDIT_STATUS = {
  pending: 1,
  preApproved: 2,
  approved: 3,
  denied: 4,
  changed: 5,
  expired: 6,
} as const;

/**
 * Our status of the spec's creative entry onto an audit status. not_yet_valid is approved (3): the decision is
 * made, the campaign has not begun (ext.valid_from says when); revoked is denied (4) with the reason as feedback,
 * like a refusal; expired (6) is the Ad Management API's own "expired".
 */
export const AUDIT_STATUS_OF: Record<AdStatus, number> = {
  pending: AUDIT_STATUS.pending,
  valid: AUDIT_STATUS.approved,
  not_yet_valid: AUDIT_STATUS.approved,
  rejected: AUDIT_STATUS.denied,
  revoked: AUDIT_STATUS.denied,
  expired: AUDIT_STATUS.expired,
};

/** AdCOM List: Category Taxonomies, 8 = IAB Tech Lab Ad Product Taxonomy 2.0 (our categories, spec category_id). */
export const CATTAX_AD_PRODUCT_2_0 = 8;

const ms = (d: Date): number => Math.floor(d.getTime());
const Ms = Type.Integer({ minimum: 0 });

/** What we send, field by field: an AdCOM Audit and Ad with our ext. */
export const AuditSchema = Type.Object({
  status: Type.Union([Type.Integer({ minimum: 1, maximum: 6 }), Type.Integer({ minimum: 500 })]),
  feedback: Type.Optional(Type.Array(Type.String())),
  init: Type.Optional(Ms),
  lastmod: Ms,
  corr: Type.Optional(Type.Object({})),
  ext: Type.Optional(Type.Object({ status: Type.String() })),
});

export const AdSchema = Type.Object({
  id: Type.String({ minLength: 1 }),
  init: Type.Optional(Ms),
  lastmod: Ms,
  adomain: Type.Optional(Type.Array(Type.String())),
  cat: Type.Optional(Type.Array(Type.String())),
  cattax: Type.Optional(Type.Integer()),
  display: Type.Optional(
    Type.Object({
      mime: Type.Optional(Type.String()),
      w: Type.Optional(Type.Integer()),
      h: Type.Optional(Type.Integer()),
    }),
  ),
  video: Type.Optional(
    Type.Object({
      mime: Type.Optional(Type.Array(Type.String())),
      dur: Type.Optional(Type.Integer()),
      w: Type.Optional(Type.Integer()),
      h: Type.Optional(Type.Integer()),
    }),
  ),
  audit: AuditSchema,
  ext: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});
export type Ad = Static<typeof AdSchema>;

/** Ad Management API "Collection Of Ads". */
export const AdCollectionSchema = Type.Object({
  count: Type.Integer({ minimum: 0 }),
  more: Type.Optional(Type.Integer({ minimum: 0, maximum: 1 })),
  nextPage: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  ads: Type.Array(AdSchema),
});
export type AdCollection = Static<typeof AdCollectionSchema>;

export function adOf(row: AdRow): Ad {
  const refs = row.external_refs ?? {};
  const feedback =
    row.status === 'rejected' ? row.reject_reason : row.status === 'revoked' ? row.revoke_reason : null;
  const media =
    row.media_type === null
      ? {}
      : row.media_type.startsWith('video/')
        ? {
            video: {
              mime: [row.media_type],
              ...(row.duration_ms !== null ? { dur: Math.round(row.duration_ms / 1000) } : {}),
              ...(row.width !== null ? { w: row.width, h: row.height ?? 0 } : {}),
            },
          }
        : {
            display: {
              mime: row.media_type,
              ...(row.width !== null ? { w: row.width, h: row.height ?? 0 } : {}),
            },
          };
  return {
    id: row.id,
    init: ms(row.created_at),
    lastmod: ms(row.updated_at),
    ...(refs.adomain && refs.adomain.length > 0 ? { adomain: [...refs.adomain] } : {}),
    ...(row.category_id !== null ? { cat: [String(row.category_id)], cattax: CATTAX_AD_PRODUCT_2_0 } : {}),
    ...media,
    audit: {
      status: AUDIT_STATUS_OF[row.status],
      ...(feedback ? { feedback: [feedback] } : {}),
      ...(row.sent_at ? { init: ms(row.sent_at) } : {}),
      lastmod: ms(row.audit_lastmod),
      // Our own word for the status: not_yet_valid and valid are both 3, rejected and revoked both 4.
      ext: { status: row.status },
    },
    ext: {
      submission_number: row.number,
      advertiser_name: row.advertiser_name,
      ...(refs.crid !== undefined ? { crid: refs.crid } : {}),
      ...(refs.dsp !== undefined ? { dsp: refs.dsp } : {}),
      ...(refs.ssp !== undefined ? { ssp: refs.ssp } : {}),
      fast_track: row.fast_track,
      review_due_at: row.review_due_at ? formatAlmaty(row.review_due_at) : null,
      approval_number: row.approval_number,
      valid_from: row.valid_from_day ?? row.period_from_day,
      valid_until: row.valid_until_day ?? row.period_to_day,
      structures: row.structures,
      media_sha256: row.media_sha256,
    },
  };
}

/**
 * The same collection as a partner's reader takes it: the Ad Management API's own examples write `feedback` as one
 * string where AdCOM 1.0 defines a string array, so a reader accepts both (test/fixtures/iab/README.md).
 */
export const AdCollectionReaderSchema = Type.Object({
  count: Type.Integer({ minimum: 0 }),
  more: Type.Optional(Type.Integer({ minimum: 0, maximum: 1 })),
  nextPage: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  ads: Type.Array(
    Type.Composite([
      Type.Omit(AdSchema, ['audit']),
      Type.Object({
        audit: Type.Composite([
          Type.Omit(AuditSchema, ['feedback']),
          Type.Object({ feedback: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])) }),
        ]),
      }),
    ]),
  ),
});
