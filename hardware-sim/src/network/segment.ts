import { X509Certificate } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { TLSSocket } from 'node:tls';
import { seededRandom } from '../util/random.js';
import type { ProxyTls } from './tls-identity.js';

/**
 * The network between a group of players and the platform: a proxy in front of the agents, devices and verify
 * hosts whose faults are set on demand. The agents and verify hosts are plain HTTP and proxied request by
 * request. The devices host is TLS: either tunnelled byte for byte (`tunnel`: the platform does the mutual TLS
 * itself; the link can go down or slow, but answers cannot be told apart), or terminated here (`terminate`: the
 * proxy stands where nginx would, checks the client certificate against the device CA and passes it on in a
 * header; the platform must run with DEVICES_TLS_TERMINATION=proxy).
 *
 * Faults:
 * - down: every connection is cut at once and new ones are reset (the agent sees a network error);
 * - latency: each request (or each chunk, in a tunnel) waits this many real milliseconds;
 * - dropped answers: the request reaches the platform and is processed, the answer is read and thrown away, and
 *   the connection is cut: "the platform processed the request, the player never heard".
 */

export type LinkName = 'agents' | 'devices' | 'verify';

export interface DropRule {
  link?: LinkName;
  method?: string;
  /** Only answers to paths starting with this (HTTP links only). */
  pathPrefix?: string;
  /** How many answers to drop (default: every matching one, until cleared). */
  count?: number;
  /** Drop a matching answer with this probability (default 1). */
  probability?: number;
}

export interface SegmentStats {
  forwarded: number;
  refused: number;
  dropped: number;
  droppedByPath: Record<string, number>;
}

export interface SegmentOptions {
  name?: string;
  upstream: { agents: string; devices: string; verify: string };
  /** `tunnel` (default) or `terminate` (needs `tls` and the platform behind a TLS-terminating proxy). */
  devicesMode?: 'tunnel' | 'terminate';
  tls?: ProxyTls;
  /** Header carrying the client certificate in `terminate` mode (DEVICES_CLIENT_CERT_HEADER). */
  clientCertHeader?: string;
  /** CA certificates client certificates must chain to in `terminate` mode (the device CA chain). */
  clientCaPem?: string;
  seed?: number;
}

interface ActiveRule extends DropRule {
  remaining: number;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'content-length',
]);

export class NetworkSegment {
  readonly name: string;
  readonly urls: { agents: string; devices: string; verify: string };
  readonly stats: SegmentStats = { forwarded: 0, refused: 0, dropped: 0, droppedByPath: {} };
  private down = false;
  private latencyMs = 0;
  private rules: ActiveRule[] = [];
  private readonly sockets = new Set<net.Socket>();
  private readonly random: () => number;
  private readonly upstreamAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });

  private constructor(
    private readonly options: SegmentOptions,
    private readonly servers: {
      agents: http.Server;
      devices: net.Server | https.Server;
      verify: http.Server;
    },
    urls: { agents: string; devices: string; verify: string },
  ) {
    this.name = options.name ?? 'network';
    this.urls = urls;
    this.random = seededRandom(options.seed ?? 1);
  }

  static async start(options: SegmentOptions): Promise<NetworkSegment> {
    const mode = options.devicesMode ?? 'tunnel';
    if (mode === 'terminate' && !options.tls)
      throw new Error('terminate mode needs a TLS identity for the proxy');
    let segment: NetworkSegment | null = null;
    const ready = () => {
      if (!segment) throw new Error('segment not ready');
      return segment;
    };
    const agents = http.createServer((req, res) => void ready().forward('agents', req, res));
    const verify = http.createServer((req, res) => void ready().forward('verify', req, res));
    let devices: net.Server | https.Server;
    if (mode === 'terminate') {
      const tls = options.tls!;
      devices = https.createServer(
        {
          key: tls.keyPem,
          cert: tls.certPem,
          ...(options.clientCaPem ? { ca: options.clientCaPem } : {}),
          requestCert: true,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.2',
        },
        (req, res) => void ready().forward('devices', req, res),
      );
    } else {
      devices = net.createServer((socket) => ready().tunnel(socket));
    }
    const listen = async (server: net.Server) => {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve());
      });
      return (server.address() as net.AddressInfo).port;
    };
    const ports = {
      agents: await listen(agents),
      devices: await listen(devices),
      verify: await listen(verify),
    };
    const urls = {
      agents: `http://127.0.0.1:${ports.agents}`,
      devices: `https://127.0.0.1:${ports.devices}`,
      verify: `http://127.0.0.1:${ports.verify}`,
    };
    segment = new NetworkSegment(options, { agents, devices, verify }, urls);
    for (const server of [agents, devices, verify]) {
      const event = server === devices && mode === 'terminate' ? 'secureConnection' : 'connection';
      server.on(event, (socket: net.Socket) => segment!.track(socket));
      if (event === 'secureConnection')
        server.on('connection', (socket: net.Socket) => segment!.track(socket));
    }
    return segment;
  }

  /** Cuts the network (every open connection too) or restores it. */
  setDown(down: boolean): void {
    this.down = down;
    if (down) for (const socket of this.sockets) socket.destroy();
  }

  get isDown(): boolean {
    return this.down;
  }

  setLatency(ms: number): void {
    this.latencyMs = Math.max(0, ms);
  }

  /** Drops answers matching `rule`; returns the rule, whose `remaining` counts down. */
  dropAnswers(rule: DropRule): ActiveRule {
    if (
      this.options.devicesMode !== 'terminate' &&
      rule.link === 'devices' &&
      (rule.method || rule.pathPrefix)
    ) {
      throw new Error(
        'answers on a tunnelled devices link cannot be told apart: use devicesMode "terminate"',
      );
    }
    const active: ActiveRule = { ...rule, remaining: rule.count ?? Number.POSITIVE_INFINITY };
    this.rules.push(active);
    return active;
  }

  clearDrops(): void {
    this.rules = [];
  }

  /** Trusts these CAs for client certificates from now on (`terminate` mode: the device CA chain). */
  trustClientCas(caPem: string): void {
    const server = this.servers.devices;
    if (!(server instanceof https.Server) || !this.options.tls) return;
    server.setSecureContext({
      key: this.options.tls.keyPem,
      cert: this.options.tls.certPem,
      ca: caPem,
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.2',
    } as Parameters<https.Server['setSecureContext']>[0]);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(
      Object.values(this.servers).map(
        (server: net.Server) => new Promise<void>((resolve) => server.close(() => resolve())),
      ),
    );
    this.upstreamAgent.destroy();
  }

  private track(socket: net.Socket): void {
    if (this.sockets.has(socket)) return;
    if (this.down) {
      this.stats.refused += 1;
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => {});
  }

  private takeDrop(link: LinkName, method: string, path: string): boolean {
    for (const rule of this.rules) {
      if (rule.remaining <= 0) continue;
      if (rule.link && rule.link !== link) continue;
      if (rule.method && rule.method.toUpperCase() !== method.toUpperCase()) continue;
      if (rule.pathPrefix && !path.startsWith(rule.pathPrefix)) continue;
      if (rule.probability !== undefined && this.random() >= rule.probability) continue;
      rule.remaining -= 1;
      return true;
    }
    return false;
  }

  private async forward(link: LinkName, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const cut = () => {
      req.socket.destroy();
    };
    try {
      if (this.down) {
        this.stats.refused += 1;
        cut();
        return;
      }
      const body = await readAll(req);
      if (this.latencyMs > 0) await delay(this.latencyMs);
      if (this.down) {
        this.stats.refused += 1;
        cut();
        return;
      }
      const target = new URL(this.options.upstream[link]);
      const headers: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
      }
      headers['host'] = target.host;
      headers['content-length'] = String(body.length);
      if (link === 'devices' && this.options.devicesMode === 'terminate') {
        const header = this.options.clientCertHeader ?? 'x-client-cert';
        // Whatever a client sent under that name is never passed on: only the certificate TLS checked here.
        delete headers[header];
        const peer = (req.socket as TLSSocket).getPeerCertificate?.();
        if (peer && Buffer.isBuffer(peer.raw) && peer.raw.length > 0) {
          headers[header] = encodeURIComponent(new X509Certificate(peer.raw).toString());
        }
      }
      const upstream = await request(
        target,
        req.method ?? 'GET',
        req.url ?? '/',
        headers,
        body,
        this.upstreamAgent,
      );
      const path = (req.url ?? '/').split('?')[0]!;
      if (this.takeDrop(link, req.method ?? 'GET', path)) {
        // The platform has processed the request and answered; the player never hears it.
        this.stats.dropped += 1;
        this.stats.droppedByPath[path] = (this.stats.droppedByPath[path] ?? 0) + 1;
        cut();
        return;
      }
      if (this.down) {
        this.stats.refused += 1;
        cut();
        return;
      }
      const responseHeaders: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(upstream.headers)) {
        if (!HOP_BY_HOP.has(name) && value !== undefined) responseHeaders[name] = value;
      }
      responseHeaders['content-length'] = String(upstream.body.length);
      res.writeHead(upstream.status, responseHeaders);
      res.end(upstream.body);
      this.stats.forwarded += 1;
    } catch {
      // The platform is unreachable (restarting): the player sees a broken connection, as it would.
      cut();
    }
  }

  private tunnel(client: net.Socket): void {
    if (this.down) {
      client.destroy();
      return;
    }
    const target = new URL(this.options.upstream.devices);
    const upstream = net.connect(Number(target.port || 443), target.hostname);
    this.sockets.add(upstream);
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    client.on('close', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    const pipe = (from: net.Socket, to: net.Socket) => {
      from.on('data', (chunk: Buffer) => {
        if (this.down) {
          client.destroy();
          upstream.destroy();
          return;
        }
        if (this.latencyMs > 0) {
          from.pause();
          setTimeout(() => {
            to.write(chunk);
            from.resume();
          }, this.latencyMs);
        } else to.write(chunk);
      });
    };
    pipe(client, upstream);
    pipe(upstream, client);
    this.stats.forwarded += 1;
  }
}

function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function request(
  target: URL,
  method: string,
  path: string,
  headers: http.OutgoingHttpHeaders,
  body: Buffer,
  agent: http.Agent,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      {
        host: target.hostname,
        port: Number(target.port || 80),
        method,
        path,
        headers,
        agent,
        timeout: 60_000,
      },
      (response) => {
        readAll(response).then(
          (responseBody) =>
            resolve({ status: response.statusCode ?? 502, headers: response.headers, body: responseBody }),
          reject,
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.on('timeout', () => outgoing.destroy(new Error('upstream timeout')));
    outgoing.end(body);
  });
}
