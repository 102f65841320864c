import { appendFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { VerificationError, verifySignedDocument } from '@ooh/verify';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Clock, systemClock } from '../../src/clock.js';
import { type Database, openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import type { WireStatusRecord } from '../../src/log/records.js';
import { memoryLogger } from '../../src/logger.js';
import { EnvelopeVerifier } from '../../src/media/envelope.js';
import { type MediaItem, MediaLibrary } from '../../src/media/library.js';
import { manifestFor, sha256Of, swapKeepingSizeAndMtime, writeMedia } from '../helpers/media.js';
import { createTestPki, signEnvelope, type TestPki } from '../helpers/pki.js';
import { tempDir } from '../helpers/temp.js';

describe('media library', () => {
  let pki: TestPki;
  let dir: ReturnType<typeof tempDir>;
  let mediaDir: string;
  let db: Database;
  let log: PlayLog;
  let revoked: Set<string>;
  let library: MediaLibrary | null;

  beforeAll(async () => {
    pki = await createTestPki();
  });
  beforeEach(() => {
    dir = tempDir();
    mediaDir = join(dir.path, 'media');
    db = openAgentDatabase(join(dir.path, 'agent.sqlite'));
    log = new PlayLog(db);
    revoked = new Set();
    library = null;
  });
  afterEach(async () => {
    await library?.stop();
    db.close();
    dir.cleanup();
  });

  function create(
    options: {
      sidecarGraceMs?: number;
      stabilityMs?: number;
      verifier?: EnvelopeVerifier;
      clock?: Clock;
    } = {},
  ): MediaLibrary {
    library = new MediaLibrary({
      ...(options.verifier ? { verifier: options.verifier } : {}),
      mediaDir,
      structure: 'ALM-0001',
      trustedRootsPem: [pki.authorityRootPem],
      revocations: { isRevoked: (number) => revoked.has(number) },
      clock: options.clock ?? systemClock,
      log,
      logger: memoryLogger(),
      stabilityMs: options.stabilityMs ?? 200,
      sidecarGraceMs: options.sidecarGraceMs ?? 0,
    });
    return library;
  }

  function rejects() {
    return log
      .records()
      .map((r) => r.record)
      .filter((r): r is WireStatusRecord => r.kind === 'reject');
  }

  async function nextChange(
    lib: MediaLibrary,
    predicate: (items: MediaItem[]) => boolean,
  ): Promise<MediaItem[]> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no matching change')), 15_000);
      const off = lib.onChange((items) => {
        if (!predicate(items)) return;
        clearTimeout(timer);
        off();
        resolve(items);
      });
    });
  }

  it('finds playable files at start, slot folders included, and refuses the rest once each', async () => {
    await writeMedia(pki, mediaDir, 'ad.png', 'png bytes');
    await writeMedia(pki, mediaDir, 'clip.webm', 'webm bytes', {
      manifest: { duration_ms: 15_000, approval_number: 'APP-V' },
    });
    await writeMedia(pki, mediaDir, 'gov/notice.png', 'gov bytes', {
      manifest: { approval_number: 'GOV-1' },
    });
    await writeMedia(pki, mediaDir, 'unsigned.jpg', 'unsigned', { sidecar: false });
    await writeMedia(pki, mediaDir, 'wrong.jpg', 'actual bytes', {
      manifest: { media_sha256: sha256Of('other bytes') },
    });
    writeFileSync(join(mediaDir, 'notes.txt'), 'not media');
    await new Promise((resolve) => setTimeout(resolve, 250));
    const lib = create();
    await lib.start();

    const items = lib.playable();
    expect(items.map((i) => [i.relativePath, i.kind, i.slot, i.durationMs])).toEqual([
      ['ad.png', 'image', null, null],
      ['clip.webm', 'video', null, 15_000],
      ['gov/notice.png', 'image', 'gov', null],
    ]);
    expect(rejects().map((r) => [r.code, (r.detail as { file: string }).file])).toEqual(
      expect.arrayContaining([
        ['NO_SIGNATURE', 'unsigned.jpg'],
        ['HASH_MISMATCH', 'wrong.jpg'],
      ]),
    );
    expect(rejects()).toHaveLength(2);

    // Scans again and a restart do not repeat the rejects.
    await lib.reevaluateAll();
    await lib.reevaluateAll();
    await lib.stop();
    const again = create();
    await again.start();
    expect(rejects()).toHaveLength(2);
    expect(again.playable()).toHaveLength(3);
  });

  it('picks up a new file, ignores it while partially written, and drops it when deleted', async () => {
    // Stability 1 s, pieces written 100 ms apart: the file must not be read before the last piece.
    const lib = create({ stabilityMs: 1000 });
    await lib.start();
    const content = Buffer.alloc(200_000, 7);
    const sha = sha256Of(content);
    writeFileSync(
      join(mediaDir, 'big.png.envelope.json'),
      JSON.stringify(await signEnvelope(pki, manifestFor(sha))),
    );
    const appeared = nextChange(lib, (items) => items.some((i) => i.relativePath === 'big.png'));
    // Written in pieces, 100 ms apart (under the 200 ms stability threshold).
    const path = join(mediaDir, 'big.png');
    writeFileSync(path, content.subarray(0, 50_000));
    for (let offset = 50_000; offset < content.length; offset += 50_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      appendFileSync(path, content.subarray(offset, offset + 50_000));
    }
    const items = await appeared;
    expect(items.find((i) => i.relativePath === 'big.png')?.sha256).toBe(sha);
    expect(rejects()).toEqual([]);

    const gone = nextChange(lib, (list) => list.every((i) => i.relativePath !== 'big.png'));
    rmSync(path);
    await gone;
    expect(lib.isPlayable('big.png', sha)).toBe(false);
  });

  it('forgets a file removed while it was still settling', async () => {
    const lib = create({ stabilityMs: 300 });
    await lib.start();
    await writeMedia(pki, mediaDir, 'brief.png', 'here and gone');
    await new Promise((resolve) => setTimeout(resolve, 50));
    rmSync(join(mediaDir, 'brief.png'));
    await new Promise((resolve) => setTimeout(resolve, 900));
    expect(lib.files()).toEqual([]);
    expect(rejects()).toEqual([]);
  });

  it('ignores temporary names until the copy is renamed into place', async () => {
    const lib = create();
    await lib.start();
    const sha = await writeMedia(pki, mediaDir, 'incoming.png.part', 'image bytes', { sidecar: false });
    writeFileSync(
      join(mediaDir, 'incoming.png.envelope.json'),
      JSON.stringify(await signEnvelope(pki, manifestFor(sha))),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(lib.playable()).toEqual([]);
    const appeared = nextChange(lib, (items) => items.length === 1);
    renameSync(join(mediaDir, 'incoming.png.part'), join(mediaDir, 'incoming.png'));
    await appeared;
    expect(rejects()).toEqual([]);
  });

  it('waits for a late sidecar before calling a file unsigned', async () => {
    const lib = create({ sidecarGraceMs: 60_000 });
    await lib.start();
    const sha = await writeMedia(pki, mediaDir, 'late.png', 'late bytes', { sidecar: false });
    for (let i = 0; i < 200 && lib.files().length === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(lib.files()).toEqual([{ relativePath: 'late.png', sha256: sha, status: 'waiting' }]);
    const appeared = nextChange(lib, (items) => items.length === 1);
    writeFileSync(
      join(mediaDir, 'late.png.envelope.json'),
      JSON.stringify(await signEnvelope(pki, manifestFor(sha))),
    );
    await appeared;
    expect(rejects()).toEqual([]);
  });

  it('drops a file the moment its approval is revoked, with one REVOKED reject', async () => {
    await writeMedia(pki, mediaDir, 'ad.png', 'png bytes', { manifest: { approval_number: 'APP-R' } });
    await new Promise((resolve) => setTimeout(resolve, 250));
    const lib = create();
    await lib.start();
    expect(lib.playable()).toHaveLength(1);
    revoked.add('APP-R');
    const emptied = nextChange(lib, (items) => items.length === 0);
    await lib.reevaluateAll();
    await emptied;
    await lib.reevaluateAll();
    expect(rejects().map((r) => r.code)).toEqual(['REVOKED']);
    expect(rejects()[0]!.detail).toMatchObject({ file: 'ad.png', approval_number: 'APP-R' });
  });
  it('a file overwritten with bytes of the same size and its mtime put back is read again, not played as approved', async () => {
    const approved = await writeMedia(pki, mediaDir, 'ad.png', 'APPROVED-CONTENT-0123456789');
    await new Promise((resolve) => setTimeout(resolve, 250));
    const lib = create();
    await lib.start();
    const [item] = lib.playable();
    expect(item?.sha256).toBe(approved);
    // Same size, same mtime (touch -r): only the ctime moved.
    const swapped = swapKeepingSizeAndMtime(join(mediaDir, 'ad.png'), 'UNAPPROVED-CONTENT-ABCDEFGH');
    // What the periodic recheck does: the verdict goes at once, before the new bytes have settled and been read.
    await lib.reevaluateAll();
    expect(lib.playable()).toEqual([]);
    expect(lib.isPlayable('ad.png', approved)).toBe(false);
    expect(lib.unchanged(item!)).toBe(false);
    // Once read, they are refused as what they are.
    for (let i = 0; i < 100 && rejects().length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(rejects().map((r) => [r.code, r.detail])).toEqual([
      ['HASH_MISMATCH', expect.objectContaining({ file: 'ad.png', media_sha256: swapped })],
    ]);
    expect(lib.files()).toEqual([
      expect.objectContaining({ relativePath: 'ad.png', sha256: swapped, status: 'refused' }),
    ]);
  });

  it('an overwritten file stops being playable as soon as the change is seen, not after the stability wait', async () => {
    const approved = await writeMedia(pki, mediaDir, 'ad.png', 'APPROVED');
    // A long stability wait: the new bytes are read only 1.5 s after they stop changing.
    await new Promise((resolve) => setTimeout(resolve, 1600));
    const lib = create({ stabilityMs: 1500 });
    await lib.start();
    expect(lib.playable()).toHaveLength(1);
    writeFileSync(join(mediaDir, 'ad.png'), 'SOMETHING ELSE ENTIRELY, NOT APPROVED');
    await lib.reevaluateAll();
    const seenAt = Date.now();
    expect(lib.playable()).toEqual([]);
    expect(lib.isPlayable('ad.png', approved)).toBe(false);
    expect(lib.files()).toEqual([
      { relativePath: 'ad.png', sha256: null, status: 'waiting', reason: expect.stringMatching(/^changed/) },
    ]);
    // Unrestored mtime: the watcher's change event drops it as well, and it stays dropped until read.
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(Date.now() - seenAt).toBeLessThan(1500);
    expect(lib.playable()).toEqual([]);
    expect(rejects()).toEqual([]);
  });

  it('a file renamed over by a copy of the same bytes is judged again, and plays again as the copy', async () => {
    const approved = await writeMedia(pki, mediaDir, 'ad.png', 'same approved bytes');
    await new Promise((resolve) => setTimeout(resolve, 250));
    const lib = create();
    await lib.start();
    const [item] = lib.playable();
    // The same bytes copied in under another inode: not the file the verdict was on, read again, playable again.
    writeFileSync(join(mediaDir, 'ad.png.part'), 'same approved bytes');
    renameSync(join(mediaDir, 'ad.png.part'), join(mediaDir, 'ad.png'));
    expect(lib.unchanged(item!)).toBe(false);
    expect(lib.playable()).toEqual([]);
    const back = await nextChange(lib, (items) => items.length === 1);
    expect(back[0]!.sha256).toBe(approved);
    expect(back[0]!.fingerprint).not.toBe(item!.fingerprint);
    expect(lib.unchanged(back[0]!)).toBe(true);
    expect(rejects()).toEqual([]);
  });

  it('rechecks do not verify a signature again; a changed envelope is verified again', async () => {
    const calls: number[] = [];
    const verifier = new EnvelopeVerifier({
      trustedRootsPem: [pki.authorityRootPem],
      verifyDocument: (text, validate, roots, at) => {
        calls.push(text.length);
        return verifySignedDocument(text, validate, roots, at);
      },
    });
    let now = new Date();
    await writeMedia(pki, mediaDir, 'ad.png', 'png bytes', {
      manifest: { approval_number: 'APP-1', valid_until: '2099-12-31' },
    });
    await writeMedia(pki, mediaDir, 'other.png', 'other bytes', { manifest: { approval_number: 'APP-2' } });
    await new Promise((resolve) => setTimeout(resolve, 250));
    const lib = create({ verifier, clock: { now: () => now } });
    await lib.start();
    expect(lib.playable().map((item) => item.relativePath)).toEqual(['ad.png', 'other.png']);
    expect(calls).toHaveLength(2);

    // Rechecks: the periodic one, a new revocation list, a later day. Dates and revocation are judged again,
    // the signature is not.
    await lib.reevaluateAll();
    revoked.add('APP-2');
    await lib.reevaluateAll();
    expect(lib.playable().map((item) => item.relativePath)).toEqual(['ad.png']);
    now = new Date('2100-01-02T00:00:00Z');
    await lib.reevaluateAll();
    expect(lib.files().find((file) => file.relativePath === 'ad.png')).toMatchObject({
      status: 'refused',
      code: 'BAD_SIGNATURE',
      reason: 'signing certificate expired',
    });
    now = new Date();
    await lib.reevaluateAll();
    expect(calls).toHaveLength(2);

    // A new envelope for the same file (the approval was reissued): verified again, once.
    const signed = await signEnvelope(pki, manifestFor(sha256Of('png bytes'), { approval_number: 'APP-1B' }));
    writeFileSync(join(mediaDir, 'ad.png.envelope.json'), JSON.stringify(signed));
    await lib.schedule('ad.png');
    await lib.reevaluateAll();
    expect(calls).toHaveLength(3);
    expect(lib.playable().map((item) => item.approvalNumber)).toEqual(['APP-1B']);
  });

  it('dates a reject when it is logged: a clock correction during the verification is taken', async () => {
    // The board runs 10 minutes fast until the agent corrects its clock, here while the signature is checked.
    let now = new Date(Date.now() + 600_000);
    const verifier = new EnvelopeVerifier({
      trustedRootsPem: [pki.authorityRootPem],
      verifyDocument: async () => {
        now = new Date(now.getTime() - 600_000);
        return { ok: false, error: new VerificationError('cms_bad_signature', 'forged') };
      },
    });
    await writeMedia(pki, mediaDir, 'forged.png', 'png bytes');
    await new Promise((resolve) => setTimeout(resolve, 250));
    const lib = create({ verifier, clock: { now: () => now } });
    const before = Date.now();
    await lib.start();
    const [reject] = rejects();
    expect(reject).toMatchObject({ kind: 'reject', code: 'BAD_SIGNATURE' });
    const at = Date.parse(reject!.at);
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    expect(at).toBeLessThanOrEqual(Date.now() + 1000);
  });
});
