import { createHash, createPublicKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import {
  checkCosignedCheckpoint,
  checkSignature,
  cosignatureMessage,
  keyIdHex,
  type NoteSignature,
  parseCheckpoint,
  parseNote,
  parseVkey,
  readVkey,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  signedByLedgerKey,
  type Vkey,
} from '../src/index.js';

/*
 * The one reader of C2SP verifier keys, signed notes and checkpoints and the one check of their signatures, against
 * the examples the C2SP texts publish (C2SP/C2SP at 5ba5ee8): signed-note.md "Verifier keys / Example",
 * tlog-checkpoint.md and tlog-cosignature.md (the checkpoint with a cosignature). Signatures of our own are made here
 * with node:crypto, straight from the texts, so this file does not lean on the platform's signer (its round trip is
 * apps/platform/test/ledger/note.test.ts).
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

const CHECKPOINT_TEXT = 'verify.test.kz/ledger\n7\nAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n';

/** A key of ours, as signed-note writes it: its vkey text, from node:crypto's raw public key. */
function vkeyOf(name: string, type: number, key: KeyObject): string {
  const raw = createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(-32);
  const id = createHash('sha256')
    .update(Buffer.concat([Buffer.from(`${name}\n`), Buffer.from([type]), raw]))
    .digest()
    .subarray(0, 4);
  return `${name}+${id.toString('hex')}+${Buffer.concat([Buffer.from([type]), raw]).toString('base64')}`;
}

/** tlog-cosignature: key ID || u64 timestamp || Ed25519 over "cosignature/v1\ntime <t>\n<text>". */
function cosignatureOf(vkey: Vkey, key: KeyObject, text: string, time: bigint): NoteSignature {
  const stamp = Buffer.alloc(8);
  stamp.writeBigUInt64BE(time);
  const signature = Buffer.concat([
    stamp,
    sign(null, Buffer.from(`cosignature/v1\ntime ${time}\n${text}`), key),
  ]);
  const line = `— ${vkey.name} ${Buffer.concat([Buffer.from(vkey.id, 'hex'), signature]).toString('base64')}\n`;
  return { name: vkey.name, id: vkey.id, signature, line };
}

const flipped = (bytes: Uint8Array, at: number): Uint8Array => {
  const copy = Uint8Array.from(bytes);
  copy[at]! ^= 0x01;
  return copy;
};

describe('the C2SP examples', () => {
  test('signed-note: the example vkey reads and verifies the example note; a changed text or another key ID does not', async () => {
    const vkey = (await parseVkey(EXAMPLE_VKEY))!;
    expect(vkey).toMatchObject({
      name: 'example.com/foo',
      id: '530d903a',
      type: SIG_ED25519,
      text: EXAMPLE_VKEY,
    });
    expect(await keyIdHex(vkey.name, SIG_ED25519, vkey.publicKey)).toBe('530d903a');
    const note = parseNote(EXAMPLE_NOTE)!;
    expect(note.text).toBe('This is an example message.\n');
    expect(note.signatures[0]).toMatchObject({ name: 'example.com/foo', id: '530d903a' });
    expect(note.signatures[0]!.line).toBe(EXAMPLE_NOTE.slice(EXAMPLE_NOTE.indexOf('—')));
    expect(await checkSignature(note.text, note.signatures[0]!, [vkey])).toEqual({
      state: 'valid',
      vkey,
      timestamp: null,
    });
    expect(await checkSignature('This is an example message!\n', note.signatures[0]!, [vkey])).toEqual({
      state: 'invalid',
      vkey,
    });
    // signed-note "Signatures": a key of the same name with another ID is unknown, not a failure.
    const sameName = { ...vkey, id: '00000000' };
    expect(await checkSignature(note.text, note.signatures[0]!, [sameName])).toEqual({ state: 'unknown' });
  });

  test('tlog-checkpoint and tlog-cosignature: the example checkpoint and its cosignature read as the texts say', () => {
    const note = parseNote(COSIGNED_CHECKPOINT)!;
    expect(parseCheckpoint(note.text)).toEqual({
      origin: 'example.com/behind-the-sofa',
      size: 20852163,
      root: Buffer.from('CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=', 'base64').toString('hex'),
    });
    const cosignature = note.signatures[1]!;
    expect(cosignature.name).toBe('witness.example.com/w1');
    // key ID || u64 timestamp || 64-byte signature; the timestamp is the one of the text's "time 1679315147" example.
    expect(cosignature.signature).toHaveLength(72);
    expect(Buffer.from(cosignature.signature).readBigUInt64BE(0)).toBe(1679315147n);
    expect(new TextDecoder().decode(cosignatureMessage('x\n', 1679315147n))).toBe(
      'cosignature/v1\ntime 1679315147\nx\n',
    );
  });
});

describe('cosignatures', () => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const name = 'witness.test/w9';

  test('cosignature/v1 verifies with its key; a flipped byte, a changed size, a zero time or the note key of the same key do not', async () => {
    const vkey = (await parseVkey(vkeyOf(name, SIG_COSIGNATURE_V1, privateKey)))!;
    const sig = cosignatureOf(vkey, privateKey, CHECKPOINT_TEXT, 1_764_000_000n);
    expect(await checkSignature(CHECKPOINT_TEXT, sig, [vkey])).toEqual({
      state: 'valid',
      vkey,
      timestamp: 1_764_000_000,
    });
    for (const at of [0, 7, 8, 40, 71]) {
      const tampered = { ...sig, signature: flipped(sig.signature, at) };
      expect(await checkSignature(CHECKPOINT_TEXT, tampered, [vkey]), `byte ${at}`).toEqual({
        state: 'invalid',
        vkey,
      });
    }
    expect(await checkSignature(CHECKPOINT_TEXT.replace('\n7\n', '\n8\n'), sig, [vkey])).toEqual({
      state: 'invalid',
      vkey,
    });
    const zero = cosignatureOf(vkey, privateKey, CHECKPOINT_TEXT, 0n);
    expect(await checkSignature(CHECKPOINT_TEXT, zero, [vkey])).toEqual({ state: 'invalid', vkey });
    expect(
      await checkSignature(CHECKPOINT_TEXT, { ...sig, signature: sig.signature.subarray(0, 71) }, [vkey]),
    ).toEqual({ state: 'invalid', vkey });
    // The same key as a note key (type 0x01) has another key ID: the cosignature is not its signature.
    const noteKey = (await parseVkey(vkeyOf(name, SIG_ED25519, privateKey)))!;
    expect(noteKey.id).not.toBe(vkey.id);
    expect(await checkSignature(CHECKPOINT_TEXT, sig, [noteKey])).toEqual({ state: 'unknown' });
  });

  test('checkCosignedCheckpoint and signedByLedgerKey read a note of a log signature and a cosignature', async () => {
    const logKey = generateKeyPairSync('ed25519').privateKey;
    const logVkey = (await parseVkey(vkeyOf('verify.test.kz/ledger', SIG_ED25519, logKey)))!;
    const logLine = `— ${logVkey.name} ${Buffer.concat([Buffer.from(logVkey.id, 'hex'), sign(null, Buffer.from(CHECKPOINT_TEXT), logKey)]).toString('base64')}\n`;
    const witness = (await parseVkey(vkeyOf(name, SIG_COSIGNATURE_V1, privateKey)))!;
    const note = `${CHECKPOINT_TEXT}\n${logLine}${cosignatureOf(witness, privateKey, CHECKPOINT_TEXT, 1_764_000_000n).line}`;
    expect(await checkCosignedCheckpoint(note, [witness], 1_764_000_000_000)).toEqual({
      checkpoint: { origin: 'verify.test.kz/ledger', size: 7, root: '01'.repeat(32) },
      cosigned: [{ name, timestamp: 1_764_000_000 }],
      invalid: [],
    });
    expect(await signedByLedgerKey(note, logVkey)).toBe(true);
    expect(await signedByLedgerKey(note, witness)).toBe(false);
  });
});

describe('refusals', () => {
  test('a vkey is refused with a code that says why', async () => {
    const cases: [string, string][] = [
      ['example.com/foo+530d903a', 'vkey_malformed'],
      ['+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k', 'vkey_name'],
      ['example.com/foo+530D903A+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k', 'vkey_key_id'],
      ['example.com/foo+0000+AAAA', 'vkey_key_id'],
      ['example.com/foo+530d903a+Aeky eRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k', 'malformed'],
      ['example.com/foo+530d903a+Aeky*Rrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k', 'malformed'],
      // Type 0x02 (ECDSA) and a 31-byte key: not an Ed25519 vkey.
      [
        `example.com/foo+530d903a+${Buffer.concat([Buffer.from([2]), Buffer.alloc(32)]).toString('base64')}`,
        'unsupported_algorithm',
      ],
      [
        `example.com/foo+530d903a+${Buffer.concat([Buffer.from([1]), Buffer.alloc(31)]).toString('base64')}`,
        'unsupported_algorithm',
      ],
      // The ID of the example with its last digit changed, and the example's key under another name.
      ['example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k', 'vkey_key_id_differs'],
      ['example.com/bar+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k', 'vkey_key_id_differs'],
    ];
    for (const [text, code] of cases) {
      const read = await readVkey(text);
      expect(read.ok ? 'ok' : read.error.code, text).toBe(code);
      expect(await parseVkey(text)).toBeNull();
    }
    await expect(readVkey(` ${EXAMPLE_VKEY}\n`)).resolves.toMatchObject({
      ok: true,
      vkey: { text: EXAMPLE_VKEY },
    });
  });

  test('with a synchronous SHA-256 the same reading answers at once, with the same codes', () => {
    const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest();
    const read = readVkey(EXAMPLE_VKEY, sha256);
    expect(read).toMatchObject({ ok: true, vkey: { name: 'example.com/foo', id: '530d903a' } });
    const wrongId = readVkey('example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k', sha256);
    expect(wrongId.ok ? null : wrongId.error.code).toBe('vkey_key_id_differs');
    const malformed = readVkey('example.com/foo', sha256);
    expect(malformed.ok ? null : malformed.error.code).toBe('vkey_malformed');
    expect(() => readVkey(42 as unknown as string)).toThrow(
      expect.objectContaining({ code: 'invalid_argument' }),
    );
  });

  test('malformed notes and checkpoints are null', () => {
    expect(parseNote('no signatures\n')).toBeNull();
    expect(parseNote('text\n\n— name\n')).toBeNull();
    expect(parseNote('te\u0007xt\n\n— a AAAAAAA=\n')).toBeNull();
    expect(parseNote(EXAMPLE_NOTE.slice(0, -1))).toBeNull();
    expect(parseCheckpoint('origin\n012\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n')).toBeNull();
    expect(parseCheckpoint('origin\n12\nAAAA\n')).toBeNull();
    expect(parseCheckpoint('origin\n12\n')).toBeNull();
    expect(parseCheckpoint('origin\n12\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=')).toBeNull();
    expect(parseCheckpoint('origin\n12\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\next\n')).toMatchObject({
      size: 12,
    });
  });
});
