import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  createRootCa,
  exportPrivateKeyPem,
  generateEs256KeyPair,
  issueCertificate,
  randomSerialHex,
} from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NetworkSegment } from '../src/network/segment.js';
import { createProxyTls, type ProxyTls } from '../src/network/tls-identity.js';

/** A stand-in platform: counts what it processed and echoes what it was sent. */
let processed = 0;
let lastHeaders: http.IncomingHttpHeaders = {};
let upstream: http.Server;
let upstreamUrl: string;

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      processed += 1;
      lastHeaders = req.headers;
      res.writeHead(200, { 'content-type': 'application/json', date: 'Thu, 15 Jan 2026 04:00:00 GMT' });
      res.end(JSON.stringify({ path: req.url, body: Buffer.concat(chunks).toString('utf8'), n: processed }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => upstream.close(resolve));
});

async function post(
  url: string,
  body: string,
): Promise<{ status: number; json: { path: string; body: string; n: number } }> {
  const response = await fetch(url, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
  });
  return {
    status: response.status,
    json: (await response.json()) as { path: string; body: string; n: number },
  };
}

describe('NetworkSegment (HTTP links)', () => {
  let segment: NetworkSegment;
  beforeAll(async () => {
    segment = await NetworkSegment.start({
      upstream: { agents: upstreamUrl, devices: upstreamUrl, verify: upstreamUrl },
    });
  });
  afterAll(async () => {
    await segment.close();
  });

  test('forwards requests and answers unchanged, Date header included', async () => {
    const response = await fetch(`${segment.urls.agents}/s/v1/telemetry`, {
      method: 'POST',
      body: '{"a":1}',
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('date')).toBe('Thu, 15 Jan 2026 04:00:00 GMT');
    expect(await response.json()).toMatchObject({ path: '/s/v1/telemetry', body: '{"a":1}' });
  });

  test('a dropped answer: the platform processed the request, the player sees a broken connection', async () => {
    const rule = segment.dropAnswers({ pathPrefix: '/s/v1/telemetry', count: 1 });
    const before = processed;
    await expect(post(`${segment.urls.agents}/s/v1/telemetry`, '{"b":2}')).rejects.toThrow();
    expect(processed).toBe(before + 1);
    expect(rule.remaining).toBe(0);
    expect(segment.stats.droppedByPath['/s/v1/telemetry']).toBe(1);
    // Other paths and the next request pass.
    expect((await post(`${segment.urls.verify}/v1/other`, '{}')).status).toBe(200);
    expect((await post(`${segment.urls.agents}/s/v1/telemetry`, '{}')).status).toBe(200);
  });

  test('down: nothing reaches the platform; up again: it does', async () => {
    segment.setDown(true);
    const before = processed;
    await expect(post(`${segment.urls.agents}/s/v1/telemetry`, '{}')).rejects.toThrow();
    expect(processed).toBe(before);
    expect(segment.stats.refused).toBeGreaterThan(0);
    segment.setDown(false);
    expect((await post(`${segment.urls.agents}/s/v1/telemetry`, '{}')).status).toBe(200);
  });

  test('latency delays each request', async () => {
    segment.setLatency(120);
    const began = performance.now();
    await post(`${segment.urls.agents}/s/v1/telemetry`, '{}');
    expect(performance.now() - began).toBeGreaterThanOrEqual(100);
    segment.setLatency(0);
  });

  test('a tunnelled devices link carries bytes through; its answers cannot be told apart', async () => {
    expect(
      (await post(`${segment.urls.devices.replace('https:', 'http:')}/d/v1/telemetry`, '{}')).status,
    ).toBe(200);
    expect(() => segment.dropAnswers({ link: 'devices', pathPrefix: '/d/v1/renew' })).toThrow(/terminate/);
  });
});

describe('NetworkSegment (devices link terminated like nginx)', () => {
  let tls: ProxyTls;
  let segment: NetworkSegment;
  let client: { certPem: string; keyPem: string; caPem: string };

  beforeAll(async () => {
    tls = await createProxyTls();
    const now = Date.now();
    const caKeys = generateEs256KeyPair();
    const caPem = await createRootCa({
      subject: 'CN=device CA (test)',
      keyPair: caKeys,
      notBefore: new Date(now - 86_400_000),
      notAfter: new Date(now + 86_400_000),
    });
    const deviceKeys = generateEs256KeyPair();
    const certPem = await issueCertificate({
      subject: 'CN=device 1',
      publicKey: deviceKeys.publicKey,
      issuerCertificatePem: caPem,
      issuerKey: caKeys.privateKey,
      notBefore: new Date(now - 86_400_000),
      notAfter: new Date(now + 86_400_000),
      serialHex: randomSerialHex(),
      usage: 'client',
    });
    client = { certPem, keyPem: exportPrivateKeyPem(deviceKeys.privateKey), caPem };
    segment = await NetworkSegment.start({
      upstream: { agents: upstreamUrl, devices: upstreamUrl, verify: upstreamUrl },
      devicesMode: 'terminate',
      tls,
      clientCertHeader: 'x-client-cert',
      clientCaPem: caPem,
    });
  });
  afterAll(async () => {
    await segment.close();
  });

  function devicesPost(path: string, withCertificate = true): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const url = new URL(`${segment.urls.devices}${path}`);
      const request = https.request(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: 'POST',
          ca: tls.caPem,
          ...(withCertificate ? { cert: client.certPem, key: client.keyPem } : {}),
          headers: { 'content-type': 'application/json', 'x-client-cert': 'forged' },
        },
        (response) => {
          let body = '';
          response.on('data', (c: Buffer) => {
            body += c;
          });
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
        },
      );
      request.on('error', reject);
      request.end('{}');
    });
  }

  test('the client certificate checked by TLS goes on in the header; a forged header never does', async () => {
    const answer = await devicesPost('/d/v1/telemetry');
    expect(answer.status).toBe(200);
    expect(decodeURIComponent(String(lastHeaders['x-client-cert']))).toBe(
      new (await import('node:crypto')).X509Certificate(client.certPem).toString(),
    );
  });

  test('no client certificate: TLS refuses the connection', async () => {
    await expect(devicesPost('/d/v1/telemetry', false)).rejects.toThrow();
  });

  test('one renewal answer can be dropped, the telemetry beside it passes', async () => {
    segment.dropAnswers({ link: 'devices', pathPrefix: '/d/v1/renew', count: 1 });
    const before = processed;
    await expect(devicesPost('/d/v1/renew')).rejects.toThrow();
    expect(processed).toBe(before + 1);
    expect((await devicesPost('/d/v1/telemetry')).status).toBe(200);
    expect((await devicesPost('/d/v1/renew')).status).toBe(200);
  });
});
