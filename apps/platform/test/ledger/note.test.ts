import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TestClock } from '../../src/clock.js';
import { ledgerKeyPath, loadLedgerKey } from '../../src/ledger/key.js';
import { describe, expect, test } from 'vitest';
import * as browser from '@ooh/verify';
import { ConfigError, loadConfig, type PlatformConfig } from '../../src/config.js';
import { AuthorityCache } from '../../src/authority/cache.js';
import {
  checkpointText,
  checkSignature,
  cosign,
  formatVkey,
  keyId,
  NoteError,
  parseCheckpointText,
  parseNote,
  parseVkey,
  rawEd25519PublicKey,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  signNote,
} from '../../src/ledger/note.js';
import { ledgerSettings } from '../../src/ledger/settings.js';
import { addCheckpointBody } from '../../src/ledger/witnesses.js';

/*
 * The note formats against the examples the C2SP texts publish (C2SP/C2SP at 5ba5ee8): signed-note.md "Verifier
 * keys / Example", tlog-checkpoint.md and tlog-cosignature.md (the checkpoint with a cosignature), tlog-witness.md
 * (the add-checkpoint request body). Each in the platform's note module and in the browser's.
 */

// signed-note.md, "Example": this vkey verifies this note.
const EXAMPLE_VKEY = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k';
const EXAMPLE_NOTE =
  'This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';

// tlog-cosignature.md: "an example of a checkpoint that contains a cosignature" (its keys are not published).
const COSIGNED_CHECKPOINT = `example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=
— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==
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

describe('the C2SP examples', () => {
  test('signed-note: the example vkey verifies the example note; a changed text or a changed key does not', async () => {
    const vkey = parseVkey(EXAMPLE_VKEY);
    expect(vkey).toMatchObject({ name: 'example.com/foo', type: SIG_ED25519 });
    expect(vkey.id.toString('hex')).toBe('530d903a');
    expect(keyId(vkey.name, SIG_ED25519, vkey.publicKey).toString('hex')).toBe('530d903a');
    expect(formatVkey(vkey.name, SIG_ED25519, vkey.publicKey)).toBe(EXAMPLE_VKEY);
    const note = parseNote(EXAMPLE_NOTE);
    expect(note.text).toBe('This is an example message.\n');
    expect(checkSignature(note.text, note.signatures[0]!, [vkey])).toMatchObject({ state: 'valid' });
    expect(checkSignature('This is an example message!\n', note.signatures[0]!, [vkey])).toMatchObject({
      state: 'invalid',
    });
    // A key of the same name with another ID is unknown, not a failure (signed-note "Signatures").
    const other = formatVkey('example.com/foo', SIG_ED25519, Buffer.alloc(32, 7));
    expect(checkSignature(note.text, note.signatures[0]!, [parseVkey(other)])).toEqual({ state: 'unknown' });

    const inBrowser = await browser.parseVkey(EXAMPLE_VKEY);
    expect(inBrowser).toMatchObject({ name: 'example.com/foo', id: '530d903a' });
    const browserNote = browser.parseNote(EXAMPLE_NOTE)!;
    expect(
      await browser.checkSignature(browserNote.text, browserNote.signatures[0]!, [inBrowser!]),
    ).toMatchObject({
      state: 'valid',
    });
    expect(
      await browser.checkSignature('This is an example message!\n', browserNote.signatures[0]!, [inBrowser!]),
    ).toMatchObject({ state: 'invalid' });
  });

  test('tlog-checkpoint and tlog-cosignature: the example checkpoint and its cosignature line read as the texts say', async () => {
    const note = parseNote(COSIGNED_CHECKPOINT);
    expect(parseCheckpointText(note.text)).toMatchObject({
      origin: 'example.com/behind-the-sofa',
      size: 20852163,
      extensions: [],
    });
    expect(parseCheckpointText(note.text).rootHash.toString('base64')).toBe(
      'CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=',
    );
    const cosignature = note.signatures[1]!;
    expect(cosignature.name).toBe('witness.example.com/w1');
    // key ID || u64 timestamp || 64-byte signature; the timestamp is the one of the text's "time 1679315147" example.
    expect(cosignature.signature).toHaveLength(72);
    expect(cosignature.signature.readBigUInt64BE(0)).toBe(1679315147n);
    expect(
      checkpointText({
        origin: 'example.com/behind-the-sofa',
        size: 20852163,
        rootHash: parseCheckpointText(note.text).rootHash,
      }),
    ).toBe(note.text);
    expect(browser.parseCheckpoint(browser.parseNote(COSIGNED_CHECKPOINT)!.text)).toEqual({
      origin: 'example.com/behind-the-sofa',
      size: 20852163,
      root: parseCheckpointText(note.text).rootHash.toString('hex'),
    });
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

describe('cosignatures we make', () => {
  test('cosignature/v1 over a checkpoint verifies in both verifiers; a changed size, a zero time or a changed key do not', async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const name = 'witness.test/w9';
    const vkeyText = formatVkey(name, SIG_COSIGNATURE_V1, rawEd25519PublicKey(privateKey));
    const text = checkpointText({ origin: 'verify.test.kz/ledger', size: 7, rootHash: Buffer.alloc(32, 1) });
    const line = cosign(text, name, privateKey, 1_764_000_000n);
    const vkey = parseVkey(vkeyText);
    expect(checkSignature(text, line, [vkey])).toEqual({ state: 'valid', vkey, timestamp: 1_764_000_000n });
    expect(checkSignature(text.replace('\n7\n', '\n8\n'), line, [vkey])).toMatchObject({ state: 'invalid' });
    expect(() => cosign(text, name, privateKey, 0n)).toThrow(RangeError);
    // The same key as a note key (type 0x01) has another ID: the cosignature is not its signature.
    expect(checkSignature(text, line, [parseVkey(formatVkey(name, SIG_ED25519, vkey.publicKey))])).toEqual({
      state: 'unknown',
    });
    const logKey = generateKeyPairSync('ed25519').privateKey;
    const note = `${text}\n${signNote(text, 'verify.test.kz/ledger', logKey).line}${line.line}`;
    const pinned = (await browser.parseVkey(vkeyText))!;
    expect(await browser.checkCosignedCheckpoint(note, [pinned])).toEqual({
      checkpoint: { origin: 'verify.test.kz/ledger', size: 7, root: '01'.repeat(32) },
      cosigned: [{ name, timestamp: 1_764_000_000 }],
      invalid: [],
    });
  });

  test('malformed notes, checkpoints and vkeys are refused with a reason', async () => {
    expect(() => parseNote('no signatures\n')).toThrow(NoteError);
    expect(() => parseNote('text\n\n— name\n')).toThrow(/not a signature line/);
    expect(() => parseNote('te\u0007xt\n\n— a AAAAAAA=\n')).toThrow(/control characters/);
    expect(() => parseCheckpointText('origin\n012\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n')).toThrow(
      /leading zeros/,
    );
    expect(() => parseCheckpointText('origin\n12\nAAAA\n')).toThrow(/32 bytes/);
    expect(() => parseVkey('example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k')).toThrow(
      /SHA-256\(name, type, key\)/,
    );
    expect(() => parseVkey('example.com/foo+530d903a')).toThrow(NoteError);
    expect(
      await browser.parseVkey('example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k'),
    ).toBeNull();
    expect(browser.parseNote('no signatures\n')).toBeNull();
  });
});

describe('ledger settings', () => {
  const w = formatVkey('witness.test/w1', SIG_COSIGNATURE_V1, Buffer.alloc(32, 3));
  const settingsOf = (env: Record<string, string>) => ledgerSettings(loadConfig({ env }));

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
