import { connect } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { createHostServer, type HostName, REQUEST_TIMEOUT_MS } from '../../src/http/server.js';

/*
 * Issue "Trust under attack", item 3 (what was left): a body announced longer than it is held its socket for ever,
 * since Fastify's default request timeout is none. Every host now has one.
 */

const apps: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function echoServer(options: { requestTimeoutMs?: number; connectionsCheckingIntervalMs?: number }) {
  const app = createHostServer({ name: 'agents', logger: pino({ level: 'silent' }), ...options });
  app.post('/echo', async (request) => ({ got: request.body }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  apps.push(app);
  return (app.server.address() as { port: number }).port;
}

/** Sends `raw` on a new connection and gives everything the server wrote until it closed (or `waitMs` passed). */
function exchange(
  port: number,
  raw: string,
  waitMs: number,
): Promise<{ text: string; closed: boolean; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closed: false, ms: Date.now() - started });
    }, waitMs);
    socket.on('data', (chunk) => {
      text += chunk.toString('utf8');
    });
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closed: true, ms: Date.now() - started });
    });
  });
}

describe('a request that does not arrive in time', () => {
  test('a body announced longer than it is: answered with a problem document and the socket closed', async () => {
    const port = await echoServer({ requestTimeoutMs: 400, connectionsCheckingIntervalMs: 100 });
    const raw =
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":1';
    const answer = await exchange(port, raw, 10_000);
    expect(answer.closed).toBe(true);
    expect(answer.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer.text).toMatch(/content-type: application\/problem\+json/i);
    const body = JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4)) as {
      code: string;
      detail: string;
    };
    expect(body.code).toBe('invalid_json');
    expect(body.detail).toBe('the request did not arrive in time');
    // Not before its time, and well before the 5 minutes a default Node server would wait.
    expect(answer.ms).toBeGreaterThanOrEqual(350);
    expect(answer.ms).toBeLessThan(5_000);
  });

  test('a request that arrives whole is answered as before, and keeps its connection', async () => {
    const port = await echoServer({ requestTimeoutMs: 400, connectionsCheckingIntervalMs: 100 });
    const body = '{"a":1}';
    const raw = `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const answer = await exchange(port, raw, 1_000);
    expect(answer.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.text).toContain('{"got":{"a":1}}');
    expect(answer.closed).toBe(false);
  });

  test('every host has a bounded request time by default', () => {
    for (const name of ['api', 'agents', 'devices', 'verify'] as HostName[]) {
      const app = createHostServer({ name, logger: pino({ level: 'silent' }) });
      apps.push(app);
      expect(app.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS[name]);
      expect(app.server.requestTimeout).toBeGreaterThan(0);
      expect(app.server.requestTimeout).toBeLessThanOrEqual(600_000);
      // Node swaps the two when the headers' is the longer one.
      expect(app.server.headersTimeout).toBeLessThanOrEqual(app.server.requestTimeout);
    }
  });
});
