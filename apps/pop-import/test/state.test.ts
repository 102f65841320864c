import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generateEs256KeyPair } from '@ooh/crypto';
import { createProgress } from '@ooh/progress';
import { afterEach, describe, expect, test } from 'vitest';
import { runImport } from '../src/import.js';
import { parseMapping } from '../src/mapping.js';
import { type MappedPlay, planBatches } from '../src/plan.js';
import { ImportState, StateError, type StoredAnswer } from '../src/state.js';

const SOURCE = '6a0f4f5e-2c1b-4d7a-9b3e-0c5d8e9f1a2b';
const OTHER = '0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9';
const FIXTURES = new URL('./fixtures/', import.meta.url);
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function folder(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ooh-pop-state-'));
  dirs.push(dir);
  return path.join(dir, 'state');
}

const PLAYS: MappedPlay[] = [0, 1, 2].map((i) => ({
  line: i + 2,
  player: 'p1',
  playId: `play-${i}`,
  target: { approval_number: 'APR-2026-000001', media_sha256: 'a'.repeat(64) },
  startMs: 1_790_000_000_000 + i * 20_000,
  endMs: 1_790_000_015_000 + i * 20_000,
  durationMs: 15_000,
}));

function commit(state: ImportState, timeZone: string | null = 'Asia/Almaty') {
  const plan = planBatches(PLAYS, state.sourceId, state.counters, { maxRecords: 2 });
  state.commitPlan({
    fingerprint: 'f'.repeat(64),
    file: 'export.csv',
    format: 'xibo',
    plannedAt: new Date('2026-11-20T06:00:00Z'),
    timeZone,
    start: plan.start,
    end: plan.end,
    batches: plan.batches,
  });
  return plan;
}

const ANSWER: StoredAnswer = {
  received: 2,
  accepted: 2,
  duplicates: 0,
  refused: 0,
  flagged: 0,
  duplicate: false,
  reasons: {},
  flags: {},
};

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof StateError) return error.code;
    throw error;
  }
  return 'no error';
}

describe('the state folder of an installation', () => {
  test('a plan is taken with its bodies; counters, bodies and answers survive a restart', () => {
    const dir = folder();
    const state = ImportState.open(dir, SOURCE, { lock: true });
    const plan = commit(state);
    expect(readFileSync(state.pendingFile(0)).equals(plan.batches[0]!.body)).toBe(true);
    state.recordAnswer(0, ANSWER);
    state.close();
    const again = ImportState.open(dir, SOURCE, { lock: true });
    expect(again.counters).toEqual(plan.end);
    expect(again.unanswered().map(({ batch }) => batch.batch_seq)).toEqual([1]);
    expect(again.pendingBody(again.batch(1)!)!.equals(plan.batches[1]!.body)).toBe(true);
    again.close();
  });

  test('answers journaled by a run that crashed are applied; a line cut short is ignored', () => {
    const dir = folder();
    const state = ImportState.open(dir, SOURCE, { lock: true });
    commit(state);
    state.recordAnswer(0, ANSWER);
    // The crash: no close(), half a line written after the answer.
    appendFileSync(path.join(dir, 'answers.ndjson'), '{"batch_seq":1,"answ');
    const after = ImportState.open(dir, SOURCE, { lock: true });
    expect(after.batch(0)!.answer).toEqual(ANSWER);
    expect(after.batch(1)!.answer).toBeNull();
    after.close();
  });

  test("another installation's folder, a changed time zone and a broken file are refused", () => {
    const dir = folder();
    const state = ImportState.open(dir, SOURCE, { lock: true });
    commit(state);
    state.close();
    expect(codeOf(() => ImportState.open(dir, OTHER, { lock: true }))).toBe('other_source');
    const reopened = ImportState.open(dir, SOURCE, { lock: false });
    expect(codeOf(() => reopened.checkTimeZone('UTC'))).toBe('time_zone_changed');
    expect(codeOf(() => reopened.checkTimeZone('Asia/Almaty'))).toBe('no error');
    expect(codeOf(() => reopened.checkTimeZone(null))).toBe('no error');
    writeFileSync(path.join(dir, 'state.json'), '{"v":1,');
    expect(codeOf(() => ImportState.open(dir, SOURCE, { lock: true }))).toBe('corrupt');
    writeFileSync(path.join(dir, 'state.json'), JSON.stringify({ v: 2 }));
    expect(codeOf(() => ImportState.open(dir, SOURCE, { lock: true }))).toBe('corrupt');
  });

  test('--first-batch-seq starts a new folder there, and is refused on a folder that numbers already', () => {
    const dir = folder();
    const state = ImportState.open(dir, SOURCE, { lock: true, firstBatchSeq: 40 });
    expect(state.counters.batchSeq).toBe(40);
    const plan = commit(state);
    expect(plan.batches.map((b) => b.batchSeq)).toEqual([40, 41]);
    state.close();
    expect(codeOf(() => ImportState.open(dir, SOURCE, { lock: true, firstBatchSeq: 0 }))).toBe(
      'other_source',
    );
  });

  test('an unanswered batch whose bytes are gone stops the next import of another export', async () => {
    const dir = folder();
    const state = ImportState.open(dir, SOURCE, { lock: true });
    commit(state);
    state.close();
    rmSync(path.join(dir, 'pending', '0.json'));
    const sent: unknown[] = [];
    const attempt = runImport({
      file: new URL('xibo-proof-of-play-2026-11-20.csv', FIXTURES).pathname,
      timeZone: 'Asia/Almaty',
      mapping: parseMapping(readFileSync(new URL('xibo-mapping.json', FIXTURES), 'utf8')),
      stateFolder: dir,
      send: {
        apiUrl: 'http://127.0.0.1:9',
        apiKey: 'k',
        sourceId: SOURCE,
        privateKey: generateEs256KeyPair().privateKey,
        fetch: (async (...args: unknown[]) => {
          sent.push(args);
          throw new Error('nothing may be sent');
        }) as unknown as typeof fetch,
      },
      progress: createProgress({ mode: 'never' }),
    });
    await expect(attempt).rejects.toMatchObject({ code: 'bytes_missing' });
    expect(sent).toEqual([]);
    // Nothing was planned over it, and the folder was given back.
    const after = ImportState.open(dir, SOURCE, { lock: true });
    expect(after.imports).toHaveLength(1);
    expect(after.counters.batchSeq).toBe(2);
    after.close();
  });
});
