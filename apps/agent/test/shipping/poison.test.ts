import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../../../platform/test/support/platform.js';
import type { SendOutcome } from '../../src/shipping/shipper.js';
import { MAX_SET_ASIDE_WITHOUT_PROGRESS } from '../../src/shipping/shipper.js';
import { createShippingFixture, type ShippingFixture } from '../helpers/shipping-fixture.js';
import { SHA_A, tempDir } from '../helpers/temp.js';

/*
 * Issue "Trust under attack", item 4: "The agent: a batch answered 5xx again and again is retried with backoff but
 * never blocks the batches behind it forever; `agent status` and the fleet page show a device that is stuck and why."
 * Against the real platform (its four hosts built as in production, the agents host listening on 127.0.0.1, its own
 * PostgreSQL database). Faults are the database's: a constraint the platform does not know refuses one record, every
 * record or every batch, so the platform answers 500 as it would for a record it cannot store.
 */

let p: TestPlatform;
let agentsUrl: string;
let structure: { id: string; code: string };

beforeAll(async () => {
  p = await startTestPlatform({ now: new Date(Math.floor(Date.now() / 1000) * 1000) });
  await p.servers.agents.listen({ host: '127.0.0.1', port: 0 });
  agentsUrl = `http://127.0.0.1:${(p.servers.agents.server.address() as AddressInfo).port}`;
  const operator = await createOrganisation(p, 'operator', ['console:fleet']);
  structure = await createStructure(p, operator.id);
});
afterAll(async () => {
  await p?.close();
});

let dir: ReturnType<typeof tempDir>;
let fx: ShippingFixture;
let deviceId: string;

/** A device enrolled on the platform, and the agent's shipping for it (batches of at most 8 records). */
async function enrolledAgent(url = agentsUrl): Promise<void> {
  // Each test starts at the real time (the steps of an earlier one moved the platform's clock on).
  p.clock.set(new Date(Math.floor(Date.now() / 1000) * 1000));
  const keys = generateEs256KeyPair();
  const res = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/devices', {
    structure_id: structure.id,
    public_key: exportPublicKeySpki(keys.publicKey),
  });
  expect(res.statusCode, res.body).toBe(201);
  deviceId = res.json<{ device_id: string }>().device_id;
  fx = createShippingFixture({ dir: dir.path, agentsUrl: url, deviceId, keys, overrides: { maxEvents: 8 } });
}

beforeEach(() => {
  dir = tempDir();
});
afterEach(async () => {
  await fx?.close();
  dir.cleanup();
});

let plays = 0;
function logPlay(playId = `play-${++plays}`): void {
  const end = new Date();
  fx.log.appendPlay({
    playId,
    approvalNumber: 'APP-2026-000001',
    mediaSha256: SHA_A,
    start: new Date(end.getTime() - 2000),
    end,
    structure: structure.code,
    screenPower: 'on',
  });
}

/** One shipping step, the platform's clock 20 s on (its rate limit: a batch every 10 s, a burst of 3). */
async function step(): Promise<SendOutcome> {
  p.clock.set(new Date(p.clock.now().getTime() + 20_000));
  return fx.shipper.sendOnce();
}

/** Steps until there is nothing to send (or `max` steps). */
async function drain(max = 80): Promise<SendOutcome[]> {
  const outcomes: SendOutcome[] = [];
  for (let i = 0; i < max; i++) {
    const outcome = await step();
    outcomes.push(outcome);
    if (outcome.kind === 'idle') break;
  }
  return outcomes;
}

async function fault(sql: string): Promise<() => Promise<void>> {
  const name = `fault_${Math.random().toString(36).slice(2, 8)}`;
  const [table, check] = sql.split(' CHECK ') as [string, string];
  await p.database.db.query(`ALTER TABLE ${table} ADD CONSTRAINT ${name} CHECK ${check}`);
  return async () => {
    await p.database.db.query(`ALTER TABLE ${table} DROP CONSTRAINT IF EXISTS ${name}`);
  };
}

/** The seq of every record the platform stored for the device, batch after batch, in batch_seq order. */
async function storedSeqs(): Promise<number[]> {
  const { rows } = await p.database.db.query<{ body: Buffer }>(
    `SELECT body FROM pop_batches WHERE owner = $1 ORDER BY batch_seq`,
    [`device:${deviceId}`],
  );
  return rows.flatMap((r) =>
    (JSON.parse(r.body.toString('utf8')).events as { seq: number }[]).map((e) => e.seq),
  );
}

async function counted(): Promise<{ plays: number; highWater: number }> {
  const { rows } = await p.database.db.query<{ plays: number | null; high_water: number | null }>(
    `SELECT (SELECT sum(plays)::int FROM play_counts WHERE player_key = $1) AS plays,
            (SELECT high_water_seq FROM pop_players WHERE player_key = $1) AS high_water`,
    [`device:${deviceId}`],
  );
  return { plays: rows[0]?.plays ?? 0, highWater: rows[0]?.high_water ?? 0 };
}

async function fleetStuck(): Promise<unknown> {
  const res = await apiCall(p.servers.api, p.adminKey, 'GET', '/api/v1/console/devices');
  return res
    .json<{ items: { device_id: string; stuck: unknown }[] }>()
    .items.find((d) => d.device_id === deviceId)?.stuck;
}

async function until<T>(read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  for (let i = 0; ; i++) {
    const value = await read();
    if (check(value) || i >= 100) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('a record the platform cannot take', () => {
  it('is isolated by halving its batch, set aside and reported; every other record is counted once, in order', async () => {
    await enrolledAgent();
    for (let i = 0; i < 3; i++) logPlay();
    logPlay('poison-1');
    for (let i = 0; i < 4; i++) logPlay();
    const heal = await fault("pop_records CHECK (play_id IS NULL OR play_id NOT LIKE 'poison%')");
    try {
      // Three 5xx: resent as it is, with backoff; shown as stuck by the agent and in the fleet.
      const first = [await step(), await step()];
      expect(first).toMatchObject([
        { kind: 'retry', batchSeq: 1, reason: 'http 500 internal_error' },
        { kind: 'retry', batchSeq: 1, reason: 'http 500 internal_error' },
      ]);
      expect(fx.shipper.status().stuck).toBeNull();
      // The third: a probe (a batch of no records) is taken, the batch fails once more: its records are cut again.
      expect(await step()).toMatchObject({ kind: 'retry', batchSeq: 1, reason: 'recut', delayMs: 0 });
      expect(fx.batches.get(1)).toMatchObject({
        failures: 4,
        serverErrors: 4,
        lastFailure: 'http 500 internal_error',
      });
      expect(
        await until(fleetStuck, (stuck) => (stuck as { count?: number } | null)?.count === 4),
      ).toMatchObject({ count: 4, batch_seq: 1, reason: 'internal_error' });

      const rest = await drain();
      expect(rest.at(-1)).toEqual({ kind: 'idle' });
      expect(rest.filter((o) => o.kind === 'retry' && o.reason === 'set_aside')).toHaveLength(1);
    } finally {
      await heal();
    }

    // Set aside: kept in the agent's database, reported; never sent again.
    expect(fx.shipper.status()).toMatchObject({
      stuck: null,
      setAside: {
        records: 1,
        newest: [{ seq: 4, kind: 'play', reason: 'http 500 internal_error' }],
      },
    });
    expect(fx.log.stats()).toMatchObject({ queueDepth: 0, unbatched: 0 });
    // The platform counted every other record once, in seq order, nothing after the bad one before it.
    expect(await storedSeqs()).toEqual([1, 2, 3, 5, 6, 7, 8]);
    expect(await counted()).toEqual({ plays: 7, highWater: 8 });
    expect(await fleetStuck()).toBeNull();

    // Later records go on as usual.
    logPlay();
    logPlay();
    expect((await drain()).at(-1)).toEqual({ kind: 'idle' });
    expect(await counted()).toEqual({ plays: 9, highWater: 10 });
  });

  it(`a platform that fails every record but takes empty batches gets at most ${MAX_SET_ASIDE_WITHOUT_PROGRESS} set aside, then the agent waits, stuck`, async () => {
    await enrolledAgent();
    for (let i = 0; i < 6; i++) logPlay();
    const heal = await fault('pop_records CHECK (seq < 0) NOT VALID');
    try {
      const outcomes = await drain(48);
      expect(outcomes.at(-1)).toMatchObject({ kind: 'retry' });
      expect(fx.batches.setAsideRecords().count).toBe(MAX_SET_ASIDE_WITHOUT_PROGRESS);
      const status = fx.shipper.status();
      expect(status.stuck).toMatchObject({ records: 1, last_answer: 'http 500 internal_error' });
      expect(status.stuck!.failures).toBeGreaterThanOrEqual(3);
    } finally {
      await heal();
    }
    expect((await drain()).at(-1)).toEqual({ kind: 'idle' });
    expect(await storedSeqs()).toEqual([4, 5, 6]);
    expect(await counted()).toEqual({ plays: 3, highWater: 6 });
    expect(fx.batches.setAsideRecords().newest.map((r) => r.seq)).toEqual([3, 2, 1]);
  });
});

describe('an outage is not a poison batch', () => {
  it('every batch answered 500, probes too: nothing set aside, nothing cut again; afterwards the same bytes are counted', async () => {
    await enrolledAgent();
    for (let i = 0; i < 5; i++) logPlay();
    const heal = await fault('pop_batches CHECK (batch_seq < 0) NOT VALID');
    let sent: Buffer;
    try {
      const outcomes: SendOutcome[] = [];
      for (let i = 0; i < 12; i++) outcomes.push(await step());
      expect(outcomes.every((o) => o.kind === 'retry' && o.batchSeq === 1)).toBe(true);
      expect(outcomes.filter((o) => o.kind === 'retry' && o.reason.startsWith('outage'))).toHaveLength(10);
      sent = fx.batches.get(1)!.body;
      expect(fx.shipper.status().stuck).toMatchObject({ batch_seq: 1, records: 5, server_errors: 12 });
    } finally {
      await heal();
    }
    expect(fx.batches.setAsideRecords().count).toBe(0);
    expect((await drain()).at(-1)).toEqual({ kind: 'idle' });
    const { rows } = await p.database.db.query<{ batch_seq: number; body: Buffer }>(
      `SELECT batch_seq, body FROM pop_batches WHERE owner = $1 AND (answer->>'received')::int > 0`,
      [`device:${deviceId}`],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.batch_seq).toBe(1);
    expect(rows[0]!.body.equals(sent)).toBe(true);
    expect(await counted()).toEqual({ plays: 5, highWater: 5 });
  });

  it('a platform whose disk is full for records but not for an empty batch (503 for the batch, the probe taken): nothing cut again, nothing set aside; afterwards counted whole', async () => {
    await enrolledAgent();
    for (let i = 0; i < 5; i++) logPlay();
    // PostgreSQL's disk_full where it would first meet it here: the rows of the records (an empty probe has none).
    await p.database.db.query(`
      CREATE FUNCTION agent_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
      END $$;
      CREATE TRIGGER agent_test_disk_full BEFORE INSERT ON pop_records
        FOR EACH ROW EXECUTE FUNCTION agent_test_disk_full();
    `);
    let sent: Buffer;
    try {
      const outcomes: SendOutcome[] = [];
      for (let i = 0; i < 8; i++) outcomes.push(await step());
      expect(outcomes.every((o) => o.kind === 'retry' && o.batchSeq === 1)).toBe(true);
      expect(outcomes.filter((o) => o.kind === 'retry' && ['recut', 'set_aside'].includes(o.reason))).toEqual(
        [],
      );
      expect(outcomes.at(-1)).toMatchObject({ reason: 'http 503 service_unavailable' });
      sent = fx.batches.get(1)!.body;
      expect(fx.shipper.status().stuck).toMatchObject({ batch_seq: 1, records: 5 });
    } finally {
      await p.database.db.query(
        'DROP TRIGGER agent_test_disk_full ON pop_records; DROP FUNCTION agent_test_disk_full()',
      );
    }
    expect((await drain()).at(-1)).toEqual({ kind: 'idle' });
    expect(fx.batches.setAsideRecords().count).toBe(0);
    const { rows } = await p.database.db.query<{ batch_seq: number; body: Buffer }>(
      `SELECT batch_seq, body FROM pop_batches WHERE owner = $1 AND (answer->>'received')::int > 0`,
      [`device:${deviceId}`],
    );
    expect(rows.map((r) => r.batch_seq)).toEqual([1]);
    expect(rows[0]!.body.equals(sent)).toBe(true);
    expect(await counted()).toEqual({ plays: 5, highWater: 5 });
  });

  describe('behind a proxy that answers 502 for a long while', () => {
    let proxy: Server;
    let down = true;
    beforeAll(async () => {
      const target = new URL(agentsUrl);
      proxy = createServer((req, res) => {
        if (down) {
          req.resume();
          res.writeHead(502, { 'content-type': 'text/html' }).end('<html>502 Bad Gateway</html>');
          return;
        }
        const upstream = httpRequest(
          {
            host: target.hostname,
            port: target.port,
            method: req.method,
            path: req.url,
            headers: req.headers,
          },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        req.pipe(upstream);
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    });
    afterAll(async () => {
      await new Promise((resolve) => proxy?.close(resolve));
    });

    it('the batch waits, whole and first; nothing is set aside; when the proxy is back everything is counted', async () => {
      await enrolledAgent(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
      for (let i = 0; i < 4; i++) logPlay();
      for (let i = 0; i < 10; i++) expect(await step()).toMatchObject({ kind: 'retry', batchSeq: 1 });
      expect(fx.shipper.status().stuck).toMatchObject({ batch_seq: 1, last_answer: 'http 502' });
      logPlay();
      down = false;
      expect((await drain()).at(-1)).toEqual({ kind: 'idle' });
      expect(fx.batches.setAsideRecords().count).toBe(0);
      expect(await storedSeqs()).toEqual([1, 2, 3, 4, 5]);
      expect(await counted()).toEqual({ plays: 5, highWater: 5 });
    });
  });
});
