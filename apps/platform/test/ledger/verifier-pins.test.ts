import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type AnchorSource,
  type BlockFields,
  checkCosignedCheckpoint as checkInBrowser,
  parseNote,
  parseVkey as parseVkeyInBrowser,
  verifyAnchoring,
} from '@ooh/verify';
import { loadAuthority } from '../../src/authority/index.js';
import { FEATURES } from '../../src/features.js';
import { makeCheckpoints } from '../../src/ledger/checkpoint.js';
import { ledgerVkey, loadLedgerKey } from '../../src/ledger/key.js';
import {
  cosign,
  formatNote,
  formatVkey,
  rawEd25519PublicKey,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  signNote,
} from '../../src/ledger/note.js';
import { createLedgerFeature } from '../../src/ledger/routes.js';
import { buildServers, type Servers } from '../../src/platform.js';
import { main } from '../../src/verifier/cli.js';
import { createSealsFeature, runSealScheduler } from '../../src/seals/index.js';
import {
  agentBody,
  approveThenSealDay,
  insertBatch,
  newDevice,
  startSealPlatform,
} from '../seals/helpers.js';

/*
 * Issue 23, the pins of a reader beyond the witness keys: the ledger's own checkpoint key (`ooh-verify --ledger-key`:
 * a checkpoint not signed by it is refused), and the reader's clock (a cosignature dated in the future, beyond a small
 * skew, is refused by ooh-verify and by the browser verifier). A dishonest verify host is a proxy in front of the
 * real one that rewrites the checkpoints it serves.
 */

const UNLIMITED = { burst: 1_000_000, perSecond: 1_000_000 };
const ORIGIN = 'verify.test.kz/ledger';
const WITNESS = 'witness.test/clock';

type P = Awaited<ReturnType<typeof startSealPlatform>>;
let p: P;
let servers: Servers;
let verifyUrl = '';
let rootFile = '';
let logVkey = '';
/** A witness of the test's own: its cosignatures are made here, dated as each test needs. */
let witnessKey: KeyObject;
let witnessVkey = '';
/** The dishonest host: every checkpoint it serves goes through `rewrite`. */
let proxy: Server;
let proxyUrl = '';
let rewrite: (note: string) => string = (note) => note;
const device = newDevice();
let batchSeq = 0;

/** A day of the platform: a batch and an approval leaf on `day`, then the scheduler once the day has ended. */
async function liveDay(day: string): Promise<void> {
  batchSeq += 1;
  await insertBatch(p.database.db, {
    owner: device,
    batchSeq,
    body: agentBody(device.slice(7), batchSeq, 2, batchSeq * 10),
    receivedAt: `${day}T01:00:00.123Z`,
  });
  // 01:00 Almaty the next day: the day is sealed and its block digested.
  await approveThenSealDay(p, day, batchSeq);
}

/** The checkpoint note with a cosignature of the test's witness dated `secondsFromNow` from the real clock. */
function cosignedAt(note: string, secondsFromNow: number): string {
  const { text } = parseNote(note)!;
  const timestamp = BigInt(Math.floor(Date.now() / 1000) + secondsFromNow);
  return `${note}${cosign(text, WITNESS, witnessKey, timestamp).line}`;
}

async function cli(...args: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(`ERR ${l}`), env: {} };
  const code = await main(args, io);
  return { code, lines };
}

/** The seal of the 10th is a leaf of the block of the 11th (height 2); three blocks, three checkpoints. */
const seal = () => ['seal', '2026-11-10', '--root', rootFile, '--no-progress'];

beforeAll(async () => {
  p = await startSealPlatform(new Date('2026-11-10T00:30:00Z'));
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
  rootFile = path.join(p.dataDir, 'root.pem');
  await writeFile(rootFile, (await loadAuthority(p.ctx)).rootPem);
  logVkey = ledgerVkey(ORIGIN, await loadLedgerKey(p.ctx));
  witnessKey = generateKeyPairSync('ed25519').privateKey;
  witnessVkey = formatVkey(WITNESS, SIG_COSIGNATURE_V1, rawEd25519PublicKey(witnessKey));
  await runSealScheduler(p.ctx);
  for (const day of ['2026-11-10', '2026-11-11', '2026-11-12']) await liveDay(day);
  expect(await makeCheckpoints(p.ctx)).toEqual([1, 2, 3]);

  proxy = createServer((request, response) => {
    const url = request.url ?? '/';
    fetch(`${verifyUrl}${url}`, { redirect: 'manual' })
      .then(async (answer) => {
        let body = Buffer.from(await answer.arrayBuffer());
        if (answer.status === 200 && /^\/v1\/ledger\/checkpoints?(\/\d+)?$/.test(url)) {
          body = Buffer.from(rewrite(body.toString('utf8')), 'utf8');
        }
        response.writeHead(answer.status, {
          'content-type': answer.headers.get('content-type') ?? 'application/octet-stream',
        });
        response.end(body);
      })
      .catch(() => response.writeHead(502).end());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const proxyAddress = proxy.address();
  proxyUrl = `http://127.0.0.1:${typeof proxyAddress === 'object' && proxyAddress ? proxyAddress.port : 0}`;
}, 60_000);

afterAll(async () => {
  await new Promise((resolve) => proxy?.close(resolve));
  if (servers) await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
  await p?.close();
});

describe('ooh-verify --ledger-key', () => {
  test('the pinned ledger key passes on the honest ledger; another key, even under the same name, is refused', async () => {
    rewrite = (note) => note;
    const ok = await cli(...seal(), '--from', verifyUrl, '--ledger-key', logVkey);
    expect(ok.code, ok.lines.join('\n')).toBe(0);
    expect(ok.lines).toContainEqual(
      expect.stringMatching(
        /^ok {3}ledger anchoring of block 2026-11-11: checkpoint \d \(root = digest of block \d, at or above height 2\) is signed by the pinned ledger key; no witness key pinned/,
      ),
    );
    const impostor = formatVkey(
      ORIGIN,
      SIG_ED25519,
      rawEd25519PublicKey(generateKeyPairSync('ed25519').privateKey),
    );
    const refused = await cli(...seal(), '--from', verifyUrl, '--ledger-key', impostor);
    expect(refused.code).toBe(1);
    const id = impostor.split('+')[1];
    expect(refused.lines).toContainEqual(
      `FAIL ledger anchoring of block 2026-11-11: a checkpoint read is not signed by the pinned ledger key ${ORIGIN}+${id}, or that key's signature on it does not verify`,
    );
    expect(refused.lines.at(-1)).toMatch(/^seal 2026-11-10: \d check\(s\) FAILED$/);
  });

  test('a host that re-signs the checkpoints with a key of its own, or breaks the signature, is refused', async () => {
    // The host's own key under the ledger's name: signed-note keys are name AND ID, so its line is not the pinned key's.
    const hostKey = generateKeyPairSync('ed25519').privateKey;
    rewrite = (note) => {
      const { text } = parseNote(note)!;
      return formatNote({ text, signatures: [signNote(text, ORIGIN, hostKey)] });
    };
    const resigned = await cli(...seal(), '--from', proxyUrl, '--ledger-key', logVkey);
    expect(resigned.code).toBe(1);
    expect(resigned.lines).toContainEqual(
      expect.stringMatching(
        /^FAIL ledger anchoring .*: a checkpoint read is not signed by the pinned ledger key/,
      ),
    );
    // The genuine line with one byte of its signature changed.
    rewrite = (note) => {
      const { text, signatures } = parseNote(note)!;
      const sig = signatures[0]!;
      const bytes = Buffer.concat([Buffer.from(sig.id, 'hex'), sig.signature]);
      bytes[10] = bytes[10]! ^ 1;
      return `${text}\n\u2014 ${sig.name} ${bytes.toString('base64')}\n`;
    };
    const broken = await cli(...seal(), '--from', proxyUrl, '--ledger-key', logVkey);
    expect(broken.code).toBe(1);
    expect(broken.lines).toContainEqual(
      expect.stringMatching(
        /^FAIL ledger anchoring .*: a checkpoint read is not signed by the pinned ledger key .*, or that key's signature on it does not verify$/,
      ),
    );
    // Without the pin the same host passes: this is what the pin adds.
    expect((await cli(...seal(), '--from', proxyUrl)).code).toBe(0);
    rewrite = (note) => note;
  });

  test('with witnesses: the cosignatures of a checkpoint the ledger key did not sign do not count', async () => {
    const hostKey = generateKeyPairSync('ed25519').privateKey;
    // The witness cosigned what the host signed (a witness that trusts the host's key, or a forged chain).
    rewrite = (note) => {
      const { text } = parseNote(note)!;
      return cosignedAt(formatNote({ text, signatures: [signNote(text, ORIGIN, hostKey)] }), -60);
    };
    const pins = ['--witness', witnessVkey, '--require-anchored', '1'];
    expect((await cli(...seal(), '--from', proxyUrl, ...pins)).code).toBe(0);
    const pinned = await cli(...seal(), '--from', proxyUrl, ...pins, '--ledger-key', logVkey);
    expect(pinned.code).toBe(1);
    expect(pinned.lines).toContainEqual(
      expect.stringMatching(
        // @ooh/verify refuses the host's checkpoint itself, before counting its cosignatures.
        /^FAIL ledger anchoring of block 2026-11-11: a checkpoint read is not signed by the pinned ledger key/,
      ),
    );
    // Honest checkpoints cosigned by the witness: both pins pass.
    rewrite = (note) => cosignedAt(note, -60);
    const honest = await cli(...seal(), '--from', proxyUrl, ...pins, '--ledger-key', logVkey);
    expect(honest.code, honest.lines.join('\n')).toBe(0);
    rewrite = (note) => note;
  });

  test('a key that is not the ledger key, or not a key, is a bad argument (2) named in one line', async () => {
    for (const [key, why] of [
      [witnessVkey, /not a ledger \(note signing\) key \(type 0x01\)/],
      ['verify.test.kz/ledger+0000+AAAA', /the key ID is 8 lowercase hex digits/],
    ] as const) {
      const result = await cli(...seal(), '--from', verifyUrl, '--ledger-key', key);
      expect(result.code).toBe(2);
      expect(result.lines).toEqual([
        expect.stringMatching(new RegExp(`^ERR ooh-verify: --ledger-key .*${why.source}`)),
      ]);
    }
  });
});

describe('the browser verifier with the ledger key pinned', () => {
  test('takes checkpoints the pinned key signed, refuses others, and counts cosignatures only on its checkpoints', async () => {
    const block = (await (await fetch(`${verifyUrl}/v1/ledger/blocks/2026-11-11`)).json()) as BlockFields;
    const target = {
      day: block.day,
      block_height: block.block_height,
      digest: block.digest,
      anchored_by: null,
    };
    const served = (change: (note: string) => string): AnchorSource => ({
      checkpoint: async (url: string) => {
        const res = await fetch(`${verifyUrl}${url}`);
        return res.status === 200 ? change(await res.text()) : null;
      },
      block: async (day: string) => {
        const res = await fetch(`${verifyUrl}/v1/ledger/blocks/${day}`);
        return res.status === 200 ? ((await res.json()) as BlockFields) : null;
      },
    });
    const ledgerKey = (await parseVkeyInBrowser(logVkey))!;
    const impostor = (await parseVkeyInBrowser(
      formatVkey(ORIGIN, SIG_ED25519, rawEd25519PublicKey(generateKeyPairSync('ed25519').privateKey)),
    ))!;
    const honest = served((note) => note);
    expect(await verifyAnchoring(target, [], 1, honest, { ledgerKey })).toEqual({
      state: 'ok',
      reason: 'ledger_signed',
      size: 2,
    });
    expect(await verifyAnchoring(target, [], 1, honest, { ledgerKey: impostor })).toEqual({
      state: 'failed',
      reason: 'ledger_key_refused',
    });
    expect(await verifyAnchoring(target, [], 1, honest)).toEqual({
      state: 'unknown',
      reason: 'no_witnesses',
    });
    // Re-signed by the host and cosigned by a witness: the witness alone passes it, the ledger key pin refuses it.
    const hostKey = generateKeyPairSync('ed25519').privateKey;
    const resigned = served((note) => {
      const { text } = parseNote(note)!;
      return cosignedAt(formatNote({ text, signatures: [signNote(text, ORIGIN, hostKey)] }), -60);
    });
    const witness = (await parseVkeyInBrowser(witnessVkey))!;
    expect(await verifyAnchoring(target, [witness], 1, resigned)).toMatchObject({ state: 'ok' });
    expect(await verifyAnchoring(target, [witness], 1, resigned, { ledgerKey })).toEqual({
      state: 'failed',
      reason: 'ledger_key_refused',
    });
    // Honest checkpoints cosigned by the witness: both pins pass.
    expect(
      await verifyAnchoring(
        target,
        [witness],
        1,
        served((note) => cosignedAt(note, -60)),
        { ledgerKey },
      ),
    ).toMatchObject({ state: 'ok', reason: 'anchored', witnesses: [WITNESS] });
  });
});

describe('a cosignature dated in the future', () => {
  test('is refused by ooh-verify beyond five minutes of skew, and taken within it', async () => {
    const pins = ['--witness', witnessVkey, '--require-anchored', '1'];
    rewrite = (note) => cosignedAt(note, 3600);
    const ahead = await cli(...seal(), '--from', proxyUrl, ...pins);
    expect(ahead.code).toBe(1);
    expect(ahead.lines).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^FAIL ledger anchoring of block 2026-11-11: the cosignature of ${WITNESS.replace('/', '\\/')} is refused \\(the cosignature is dated more than 5 minutes after this computer's clock`,
        ),
      ),
    );
    // Two minutes ahead (clocks differ a little) and a minute ago: taken.
    for (const seconds of [120, -60]) {
      rewrite = (note) => cosignedAt(note, seconds);
      const taken = await cli(...seal(), '--from', proxyUrl, ...pins);
      expect(taken.code, taken.lines.join('\n')).toBe(0);
    }
    rewrite = (note) => note;
  });

  test("the verifier (@ooh/verify, the CLI's and the browser's) judges against the clock it is given", async () => {
    const note = (await (await fetch(`${verifyUrl}/v1/ledger/checkpoints/2`)).text()) as string;
    const cosigned = cosignedAt(note, 3600);
    const now = Date.now();
    // Refused now, taken an hour and a bit later.
    const key = (await parseVkeyInBrowser(witnessVkey))!;
    expect(await checkInBrowser(cosigned, [key], now)).toMatchObject({ cosigned: [], future: [WITNESS] });
    expect(await checkInBrowser(cosigned, [key], now + 3_700_000)).toMatchObject({
      cosigned: [{ name: WITNESS }],
    });
    expect((await checkInBrowser(cosigned, [key], now + 3_700_000))?.future).toBeUndefined();

    // The whole anchoring check in the browser: the seal's block (height 2) with the checkpoints as the host serves them.
    const block = (await (await fetch(`${verifyUrl}/v1/ledger/blocks/2026-11-11`)).json()) as {
      day: string;
      block_height: number;
      digest: string;
    };
    const source = (seconds: number): AnchorSource => ({
      checkpoint: async (url: string) => {
        const res = await fetch(`${verifyUrl}${url}`);
        return res.status === 200 ? cosignedAt(await res.text(), seconds) : null;
      },
      block: async (day: string) => {
        const res = await fetch(`${verifyUrl}/v1/ledger/blocks/${day}`);
        return res.status === 200 ? ((await res.json()) as BlockFields) : null;
      },
    });
    const target = {
      day: block.day,
      block_height: block.block_height,
      digest: block.digest,
      anchored_by: null,
    };
    expect(await verifyAnchoring(target, [key], 1, source(3600), { now })).toEqual({
      state: 'failed',
      reason: 'cosignature_future',
      witnesses: [WITNESS],
    });
    expect(await verifyAnchoring(target, [key], 1, source(120), { now })).toMatchObject({
      state: 'ok',
      reason: 'anchored',
    });
    expect(await verifyAnchoring(target, [key], 1, source(-60))).toMatchObject({ state: 'ok' });
  });
});
