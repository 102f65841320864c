#!/usr/bin/env node
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import {
  exportPrivateKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  importPrivateKey,
  isCryptoError,
} from '@ooh/crypto';
import { isUuid } from '@ooh/protocol';
import {
  createProgress,
  type Env,
  enterTypedInDirectory,
  PROGRESS_FLAGS,
  type ProgressStream,
  progressMode,
} from '@ooh/progress';
import { ExportError, FORMATS, type Format } from './formats/source.js';
import { PlanMismatchError, runImport } from './import.js';
import { MappingError, parseMapping } from './mapping.js';
import type { SendOptions } from './send.js';
import { StateError } from './state.js';
import { type Summary, summaryLines } from './summary.js';
import { isTimeZone } from './time-zone.js';

/*
 * ooh-pop: proof of play from an operator's existing CMS, on the operator's side (issue 20 item 2).
 *
 *   ooh-pop import --api <base_url> --source <installation uuid> --key <installation key.pem>
 *                  --mapping <mapping.json> [--timezone <zone>] [--format xibo|broadsign] [--state <dir>]
 *                  [--first-batch-seq <n>] [--api-key-file <file>] [--dry-run] [--json] <export file>
 *   ooh-pop keygen --out <key.pem>
 *
 * Everything it sends is signed with the installation's key on this machine: nothing unsigned reaches the platform.
 */

export const USAGE = `usage: ooh-pop import --api <base_url> --source <installation id> --key <key.pem> --mapping <mapping.json>
                      [--timezone <zone>] [--format xibo|broadsign] [--state <dir>] [--first-batch-seq <n>]
                      [--api-key-file <file>] [--dry-run] [--json] [--progress | --no-progress] <export file>
       ooh-pop keygen --out <key.pem>

import: reads a Xibo proof-of-play export (CSV) or a Broadsign playlog (tab-separated, gzipped or not), maps its
displays and media to players and approvals, and sends it as signed, gzipped batches to
{base_url}/api/v1/pop/batches. Running it again on the same export sends the same bytes and counts nothing twice;
a later export numbers on from where the last one ended.

  --api              the platform's {base_url}, e.g. https://api.example.kz
  --source           the CMS installation's id (console: Fleet, CMS installations)
  --key              the installation's private key (PEM, P-256), as made by "ooh-pop keygen"
  --mapping          JSON: {"players": {"<display>": "<player external id>"},
                            "media": {"<media>": {"approval_number": "...", "media_sha256": "..."}}}
  --timezone         the zone of the export's times (e.g. Asia/Almaty, or UTC for a Xibo export "output in UTC");
                     required when the times carry none, which is always so for Xibo and Broadsign
  --format           xibo or broadsign (default: told by the file's first line)
  --state            the installation's numbering, kept between runs (default:
                     $XDG_STATE_HOME/ooh-pop/<installation id>, else ~/.local/state/ooh-pop/<installation id>);
                     back it up: it is what makes tomorrow's batches follow today's
  --first-batch-seq  for a new state folder of an installation that has already sent batches by other means
  --api-key-file     a file holding the API key (scope write:plays); default: the OOH_API_KEY variable
  --dry-run          read, map and plan, print what would be sent; send and change nothing
  --json             the summary as JSON on stdout instead of lines
  --progress         draw progress on stderr even where no terminal is seen; --no-progress: never

keygen: writes a new P-256 private key (mode 0600) and prints its public key (base64 of the SubjectPublicKeyInfo)
to register for the installation in the console.

Exit status: 0 every play sent and counted (or counted before); 1 some rows or records were not counted (see the
summary); 2 bad arguments, or the export or mapping refused: nothing sent; 3 sending stopped before every batch was
answered: the rest is kept and sent again, the same bytes, by the next run.`;

export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
  progress?: ProgressStream;
  /** The progress line's clock (monotonic ms); default performance.now. */
  progressNow?: () => number;
  env?: Env;
  /** Injected by tests (a fake network, a clock). */
  send?: Partial<Pick<SendOptions, 'fetch' | 'now' | 'sleep' | 'random' | 'pacing' | 'giveUpAfterMs'>>;
}

function parseCli(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      api: { type: 'string' },
      source: { type: 'string' },
      key: { type: 'string' },
      mapping: { type: 'string' },
      timezone: { type: 'string' },
      format: { type: 'string' },
      state: { type: 'string' },
      'first-batch-seq': { type: 'string' },
      'api-key-file': { type: 'string' },
      'dry-run': { type: 'boolean' },
      json: { type: 'boolean' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      ...PROGRESS_FLAGS,
    },
  });
}

class UsageError extends Error {}

export function defaultStateFolder(sourceId: string, env: Env): string {
  const base = env['XDG_STATE_HOME'] || path.join(env['HOME'] || os.homedir(), '.local', 'state');
  return path.join(base, 'ooh-pop', sourceId);
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
  const [command, ...rest] = positionals;
  try {
    if (command === 'keygen' && rest.length === 0) return keygen(values.out, io);
    if (command === 'import' && rest.length === 1) return await importCommand(rest[0]!, values, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(error.message);
      return 2;
    }
    throw error;
  }
  io.err(USAGE);
  return 2;
}

function keygen(out: string | undefined, io: CliIo): number {
  if (!out) throw new UsageError('keygen needs --out <file> for the private key');
  if (existsSync(out)) throw new UsageError(`${out} exists: a key is never overwritten`);
  const { publicKey, privateKey } = generateEs256KeyPair();
  writeFileSync(out, exportPrivateKeyPem(privateKey), { mode: 0o600, flag: 'wx' });
  io.err(
    `private key written to ${out} (mode 0600); keep it on this machine. Register this public key for the`,
  );
  io.err('CMS installation in the console (Fleet, CMS installations):');
  io.out(exportPublicKeySpki(publicKey));
  return 0;
}

function readText(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read the ${what} ${file}: ${(error as Error).message}`);
  }
}

async function importCommand(
  file: string,
  values: ReturnType<typeof parseCli>['values'],
  io: CliIo,
): Promise<number> {
  const env = io.env ?? process.env;
  const dryRun = values['dry-run'] === true;
  const required: ('source' | 'mapping' | 'api' | 'key')[] = [
    'source',
    'mapping',
    ...(dryRun ? [] : (['api', 'key'] as const)),
  ];
  const missing = required.filter((name) => !values[name]);
  if (missing.length > 0)
    throw new UsageError(`import needs ${missing.map((n) => `--${n}`).join(', ')}\n\n${USAGE}`);
  const sourceId = values.source!;
  if (!isUuid(sourceId))
    throw new UsageError(`--source must be the installation's id (a uuid), not ${sourceId}`);
  if (values.format !== undefined && !FORMATS.includes(values.format as Format)) {
    throw new UsageError(`--format is one of ${FORMATS.join(', ')}, not ${values.format}`);
  }
  const timeZone = values.timezone ?? null;
  if (timeZone !== null && !isTimeZone(timeZone)) {
    throw new UsageError(
      `--timezone ${timeZone} is not a time zone (an IANA name such as Asia/Almaty, or UTC)`,
    );
  }
  let firstBatchSeq: number | undefined;
  if (values['first-batch-seq'] !== undefined) {
    firstBatchSeq = Number(values['first-batch-seq']);
    if (!/^\d+$/.test(values['first-batch-seq']) || !Number.isSafeInteger(firstBatchSeq)) {
      throw new UsageError(`--first-batch-seq must be a whole number, not ${values['first-batch-seq']}`);
    }
  }
  let apiUrl = '';
  let apiKey = '';
  let privateKey: SendOptions['privateKey'] | undefined;
  if (!dryRun) {
    apiUrl = values.api!;
    if (!/^https?:\/\/[^/]/.test(apiUrl)) throw new UsageError(`--api must be an http(s) URL, not ${apiUrl}`);
    apiKey = (
      values['api-key-file'] ? readText(values['api-key-file'], 'API key file') : (env['OOH_API_KEY'] ?? '')
    ).trim();
    if (apiKey === '') {
      throw new UsageError(
        'no API key: set OOH_API_KEY or give --api-key-file (never the key on the command line)',
      );
    }
    try {
      privateKey = importPrivateKey(readText(values.key!, 'key file'));
    } catch (error) {
      if (isCryptoError(error)) throw new UsageError(`--key ${values.key}: ${error.message}`);
      throw error;
    }
  }
  let mapping: ReturnType<typeof parseMapping>;
  try {
    mapping = parseMapping(readText(values.mapping!, 'mapping file'));
  } catch (error) {
    if (error instanceof MappingError) throw new UsageError(`${values.mapping}: ${error.message}`);
    throw error;
  }
  if (!existsSync(file)) throw new UsageError(`no export file ${file}`);

  const progress = createProgress({
    stream: io.progress ?? process.stderr,
    mode: progressMode(values, env),
    env,
    ...(io.progressNow ? { now: io.progressNow } : {}),
  });
  const out = (text: string) => progress.print(text, io.out);
  const err = (text: string) => progress.print(text, io.err);
  let summary: Summary;
  try {
    summary = await runImport({
      file,
      ...(values.format ? { format: values.format as Format } : {}),
      timeZone,
      mapping,
      stateFolder: values.state ?? defaultStateFolder(sourceId, env),
      ...(firstBatchSeq === undefined ? {} : { firstBatchSeq }),
      dryRun,
      send: { apiUrl, apiKey, sourceId, privateKey: privateKey!, ...io.send },
      progress,
    });
  } catch (error) {
    progress.done();
    if (error instanceof ExportError) {
      err(`${file}: ${error.message}; nothing was sent`);
      return 2;
    }
    if (error instanceof StateError || error instanceof PlanMismatchError) {
      err(`${error.message}`);
      return error instanceof StateError && error.code === 'bytes_missing' ? 3 : 2;
    }
    throw error;
  } finally {
    progress.done();
  }
  if (values.json) out(JSON.stringify(summary, null, 2));
  else for (const line of summaryLines(summary)) out(line);
  if (dryRun) {
    if (!values.json) out('dry run: nothing was sent and the state was not changed');
    return 0;
  }
  if (summary.stopped !== null || summary.pending > 0) return 3;
  const notSent = Object.keys(summary.not_sent).length > 0;
  return notSent || summary.sent.refused > 0 ? 1 : 0;
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
  enterTypedInDirectory('pop');
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
