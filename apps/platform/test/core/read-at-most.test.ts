import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { readAtMost } from '../../src/http/read-at-most.js';
import { requestTimestamp, TsaError } from '../../src/ledger/timestamp.js';
import { fetchTransport } from '../../src/ledger/witnesses.js';
import { httpSource, SourceError } from '../../src/verifier/source.js';

/*
 * Servers the platform calls (a witness, a time-stamping authority) and the verify host the CLI reads: an endless
 * answer is read up to a bound and the transfer is stopped, where `response.text()` or `arrayBuffer()` read on until
 * the timeout (or, in the CLI, until memory ran out), holding all of it.
 */

let server: Server;
let url: string;
/** Bytes each endless answer had written when its connection closed. */
const written: number[] = [];

function endless(res: ServerResponse, contentType: string): void {
  res.writeHead(200, { 'content-type': contentType });
  const chunk = Buffer.alloc(16 * 1024, 0x41);
  let sent = 0;
  const pump = () => {
    while (!res.destroyed && res.write(chunk)) sent += chunk.length;
    if (!res.destroyed) res.once('drain', pump);
  };
  res.on('close', () => written.push(sent));
  pump();
}

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    if (req.url === '/short') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('a short answer\n');
    } else if (req.url === '/tsa') {
      endless(res, 'application/timestamp-reply');
    } else {
      endless(res, 'text/plain');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

test('an endless answer is read up to the bound, and its transfer is stopped', async () => {
  const before = written.length;
  const answer = await readAtMost(await fetch(`${url}/endless`), 100_000);
  expect(answer.truncated).toBe(true);
  expect(answer.body.length).toBe(100_000);
  expect(answer.body.every((b) => b === 0x41)).toBe(true);
  // The server sees its connection closed, having written a bounded amount (socket buffers, not the whole answer).
  await expect.poll(() => written.length, { timeout: 5000 }).toBe(before + 1);
  expect(written.at(-1)!).toBeLessThan(50 * 1024 * 1024);
});

test('a short answer is read whole', async () => {
  const answer = await readAtMost(await fetch(`${url}/short`), 100_000);
  expect(answer).toEqual({ body: Buffer.from('a short answer\n'), truncated: false });
  // Exactly the bound is whole too.
  const exact = await readAtMost(await fetch(`${url}/short`), 15);
  expect(exact).toEqual({ body: Buffer.from('a short answer\n'), truncated: false });
  const cut = await readAtMost(await fetch(`${url}/short`), 7);
  expect(cut).toEqual({ body: Buffer.from('a short'), truncated: true });
});

test("a witness's endless answer is cut at 64 kB (and then fails as not signature lines)", async () => {
  const answer = await fetchTransport.post(`${url}/witness`, 'old 0\n\ncheckpoint\n');
  expect(answer.status).toBe(200);
  expect(answer.body.length).toBe(64 * 1024);
});

test("a TSA's endless answer is refused as too large, without reading it to the end", async () => {
  const settings = { url: `${url}/tsa`, trustedPem: [], certFile: 'tsa.pem', policy: null };
  const refused = requestTimestamp(
    settings,
    { day: '2026-11-20', digest: 'ab'.repeat(32) },
    { now: () => new Date() },
  );
  await expect(refused).rejects.toThrow(TsaError);
  await expect(refused).rejects.toThrow(/too large to be a TimeStampResp/);
});

test("a verify host's endless answer stops the verify CLI with a message, not a process out of memory", async () => {
  const source = httpSource(url);
  await expect(source.get('/v1/stats-seals/2026-11-20')).rejects.toThrow(SourceError);
  await expect(source.get('/v1/stats-seals/2026-11-20')).rejects.toThrow(/larger than 16 MB/);
  expect(await source.get('/short')).toEqual({ status: 200, body: Buffer.from('a short answer\n') });
});
