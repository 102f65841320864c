import { createHash, type KeyObject, type X509Certificate } from 'node:crypto';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import {
  es256Verify,
  exportPrivateKeyPem,
  importPublicKey,
  issueCertificate,
  parseCsr,
  randomSerialHex,
  readCertificate,
  sha256Hex,
} from '@ooh/crypto';
import {
  addCalendarYears,
  compiledCheck,
  LIMITS,
  type PopAnswer,
  type PopAnswerItem,
  PopRecord,
  problemDocument,
  type ProblemCode,
  RenewRequest,
  SignedTelemetryBatch,
  TelemetryBatch,
} from '@ooh/protocol';
import type { TestPki } from './pki.js';

/**
 * A small, faithful implementation of the platform's agent-facing contract, for agent tests while the real
 * platform is written elsewhere:
 * - `POST /s/v1/telemetry` (signed channel) and `POST /d/v1/telemetry` (certificate channel, mTLS), with the
 *   order of checks of DESIGN.md §5: size and type → JSON → schema → authentication → idempotency →
 *   freshness (signed channel only) → rate limit → per-record judgement;
 * - `POST /d/v1/renew` (mTLS + body signature), answering the same CSR with the certificate already issued;
 * - `GET /v1/revocations.json`.
 * Every answer carries a `Date` header from the platform's own (offsettable) clock.
 */

interface StoredBatch {
  sha256: string;
  answer: PopAnswer;
  body: Buffer;
}

interface DeviceCertificate {
  serialHex: string;
  pem: string;
  spki: string;
  notAfter: Date;
}

export interface TestDevice {
  deviceId: string;
  /** Keys whose signatures are accepted on the signed channel, with an optional end of acceptance. */
  keys: { key: KeyObject; spki: string; validUntil: Date | null }[];
  certificates: DeviceCertificate[];
  revoked: boolean;
  highWaterSeq: number;
  playSeqs: Set<number>;
  batches: Map<number, StoredBatch>;
  renewals: Map<
    string,
    { certificate_pem: string; chain_pem: string; not_after: string; old_valid_until: string }
  >;
  forceRenewAllowed: boolean;
}

export interface RequestRecord {
  path: string;
  status: number;
  code?: string;
  batchSeq?: number;
  bodySha256?: string;
  channel?: 'signed' | 'certificate';
}

export class TestPlatform {
  readonly devices = new Map<string, TestDevice>();
  readonly requests: RequestRecord[] = [];
  /** Platform clock = real time + this offset. */
  clockOffsetMs = 0;
  revocationList: unknown = null;
  /** Answer the next N telemetry calls with 429 and this Retry-After (seconds). */
  private rateLimitQueue: number[] = [];
  /** Answer the next N telemetry calls with this status/problem code. */
  private failQueue: { status: number; code: ProblemCode | null }[] = [];
  /** Process (and store) the next N telemetry/renew calls, then drop the connection without an answer. */
  private dropAfterStoreCount = 0;
  private dropRenewCount = 0;
  private readonly sockets = new Set<import('node:net').Socket>();

  private constructor(
    private readonly http: Server,
    private readonly https: Server | null,
    private readonly pki: TestPki | null,
  ) {}

  static async startOnPort(port: number, options: { pki?: TestPki } = {}): Promise<TestPlatform> {
    return TestPlatform.start({ ...options, port });
  }

  static async start(
    options: { pki?: TestPki; port?: number; httpsPort?: number } = {},
  ): Promise<TestPlatform> {
    const pki = options.pki ?? null;
    let platform: TestPlatform | undefined;
    const handler = (secure: boolean) => (req: IncomingMessage, res: ServerResponse) => {
      platform!.handle(req, res, secure).catch((error: unknown) => {
        if (!res.headersSent) platform!.problem(res, 500, 'internal_error', String(error));
      });
    };
    const http = createHttpServer(handler(false));
    const https = pki
      ? createHttpsServer(
          {
            key: exportPrivateKeyPem(pki.server.key),
            cert: pki.server.certificatePem,
            ca: [pki.deviceRootPem],
            requestCert: true,
            rejectUnauthorized: true,
          },
          handler(true),
        )
      : null;
    platform = new TestPlatform(http, https, pki);
    for (const [server, port] of [
      [http, options.port ?? 0],
      [https, options.httpsPort ?? 0],
    ] as const) {
      if (!server) continue;
      server.on('connection', (socket) => {
        platform!.sockets.add(socket);
        socket.on('close', () => platform!.sockets.delete(socket));
      });
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    }
    return platform;
  }

  get agentsUrl(): string {
    return `http://127.0.0.1:${(this.http.address() as AddressInfo).port}`;
  }

  get verifyUrl(): string {
    return this.agentsUrl;
  }

  get devicesUrl(): string {
    if (!this.https) throw new Error('test platform started without PKI: no devices host');
    return `https://localhost:${(this.https.address() as AddressInfo).port}`;
  }

  now(): Date {
    return new Date(Date.now() + this.clockOffsetMs);
  }

  registerDevice(deviceId: string, publicKey: KeyObject, certificatePem?: string): TestDevice {
    const spki = publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
    const device: TestDevice = {
      deviceId,
      keys: [{ key: publicKey, spki, validUntil: null }],
      certificates: [],
      revoked: false,
      highWaterSeq: 0,
      playSeqs: new Set(),
      batches: new Map(),
      renewals: new Map(),
      forceRenewAllowed: false,
    };
    if (certificatePem) device.certificates.push(toDeviceCertificate(certificatePem));
    this.devices.set(deviceId, device);
    return device;
  }

  device(deviceId: string): TestDevice {
    const device = this.devices.get(deviceId);
    if (!device) throw new Error(`unknown test device ${deviceId}`);
    return device;
  }

  /** Plays counted for the device: distinct (device, seq) play records accepted. */
  playCount(deviceId: string): number {
    return this.device(deviceId).playSeqs.size;
  }

  rateLimitNext(count: number, retryAfterSeconds: number): void {
    for (let i = 0; i < count; i++) this.rateLimitQueue.push(retryAfterSeconds);
  }

  failNext(count: number, status: number, code: ProblemCode | null): void {
    for (let i = 0; i < count; i++) this.failQueue.push({ status, code });
  }

  dropAnswerNext(count: number): void {
    this.dropAfterStoreCount += count;
  }

  dropRenewAnswerNext(count: number): void {
    this.dropRenewCount += count;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(
      [this.http, this.https]
        .filter((server): server is Server => server !== null)
        .map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    );
  }

  private async handle(req: IncomingMessage, res: ServerResponse, secure: boolean): Promise<void> {
    res.setHeader('date', this.now().toUTCString());
    const path = (req.url ?? '').split('?')[0] ?? '';
    if (req.method === 'GET' && path === '/v1/revocations.json' && !secure) {
      if (this.revocationList === null) return this.problem(res, 404, 'not_found');
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(this.revocationList));
      return;
    }
    if (req.method !== 'POST') return this.problem(res, 405, 'method_not_allowed');
    if (path === '/s/v1/telemetry' && !secure) return this.telemetry(req, res, null);
    if (path === '/d/v1/telemetry' && secure) {
      const device = this.deviceFromClientCertificate(req);
      if (!device) return this.record(res, { path, status: 401, code: 'device_unauthorized' });
      return this.telemetry(req, res, device);
    }
    if (path === '/d/v1/renew' && secure) return this.renew(req, res);
    return this.problem(res, 404, 'not_found');
  }

  private async telemetry(
    req: IncomingMessage,
    res: ServerResponse,
    certDevice: TestDevice | null,
  ): Promise<void> {
    const path = req.url ?? '';
    const channel = certDevice ? 'certificate' : 'signed';
    const body = await readBody(req, LIMITS.telemetryBodyMaxBytes);
    if (body === null) return this.record(res, { path, status: 413, code: 'body_too_large', channel });
    if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
      return this.record(res, { path, status: 415, code: 'unsupported_media_type', channel });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return this.record(res, { path, status: 400, code: 'invalid_json', channel });
    }
    if (
      typeof parsed !== 'object' ||
      parsed === null ||
      (parsed as { schema?: unknown }).schema !== 'service.pop/1'
    ) {
      return this.record(res, { path, status: 400, code: 'schema_unknown', channel });
    }
    const schema = certDevice ? TelemetryBatch : SignedTelemetryBatch;
    if (!compiledCheck(schema).Check(parsed)) {
      return this.record(res, { path, status: 422, code: 'validation_failed', channel });
    }
    const batch = parsed as TelemetryBatch;
    const bodySha256 = sha256Hex(body);
    const base: RequestRecord = { path, status: 0, batchSeq: batch.batch_seq, bodySha256, channel };

    let device = certDevice;
    if (!device) {
      device = this.devices.get(batch.device_id ?? '') ?? null;
      if (!device || device.revoked)
        return this.record(res, { ...base, status: 401, code: 'device_unauthorized' });
      const signature = req.headers['x-service-signature'];
      const now = this.now();
      const verified =
        typeof signature === 'string' &&
        device.keys.some((entry) => {
          if (entry.validUntil && entry.validUntil < now) return false;
          try {
            return es256Verify(entry.key, body, signature);
          } catch {
            return false;
          }
        });
      // spec: "A signature that does not verify gives 401 bad_signature and nothing is stored."
      if (!verified) return this.record(res, { ...base, status: 401, code: 'bad_signature' });
    } else if (device.revoked) {
      return this.record(res, { ...base, status: 401, code: 'device_unauthorized' });
    }

    // Idempotency before freshness (DESIGN.md §5).
    const stored = device.batches.get(batch.batch_seq);
    if (stored) {
      if (stored.sha256 !== bodySha256)
        return this.record(res, { ...base, status: 409, code: 'batch_conflict' });
      return this.answer(res, base, { ...stored.answer, duplicate: true });
    }
    if (!certDevice) {
      const ts = Date.parse(batch.ts ?? '');
      if (Math.abs(ts - this.now().getTime()) > LIMITS.agentTsToleranceSeconds * 1000) {
        return this.record(res, { ...base, status: 401, code: 'stale_request' });
      }
    }
    const retryAfter = this.rateLimitQueue.shift();
    if (retryAfter !== undefined) {
      res.setHeader('retry-after', String(retryAfter));
      return this.record(res, { ...base, status: 429, code: 'rate_limited' });
    }
    const failure = this.failQueue.shift();
    if (failure) {
      return failure.code
        ? this.record(res, { ...base, status: failure.status, code: failure.code })
        : this.record(res, { ...base, status: failure.status });
    }

    const answer = this.judge(device, batch);
    device.batches.set(batch.batch_seq, { sha256: bodySha256, answer, body });
    if (this.dropAfterStoreCount > 0) {
      this.dropAfterStoreCount--;
      this.requests.push({ ...base, status: -1 });
      req.socket.destroy();
      return;
    }
    return this.answer(res, base, answer);
  }

  private judge(device: TestDevice, batch: TelemetryBatch): PopAnswer {
    const items: PopAnswerItem[] = [];
    let accepted = 0;
    let duplicates = 0;
    let refused = 0;
    const now = this.now().getTime();
    batch.events.forEach((event, index) => {
      if (!compiledCheck(PopRecord).Check(event)) {
        refused++;
        items.push({ index, status: 'refused', reason: 'invalid_record' });
        return;
      }
      const record = event as PopRecord;
      if (record.kind === 'play' && (record.seq === undefined || record.media_sha256 === undefined)) {
        refused++;
        items.push({ index, status: 'refused', reason: 'invalid_record' });
        return;
      }
      if (record.seq !== undefined && record.seq <= device.highWaterSeq) {
        duplicates++;
        items.push({ index, status: 'duplicate' });
        return;
      }
      const times = [record.start, record.end, record.at].filter((t): t is string => t !== undefined);
      if (times.some((t) => Date.parse(t) > now + LIMITS.futureToleranceSeconds * 1000)) {
        refused++;
        items.push({ index, status: 'refused', reason: 'time_in_future' });
        return;
      }
      if (record.kind === 'play') {
        if (record.approval_number === undefined && record.slot === undefined) {
          refused++;
          items.push({ index, status: 'refused', reason: 'approval_missing' });
          return;
        }
        if (record.duration_ms !== undefined && record.duration_ms < LIMITS.playMinDurationMs) {
          refused++;
          items.push({ index, status: 'refused', reason: 'too_short' });
          return;
        }
      }
      if (record.seq !== undefined) device.highWaterSeq = record.seq;
      if (record.kind === 'play' && record.seq !== undefined) device.playSeqs.add(record.seq);
      accepted++;
    });
    return {
      batch_seq: batch.batch_seq,
      received: batch.events.length,
      accepted,
      duplicates,
      refused,
      flagged: 0,
      duplicate: false,
      items,
    };
  }

  private async renew(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = req.url ?? '';
    const body = await readBody(req, 64 * 1024);
    const device = this.deviceFromClientCertificate(req);
    // spec Errors: renewal "signature does not verify, or device unknown or revoked" → 401
    if (!device || device.revoked || body === null) return this.record(res, { path, status: 401 });
    const presented = this.presentedCertificate(req)!;
    const signature = req.headers['x-service-signature'];
    let verified = false;
    try {
      verified =
        typeof signature === 'string' && es256Verify(importPublicKey(presented.spki), body, signature);
    } catch {
      verified = false;
    }
    if (!verified) return this.record(res, { path, status: 401 });
    let request: RenewRequest;
    try {
      const parsed: unknown = JSON.parse(body.toString('utf8'));
      if (!compiledCheck(RenewRequest).Check(parsed))
        return this.record(res, { path, status: 422, code: 'validation_failed' });
      request = parsed;
    } catch {
      return this.record(res, { path, status: 400, code: 'invalid_json' });
    }
    const csr = await parseCsr(request.csr);
    if (!csr.signatureValid) return this.record(res, { path, status: 422, code: 'validation_failed' });

    // A lost answer is recovered by sending the same CSR again: answer with the certificate already issued.
    const earlier = device.renewals.get(csr.publicKeySpki);
    if (earlier)
      return this.answerJson(res, { path, status: 200 }, { device_id: device.deviceId, ...earlier });

    const newest = device.certificates[device.certificates.length - 1];
    if (!newest || newest.serialHex !== presented.serialHex) {
      return this.record(res, { path, status: 409, code: 'renewal_refused' });
    }
    if (device.keys.some((entry) => entry.spki === csr.publicKeySpki)) {
      return this.record(res, { path, status: 409, code: 'renewal_refused' });
    }
    const now = this.now();
    const daysLeft = (newest.notAfter.getTime() - now.getTime()) / 86_400_000;
    if (daysLeft > LIMITS.renewalMaxDaysLeft && !(request.force && device.forceRenewAllowed)) {
      return this.record(res, { path, status: 409, code: 'renewal_refused' });
    }
    const notAfter = addCalendarYears(now, LIMITS.certificateValidityYears);
    const certificatePem = await issueCertificate({
      subject: `CN=device ${device.deviceId}, O=City`,
      publicKey: csr.publicKey,
      issuerCertificatePem: this.pki!.deviceIssuing.certificatePem,
      issuerKey: this.pki!.deviceIssuing.key,
      notBefore: new Date(now.getTime() - 60_000),
      notAfter,
      serialHex: randomSerialHex(),
      usage: 'client',
    });
    const oldValidUntil = new Date(now.getTime() + LIMITS.renewalOldCertGraceHours * 3_600_000);
    for (const entry of device.keys) if (entry.validUntil === null) entry.validUntil = oldValidUntil;
    device.keys.push({ key: csr.publicKey, spki: csr.publicKeySpki, validUntil: null });
    device.certificates.push(toDeviceCertificate(certificatePem));
    const answer = {
      certificate_pem: certificatePem,
      chain_pem: this.pki!.deviceIssuing.certificatePem,
      not_after: notAfter.toISOString(),
      old_valid_until: oldValidUntil.toISOString(),
    };
    device.renewals.set(csr.publicKeySpki, answer);
    if (this.dropRenewCount > 0) {
      this.dropRenewCount--;
      this.requests.push({ path, status: -1 });
      req.socket.destroy();
      return;
    }
    return this.answerJson(res, { path, status: 200 }, { device_id: device.deviceId, ...answer });
  }

  private presentedCertificate(req: IncomingMessage): { serialHex: string; spki: string } | null {
    const socket = req.socket as TLSSocket;
    if (typeof socket.getPeerX509Certificate !== 'function') return null;
    const peer = socket.getPeerX509Certificate();
    if (!peer) return null;
    return { serialHex: readCertificate(peer.toString()).serialHex, spki: spkiOf(peer) };
  }

  private deviceFromClientCertificate(req: IncomingMessage): TestDevice | null {
    const presented = this.presentedCertificate(req);
    if (!presented) return null;
    const now = this.now();
    for (const device of this.devices.values()) {
      const index = device.certificates.findIndex((c) => c.serialHex === presented.serialHex);
      if (index < 0) continue;
      // the old certificate stays accepted until old_valid_until (spec "Certificate rule")
      const key = device.keys.find((entry) => entry.spki === presented.spki);
      if (key?.validUntil && key.validUntil < now) return null;
      return device;
    }
    return null;
  }

  private answer(res: ServerResponse, base: RequestRecord, answer: PopAnswer): void {
    this.answerJson(res, { ...base, status: 200 }, answer);
  }

  private answerJson(res: ServerResponse, record: RequestRecord, payload: unknown): void {
    this.requests.push(record);
    res.writeHead(record.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(payload));
  }

  private record(res: ServerResponse, record: RequestRecord): void {
    this.requests.push(record);
    if (record.code) this.problem(res, record.status, record.code as ProblemCode);
    else this.problem(res, record.status, null);
  }

  problem(res: ServerResponse, status: number, code: ProblemCode | null, detail?: string): void {
    const document = code ? problemDocument(code, detail) : { status, title: 'error' };
    res.writeHead(status, { 'content-type': 'application/problem+json' });
    res.end(JSON.stringify({ ...document, status }));
  }
}

function toDeviceCertificate(pem: string): DeviceCertificate {
  const info = readCertificate(pem);
  return { serialHex: info.serialHex, pem, spki: info.publicKeySpki, notAfter: info.notAfter };
}

function spkiOf(certificate: X509Certificate): string {
  return certificate.publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req) {
    total += (chunk as Buffer).length;
    if (total > limit) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Hex SHA-256 of bytes, for assertions. */
export function sha256OfBytes(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}
