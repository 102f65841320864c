import { type KeyObject, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { es256Verify, importPublicKey } from '@ooh/crypto';
import { LIMITS, type PopAnswer, problemDocument, type ProblemCode } from '@ooh/protocol';
import { parseConfig } from '../src/config/config.js';
import { prepareEnrolment } from '../src/identity/enrolment.js';
import { type AgentSetup, layOutPlayer } from '../test/helpers/agent-setup.js';
import type { TestPki } from '../test/helpers/pki.js';

/**
 * Where the agent benchmark ships its backlog: 100 000 records as fast as the agent goes, which the real platform's
 * rate limit of a batch every ten seconds would spread over hours, and whose judging would put the platform's work
 * into the agent's figures.
 *
 * It is NOT the platform: it checks a signed batch's signature, takes every record and counts each play seq once, and
 * judges nothing else. The agent's tests run against the real platform (test/helpers/platform.ts, issue 18).
 */
export class BenchSink {
  private readonly keys = new Map<string, KeyObject>();
  private readonly plays = new Map<string, Set<number>>();
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<BenchSink> {
    let platform: BenchSink | undefined;
    const server = createServer((req, res) => {
      platform!.handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) problem(res, 500, 'internal_error', String(error));
      });
    });
    platform = new BenchSink(server);
    server.on('connection', (socket) => {
      platform!.sockets.add(socket);
      socket.on('close', () => platform!.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return platform;
  }

  get agentsUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  get verifyUrl(): string {
    return this.agentsUrl;
  }

  registerDevice(deviceId: string, publicKey: KeyObject): void {
    this.keys.set(deviceId, publicKey);
    this.plays.set(deviceId, new Set());
  }

  /** Distinct play seqs received from the device. */
  playCount(deviceId: string): number {
    return this.plays.get(deviceId)?.size ?? 0;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader('date', new Date().toUTCString());
    const path = (req.url ?? '').split('?')[0] ?? '';
    if (req.method !== 'POST' || path !== '/s/v1/telemetry') return problem(res, 404, 'not_found');
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of req) {
      total += (chunk as Buffer).length;
      if (total > LIMITS.telemetryBodyMaxBytes) return problem(res, 413, 'body_too_large');
      chunks.push(chunk as Buffer);
    }
    const body = Buffer.concat(chunks);
    let batch: { device_id?: string; batch_seq?: number; events?: { kind?: string; seq?: number }[] };
    try {
      batch = JSON.parse(body.toString('utf8'));
    } catch {
      return problem(res, 400, 'invalid_json');
    }
    const key = this.keys.get(batch.device_id ?? '');
    if (!key) return problem(res, 401, 'device_unauthorized');
    const signature = req.headers['x-service-signature'];
    let verified = false;
    try {
      verified = typeof signature === 'string' && es256Verify(key, body, signature);
    } catch {
      verified = false;
    }
    if (!verified) return problem(res, 401, 'bad_signature');
    const events = batch.events ?? [];
    const seqs = this.plays.get(batch.device_id!)!;
    for (const event of events) if (event.kind === 'play' && event.seq !== undefined) seqs.add(event.seq);
    const answer: PopAnswer = {
      batch_seq: batch.batch_seq ?? 0,
      received: events.length,
      accepted: events.length,
      duplicates: 0,
      refused: 0,
      flagged: 0,
      duplicate: false,
      items: [],
    };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
  }
}

function problem(res: ServerResponse, status: number, code: ProblemCode, detail?: string): void {
  res.writeHead(status, { 'content-type': 'application/problem+json' });
  res.end(JSON.stringify({ ...problemDocument(code, detail), status }));
}

/** A player laid out as setUpAgent does, its device registered with the sink instead of enrolled on a platform. */
export async function setUpOnSink(args: {
  dir: string;
  sink: BenchSink;
  pki: TestPki;
  overrides?: Record<string, unknown>;
}): Promise<AgentSetup> {
  const deviceId = randomUUID();
  const raw = layOutPlayer({
    dir: args.dir,
    authorityRootPem: args.pki.authorityRootPem,
    serverCaPem: args.pki.tlsRootPem,
    deviceId,
    structure: 'ALM-0001',
    urls: { agents: args.sink.agentsUrl, devices: args.sink.agentsUrl, verify: args.sink.agentsUrl },
    ...(args.overrides ? { overrides: args.overrides } : {}),
  });
  const configPath = join(args.dir, 'agent.json');
  writeFileSync(configPath, JSON.stringify(raw, null, 2));
  const config = parseConfig(raw, args.dir, configPath);
  const enrolment = await prepareEnrolment(config);
  args.sink.registerDevice(deviceId, importPublicKey(enrolment.publicKeySpki));
  return { config, configPath, deviceId, raw };
}
