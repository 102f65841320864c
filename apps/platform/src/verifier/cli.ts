#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import {
  createProgress,
  type Env,
  enterTypedInDirectory,
  PROGRESS_FLAGS,
  type ProgressStream,
  progressMode,
} from '@ooh/progress';
import { isCalendarDate } from '@ooh/protocol';
import { NoteError, parseVkey, SIG_COSIGNATURE_V1, SIG_ED25519, type Vkey } from '../ledger/note.js';
import { type LineKind, reportLines } from './messages.js';
import { httpSource, SourceError } from './source.js';
import { type TimestampChecker, timestampChecker, tsaPemProblem } from './timestamps.js';
import { verifyApproval } from './verify-approval.js';
import { notABatchExport, verifySeal } from './verify-seal.js';

/*
 * ooh-verify: checks a daily stats seal or an approval from public data only (DESIGN.md section 6).
 *
 *   ooh-verify seal <day> --from <verify_url> [--root authority-root.pem] [--batches export.ndjson]
 *                         [--depth n] [--require-ledger] [--ledger-key <vkey>] [--witness <vkey>]...
 *                         [--require-anchored n] [--tsa-cert tsa.pem] [--progress | --no-progress]
 *   ooh-verify approval <number> --from <verify_url> [--root authority-root.pem] [--envelope file.envelope.json]
 *                         [--require-ledger] [--ledger-key <vkey>] [--witness <vkey>]... [--require-anchored n]
 *                         [--tsa-cert tsa.pem]
 *
 * Checks go to stdout, one a line, as they always have; progress (reading a day's export, walking the chains) is
 * drawn on stderr only when it is a terminal (@ooh/progress).
 *
 * Exit status: 0 every check passed; 1 a check failed; 2 bad arguments or the verify host could not be read. Every
 * problem with the arguments or the host is one line naming it and what to do (issue "What a newcomer tripped over",
 * item 6); a check that cannot be made is never reported as a check that failed.
 */

const USAGE = `usage: ooh-verify seal <day> --from <verify_url> [--root <authority-root.pem>] [--batches <export.ndjson>]
                         [--depth <n>] [--require-ledger] [--ledger-key <vkey>] [--witness <vkey>]...
                         [--require-anchored <n>] [--tsa-cert <tsa.pem>] [--progress | --no-progress]
       ooh-verify approval <number> --from <verify_url> [--root <authority-root.pem>] [--envelope <file>]
                         [--require-ledger] [--ledger-key <vkey>] [--witness <vkey>]...
                         [--require-anchored <n>] [--tsa-cert <tsa.pem>]

  <day>             the Asia/Almaty day of the seal, YYYY-MM-DD
  <number>          the approval number, e.g. APR-2026-000001: its manifest, the ledger leaves of its issue and
                    revocation, the chain of ledger blocks and the signed revocation list are checked
  --envelope        (approval) the approval's envelope, e.g. the <file>.envelope.json a player holds: its signature
                    against the root, and that its body is the manifest the ledger holds
  --from            the public verify URL, e.g. https://verify.example.kz
  --root            the authority root certificate you trust (PEM). Without it the root is fetched from
                    {verify_url}/v1/authority-root.pem, which proves nothing against a dishonest server.
  --batches         the day's batches exported by the authority (NDJSON): recompute root and record_count
  --depth           follow at most n previous seals back (default: all, to the first seal)
  --require-ledger  fail when the seal's (the approval's) ledger proof is not published yet
  --tsa-cert        the time-stamping authority's certificate, or the CA that issued it, that you trust (PEM):
                    every ledger block checked must carry an RFC 3161 timestamp that verifies against it
  --ledger-key      the ledger's checkpoint key you trust (vkey, e.g. verify.example.kz/ledger+1a2b3c4d+AQ...),
                    obtained from the authority: every checkpoint read must be signed by it
  --witness         a witness you trust, as its cosignature key (vkey, e.g. witness.example/w1+1a2b3c4d+BA...),
                    or name=vkey; repeatable. Its cosignatures on the ledger checkpoint are checked; one dated
                    more than 5 minutes after this computer's clock is refused.
  --require-anchored
                    fail unless at least n pinned witnesses cosigned a checkpoint at or above the seal's block
  --progress        draw progress on stderr even where no terminal is seen; --no-progress: never (default: only
                    on a terminal, not in CI; OOH_PROGRESS=1 or 0 does the same). The checks go to stdout.
`;

const MARK: Record<LineKind, string> = { ok: 'ok  ', fail: 'FAIL', note: 'note' };
const line = (kind: LineKind, text: string) => `${MARK[kind]} ${text}`;

function parseCli(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      from: { type: 'string' },
      root: { type: 'string' },
      batches: { type: 'string' },
      envelope: { type: 'string' },
      depth: { type: 'string' },
      'require-ledger': { type: 'boolean' },
      'tsa-cert': { type: 'string' },
      'ledger-key': { type: 'string' },
      witness: { type: 'string', multiple: true },
      'require-anchored': { type: 'string' },
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
    // Node's text goes on about positionals after '--': its first sentence names the option.
    io.err(`ooh-verify: ${(error as Error).message.split('. ')[0]} (ooh-verify --help lists the options)`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  const [command, day] = positionals;
  const argumentProblem =
    command === undefined
      ? 'no command: ooh-verify seal <day> --from <verify_url>, or ooh-verify approval <number> --from <verify_url>'
      : command === 'approval'
        ? approvalArgumentProblem(positionals, values)
        : command !== 'seal'
          ? `unknown command "${command}"; the commands are seal and approval`
          : day === undefined
            ? 'seal: which day? ooh-verify seal <YYYY-MM-DD> --from <verify_url>'
            : positionals.length > 2
              ? `seal: one day only, not also "${positionals[2]}"`
              : !isCalendarDate(day)
                ? `seal: "${day}" is not a day YYYY-MM-DD`
                : values.envelope !== undefined
                  ? 'seal: --envelope is for ooh-verify approval'
                  : !values.from
                    ? 'seal: --from <verify_url> is missing (the public verify URL, e.g. https://verify.example.kz)'
                    : !isHttpUrl(values.from)
                      ? `--from: "${values.from}" is not an http(s) URL (e.g. https://verify.example.kz)`
                      : null;
  if (argumentProblem !== null || day === undefined || !values.from) {
    io.err(`ooh-verify: ${argumentProblem} (ooh-verify --help)`);
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
  const witnesses: Vkey[] = [];
  for (const given of values.witness ?? []) {
    // name=vkey or the vkey alone: the vkey names the witness itself.
    // A vkey's "=" can only be the base64 padding after the second "+": one before the first "+" ends a name.
    const eq = given.indexOf('=');
    const plus = given.indexOf('+');
    const [name, text] =
      eq > 0 && (plus < 0 || eq < plus) ? [given.slice(0, eq), given.slice(eq + 1)] : [null, given];
    try {
      const vkey = parseVkey(text);
      if (vkey.type !== SIG_COSIGNATURE_V1)
        throw new NoteError('malformed_vkey', 'not a cosignature key (type 0x04)');
      if (name !== null && name !== vkey.name)
        throw new NoteError('malformed_vkey', `the vkey names ${vkey.name}, not ${name}`);
      witnesses.push(vkey);
    } catch (error) {
      io.err(
        `ooh-verify: --witness ${given}: ${(error as Error).message} (a witness vkey: <name>+<key ID>+<base64 key>)`,
      );
      return 2;
    }
  }
  let ledgerKey: Vkey | undefined;
  if (values['ledger-key'] !== undefined) {
    try {
      ledgerKey = parseVkey(values['ledger-key']);
      if (ledgerKey.type !== SIG_ED25519)
        throw new NoteError('malformed_vkey', 'not a ledger (note signing) key (type 0x01)');
    } catch (error) {
      io.err(
        `ooh-verify: --ledger-key ${values['ledger-key']}: ${(error as Error).message} (the ledger's vkey: <origin>+<key ID>+<base64 key>, as GET {verify_url}/v1/ledger/witnesses names it)`,
      );
      return 2;
    }
  }
  let requireAnchored: number | undefined;
  if (values['require-anchored'] !== undefined) {
    requireAnchored = Number(values['require-anchored']);
    if (!Number.isInteger(requireAnchored) || requireAnchored < 1 || requireAnchored > witnesses.length) {
      io.err(
        witnesses.length === 0
          ? 'ooh-verify: --require-anchored needs the witnesses you trust: --witness <vkey> (repeatable)'
          : `ooh-verify: --require-anchored must be a whole number from 1 to the ${witnesses.length} pinned witness(es), not ${values['require-anchored']}`,
      );
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
      const read = await readArgumentFile(
        '--root',
        values.root,
        `the authority's root certificate (PEM), obtained from the authority; or, unpinned, ${source.origin}/v1/authority-root.pem`,
      );
      if ('problem' in read) {
        err(read.problem);
        return 2;
      }
      rootPem = read.text;
      if (!rootPem.includes('-----BEGIN CERTIFICATE-----')) {
        err(`ooh-verify: --root ${values.root}: not a PEM certificate (-----BEGIN CERTIFICATE-----)`);
        return 2;
      }
    } else {
      const root = await source.get('/v1/authority-root.pem');
      if (root.status !== 200) {
        err(
          `ooh-verify: cannot read ${source.origin}/v1/authority-root.pem: HTTP ${root.status}; is --from the verify URL?`,
        );
        return 2;
      }
      rootPem = root.body.toString('utf8');
      out(line('note', `authority root: fetched from ${source.origin} (not pinned: pass --root to pin it)`));
    }
    let tsa: TimestampChecker | null = null;
    if (values['tsa-cert']) {
      const read = await readArgumentFile(
        '--tsa-cert',
        values['tsa-cert'],
        "the time-stamping authority's certificate (PEM), or the CA that issued it, obtained from the TSA",
      );
      if ('problem' in read) {
        err(read.problem);
        return 2;
      }
      const problem = tsaPemProblem(read.text);
      if (problem !== null) {
        err(`ooh-verify: --tsa-cert ${values['tsa-cert']}: ${problem}`);
        return 2;
      }
      tsa = timestampChecker(source, read.text);
    }
    if (command === 'approval') {
      let envelopeText: string | undefined;
      if (values.envelope) {
        const read = await readArgumentFile(
          '--envelope',
          values.envelope,
          `the approval's envelope ({"v":1, "body", "signature"}), e.g. the <file>.envelope.json a player holds`,
        );
        if ('problem' in read) {
          err(read.problem);
          return 2;
        }
        envelopeText = read.text;
      }
      const report = await verifyApproval({
        number: day,
        source: tsa ? tsa.source : source,
        rootPem,
        ...(envelopeText === undefined ? {} : { envelopeText }),
        requireLedger: values['require-ledger'] === true,
        witnesses,
        ...(requireAnchored === undefined ? {} : { requireAnchored }),
        ...(ledgerKey ? { ledgerKey } : {}),
        progress,
      });
      progress.done();
      if (tsa) await tsa.check(report);
      const lines = reportLines(report.checks, values.root ? 'pinned' : 'fetched');
      for (const check of lines) out(line(check.kind, `${check.subject}: ${check.message}`));
      const failed = lines.filter((c) => c.kind === 'fail').length;
      out(report.ok ? `approval ${day}: every check passed` : `approval ${day}: ${failed} check(s) FAILED`);
      return report.ok ? 0 : 1;
    }
    let batchesNdjson: string | undefined;
    if (values.batches) {
      progress.phase('reading the batch export');
      const read = await readArgumentFile(
        '--batches',
        values.batches,
        `the day's export, GET {base_url}/api/v1/console/seals/${day}/batches`,
      );
      if ('problem' in read) {
        err(read.problem);
        return 2;
      }
      // Another file given by mistake is the caller's slip, not a changed export (which fails checks below).
      const notExport = notABatchExport(read.text);
      if (notExport !== null) {
        err(
          `ooh-verify: --batches ${values.batches}: not an export of a day's batches (${notExport}); export it with GET {base_url}/api/v1/console/seals/${day}/batches`,
        );
        return 2;
      }
      batchesNdjson = read.text;
    }
    const report = await verifySeal({
      day,
      source,
      ...(tsa ? { source: tsa.source } : {}),
      rootPem,
      rootOrigin: values.root ? 'pinned' : 'fetched',
      ...(batchesNdjson === undefined ? {} : { batchesNdjson }),
      ...(depth === undefined ? {} : { chainDepth: depth }),
      requireLedger: values['require-ledger'] === true,
      witnesses,
      ...(requireAnchored === undefined ? {} : { requireAnchored }),
      ...(ledgerKey ? { ledgerKey } : {}),
      progress,
    });
    progress.done();
    if (tsa) await tsa.check(report);
    const lines = reportLines(report.checks, values.root ? 'pinned' : 'fetched');
    for (const check of lines) out(line(check.kind, `${check.subject}: ${check.message}`));
    const failed = lines.filter((c) => c.kind === 'fail').length;
    out(report.ok ? `seal ${day}: every check passed` : `seal ${day}: ${failed} check(s) FAILED`);
    return report.ok ? 0 : 1;
  } catch (error) {
    if (error instanceof SourceError) {
      err(unreachable(values.from, error));
      return 2;
    }
    throw error;
  } finally {
    // An unexpected error is written after this: the line is off the terminal by then.
    progress.done();
  }
}

/** What is wrong with the arguments of `ooh-verify approval`, or null. */
function approvalArgumentProblem(
  positionals: readonly string[],
  values: { from?: string; batches?: string; depth?: string },
): string | null {
  const number = positionals[1];
  if (number === undefined)
    return 'approval: which approval? ooh-verify approval <number> --from <verify_url>';
  if (positionals.length > 2) return `approval: one approval only, not also "${positionals[2]}"`;
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(number))
    return `approval: "${number}" is not an approval number (e.g. APR-2026-000001)`;
  if (values.batches !== undefined || values.depth !== undefined)
    return 'approval: --batches and --depth are for ooh-verify seal';
  if (!values.from)
    return 'approval: --from <verify_url> is missing (the public verify URL, e.g. https://verify.example.kz)';
  if (!isHttpUrl(values.from))
    return `--from: "${values.from}" is not an http(s) URL (e.g. https://verify.example.kz)`;
  return null;
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** A file named by an argument, or the line that says why it cannot be read and what it should be. */
async function readArgumentFile(
  flag: string,
  file: string,
  what: string,
): Promise<{ text: string } | { problem: string }> {
  try {
    return { text: await readFile(file, 'utf8') };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES'
          ? 'not readable by this user'
          : code === 'EISDIR'
            ? 'a folder, not a file'
            : `cannot be read (${code ?? (error as Error).message})`;
    return { problem: `ooh-verify: ${flag} ${file}: ${why}; it should be ${what}` };
  }
}

/** Why the verify host could not be read, from the network error under fetch's "fetch failed". */
function unreachable(from: string, error: SourceError): string {
  if (error.status !== undefined) {
    // It answered, but as a host that failed (5xx) or is still too busy (429): nothing was checked.
    const path = error.message.replace(/^GET (\S+):.*$/, '$1');
    return `ooh-verify: could not read the verify host ${from}: it answered HTTP ${error.status} to ${path}, so no verdict is given (exit 2, not a failed check); try again later`;
  }
  let cause: unknown = error.cause;
  while ((cause as { cause?: unknown })?.cause !== undefined && !(cause as { code?: unknown }).code) {
    cause = (cause as { cause?: unknown }).cause;
  }
  const code = (cause as { code?: unknown })?.code;
  const host = new URL(from).host;
  const why =
    code === 'ECONNREFUSED'
      ? `nothing answers at ${host} (connection refused)`
      : code === 'ENOTFOUND' || code === 'EAI_AGAIN'
        ? `the name ${new URL(from).hostname} is not known`
        : code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT'
          ? `${host} did not answer in time`
          : typeof code === 'string' && /CERT|TLS|SSL/.test(code)
            ? `its TLS certificate was not accepted (${code})`
            : typeof code === 'string'
              ? code
              : error.message;
  return `ooh-verify: cannot reach the verify host ${from}: ${why}; check --from (the public verify URL) and the network`;
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
  enterTypedInDirectory('verify');
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      // No stack: the verifier has nothing a user can act on beyond the message.
      console.error(`ooh-verify: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 2;
    },
  );
}
