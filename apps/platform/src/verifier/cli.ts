#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { httpSource, SourceError } from './source.js';
import { type Check, verifySeal } from './verify-seal.js';

/*
 * ooh-verify: checks a daily stats seal from public data only.
 *
 *   ooh-verify seal <day> --from <verify_url> [--root authority-root.pem] [--batches export.ndjson]
 *                         [--depth n] [--require-ledger]
 *
 * Exit status: 0 every check passed; 1 a check failed; 2 bad arguments or the verify host could not be read.
 */

const USAGE = `usage: ooh-verify seal <day> --from <verify_url> [--root <authority-root.pem>] [--batches <export.ndjson>]
                         [--depth <n>] [--require-ledger]

  <day>             the Asia/Almaty day of the seal, YYYY-MM-DD
  --from            the public verify URL, e.g. https://verify.example.kz
  --root            the authority root certificate you trust (PEM). Without it the root is fetched from
                    {verify_url}/v1/authority-root.pem, which proves nothing against a dishonest server.
  --batches         the day's batches exported by the authority (NDJSON): recompute root and record_count
  --depth           follow at most n previous seals back (default: all, to the first seal)
  --require-ledger  fail when the seal's ledger proof is not published yet
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
    },
  });
}

export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
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
  try {
    const source = httpSource(values.from);
    let rootPem: string;
    if (values.root) {
      rootPem = await readFile(values.root, 'utf8');
    } else {
      const root = await source.get('/v1/authority-root.pem');
      if (root.status !== 200) {
        io.err(`cannot read ${source.origin}/v1/authority-root.pem: HTTP ${root.status}`);
        return 2;
      }
      rootPem = root.body.toString('utf8');
      io.out(
        line('note', `authority root: fetched from ${source.origin} (not pinned: pass --root to pin it)`),
      );
    }
    const batchesNdjson = values.batches ? await readFile(values.batches, 'utf8') : undefined;
    const report = await verifySeal({
      day,
      source,
      rootPem,
      ...(batchesNdjson === undefined ? {} : { batchesNdjson }),
      ...(depth === undefined ? {} : { chainDepth: depth }),
      requireLedger: values['require-ledger'] === true,
    });
    for (const check of report.checks) io.out(line(check.kind, `${check.subject}: ${check.message}`));
    const failed = report.checks.filter((c) => c.kind === 'fail').length;
    io.out(report.ok ? `seal ${day}: every check passed` : `seal ${day}: ${failed} check(s) FAILED`);
    return report.ok ? 0 : 1;
  } catch (error) {
    if (error instanceof SourceError || (error as NodeJS.ErrnoException).code === 'ENOENT') {
      io.err((error as Error).message);
      return 2;
    }
    throw error;
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
