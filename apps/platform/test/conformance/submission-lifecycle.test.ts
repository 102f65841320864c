/**
 * Black-box conformance of a submission's life after its creation, as its users walk it and as an attacker would:
 * media upload, sending for review, fast-track deadlines, the authority's decisions and revocations (each twice and
 * concurrently), the approval's number, what lookups then say, the revocation list and the ledger leaves
 * (shared/spec/interface-specification.md: "Submission", "Creative entry", review_due_at, "Errors"; DESIGN.md sections
 * 4, 6 and 8; apps/platform/docs/approvals.md). Answers are read through the hosts (inject, or a real socket where
 * the timing of a body matters); SQL only sets a scene the interface cannot (a structure changing owner) and reads the
 * ledger leaves of a day that is not digested yet, as test/approvals/decisions.test.ts does.
 *
 * Claims checked by other files and not repeated here:
 * - upload answers and facts of PNG/JPEG/WebP/MP4 (moov first and last), 415 for other types, 422 media_mismatch for
 *   a file that is not its type or empty, 413 by Content-Length and while streaming, 404/401/403 for other callers, a
 *   second send 409, an upload after sending 409, send naming /media and /category_id, fast-track due on a Friday
 *   afternoon: test/approvals/submission-flow.test.ts;
 * - working hours across evenings, weekends, holidays, moved and transfer days, the data file's holidays:
 *   test/approvals/working-hours.test.ts (the function; here the route counts a holiday);
 * - approve with defaults, narrowing, widening refused, a refused approval takes no number, approve twice 409, only
 *   in_review decided, numbers restart with the Almaty year, reject with a reason, revocation leaves and consecutive
 *   list versions, revoke twice 409: test/approvals/decisions.test.ts and test/approvals/approve-body.test.ts;
 * - lookup statuses on Almaty days, visibility of approvals, pending and rejected entries, envelope visibility:
 *   test/approvals/lookup.test.ts, test/approvals/end-to-end.test.ts, test/conformance/api-host.test.ts;
 * - envelope and revocation list formats and signatures, ledger blocks: test/conformance/ledger-envelopes-open-data.test.ts;
 * - who may call each route (kinds and scopes): test/core/authorisation-matrix.test.ts; another organisation's ids on
 *   every route: test/conformance/cross-organisation.test.ts.
 */
import { createHash } from 'node:crypto';
import { access, mkdtemp, readdir, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ledgerLeafObject, ledgerLeavesOfDay } from '../../src/ledger/leaves.js';
import {
  approve,
  authorityLookupKey,
  createDraft,
  inReview,
  lookup,
  type Org,
  organisation,
  reject,
  revoke,
  send,
  structures,
  upload,
} from '../approvals/helpers.js';
import { jpeg, mp4, png } from '../approvals/media-fixtures.js';
import { apiCall, type TestPlatform, startTestPlatform } from '../support/platform.js';

const T0 = new Date('2026-11-20T06:00:00Z'); // Friday 20 November 2026, 11:00 in Almaty

let p: TestPlatform;
let dataDir: string;
let operatorA: Org;
let operatorB: Org;
let agency: Org;
let authorityKey: string;
let siteA: { id: string; code: string }[];
let siteB: { id: string; code: string }[];
let seed = 1000;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-lifecycle-'));
  p = await startTestPlatform({ dataDir, now: T0 });
  operatorA = await organisation(p, 'operator');
  operatorB = await organisation(p, 'operator');
  agency = await organisation(p, 'agency');
  authorityKey = await authorityLookupKey(p);
  siteA = await structures(p, operatorA.id, 4);
  siteB = await structures(p, operatorB.id, 2);
});
afterAll(async () => {
  await p?.close();
  await rm(dataDir, { recursive: true, force: true });
});

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const nextSeed = () => {
  seed += 1;
  return seed;
};
const nextPng = (width = 32, height = 18) => png(width, height, nextSeed());
const at = (instant: string | Date) => p.clock.set(new Date(instant));
const api = (key: string | null, method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) =>
  apiCall(p.servers.api, key, method, url, body);
const read = (key: string, id: string) => api(key, 'GET', `/api/v1/submissions/${id}`);
const stored = async (hash: string) =>
  access(path.join(dataDir, 'media', hash)).then(
    () => true,
    () => false,
  );
const tmpFiles = async () => readdir(path.join(dataDir, 'media', 'tmp')).catch(() => []);

/** spec Errors: "Problem documents use media type application/problem+json with a stable code." */
function expectProblem(res: LightMyRequestResponse, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
  const doc = res.json<{ code: string; errors?: { path: string; code: string }[] }>();
  expect(doc.code).toBe(code);
  return doc;
}
const fieldErrors = (res: LightMyRequestResponse) =>
  expectProblem(res, 422, 'validation_failed').errors!.map((e) => [e.path, e.code]);

async function entries(key: string, hash: string) {
  const res = await lookup(p, key, [hash]);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ items: { approvals: Record<string, unknown>[] }[] }>().items[0]!.approvals;
}

const submitted = (
  org: Org,
  structureIds: string[],
  fields: Partial<Parameters<typeof createDraft>[2]> = {},
) =>
  inReview(p, org.key, { bytes: nextPng(), type: 'image/png' }, { structure_ids: structureIds, ...fields });

/** A real socket to the api host, for bodies whose arrival a test must pace. */
async function rawUpload(submissionId: string, key: string, contentLength: number) {
  const address = p.servers.api.server.address();
  if (!address || typeof address !== 'object') throw new Error('the api host is not listening');
  const socket = net.connect(address.port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let received = '';
  socket.on('data', (chunk) => {
    received += chunk.toString('latin1');
  });
  socket.write(
    `PUT /api/v1/submissions/${submissionId}/media HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: image/png\r\nContent-Length: ${contentLength}\r\n\r\n`,
  );
  return {
    socket,
    write: (bytes: Buffer) => new Promise<void>((resolve) => socket.write(bytes, () => resolve())),
    /** The answer's status and body, once all of it has arrived. */
    async response(): Promise<{ status: number; body: string }> {
      for (let i = 0; i < 500; i += 1) {
        const end = received.indexOf('\r\n\r\n');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(received)?.[1] ?? Number.NaN);
        if (end >= 0 && received.length >= end + 4 + length) {
          return {
            status: Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1]),
            body: received.slice(end + 4, end + 4 + length),
          };
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`no whole answer: ${received}`);
    },
  };
}

async function until(condition: () => Promise<boolean>) {
  for (let i = 0; i < 200; i += 1) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition not reached');
}

// --- media upload ---------------------------------------------------------------------------------------------

describe('media upload', () => {
  test("a new upload replaces the draft's file: what is read back, sent and looked up is the new file", async () => {
    at(T0);
    const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
    const first = nextPng(40, 20);
    const second = nextPng(64, 48);
    expect((await upload(p, operatorA.key, d.id, first, 'image/png')).statusCode).toBe(200);
    expect((await upload(p, operatorA.key, d.id, second, 'image/png')).statusCode).toBe(200);
    expect((await read(operatorA.key, d.id)).json().media).toMatchObject({
      sha256: sha(second),
      width: 64,
      height: 48,
      size_bytes: second.length,
    });
    const file = await api(operatorA.key, 'GET', `/api/v1/submissions/${d.id}/media`);
    expect(Buffer.compare(file.rawPayload, second)).toBe(0);
    expect((await send(p, operatorA.key, d.id)).statusCode).toBe(200);
    expect(await entries(operatorA.key, sha(first))).toEqual([]);
    expect(await entries(operatorA.key, sha(second))).toMatchObject([
      { status: 'pending', submission_number: d.number, width: 64, height: 48, duration_ms: null },
    ]);
  });

  test('approved and rejected submissions refuse an upload (409 state_conflict), keeping the file they were decided on', async () => {
    at(T0);
    const approved = await submitted(operatorA, [siteA[0]!.id]);
    expect((await approve(p, approved.id)).statusCode).toBe(201);
    const rejected = await submitted(operatorA, [siteA[0]!.id]);
    expect((await reject(p, rejected.id)).statusCode).toBe(200);
    for (const s of [approved, rejected]) {
      const late = nextPng();
      expectProblem(await upload(p, operatorA.key, s.id, late, 'image/png'), 409, 'state_conflict');
      expect((await read(operatorA.key, s.id)).json().media.sha256).toBe(s.sha256);
      expect(await stored(sha(late))).toBe(false);
    }
  });

  test('a body without any media type is 415 unsupported_media_type', async () => {
    const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
    const res = await p.servers.api.inject({
      method: 'PUT',
      url: `/api/v1/submissions/${d.id}/media`,
      headers: { authorization: `Bearer ${operatorA.key}` },
      payload: nextPng(),
    });
    expectProblem(res, 415, 'unsupported_media_type');
    expect((await read(operatorA.key, d.id)).json().media).toBeNull();
  });

  test('EXIF orientations 5 to 8 swap width and height (as players show the picture), 1 to 4 do not', async () => {
    const u16 = (n: number) => Buffer.from([n >> 8, n & 0xff]);
    // A big-endian TIFF header with one IFD entry: Orientation (0x0112), SHORT, one value.
    const exifJpeg = (orientation: number) => {
      const tiff = Buffer.concat([
        Buffer.from('MM\0*\0\0\0\x08', 'latin1'),
        u16(1),
        u16(0x0112),
        u16(3),
        Buffer.from([0, 0, 0, 1]),
        u16(orientation),
        u16(0),
        Buffer.from([0, 0, 0, 0]),
      ]);
      const data = Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff]);
      const base = jpeg(1920, 1080, nextSeed());
      return Buffer.concat([
        base.subarray(0, 2),
        Buffer.from([0xff, 0xe1]),
        u16(data.length + 2),
        data,
        base.subarray(2),
      ]);
    };
    const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
    for (const orientation of [1, 3, 5, 6, 8]) {
      const res = await upload(p, operatorA.key, d.id, exifJpeg(orientation), 'image/jpeg');
      expect(res.statusCode, res.body).toBe(200);
      const turned = orientation >= 5;
      expect(res.json(), `orientation ${orientation}`).toMatchObject({
        width: turned ? 1080 : 1920,
        height: turned ? 1920 : 1080,
        duration_ms: null,
      });
    }
  });

  test('a JPEG whose metadata puts its frame header past the first MiB is read, not refused', async () => {
    // Twenty APP2 segments of 65 kB (as an ICC profile split over segments is), then the frame header.
    const base = jpeg(3000, 2000, nextSeed());
    const app2 = (i: number) =>
      Buffer.concat([Buffer.from([0xff, 0xe2, 0xfd, 0xea]), Buffer.alloc(65_000, i)]);
    const bytes = Buffer.concat([
      base.subarray(0, 2),
      ...Array.from({ length: 20 }, (_, i) => app2(i)),
      base.subarray(2),
    ]);
    expect(bytes.length).toBeGreaterThan(1024 * 1024);
    const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
    const res = await upload(p, operatorA.key, d.id, bytes, 'image/jpeg');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ media_sha256: sha(bytes), width: 3000, height: 2000, duration_ms: null });
    // A PNG is still not a JPEG, however its head is walked.
    expect(fieldErrors(await upload(p, operatorA.key, d.id, nextPng(), 'image/jpeg'))).toEqual([
      ['/', 'media_mismatch'],
    ]);
  });

  describe('MP4: facts from the boxes that state them, whatever the sample tables say', () => {
    /** The content start and end of the first box of `type` at or after `from` (a flat search of the fixture). */
    const boxAt = (bytes: Buffer, type: string, from = 0) => {
      const at = bytes.indexOf(type, from, 'latin1') - 4;
      return { at, start: at + 8, end: at + bytes.readUInt32BE(at) };
    };
    const box = (type: string, content: Buffer) => {
      const header = Buffer.alloc(8);
      header.writeUInt32BE(8 + content.length);
      header.write(type, 4, 'latin1');
      return Buffer.concat([header, content]);
    };

    test('a sample table declaring four billion samples is answered (it crashed the process), the facts read', async () => {
      const bytes = mp4(640, 360, 3000, { seed: nextSeed() });
      const stsz = boxAt(bytes, 'stsz');
      // stsz: version and flags, sample_size, sample_count.
      bytes.writeUInt32BE(0xffff_ffff, stsz.start + 8);
      const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
      const res = await upload(p, operatorA.key, d.id, bytes, 'video/mp4');
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ media_sha256: sha(bytes), width: 640, height: 360, duration_ms: 3000 });
      // And the platform still answers.
      expect((await read(operatorA.key, d.id)).json().media.duration_ms).toBe(3000);
    });

    test('a fragmented movie without a movie duration states it in mvex/mehd', async () => {
      const plain = mp4(1280, 720, 4000, { seed: nextSeed() });
      const moov = boxAt(plain, 'moov');
      const mvhd = boxAt(plain, 'mvhd', moov.start);
      const content = Buffer.from(plain.subarray(moov.start, moov.end));
      // mvhd version 0: version and flags, creation, modification, timescale (1000), duration.
      content.writeUInt32BE(0, mvhd.start - moov.start + 16);
      const mehd = box('mehd', Buffer.from([0, 0, 0, 0, 0, 0, 0x1b, 0x58])); // 7000 in the movie's timescale
      const fragmented = Buffer.concat([
        plain.subarray(0, moov.at),
        box('moov', Buffer.concat([content, box('mvex', mehd)])),
        plain.subarray(moov.end),
      ]);
      const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
      const res = await upload(p, operatorA.key, d.id, fragmented, 'video/mp4');
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ width: 1280, height: 720, duration_ms: 7000 });
    });

    test('an mdat with a 64-bit size before the moov is stepped over', async () => {
      const plain = mp4(720, 1280, 2000, { seed: nextSeed(), moovLast: true, mdatBytes: 20_000 });
      const mdat = boxAt(plain, 'mdat');
      const large = Buffer.alloc(16);
      large.writeUInt32BE(1);
      large.write('mdat', 4, 'latin1');
      large.writeBigUInt64BE(BigInt(mdat.end - mdat.at + 8), 8);
      const bytes = Buffer.concat([plain.subarray(0, mdat.at), large, plain.subarray(mdat.start)]);
      const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
      const res = await upload(p, operatorA.key, d.id, bytes, 'video/mp4');
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ width: 720, height: 1280, duration_ms: 2000 });
    });

    test('boxes that do not nest, or a movie without a video track, are 422 media_mismatch, never a 5xx', async () => {
      const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
      const overlong = mp4(640, 360, 1000, { seed: nextSeed() });
      const moov = boxAt(overlong, 'moov');
      overlong.writeUInt32BE(0x7fff_0000, boxAt(overlong, 'trak', moov.start).at);
      const audio = mp4(640, 360, 1000, { seed: nextSeed() });
      audio.write('soun', boxAt(audio, 'hdlr').start + 8, 'latin1');
      for (const bytes of [overlong, audio]) {
        expect(fieldErrors(await upload(p, operatorA.key, d.id, bytes, 'video/mp4'))).toEqual([
          ['/', 'media_mismatch'],
        ]);
      }
      expect((await read(operatorA.key, d.id)).json().media).toBeNull();
    });
  });

  describe('over a real socket', () => {
    beforeAll(async () => {
      await p.servers.api.listen({ port: 0, host: '127.0.0.1' });
    });

    test('a client that goes away mid-upload leaves no temporary file, and the draft keeps its file', async () => {
      const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
      const kept = nextPng();
      expect((await upload(p, operatorA.key, d.id, kept, 'image/png')).statusCode).toBe(200);
      const raw = await rawUpload(d.id, operatorA.key, 100_000);
      await raw.write(Buffer.alloc(5_000, 7));
      await until(async () => (await tmpFiles()).length > 0);
      raw.socket.destroy();
      await until(async () => (await tmpFiles()).length === 0);
      expect((await read(operatorA.key, d.id)).json().media.sha256).toBe(sha(kept));
    });

    test('an upload that loses the race with its own send is 409 state_conflict and leaves no file behind', async () => {
      const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
      const sent = nextPng();
      expect((await upload(p, operatorA.key, d.id, sent, 'image/png')).statusCode).toBe(200);
      const late = nextPng(50, 50);
      // The upload passes the draft check and streams; the submission is sent before its last byte arrives.
      const raw = await rawUpload(d.id, operatorA.key, late.length);
      await raw.write(late.subarray(0, 20));
      await until(async () => (await tmpFiles()).length > 0);
      expect((await send(p, operatorA.key, d.id)).statusCode).toBe(200);
      await raw.write(late.subarray(20));
      const answer = await raw.response();
      expect(answer.status, answer.body).toBe(409);
      expect(JSON.parse(answer.body).code).toBe('state_conflict');
      raw.socket.destroy();
      expect(await stored(sha(late))).toBe(false);
      expect(await tmpFiles()).toEqual([]);
      expect((await read(operatorA.key, d.id)).json().media.sha256).toBe(sha(sent));
      expect(await entries(operatorA.key, sha(sent))).toMatchObject([{ status: 'pending' }]);
    });
  });
});

// --- sending for review ---------------------------------------------------------------------------------------

describe('sending for review', () => {
  test('a period that has already ended (by the Almaty day) is refused at /period_to; one ending today is sent', async () => {
    const ended = await createDraft(p, operatorA.key, {
      structure_ids: [siteA[0]!.id],
      period_from: '2026-11-01',
      period_to: '2026-11-19',
    });
    expect((await upload(p, operatorA.key, ended.id, nextPng(), 'image/png')).statusCode).toBe(200);
    at('2026-11-19T19:00:00Z'); // 00:00 on 20 November in Almaty: the 19th is over
    expect(fieldErrors(await send(p, operatorA.key, ended.id))).toEqual([['/period_to', 'out_of_range']]);
    expect((await read(operatorA.key, ended.id)).json()).toMatchObject({
      state: 'draft',
      review_due_at: null,
    });
    at('2026-11-19T18:59:59Z'); // 23:59:59 on 19 November in Almaty: the last day is not over
    expect((await send(p, operatorA.key, ended.id)).json()).toMatchObject({ state: 'in_review' });
    at(T0);
  });

  test('a structure retired since the draft chose it is refused at its index; without it the draft is sent', async () => {
    at(T0);
    const [keep, retire] = await structures(p, operatorA.id, 2);
    const d = await createDraft(p, operatorA.key, { structure_ids: [keep!.id, retire!.id] });
    expect((await upload(p, operatorA.key, d.id, nextPng(), 'image/png')).statusCode).toBe(200);
    expect(
      (await api(p.adminKey, 'POST', `/api/v1/console/structures/${retire!.id}/retire`)).statusCode,
    ).toBe(200);
    expect(fieldErrors(await send(p, operatorA.key, d.id))).toEqual([['/structure_ids/1', 'retired']]);
    expect((await read(operatorA.key, d.id)).json().state).toBe('draft');
    const edited = await api(operatorA.key, 'PATCH', `/api/v1/submissions/${d.id}`, {
      structure_ids: [keep!.id],
    });
    expect(edited.statusCode, edited.body).toBe(200);
    expect((await send(p, operatorA.key, d.id)).json()).toMatchObject({ state: 'in_review' });
  });

  test("an operator's structure that is no longer its own is refused when the draft is sent", async () => {
    const [moved] = await structures(p, operatorA.id, 1);
    const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id, moved!.id] });
    expect((await upload(p, operatorA.key, d.id, nextPng(), 'image/png')).statusCode).toBe(200);
    // No route moves a structure to another operator; the scene is set in the database.
    await p.database.db.query('UPDATE structures SET organisation_id = $2 WHERE id = $1', [
      moved!.id,
      operatorB.id,
    ]);
    expect(fieldErrors(await send(p, operatorA.key, d.id))).toEqual([['/structure_ids/1', 'not_allowed']]);
    // An agency chooses structures of any operators: the same move changes nothing for it.
    const byAgency = await createDraft(p, agency.key, { structure_ids: [moved!.id] });
    expect((await upload(p, agency.key, byAgency.id, nextPng(), 'image/png')).statusCode).toBe(200);
    expect((await send(p, agency.key, byAgency.id)).statusCode).toBe(200);
  });

  test('every fault is named in one 422 and a refused send changes nothing', async () => {
    at(T0);
    const [retire] = await structures(p, operatorA.id, 1);
    const d = await createDraft(p, operatorA.key, {
      structure_ids: [retire!.id],
      period_from: '2026-10-01',
      period_to: '2026-10-31',
      category_id: null,
    });
    await api(p.adminKey, 'POST', `/api/v1/console/structures/${retire!.id}/retire`);
    expect(fieldErrors(await send(p, operatorA.key, d.id))).toEqual([
      ['/media', 'required'],
      ['/category_id', 'required'],
      ['/period_to', 'out_of_range'],
      ['/structure_ids/0', 'retired'],
    ]);
    expect((await read(operatorA.key, d.id)).json()).toMatchObject({ state: 'draft', review_due_at: null });
  });

  test('two sends at once: one moves the draft, the other is 409 state_conflict', async () => {
    at(T0);
    const d = await createDraft(p, operatorA.key, { structure_ids: [siteA[0]!.id] });
    expect((await upload(p, operatorA.key, d.id, nextPng(), 'image/png')).statusCode).toBe(200);
    const answers = await Promise.all([send(p, operatorA.key, d.id), send(p, operatorA.key, d.id)]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 409]);
    expectProblem(answers.find((a) => a.statusCode === 409)!, 409, 'state_conflict');
  });

  test('review_due_at of a fast-track send skips the holidays of the data file, in +05:00', async () => {
    // Tuesday 15 December 2026 16:00 Almaty: 2 hours that day; Wednesday 16 December is Independence Day; 2 more
    // hours on Thursday.
    at('2026-12-15T16:00:00+05:00');
    const d = await createDraft(p, agency.key, { structure_ids: [siteA[0]!.id], fast_track: true });
    expect((await upload(p, agency.key, d.id, nextPng(), 'image/png')).statusCode).toBe(200);
    const res = await send(p, agency.key, d.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().review_due_at).toBe('2026-12-17T11:00:00+05:00');
    // Sent on the morning of a moved rest day (Monday 26 October 2026, for Republic Day on the Sunday): the count
    // starts on Tuesday at 09:00.
    at('2026-10-26T10:00:00+05:00');
    const moved = await createDraft(p, agency.key, { structure_ids: [siteA[0]!.id], fast_track: true });
    expect((await upload(p, agency.key, moved.id, nextPng(), 'image/png')).statusCode).toBe(200);
    expect((await send(p, agency.key, moved.id)).json().review_due_at).toBe('2026-10-27T13:00:00+05:00');
    at(T0);
  });
});

// --- moderation -------------------------------------------------------------------------------------------------

describe('moderation by the authority', () => {
  test('a structure retired while in review is not approved: refused until left out, then the approval omits it', async () => {
    at(T0);
    const [keep, retire] = await structures(p, operatorA.id, 2);
    const s = await submitted(operatorA, [keep!.id, retire!.id]);
    await api(p.adminKey, 'POST', `/api/v1/console/structures/${retire!.id}/retire`);
    expect(fieldErrors(await approve(p, s.id))).toEqual([['/structure_ids', 'retired']]);
    expect(fieldErrors(await approve(p, s.id, { structure_ids: [retire!.id, keep!.id] }))).toEqual([
      ['/structure_ids/0', 'retired'],
    ]);
    expect((await read(operatorA.key, s.id)).json()).toMatchObject({
      state: 'in_review',
      approval_number: null,
    });
    const ok = await approve(p, s.id, { structure_ids: [keep!.id] });
    expect(ok.statusCode, ok.body).toBe(201);
    const envelope = await api(operatorA.key, 'GET', new URL(ok.json().envelope_url).pathname);
    expect(envelope.json().body.structures).toEqual([keep!.code]);
  });

  test('two approves and a reject at once: exactly one decides, the rest are 409, and no number is lost', async () => {
    at(T0);
    const serialOf = (res: LightMyRequestResponse) => Number(res.json().approval_number.split('-')[2]);
    const baseline = serialOf(await approve(p, (await submitted(agency, [siteA[0]!.id])).id));
    const s = await submitted(agency, [siteA[0]!.id, siteB[0]!.id]);
    const answers = await Promise.all([approve(p, s.id), approve(p, s.id), reject(p, s.id)]);
    const winners = answers.filter((a) => a.statusCode === 200 || a.statusCode === 201);
    expect(winners).toHaveLength(1);
    for (const loser of answers.filter((a) => !winners.includes(a)))
      expectProblem(loser, 409, 'state_conflict');
    const state = (await read(agency.key, s.id)).json();
    const own = await entries(agency.key, s.sha256);
    const approved = winners[0]!.statusCode === 201;
    if (approved) {
      const number = winners[0]!.json().approval_number as string;
      expect(serialOf(winners[0]!)).toBe(baseline + 1);
      expect(state).toMatchObject({ state: 'approved', approval_number: number });
      expect(own.map((e) => [e['status'], e['approval_number']])).toEqual([['not_yet_valid', number]]);
      const leaves = (await ledgerLeavesOfDay(p.database.db, '2026-11-20')).filter(
        (l) => l.approval_number === number,
      );
      expect(leaves.map((l) => l.kind)).toEqual(['approval']);
    } else {
      expect(state).toMatchObject({
        state: 'rejected',
        approval_number: null,
        reject_reason: expect.any(String),
      });
      expect(own.map((e) => e['status'])).toEqual(['rejected']);
    }
    // The refused approvals took no number: the next approval takes the next serial.
    const next = await approve(p, (await submitted(agency, [siteA[0]!.id])).id);
    expect(serialOf(next)).toBe(baseline + (approved ? 2 : 1));
  });

  test('approvals of different submissions issued at once get distinct consecutive numbers', async () => {
    at(T0);
    const batch = await Promise.all([1, 2, 3, 4].map(() => submitted(agency, [siteA[1]!.id])));
    const answers = await Promise.all(batch.map((s) => approve(p, s.id)));
    for (const a of answers) expect(a.statusCode, a.body).toBe(201);
    const serials = answers.map((a) => Number(a.json().approval_number.split('-')[2])).sort((x, y) => x - y);
    expect(serials).toEqual([serials[0], serials[0]! + 1, serials[0]! + 2, serials[0]! + 3]);
    for (const a of answers) expect(a.json().approval_number).toMatch(/^APR-2026-\d{6}$/);
  });

  test('two revocations at once: one 200, one 409; the list rises by one version; the envelope is still served, unchanged', async () => {
    at(T0);
    const s = await submitted(operatorA, [siteA[2]!.id]);
    const issued = await approve(p, s.id);
    const number = issued.json().approval_number as string;
    const envelopePath = new URL(issued.json().envelope_url).pathname;
    const before = await api(operatorA.key, 'GET', envelopePath);
    const listBefore = await p.servers.verify.inject({ method: 'GET', url: '/v1/revocations.json' });
    const versionBefore = listBefore.statusCode === 200 ? listBefore.json().body.version : 0;
    const answers = await Promise.all([revoke(p, number), revoke(p, number)]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 409]);
    expectProblem(answers.find((a) => a.statusCode === 409)!, 409, 'state_conflict');
    const done = answers.find((a) => a.statusCode === 200)!.json();
    expect(done.revocation_list_version).toBe(versionBefore + 1);
    const list = (await p.servers.verify.inject({ method: 'GET', url: '/v1/revocations.json' })).json();
    expect(list.body.version).toBe(versionBefore + 1);
    expect(
      list.body.revoked.filter((r: { approval_number: string }) => r.approval_number === number),
    ).toHaveLength(1);
    const after = await api(operatorA.key, 'GET', envelopePath);
    expect(after.statusCode).toBe(200);
    expect(after.body).toBe(before.body);
    expect((await lookup(p, operatorA.key, [s.sha256])).json()).toMatchObject({
      items: [{ approvals: [{ status: 'revoked', approval_number: number }] }],
      revocation_list_version: versionBefore + 1,
    });
  });

  test('after a revocation the submission stays approved: a reject or a new approve of it is 409', async () => {
    at(T0);
    const s = await submitted(operatorA, [siteA[2]!.id]);
    const number = (await approve(p, s.id)).json().approval_number as string;
    expect((await revoke(p, number)).statusCode).toBe(200);
    expectProblem(await reject(p, s.id), 409, 'state_conflict');
    expectProblem(await approve(p, s.id), 409, 'state_conflict');
    expect((await read(operatorA.key, s.id)).json()).toMatchObject({
      state: 'approved',
      approval_number: number,
    });
  });
});

// --- the ledger -------------------------------------------------------------------------------------------------

describe('ledger leaves on the Almaty day of the decision', () => {
  test('an approval at 23:30 Almaty is a leaf of that day; its revocation at 00:30 a leaf of the next', async () => {
    at(T0);
    const s = await submitted(operatorA, [siteA[3]!.id]);
    at('2026-11-21T18:30:00Z'); // Saturday 21 November, 23:30 in Almaty
    const number = (await approve(p, s.id)).json().approval_number as string;
    at('2026-11-21T19:30:00Z'); // Sunday 22 November, 00:30 in Almaty
    expect((await revoke(p, number)).statusCode).toBe(200);
    const of = async (day: string) =>
      (await ledgerLeavesOfDay(p.database.db, day))
        .filter((l) => l.approval_number === number)
        .map(ledgerLeafObject);
    const [issued] = await of('2026-11-21');
    expect(issued).toMatchObject({
      kind: 'approval',
      signed_at: '2026-11-21T23:30:00.000+05:00',
      revoked_at: null,
    });
    expect(await of('2026-11-22')).toEqual([
      { ...issued, kind: 'revocation', revoked_at: '2026-11-22T00:30:00.000+05:00' },
    ]);
    at(T0);
  });
});

// --- the lookup through a submission's life ---------------------------------------------------------------------

describe("one file's entries through its submission's life", () => {
  test('draft: nothing; in review: pending; approved narrowed: not_yet_valid, valid, expired by Almaty day; others see only the approval', async () => {
    at(T0);
    const d = await createDraft(p, agency.key, {
      structure_ids: [siteA[0]!.id, siteB[0]!.id],
      period_from: '2026-12-01',
      period_to: '2026-12-31',
    });
    const bytes = nextPng(20, 10);
    expect((await upload(p, agency.key, d.id, bytes, 'image/png')).statusCode).toBe(200);
    const hash = sha(bytes);
    expect(await entries(agency.key, hash)).toEqual([]);
    expect((await send(p, agency.key, d.id)).statusCode).toBe(200);
    expect((await entries(agency.key, hash)).map((e) => e['status'])).toEqual(['pending']);
    expect(await entries(operatorA.key, hash)).toEqual([]);
    expect(await entries(authorityKey, hash)).toEqual([]);
    const number = (
      await approve(p, d.id, {
        valid_from: '2026-12-10',
        valid_until: '2026-12-20',
        structure_ids: [siteB[0]!.id],
      })
    ).json().approval_number as string;
    const statusAt = async (key: string, instant: string) => {
      at(instant);
      return (await entries(key, hash)).map((e) => [
        e['status'],
        e['approval_number'],
        e['valid_from'],
        e['valid_until'],
      ]);
    };
    const as = (status: string) => [[status, number, '2026-12-10', '2026-12-20']];
    expect(await statusAt(agency.key, '2026-12-09T18:59:59Z')).toEqual(as('not_yet_valid'));
    expect(await statusAt(agency.key, '2026-12-09T19:00:00Z')).toEqual(as('valid'));
    expect(await statusAt(operatorB.key, '2026-12-20T18:59:59Z')).toEqual(as('valid'));
    expect(await statusAt(authorityKey, '2026-12-20T19:00:00Z')).toEqual(as('expired'));
    // The entries above hold the approval alone: the pending entry went with the decision. A's structure was
    // narrowed away: A sees nothing.
    expect(await entries(operatorA.key, hash)).toEqual([]);
    at(T0);
  });
});
