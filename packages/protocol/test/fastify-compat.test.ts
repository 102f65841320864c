// The schemas are meant for Fastify 5: ajv (with ajv-formats) validates bodies, fast-json-stringify serialises
// answers. These tests run them through the real thing. ajv, ajv-formats and fastify come with the platform's
// fastify dependency.
import {
  type AjvErrorLike,
  CreativeLookupResponse,
  fieldErrorsFromAjv,
  OpenDataDictionary,
  PopAnswer,
  PROBLEM_MEDIA_TYPE,
  ProblemDocumentSchema,
  problemDocument,
  StatsSeal,
  Submission,
  SubmissionCreateRequest,
  TelemetryBatch,
} from '@ooh/protocol';
import type { TSchema } from '@sinclair/typebox';
import { Ajv } from 'ajv';
import formatsModule from 'ajv-formats';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, describe, expect, test } from 'vitest';
import {
  ALL_SCHEMAS,
  createRequest,
  dictionary,
  HASH_A,
  lookupResponse,
  popAnswer,
  statsSeal,
  submission,
  UUID_A,
} from './fixtures.js';

const addFormats = formatsModule.default;

describe('strict ajv with ajv-formats', () => {
  const ajv = new Ajv({ strict: true, allErrors: true });
  addFormats(ajv);

  test.each(Object.entries(ALL_SCHEMAS))('%s compiles under strict mode', (_name, schema) => {
    expect(() => ajv.compile(schema)).not.toThrow();
  });

  test('verdicts agree with the TypeBox checks on the spec examples', () => {
    const cases: [TSchema, unknown, boolean][] = [
      [SubmissionCreateRequest, createRequest, true],
      [SubmissionCreateRequest, { ...createRequest, external_refs: { crid: 'x', extra: 1 } }, false],
      [SubmissionCreateRequest, { ...createRequest, advertiser_name: 'x'.repeat(301) }, false],
      [SubmissionCreateRequest, { ...createRequest, period_to: '2026-02-30' }, false],
      [TelemetryBatch, { schema: 'service.pop/1', batch_seq: 0, events: Array(1001).fill({}) }, false],
      [TelemetryBatch, { schema: 'service.pop/1', batch_seq: 0, events: [1, 'x', null] }, true],
      [StatsSeal, statsSeal, true],
      [StatsSeal, { ...statsSeal, body: { ...statsSeal.body, v: 2 } }, false],
      [CreativeLookupResponse, lookupResponse, true],
      [OpenDataDictionary, dictionary, true],
      [PopAnswer, popAnswer, true],
    ];
    for (const [schema, value, expected] of cases) expect(ajv.validate(schema, value)).toBe(expected);
  });

  test('fieldErrorsFromAjv: one field error per path, with the contract codes', () => {
    const { structure_ids: _, ...body } = createRequest;
    const bad = {
      ...body,
      advertiser_name: 'x'.repeat(301),
      period_from: '2026-02-30',
      channel: 'tv',
      external_refs: { crid: 'x', 'a/b': 1 },
      category_id: 0,
      declared_daily_plays: { [UUID_A]: -1 },
    };
    expect(ajv.validate(SubmissionCreateRequest, bad)).toBe(false);
    const errors = fieldErrorsFromAjv(ajv.errors ?? []);
    expect(errors.map((error) => [error.path, error.code]).sort()).toEqual(
      [
        ['/structure_ids', 'required'],
        ['/advertiser_name', 'too_long'],
        ['/period_from', 'format'],
        ['/channel', 'not_allowed'],
        ['/external_refs/a~1b', 'unknown_key'],
        ['/category_id', 'out_of_range'],
        [`/declared_daily_plays/${UUID_A}`, 'out_of_range'],
      ].sort(),
    );
    for (const error of errors) expect(error.message.length).toBeGreaterThan(0);
  });
});

describe('a Fastify app using the schemas', () => {
  // Fastify's defaults (removeAdditional: true, coerceTypes: 'array') would quietly drop an unknown external_refs
  // key and turn "true" into true; the spec wants unknown keys refused, so the platform turns both off.
  const strictAjv = { customOptions: { removeAdditional: false, coerceTypes: false } } as const;

  async function build(ajv?: typeof strictAjv): Promise<FastifyInstance> {
    const app = Fastify(ajv === undefined ? {} : { ajv });
    // The platform's pattern: a validation error becomes a 422 problem document listing the field errors.
    app.setErrorHandler((error: { validation?: AjvErrorLike[] }, _request, reply) => {
      if (error.validation === undefined) throw error;
      return reply
        .code(422)
        .type(PROBLEM_MEDIA_TYPE)
        .send(problemDocument('validation_failed', undefined, fieldErrorsFromAjv(error.validation)));
    });
    app.post(
      '/submissions',
      { schema: { body: SubmissionCreateRequest, response: { 201: Submission } } },
      async (_request, reply) => {
        // a field the response schema does not name must not leak
        return reply.code(201).send({ ...submission, internal_note: 'secret' });
      },
    );
    app.get('/seal', { schema: { response: { 200: StatsSeal } } }, async () => statsSeal);
    app.get('/seal-pending', { schema: { response: { 200: StatsSeal } } }, async () => ({
      ...statsSeal,
      ledger: null,
    }));
    app.get('/lookup', { schema: { response: { 200: CreativeLookupResponse } } }, async () => lookupResponse);
    app.get('/dictionary', { schema: { response: { 200: OpenDataDictionary } } }, async () => dictionary);
    app.get('/answer', { schema: { response: { 200: PopAnswer } } }, async () => popAnswer);
    app.get('/problem', { schema: { response: { 422: ProblemDocumentSchema } } }, async (_request, reply) =>
      reply
        .code(422)
        .send(
          problemDocument('validation_failed', 'bad', [{ path: '/hashes/0', code: 'pattern', message: 'x' }]),
        ),
    );
    await app.ready();
    return app;
  }

  const apps: FastifyInstance[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
  });
  async function strictApp() {
    const app = await build(strictAjv);
    apps.push(app);
    return app;
  }

  test('a valid body is accepted; the answer is serialised with nulls kept and extra fields dropped', async () => {
    const app = await strictApp();
    const response = await app.inject({ method: 'POST', url: '/submissions', payload: createRequest });
    expect(response.statusCode).toBe(201);
    const body = response.json();
    expect(body).toEqual(submission);
    expect(body).not.toHaveProperty('internal_note');
    expect(body.period_to).toBeNull();
    expect(body.review_due_at).toBeNull();
  });

  test('refusals: unknown external_refs key, bad date, too long a name, a string for a boolean', async () => {
    const app = await strictApp();
    for (const payload of [
      { ...createRequest, external_refs: { crid: 'x', campaign: 'y' } },
      { ...createRequest, period_from: '2026-02-30' },
      { ...createRequest, advertiser_name: 'x'.repeat(301) },
      { ...createRequest, fast_track: 'true' },
      { ...createRequest, structure_ids: [UUID_A, 'nope'] },
    ]) {
      const response = await app.inject({ method: 'POST', url: '/submissions', payload });
      expect(response.statusCode, JSON.stringify(payload)).toBe(422);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(response.json()).toMatchObject({ code: 'validation_failed', status: 422 });
    }
    const unknownKey = await app.inject({
      method: 'POST',
      url: '/submissions',
      payload: { ...createRequest, external_refs: { crid: 'x', campaign: 'y' } },
    });
    expect(unknownKey.json().errors).toEqual([
      expect.objectContaining({ path: '/external_refs/campaign', code: 'unknown_key' }),
    ]);
  });

  test('with Fastify defaults an unknown external_refs key would be dropped silently', async () => {
    const app = await build();
    apps.push(app);
    const response = await app.inject({
      method: 'POST',
      url: '/submissions',
      payload: { ...createRequest, external_refs: { crid: 'x', campaign: 'y' } },
    });
    expect(response.statusCode).toBe(201);
  });

  test.each([
    ['/seal', statsSeal],
    ['/seal-pending', { ...statsSeal, ledger: null }],
    ['/lookup', lookupResponse],
    ['/dictionary', dictionary],
    ['/answer', popAnswer],
  ])('GET %s serialises the example unchanged', async (url, expected) => {
    const app = await strictApp();
    const response = await app.inject({ method: 'GET', url });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(expected);
  });

  test('a problem document serialises with its field errors', async () => {
    const app = await strictApp();
    const response = await app.inject({ method: 'GET', url: '/problem' });
    expect(response.statusCode).toBe(422);
    expect(response.json()).toEqual({
      type: 'urn:ooh:problem:validation_failed',
      title: 'Validation failed',
      status: 422,
      code: 'validation_failed',
      detail: 'bad',
      errors: [{ path: '/hashes/0', code: 'pattern', message: 'x' }],
    });
    expect(HASH_A).toHaveLength(64);
  });
});
