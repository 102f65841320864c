import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseNote } from '@ooh/verify';
import { cosign, formatVkey, rawEd25519PublicKey, SIG_COSIGNATURE_V1 } from '../../src/ledger/note.js';
import {
  runWitnessJob,
  type WitnessRun,
  type WitnessTransport,
  witnessFailureLine,
} from '../../src/ledger/witnesses.js';
import { runSealScheduler } from '../../src/seals/index.js';
import {
  agentBody,
  approveThenSealDay,
  insertBatch,
  newDevice,
  startSealPlatform,
} from '../seals/helpers.js';

/*
 * Audit J findings 2, 3 and 5: what the platform does with a witness's answer that is signed with the witness's own
 * key but must not be taken (a time beyond any date, a time in the future, a 409 naming our own size), and that one
 * such witness never stops the others. The witnesses here are answers scripted at the edge of what we own (the
 * network); test/witness/witness.ts is the honest witness, run in witnesses.test.ts.
 */

interface ScriptedWitness {
  name: string;
  key: KeyObject;
  vkey: string;
  url: string;
}
type Answer = { status: number; contentType: string; body: string };
/** How a witness answers one add-checkpoint: the `old` line and the checkpoint text it was sent. */
type Behaviour = (request: { old: number; text: string }) => Answer;

function scriptedWitness(name: string): ScriptedWitness {
  const { privateKey } = generateKeyPairSync('ed25519');
  const vkey = formatVkey(name, SIG_COSIGNATURE_V1, rawEd25519PublicKey(privateKey));
  return { name, key: privateKey, vkey, url: `http://${name.replace('/', '-')}.invalid` };
}

const W1 = scriptedWitness('hostile.test/w1');
const W2 = scriptedWitness('honest.test/w2');
const behaviour = new Map<string, Behaviour>();
const requests: { witness: string; old: number; size: number }[] = [];
const transport: WitnessTransport = {
  async post(url, body) {
    const w = [W1, W2].find((x) => url === `${x.url}/add-checkpoint`)!;
    const old = Number(/^old (\d+)\n/.exec(body)![1]);
    const text = parseNote(body.slice(body.indexOf('\n\n') + 2))!.text;
    requests.push({ witness: w.name, old, size: Number(text.split('\n')[1]) });
    return behaviour.get(w.name)!({ old, text });
  },
};

type P = Awaited<ReturnType<typeof startSealPlatform>>;
let p: P;
const device = newDevice();
let batchSeq = 0;

const platformSeconds = () => BigInt(Math.floor(p.clock.now().getTime() / 1000));
/** Cosigns whatever it is sent, dated `at()`. */
const cosigning =
  (w: ScriptedWitness, at: () => bigint): Behaviour =>
  ({ text }) => ({ status: 200, contentType: 'text/plain', body: cosign(text, w.name, w.key, at()).line });
const down: Behaviour = () => ({ status: 503, contentType: 'text/plain', body: 'down\n' });

async function liveDay(day: string): Promise<void> {
  batchSeq += 1;
  await insertBatch(p.database.db, {
    owner: device,
    batchSeq,
    body: agentBody(device.slice(7), batchSeq, 2, batchSeq * 10),
    receivedAt: new Date(Date.parse(`${day}T01:00:00Z`)).toISOString().replace('Z', '123Z'),
  });
  await approveThenSealDay(p, day, batchSeq);
}

async function job(options: { force?: boolean } = {}): Promise<WitnessRun> {
  const run = await runWitnessJob(p.ctx, { transport, force: options.force ?? true, random: () => 0.5 });
  if (run === 'busy') throw new Error('the witness job was busy');
  return run;
}

async function witnessState(name: string) {
  const { rows } = await p.database.db.query<{
    cosigned_size: number;
    failures: number;
    next_attempt_at: Date | null;
    last_error: string | null;
  }>('SELECT cosigned_size, failures, next_attempt_at, last_error FROM ledger_witnesses WHERE name = $1', [
    name,
  ]);
  return rows[0]!;
}

async function blockStatus(height: number): Promise<{ status: string; anchored_by: number | null }> {
  const { rows } = await p.database.db.query<{ status: string; anchored_by: number | null }>(
    'SELECT status, anchored_by FROM ledger_blocks WHERE block_height = $1',
    [height],
  );
  return rows[0]!;
}

async function cosignatures(name: string): Promise<{ size: number; line: string }[]> {
  const { rows } = await p.database.db.query<{ size: number; line: string }>(
    'SELECT size, line FROM ledger_cosignatures WHERE witness = $1 ORDER BY size',
    [name],
  );
  return rows;
}

beforeAll(async () => {
  p = await startSealPlatform(new Date('2026-11-18T05:00:00Z'));
  p.ctx.config.settings['LEDGER_ORIGIN'] = 'verify.test.kz/ledger';
  p.ctx.config.settings['LEDGER_WITNESSES'] = `${W1.vkey} ${W1.url}\n${W2.vkey} ${W2.url}`;
  p.ctx.config.settings['LEDGER_WITNESS_QUORUM'] = '1';
  await runSealScheduler(p.ctx);
}, 120_000);

afterAll(async () => {
  await p?.close();
});

describe('a cosignature dated in the future (audit J finding 5)', () => {
  test('is refused as that witness failure, with backoff, and anchors nothing', async () => {
    await liveDay('2026-11-18');
    // A day ahead of the platform clock: every verifier (COSIGNATURE_SKEW_SECONDS = 300) would refuse it.
    behaviour.set(
      W1.name,
      cosigning(W1, () => platformSeconds() + 86_400n),
    );
    behaviour.set(W2.name, down);
    const run = await job();
    expect(run.submissions).toEqual([
      {
        witness: W1.name,
        result: {
          outcome: 'failed',
          error: `the cosignature of ${W1.name} is dated ${platformSeconds() + 86_400n}, more than 300 s after this platform's clock`,
        },
      },
      { witness: W2.name, result: { outcome: 'failed', error: 'HTTP 503: down' } },
    ]);
    expect(run.anchored).toEqual([]);
    expect(await blockStatus(1)).toEqual({ status: 'digested', anchored_by: null });
    expect(await cosignatures(W1.name)).toEqual([]);
    expect(await witnessState(W1.name)).toMatchObject({ cosigned_size: 0, failures: 1 });

    // 300 s ahead is within the verifiers' skew: kept, and the block is anchored.
    behaviour.set(
      W1.name,
      cosigning(W1, () => platformSeconds() + 300n),
    );
    const kept = await job();
    expect(kept.submissions[0]).toEqual({ witness: W1.name, result: { outcome: 'cosigned', size: 1 } });
    expect(kept.anchored).toEqual([1]);
  });

  test('a later answer for a size already cosigned never replaces the stored cosignature', async () => {
    const stored = await cosignatures(W1.name);
    expect(stored.map((c) => c.size)).toEqual([1]);
    // The platform forgets what it recorded (as after a restore) and the witness cosigns size 1 again, another time.
    await p.database.db.query('UPDATE ledger_witnesses SET cosigned_size = 0 WHERE name = $1', [W1.name]);
    behaviour.set(
      W1.name,
      cosigning(W1, () => platformSeconds() - 60n),
    );
    const again = await job();
    expect(again.submissions[0]).toEqual({ witness: W1.name, result: { outcome: 'cosigned', size: 1 } });
    expect(await cosignatures(W1.name)).toEqual(stored);
  });
});

describe('one hostile witness never stops the others (audit J finding 2)', () => {
  test('a cosignature time beyond any date is that witness failure: the next witness is asked and its cosignature anchors', async () => {
    await liveDay('2026-11-19');
    behaviour.set(
      W1.name,
      cosigning(W1, () => 2n ** 63n - 1n),
    );
    behaviour.set(W2.name, cosigning(W2, platformSeconds));
    requests.length = 0;
    const run = await job({ force: false });
    expect(run.submissions).toEqual([
      {
        witness: W1.name,
        result: {
          outcome: 'failed',
          error: `the cosignature of ${W1.name} is dated ${Number(2n ** 63n - 1n)}, more than 300 s after this platform's clock`,
        },
      },
      { witness: W2.name, result: { outcome: 'cosigned', size: 2 } },
    ]);
    expect(run.anchored).toEqual([2]);
    expect(await blockStatus(2)).toEqual({ status: 'anchored', anchored_by: 2 });
    // W1 is held to its backoff (10 s doubling, jitter 0.5 here): the next pass does not ask it.
    const w1 = await witnessState(W1.name);
    expect(w1).toMatchObject({ cosigned_size: 1, failures: 1 });
    expect(w1.next_attempt_at!.getTime()).toBeGreaterThan(p.clock.now().getTime());
    requests.length = 0;
    await job({ force: false });
    expect(requests.filter((r) => r.witness === W1.name)).toEqual([]);
  });

  test('an error text our database cannot store (a NUL byte) is recorded readable, and the pass goes on', async () => {
    await liveDay('2026-11-20');
    behaviour.set(W1.name, () => ({ status: 500, contentType: 'text/plain', body: 'bad\u0000state\n' }));
    const run = await job();
    expect(run.submissions).toEqual([
      { witness: W1.name, result: { outcome: 'failed', error: 'HTTP 500: bad\u0000state' } },
      { witness: W2.name, result: { outcome: 'cosigned', size: 3 } },
    ]);
    expect(run.anchored).toEqual([3]);
    expect(await witnessState(W1.name)).toMatchObject({ last_error: 'HTTP 500: bad?state' });
  });
});

describe('a 409 naming our newest size (audit J finding 3)', () => {
  test('is never recorded as cosigned: the checkpoint is submitted again with old = that size, and a witness repeating 409 fails', async () => {
    await liveDay('2026-11-21');
    behaviour.set(W2.name, down);
    // Always "409 4": never a cosignature.
    behaviour.set(W1.name, () => ({ status: 409, contentType: 'text/x.tlog.size', body: '4\n' }));
    requests.length = 0;
    const run = await job();
    expect(run.submissions[0]).toEqual({
      witness: W1.name,
      result: { outcome: 'failed', error: 'HTTP 409: witness at 4, asked with old 4' },
    });
    // tlog-witness: the same checkpoint again, with old = the size the witness holds and no proof.
    expect(requests.filter((r) => r.witness === W1.name)).toEqual([
      { witness: W1.name, old: 1, size: 4 },
      { witness: W1.name, old: 4, size: 4 },
    ]);
    expect(await witnessState(W1.name)).toMatchObject({ cosigned_size: 1 });
    expect(await blockStatus(4)).toEqual({ status: 'digested', anchored_by: null });

    // A witness that does hold our head at 4 cosigns it when asked with old 4: that cosignature is what is recorded.
    behaviour.set(W1.name, ({ old, text }) =>
      old === 4
        ? {
            status: 200,
            contentType: 'text/plain',
            body: cosign(text, W1.name, W1.key, platformSeconds()).line,
          }
        : { status: 409, contentType: 'text/x.tlog.size', body: '4\n' },
    );
    const resubmitted = await job();
    expect(resubmitted.submissions[0]).toEqual({
      witness: W1.name,
      result: { outcome: 'cosigned', size: 4 },
    });
    expect(resubmitted.anchored).toEqual([4]);
    expect((await cosignatures(W1.name)).map((c) => c.size)).toEqual([1, 4]);
    expect(await witnessState(W1.name)).toMatchObject({ cosigned_size: 4, failures: 0, last_error: null });
  });
});

describe('how a witness failure is logged', () => {
  test('a witness holding another history (422, or a size beyond ours) is an error of its own; one down is a warning', () => {
    const fork = {
      level: 'error',
      message:
        'ledger witness holds another history than this ledger (a fork, as after a restore): someone must look',
    };
    expect(witnessFailureLine('HTTP 422: block 5 does not extend the checkpoint held')).toEqual(fork);
    expect(witnessFailureLine("witness holds size 4, beyond this ledger's 3")).toEqual(fork);
    for (const down of ['HTTP 503: busy', 'connect ECONNREFUSED 10.0.0.1:443', 'timeout', 'HTTP 4220']) {
      expect(witnessFailureLine(down)).toEqual({ level: 'warn', message: 'ledger witness refused or down' });
    }
  });
});
