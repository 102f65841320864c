import { es256Verify, es256VerifyAsync, sha256Hex, sha256HexAsync } from '@ooh/crypto';
import {
  DeviceEventKind,
  DeviceEventsAnswer,
  isUuid,
  LIMITS,
  PlayCountsAnswer,
  type PopAnswer as PopAnswerType,
  PopAnswer,
  PopQualityAnswer,
  parseDateTime,
} from '@ooh/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { principalOf } from '../auth/plugin.js';
import type { RouteAuth } from '../auth/principal.js';
import type { PlatformContext } from '../context.js';
import { type DeviceIdentity, deviceFromClientCertificate } from '../devices/authenticate.js';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { pathUuid } from '../shared/ids.js';
import { type AgentBatch, type CmsBatchBody, countPlays, readAgentBatch, readCmsBatch } from './body.js';
import { bodyEncoding, inflateBounded, readWire } from '../http/inflate.js';
import { parseJsonBytes } from '../http/json.js';
import { approvalNumbersOf, ingestBatch, rateLimited } from './ingest.js';
import type { Player } from './judge.js';
import { KeyCache } from './key-cache.js';
import { agentBuckets, cmsBuckets, cmsKeyBucket } from './rate-limits.js';
import { type DeviceForTelemetry, devicePlayerKey, findSourceForBatch } from './batch-context.js';
import { playCounts, popEvents, popQuality } from './queries.js';
import { takeCallToken } from './store.js';

/** spec: "CMS batch ... Scope write:plays; operator organisations only". */
const WRITE_PLAYS: RouteAuth = { anyOf: [{ scope: 'write:plays', kinds: ['operator'] }] };
const READ_POP: RouteAuth = {
  anyOf: [
    { scope: 'console:admin', kinds: ['authority'] },
    { scope: 'console:read', kinds: ['authority'] },
  ],
};

/**
 * Query fields that reach PostgreSQL: ajv's "date" takes year 0000, which PostgreSQL's date refuses, and
 * PostgreSQL text holds no U+0000; either would otherwise answer 500 instead of 422.
 */
const QueryDate = () => Type.String({ format: 'date', pattern: '^(?!0000-)' });
const queryText = (maxLength: number) => Type.String({ minLength: 1, maxLength, pattern: '^[^\\u0000]*$' });

/** spec rule 7: "A key rotated out stays accepted for 24 hours after the new one was registered". */
const CMS_KEY_GRACE_MS = LIMITS.cmsKeyRotationGraceHours * 3600 * 1000;
const TS_TOLERANCE_MS = LIMITS.agentTsToleranceSeconds * 1000;

/** The key of `spkis` whose signature `signature` is over `body`, or null. */
function verifyingKey(
  keys: KeyCache,
  spkis: readonly string[],
  body: Buffer,
  signature: string,
): string | null {
  for (const spki of spkis) {
    let key: ReturnType<KeyCache['get']>;
    try {
      key = keys.get(spki);
    } catch {
      continue; // a stored key that is not P-256 verifies nothing
    }
    try {
      if (es256Verify(key, body, signature)) return spki;
    } catch {
      // Not base64url of 64 bytes: no key can verify it.
      return null;
    }
  }
  return null;
}

function signatureHeader(request: FastifyRequest): string {
  const value = request.headers['x-service-signature'];
  // spec: "A signature that does not verify gives 401 bad_signature"; none at all verifies nothing either.
  if (typeof value !== 'string' || value === '') {
    throw new ProblemError(
      'bad_signature',
      'X-Service-Signature is required: ES256 over the exact body bytes',
    );
  }
  return value.trim();
}

function rawBodyOf(request: FastifyRequest): Buffer {
  // A request without a body never reached a JSON parser.
  if (!request.rawBody)
    throw new ProblemError('unsupported_media_type', 'send the batch as application/json');
  return request.rawBody;
}

const badSignature = () =>
  new ProblemError('bad_signature', 'the signature does not verify over the body bytes; nothing was stored');

/** The device as the batch sees it: its own player, at its structure. */
function devicePlayer(device: DeviceForTelemetry): Player {
  return {
    key: devicePlayerKey(device.id),
    structureId: device.structureId,
    structureCode: device.structureCode,
  };
}

function agentIngest(
  ctx: PlatformContext,
  device: DeviceForTelemetry,
  batch: AgentBatch,
  body: Buffer,
  receivedAt: Date,
  channel: 'agent' | 'cert',
  checkFresh?: () => void,
): Promise<PopAnswerType> {
  const player = devicePlayer(device);
  return ingestBatch(ctx, {
    owner: player.key,
    batchSeq: batch.batchSeq,
    channel: batch.format === 'legacy' ? 'legacy' : channel,
    body,
    bodySha256: sha256Hex(body),
    existing: device.existing,
    records: batch.events,
    recordChannel: 'agent',
    attested: false,
    receivedAt,
    ...(checkFresh ? { checkFresh } : {}),
    buckets: agentBuckets(device.id),
    playerOf: () => player,
    marks: new Map([[player.key, device.highWaterSeq]]),
    newestPlayStarts:
      device.newestPlayStart === null ? new Map() : new Map([[player.key, device.newestPlayStart]]),
    approvals: device.approvals,
    legacy: batch.format === 'legacy',
    hadPopBatch: device.hadPopBatch,
    recordCount: countPlays(batch.events),
  });
}

/** The agent channels take no Content-Encoding (the CMS channel alone is spoken of gzip). */
function refuseEncodings(scope: FastifyInstance): void {
  scope.addHook('onRequest', async (request) => {
    if (bodyEncoding(request.headers['content-encoding']) !== 'identity') {
      throw new ProblemError('unsupported_media_type', 'the telemetry body takes no Content-Encoding');
    }
  });
}

interface CmsParsed {
  bytes: Buffer;
  /** The wire bytes of a gzip body (kept instead of `bytes` when smaller; NewBatch.gzipped). */
  gzipped?: Buffer;
  batch: CmsBatchBody;
  early: EarlyChecks;
}

/**
 * What the CMS channel starts on libuv's thread pool as soon as a body's bytes are known, while this thread parses
 * them and looks the source up: their SHA-256 (body_sha256), and their signature checked against the key that last
 * verified a batch of the source named by X-Service-Source in this process. Each is about 7 ms of a 2.5 MB body. The
 * guess is only used if the source's lookup then names that very key among those it accepts now; otherwise the
 * signature is checked as before. Neither settles with an error: null and false mean "do it here".
 */
interface EarlyChecks {
  sha256: Promise<string | null>;
  guess: { spki: string; verified: Promise<boolean> } | null;
}

/**
 * The keys that last verified each source's batches in this process (a guess for EarlyChecks, nothing more), by
 * organisation and source: a caller naming another organisation's source guesses nothing.
 */
class RecentSourceKeys {
  private readonly keys = new Map<string, string>();
  constructor(private readonly max = 10_000) {}
  get(organisationId: string, sourceId: string): string | undefined {
    return this.keys.get(`${organisationId} ${sourceId}`);
  }
  set(organisationId: string, sourceId: string, spki: string): void {
    const key = `${organisationId} ${sourceId}`;
    if (this.keys.size >= this.max && !this.keys.has(key)) this.keys.clear();
    this.keys.set(key, spki);
  }
}

function startEarlyChecks(
  request: FastifyRequest,
  bytes: Buffer,
  keys: KeyCache,
  recent: RecentSourceKeys,
): EarlyChecks {
  const sha256 = sha256HexAsync(bytes).catch(() => null);
  const source = request.headers['x-service-source'];
  const signature = request.headers['x-service-signature'];
  const organisationId = request.principal?.organisation.id;
  if (typeof source !== 'string' || typeof signature !== 'string' || organisationId === undefined) {
    return { sha256, guess: null };
  }
  const spki = recent.get(organisationId, source.trim().toLowerCase());
  if (spki === undefined) return { sha256, guess: null };
  try {
    return {
      sha256,
      guess: { spki, verified: es256VerifyAsync(keys.get(spki), bytes, signature.trim()).catch(() => false) },
    };
  } catch {
    // A signature that is not base64url of 64 bytes: checked, and refused, in its turn.
    return { sha256, guess: null };
  }
}

/**
 * The CMS body parser: "size and media type -> JSON -> schema value" of DESIGN.md section 5 with the CMS limits,
 * after the API key, its scope and the organisation's kind passed (the onRequest hook of src/auth/plugin.ts: nobody
 * makes the platform read, inflate or parse a body before showing a credential). The wire bytes
 * are read up to 4 MB, a gzip body is inflated within 16 MB and 20 times its size, and the decompressed bytes are
 * kept as request.rawBody (the bytes the signature covers and that are stored).
 */
const cmsBodyParser =
  (early: (request: FastifyRequest, bytes: Buffer) => EarlyChecks) =>
  (
    request: FastifyRequest,
    payload: NodeJS.ReadableStream,
    done: (err: Error | null, body?: unknown) => void,
  ): void => {
    const parse = async (): Promise<CmsParsed> => {
      const encoding = bodyEncoding(request.headers['content-encoding']);
      const wire = await readWire(
        payload as unknown as import('node:stream').Readable,
        request.headers['content-length'],
        LIMITS.cmsWireMaxBytes,
      );
      // Each operator's share of the inflation slots (http/inflate.ts Slots): its API key passed before the body was
      // read, so the organisation is known; 'anonymous' only if that order ever changed.
      const caller = request.principal?.organisation.id ?? 'anonymous';
      const bytes = encoding === 'gzip' ? await inflateBounded(wire, caller) : wire;
      request.rawBody = bytes;
      if (bytes.length === 0) throw new ProblemError('invalid_json', 'the body is empty');
      const checks = early(request, bytes);
      const value = parseJsonBytes(bytes);
      // The schema value comes before the source and its signature (DESIGN.md section 5).
      return {
        bytes,
        ...(encoding === 'gzip' && wire.length < bytes.length ? { gzipped: wire } : {}),
        batch: readCmsBatch(value),
        early: checks,
      };
    };
    parse().then(
      (parsed) => done(null, parsed),
      (error: Error) => done(error),
    );
  };

export const popFeature: Feature = {
  name: 'pop',

  // spec: POST {agents_url}/s/v1/telemetry — signed agent telemetry batch.
  async agents(app, ctx) {
    const keys = new KeyCache();
    await app.register(async (scope) => {
      refuseEncodings(scope);
      // The credential of this channel is the body's signature: the body must be read to check it, but a request
      // without one is refused before (issue "Trust under attack", item 3).
      scope.addHook('onRequest', async (request) => {
        signatureHeader(request);
      });
      scope.post(
        '/s/v1/telemetry',
        // spec Limits: "agent telemetry body: at most 1 MB".
        {
          bodyLimit: LIMITS.telemetryBodyMaxBytes,
          config: { bodyJudgedPerRecord: true },
          schema: { response: { 200: PopAnswer } },
        },
        async (request) => {
          const receivedAt = ctx.clock.now();
          const body = rawBodyOf(request);
          const batch = readAgentBatch(request.body, 'signed');
          const deviceId = batch.deviceId!;
          // Authentication. spec: "401 device_unauthorized: device unknown or revoked".
          const device = await ctx.caches.pop.lookups.find({
            deviceId,
            batchSeq: batch.batchSeq,
            now: receivedAt,
            approvalNumbers: approvalNumbersOf(batch.events),
          });
          if (!device || device.revokedAt !== null) {
            throw new ProblemError('device_unauthorized', `device ${deviceId} is unknown or revoked`);
          }
          // spec: "ES256 signature of the exact bytes of the body by the device key registered at enrolment".
          if (verifyingKey(keys, device.keys, body, signatureHeader(request)) === null) throw badSignature();
          request.authenticatedDeviceId = device.id;
          const ts = parseDateTime(batch.ts!)!;
          return agentIngest(ctx, device, batch, body, receivedAt, 'agent', () => {
            // spec Limits: "agent ts tolerance: 300 seconds against the platform clock".
            if (Math.abs(ts.getTime() - receivedAt.getTime()) > TS_TOLERANCE_MS) {
              throw new ProblemError(
                'stale_request',
                `ts ${batch.ts} is more than ${LIMITS.agentTsToleranceSeconds} s from the platform clock ` +
                  `${receivedAt.toISOString()}; sign the same batch again with a fresh ts`,
              );
            }
          });
        },
      );
    });
  },

  // DESIGN.md section 5: "The certificate channel POST {devices_url}/d/v1/telemetry takes the same body and answer;
  // the client certificate identifies the device, so no signature header and no ts window are needed."
  async devices(app, ctx) {
    await app.register(async (scope) => {
      refuseEncodings(scope);
      // The client certificate identifies the device before the body is read (issue "Trust under attack", item 3).
      const identities = new WeakMap<FastifyRequest, DeviceIdentity>();
      scope.addHook('onRequest', async (request) => {
        identities.set(request, await deviceFromClientCertificate(ctx, request));
      });
      scope.post(
        '/d/v1/telemetry',
        {
          bodyLimit: LIMITS.telemetryBodyMaxBytes,
          config: { bodyJudgedPerRecord: true },
          schema: { response: { 200: PopAnswer } },
        },
        async (request) => {
          const receivedAt = ctx.clock.now();
          const body = rawBodyOf(request);
          const batch = readAgentBatch(request.body, 'certificate');
          const identity = identities.get(request)!;
          const deviceId = identity.deviceId.toLowerCase();
          if (batch.deviceId !== null && batch.deviceId !== deviceId) {
            throw new ProblemError(
              'device_unauthorized',
              'device_id is not the device of the client certificate',
            );
          }
          const device = await ctx.caches.pop.lookups.find({
            deviceId,
            batchSeq: batch.batchSeq,
            now: receivedAt,
            approvalNumbers: approvalNumbersOf(batch.events),
          });
          if (!device || device.revokedAt !== null) {
            throw new ProblemError('device_unauthorized', `device ${deviceId} is unknown or revoked`);
          }
          request.authenticatedDeviceId = device.id;
          return agentIngest(ctx, device, batch, body, receivedAt, 'cert');
        },
      );
    });
  },

  async api(app, ctx) {
    const keys = new KeyCache();
    const recentKeys = new RecentSourceKeys();
    // spec: POST {base_url}/api/v1/pop/batches — CMS batch for many players. Its own scope: its own body parser.
    await app.register(async (scope) => {
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser(
        'application/json',
        cmsBodyParser((request, bytes) => startEarlyChecks(request, bytes, keys, recentKeys)),
      );
      // spec: "10 calls a second per key (burst 30)": every call of an authenticated key counts, a repeat or a
      // refusal too, before its body is read (after the onRequest hook that authenticated it).
      scope.addHook('onRequest', async (request) => {
        const principal = request.principal;
        if (principal?.type !== 'api_key') return;
        const wait = await takeCallToken(ctx.db, cmsKeyBucket(principal.id), ctx.clock.now());
        if (wait > 0) throw rateLimited(wait);
      });
      scope.post(
        '/api/v1/pop/batches',
        {
          config: { auth: WRITE_PLAYS, bodyJudgedPerRecord: true },
          schema: { response: { 200: PopAnswer } },
        },
        async (request) => {
          const receivedAt = ctx.clock.now();
          const parsed = request.body as CmsParsed | undefined;
          if (!parsed || !request.rawBody) {
            throw new ProblemError('unsupported_media_type', 'send the batch as application/json');
          }
          const batch = parsed.batch;
          const principal = principalOf(request);

          // Authentication: the source. spec: "X-Service-Source (required, uuid of the registered CMS
          // installation)"; source_id: "inside the signed bytes; must equal X-Service-Source".
          // A header missing, malformed or not the body's source_id is the caller's error (422, naming the field);
          // source_unauthorized means one thing, the rotated-out key (issue "The spec to the letter, second
          // pass", item 3).
          const sourceHeader = request.headers['x-service-source'];
          if (typeof sourceHeader !== 'string' || !isUuid(sourceHeader.trim())) {
            throw validationFailed([
              {
                path: 'headers:/x-service-source',
                code: sourceHeader === undefined ? 'required' : 'format',
                message: 'X-Service-Source must name the CMS installation (uuid)',
              },
            ]);
          }
          if (sourceHeader.trim().toLowerCase() !== batch.sourceId) {
            throw validationFailed([
              { path: '/source_id', code: 'not_allowed', message: 'source_id must equal X-Service-Source' },
            ]);
          }
          const externalIds = new Set<string>();
          for (const record of batch.records) {
            const player = (record as { player?: unknown } | null)?.player;
            // Mapped ids never hold U+0000 (nor can a query parameter): such a player is player_unknown.
            if (typeof player === 'string' && !player.includes('\u0000')) externalIds.add(player);
          }
          const buckets = cmsBuckets({
            installationId: batch.sourceId,
            organisationId: principal.organisation.id,
            records: batch.records.length,
          });
          const source = await findSourceForBatch(ctx.db, {
            installationId: batch.sourceId,
            batchSeq: batch.batchSeq,
            now: receivedAt,
            graceMs: CMS_KEY_GRACE_MS,
            externalIds: [...externalIds],
            approvalNumbers: approvalNumbersOf(batch.records),
            buckets,
          });
          if (!source || source.organisationId !== principal.organisation.id) {
            throw new ProblemError(
              'source_unknown',
              `no CMS installation ${batch.sourceId} of your organisation`,
            );
          }
          // spec: "X-Service-Signature (required; ES256 over the body after decompression ...)".
          const signature = signatureHeader(request);
          const body = parsed.bytes;
          const { guess } = parsed.early;
          const verifiedBy =
            guess !== null && source.acceptedKeys.includes(guess.spki) && (await guess.verified)
              ? guess.spki
              : verifyingKey(keys, source.acceptedKeys, body, signature);
          if (verifiedBy === null) {
            // spec rule 7: "... stays accepted for 24 hours ...; after that 401 source_unauthorized".
            if (verifyingKey(keys, source.expiredKeys, body, signature) !== null) {
              throw new ProblemError(
                'source_unauthorized',
                'this key was rotated out more than 24 hours ago; sign with the current key',
              );
            }
            throw badSignature();
          }
          recentKeys.set(principal.organisation.id, source.id, verifiedBy);

          return ingestBatch(ctx, {
            owner: `source:${source.id}`,
            batchSeq: batch.batchSeq,
            channel: 'cms',
            body,
            ...(parsed.gzipped ? { gzipped: parsed.gzipped } : {}),
            bodySha256: (await parsed.early.sha256) ?? sha256Hex(body),
            existing: source.existing,
            records: batch.records,
            recordChannel: 'cms',
            // spec rule 3: "Counts are stored on the mapped player as attested plays".
            attested: true,
            receivedAt,
            buckets,
            rateWait: source.rateWait,
            streamBatchId: source.nextBatchId,
            playerOf: (record) =>
              record.player === undefined ? null : (source.players.get(record.player) ?? null),
            marks: new Map([...source.players.values()].map((p) => [p.key, p.highWaterSeq])),
            newestPlayStarts: new Map(
              [...source.players.values()].flatMap((p) =>
                p.newestPlayStart === null ? [] : [[p.key, p.newestPlayStart] as const],
              ),
            ),
            approvals: source.approvals,
            legacy: false,
            hadPopBatch: false,
            recordCount: countPlays(batch.records),
          });
        },
      );
    });

    // Counted plays, for the console (the seals, open data and declared-vs-actual read the repository directly).
    app.get<{ Querystring: Record<string, string | undefined> }>(
      '/api/v1/console/pop/counts',
      {
        config: { auth: READ_POP },
        schema: {
          querystring: Type.Object(
            {
              from: Type.Optional(QueryDate()),
              to: Type.Optional(QueryDate()),
              structure_id: Type.Optional(Type.String({ format: 'uuid' })),
              approval_number: Type.Optional(queryText(100)),
              player: Type.Optional(queryText(300)),
            },
            { additionalProperties: false },
          ),
          response: { 200: PlayCountsAnswer },
        },
      },
      async (request) => {
        const q = request.query;
        const rows = await playCounts(ctx.db, {
          ...(q['from'] ? { from: q['from'] } : {}),
          ...(q['to'] ? { to: q['to'] } : {}),
          ...(q['structure_id'] ? { structureIds: [q['structure_id'].toLowerCase()] } : {}),
          ...(q['approval_number'] ? { approvalNumber: q['approval_number'] } : {}),
          ...(q['player'] ? { playerKey: q['player'] } : {}),
        });
        return {
          items: rows.map((r) => ({
            player: r.playerKey,
            structure_id: r.structureId,
            day: r.day,
            approval_number: r.approvalNumber,
            slot: r.slot,
            attested: r.attested,
            plays: r.plays,
            flagged: r.flagged,
          })),
        };
      },
    );

    // Flagged records by flag and refused records by reason, over receive days (console quality view).
    app.get<{ Querystring: { from: string; to: string } }>(
      '/api/v1/console/pop/quality',
      {
        config: { auth: READ_POP },
        schema: {
          querystring: Type.Object({ from: QueryDate(), to: QueryDate() }, { additionalProperties: false }),
          response: { 200: PopQualityAnswer },
        },
      },
      async (request) => {
        const { from, to } = request.query;
        return { from, to, ...(await popQuality(ctx.db, from, to)) };
      },
    );

    // reject, mode_change and tamper events of one device.
    app.get<{ Params: { id: string }; Querystring: { kind?: DeviceEventKind } }>(
      '/api/v1/console/pop/devices/:id/events',
      {
        config: { auth: READ_POP },
        schema: {
          querystring: Type.Object({ kind: Type.Optional(DeviceEventKind) }, { additionalProperties: false }),
          response: { 200: DeviceEventsAnswer },
        },
      },
      async (request) => {
        const id = pathUuid(request.params.id, 'device');
        const kind = request.query.kind;
        const events = await popEvents(ctx.db, devicePlayerKey(id), kind ? { kinds: [kind] } : {});
        return {
          items: events.map((e) => ({
            batch: e.batchId,
            index: e.index,
            kind: e.kind,
            seq: e.seq,
            at: e.at,
            code: e.code,
            detail: e.detail,
            receive_day: e.receiveDay,
          })),
        };
      },
    );
  },
};
