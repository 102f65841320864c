import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TestClock } from '../../src/clock.js';
import { ledgerKeyPath, loadLedgerKey } from '../../src/ledger/key.js';
import { describe, expect, test } from 'vitest';
import * as verify from '@ooh/verify';
import { ConfigError, loadConfig, type PlatformConfig } from '../../src/config.js';
import { AuthorityCache } from '../../src/authority/cache.js';
import {
  checkpointText,
  cosign,
  formatNote,
  formatVkey,
  keyId,
  NoteError,
  parseVkey,
  rawEd25519PublicKey,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  signNote,
} from '../../src/ledger/note.js';
import { ledgerSettings } from '../../src/ledger/settings.js';
import { acceptCosignature, addCheckpointBody } from '../../src/ledger/witnesses.js';

/*
 * The platform's half of C2SP signed notes: it signs and writes them, and @ooh/verify, the one verifier, reads them
 * (its tests, packages/verify/test/note.test.ts, hold the C2SP examples against the reading). Here: what the platform
 * writes is the text the C2SP examples lay out (C2SP/C2SP at 5ba5ee8: signed-note.md "Verifier keys / Example",
 * tlog-checkpoint.md, tlog-witness.md's add-checkpoint body), and what it signs verifies in @ooh/verify.
 */

// signed-note.md, "Example": this vkey verifies this note.
/** The platform's clock for the witness client: the cosignatures below are dated 1_764_000_000 (2025-11-24). */
const CLOCK = new Date(1_764_000_000_000);
const EXAMPLE_VKEY = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k';

// tlog-cosignature.md: "an example of a checkpoint that contains a cosignature" (its keys are not published).
const EXAMPLE_CHECKPOINT = `example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=
`;

// tlog-witness.md, add-checkpoint "Example request body".
const WITNESS_REQUEST = `old 20852014
PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=
jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=
5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=
/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=

example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=
— example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=
`;

describe('what the platform writes is the text of the C2SP examples', () => {
  test('signed-note: the example key written as a vkey is the example vkey', async () => {
    const vkey = (await verify.parseVkey(EXAMPLE_VKEY))!;
    expect(keyId(vkey.name, SIG_ED25519, vkey.publicKey).toString('hex')).toBe('530d903a');
    expect(formatVkey(vkey.name, SIG_ED25519, vkey.publicKey)).toBe(EXAMPLE_VKEY);
  });

  test('tlog-checkpoint: the example checkpoint written again from its origin, size and root is the same text', () => {
    const read = verify.parseCheckpoint(EXAMPLE_CHECKPOINT)!;
    expect(
      checkpointText({ origin: read.origin, size: read.size, rootHash: Buffer.from(read.root, 'hex') }),
    ).toBe(EXAMPLE_CHECKPOINT);
    expect(() => checkpointText({ origin: 'o', size: -1, rootHash: Buffer.alloc(32) })).toThrow(RangeError);
    expect(() => checkpointText({ origin: 'o', size: 1, rootHash: Buffer.alloc(31) })).toThrow(RangeError);
  });

  test('tlog-witness: the platform writes an add-checkpoint body exactly as the example lays it out', () => {
    const [head, checkpoint] = [
      WITNESS_REQUEST.slice(0, WITNESS_REQUEST.indexOf('\n\n')),
      WITNESS_REQUEST.slice(WITNESS_REQUEST.indexOf('\n\n') + 2),
    ];
    const [old, ...proof] = head.split('\n');
    expect(addCheckpointBody(Number(old!.slice(4)), proof, checkpoint)).toBe(WITNESS_REQUEST);
  });
});

describe('the platform signs, @ooh/verify verifies', () => {
  const origin = 'verify.test.kz/ledger';
  const logKey = generateKeyPairSync('ed25519').privateKey;
  const witnessKey = generateKeyPairSync('ed25519').privateKey;
  const name = 'witness.test/w9';
  const text = checkpointText({ origin, size: 7, rootHash: Buffer.alloc(32, 1) });
  const note = formatNote({ text, signatures: [signNote(text, origin, logKey)] });

  test('a checkpoint signed by the ledger key and a cosignature of a witness verify; the note reads back', async () => {
    const logVkey = (await verify.parseVkey(formatVkey(origin, SIG_ED25519, rawEd25519PublicKey(logKey))))!;
    const read = verify.parseNote(note)!;
    expect(read.text).toBe(text);
    expect(verify.parseCheckpoint(read.text)).toEqual({ origin, size: 7, root: '01'.repeat(32) });
    expect(await verify.checkSignature(read.text, read.signatures[0]!, [logVkey])).toEqual({
      state: 'valid',
      vkey: logVkey,
      timestamp: null,
    });
    const witness = (await verify.parseVkey(
      formatVkey(name, SIG_COSIGNATURE_V1, rawEd25519PublicKey(witnessKey)),
    ))!;
    const line = cosign(text, name, witnessKey, 1_764_000_000n);
    const cosigned = verify.parseNote(`${note}${line.line}`)!;
    expect(await verify.checkSignature(text, cosigned.signatures[1]!, [witness])).toEqual({
      state: 'valid',
      vkey: witness,
      timestamp: 1_764_000_000,
    });
    expect(cosigned.signatures[1]!.line).toBe(line.line);
    expect(() => cosign(text, name, witnessKey, 0n)).toThrow(RangeError);
    expect(() => cosign(text, name, witnessKey, 2n ** 63n)).toThrow(RangeError);
  });

  test('the witness client keeps a cosignature the package accepts and refuses a flipped byte, another key ID or another name', async () => {
    const witness = parseVkey(formatVkey(name, SIG_COSIGNATURE_V1, rawEd25519PublicKey(witnessKey)));
    const line = cosign(text, name, witnessKey, 1_764_000_000n);
    const answer = (signature: Buffer, id = witness.id, who = name) =>
      `\u2014 ${who} ${Buffer.concat([Buffer.from(id, 'hex'), signature]).toString('base64')}\n`;
    expect(await acceptCosignature({ note }, line.line, witness, CLOCK)).toEqual({
      signature: expect.objectContaining({ name, id: witness.id, line: line.line }),
      at: new Date(1_764_000_000_000),
    });
    // Another witness's line first is ignored (unknown key); the one of ours after it is kept.
    const other = cosign(text, 'witness.test/w8', generateKeyPairSync('ed25519').privateKey, 1_764_000_001n);
    expect(await acceptCosignature({ note }, `${other.line}${line.line}`, witness, CLOCK)).toMatchObject({
      signature: { line: line.line },
    });
    for (const at of [0, 8, 40, 71]) {
      const flipped = Buffer.from(line.signature);
      flipped[at]! ^= 0x01;
      expect(await acceptCosignature({ note }, answer(flipped), witness, CLOCK), `byte ${at}`).toEqual({
        error: `a cosignature of ${name} does not verify`,
      });
    }
    // Another key ID or another name: not the pinned witness's line at all.
    expect(await acceptCosignature({ note }, answer(line.signature, '00000000'), witness, CLOCK)).toEqual({
      error: `no cosignature of ${name} in the answer`,
    });
    expect(
      await acceptCosignature(
        { note },
        answer(line.signature, witness.id, 'witness.test/w7'),
        witness,
        CLOCK,
      ),
    ).toEqual({ error: `no cosignature of ${name} in the answer` });
    // Not signature lines: an empty answer, text, or a blank line that would make the answer a note of its own.
    for (const body of ['', 'cosigned\n', `\n${line.line}`, line.line.slice(0, -1)]) {
      expect(await acceptCosignature({ note }, body, witness, CLOCK), JSON.stringify(body)).toEqual({
        error: 'the answer is not signature lines ("\u2014 <name> <base64>", each ending in a newline)',
      });
    }
  });

  test('the witness client refuses a cosignature dated after its clock + 300 s, as every verifier does, up to 2^63 - 1', async () => {
    const witness = parseVkey(formatVkey(name, SIG_COSIGNATURE_V1, rawEd25519PublicKey(witnessKey)));
    const at = (seconds: bigint) =>
      acceptCosignature({ note }, cosign(text, name, witnessKey, seconds).line, witness, CLOCK);
    // 300 s ahead is the verifiers' skew (COSIGNATURE_SKEW_SECONDS): kept; one second more, and any later time
    // (beyond a JavaScript Date, beyond PostgreSQL's timestamptz), refused in words, never an Invalid Date.
    expect(await at(1_764_000_300n)).toMatchObject({ at: new Date(1_764_000_300_000) });
    for (const seconds of [1_764_000_301n, 8_640_000_000_001n, 2n ** 63n - 1n]) {
      expect(await at(seconds), String(seconds)).toEqual({
        error: `the cosignature of ${name} is dated ${Number(seconds)}, more than 300 s after this platform's clock`,
      });
    }
    expect(verify.COSIGNATURE_SKEW_SECONDS).toBe(300);
  });

  test('the key ID the package reads from a signature line is the one the platform signed with', () => {
    // storeCosignature keeps the package's reading (name, key ID in hex, line): no second note parser.
    expect(verify.parseNote(note)!.signatures[0]!.id).toBe(
      keyId(origin, SIG_ED25519, rawEd25519PublicKey(logKey)).toString('hex'),
    );
  });
});

describe("an operator's vkey (settings, ooh-verify) is read by @ooh/verify and refused in words", () => {
  test("each of the package's codes is a sentence", () => {
    const cases: [string, string][] = [
      ['example.com/foo+530d903a', 'a vkey is <name>+<hex key ID>+<base64 key>'],
      [
        '+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k',
        'the key name is empty or holds a space or "+"',
      ],
      ['example.com/foo+0000+AAAA', 'the key ID is 8 lowercase hex digits'],
      [
        'example.com/foo+530d903a+Aeky*Rrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k',
        'the key is not standard base64',
      ],
      [
        `example.com/foo+530d903a+${Buffer.alloc(33, 2).toString('base64')}`,
        'only Ed25519 vkeys (type 0x01 or 0x04, 32-byte key) are taken',
      ],
      [
        'example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k',
        'the key ID is not SHA-256(name, type, key)[:4]: the name, the type or the key was changed',
      ],
    ];
    for (const [text, message] of cases) {
      expect(() => parseVkey(text), text).toThrow(new NoteError('malformed_vkey', message));
    }
    expect(parseVkey(EXAMPLE_VKEY)).toMatchObject({
      name: 'example.com/foo',
      id: '530d903a',
      type: SIG_ED25519,
    });
  });
});

describe('ledger settings', () => {
  const w = formatVkey('witness.test/w1', SIG_COSIGNATURE_V1, Buffer.alloc(32, 3));
  const settingsOf = (env: Record<string, string>) => ledgerSettings(loadConfig({ env }));
  // The witness's key under another name: its key ID is no longer the one the name and key give.
  const renamed = w.replace('witness.test/w1', 'witness.test/w2');

  test('the origin defaults to the verify host; witnesses are "<vkey> <URL>" by commas or lines; the quorum 1 to their number', () => {
    expect(settingsOf({ PUBLIC_VERIFY_URL: 'https://verify.example.kz' })).toEqual({
      origin: 'verify.example.kz/ledger',
      witnesses: [],
      quorum: 0,
    });
    const two = formatVkey('witness.test/w2', SIG_COSIGNATURE_V1, Buffer.alloc(32, 4));
    const s = settingsOf({
      LEDGER_WITNESSES: `${w} https://w1.example/ ,\n${two} http://w2.example:8080`,
      LEDGER_WITNESS_QUORUM: '2',
    });
    expect(s.witnesses.map((x) => [x.vkey.name, x.url])).toEqual([
      ['witness.test/w1', 'https://w1.example'],
      ['witness.test/w2', 'http://w2.example:8080'],
    ]);
    expect(s.quorum).toBe(2);
  });

  test('every bad value is named', () => {
    const problems = (env: Record<string, string>) => {
      try {
        settingsOf(env);
        return [];
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).problems;
      }
    };
    expect(problems({ LEDGER_ORIGIN: 'has space', LEDGER_WITNESSES: `${w}` })).toEqual([
      'LEDGER_ORIGIN: "has space" must be non-empty, without spaces or "+" (e.g. verify.example.kz/ledger)',
      `LEDGER_WITNESSES: "${w}" is not "<vkey> <submission URL>"`,
    ]);
    expect(problems({ LEDGER_WITNESSES: `${w} ftp://w1.example` })).toEqual([
      'LEDGER_WITNESSES: witness.test/w1: "ftp://w1.example" is not an http(s) URL',
    ]);
    expect(problems({ LEDGER_WITNESSES: `${EXAMPLE_VKEY} https://w.example` })).toEqual([
      'LEDGER_WITNESSES: example.com/foo: a witness key is a cosignature key (vkey type 0x04)',
    ]);
    expect(
      problems({
        LEDGER_WITNESSES: `witness.test/w1+0000+AAAA https://w.example, ${renamed} https://w.example`,
      }),
    ).toEqual([
      'LEDGER_WITNESSES: witness.test/w1+0000+AAAA: the key ID is 8 lowercase hex digits',
      `LEDGER_WITNESSES: ${renamed}: the key ID is not SHA-256(name, type, key)[:4]: the name, the type or the key was changed`,
    ]);
    expect(problems({ LEDGER_WITNESSES: `${w} https://w1.example`, LEDGER_WITNESS_QUORUM: '2' })).toEqual([
      'LEDGER_WITNESS_QUORUM: "2" must be a whole number from 1 to the number of witnesses in LEDGER_WITNESSES (1)',
    ]);
    expect(problems({ LEDGER_WITNESS_QUORUM: '1' })).toHaveLength(1);
  });
});

describe('the ledger key', () => {
  test('made on first need beside the generated authority (mode 0600), the same key afterwards; a mounted one must exist and be Ed25519', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-ledger-key-'));
    try {
      const clock = new TestClock(new Date('2026-11-20T06:00:00Z'), { frozen: true });
      const contextOf = (config: PlatformConfig) => ({
        config,
        caches: { authority: new AuthorityCache({ config, clock }) },
      });
      const ctx = contextOf(loadConfig({ env: { DATA_DIR: dataDir } }));
      const { file } = ledgerKeyPath(ctx);
      expect(file).toBe(path.join(dataDir, 'authority', 'ledger-signer.ed25519.key'));
      const first = await loadLedgerKey(ctx);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      // Beside the authority's own files, which were made first.
      await stat(path.join(dataDir, 'authority', 'root-ca.pem'));
      expect((await loadLedgerKey(ctx)).publicKey).toEqual(first.publicKey);

      const mounted = path.join(dataDir, 'mounted.key');
      const withMounted = contextOf(
        loadConfig({ env: { DATA_DIR: dataDir, AUTHORITY_LEDGER_KEY: mounted } }),
      );
      await expect(loadLedgerKey(withMounted)).rejects.toMatchObject({
        problems: [expect.stringMatching(/^AUTHORITY_LEDGER_KEY: cannot read .*mounted\.key/)],
      });
      await writeFile(
        mounted,
        generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
          format: 'pem',
          type: 'pkcs8',
        }),
      );
      await expect(loadLedgerKey(withMounted)).rejects.toMatchObject({
        problems: [expect.stringMatching(/is a ec key, not Ed25519$/)],
      });
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
