import {
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import { sha256Hex } from '@ooh/crypto';
import { collectFieldErrors } from '@ooh/protocol';
import { type Static, Type } from '@sinclair/typebox';
import { FORMATS } from './formats/source.js';
import type { Counters } from './plan.js';

/*
 * The importer's memory of one CMS installation, in a folder of its own (decision: a state file, not numbers derived
 * from the data; docs/decisions.md "pop import").
 *
 * Why: spec record seq runs "+1 for every record across batches" per player and "records at or below the highest
 * number already taken for their player are not counted again": tomorrow's export must number above today's, and a
 * play that reaches a later export late must still get a number above the mark. Numbers derived from the data (a
 * play's time) would leave gaps, and a late play would fall under the mark and be lost as a duplicate. batch_seq is
 * "taken once per installation", which nothing in an export can say either. So the folder keeps the counters, like
 * the agent's SQLite play log keeps its own.
 *
 *   state.json      counters (next batch_seq, last body hash, each player's last seq), the time zone, and every
 *                   import: its fingerprint, where its numbering started, its batches (batch_seq, SHA-256, answer)
 *   pending/N.json  the exact body of batch N while it is not answered (written before state.json names it)
 *   answers.ndjson  answers as they come, appended and synced; folded into state.json when a run ends
 *   lock            the pid of the run holding the folder
 *
 * Crash safety: a plan's bodies are written and synced before state.json (replaced atomically) takes the plan, so
 * after a crash either the plan is taken and its bodies are on disk, or neither, and the next run plans the same
 * bytes again. An answer is synced to the journal before its pending body is removed.
 */

export const STATE_VERSION = 1;

const Hex64 = Type.String({ pattern: '^[0-9a-f]{64}$' });
const Count = Type.Integer({ minimum: 0 });

export const StoredAnswer = Type.Object({
  received: Count,
  accepted: Count,
  duplicates: Count,
  refused: Count,
  flagged: Count,
  duplicate: Type.Boolean(),
  /** Refused records by reason. */
  reasons: Type.Record(Type.String(), Count),
  /** Flagged records by flag. */
  flags: Type.Record(Type.String(), Count),
});
export type StoredAnswer = Static<typeof StoredAnswer>;

const StoredBatch = Type.Object({
  batch_seq: Count,
  sha256: Hex64,
  records: Count,
  answer: Type.Union([StoredAnswer, Type.Null()]),
});
export type StoredBatch = Static<typeof StoredBatch>;

const StoredCounters = Type.Object({
  batch_seq: Count,
  prev_sha256: Type.String({ pattern: '^(?:[0-9a-f]{64})?$' }),
  seqs: Type.Record(Type.String(), Count),
});

const ImportEntry = Type.Object({
  fingerprint: Hex64,
  file: Type.String(),
  format: Type.Union(FORMATS.map((f) => Type.Literal(f))),
  planned_at: Type.String(),
  start: StoredCounters,
  batches: Type.Array(StoredBatch),
});
export type ImportEntry = Static<typeof ImportEntry>;

const StateFile = Type.Object({
  v: Type.Literal(STATE_VERSION),
  source_id: Type.String(),
  time_zone: Type.Union([Type.String(), Type.Null()]),
  next_batch_seq: Count,
  prev_sha256: Type.String({ pattern: '^(?:[0-9a-f]{64})?$' }),
  players: Type.Record(Type.String(), Count),
  imports: Type.Array(ImportEntry),
});
type StateFile = Static<typeof StateFile>;

export class StateError extends Error {
  constructor(
    readonly code: 'locked' | 'corrupt' | 'other_source' | 'time_zone_changed' | 'bytes_missing',
    message: string,
  ) {
    super(message);
    this.name = 'StateError';
  }
}

export function countersToStored(counters: Counters) {
  return {
    batch_seq: counters.batchSeq,
    prev_sha256: counters.prevSha256,
    seqs: Object.fromEntries(counters.seqs),
  };
}

export function storedToCounters(stored: StateFile['imports'][number]['start']): Counters {
  return {
    batchSeq: stored.batch_seq,
    prevSha256: stored.prev_sha256,
    seqs: new Map(Object.entries(stored.seqs)),
  };
}

/** Writes every byte: one writeSync may write fewer than it was given. */
function writeAll(fd: number, data: Buffer | string): void {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let offset = 0;
  while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
}

/** Writes `bytes` to `file` through a temporary file, synced, then renamed over it (removed if anything fails). */
function writeAtomically(file: string, bytes: Buffer | string): void {
  const temporary = `${file}.tmp`;
  const fd = openSync(temporary, 'w', 0o600);
  try {
    writeAll(fd, bytes);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw error;
  }
  closeSync(fd);
  renameSync(temporary, file);
  syncFolder(path.dirname(file));
}

function syncFolder(folder: string): void {
  try {
    const fd = openSync(folder, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Some file systems cannot sync a folder; the rename is as durable as they make it.
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class ImportState {
  private data: StateFile;

  private constructor(
    readonly folder: string,
    data: StateFile,
    private readonly locked: boolean,
  ) {
    this.data = data;
  }

  /**
   * Opens (or, with `lock`, creates) the folder of an installation. With `lock`, takes the folder for this process:
   * a second run on the same folder would number the same plays twice. A lock left by a process that is gone is
   * taken over.
   */
  static open(
    folder: string,
    sourceId: string,
    options: { lock: boolean; firstBatchSeq?: number },
  ): ImportState {
    // Without the lock (a dry run) nothing is written, not even the folder.
    if (options.lock) {
      mkdirSync(path.join(folder, 'pending'), { recursive: true, mode: 0o700 });
      ImportState.lock(folder);
    }
    try {
      const file = path.join(folder, 'state.json');
      let data: StateFile;
      if (existsSync(file)) {
        data = ImportState.parse(readFileSync(file, 'utf8'), file);
        if (data.source_id !== sourceId) {
          throw new StateError(
            'other_source',
            `${folder} holds the numbers of installation ${data.source_id}, not ${sourceId}: give each ` +
              'installation its own --state folder',
          );
        }
        if (options.firstBatchSeq !== undefined && options.firstBatchSeq !== data.next_batch_seq) {
          throw new StateError(
            'other_source',
            `--first-batch-seq is for a new state folder; ${folder} already numbers from ${data.next_batch_seq}`,
          );
        }
      } else {
        data = {
          v: STATE_VERSION,
          source_id: sourceId,
          time_zone: null,
          next_batch_seq: options.firstBatchSeq ?? 0,
          prev_sha256: '',
          players: {},
          imports: [],
        };
      }
      const state = new ImportState(folder, data, options.lock);
      state.applyJournal();
      return state;
    } catch (error) {
      if (options.lock) ImportState.unlock(folder);
      throw error;
    }
  }

  private static parse(text: string, file: string): StateFile {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (cause) {
      throw new StateError(
        'corrupt',
        `${file} is not JSON (${(cause as Error).message}); restore it from a backup`,
      );
    }
    const errors = collectFieldErrors(StateFile, value);
    if (errors.length > 0) {
      throw new StateError(
        'corrupt',
        `${file} is not a state file of this version: ${errors[0]!.path} ${errors[0]!.message}`,
      );
    }
    return value as StateFile;
  }

  private static lock(folder: string): void {
    const file = path.join(folder, 'lock');
    const holder = (lockFile: string) => Number(readFileSync(lockFile, 'utf8').trim());
    const alive = (pid: number) =>
      Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid);
    for (let attempt = 0; attempt < 4; attempt += 1) {
      try {
        // The lock is written whole under a name of this run's own, then linked into place: link() fails when a
        // lock is there, so two runs can never both hold it, and nobody reads a lock half written.
        const mine = path.join(folder, `lock.${process.pid}.${attempt}`);
        writeAtomically(mine, String(process.pid));
        try {
          linkSync(mine, file);
          return;
        } finally {
          rmSync(mine, { force: true });
        }
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        let pid: number;
        try {
          pid = holder(file);
        } catch {
          continue; // released meanwhile
        }
        if (alive(pid)) {
          throw new StateError(
            'locked',
            `another import (pid ${pid}) is using ${folder}; wait for it to end (two at once would number the ` +
              'same plays twice)',
          );
        }
        // Left by a run that crashed: moved aside under a name of this run's own (only one mover succeeds), and
        // removed only if it is still that dead run's lock; a live run's lock taken by mistake is put back.
        const aside = path.join(folder, `lock.stale.${process.pid}.${attempt}`);
        try {
          renameSync(file, aside);
        } catch {
          continue;
        }
        if (alive(holder(aside))) {
          try {
            linkSync(aside, file);
          } catch {
            // Another lock is in place already: the next attempt reads it.
          }
        }
        rmSync(aside, { force: true });
      }
    }
    throw new StateError('locked', `cannot take the lock of ${folder}`);
  }

  private static unlock(folder: string): void {
    rmSync(path.join(folder, 'lock'), { force: true });
  }

  private get journalFile(): string {
    return path.join(this.folder, 'answers.ndjson');
  }

  pendingFile(batchSeq: number): string {
    return path.join(this.folder, 'pending', `${batchSeq}.json`);
  }

  /** Answers synced to the journal by a run that did not end cleanly: each one applied to its batch. */
  private applyJournal(): void {
    if (!existsSync(this.journalFile)) return;
    const lines = readFileSync(this.journalFile, 'utf8').split('\n');
    for (const line of lines) {
      if (line.trim() === '') continue;
      let entry: { batch_seq?: unknown; answer?: unknown };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        continue; // a line cut short by a crash: its batch is sent again and answered duplicate
      }
      if (typeof entry.batch_seq !== 'number' || collectFieldErrors(StoredAnswer, entry.answer).length > 0)
        continue;
      const batch = this.batch(entry.batch_seq);
      if (batch && batch.answer === null) batch.answer = entry.answer as StoredAnswer;
    }
  }

  get sourceId(): string {
    return this.data.source_id;
  }

  get timeZone(): string | null {
    return this.data.time_zone;
  }

  get counters(): Counters {
    return {
      batchSeq: this.data.next_batch_seq,
      prevSha256: this.data.prev_sha256,
      seqs: new Map(Object.entries(this.data.players)),
    };
  }

  get imports(): readonly ImportEntry[] {
    return this.data.imports;
  }

  findImport(fingerprint: string): ImportEntry | undefined {
    return this.data.imports.find((entry) => entry.fingerprint === fingerprint);
  }

  batch(batchSeq: number): StoredBatch | undefined {
    for (const entry of this.data.imports) {
      const found = entry.batches.find((b) => b.batch_seq === batchSeq);
      if (found) return found;
    }
    return undefined;
  }

  /** Batches planned and not answered, oldest first. */
  unanswered(): { entry: ImportEntry; batch: StoredBatch }[] {
    const list: { entry: ImportEntry; batch: StoredBatch }[] = [];
    for (const entry of this.data.imports)
      for (const batch of entry.batches) if (batch.answer === null) list.push({ entry, batch });
    return list.sort((a, b) => a.batch.batch_seq - b.batch.batch_seq);
  }

  /**
   * The zone an installation's exports are read in. Changing it would move every play's times, so that a play
   * imported again would not be found by its play_id near its old start and would be counted twice.
   */
  checkTimeZone(timeZone: string | null): void {
    if (timeZone === null || this.data.time_zone === null || this.data.time_zone === timeZone) return;
    throw new StateError(
      'time_zone_changed',
      `this installation's exports were read in ${this.data.time_zone}, not ${timeZone}: a play read in another ` +
        'zone would get other times and could be counted twice. If the CMS really changed its zone, use a new ' +
        'installation (and --state folder) for the exports made after the change',
    );
  }

  /**
   * Takes a plan: its bodies written and synced first, then the state that names them, in one atomic replace.
   */
  commitPlan(args: {
    fingerprint: string;
    file: string;
    format: ImportEntry['format'];
    plannedAt: Date;
    timeZone: string | null;
    start: Counters;
    end: Counters;
    batches: { batchSeq: number; body: Buffer; sha256: string; records: number }[];
  }): ImportEntry {
    for (const batch of args.batches) writeAtomically(this.pendingFile(batch.batchSeq), batch.body);
    const entry: ImportEntry = {
      fingerprint: args.fingerprint,
      file: args.file,
      format: args.format,
      planned_at: args.plannedAt.toISOString(),
      start: countersToStored(args.start),
      batches: args.batches.map((b) => ({
        batch_seq: b.batchSeq,
        sha256: b.sha256,
        records: b.records,
        answer: null,
      })),
    };
    const next: StateFile = {
      ...this.data,
      time_zone: this.data.time_zone ?? args.timeZone,
      next_batch_seq: args.end.batchSeq,
      prev_sha256: args.end.prevSha256,
      players: Object.fromEntries(args.end.seqs),
      imports: [...this.data.imports, entry],
    };
    this.write(next);
    this.data = next;
    return this.data.imports[this.data.imports.length - 1]!;
  }

  /** The stored body of an unanswered batch, checked against the hash its plan recorded. */
  pendingBody(batch: StoredBatch): Buffer | null {
    const file = this.pendingFile(batch.batch_seq);
    if (!existsSync(file)) return null;
    const body = readFileSync(file);
    return sha256Hex(body) === batch.sha256 ? body : null;
  }

  /** Records an answer: synced to the journal, then the pending body is no longer needed. */
  recordAnswer(batchSeq: number, answer: StoredAnswer): void {
    const batch = this.batch(batchSeq);
    if (!batch) throw new Error(`batch ${batchSeq} is not in the state`);
    if (batch.answer === null) {
      const fd = openSync(this.journalFile, 'a', 0o600);
      try {
        writeAll(fd, `${JSON.stringify({ batch_seq: batchSeq, answer })}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      batch.answer = answer;
    }
    rmSync(this.pendingFile(batchSeq), { force: true });
  }

  /** Folds the journal into state.json, drops bodies nothing waits for, and gives the folder back. */
  close(): void {
    try {
      if (!this.locked) return;
      if (existsSync(this.journalFile)) {
        this.write(this.data);
        unlinkSync(this.journalFile);
      }
      const waiting = new Set(this.unanswered().map(({ batch }) => `${batch.batch_seq}.json`));
      for (const name of readdirSync(path.join(this.folder, 'pending'))) {
        if (!waiting.has(name)) rmSync(path.join(this.folder, 'pending', name), { force: true });
      }
    } finally {
      if (this.locked) ImportState.unlock(this.folder);
    }
  }

  private write(data: StateFile): void {
    writeAtomically(path.join(this.folder, 'state.json'), `${JSON.stringify(data, null, 1)}\n`);
  }
}
