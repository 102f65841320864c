import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  checkCosignedCheckpoint as checkInBrowser,
  checkSignature,
  parseCheckpoint,
  parseNote,
  parseVkey as parseVkeyInBrowser,
  verifyAnchoring,
} from '@ooh/verify';
import { withTransaction } from '../../src/db/pool.js';
import { FEATURES } from '../../src/features.js';
import { digestLedgerUpTo } from '../../src/ledger/digest.js';
import { ledgerVkey, loadLedgerKey } from '../../src/ledger/key.js';
import { recordLedgerLeaf } from '../../src/ledger/leaves.js';
import { checkpointText, formatNote, parseVkey, signNote } from '../../src/ledger/note.js';
import { createLedgerFeature } from '../../src/ledger/routes.js';
import {
  fetchTransport,
  runWitnessJob,
  type WitnessRun,
  type WitnessTransport,
} from '../../src/ledger/witnesses.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { createSealsFeature, runSealScheduler } from '../../src/seals/index.js';
import { httpSource, reportLines, type VerifyReport, verifySeal } from '../../src/verifier/index.js';
import { loadAuthority } from '../../src/authority/index.js';
import {
  agentBody,
  approveThenSealDay,
  insertBatch,
  newDevice,
  startSealPlatform,
} from '../seals/helpers.js';
import { startWitness, type WitnessProcess } from '../witness/process.js';

/*
 * Issue 23, "An anchored ledger": checkpoints of the ledger head, a witness that cosigns them (a separate process
 * over HTTP, test/witness/witness.ts), blocks marked anchored on a quorum, and verifiers with pinned witness keys.
 * The tests run in order, day after day, on one platform and one witness.
 */

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../../../', import.meta.url));
const CLI = ['--conditions=source', '--import', 'tsx', path.join(REPO, 'apps/platform/src/verifier/cli.ts')];
const UNLIMITED = { burst: 1_000_000, perSecond: 1_000_000 };
const ORIGIN = 'verify.test.kz/ledger';
const W1 = 'witness.test/w1';

type P = Awaited<ReturnType<typeof startSealPlatform>>;
let p: P;
let servers: Servers;
let verifyUrl = '';
let rootPem = '';
let logVkey = '';
let witness: WitnessProcess;
let witnessFiles: { keyFile: string; stateFile: string };
const device = newDevice();
let batchSeq = 0;

async function get(url: string): Promise<{ status: number; type: string; text: string }> {
  const res = await servers.verify.inject({ method: 'GET', url });
  return { status: res.statusCode, type: String(res.headers['content-type']), text: res.body };
}

/** Statuses the witness answered, through the real transport. */
function recordingTransport(statuses: number[]): WitnessTransport {
  return {
    async post(url, body) {
      const answer = await fetchTransport.post(url, body);
      statuses.push(answer.status);
      return answer;
    },
  };
}

/** A day of the platform: two batches and an approval leaf on `day`, then the scheduler once the day has ended. */
async function liveDay(day: string): Promise<void> {
  const utc = new Date(`${day}T00:00:00Z`).getTime();
  for (let i = 0; i < 2; i += 1) {
    batchSeq += 1;
    await insertBatch(p.database.db, {
      owner: device,
      batchSeq,
      body: agentBody(device.slice(7), batchSeq, 2, batchSeq * 10),
      receivedAt: new Date(utc + (i + 1) * 3_600_000).toISOString().replace('Z', '123Z'),
    });
  }
  // 01:00 Almaty the next day: the day is sealed and its block digested.
  await approveThenSealDay(p, day, batchSeq);
}

async function job(transport?: WitnessTransport): Promise<WitnessRun> {
  const result = await runWitnessJob(p.ctx, transport ? { transport } : {});
  if (result === 'busy') throw new Error('the witness job was busy');
  return result;
}

async function blockStatus(
  day: string,
): Promise<{ status: string; anchored_by: number | null; block_height: number }> {
  const res = await get(`/v1/ledger/blocks/${day}`);
  expect(res.status).toBe(200);
  return JSON.parse(res.text) as { status: string; anchored_by: number | null; block_height: number };
}

function useWitness(w: WitnessProcess): void {
  witness = w;
  p.ctx.config.settings['LEDGER_WITNESSES'] = `${w.vkey} ${w.url}`;
}

const failures = (report: VerifyReport) =>
  reportLines(report.checks)
    .filter((c) => c.kind === 'fail')
    .map((c) => `${c.subject}: ${c.message}`);
const text = (report: VerifyReport) =>
  reportLines(report.checks)
    .map((c) => `${c.kind} ${c.subject}: ${c.message}`)
    .join('\n');

beforeAll(async () => {
  p = await startSealPlatform(new Date('2026-11-18T05:00:00Z'));
  p.ctx.config.settings['LEDGER_ORIGIN'] = ORIGIN;
  servers = await buildServers(
    p.ctx,
    FEATURES.map((f) =>
      f.name === 'seals'
        ? createSealsFeature({ rateLimit: UNLIMITED, schedulerIntervalMs: null })
        : f.name === 'ledger'
          ? createLedgerFeature({ rateLimit: UNLIMITED, witnessIntervalMs: null })
          : f,
    ),
  );
  await servers.verify.listen({ host: '127.0.0.1', port: 0 });
  const address = servers.verify.server.address();
  verifyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  rootPem = (await loadAuthority(p.ctx)).rootPem;
  logVkey = ledgerVkey(ORIGIN, await loadLedgerKey(p.ctx));
  witnessFiles = { keyFile: path.join(p.dataDir, 'w1.key'), stateFile: path.join(p.dataDir, 'w1.json') };
  useWitness(await startWitness({ name: W1, ...witnessFiles, logVkeys: [logVkey], now: p.clock.now() }));
  await runSealScheduler(p.ctx);
}, 60_000);

afterAll(async () => {
  await witness?.stop();
  if (servers) await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
  await p?.close();
});

describe('checkpoints and cosignatures', () => {
  test('each digested block gets a checkpoint signed by the ledger key; the witness cosigns it; the block is anchored', async () => {
    await liveDay('2026-11-18');
    const first = await job();
    expect(first.checkpoints).toEqual([1]);
    expect(first.submissions).toEqual([{ witness: W1, result: { outcome: 'cosigned', size: 1 } }]);
    expect(first.anchored).toEqual([1]);

    await liveDay('2026-11-19');
    const second = await job();
    expect(second).toEqual({
      checkpoints: [2],
      submissions: [{ witness: W1, result: { outcome: 'cosigned', size: 2 } }],
      anchored: [2],
    });

    // The newest checkpoint, C2SP format: origin, size, the block digest in base64; the ledger's signature and the
    // witness's cosignature, both verifying.
    const head = JSON.parse((await get('/v1/ledger/head')).text) as {
      digest: string;
      block_height: number;
      status: string;
    };
    expect(head).toMatchObject({ block_height: 2, status: 'anchored' });
    const published = await get('/v1/ledger/checkpoint');
    expect(published.status).toBe(200);
    expect(published.type).toMatch(/^text\/plain/);
    const note = parseNote(published.text)!;
    expect(note.text).toBe(`${ORIGIN}\n2\n${Buffer.from(head.digest, 'hex').toString('base64')}\n`);
    expect(note.signatures.map((s) => s.name)).toEqual([ORIGIN, W1]);
    expect(await checkSignature(note.text, note.signatures[0]!, [parseVkey(logVkey)])).toMatchObject({
      state: 'valid',
    });
    const cosigned = await checkSignature(note.text, note.signatures[1]!, [parseVkey(witness.vkey)]);
    expect(cosigned).toMatchObject({ state: 'valid' });
    // Dated by the witness's clock, which follows the platform's (test/witness/process.ts `now`): not after it.
    expect((cosigned as { timestamp: number }).timestamp).toBeGreaterThanOrEqual(
      Date.parse('2026-11-18T05:00:00Z') / 1000,
    );
    expect((cosigned as { timestamp: number }).timestamp).toBeLessThanOrEqual(p.clock.now().getTime() / 1000);

    // The earlier checkpoint stays, with its own cosignature; malformed or unknown sizes are 404 problems.
    const earlier = await get('/v1/ledger/checkpoints/1');
    expect(parseCheckpoint(parseNote(earlier.text)!.text)!.size).toBe(1);
    expect(parseNote(earlier.text)!.signatures).toHaveLength(2);
    for (const bad of ['3', '0', '01', 'x', '99999999999']) {
      const res = await get(`/v1/ledger/checkpoints/${bad}`);
      expect(res.status).toBe(404);
      expect(JSON.parse(res.text)).toMatchObject({ code: 'not_found' });
    }

    // The seal of the 18th is a leaf of the block of the 19th: its ledger status says anchored.
    const seal = JSON.parse((await get('/v1/stats-seals/2026-11-18')).text) as { ledger: { status: string } };
    expect(seal.ledger.status).toBe('anchored');
    expect(await blockStatus('2026-11-18')).toMatchObject({ status: 'anchored', anchored_by: 1 });

    const witnesses = JSON.parse((await get('/v1/ledger/witnesses')).text) as Record<string, unknown>;
    expect(witnesses).toMatchObject({
      origin: ORIGIN,
      ledger_vkey: logVkey,
      quorum: 1,
      checkpoint: { size: 2, anchored_size: 2 },
      witnesses: [{ name: W1, vkey: witness.vkey, url: witness.url, cosigned_size: 2, state: 'ok' }],
    });

    // The witness's own monitoring view (tlog-witness "GET <monitoring prefix>/<origin hash>/checkpoint").
    const originHash = (await import('node:crypto')).createHash('sha256').update(ORIGIN).digest('hex');
    const monitored = await fetch(`${witness.url}/${originHash}/checkpoint`);
    expect(parseNote(await monitored.text())!.text).toBe(note.text);
  });
});

describe('a witness that is down', () => {
  test('delays anchored, never sealing; after its backoff it is asked again and anchors the blocks in between', async () => {
    await witness.stop();
    await liveDay('2026-11-20');
    // Sealing and digesting went on without the witness.
    expect((await get('/v1/stats-seals/2026-11-20')).status).toBe(200);
    const down = await job();
    expect(down.checkpoints).toEqual([3]);
    expect(down.submissions).toEqual([
      {
        witness: W1,
        result: { outcome: 'failed', error: expect.stringMatching(/^unreachable: ECONNREFUSED/) },
      },
    ]);
    expect(down.anchored).toEqual([]);
    expect(await blockStatus('2026-11-20')).toMatchObject({ status: 'digested', anchored_by: null });
    const state = await p.database.db.query<{ failures: number; next_attempt_at: Date }>(
      'SELECT failures, next_attempt_at FROM ledger_witnesses',
    );
    expect(state.rows[0]!.failures).toBe(1);
    // Backoff: 10 s base, half of it fixed.
    expect(state.rows[0]!.next_attempt_at.getTime() - p.clock.now().getTime()).toBeGreaterThanOrEqual(5000);
    // Asked again before its backoff ends: not submitted at all.
    expect((await job()).submissions).toEqual([]);
    const listed = JSON.parse((await get('/v1/ledger/witnesses')).text) as { witnesses: { state: string }[] };
    expect(listed.witnesses[0]!.state).toBe('failing');

    await liveDay('2026-11-21');
    expect((await get('/v1/stats-seals/2026-11-21')).status).toBe(200);

    // Back up on another port, with its key and state; the platform has lost its record of what the witness holds
    // (0): the witness answers 409 with the size it holds, and the platform goes on from there.
    useWitness(await startWitness({ name: W1, ...witnessFiles, logVkeys: [logVkey], now: p.clock.now() }));
    await p.database.db.query('UPDATE ledger_witnesses SET cosigned_size = 0');
    p.clock.set(new Date(p.clock.now().getTime() + 3_600_000));
    const statuses: number[] = [];
    const up = await job(recordingTransport(statuses));
    expect(statuses).toEqual([409, 200]);
    expect(up.submissions).toEqual([{ witness: W1, result: { outcome: 'cosigned', size: 4 } }]);
    expect(up.anchored).toEqual([3, 4]);
    // Block 3 is anchored by checkpoint 4: its own checkpoint was never cosigned.
    expect(await blockStatus('2026-11-20')).toMatchObject({ status: 'anchored', anchored_by: 4 });
    expect(parseNote((await get('/v1/ledger/checkpoints/3')).text)!.signatures).toHaveLength(1);
  }, 60_000);
});

describe('verifiers with pinned witness keys', () => {
  test('the verify CLI checks the cosignatures; --require-anchored passes on the honest ledger', async () => {
    // The seal of the 19th is in the block of the 20th (height 3), anchored by checkpoint 4.
    const report = await verifySeal({
      day: '2026-11-19',
      source: httpSource(verifyUrl),
      rootPem,
      witnesses: [parseVkey(witness.vkey)],
      requireAnchored: 1,
    });
    expect(failures(report)).toEqual([]);
    expect(text(report)).toContain(
      `ok ledger anchoring of block 2026-11-20: checkpoint 4 (root = digest of block 4, at or above height 3) is cosigned by 1 pinned witness(es): ${W1}`,
    );
  });

  test('the CLI takes --witness name=vkey and --require-anchored n; refuses bad keys and a quorum without witnesses', async () => {
    const cli = async (...args: string[]) => {
      try {
        const { stdout, stderr } = await run('node', [...CLI, ...args], {
          cwd: REPO,
          env: { ...process.env, CI: '1' },
        });
        return { code: 0, stdout, stderr };
      } catch (error) {
        const e = error as { code: number; stdout: string; stderr: string };
        return { code: e.code, stdout: e.stdout, stderr: e.stderr };
      }
    };
    const rootFile = path.join(p.dataDir, 'root.pem');
    await (await import('node:fs/promises')).writeFile(rootFile, rootPem);
    const seal = ['seal', '2026-11-19', '--from', verifyUrl, '--root', rootFile];
    const ok = await cli(...seal, '--witness', `${W1}=${witness.vkey}`, '--require-anchored', '1');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^ok +ledger anchoring of block 2026-11-20: checkpoint 4/m);
    expect(await cli(...seal, '--require-anchored', '1')).toMatchObject({
      code: 2,
      stderr: 'ooh-verify: --require-anchored needs the witnesses you trust: --witness <vkey> (repeatable)\n',
    });
    expect(await cli(...seal, '--witness', 'witness.test/w1+0000+AAAA')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(
        /^ooh-verify: --witness witness\.test\/w1\+0000\+AAAA: the key ID is 8 lowercase hex digits/,
      ),
    });
    expect(await cli(...seal, '--witness', logVkey)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('not a cosignature key (type 0x04)'),
    });
    expect(await cli(...seal, '--witness', witness.vkey, '--require-anchored', '2')).toMatchObject({
      code: 2,
    });
  }, 60_000);

  test('the browser verifier (@ooh/verify) finds the same checkpoint and quorum', async () => {
    const pinned = await parseVkeyInBrowser(witness.vkey);
    expect(pinned).not.toBeNull();
    const block = await blockStatus('2026-11-20');
    const blockDoc = JSON.parse((await get('/v1/ledger/blocks/2026-11-20')).text) as { digest: string };
    const source = {
      checkpoint: async (url: string) => {
        const res = await get(url);
        return res.status === 200 ? res.text : null;
      },
      block: async (day: string) => {
        const res = await get(`/v1/ledger/blocks/${day}`);
        return res.status === 200 ? JSON.parse(res.text) : null;
      },
    };
    const target = {
      day: '2026-11-20',
      block_height: block.block_height,
      digest: blockDoc.digest,
      anchored_by: null,
    };
    // Without the anchored_by hint it walks from the newest checkpoint down to the block.
    expect(await verifyAnchoring(target, [pinned!], 1, source)).toEqual({
      state: 'ok',
      reason: 'anchored',
      size: 4,
      witnesses: [W1],
    });
    expect(await verifyAnchoring(target, [pinned!], 2, source)).toEqual({
      state: 'failed',
      reason: 'not_anchored',
    });
    expect(await verifyAnchoring(target, [], 1, source)).toEqual({
      state: 'unknown',
      reason: 'no_witnesses',
    });
  });
});

describe('a split view', () => {
  test('two heads of the same size cannot both carry the witness cosignature', async () => {
    const honest = (await get('/v1/ledger/checkpoint')).text;
    const honestNote = parseNote(honest)!;
    const size = parseCheckpoint(honestNote.text)!.size;
    // The platform (it holds the ledger key) signs a second head of the same size for someone else.
    const key = await loadLedgerKey(p.ctx);
    const forkText = checkpointText({ origin: ORIGIN, size, rootHash: randomBytes(32) });
    const fork = formatNote({ text: forkText, signatures: [signNote(forkText, ORIGIN, key.key)] });
    // Same size as the witness holds, another root: 422. From the size before it: 409, the witness holds `size`.
    const sameSize = await fetch(`${witness.url}/add-checkpoint`, {
      method: 'POST',
      body: `old ${size}\n\n${fork}`,
    });
    expect(sameSize.status).toBe(422);
    const older = await fetch(`${witness.url}/add-checkpoint`, {
      method: 'POST',
      body: `old ${size - 1}\n${Buffer.from('{}').toString('base64')}\n\n${fork}`,
    });
    expect(older.status).toBe(409);
    expect(older.headers.get('content-type')).toBe('text/x.tlog.size');
    expect(await older.text()).toBe(`${size}\n`);

    // Verifier A is shown the honest head, verifier B the fork with A's cosignature line copied onto it.
    // @ooh/verify, the one verifier of the CLI and the browser.
    const forged = `${fork}${honestNote.signatures[1]!.line}`;
    const browserKey = (await parseVkeyInBrowser(witness.vkey))!;
    const inBrowser = checkInBrowser;
    expect(await inBrowser(honest, [browserKey])).toMatchObject({ invalid: [], cosigned: [{ name: W1 }] });
    expect(await inBrowser(forged, [browserKey])).toMatchObject({ invalid: [W1], cosigned: [] });
  });
});

describe('the background job', () => {
  test('the ledger feature runs it on its own, on short timers: a new block is checkpointed, cosigned and anchored', async () => {
    await liveDay('2026-11-22');
    const stop = await createLedgerFeature({ rateLimit: UNLIMITED, witnessIntervalMs: 20 }).start!(p.ctx);
    try {
      await expect
        .poll(async () => (await blockStatus('2026-11-22')).status, { timeout: 20_000, interval: 100 })
        .toBe('anchored');
    } finally {
      await stop();
    }
    expect(await blockStatus('2026-11-22')).toMatchObject({ block_height: 5, anchored_by: 5 });
  }, 60_000);
});

describe('a platform that rewrites an earlier day', () => {
  test('recomputes the chain; the witness refuses to cosign it, and the verifier with pinned witnesses refuses the seal', async () => {
    const db = p.database.db;
    // Before: the seal of the 19th passes with the witness pinned.
    const pinned = [parseVkey(witness.vkey)];
    // The rewrite: an approval slipped into the 19th, every block from the 19th digested again, the checkpoints
    // and cosignatures of the old history dropped, and the platform pretending the witness never saw it.
    await withTransaction(db, async (client) => {
      await client.query('DELETE FROM ledger_cosignatures WHERE size >= 2');
      await client.query('DELETE FROM ledger_checkpoints WHERE size >= 2');
      await client.query(`DELETE FROM ledger_block_leaves WHERE day >= '2026-11-19'`);
      await client.query(`DELETE FROM ledger_blocks WHERE day >= '2026-11-19'`);
      const at = new Date('2026-11-19T07:00:00Z');
      await recordLedgerLeaf(
        client,
        { kind: 'approval', approvalNumber: 'APR-2026-999999', manifestSha256: 'd'.repeat(64), signedAt: at },
        at,
      );
      await client.query(
        'UPDATE ledger_witnesses SET cosigned_size = 0, failures = 0, next_attempt_at = NULL',
      );
    });
    await digestLedgerUpTo(p.ctx, '2026-11-22', { wait: true });
    await liveDay('2026-11-23');

    // Without pinned witnesses nothing shows: the rewritten chain is consistent in itself.
    const unpinned = await verifySeal({ day: '2026-11-19', source: httpSource(verifyUrl), rootPem });
    expect(failures(unpinned)).toEqual([]);

    // The witness: 409 (it holds size 5, not 0), then the rewritten blocks from size 5 do not extend what it holds: 422.
    const statuses: number[] = [];
    const rewritten = await job(recordingTransport(statuses));
    expect(statuses).toEqual([409, 422]);
    expect(rewritten.submissions).toEqual([
      {
        witness: W1,
        result: {
          outcome: 'failed',
          error: 'HTTP 422: block 6 does not extend the checkpoint of size 5 this witness holds',
        },
      },
    ]);
    expect(rewritten.anchored).toEqual([]);
    expect(await blockStatus('2026-11-19')).toMatchObject({ status: 'digested', anchored_by: null });

    const refused = await verifySeal({
      day: '2026-11-19',
      source: httpSource(verifyUrl),
      rootPem,
      witnesses: pinned,
      requireAnchored: 1,
    });
    expect(refused.ok).toBe(false);
    expect(failures(refused)).toEqual([
      'ledger anchoring of block 2026-11-20: no checkpoint at or above height 3 carries 1 cosignature(s) of the pinned witnesses',
    ]);
    // Serving the old, cosigned checkpoint again does not help: its root is not the rewritten block's digest.
    const witnessView = await fetch(
      `${witness.url}/${(await import('node:crypto')).createHash('sha256').update(ORIGIN).digest('hex')}/checkpoint`,
    );
    const oldNote = await witnessView.text();
    const stale = await checkInBrowser(oldNote, [(await parseVkeyInBrowser(witness.vkey))!]);
    expect(stale).toMatchObject({ cosigned: [{ name: W1 }] });
    const newDigest4 = (JSON.parse((await get('/v1/ledger/blocks/2026-11-21')).text) as { digest: string })
      .digest;
    expect(parseCheckpoint(parseNote(oldNote)!.text)!.root).not.toBe(newDigest4);
  }, 60_000);
});
