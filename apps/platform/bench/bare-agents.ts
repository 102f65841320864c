/**
 * The agent channel's ceiling (issue "Proof of play at national scale": "a bare endpoint of the same Fastify stack
 * that parses, checks the schema, verifies the signature and answers, storing nothing"). Started by
 * pop.bench.ts as a child process, with as many processes as the platform (node:cluster): the same host server
 * (createHostServer: hooks, JSON parser, error handling, /healthz), the same body limit, signature header check, batch
 * reading (readAgentBatch) and ES256 verification with the same key cache; the device keys are read from the
 * database once at start, so a batch costs no query. The answer goes through the platform's PopAnswer schema.
 *
 *   BARE_DATABASE_URL=... BARE_PORT=... BARE_WORKERS=2 node --conditions=source --import tsx bench/bare-agents.ts
 */
import cluster from 'node:cluster';
import { es256Verify, importPublicKey } from '@ooh/crypto';
import { LIMITS, PopAnswer } from '@ooh/protocol';
import pg from 'pg';
import { pino } from 'pino';
import { createHostServer } from '../src/http/server.js';
import { ProblemError } from '../src/http/problem.js';
import { readAgentBatch } from '../src/pop/body.js';
import { KeyCache } from '../src/pop/key-cache.js';

const port = Number(process.env['BARE_PORT']);
const workers = Number(process.env['BARE_WORKERS'] ?? 1);

if (cluster.isPrimary && workers > 1) {
  for (let i = 0; i < workers; i += 1) cluster.fork();
  process.on('SIGTERM', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM');
    process.exit(0);
  });
} else {
  const client = new pg.Client({ connectionString: process.env['BARE_DATABASE_URL'] });
  await client.connect();
  const { rows } = await client.query<{ device_id: string; public_key_spki: string }>(
    'SELECT device_id, public_key_spki FROM device_keys',
  );
  await client.end();
  const spkiOf = new Map(rows.map((r) => [r.device_id, r.public_key_spki]));
  // BARE_KEY_IMPORT=der: the key cache as it was before issue 19 (createPublicKey of the SPKI DER), to compare.
  const keys =
    process.env['BARE_KEY_IMPORT'] === 'der' ? new KeyCache(10_000, importPublicKey) : new KeyCache();
  const app = createHostServer({ name: 'agents', logger: pino({ level: 'warn' }) });
  app.post(
    '/s/v1/telemetry',
    {
      // As the platform's agent route: no signature header, no body read.
      onRequest: async (request) => {
        const value = request.headers['x-service-signature'];
        if (typeof value !== 'string' || value === '')
          throw new ProblemError('bad_signature', 'no signature');
      },
      bodyLimit: LIMITS.telemetryBodyMaxBytes,
      config: { bodyJudgedPerRecord: true },
      schema: { response: { 200: PopAnswer } },
    },
    async (request) => {
      const body = request.rawBody!;
      const batch = readAgentBatch(request.body, 'signed');
      const spki = spkiOf.get(batch.deviceId!);
      if (!spki || !es256Verify(keys.get(spki), body, request.headers['x-service-signature'] as string)) {
        throw new ProblemError('bad_signature', 'the signature does not verify');
      }
      return {
        batch_seq: batch.batchSeq,
        duplicate: false,
        received: batch.events.length,
        accepted: batch.events.length,
        duplicates: 0,
        refused: 0,
        flagged: 0,
        items: [],
      };
    },
  );
  await app.listen({ port, host: '127.0.0.1' });
  process.on('SIGTERM', () => {
    void app.close().then(() => process.exit(0));
  });
}
