#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createProgress, type Env, PROGRESS_FLAGS, type ProgressStream, progressMode } from '@ooh/progress';
import { httpSource, SourceError } from './source.js';
import { type Check, verifySeal } from './verify-seal.js';

/*
 * ooh-verify: checks a daily stats seal from public data only.
 *
 *   ooh-verify seal <day> --from <verify_url> [--root authority-root.pem] [--batches export.ndjson]
 *                         [--depth n] [--require-ledger] [--progress | --no-progress]
 *
 * Checks go to stdout, one a line, as they always have; progress (reading a day's export, walking the chains) is
 * drawn on stderr only when it is a terminal (@ooh/progress).
 *
 * Exit status: 0 every check passed; 1 a check failed; 2 bad arguments or the verify host could not be read.
 */

const USAGE = `usage: ooh-verify seal <day> --from <verify_url> [--root <authority-root.pem>] [--batches <export.ndjson>]
                         [--depth <n>] [--require-ledger] [--progress | --no-progress]

  <day>             the Asia/Almaty day of the seal, YYYY-MM-DD
  --from            the public verify URL, e.g. https://verify.example.kz
  --root            the authority root certificate you trust (PEM). Without it the root is fetched from
                    {verify_url}/v1/authority-root.pem, which proves nothing against a dishonest server.
  --batches         the day's batches exported by the authority (NDJSON): recompute root and record_count
  --depth           follow at most n previous seals back (default: all, to the first seal)
  --require-ledger  fail when the seal's ledger proof is not published yet
  --progress        draw progress on stderr even where no terminal is seen; --no-progress: never (default: only
                    on a terminal, not in CI; OOH_PROGRESS=1 or 0 does the same). The checks go to stdout.
`;

const MARK: Record<Check['kind'], string> = { ok: 'ok  ', fail: 'FAIL', note: 'note' };
const line = (kind: Check['kind'], text: string) => `${MARK[kind]} ${text}`;

function parseCli(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      from: { type: 'string' },
      root: { type: 'string' },
      batches: { type: 'string' },
      depth: { type: 'string' },
      'require-ledger': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      ...PROGRESS_FLAGS,
    },
  });
}

export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
  /** Where progress is drawn when it is a terminal; default process.stderr. */
  progress?: ProgressStream;
  /** Default process.env (CI, TERM, NO_COLOR, OOH_PROGRESS). */
  env?: Env;
}

export async function main(
  argv: string[],
  io: CliIo = { out: console.log, err: console.error },
): Promise<number> {
  let parsed: ReturnType<typeof parseCli>;
  try {
    parsed = parseCli(argv);
  } catch (error) {
    io.err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  const [command, day] = positionals;
  if (command !== 'seal' || !day || positionals.length !== 2 || !values.from) {
    io.err(USAGE);
    return 2;
  }
  let depth: number | undefined;
  if (values.depth !== undefined) {
    depth = Number(values.depth);
    if (!Number.isInteger(depth) || depth < 0) {
      io.err(`--depth must be a whole number, not ${values.depth}`);
      return 2;
    }
  }
  const env = io.env ?? process.env;
  const progress = createProgress({
    stream: io.progress ?? process.stderr,
    mode: progressMode(values, env),
    env,
  });
  // Every line goes through the progress line, which is taken off the terminal first.
  const out = (text: string) => progress.print(text, io.out);
  const err = (text: string) => progress.print(text, io.err);
  try {
    const source = httpSource(values.from);
    let rootPem: string;
    if (values.root) {
      rootPem = await readFile(values.root, 'utf8');
    } else {
      const root = await source.get('/v1/authority-root.pem');
      if (root.status !== 200) {
        err(`cannot read ${source.origin}/v1/authority-root.pem: HTTP ${root.status}`);
        return 2;
      }
      rootPem = root.body.toString('utf8');
      out(line('note', `authority root: fetched from ${source.origin} (not pinned: pass --root to pin it)`));
    }
    if (values.batches) progress.phase('reading the batch export');
    const batchesNdjson = values.batches ? await readFile(values.batches, 'utf8') : undefined;
    const report = await verifySeal({
      day,
      source,
      rootPem,
      ...(batchesNdjson === undefined ? {} : { batchesNdjson }),
      ...(depth === undefined ? {} : { chainDepth: depth }),
      requireLedger: values['require-ledger'] === true,
      progress,
    });
    progress.done();
    for (const check of report.checks) out(line(check.kind, `${check.subject}: ${check.message}`));
    const failed = report.checks.filter((c) => c.kind === 'fail').length;
    out(report.ok ? `seal ${day}: every check passed` : `seal ${day}: ${failed} check(s) FAILED`);
    return report.ok ? 0 : 1;
  } catch (error) {
    if (error instanceof SourceError || (error as NodeJS.ErrnoException).code === 'ENOENT') {
      err((error as Error).message);
      return 2;
    }
    throw error;
  } finally {
    // An unexpected error is written after this: the line is off the terminal by then.
    progress.done();
  }
}

/** True when this file is the program being run (directly, or through a bin link), not imported by a test. */
function isProgram(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return pathToFileURL(realpathSync(script)).href === import.meta.url;
  } catch {
    return false;
  }
}

if (isProgram()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 2;
    },
  );
}
