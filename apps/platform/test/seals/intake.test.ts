import { sha256Hex } from '@ooh/crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { loadAuthority } from '../../src/authority/index.js';
import { httpSource, verifySeal } from '../../src/verifier/index.js';
import {
  agentBody,
  cmsBody,
  cmsPlay,
  createOperator,
  insertDevice,
  play,
  postCms,
  postTelemetry,
  registerSource,
  T0,
} from '../pop/helpers.js';
import { apiCall } from '../support/platform.js';
import { startSealPlatform } from './helpers.js';

/**
 * Batches that come in through the real proof-of-play routes: accepted ones are sealed on the day they arrived;
 * duplicates, conflicts and refused batches are not.
 */
let p: Awaited<ReturnType<typeof startSealPlatform>>;
let verifyUrl = '';

beforeAll(async () => {
  p = await startSealPlatform(T0);
  await p.servers.verify.listen({ host: '127.0.0.1', port: 0 });
  const address = p.servers.verify.server.address();
  verifyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(async () => {
  await p?.close();
});

test('accepted agent and CMS batches are sealed; duplicates, conflicts and refused batches are not', async () => {
  const operator = await createOperator(p, 2);
  const device = await insertDevice(p.database.db, operator.structures[0]!);
  const source = await registerSource(p, operator, { 'screen-1': operator.structures[1]! });

  // 2026-11-20 (Almaty): an agent batch with two plays, the same bytes again (a duplicate), the same batch_seq with
  // other content (409), a batch with a bad signature (401); a CMS batch with three plays.
  const first = agentBody(device, 1, [
    play(1),
    play(2),
    { kind: 'reject', seq: 3, at: T0.toISOString(), code: 'REVOKED' },
  ]);
  const accepted = await postTelemetry(p.servers, device, first);
  expect(accepted.statusCode, accepted.body).toBe(200);
  const again = await postTelemetry(p.servers, device, first);
  expect(again.statusCode, again.body).toBe(200);
  expect(again.json().duplicate).toBe(true);
  p.clock.advance(11_000);
  const conflict = await postTelemetry(
    p.servers,
    device,
    agentBody(device, 1, [play(4)], { ts: p.clock.now() }),
  );
  expect(conflict.statusCode, conflict.body).toBe(409);
  const refused = await postTelemetry(
    p.servers,
    device,
    agentBody(device, 2, [play(5)], { ts: p.clock.now() }),
    {
      signature: 'A'.repeat(86),
    },
  );
  expect(refused.statusCode, refused.body).toBe(401);
  const cms = cmsBody(source, 1, [cmsPlay('screen-1', 1), cmsPlay('screen-1', 2), cmsPlay('screen-1', 3)]);
  const cmsAnswer = await postCms(p.servers, source, cms);
  expect(cmsAnswer.statusCode, cmsAnswer.body).toBe(200);

  // The next day, a late batch about plays of the 20th: it belongs to the 21st.
  p.clock.set(new Date('2026-11-21T06:00:00Z'));
  const late = agentBody(device, 2, [play(6, {}, new Date('2026-11-20T12:00:00Z'))], { ts: p.clock.now() });
  const lateAnswer = await postTelemetry(p.servers, device, late);
  expect(lateAnswer.statusCode, lateAnswer.body).toBe(200);

  const sealed = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2026-11-20');
  expect(sealed.statusCode, sealed.body).toBe(201);
  expect(sealed.json().body).toMatchObject({ day: '2026-11-20', batch_count: 2, record_count: 5 });

  const exported = await apiCall(
    p.servers.api,
    p.adminKey,
    'GET',
    '/api/v1/console/seals/2026-11-20/batches',
  );
  const lines = exported.body
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { owner: string; body: string; body_sha256: string });
  expect(lines.map((l) => l.owner)).toEqual([`device:${device.id}`, `source:${source.id}`]);
  expect(lines.map((l) => l.body_sha256)).toEqual([sha256Hex(first), sha256Hex(cms)]);
  expect(Buffer.from(lines[0]!.body, 'base64').equals(first)).toBe(true);

  const report = await verifySeal({
    day: '2026-11-20',
    source: httpSource(verifyUrl),
    rootPem: (await loadAuthority(p.ctx)).rootPem,
    batchesNdjson: exported.body,
  });
  expect(report.checks.filter((c) => c.state === 'failed')).toEqual([]);

  p.clock.set(new Date('2026-11-22T06:00:00Z'));
  const next = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/seals/2026-11-21');
  expect(next.json().body).toMatchObject({ batch_count: 1, record_count: 1 });
});
