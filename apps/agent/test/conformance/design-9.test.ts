import { createPublicKey, X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Hex } from '@ooh/crypto';
import { addDays, almatyDate, almatyDayStart, LIMITS } from '@ooh/protocol';
import { MockAgent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CorrectedClock } from '../../src/clock.js';
import { FileCredentials } from '../../src/identity/file-credentials.js';
import { AgentState } from '../../src/log/agent-state.js';
import { type Database, openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import type { WireStatusRecord } from '../../src/log/records.js';
import { memoryLogger } from '../../src/logger.js';
import { verifyEnvelope } from '../../src/media/envelope.js';
import { MediaLibrary } from '../../src/media/library.js';
import { RevocationStore } from '../../src/media/revocations.js';
import { createHttpClient } from '../../src/net/http-client.js';
import { RenewalManager } from '../../src/renewal/renewal.js';
import { BatchStore } from '../../src/shipping/batch-store.js';
import { ALERT_STATE_KEY, Shipper } from '../../src/shipping/shipper.js';
import { setUpAgent } from '../helpers/agent-setup.js';
import { manifestFor, sha256Of, signedRevocations, writeMedia } from '../helpers/media.js';
import { createTestPki, issueDeviceCertificate, signEnvelope, type TestPki } from '../helpers/pki.js';
import {
  type AgentTestPlatform,
  FaultyHttp,
  issuedForDaysLeft,
  startAgentTestPlatform,
} from '../helpers/platform.js';
import { createShippingFixture, logPlays, type ShippingFixture } from '../helpers/shipping-fixture.js';
import { ManualClock, tempDir } from '../helpers/temp.js';

/*
 * DESIGN.md §9 ("The agent on the player"), with §4 and §5 where §9 leads there, and the spec's record table,
 * batch rules and Limits, claim by claim. Each test checks a claim no earlier test checks exactly; the claims
 * already checked are named here with the test that checks them:
 *
 * - envelopes: another root, an altered valid_until, garbage, a non-manifest body, NO_SIGNATURE, HASH_MISMATCH,
 *   REVOKED, EXPIRED_APPROVAL (Almaty days, inclusive), before valid_from: test/media/envelope.test.ts;
 *   a revocation list signed by another root, altered, older: test/media/revocations.test.ts.
 * - play log: WAL and synchronous FULL, seq from 1 across kinds, no seq reused after a reopen, a refused play uses up
 *   no seq: test/log/play-log.test.ts; a crash (SIGKILL while logging and shipping) reuses no seq and loses no
 *   acknowledged record: test/power-cut.test.ts.
 * - batches: at most 1000 events, seq order, prev_sha256 '' then the previous body's hash, the same bytes until
 *   answered: test/shipping/batches.test.ts; resent byte for byte after a lost answer or a 5xx, 429 waits
 *   Retry-After (seconds, HTTP date) and resends the same bytes, stale_request re-signs under the same batch_seq
 *   (also at the first send after a restart), 409 batch_conflict stops run(), the Date header corrects the clock:
 *   test/shipping/shipper.test.ts.
 * - renewal: at most hourly checks, a random point drawn in the last 30 days and kept, the new pair beside the old
 *   (key 0600), the same CSR after a lost answer, promotion on the first call with the new pair:
 *   test/renewal/renewal.test.ts.
 *
 * Four claims failed here before the agent was changed: a revocation list naming an approval did not make it
 * unplayable while the player's clock was before its revoked_at; an approval stayed playable after the Almaty
 * midnight ending it until the next recheck; a tamper switch's wakes cut short the pause after an answered batch
 * (past the spec's rate); the old certificate was offered after old_valid_until (401 device_unauthorized, a
 * terminal answer).
 */

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const noRevocations = { isRevoked: () => false };

describe('envelopes (DESIGN.md §4, §9)', () => {
  let pki: TestPki;
  let otherPki: TestPki;
  const media = 'the approved bytes';
  const sha = sha256Of(media);
  const now = new Date();

  beforeAll(async () => {
    [pki, otherPki] = await Promise.all([createTestPki(), createTestPki()]);
  });

  function check(envelope: unknown, mediaSha256 = sha) {
    return verifyEnvelope({
      envelopeText: typeof envelope === 'string' ? envelope : JSON.stringify(envelope),
      mediaSha256,
      trustedRootsPem: [pki.authorityRootPem],
      now,
      structure: 'ALM-0001',
      revocations: noRevocations,
    });
  }

  it('an envelope whose v is not 1 is not a verified envelope: BAD_SIGNATURE, never playable', async () => {
    const signed = await signEnvelope(pki, manifestFor(sha));
    expect((await check(signed)).status).toBe('playable');
    for (const v of [2, 0, '1', null]) {
      expect(await check({ ...signed, v })).toMatchObject({ status: 'refused', code: 'BAD_SIGNATURE' });
    }
    const { v: _v, ...withoutV } = signed;
    expect(await check(withoutV)).toMatchObject({ status: 'refused', code: 'BAD_SIGNATURE' });
  });

  it("signed by another key: a chain that copies the authority's names, to another root", async () => {
    // createTestPki names every certificate alike (CN=Test Authority Root, ... Issuing, ... Approval Signer): the other
    // PKI's issuing CA and signer travel in the CMS and lead by name to the pinned root, whose key signed neither.
    expect(new X509Certificate(otherPki.authorityRootPem).subject).toBe(
      new X509Certificate(pki.authorityRootPem).subject,
    );
    expect(await check(await signEnvelope(otherPki, manifestFor(sha)))).toMatchObject({
      status: 'refused',
      code: 'BAD_SIGNATURE',
    });
  });

  it('a genuine envelope whose body was edited to name another file does not make that file playable', async () => {
    const other = 'bytes nobody approved';
    const signed = await signEnvelope(pki, manifestFor(sha));
    const moved = { ...signed, body: { ...(signed.body as object), media_sha256: sha256Of(other) } };
    expect(await check(moved, sha256Of(other))).toMatchObject({ status: 'refused', code: 'BAD_SIGNATURE' });
    // The genuine envelope beside the other file: the hashes differ.
    expect(await check(signed, sha256Of(other))).toMatchObject({ status: 'refused', code: 'HASH_MISMATCH' });
  });
});

describe('the media library: playable files and reject records (DESIGN.md §9)', () => {
  let pki: TestPki;
  let otherPki: TestPki;
  let dir: ReturnType<typeof tempDir>;
  let db: Database;
  let log: PlayLog;
  let library: MediaLibrary | null;

  beforeAll(async () => {
    [pki, otherPki] = await Promise.all([createTestPki(), createTestPki()]);
  });
  beforeEach(() => {
    dir = tempDir();
    db = openAgentDatabase(join(dir.path, 'agent.sqlite'));
    log = new PlayLog(db);
    library = null;
  });
  afterEach(async () => {
    await library?.stop();
    db.close();
    dir.cleanup();
  });

  const mediaDir = () => join(dir.path, 'media');

  function create(clock: { now(): Date }, revocations: { isRevoked(approvalNumber: string): boolean }) {
    library = new MediaLibrary({
      mediaDir: mediaDir(),
      structure: 'ALM-0001',
      trustedRootsPem: [pki.authorityRootPem],
      revocations,
      clock,
      log,
      logger: memoryLogger(),
      stabilityMs: 50,
      sidecarGraceMs: 0,
    });
    return library;
  }

  function rejects(): WireStatusRecord[] {
    return log
      .records()
      .map((r) => r.record)
      .filter((r): r is WireStatusRecord => r.kind === 'reject');
  }

  const settle = () => new Promise((resolve) => setTimeout(resolve, 120));

  it('logs one reject record per refused file with the code DESIGN.md names, and none for an approval not valid yet', async () => {
    const now = new Date();
    const today = almatyDate(now);
    const revocations = new RevocationStore({
      cachePath: join(dir.path, 'revocations.json'),
      trustedRootsPem: [pki.authorityRootPem],
      clock: { now: () => now },
      logger: memoryLogger(),
    });
    const list = await signedRevocations(pki, 1, [
      { approval_number: 'APP-REVOKED', revoked_at: new Date(now.getTime() - HOUR_MS).toISOString() },
    ]);
    expect(await revocations.offer(JSON.stringify(list))).toBe('updated');

    await writeMedia(pki, mediaDir(), 'ok.png', 'ok');
    await writeMedia(pki, mediaDir(), 'unsigned.png', 'unsigned', { sidecar: false });
    await writeMedia(otherPki, mediaDir(), 'foreign.png', 'foreign');
    await writeMedia(pki, mediaDir(), 'mismatch.png', 'actual', {
      manifest: { media_sha256: sha256Of('x') },
    });
    await writeMedia(pki, mediaDir(), 'expired.png', 'expired', {
      manifest: { valid_from: addDays(today, -10), valid_until: addDays(today, -1) },
    });
    await writeMedia(pki, mediaDir(), 'revoked.png', 'revoked', {
      manifest: { approval_number: 'APP-REVOKED' },
    });
    await writeMedia(pki, mediaDir(), 'later.png', 'later', {
      manifest: { valid_from: addDays(today, 1), valid_until: addDays(today, 10) },
    });
    await settle();
    const lib = create({ now: () => now }, revocations);
    await lib.start();

    expect(lib.playable().map((item) => item.relativePath)).toEqual(['ok.png']);
    const byFile = new Map(rejects().map((r) => [(r.detail as { file: string }).file, r]));
    expect(Object.fromEntries([...byFile].map(([file, r]) => [file, r.code]))).toEqual({
      'unsigned.png': 'NO_SIGNATURE',
      'foreign.png': 'BAD_SIGNATURE',
      'mismatch.png': 'HASH_MISMATCH',
      'expired.png': 'EXPIRED_APPROVAL',
      'revoked.png': 'REVOKED',
    });
    for (const record of byFile.values()) {
      // spec record table: kind, seq, at (RFC 3339 with milliseconds), code, detail.
      expect(Object.keys(record)).toEqual(['kind', 'seq', 'at', 'code', 'detail']);
      expect(record.at).toBe(now.toISOString());
    }
    expect(
      rejects()
        .map((r) => r.seq)
        .sort((a, b) => a - b),
    ).toEqual([1, 2, 3, 4, 5]);
    expect(lib.files().find((f) => f.relativePath === 'later.png')).toMatchObject({
      status: 'not_yet_valid',
    });
  });

  it('an approval is not playable after Almaty midnight of its valid_until, even before the next recheck', async () => {
    const today = almatyDate(new Date());
    const midnight = almatyDayStart(addDays(today, 1));
    const clock = new ManualClock(new Date(midnight.getTime() - 30_000));
    await writeMedia(pki, mediaDir(), 'last-day.png', 'last day', {
      manifest: { valid_from: today, valid_until: today },
    });
    await settle();
    const lib = create(clock, noRevocations);
    await lib.start();
    expect(lib.playable().map((item) => item.relativePath)).toEqual(['last-day.png']);
    const item = lib.playable()[0]!;
    expect(lib.isPlayable(item.relativePath, item.sha256)).toBe(true);
    // Midnight in Almaty: the approval's last day is over. The periodic recheck (media_recheck_ms) has not run yet.
    clock.set(new Date(midnight.getTime() + 1000));
    expect(lib.playable()).toEqual([]);
    expect(lib.isPlayable(item.relativePath, item.sha256)).toBe(false);
    // The recheck then logs the reject.
    await lib.reevaluateAll();
    expect(rejects().map((r) => r.code)).toEqual(['EXPIRED_APPROVAL']);
  });

  it('a revocation list that names the approval makes it unplayable, whatever revoked_at says against a slow clock', async () => {
    // The agent's clock runs ten minutes behind the platform's (not synced yet); the platform revoked the approval a
    // minute ago by its own clock, and published the list.
    const platformNow = Date.now();
    const agentClock = { now: () => new Date(platformNow - 10 * 60_000) };
    const revocations = new RevocationStore({
      cachePath: join(dir.path, 'revocations.json'),
      trustedRootsPem: [pki.authorityRootPem],
      clock: agentClock,
      logger: memoryLogger(),
    });
    await writeMedia(pki, mediaDir(), 'ad.png', 'ad', { manifest: { approval_number: 'APP-R' } });
    await settle();
    const lib = create(agentClock, revocations);
    revocations.onChange(() => void lib.reevaluateAll());
    await lib.start();
    expect(lib.playable()).toHaveLength(1);
    const list = await signedRevocations(pki, 2, [
      { approval_number: 'APP-R', revoked_at: new Date(platformNow - 60_000).toISOString() },
    ]);
    expect(await revocations.offer(JSON.stringify(list))).toBe('updated');
    await lib.reevaluateAll();
    expect(revocations.isRevoked('APP-R')).toBe(true);
    expect(lib.playable()).toEqual([]);
    expect(rejects().map((r) => r.code)).toEqual(['REVOKED']);
  });

  it('a revocation list that does not verify (another root, wrong v, altered) changes nothing: the revoked file stays refused', async () => {
    const now = new Date();
    const revocations = new RevocationStore({
      cachePath: join(dir.path, 'revocations.json'),
      trustedRootsPem: [pki.authorityRootPem],
      clock: { now: () => now },
      logger: memoryLogger(),
    });
    const revokedAt = new Date(now.getTime() - HOUR_MS).toISOString();
    expect(
      await revocations.offer(
        JSON.stringify(
          await signedRevocations(pki, 3, [{ approval_number: 'APP-R', revoked_at: revokedAt }]),
        ),
      ),
    ).toBe('updated');
    await writeMedia(pki, mediaDir(), 'ad.png', 'ad', { manifest: { approval_number: 'APP-R' } });
    await settle();
    const lib = create({ now: () => now }, revocations);
    revocations.onChange(() => void lib.reevaluateAll());
    await lib.start();
    expect(lib.playable()).toEqual([]);

    // Newer versions that name nothing, none of which verifies.
    const foreign = await signedRevocations(otherPki, 9, []);
    const genuine = await signedRevocations(pki, 4, [{ approval_number: 'APP-R', revoked_at: revokedAt }]);
    const emptied = { ...genuine, body: { ...(genuine.body as object), version: 10, revoked: [] } };
    const wrongV = { ...(await signedRevocations(pki, 11, [])), v: 2 };
    for (const text of [foreign, emptied, wrongV].map((d) => JSON.stringify(d))) {
      expect(await revocations.offer(text)).toBe('invalid');
    }
    expect(revocations.version).toBe(3);
    await lib.reevaluateAll();
    expect(lib.playable()).toEqual([]);
    expect(lib.files()).toEqual([expect.objectContaining({ status: 'refused', code: 'REVOKED' })]);
  });
});

describe('the play log (DESIGN.md §9: the next seq in the transaction that stores the record)', () => {
  let dir: ReturnType<typeof tempDir>;
  let db: Database;
  let log: PlayLog;

  beforeEach(() => {
    dir = tempDir();
    db = openAgentDatabase(join(dir.path, 'agent.sqlite'));
    log = new PlayLog(db);
  });
  afterEach(() => {
    db.close();
    dir.cleanup();
  });

  const at = new Date('2026-11-21T09:00:00.000Z');

  it('a store that fails takes back its seq: the next record gets the number the failed one would have had', () => {
    expect(log.appendStatus({ kind: 'tamper', at, detail: { state: 'closed' } }).seq).toBe(1);
    // The INSERT itself fails after the number was taken (a full disk, an I/O error): a trigger stands for it.
    db.exec(`CREATE TEMP TRIGGER refuse_mode BEFORE INSERT ON records WHEN NEW.kind = 'mode_change'
               BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`);
    expect(() =>
      log.appendStatus({ kind: 'mode_change', at, detail: { from: 'normal', to: 'offline' } }),
    ).toThrow(/disk I\/O error/);
    // A batch of appends in one transaction that fails after two of them took numbers.
    expect(() =>
      log.inTransaction(() => {
        log.appendStatus({ kind: 'tamper', at, detail: { state: 'open' } });
        log.appendStatus({ kind: 'reject', at, code: 'NO_SIGNATURE' });
        throw new Error('power cut');
      }),
    ).toThrow('power cut');
    db.exec('DROP TRIGGER refuse_mode');
    const next = log.appendStatus({ kind: 'tamper', at, detail: { state: 'open' } });
    expect(next.seq).toBe(2);
    expect(log.records().map((r) => [r.seq, r.record.seq])).toEqual([
      [1, 1],
      [2, 2],
    ]);
    expect(log.stats().lastSeq).toBe(2);
  });
});

describe('batches (DESIGN.md §9, spec Limits)', () => {
  let dir: ReturnType<typeof tempDir>;
  let fx: ShippingFixture;

  beforeEach(() => {
    dir = tempDir();
    fx = createShippingFixture({ dir: dir.path, agentsUrl: 'http://127.0.0.1:9' });
  });
  afterEach(async () => {
    await fx.close();
    dir.cleanup();
  });

  it('a body is at most 1 MB (1 000 000 bytes) by default and holds as many records as fit', () => {
    // Records of about 3 kB each (a detail near the 4 kB bound): 1000 of them would be 3 MB.
    const padding = 'x'.repeat(3000);
    fx.log.inTransaction(() => {
      for (let i = 0; i < 1000; i++) {
        fx.log.appendStatus({ kind: 'tamper', at: new Date(), detail: { state: 'open', note: padding } });
      }
    });
    const now = new Date();
    const first = fx.batches.pendingOrCut({ deviceId: fx.deviceId, now })!;
    expect(first.body.length).toBeLessThanOrEqual(LIMITS.telemetryBodyMaxBytes);
    const events = JSON.parse(first.body.toString()).events as { seq: number }[];
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: first.eventCount }, (_, i) => i + 1));
    // The next record would not have fitted.
    const nextRecord = fx.log.records(first.lastSeq, 1)[0]!;
    expect(first.body.length + 1 + Buffer.byteLength(nextRecord.json)).toBeGreaterThan(
      LIMITS.telemetryBodyMaxBytes,
    );
    fx.batches.storeAnswer(first.batchSeq, '{}', now);
    const second = fx.batches.pendingOrCut({ deviceId: fx.deviceId, now })!;
    expect(second.firstSeq).toBe(first.lastSeq + 1);
    expect(JSON.parse(second.body.toString()).prev_sha256).toBe(sha256Hex(first.body));
  });
});

describe('shipping against a mocked platform (DESIGN.md §5, §9)', () => {
  let dir: ReturnType<typeof tempDir>;
  let mock: MockAgent;

  const answer = (batchSeq: number, received = 1) => ({
    batch_seq: batchSeq,
    received,
    accepted: received,
    duplicates: 0,
    refused: 0,
    flagged: 0,
    duplicate: false,
    items: [],
  });
  const batchSeqOf = (body: unknown): number =>
    JSON.parse(Buffer.from(body as Uint8Array).toString('utf8')).batch_seq as number;

  beforeEach(() => {
    dir = tempDir();
    mock = new MockAgent();
    mock.disableNetConnect();
  });
  afterEach(async () => {
    await mock.close();
    dir.cleanup();
  });

  it('never sends more than the spec allows on its own: a burst of 3 refilled one per 10 s, 10 a minute, however often it is woken', async () => {
    // Virtual time: the steady clock moves only by the shipper's own pauses. A tamper switch that flaps every second
    // of them logs a record and wakes the shipper (as AgentCore does on a tamper change).
    let steadyMs = 0;
    const base = Date.now();
    const sentAt: number[] = [];
    const controller = new AbortController();
    mock
      .get('http://platform.test')
      .intercept({ path: '/s/v1/telemetry', method: 'POST' })
      .reply((options) => {
        sentAt.push(steadyMs);
        // The spec's answer to this very batch: every record of it received (the agent checks that it fits).
        const sent = JSON.parse(Buffer.from(options.body as Uint8Array).toString('utf8')) as {
          events: unknown[];
        };
        return { statusCode: 200, data: answer(batchSeqOf(options.body), sent.events.length) };
      })
      .persist();
    let fx: ShippingFixture | null = null;
    fx = createShippingFixture({
      dir: dir.path,
      agentsUrl: 'http://platform.test',
      dispatcher: mock,
      overrides: {
        minIntervalMs: 10_000,
        idleIntervalMs: 60_000,
        clock: new CorrectedClock({ now: () => new Date(base + steadyMs) }, DAY_MS, 0, undefined, {
          monotonic: () => steadyMs,
        }),
        sleep: async (ms, signal) => {
          let waited = 0;
          while (waited < ms && !signal?.aborted) {
            const step = Math.min(1000, ms - waited);
            steadyMs += step;
            waited += step;
            fx!.log.appendStatus({
              kind: 'tamper',
              at: new Date(base + steadyMs),
              detail: { state: 'open' },
            });
            fx!.shipper.wake();
          }
          if (sentAt.length >= 15) controller.abort();
        },
      },
    });
    try {
      logPlays(fx.log, 1);
      await fx.shipper.run(controller.signal);
      expect(sentAt.length).toBeGreaterThanOrEqual(15);
      // spec: "429 for more than one batch every 10 seconds (burst of 3 allowed)": the platform's bucket.
      let tokens: number = LIMITS.agentBurst;
      let last = 0;
      for (const t of sentAt) {
        tokens = Math.min(LIMITS.agentBurst, tokens + (t - last) / (LIMITS.agentMinIntervalSeconds * 1000));
        last = t;
        tokens -= 1;
        expect(tokens).toBeGreaterThanOrEqual(-1e-9);
      }
      // spec: "10 batches a minute per device".
      for (const t of sentAt) {
        expect(sentAt.filter((u) => u >= t && u < t + 60_000).length).toBeLessThanOrEqual(
          LIMITS.agentBatchesPerMinute,
        );
      }
    } finally {
      await fx.close();
    }
  });

  it('backs off exponentially with jitter up to the cap and no further, resending the same bytes', async () => {
    const draws = [0, 1, 0.25, 0.75, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5];
    let i = 0;
    const fx = createShippingFixture({
      dir: dir.path,
      agentsUrl: 'http://127.0.0.1:9',
      overrides: { backoff: { baseMs: 1000, capMs: 20_000 }, random: () => draws[i++ % draws.length]! },
    });
    try {
      fx.http.down = true;
      logPlays(fx.log, 2);
      const delays: number[] = [];
      for (let n = 0; n < 10; n++) {
        const outcome = await fx.shipper.sendOnce();
        if (outcome.kind !== 'retry') throw new Error(`expected retry, got ${outcome.kind}`);
        delays.push(outcome.delayMs);
      }
      // Equal jitter: window 1 s, 2 s, 4 s, 8 s, 16 s, then the 20 s cap; half fixed, half drawn.
      expect(delays).toEqual([500, 2000, 2500, 7000, 12_000, 15_000, 15_000, 15_000, 15_000, 15_000]);
      expect(new Set(fx.http.exchanges.map((e) => e.bodySha256)).size).toBe(1);
      expect(fx.http.exchanges.every((e) => e.batchSeq === 1)).toBe(true);
    } finally {
      await fx.close();
    }
  });

  it('a batch not answered before a restart is resent byte for byte by the next agent', async () => {
    const pool = mock.get('http://platform.test');
    const bodies: Buffer[] = [];
    pool.intercept({ path: '/s/v1/telemetry', method: 'POST' }).reply((options) => {
      bodies.push(Buffer.from(options.body as Uint8Array));
      return { statusCode: 503, data: { code: 'service_unavailable' } };
    });
    pool.intercept({ path: '/s/v1/telemetry', method: 'POST' }).reply((options) => {
      bodies.push(Buffer.from(options.body as Uint8Array));
      return { statusCode: 200, data: answer(batchSeqOf(options.body), 3) };
    });
    const fx = createShippingFixture({ dir: dir.path, agentsUrl: 'http://platform.test', dispatcher: mock });
    try {
      logPlays(fx.log, 3);
      expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', batchSeq: 1 });
      // The agent restarts (a new Shipper on the same database), a while later.
      const restarted = new Shipper({
        batches: fx.batches,
        state: fx.state,
        http: fx.http,
        credentials: { signingKey: () => fx.keys.privateKey, tlsIdentity: () => null, confirm: () => {} },
        clock: new CorrectedClock({ now: () => new Date(Date.now() + 60_000) }, DAY_MS),
        deviceId: fx.deviceId,
        agentsUrl: 'http://platform.test',
        devicesUrl: 'http://platform.test',
        backoff: { baseMs: 1000, capMs: 60_000 },
        minIntervalMs: 0,
        idleIntervalMs: 50,
        logger: memoryLogger(),
      });
      expect(await restarted.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 1 });
      expect(bodies).toHaveLength(2);
      expect(bodies[1]!.equals(bodies[0]!)).toBe(true);
    } finally {
      await fx.close();
    }
  });

  it('stale_request: the re-signed body differs from the first only in ts, under the same batch_seq', async () => {
    const pool = mock.get('http://platform.test');
    const bodies: string[] = [];
    pool.intercept({ path: '/s/v1/telemetry', method: 'POST' }).reply((options) => {
      bodies.push(Buffer.from(options.body as Uint8Array).toString('utf8'));
      return { statusCode: 401, data: { code: 'stale_request' } };
    });
    pool.intercept({ path: '/s/v1/telemetry', method: 'POST' }).reply((options) => {
      bodies.push(Buffer.from(options.body as Uint8Array).toString('utf8'));
      return { statusCode: 200, data: answer(batchSeqOf(options.body), 2) };
    });
    let shiftMs = 0;
    const fx = createShippingFixture({
      dir: dir.path,
      agentsUrl: 'http://platform.test',
      dispatcher: mock,
      boardClock: { now: () => new Date(Date.now() + shiftMs) },
    });
    try {
      logPlays(fx.log, 2);
      expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'retry', reason: 'stale_request' });
      shiftMs = 5000;
      expect(await fx.shipper.sendOnce()).toMatchObject({ kind: 'answered', batchSeq: 1 });
      const [first, second] = bodies as [string, string];
      const tsOf = (body: string) => (JSON.parse(body) as { ts: string }).ts;
      expect(tsOf(second)).not.toBe(tsOf(first));
      expect(Date.parse(tsOf(second)) - Date.parse(tsOf(first))).toBeGreaterThanOrEqual(5000);
      // Byte for byte the same body but for the ts value.
      expect(second.replace(`"ts":"${tsOf(second)}"`, `"ts":"${tsOf(first)}"`)).toBe(first);
      // What the agent holds for the batch is the body that was answered.
      expect(fx.batches.get(1)!.body.toString('utf8')).toBe(second);
    } finally {
      await fx.close();
    }
  });

  it('401 device_unauthorized stops run() after one send and alerts, instead of looping', async () => {
    let sends = 0;
    mock
      .get('http://platform.test')
      .intercept({ path: '/s/v1/telemetry', method: 'POST' })
      .reply(() => {
        sends++;
        return { statusCode: 401, data: { code: 'device_unauthorized' } };
      })
      .persist();
    const sleeps: number[] = [];
    const fx = createShippingFixture({
      dir: dir.path,
      agentsUrl: 'http://platform.test',
      dispatcher: mock,
      overrides: { sleep: async (ms) => void sleeps.push(ms) },
    });
    try {
      logPlays(fx.log, 1);
      const controller = new AbortController();
      const ran = await Promise.race([
        fx.shipper.run(controller.signal).then(() => 'returned'),
        new Promise((resolve) => setTimeout(() => resolve('still running'), 5000)),
      ]);
      controller.abort();
      expect(ran).toBe('returned');
      expect(sends).toBe(1);
      expect(sleeps).toEqual([]);
      expect(fx.shipper.status()).toMatchObject({
        state: 'stopped',
        alert: { code: 'device_unauthorized', status: 401, batch_seq: 1 },
      });
      expect(fx.state.get(ALERT_STATE_KEY)).toMatchObject({ code: 'device_unauthorized' });
      expect(fx.logger.lines.some((line) => line.level === 'error')).toBe(true);
      expect(fx.log.stats().queueDepth).toBe(1);
    } finally {
      await fx.close();
    }
  });
});

describe('renewal: when it starts (DESIGN.md §9, spec renew rule 4)', () => {
  let pki: TestPki;
  let dir: ReturnType<typeof tempDir>;
  let db: Database;

  beforeAll(async () => {
    pki = await createTestPki();
  });
  beforeEach(() => {
    dir = tempDir();
    db = openAgentDatabase(join(dir.path, 'agent.sqlite'));
  });
  afterEach(() => {
    db.close();
    dir.cleanup();
  });

  /** A player holding a certificate that ends at `notAfter`, and a renewal manager whose calls all fail. */
  async function player(notAfter: Date, random: () => number, clock: ManualClock) {
    const paths = {
      keyFile: join(dir.path, 'device-key.pem'),
      certificateFile: join(dir.path, 'device-cert.pem'),
      caChainFile: join(dir.path, 'device-chain.pem'),
      dataDir: dir.path,
    };
    const { key } = FileCredentials.ensureKey(paths.keyFile);
    writeFileSync(
      paths.certificateFile,
      await issueDeviceCertificate(
        pki,
        'device-1',
        createPublicKey(key),
        new Date(notAfter.getTime() - 365 * DAY_MS),
        notAfter,
      ),
    );
    writeFileSync(paths.caChainFile, pki.deviceIssuing.certificatePem);
    const credentials = FileCredentials.load(paths);
    const http = new FaultyHttp(createHttpClient({}));
    http.down = true;
    const manager = new RenewalManager({
      credentials,
      http,
      devicesUrl: 'https://devices.invalid',
      deviceId: 'device-1',
      clock,
      state: new AgentState(db),
      logger: memoryLogger(),
      random,
    });
    return { manager, http };
  }

  it('not at 30 days left; from just under 30 days at a random point, never before now', async () => {
    // Whole seconds: a certificate's dates have no milliseconds.
    const now = new Date(Math.floor(Date.now() / 1000) * 1000);
    const clock = new ManualClock(now);
    const notAfter = new Date(now.getTime() + LIMITS.selfRenewDaysLeft * DAY_MS);
    const { manager, http } = await player(notAfter, () => 0.999_999, clock);
    expect(await manager.check()).toMatchObject({ result: 'not_due' });
    clock.set(new Date(now.getTime() + 1000));
    const planned = await manager.check();
    expect(planned.result).toBe('scheduled');
    const at = Date.parse((planned as { at: string }).at);
    expect(at).toBeGreaterThan(clock.now().getTime());
    expect(at).toBeLessThanOrEqual(notAfter.getTime() - 15 * DAY_MS);
    expect(http.exchanges).toEqual([]);
    // At the planned point (by the wall clock, read at each check) the call is made.
    clock.set(new Date(at));
    expect(await manager.check()).toMatchObject({ result: 'failed' });
    expect(http.exchanges).toEqual([expect.objectContaining({ path: '/d/v1/renew' })]);
  });

  it('a draw of 0 starts at once: the point is at or after now', async () => {
    const now = new Date();
    const clock = new ManualClock(now);
    const { manager, http } = await player(new Date(now.getTime() + 20 * DAY_MS), () => 0, clock);
    expect(await manager.check()).toMatchObject({ result: 'failed' });
    expect(http.exchanges).toHaveLength(1);
  });
});

describe('renewal against the platform: old_valid_until (spec renew rule 3, DESIGN.md §9)', () => {
  let pki: TestPki;
  let platform: AgentTestPlatform;
  let dir: ReturnType<typeof tempDir>;
  let db: Database | null = null;
  let http: FaultyHttp | null = null;

  beforeAll(async () => {
    pki = await createTestPki();
    platform = await startAgentTestPlatform();
  });
  afterAll(async () => {
    await platform?.close();
  });
  beforeEach(() => {
    dir = tempDir();
    platform.setClockOffset(0);
  });
  afterEach(async () => {
    await http?.close();
    db?.close();
    dir.cleanup();
    platform.setClockOffset(0);
  });

  it('after old_valid_until the old pair is never offered again: a failed call with the new pair does not fall back to it', async () => {
    const setup = await setUpAgent({
      dir: dir.path,
      platform,
      pki,
      certificate: { issuedAt: issuedForDaysLeft(10) },
    });
    db = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    http = new FaultyHttp(createHttpClient({ serverCaPem: platform.serverCaPem }));
    const credentials = FileCredentials.load({
      keyFile: setup.config.keyFile,
      certificateFile: setup.config.certificateFile,
      caChainFile: setup.config.caChainFile,
      dataDir: setup.config.dataDir,
    });
    const renewal = new RenewalManager({
      credentials,
      http,
      devicesUrl: setup.config.devicesUrl,
      deviceId: setup.deviceId,
      clock: { now: () => new Date() },
      state: new AgentState(db),
      logger: memoryLogger(),
      random: () => 0,
    });
    expect(await renewal.check()).toMatchObject({ result: 'renewed' });
    const state = credentials.renewalState;
    if (state?.state !== 'issued') throw new Error('expected an issued renewal');
    const oldValidUntil = Date.parse(state.old_valid_until);
    // spec: "old_valid_until ... (24 hours)"; the platform makes it at most the old certificate's NotAfter.
    expect(Math.abs(oldValidUntil - (Date.now() + DAY_MS))).toBeLessThan(60_000);
    const oldSerial = credentials.certificate!.serialHex;
    const newSerial = credentials.nextCertificate!.serialHex;

    // Before old_valid_until both pairs serve, the new one first; a call with the old one promotes nothing.
    const before = new Date(oldValidUntil - 60_000);
    expect(credentials.tlsIdentity(before, 0)!.id).toBe(newSerial);
    expect(credentials.tlsIdentity(before, 1)!.id).toBe(oldSerial);
    credentials.confirm(credentials.tlsIdentity(before, 1));
    expect(credentials.renewalState?.state).toBe('issued');
    // After it, only the new pair.
    const after = new Date(oldValidUntil + 60_000);
    expect([0, 1, 2, 3].map((attempt) => credentials.tlsIdentity(after, attempt)!.id)).toEqual([
      newSerial,
      newSerial,
      newSerial,
      newSerial,
    ]);

    // The consequence on the wire: a day and an hour later on both clocks, the first call with the new pair fails
    // (a proxy's 503); the next must not go with the old certificate, which the platform refuses for good
    // (401 device_unauthorized: a terminal answer).
    const laterMs = DAY_MS + HOUR_MS;
    platform.setClockOffset(laterMs);
    const clock = new CorrectedClock({ now: () => new Date(Date.now() + laterMs) }, DAY_MS);
    const state2 = new AgentState(db);
    const shipper = new Shipper({
      batches: new BatchStore(db),
      state: state2,
      http,
      credentials,
      clock,
      deviceId: setup.deviceId,
      agentsUrl: setup.config.agentsUrl,
      devicesUrl: setup.config.devicesUrl,
      backoff: { baseMs: 1000, capMs: 60_000 },
      minIntervalMs: 0,
      idleIntervalMs: 50,
      logger: memoryLogger(),
      random: () => 0.5,
    });
    logPlays(new PlayLog(db), 1, clock.now());
    http.exchanges.length = 0;
    http.failNext(1, 503, 'service_unavailable');
    expect(await shipper.sendOnce()).toMatchObject({ kind: 'retry' });
    const second = await shipper.sendOnce();
    expect(http.exchanges.map((e) => [e.path, e.status])).toEqual([
      ['/d/v1/telemetry', 503],
      ['/d/v1/telemetry', 200],
    ]);
    expect(second).toMatchObject({ kind: 'answered', batchSeq: 1, channel: 'certificate' });
    // That call with the new pair promoted it.
    expect(credentials.renewalState).toBeNull();
    expect(credentials.certificate!.serialHex).toBe(newSerial);
    expect(await platform.plays(setup.deviceId)).toBe(1);
  });
});
