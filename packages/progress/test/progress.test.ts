import { describe, expect, test } from 'vitest';
import {
  createProgress,
  type Env,
  formatDuration,
  inCi,
  type ProgressMode,
  progressMode,
  progressShown,
} from '../src/index.js';

const CLEAR = '\r\x1b[K';

/** A terminal (or a pipe) that keeps what is written, a clock the test moves, and a timer the test fires. */
function rig(options: { isTTY?: boolean; columns?: number; env?: Env; mode?: ProgressMode } = {}): {
  writes: string[];
  log: string[];
  advance: (ms: number) => void;
  fire: () => void;
  timerStopped: () => boolean;
  progress: ReturnType<typeof createProgress>;
} {
  const writes: string[] = [];
  const log: string[] = [];
  let now = 1_000;
  let timer: (() => void) | null = null;
  let stopped = false;
  const stream = {
    isTTY: options.isTTY ?? true,
    columns: options.columns ?? 200,
    write: (text: string) => {
      writes.push(text);
      log.push(`stderr:${text}`);
      return true;
    },
  };
  const progress = createProgress({
    stream,
    env: options.env ?? { NO_COLOR: '1' },
    ...(options.mode ? { mode: options.mode } : {}),
    now: () => now,
    every: (_ms, fn) => {
      timer = fn;
      return () => {
        stopped = true;
        timer = null;
      };
    },
  });
  return {
    writes,
    log,
    advance: (ms) => {
      now += ms;
    },
    fire: () => timer?.(),
    timerStopped: () => stopped,
    progress,
  };
}

/** Everything a command does with its progress, start to end. */
function workThrough(r: ReturnType<typeof rig>, out: string[]): void {
  r.progress.phase('starting');
  r.advance(500);
  r.fire();
  r.progress.phase('checking batches', { total: 1000, unit: 'batches' });
  for (let i = 0; i < 1000; i += 1) {
    r.progress.tick();
    r.advance(5);
  }
  r.fire();
  r.progress.print('ok  seal 2026-11-19\n', (text) => out.push(text));
  r.progress.update(10, 20);
  r.progress.clear();
  r.progress.done('checked 1,000 batches');
}

describe('nothing is written where nobody watches', () => {
  test('in a pipe: not one byte on stderr, the output lines untouched', () => {
    const r = rig({ isTTY: false });
    const out: string[] = [];
    workThrough(r, out);
    expect(r.progress.shown).toBe(false);
    expect(r.writes).toEqual([]);
    expect(out).toEqual(['ok  seal 2026-11-19\n']);
  });

  test('on a terminal in CI, with TERM=dumb, or with --no-progress: nothing either', () => {
    for (const options of [
      { env: { CI: 'true' } },
      { env: { GITHUB_ACTIONS: 'true' } },
      { env: { TERM: 'dumb' } },
      { mode: 'never' as const },
      { env: { OOH_PROGRESS: '0' } },
    ]) {
      const r = rig(options);
      workThrough(r, []);
      expect(r.writes, JSON.stringify(options)).toEqual([]);
    }
  });

  test('CI=false or CI=0 is not CI; --progress and OOH_PROGRESS=1 draw even in a pipe', () => {
    expect(inCi({ CI: 'false' })).toBe(false);
    expect(inCi({ CI: '0' })).toBe(false);
    expect(inCi({ CI: '' })).toBe(false);
    expect(inCi({ CI: '1' })).toBe(true);
    expect(inCi({ BUILDKITE: 'true' })).toBe(true);
    const pipe = { isTTY: false };
    expect(progressShown(pipe, 'always', { CI: 'true' })).toBe(true);
    expect(progressShown({ isTTY: true }, 'auto', {})).toBe(true);
    expect(progressShown({ isTTY: true }, 'auto', { CI: 'false' })).toBe(true);
    const r = rig({ isTTY: false, env: { OOH_PROGRESS: '1', NO_COLOR: '1' } });
    r.progress.phase('starting');
    expect(r.writes).toEqual([`\r- starting  0:00\x1b[K`]);
  });

  test('flags before the environment, --no-progress before --progress', () => {
    expect(progressMode({}, {})).toBe('auto');
    expect(progressMode({}, { OOH_PROGRESS: 'always' })).toBe('always');
    expect(progressMode({}, { OOH_PROGRESS: 'false' })).toBe('never');
    expect(progressMode({ 'no-progress': true }, { OOH_PROGRESS: '1' })).toBe('never');
    expect(progressMode({ progress: true }, { OOH_PROGRESS: '0' })).toBe('always');
    expect(progressMode({ progress: true, 'no-progress': true }, {})).toBe('never');
  });
});

describe('on a terminal', () => {
  test('a phase with a total: bar, done/total, percent, rate, elapsed and ETA', () => {
    const r = rig();
    r.progress.phase('checking batches', { total: 100, unit: 'batches' });
    expect(r.writes).toEqual([`\rchecking batches ${'-'.repeat(20)}  0/100  0%  0:00\x1b[K`]);
    r.advance(10_000);
    r.progress.tick(25);
    // 25 in 10 s: 2.5 a second, 75 left: 30 s.
    expect(r.writes.at(-1)).toBe(
      `\rchecking batches #####${'-'.repeat(15)}  25/100  25%  2.5 batches/s  0:10  ETA 0:30\x1b[K`,
    );
    r.advance(30_000);
    r.progress.update(100);
    expect(r.writes.at(-1)).toBe(
      `\rchecking batches ${'#'.repeat(20)}  100/100  100%  2.5 batches/s  0:40\x1b[K`,
    );
  });

  test('no ETA before the first item, no rate in the first second, an ETA in hours', () => {
    const r = rig();
    r.progress.phase('enrolling players', { total: 10_000 });
    r.advance(500);
    r.progress.tick(1);
    expect(r.writes.at(-1)).toBe(`\renrolling players ${'-'.repeat(20)}  1/10,000  0%  0:01\x1b[K`);
    r.advance(9_500);
    r.progress.tick(1);
    // 2 in 10 s, 9 998 left: 49 990 s.
    expect(r.writes.at(-1)).toContain('  0.2/s  0:10  ETA 13:53:10\x1b[K');
    expect(formatDuration(3_600_000 + 62_000)).toBe('1:01:02');
  });

  test('redrawn at most every 100 ms, whatever the number of ticks', () => {
    const r = rig();
    r.progress.phase('reading the export', { total: 1_000_000 });
    expect(r.writes).toHaveLength(1);
    // A hot loop: a million items in 2 s of the clock.
    for (let i = 0; i < 1_000_000; i += 1) {
      r.progress.tick();
      if (i % 500 === 0) r.advance(1);
    }
    expect(r.writes.length).toBeGreaterThanOrEqual(19);
    expect(r.writes.length).toBeLessThanOrEqual(21);
    const before = r.writes.length;
    r.advance(99);
    r.progress.tick();
    r.fire();
    expect(r.writes).toHaveLength(before);
    r.advance(1);
    r.fire();
    expect(r.writes).toHaveLength(before + 1);
  });

  test('a phase without a total: a spinner turned by the timer while the work awaits', () => {
    const r = rig();
    r.progress.phase('starting a platform');
    r.advance(100);
    r.fire();
    r.advance(1_000);
    r.fire();
    expect(r.writes).toEqual([
      '\r- starting a platform  0:00\x1b[K',
      '\r\\ starting a platform  0:00\x1b[K',
      '\r/ starting a platform  0:01\x1b[K',
    ]);
    // In a UTF-8 locale the spinner is braille and the bar is blocks; a count without a total shows with its rate.
    const u = rig({ env: { LANG: 'en_US.UTF-8', NO_COLOR: '1' } });
    u.progress.phase('following the seal chain', { unit: 'seals' });
    u.advance(2_000);
    u.progress.tick(3);
    expect(u.writes.at(-1)).toBe('\r⠋ following the seal chain  3  1.5 seals/s  0:02\x1b[K');
    u.progress.phase('checking batches', { total: 4 });
    u.advance(100);
    u.progress.tick(1);
    expect(u.writes.at(-1)).toBe(
      `\rchecking batches ${'█'.repeat(5)}${'░'.repeat(15)}  1/4  25%  0:00\x1b[K`,
    );
  });

  test('count: false shows percent and ETA only, and the detail is read when drawn', () => {
    const r = rig();
    let shown = 0;
    r.progress.phase('smoke', { total: 7_200_000, count: false, detail: () => `shown ${shown}` });
    shown = 12;
    r.advance(10_000);
    r.progress.update(3_600_000);
    expect(r.writes.at(-1)).toBe(
      `\rsmoke ${'#'.repeat(10)}${'-'.repeat(10)}  50%  0:10  ETA 0:10  shown 12\x1b[K`,
    );
  });

  test('the line is cleared before any output line, and drawn again at the next redraw', () => {
    const r = rig();
    r.progress.phase('enrolling players', { total: 3 });
    r.progress.print('creating 3 structures\n', (text) => r.log.push(`stdout:${text}`));
    expect(r.log).toEqual([
      `stderr:\renrolling players ${'-'.repeat(20)}  0/3  0%  0:00\x1b[K`,
      `stderr:${CLEAR}`,
      'stdout:creating 3 structures\n',
    ]);
    // Nothing on the line: a second print clears nothing.
    r.progress.print('approving 2 creatives\n', (text) => r.log.push(`stdout:${text}`));
    expect(r.log.at(-1)).toBe('stdout:approving 2 creatives\n');
    expect(r.log.at(-2)).toBe('stdout:creating 3 structures\n');
    r.advance(100);
    r.fire();
    expect(r.log.at(-1)).toMatch(/^stderr:\renrolling players/);
  });

  test('done() clears, leaves the final line, stops the timer; nothing after it', () => {
    const r = rig();
    r.progress.phase('checking batches', { total: 2 });
    r.progress.done('checked 2 batches in 0:00');
    expect(r.writes.slice(1)).toEqual([CLEAR, 'checked 2 batches in 0:00\n']);
    expect(r.timerStopped()).toBe(true);
    r.advance(1_000);
    r.progress.tick();
    r.progress.phase('again');
    r.progress.done('twice');
    expect(r.writes).toHaveLength(3);
    // done() with no final line leaves the terminal as it was.
    const quiet = rig();
    quiet.progress.phase('x');
    quiet.progress.done();
    expect(quiet.writes).toEqual(['\r- x  0:00\x1b[K', CLEAR]);
  });

  test('never wider than the terminal; colour only without NO_COLOR', () => {
    const narrow = rig({ columns: 30 });
    narrow.progress.phase('verifying the batches of the day', { total: 10 });
    const line = narrow.writes[0]!;
    expect(line.slice(1, -3)).toHaveLength(29);
    expect(line).toBe(`\rverifying the batches of the~\x1b[K`);
    const coloured = rig({ env: {} });
    coloured.progress.phase('checking', { total: 10 });
    expect(coloured.writes[0]).toBe(`\rchecking ${'-'.repeat(20)}\x1b[2m  0/10  0%  0:00\x1b[22m\x1b[K`);
    expect(rig().writes.join('')).not.toContain('\x1b[2m');
  });
});
