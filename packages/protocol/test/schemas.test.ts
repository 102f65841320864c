import fc from 'fast-check';
import {
  ApprovalEnvelope,
  ApprovalManifest,
  Category,
  CmsBatch,
  type CreativeEntry,
  CreativeLookupRequest,
  CreativeLookupResponse,
  checkSubmissionCreateRules,
  collectFieldErrors,
  Envelope,
  ExternalRefs,
  type FieldError,
  type FieldErrorSchema,
  LIMITS,
  OpenDataDictionary,
  PopAnswer,
  type PopRecord,
  type ProblemDocument,
  type ProblemDocumentSchema,
  parseDateTime,
  RenewAnswer,
  RenewRequest,
  RevocationList,
  SignedTelemetryBatch,
  StatsSeal,
  Submission,
  SubmissionCreateRequest,
  TelemetryBatch,
} from '@ooh/protocol';
import type { Static, TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { describe, expect, expectTypeOf, test } from 'vitest';
import {
  ALL_SCHEMAS,
  createRequest,
  dictionary,
  HASH_A,
  HASH_B,
  lookupResponse,
  popAnswer,
  statsSeal,
  submission,
  text,
  UUID_A,
  UUID_B,
} from './fixtures.js';

const compiled = new Map<TSchema, ReturnType<typeof TypeCompiler.Compile>>();
function accepts(schema: TSchema, value: unknown): boolean {
  let check = compiled.get(schema);
  if (check === undefined) {
    check = TypeCompiler.Compile(schema);
    compiled.set(schema, check);
  }
  return check.Check(value);
}

const clone = <T>(value: T): T => structuredClone(value);

test.each(Object.entries(ALL_SCHEMAS))('%s compiles', (_name, schema) => {
  expect(() => TypeCompiler.Compile(schema)).not.toThrow();
});

test('types derived from the schemas match the public interfaces', () => {
  expectTypeOf<Static<typeof FieldErrorSchema>>().toEqualTypeOf<FieldError>();
  expectTypeOf<Omit<Static<typeof ProblemDocumentSchema>, 'code'>>().toEqualTypeOf<
    Omit<ProblemDocument, 'code'>
  >();
  expectTypeOf<Static<typeof ProblemDocumentSchema>['code']>().toEqualTypeOf<ProblemDocument['code']>();
  expectTypeOf<Submission['period_from']>().toEqualTypeOf<string | null>();
  expectTypeOf<PopRecord['kind']>().toEqualTypeOf<'play' | 'reject' | 'mode_change' | 'tamper'>();
});

describe('formats', () => {
  test('date: strict YYYY-MM-DD that exists', () => {
    const schema = SubmissionCreateRequest;
    for (const day of ['2024-02-29', '2026-12-31', '2026-01-01']) {
      expect(accepts(schema, { ...createRequest, period_from: day })).toBe(true);
    }
    for (const day of ['2026-02-29', '2026-02-30', '2026-2-01', '2026-13-01', '2026-12-01T00:00:00Z', '']) {
      expect(accepts(schema, { ...createRequest, period_from: day })).toBe(false);
    }
  });

  test('date-time: RFC 3339 with an offset', () => {
    for (const good of [
      '2026-11-21T09:00:00+05:00',
      '2026-11-21T04:00:00Z',
      '2026-11-21T04:00:00.123Z',
      '2026-11-21t04:00:00.123456z',
    ]) {
      expect(parseDateTime(good)).not.toBeNull();
    }
    for (const bad of [
      '2026-11-21 04:00:00Z',
      '2026-11-21T04:00:00',
      '2026-11-21T04:00:00+0500',
      '2026-11-21T24:00:00Z',
      '2026-11-21T23:59:60Z',
      '2026-02-30T04:00:00Z',
      '2026-11-21T04:00Z',
      '2026-11-21T04:00:00+24:00',
    ]) {
      expect(parseDateTime(bad)).toBeNull();
    }
  });

  test('parseDateTime gives the instant, keeping milliseconds and the offset', () => {
    expect(parseDateTime('2026-11-21T09:00:00.123+05:00')?.toISOString()).toBe('2026-11-21T04:00:00.123Z');
    expect(parseDateTime('2024-02-29T23:30:00+06:00')?.toISOString()).toBe('2024-02-29T17:30:00.000Z');
    expect(parseDateTime('2026-01-01T00:00:00.9999-01:30')?.toISOString()).toBe('2026-01-01T01:30:00.999Z');
  });
});

describe('SubmissionCreateRequest', () => {
  test('accepts a full programmatic request and a minimal one', () => {
    expect(accepts(SubmissionCreateRequest, createRequest)).toBe(true);
    expect(
      accepts(SubmissionCreateRequest, {
        advertiser_name: 'A',
        period_from: '2026-12-01',
        period_to: '2026-12-01',
        structure_ids: [],
      }),
    ).toBe(true);
  });

  test('external_refs: unknown keys are refused', () => {
    const body = clone(createRequest);
    (body.external_refs as Record<string, unknown>).campaign = 'x';
    expect(accepts(SubmissionCreateRequest, body)).toBe(false);
    expect(collectFieldErrors(SubmissionCreateRequest, body)).toEqual([
      expect.objectContaining({ path: '/external_refs/campaign', code: 'unknown_key' }),
    ]);
  });

  test('external_refs.adomain holds domains', () => {
    for (const domain of ['example.com', 'xn--80ak6aa92e.kz', 'a.b.c.kz']) {
      expect(accepts(ExternalRefs, { adomain: [domain] })).toBe(true);
    }
    for (const domain of [
      'localhost',
      'https://acme.kz',
      'acme .kz',
      '-acme.kz',
      'acme.kz/',
      '',
      'acme.123',
    ]) {
      expect(accepts(ExternalRefs, { adomain: [domain] })).toBe(false);
    }
    expect(accepts(ExternalRefs, { adomain: 'acme.kz' })).toBe(false);
  });

  test('advertiser_name: up to 300 characters', () => {
    expect(accepts(SubmissionCreateRequest, { ...createRequest, advertiser_name: 'ж'.repeat(300) })).toBe(
      true,
    );
    const tooLong = { ...createRequest, advertiser_name: 'ж'.repeat(301) };
    expect(accepts(SubmissionCreateRequest, tooLong)).toBe(false);
    expect(collectFieldErrors(SubmissionCreateRequest, tooLong)).toEqual([
      expect.objectContaining({ path: '/advertiser_name', code: 'too_long' }),
    ]);
  });

  test('advertiser_bin: 12 digits', () => {
    for (const bin of ['12345678901', '1234567890123', '12345678901a', '１２３４５６７８９０１２']) {
      expect(accepts(SubmissionCreateRequest, { ...createRequest, advertiser_bin: bin })).toBe(false);
    }
  });

  test('structure_ids: uuids, at most 2000 (the agency limit)', () => {
    const ids = (n: number) => Array.from({ length: n }, () => UUID_A);
    expect(
      accepts(SubmissionCreateRequest, { ...createRequest, structure_ids: ids(LIMITS.agencyStructuresMax) }),
    ).toBe(true);
    expect(
      collectFieldErrors(SubmissionCreateRequest, { ...createRequest, structure_ids: ids(2001) }).map(
        (e) => e.code,
      ),
    ).toEqual(['too_many']);
    expect(accepts(SubmissionCreateRequest, { ...createRequest, structure_ids: ['not-a-uuid'] })).toBe(false);
  });

  test('required fields and closed word lists', () => {
    const { advertiser_name: _, ...withoutName } = createRequest;
    expect(collectFieldErrors(SubmissionCreateRequest, withoutName)).toEqual([
      expect.objectContaining({ path: '/advertiser_name', code: 'required' }),
    ]);
    expect(collectFieldErrors(SubmissionCreateRequest, { ...createRequest, channel: 'tv' })).toEqual([
      expect.objectContaining({ path: '/channel', code: 'not_allowed' }),
    ]);
    expect(accepts(SubmissionCreateRequest, { ...createRequest, fast_track: 'yes' })).toBe(false);
    expect(accepts(SubmissionCreateRequest, { ...createRequest, category_id: 10.5 })).toBe(false);
  });

  test('declared_daily_plays: keyed by structure id, whole numbers', () => {
    expect(accepts(SubmissionCreateRequest, { ...createRequest, declared_daily_plays: { 'ALM-1': 3 } })).toBe(
      false,
    );
    expect(
      accepts(SubmissionCreateRequest, { ...createRequest, declared_daily_plays: { [UUID_A]: -1 } }),
    ).toBe(false);
    expect(
      accepts(SubmissionCreateRequest, { ...createRequest, declared_daily_plays: { [UUID_A]: 1.5 } }),
    ).toBe(false);
  });

  test('cross-field rules: programmatic-only fields and the period', () => {
    expect(checkSubmissionCreateRules(createRequest)).toEqual([]);
    const direct = { ...createRequest, channel: 'direct' as const };
    expect(checkSubmissionCreateRules(direct).map((e) => [e.path, e.code])).toEqual([
      ['/external_refs', 'not_allowed'],
      ['/fast_track', 'not_allowed'],
    ]);
    const { channel: _, ...noChannel } = createRequest;
    expect(checkSubmissionCreateRules(noChannel)).toHaveLength(2);
    expect(checkSubmissionCreateRules({ ...noChannel, external_refs: undefined, fast_track: false })).toEqual(
      [],
    );
    expect(
      checkSubmissionCreateRules({ ...createRequest, period_from: '2026-12-02', period_to: '2026-12-01' }),
    ).toEqual([expect.objectContaining({ path: '/period_to', code: 'out_of_range' })]);
  });
});

describe('Submission', () => {
  test('accepts the spec shape, with nulls where the spec allows them', () => {
    expect(accepts(Submission, submission)).toBe(true);
    expect(
      accepts(Submission, {
        id: UUID_B,
        number: 'SUB-2026-1',
        state: 'draft',
        advertiser_name: 'B',
        period_from: null,
        period_to: null,
        category_id: null,
        category: null,
      }),
    ).toBe(true);
  });

  test('refuses a missing required field and a bad number', () => {
    const { period_to: _, ...missing } = submission;
    expect(accepts(Submission, missing)).toBe(false);
    expect(accepts(Submission, { ...submission, number: 'S-1' })).toBe(false);
    expect(accepts(Submission, { ...submission, category: { id: 1, tier: 1, name: text('x') } })).toBe(false);
  });

  test('a tier-1 category may have no parent', () => {
    expect(accepts(Category, { id: 1002, parent_id: null, tier: 1, name: text('Alcohol') })).toBe(true);
    expect(accepts(Category, { id: 1002, parent_id: null, tier: 1, name: { en: 'Alcohol', ru: 'x' } })).toBe(
      false,
    );
  });
});

describe('creative lookup', () => {
  test('request: 0 to 500 lowercase hex hashes', () => {
    expect(accepts(CreativeLookupRequest, { hashes: [] })).toBe(true);
    expect(accepts(CreativeLookupRequest, { hashes: Array(500).fill(HASH_A) })).toBe(true);
    expect(accepts(CreativeLookupRequest, { hashes: Array(501).fill(HASH_A) })).toBe(false);
    expect(accepts(CreativeLookupRequest, { hashes: [HASH_A.toUpperCase()] })).toBe(false);
    expect(accepts(CreativeLookupRequest, { hashes: [HASH_A.slice(1)] })).toBe(false);
    expect(accepts(CreativeLookupRequest, {})).toBe(false);
  });

  test('response: entries with issued and pending approvals', () => {
    expect(accepts(CreativeLookupResponse, lookupResponse)).toBe(true);
    expect(accepts(CreativeLookupResponse, { ...lookupResponse, revocation_list_version: 4 })).toBe(true);
    const badStatus = clone(lookupResponse);
    (badStatus.items[0]!.approvals[0] as { status: string }).status = 'approved';
    expect(accepts(CreativeLookupResponse, badStatus)).toBe(false);
    const missing = clone(lookupResponse);
    delete (missing.items[0]!.approvals[0] as Partial<CreativeEntry>).envelope_url;
    expect(accepts(CreativeLookupResponse, missing)).toBe(false);
  });
});

describe('proof-of-play batches', () => {
  const telemetry = {
    schema: 'service.pop/1',
    device_id: UUID_A,
    ts: '2026-11-21T09:00:00+05:00',
    batch_seq: 0,
    prev_sha256: '',
    sent_at: '2026-11-21T08:59:58.500+05:00',
    events: [{ kind: 'play', seq: 1, media_sha256: HASH_A, approval_number: 'APP-1' }],
  };

  test('a batch is not refused for bad records: they are judged one by one', () => {
    const events = [42, 'x', null, [], { kind: 'dance' }, { kind: 'play', seq: 0 }];
    expect(accepts(TelemetryBatch, { ...telemetry, events })).toBe(true);
    expect(
      accepts(CmsBatch, { schema: 'service.pop/1', source_id: UUID_B, batch_seq: 3, records: events }),
    ).toBe(true);
  });

  test('events: at most 1000', () => {
    expect(accepts(TelemetryBatch, { ...telemetry, events: Array(1000).fill({}) })).toBe(true);
    expect(accepts(TelemetryBatch, { ...telemetry, events: Array(1001).fill({}) })).toBe(false);
    expect(accepts(TelemetryBatch, { ...telemetry, events: {} })).toBe(false);
  });

  test('header fields', () => {
    expect(accepts(TelemetryBatch, telemetry)).toBe(true);
    expect(accepts(TelemetryBatch, { ...telemetry, schema: 'service.pop/2' })).toBe(false);
    expect(accepts(TelemetryBatch, { ...telemetry, batch_seq: -1 })).toBe(false);
    expect(accepts(TelemetryBatch, { ...telemetry, batch_seq: 1.5 })).toBe(false);
    expect(accepts(TelemetryBatch, { ...telemetry, batch_seq: 2 ** 53 })).toBe(false);
    expect(accepts(TelemetryBatch, { ...telemetry, prev_sha256: HASH_B })).toBe(true);
    expect(accepts(TelemetryBatch, { ...telemetry, prev_sha256: 'abc' })).toBe(false);
    expect(accepts(TelemetryBatch, { ...telemetry, ts: '2026-11-21 09:00' })).toBe(false);
  });

  test('device_id and ts are required on the signed channel only', () => {
    const { device_id: _, ts: __, ...certificateChannel } = telemetry;
    expect(accepts(TelemetryBatch, certificateChannel)).toBe(true);
    expect(accepts(SignedTelemetryBatch, certificateChannel)).toBe(false);
    expect(accepts(SignedTelemetryBatch, telemetry)).toBe(true);
  });

  test('CMS batch: source_id, batch_seq from 0, at most 10 000 records', () => {
    const cms = { schema: 'service.pop/1', source_id: UUID_B, batch_seq: 0, records: [] as unknown[] };
    expect(accepts(CmsBatch, cms)).toBe(true);
    expect(accepts(CmsBatch, { ...cms, records: Array(10_000).fill({}) })).toBe(true);
    expect(accepts(CmsBatch, { ...cms, records: Array(10_001).fill({}) })).toBe(false);
    expect(accepts(CmsBatch, { ...cms, source_id: 'cms-1' })).toBe(false);
    const { source_id: _, ...noSource } = cms;
    expect(accepts(CmsBatch, noSource)).toBe(false);
  });

  test('PopAnswer', () => {
    expect(accepts(PopAnswer, popAnswer)).toBe(true);
    expect(accepts(PopAnswer, { ...popAnswer, items: [], duplicate: true })).toBe(true);
    expect(accepts(PopAnswer, { ...popAnswer, items: [{ index: 0, status: 'lost' }] })).toBe(false);
    expect(
      accepts(PopAnswer, { ...popAnswer, items: [{ index: 0, status: 'refused', reason: 'bored' }] }),
    ).toBe(false);
    expect(
      accepts(PopAnswer, { ...popAnswer, items: [{ index: 0, status: 'flagged', flags: ['odd'] }] }),
    ).toBe(false);
    const { duplicate: _, ...missing } = popAnswer;
    expect(accepts(PopAnswer, missing)).toBe(false);
  });
});

describe('renewal', () => {
  test('request: csr required, force optional boolean', () => {
    expect(accepts(RenewRequest, { csr: '-----BEGIN CERTIFICATE REQUEST-----\n...' })).toBe(true);
    expect(accepts(RenewRequest, { csr: 'MIIB', force: true })).toBe(true);
    expect(accepts(RenewRequest, { force: true })).toBe(false);
    expect(accepts(RenewRequest, { csr: '' })).toBe(false);
    expect(accepts(RenewRequest, { csr: 'MIIB', force: 'true' })).toBe(false);
  });

  test('answer', () => {
    const answer = {
      device_id: UUID_A,
      certificate_pem: '-----BEGIN CERTIFICATE-----\n...',
      chain_pem: '-----BEGIN CERTIFICATE-----\n...',
      not_after: '2027-11-21T09:00:00+05:00',
      old_valid_until: '2026-11-22T09:00:00+05:00',
    };
    expect(accepts(RenewAnswer, answer)).toBe(true);
    expect(accepts(RenewAnswer, { ...answer, old_valid_until: undefined })).toBe(false);
  });
});

describe('open data dictionary', () => {
  test('accepts the spec shape', () => {
    expect(accepts(OpenDataDictionary, dictionary)).toBe(true);
  });

  test('texts need all three languages; every top-level field is required', () => {
    const noKazakh = clone(dictionary);
    noKazakh.files[0]!.description = { en: 'x', ru: 'x' } as never;
    expect(accepts(OpenDataDictionary, noKazakh)).toBe(false);
    for (const key of Object.keys(dictionary)) {
      const missing: Record<string, unknown> = clone(dictionary);
      delete missing[key];
      expect(accepts(OpenDataDictionary, missing), key).toBe(false);
    }
    const badHour = clone(dictionary);
    badHour.codes.daypart[0]!.end_hour = 25;
    expect(accepts(OpenDataDictionary, badHour)).toBe(false);
  });
});

describe('stats seal', () => {
  test('accepts a seal with and without its ledger position', () => {
    expect(accepts(StatsSeal, statsSeal)).toBe(true);
    expect(accepts(StatsSeal, { ...statsSeal, ledger: null })).toBe(true);
  });

  test('refuses a wrong body version, env, hash or side', () => {
    expect(accepts(StatsSeal, { ...statsSeal, body: { ...statsSeal.body, v: 2 } })).toBe(false);
    expect(accepts(StatsSeal, { ...statsSeal, body: { ...statsSeal.body, env: 'staging' } })).toBe(false);
    expect(
      accepts(StatsSeal, { ...statsSeal, body: { ...statsSeal.body, prev_seal_sha256: '0'.repeat(63) } }),
    ).toBe(false);
    expect(accepts(StatsSeal, { ...statsSeal, body: { ...statsSeal.body, root: 'F'.repeat(64) } })).toBe(
      false,
    );
    const badSide = clone(statsSeal);
    (badSide.ledger!.proof.path[0] as { side: string }).side = 'up';
    expect(accepts(StatsSeal, badSide)).toBe(false);
    expect(accepts(StatsSeal, { ...statsSeal, ledger: undefined })).toBe(false);
  });
});

describe('envelopes (DESIGN.md §4)', () => {
  const manifest: ApprovalManifest = {
    kind: 'approval',
    approval_number: 'APP-2026-00042',
    media_sha256: HASH_A,
    structures: ['ALM-0001'],
    valid_from: '2026-12-01',
    valid_until: '2026-12-31',
    category_id: 1003,
    duration_ms: null,
    width: 1920,
    height: 1080,
    issued_at: '2026-11-21T09:00:00+05:00',
  };

  test('approval envelope', () => {
    const envelope = { v: 1, body: manifest, signature: 'MIIG' };
    expect(accepts(ApprovalManifest, manifest)).toBe(true);
    expect(accepts(ApprovalEnvelope, envelope)).toBe(true);
    expect(accepts(Envelope, envelope)).toBe(true);
    expect(accepts(Envelope, { ...envelope, v: 2 })).toBe(false);
    expect(accepts(Envelope, { ...envelope, body: 'x' })).toBe(false);
    expect(accepts(ApprovalEnvelope, { ...envelope, body: { ...manifest, kind: 'revocation' } })).toBe(false);
    expect(accepts(ApprovalManifest, { ...manifest, media_sha256: HASH_A.toUpperCase() })).toBe(false);
  });

  test('revocation list', () => {
    const list = {
      v: 1,
      body: {
        version: 3,
        issued_at: '2026-11-21T09:00:00+05:00',
        revoked: [{ approval_number: 'APP-2026-00007', revoked_at: '2026-11-20T12:00:00+05:00' }],
      },
      signature: 'MIIG',
    };
    expect(accepts(RevocationList, list)).toBe(true);
    expect(accepts(RevocationList, { ...list, body: { ...list.body, version: 0 } })).toBe(false);
    expect(
      accepts(RevocationList, { ...list, body: { ...list.body, revoked: [{ approval_number: 'A' }] } }),
    ).toBe(false);
  });
});

describe('parseDateTime: the canonical UTC form is read by a fast path that agrees with the general one', () => {
  // The general reading of any text: what parseDateTime gave before the fast path (regex, then the calendar).
  const general = (text: string) => parseDateTime(`${text.slice(0, 23)}+00:00`);

  test('every canonical text of an instant, and near misses', () => {
    fc.assert(
      fc.property(
        fc.date({
          min: new Date('0100-01-01T00:00:00Z'),
          max: new Date('9999-12-31T23:59:59.999Z'),
          noInvalidDate: true,
        }),
        (instant) => {
          const text = instant.toISOString();
          expect(parseDateTime(text)?.getTime()).toBe(instant.getTime());
          expect(parseDateTime(text)?.getTime()).toBe(general(text)?.getTime());
        },
      ),
      { numRuns: 3000 },
    );
    for (const bad of [
      '2026-02-29T00:00:00.000Z',
      '2026-11-31T00:00:00.000Z',
      '2026-11-21T24:00:00.000Z',
      '2026-11-21T23:60:00.000Z',
      '2026-11-21T23:59:60.000Z',
      '2026-00-21T23:59:59.000Z',
      '2026-11-00T23:59:59.000Z',
      '2026-1a-21T23:59:59.000Z',
      '2026-11-21T23:59:59.00xZ',
      '2026-11-21T23:59:59.000z0',
      '+26-11-21T23:59:59.000Z',
    ]) {
      expect(parseDateTime(bad)).toBeNull();
    }
    expect(parseDateTime('2024-02-29T23:59:59.999Z')?.toISOString()).toBe('2024-02-29T23:59:59.999Z');
    // Years before 100 keep their number (the general parser's rule).
    expect(parseDateTime('0099-12-31T00:00:00.000Z')?.getUTCFullYear()).toBe(99);
  });
});
