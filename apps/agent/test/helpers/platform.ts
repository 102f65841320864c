import { createHash, type KeyObject } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCsr, exportPublicKeySpki, generateEs256KeyPair, splitPemChain } from '@ooh/crypto';
import { addCalendarYears, LIMITS, type PopAnswer } from '@ooh/protocol';
import pino from 'pino';
import { bootstrap } from '../../../platform/src/bootstrap.js';
import { TestClock } from '../../../platform/src/clock.js';
import { loadConfig } from '../../../platform/src/config.js';
import { type Platform, startPlatform } from '../../../platform/src/platform.js';
import { createTestDatabase, type TestDatabase } from '../../../platform/test/support/database.js';
import { apiCall, createOrganisation, createStructure } from '../../../platform/test/support/platform.js';
import type { HttpClient, HttpResponse, TlsIdentity } from '../../src/net/http-client.js';

/*
 * The agent's tests run against the real platform (issue 18: no second implementation of its proof-of-play rules
 * that could drift from the first). One platform per test file, as `platform run` builds it: its own PostgreSQL
 * database on the run's server, the four hosts listening on 127.0.0.1, the devices host with its real mutual TLS and
 * device CA, enrolment through the console API. Its clock is a test clock that runs at real speed from real time, so
 * the ts window, future times and certificate dates are judged as in production; a test moves it to stand for a
 * platform whose clock is off. Faults the platform does not make on demand (a 5xx, a lost answer, an outage) come
 * from `faultyHttp` (around the agent's transport) or `startProxy` (in front of a host), never from a copy of its
 * rules.
 */

const DAY_MS = 86_400_000;

export interface EnrolledDevice {
  deviceId: string;
  structureCode: string;
  /** With a CSR: the client certificate the device CA issued, and the chain up to its root. */
  certificatePem?: string;
  chainPem?: string;
}

export interface StoredBatch {
  batchSeq: number;
  channel: 'agent' | 'cert' | 'cms' | 'legacy';
  body: Buffer;
  bodySha256: string;
  answer: PopAnswer;
}

export interface AgentTestPlatform {
  platform: Platform;
  clock: TestClock;
  database: TestDatabase;
  adminKey: string;
  agentsUrl: string;
  /** https://127.0.0.1:<port>: mutual TLS, client certificates of the device CA. */
  devicesUrl: string;
  verifyUrl: string;
  /** The device CA root: the devices host's server certificate chains to it (the agent's server_ca_file). */
  serverCaPem: string;
  structure: { id: string; code: string };
  /**
   * Enrols a device through the console (as the authority admin) with its public key, and with a CSR, a client
   * certificate. `issuedAt` moves the platform's clock for the enrolment only: the certificate is issued then, for
   * a year (the platform's rule), which is how a test gets one that is near expiry, expired or not valid yet.
   */
  enrol(args: { publicKey: KeyObject; csr?: string; issuedAt?: Date }): Promise<EnrolledDevice>;
  /** The platform's clock: real time plus `offsetMs`, running. */
  setClockOffset(offsetMs: number): void;
  /** Every batch the platform stored for the device, in batch_seq order. */
  batches(deviceId: string): Promise<StoredBatch[]>;
  batch(deviceId: string, batchSeq: number): Promise<StoredBatch | undefined>;
  /** Plays the platform counted for the device (its play_counts). */
  plays(deviceId: string): Promise<number>;
  /** The device's certificates as the platform holds them (enrolment, renewals), oldest first. */
  certificates(deviceId: string): Promise<{ serial: string; issuedBy: string }[]>;
  /**
   * Makes this signed revocation list the one the verify host serves at /v1/revocations.json (null: none published
   * yet, a 404), stored as publishing stores it but signed by whichever authority the test holds: for the agent's
   * checks of lists signed by another root, older or altered.
   */
  serveRevocationList(document: { v: 1; body: unknown; signature: string } | null): Promise<void>;
  /**
   * The device's rate-limit bucket filled again, as ten seconds a batch of waiting would: for tests whose agent sends
   * more batches than the burst of 3 and whose subject is not the rate limit.
   */
  refill(deviceId: string): Promise<void>;
  close(): Promise<void>;
}

/** Certificate issue time for one that has `daysLeft` days left now (the platform issues for one calendar year). */
export function issuedForDaysLeft(daysLeft: number, now: Date = new Date()): Date {
  return addCalendarYears(new Date(now.getTime() + daysLeft * DAY_MS), -LIMITS.certificateValidityYears);
}

export async function startAgentTestPlatform(
  options: { structureCode?: string } = {},
): Promise<AgentTestPlatform> {
  const database = await createTestDatabase();
  const dataDir = await mkdtemp(join(tmpdir(), 'agent-test-platform-'));
  const clock = new TestClock(new Date(), { frozen: false });
  const config = loadConfig({
    env: {},
    overrides: {
      env: 'test',
      testClock: true,
      logLevel: 'silent',
      databaseUrl: database.url,
      dataDir,
      host: '127.0.0.1',
      apiPort: 0,
      agentsPort: 0,
      devicesPort: 0,
      verifyPort: 0,
      metrics: null,
    },
  });
  const log = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
  let platform: Platform;
  try {
    platform = await startPlatform({ config, clock, log, schedulers: false });
  } catch (error) {
    await database.drop();
    throw error;
  }
  const db = database.db;
  const { key: adminKey } = await bootstrap(db, clock);
  const base = {
    ctx: platform.ctx,
    servers: platform.servers,
    clock,
    database,
    adminKey,
    close: async () => {},
  };
  const operator = await createOrganisation(base, 'operator', ['console:fleet']);
  const structure = await createStructure(base, operator.id, { code: options.structureCode ?? 'ALM-0001' });
  let offsetMs = 0;
  const enrol = async (args: { publicKey: KeyObject; csr?: string }) => {
    const res = await apiCall(platform.servers.api, adminKey, 'POST', '/api/v1/console/devices', {
      structure_id: structure.id,
      public_key: exportPublicKeySpki(args.publicKey),
      ...(args.csr ? { csr: args.csr } : {}),
    });
    if (res.statusCode !== 201) throw new Error(`enrolment: ${res.statusCode} ${res.body}`);
    const body = res.json<{
      device_id: string;
      structure_code: string;
      certificate_pem?: string;
      chain_pem?: string;
    }>();
    return {
      deviceId: body.device_id,
      structureCode: body.structure_code,
      ...(body.certificate_pem ? { certificatePem: body.certificate_pem } : {}),
      ...(body.chain_pem ? { chainPem: body.chain_pem } : {}),
    };
  };
  // The device CA's root, as the console hands it out: the last certificate of an enrolment's chain.
  const probeKeys = generateEs256KeyPair();
  const probe = await enrol({
    publicKey: probeKeys.publicKey,
    csr: await createCsr({ subject: 'CN=probe', keyPair: probeKeys }),
  });
  const serverCaPem = splitPemChain(probe.chainPem!).at(-1)!;
  const readBatches = async (deviceId: string, batchSeq?: number): Promise<StoredBatch[]> => {
    const { rows } = await db.query<{
      batch_seq: string;
      channel: StoredBatch['channel'];
      body: Buffer;
      body_sha256: string;
      answer: PopAnswer;
    }>(
      `SELECT batch_seq, channel, body, body_sha256, answer FROM pop_batches
        WHERE owner = $1 AND ($2::bigint IS NULL OR batch_seq = $2) ORDER BY batch_seq`,
      [`device:${deviceId}`, batchSeq ?? null],
    );
    return rows.map((r) => ({
      batchSeq: Number(r.batch_seq),
      channel: r.channel,
      body: r.body,
      bodySha256: r.body_sha256,
      answer: r.answer,
    }));
  };
  return {
    platform,
    clock,
    database,
    adminKey,
    agentsUrl: platform.urls.agents,
    devicesUrl: platform.urls.devices,
    verifyUrl: platform.urls.verify,
    serverCaPem,
    structure,
    async enrol(args) {
      if (args.issuedAt) clock.set(args.issuedAt);
      try {
        return await enrol(args);
      } finally {
        if (args.issuedAt) clock.set(new Date(Date.now() + offsetMs));
      }
    },
    setClockOffset(ms) {
      offsetMs = ms;
      clock.set(new Date(Date.now() + ms));
    },
    batches: (deviceId) => readBatches(deviceId),
    batch: async (deviceId, batchSeq) => (await readBatches(deviceId, batchSeq))[0],
    async plays(deviceId) {
      const { rows } = await db.query<{ plays: number | null }>(
        'SELECT sum(plays)::int AS plays FROM play_counts WHERE player_key = $1',
        [`device:${deviceId}`],
      );
      return rows[0]?.plays ?? 0;
    },
    async certificates(deviceId) {
      const { rows } = await db.query<{ serial: string; issued_by: string }>(
        'SELECT serial, issued_by FROM device_certificates WHERE device_id = $1 ORDER BY issued_at, not_after',
        [deviceId],
      );
      return rows.map((r) => ({ serial: r.serial, issuedBy: r.issued_by }));
    },
    async serveRevocationList(document) {
      await db.query('DELETE FROM revocation_lists');
      if (!document) return;
      const body = document.body as { version: number; issued_at: string };
      await db.query(
        'INSERT INTO revocation_lists (version, issued_at, body, signature) VALUES ($1, $2, $3, $4)',
        [body.version, body.issued_at, JSON.stringify(body), document.signature],
      );
    },
    async refill(deviceId) {
      await db.query('DELETE FROM pop_rate_buckets WHERE bucket_key = $1', [`agent:${deviceId}`]);
    },
    async close() {
      await platform.close();
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** One exchange as the agent's transport saw it. */
export interface Exchange {
  method: 'GET' | 'POST';
  path: string;
  /** The HTTP status; 'lost' when the platform answered but the answer never reached the agent; 'refused' when no
   * request reached the platform (an outage); 'held' when it reaches it only later (FaultyHttp.holdNext). */
  status: number | 'lost' | 'refused' | 'held';
  code?: string;
  bodySha256: string;
  bodyBytes: number;
  batchSeq?: number;
  /** The Retry-After header of the answer. */
  retryAfter?: string;
  /** Answered by the fault injector, not by the platform. */
  injected?: true;
}

/**
 * The agent's HTTP transport with faults on demand: the requests go to the real platform over the real client (TLS,
 * client certificates and all); a test can make the next answers a given status instead (the request then never
 * reaches the platform, as with a proxy answering 5xx), lose the next answers after the platform processed the
 * request (a connection dropped on the way back), or take the platform away altogether. Every exchange is recorded.
 */
export class FaultyHttp implements HttpClient {
  readonly exchanges: Exchange[] = [];
  /** No request reaches the platform: every call fails as a refused connection would. */
  down = false;
  private failures: { status: number; code: string | null; retryAfter?: number }[] = [];
  private losses = 0;
  private holds = 0;
  private readonly held: (() => Promise<HttpResponse>)[] = [];

  constructor(private readonly inner: HttpClient) {}

  /** The next `count` requests are answered `status` (with this problem code) and never reach the platform. */
  failNext(count: number, status: number, code: string | null): void {
    for (let i = 0; i < count; i++) this.failures.push({ status, code });
  }

  /** The next `count` requests reach the platform, which processes them; their answers are lost. */
  loseAnswerNext(count: number): void {
    this.losses += count;
  }

  /**
   * The next `count` requests do not reach the platform yet: the agent sees them fail as a timed-out request would,
   * and {@link deliverHeld} sends them later, as a platform that took its time to commit would store them after
   * answering the requests that came behind them.
   */
  holdNext(count: number): void {
    this.holds += count;
  }

  /** Sends the held requests to the platform now, in the order they were made; their answers. */
  async deliverHeld(): Promise<HttpResponse[]> {
    const held = this.held.splice(0);
    const answers: HttpResponse[] = [];
    for (const send of held) answers.push(await send());
    return answers;
  }

  get(url: string, tls?: TlsIdentity): Promise<HttpResponse> {
    return this.exchange('GET', url, new Uint8Array(0), () => this.inner.get(url, tls));
  }

  post(
    url: string,
    body: Uint8Array,
    headers: Record<string, string>,
    tls?: TlsIdentity,
  ): Promise<HttpResponse> {
    return this.exchange('POST', url, body, () => this.inner.post(url, body, headers, tls));
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private async exchange(
    method: 'GET' | 'POST',
    url: string,
    body: Uint8Array,
    send: () => Promise<HttpResponse>,
  ): Promise<HttpResponse> {
    const record: Exchange = {
      method,
      path: new URL(url).pathname,
      status: 'refused',
      bodySha256: createHash('sha256').update(body).digest('hex'),
      bodyBytes: body.length,
      ...batchSeqOf(body),
    };
    this.exchanges.push(record);
    if (this.down) {
      throw Object.assign(new Error(`connect ECONNREFUSED ${new URL(url).host}`), { code: 'ECONNREFUSED' });
    }
    if (this.holds > 0) {
      this.holds--;
      record.status = 'held';
      this.held.push(send);
      throw Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' });
    }
    const failure = this.failures.shift();
    if (failure) {
      record.status = failure.status;
      record.injected = true;
      if (failure.code) record.code = failure.code;
      return {
        status: failure.status,
        headers: {
          date: new Date().toUTCString(),
          'content-type': 'application/problem+json',
        },
        body: Buffer.from(
          JSON.stringify(
            failure.code
              ? { type: 'about:blank', title: failure.code, status: failure.status, code: failure.code }
              : { title: 'error', status: failure.status },
          ),
        ),
      };
    }
    const response = await send();
    if (this.losses > 0) {
      this.losses--;
      record.status = 'lost';
      throw Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    }
    record.status = response.status;
    const code = problemCodeOf(response.body);
    if (code) record.code = code;
    const retryAfter = response.headers['retry-after'];
    if (retryAfter !== undefined) record.retryAfter = retryAfter;
    return response;
  }
}

function batchSeqOf(body: Uint8Array): { batchSeq?: number } {
  if (body.length === 0) return {};
  try {
    const parsed = JSON.parse(Buffer.from(body).toString('utf8')) as { batch_seq?: unknown };
    return typeof parsed.batch_seq === 'number' ? { batchSeq: parsed.batch_seq } : {};
  } catch {
    return {};
  }
}

function problemCodeOf(body: Buffer): string | undefined {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { code?: unknown };
    return typeof parsed.code === 'string' ? parsed.code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * An HTTP proxy in front of a plain host of the platform (the agents or verify host), for an agent whose transport a
 * test does not hold (a whole AgentCore, a child process): while `down` it drops every connection without an answer,
 * as a platform that is not there; otherwise it forwards byte for byte.
 */
export interface Proxy {
  url: string;
  down: boolean;
  close(): Promise<void>;
}

export async function startProxy(target: string, options: { down?: boolean } = {}): Promise<Proxy> {
  const upstream = new URL(target);
  const sockets = new Set<Socket>();
  const state = { down: options.down ?? false };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (state.down) {
      req.socket.destroy();
      return;
    }
    const forward = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => req.socket.destroy());
    req.pipe(forward);
  });
  server.on('connection', (socket) => {
    if (state.down) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get down() {
      return state.down;
    },
    set down(value: boolean) {
      state.down = value;
      if (value) for (const socket of sockets) socket.destroy();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
