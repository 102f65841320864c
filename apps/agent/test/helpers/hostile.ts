import { createPublicKey, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import {
  createRootCa,
  exportPrivateKeyPem,
  generateEs256KeyPair,
  importPrivateKey,
  issueCertificate,
  randomSerialHex,
} from '@ooh/crypto';
import { type AgentCore, createAgent } from '../../src/agent.js';
import { type AgentConfig, parseConfig } from '../../src/config/config.js';
import { prepareEnrolment } from '../../src/identity/enrolment.js';
import { memoryLogger } from '../../src/logger.js';
import { layOutPlayer } from './agent-setup.js';
import { ManualHardware } from './hardware.js';
import { issueDeviceCertificate, type TestPki } from './pki.js';

/*
 * What stands between a player and the platform when it is hostile: TLS servers on 127.0.0.1 that answer with raw
 * bytes (whatever HTTP they like, or none), a CA of their own for their certificates, and a player laid out as a
 * technician would, whose platform URLs all point at them. No platform is involved: a hostile network answers in its
 * stead, and what it is sent is recorded byte for byte.
 */

const DAY_MS = 86_400_000;

export interface ServerIdentity {
  certificatePem: string;
  keyPem: string;
}

/** A TLS root of a test's own and server certificates from it (any names, any dates). */
export interface TlsAuthority {
  rootPem: string;
  issue(args?: {
    dnsNames?: string[];
    ipAddresses?: string[];
    notBefore?: Date;
    notAfter?: Date;
  }): Promise<ServerIdentity>;
}

export async function createTlsAuthority(name: string): Promise<TlsAuthority> {
  const now = Date.now();
  const keys = generateEs256KeyPair();
  const rootPem = await createRootCa({
    subject: `CN=${name}`,
    keyPair: keys,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + 3650 * DAY_MS),
  });
  return {
    rootPem,
    async issue(args = {}) {
      const server = generateEs256KeyPair();
      const certificatePem = await issueCertificate({
        subject: 'CN=platform',
        publicKey: server.publicKey,
        issuerCertificatePem: rootPem,
        issuerKey: keys.privateKey,
        notBefore: args.notBefore ?? new Date(now - DAY_MS),
        notAfter: args.notAfter ?? new Date(now + 365 * DAY_MS),
        serialHex: randomSerialHex(),
        usage: 'server',
        dnsNames: args.dnsNames ?? ['localhost'],
        ipAddresses: args.ipAddresses ?? ['127.0.0.1'],
      });
      return { certificatePem, keyPem: exportPrivateKeyPem(server.privateKey) };
    },
  };
}

export interface SeenRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** Answers one request on the raw socket (it may write anything, drip, never end, or close). */
export type Respond = (socket: TLSSocket, request: SeenRequest) => void | Promise<void>;

export interface HostileServer {
  /** https://127.0.0.1:<port> */
  url: string;
  /** Every request that reached the server (after TLS was set up), with its body. */
  requests: SeenRequest[];
  /** Bytes of application data received: 0 when no TLS session was ever set up. */
  applicationBytes: number;
  respond: Respond;
  /** Serves another certificate from now on (the same port). */
  setIdentity(identity: ServerIdentity): void;
  close(): Promise<void>;
}

export async function startHostileServer(
  identity: ServerIdentity,
  respond: Respond,
  options: { clientCaPem?: string } = {},
): Promise<HostileServer> {
  const sockets = new Set<Socket>();
  const server = createTlsServer({
    cert: identity.certificatePem,
    key: identity.keyPem,
    ...(options.clientCaPem ? { requestCert: true, rejectUnauthorized: true, ca: options.clientCaPem } : {}),
  });
  const hostile: HostileServer = {
    url: '',
    requests: [],
    applicationBytes: 0,
    respond,
    setIdentity(next) {
      server.setSecureContext({
        cert: next.certificatePem,
        key: next.keyPem,
        ...(options.clientCaPem ? { ca: options.clientCaPem } : {}),
      });
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  });
  server.on('tlsClientError', () => {});
  server.on('secureConnection', (socket) => {
    socket.on('error', () => {});
    let buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      hostile.applicationBytes += chunk.length;
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = buffer.subarray(0, end).toString('latin1').split('\r\n');
        const [method = '', path = ''] = (lines[0] ?? '').split(' ');
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        const length = Number(headers['content-length'] ?? 0);
        if (buffer.length < end + 4 + length) return;
        const request = {
          method,
          path,
          headers,
          body: Buffer.from(buffer.subarray(end + 4, end + 4 + length)),
        };
        buffer = buffer.subarray(end + 4 + length);
        hostile.requests.push(request);
        void Promise.resolve(hostile.respond(socket, request)).catch(() => socket.destroy());
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  hostile.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return hostile;
}

/** Writes a whole HTTP/1.1 answer (Content-Length added unless given). */
export function answer(
  socket: TLSSocket,
  status: number,
  headers: Record<string, string> = {},
  body: string | Buffer = '',
): void {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const all = { 'content-length': String(bytes.length), ...headers };
  const head = [`HTTP/1.1 ${status} Hostile`, ...Object.entries(all).map(([k, v]) => `${k}: ${v}`)].join(
    '\r\n',
  );
  socket.write(Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'latin1'), bytes]));
}

/** Writes `chunk` again and again, as fast as the reader takes it, until the socket closes; resolves the bytes sent. */
export async function flood(socket: TLSSocket, chunk: Buffer, limitBytes: number): Promise<number> {
  let written = 0;
  const closed = once(socket, 'close').then(() => 'closed' as const);
  while (!socket.destroyed && written < limitBytes) {
    written += chunk.length;
    if (!socket.write(chunk)) {
      if ((await Promise.race([once(socket, 'drain').then(() => 'drain' as const), closed])) === 'closed')
        break;
    }
  }
  return written;
}

/** A plain HTTP server that counts what reaches it (the http:// target of a redirect). */
export async function startCountingHttpServer(): Promise<{
  url: string;
  requests: string[];
  close(): Promise<void>;
}> {
  const requests: string[] = [];
  const server: HttpServer = createHttpServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface HostilePlayer {
  agent: AgentCore;
  config: AgentConfig;
  configPath: string;
  deviceId: string;
  logger: ReturnType<typeof memoryLogger>;
  /** The player again on the same folder (a restart); the old one must be closed first. */
  restart(): Promise<AgentCore>;
}

/**
 * A player laid out as a technician would (agent.json, authority root, device key by `agent init`), its server CA
 * being `serverCaPem`, every platform URL being `url`, and, with `daysLeft`, a client certificate of the test PKI's
 * device CA with that many days left (its chain beside it, up to the device root). Not started: a test drives its
 * parts (shipper.sendOnce, renewal.check, revocations.refresh) one step at a time.
 */
export async function hostilePlayer(args: {
  dir: string;
  pki: TestPki;
  serverCaPem: string;
  url: string;
  daysLeft?: number;
  deviceId?: string;
}): Promise<HostilePlayer> {
  const deviceId = args.deviceId ?? randomUUID();
  const raw = layOutPlayer({
    dir: args.dir,
    authorityRootPem: args.pki.authorityRootPem,
    serverCaPem: args.serverCaPem,
    deviceId,
    structure: 'ALM-0001',
    urls: { agents: args.url, devices: args.url, verify: args.url },
    overrides: {
      shipping: { min_interval_ms: 0, idle_interval_ms: 100, backoff_base_ms: 1000, backoff_cap_ms: 60_000 },
    },
  });
  const configPath = join(args.dir, 'agent.json');
  writeFileSync(configPath, JSON.stringify(raw, null, 2));
  const config = parseConfig(raw, args.dir, configPath);
  await prepareEnrolment(config);
  if (args.daysLeft !== undefined) {
    const key = importPrivateKey(readFileSync(config.keyFile, 'utf8'));
    const now = Date.now();
    const certificatePem = await issueDeviceCertificate(
      args.pki,
      deviceId,
      createPublicKey(key),
      new Date(now - (365 - args.daysLeft) * DAY_MS),
      new Date(now + args.daysLeft * DAY_MS),
    );
    writeFileSync(config.certificateFile, certificatePem);
    writeFileSync(
      config.caChainFile,
      `${args.pki.deviceIssuing.certificatePem.trim()}\n${args.pki.deviceRootPem.trim()}\n`,
    );
  }
  const logger = memoryLogger();
  const open = () =>
    createAgent({
      config,
      hardware: new ManualHardware({ now: () => new Date() }),
      logger,
      random: () => 0,
      sleep: async () => {},
    });
  const player: HostilePlayer = {
    agent: await open(),
    config,
    configPath,
    deviceId,
    logger,
    async restart() {
      player.agent = await open();
      return player.agent;
    },
  };
  return player;
}
