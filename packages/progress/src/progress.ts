/**
 * Progress of long command-line work (issue "A newcomer's two commands", item 6: "Long work shows progress ... on a
 * terminal and stays quiet in CI and in pipes").
 *
 * One line on stderr, rewritten in place: the phase, a bar with done/total, percent, rate, elapsed time and ETA when a
 * total is known, a spinner and the elapsed time when it is not. The rules the command lines people like follow
 * (cargo, npm, gh):
 *  - drawn only on a terminal: stderr a TTY, no CI variable, TERM not "dumb"; `--progress` / `--no-progress` or
 *    OOH_PROGRESS=1/0 decide instead when given. Otherwise not one byte is written: stdout and logs stay as they are;
 *  - never on stdout, and cleared before any other line is written (`print`), so output never lands after a bar;
 *  - redrawn at most every `intervalMs` (100 ms): `tick()` adds to a counter and reads the clock, nothing more, so a
 *    hot loop pays for a few nanoseconds a call, not a write a call; a timer redraws the spinner while work awaits;
 *  - NO_COLOR (https://no-color.org) turns the colour off, not the line; a line never wider than the terminal, so
 *    that a carriage return always goes back to its start.
 */

export type ProgressMode = 'auto' | 'always' | 'never';

/** Where the line is drawn: process.stderr, or a fake in tests. */
export interface ProgressStream {
  write(text: string): unknown;
  readonly isTTY?: boolean | undefined;
  readonly columns?: number | undefined;
}

export type Env = Readonly<Record<string, string | undefined>>;

/** OOH_PROGRESS=1 (or always, true) draws even where the program cannot see a terminal; 0 (never, false) never. */
export const PROGRESS_ENV = 'OOH_PROGRESS';

/** The two flags every command with long work takes, for node:util parseArgs (Node 20 has no `--no-` negation). */
export const PROGRESS_FLAGS = {
  progress: { type: 'boolean' },
  'no-progress': { type: 'boolean' },
} as const;

/** `--no-progress` before `--progress`, both before OOH_PROGRESS, which is before `auto`. */
export function progressMode(
  flags: { progress?: boolean | undefined; 'no-progress'?: boolean | undefined } = {},
  env: Env = process.env,
): ProgressMode {
  if (flags['no-progress']) return 'never';
  if (flags.progress) return 'always';
  const value = env[PROGRESS_ENV]?.trim().toLowerCase();
  if (value === '1' || value === 'true' || value === 'always') return 'always';
  if (value === '0' || value === 'false' || value === 'never') return 'never';
  return 'auto';
}

// The variables CI services set (the list `ci-info` and `is-ci` go by, the common ones).
const CI_VARIABLES = [
  'CI',
  'CONTINUOUS_INTEGRATION',
  'GITHUB_ACTIONS',
  'GITLAB_CI',
  'BUILDKITE',
  'TF_BUILD',
  'TEAMCITY_VERSION',
  'JENKINS_URL',
];

/** A CI variable set to anything but "", "0" or "false" (CI=false is how some turn the detection off). */
export function inCi(env: Env = process.env): boolean {
  return CI_VARIABLES.some((name) => {
    const value = env[name];
    return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false';
  });
}

/** Whether a line is drawn at all on `stream`. */
export function progressShown(
  stream: Pick<ProgressStream, 'isTTY'>,
  mode: ProgressMode,
  env: Env = process.env,
): boolean {
  if (mode === 'never') return false;
  if (mode === 'always') return true;
  return stream.isTTY === true && !inCi(env) && env['TERM'] !== 'dumb';
}

/** https://no-color.org: "when present and not an empty string"; FORCE_COLOR=0 and TERM=dumb too. */
function colourAllowed(env: Env): boolean {
  return (env['NO_COLOR'] ?? '') === '' && env['FORCE_COLOR'] !== '0' && env['TERM'] !== 'dumb';
}

function unicodeAllowed(env: Env): boolean {
  return /utf-?8/i.test(env['LC_ALL'] || env['LC_CTYPE'] || env['LANG'] || '');
}

export interface PhaseOptions {
  /** How many items the phase has: a bar, percent and ETA. Without it, a spinner. */
  total?: number | undefined;
  /** The items' name for the rate: "12 batches/s". */
  unit?: string | undefined;
  /** false: no done/total and rate (when the counter is not items, e.g. virtual milliseconds), percent and ETA only. */
  count?: boolean | undefined;
  /** Text after the figures, read when the line is drawn (never built per item). */
  detail?: (() => string) | undefined;
}

export interface Progress {
  /** Whether anything is drawn: false in a pipe, in CI, with --no-progress. */
  readonly shown: boolean;
  /** Starts a phase: a new name, the count back to 0, a new total, a new clock for rate and ETA. */
  phase(name: string, options?: PhaseOptions): void;
  /** Adds to the phase's count; redraws when the last drawing is `intervalMs` old. */
  tick(count?: number): void;
  /** Sets the phase's count (and total). */
  update(done: number, total?: number): void;
  /** Writes a line of output (to stdout by default: `write`), the progress line cleared first. */
  print(text: string, write?: (text: string) => unknown): void;
  /** Takes the line off the terminal (before writing to it by other means); drawn again at the next redraw. */
  clear(): void;
  /** The end: the line taken off, `finalLine` (if any) left on stderr in its place; nothing more is drawn. */
  done(finalLine?: string): void;
}

export interface ProgressOptions {
  /** Default process.stderr. */
  stream?: ProgressStream;
  /** Default from OOH_PROGRESS, else auto; `progressMode(flags)` gives it from the command's flags. */
  mode?: ProgressMode;
  /** Default process.env. */
  env?: Env;
  /** Milliseconds (monotonic); default performance.now. */
  now?: () => number;
  /** Least time between two drawings; default 100 ms (10 a second). */
  intervalMs?: number;
  /** Calls `fn` every `ms` until the returned function is called; default an unref'd setInterval. */
  every?: (ms: number, fn: () => void) => () => void;
}

const CLEAR = '\r\x1b[K';
const BAR_WIDTH = 20;
const DIM = ['\x1b[2m', '\x1b[22m'] as const;
const UNICODE = {
  spinner: ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'],
  filled: '█',
  empty: '░',
  ellipsis: '…',
};
const ASCII = { spinner: ['-', '\\', '|', '/'], filled: '#', empty: '-', ellipsis: '~' };

const defaultEvery = (ms: number, fn: () => void) => {
  const timer = setInterval(fn, ms);
  timer.unref();
  return () => clearInterval(timer);
};

/** "0:07", "12:30", "1:02:03". */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = String(seconds % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

function formatRate(perSecond: number): string {
  return perSecond < 10 ? perSecond.toFixed(1) : Math.round(perSecond).toLocaleString('en-US');
}

class TerminalProgress implements Progress {
  readonly shown: boolean;
  private readonly stream: ProgressStream;
  private readonly now: () => number;
  private readonly intervalMs: number;
  private readonly every: (ms: number, fn: () => void) => () => void;
  private readonly colour: boolean;
  private readonly glyphs: typeof UNICODE;
  private readonly startedAt: number;
  private name: string | null = null;
  private options: PhaseOptions = {};
  private total: number | null = null;
  private count = 0;
  private phaseStartedAt = 0;
  private lastDrawAt = Number.NEGATIVE_INFINITY;
  private drawn = false;
  private finished = false;
  private stopTimer: (() => void) | null = null;
  private readonly onExit: (() => void) | null = null;

  constructor(options: ProgressOptions) {
    const env = options.env ?? process.env;
    this.stream = options.stream ?? process.stderr;
    this.shown = progressShown(this.stream, options.mode ?? progressMode({}, env), env);
    this.now = options.now ?? (() => performance.now());
    this.intervalMs = options.intervalMs ?? 100;
    this.every = options.every ?? defaultEvery;
    this.colour = colourAllowed(env);
    this.glyphs = unicodeAllowed(env) ? UNICODE : ASCII;
    this.startedAt = this.shown ? this.now() : 0;
    if (this.shown && !options.stream) {
      // A process that leaves without done() (an uncaught error, process.exit) does not leave a half line behind.
      this.onExit = () => this.clear();
      process.once('exit', this.onExit);
    }
  }

  phase(name: string, options: PhaseOptions = {}): void {
    this.name = name;
    this.options = options;
    this.total = options.total ?? null;
    this.count = 0;
    if (!this.shown || this.finished) return;
    const at = this.now();
    this.phaseStartedAt = at;
    this.stopTimer ??= this.every(this.intervalMs, () => this.redraw());
    this.redraw(at);
  }

  tick(count = 1): void {
    this.count += count;
    if (!this.shown || this.finished) return;
    const at = this.now();
    if (at - this.lastDrawAt >= this.intervalMs) this.draw(at);
  }

  update(done: number, total?: number): void {
    this.count = done;
    if (total !== undefined) this.total = total;
    this.tick(0);
  }

  print(text: string, write: (text: string) => unknown = (t) => process.stdout.write(t)): void {
    this.clear();
    write(text);
  }

  clear(): void {
    if (!this.drawn) return;
    this.stream.write(CLEAR);
    this.drawn = false;
  }

  done(finalLine?: string): void {
    if (this.finished) return;
    this.finished = true;
    this.stopTimer?.();
    this.stopTimer = null;
    if (this.onExit) process.removeListener('exit', this.onExit);
    this.clear();
    if (this.shown && finalLine !== undefined) this.stream.write(`${finalLine}\n`);
  }

  private redraw(at = this.now()): void {
    if (this.finished || this.name === null || at - this.lastDrawAt < this.intervalMs) return;
    this.draw(at);
  }

  private draw(at: number): void {
    if (this.name === null) return;
    this.lastDrawAt = at;
    const { head, tail } = this.line(at);
    const width = this.stream.columns ? this.stream.columns - 1 : Number.POSITIVE_INFINITY;
    let plain = tail ? `${head}  ${tail}` : head;
    if (plain.length > width) plain = `${plain.slice(0, Math.max(0, width - 1))}${this.glyphs.ellipsis}`;
    const text =
      this.colour && plain.length > head.length
        ? `${plain.slice(0, head.length)}${DIM[0]}${plain.slice(head.length)}${DIM[1]}`
        : plain;
    this.stream.write(`\r${text}\x1b[K`);
    this.drawn = true;
  }

  /** The phase and its bar or spinner (`head`), then the figures and the detail, dimmed (`tail`). */
  private line(at: number): { head: string; tail: string } {
    const elapsed = at - this.phaseStartedAt;
    const showCount = this.options.count !== false;
    const figures: string[] = [];
    let head: string;
    if (this.total !== null) {
      const fraction = this.total > 0 ? Math.min(1, Math.max(0, this.count / this.total)) : 1;
      const filled = Math.round(fraction * BAR_WIDTH);
      head = `${this.name} ${this.glyphs.filled.repeat(filled)}${this.glyphs.empty.repeat(BAR_WIDTH - filled)}`;
      if (showCount)
        figures.push(`${this.count.toLocaleString('en-US')}/${this.total.toLocaleString('en-US')}`);
      figures.push(`${Math.floor(fraction * 100)}%`);
    } else {
      const spinner = this.glyphs.spinner;
      head = `${spinner[Math.floor((at - this.startedAt) / 100) % spinner.length]} ${this.name}`;
      if (showCount && this.count > 0) figures.push(this.count.toLocaleString('en-US'));
    }
    const unit = this.options.unit ? ` ${this.options.unit}` : '';
    // A rate over less than a second says little; neither does an ETA before the first item.
    if (showCount && this.count > 0 && elapsed >= 1000) {
      figures.push(`${formatRate(this.count / (elapsed / 1000))}${unit}/s`);
    }
    figures.push(formatDuration(elapsed));
    if (this.total !== null && this.count > 0 && this.count < this.total && elapsed >= 1000) {
      figures.push(`ETA ${formatDuration(((this.total - this.count) * elapsed) / this.count)}`);
    }
    const detail = this.options.detail?.();
    if (detail) figures.push(detail);
    return { head, tail: figures.join('  ') };
  }
}

/** A progress line for one command run; `progress.shown` false means every call costs next to nothing. */
export function createProgress(options: ProgressOptions = {}): Progress {
  return new TerminalProgress(options);
}
