import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPki, type Pki } from './pki.js';

/** Outcome of one openssl (or sh) run; failures are values so tests can assert on them. */
export interface RunResult {
  ok: boolean;
  status: number;
  stdout: string;
  stderr: string;
}

/** A fresh folder under os.tmpdir() where openssl runs; files are passed by name. */
export class OpensslWorkspace {
  readonly dir = mkdtempSync(join(tmpdir(), 'ooh-crypto-openssl-'));

  path(name: string): string {
    return join(this.dir, name);
  }

  write(name: string, data: string | Uint8Array): string {
    writeFileSync(this.path(name), data);
    return name;
  }

  read(name: string): Buffer {
    return readFileSync(this.path(name));
  }

  /** Runs `openssl ...args` in the folder without throwing. */
  run(args: readonly string[]): RunResult {
    return execute('openssl', args, this.dir);
  }

  /** Runs `openssl ...args` and fails the test with openssl's message if it does not succeed. */
  must(args: readonly string[]): string {
    const result = this.run(args);
    if (!result.ok) throw new Error(`openssl ${args.join(' ')} failed (${result.status}): ${result.stderr}`);
    return result.stdout;
  }

  /**
   * `openssl verify` of a certificate file against `ca` (default root.pem) through `untrusted` (default issuing.pem;
   * null: none), at `at` (-attime; null: -no_check_time), with `extra` options (-purpose, -verify_hostname, ...).
   */
  verifyCertificate(
    file: string,
    options: { ca?: string; untrusted?: string | null; at: Date | null; extra?: readonly string[] },
  ): RunResult {
    const untrusted = options.untrusted === undefined ? 'issuing.pem' : options.untrusted;
    return this.run([
      'verify',
      '-CAfile',
      options.ca ?? 'root.pem',
      ...(untrusted === null ? [] : ['-untrusted', untrusted]),
      ...(options.at === null ? ['-no_check_time'] : ['-attime', attime(options.at)]),
      ...(options.extra ?? []),
      file,
    ]);
  }

  /**
   * `openssl cms -verify -binary -inform DER -CAfile <ca>` of a SignedData file (DESIGN.md §4's command) at `at`
   * (-attime; omitted: openssl's own clock, as a reader runs the command); the content goes to `out` (default
   * `<file>.out`). Files are names in the folder or absolute paths.
   */
  verifyCms(
    file: string,
    options: { ca: string; at?: Date; extra?: readonly string[]; out?: string },
  ): RunResult {
    const command = ['cms', '-verify', '-binary', '-inform', 'DER', '-in', file, '-CAfile', options.ca];
    return this.run([
      ...command,
      ...(options.at === undefined ? [] : ['-attime', attime(options.at)]),
      ...(options.extra ?? []),
      '-out',
      options.out ?? `${file}.out`,
    ]);
  }

  /** Runs a POSIX sh script in the folder: one process for a loop of many openssl calls. */
  shell(script: string): RunResult {
    return execute('sh', ['-c', script], this.dir);
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function execute(command: string, args: readonly string[], cwd: string): RunResult {
  // spawnSync rather than execFileSync: some openssl 3.0 commands report a failure on stderr with exit
  // status 0 (req -verify), so tests need stderr of successful runs too.
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error) throw result.error;
  return {
    ok: result.status === 0,
    status: result.status ?? -1,
    stdout: result.stdout,
    stderr: result.stderr,
  };
}

/**
 * A workspace holding a fresh PKI (helpers/pki.ts) as root.pem and issuing.pem, what every openssl cross-check of a
 * chain or a SignedData starts from.
 */
export async function pkiWorkspace(): Promise<{ ws: OpensslWorkspace; pki: Pki }> {
  const ws = new OpensslWorkspace();
  const pki = await createPki();
  ws.write('root.pem', pki.rootPem);
  ws.write('issuing.pem', pki.issuingPem);
  return { ws, pki };
}

/** `-attime` argument: whole seconds since the epoch. */
export function attime(date: Date): string {
  return String(Math.floor(date.getTime() / 1000));
}

// ECDSA signatures: openssl writes DER ECDSA-Sig-Value (SEQUENCE { INTEGER r, INTEGER s }); the spec's
// form is raw r‖s, 32 bytes each.

function readDerInteger(der: Uint8Array, offset: number): { value: Uint8Array; next: number } {
  if (der[offset] !== 0x02) throw new Error('expected INTEGER');
  const length = der[offset + 1]!;
  if (length > 0x7f) throw new Error('unexpected long INTEGER length');
  return { value: der.subarray(offset + 2, offset + 2 + length), next: offset + 2 + length };
}

function toFixed32(integer: Uint8Array): Uint8Array {
  let start = 0;
  while (start < integer.length - 1 && integer[start] === 0) start += 1;
  const trimmed = integer.subarray(start);
  if (trimmed.length > 32) throw new Error('integer longer than 32 bytes');
  const out = new Uint8Array(32);
  out.set(trimmed, 32 - trimmed.length);
  return out;
}

export function derSignatureToRaw(der: Uint8Array): Uint8Array {
  if (der[0] !== 0x30) throw new Error('expected SEQUENCE');
  const headerLength = der[1]! > 0x7f ? 3 : 2;
  const r = readDerInteger(der, headerLength);
  const s = readDerInteger(der, r.next);
  if (s.next !== der.length) throw new Error('trailing bytes after ECDSA-Sig-Value');
  const raw = new Uint8Array(64);
  raw.set(toFixed32(r.value), 0);
  raw.set(toFixed32(s.value), 32);
  return raw;
}

function derInteger(unsigned: Uint8Array): Uint8Array {
  let start = 0;
  while (start < unsigned.length - 1 && unsigned[start] === 0) start += 1;
  const trimmed = unsigned.subarray(start);
  const body = trimmed[0]! & 0x80 ? Uint8Array.of(0, ...trimmed) : Uint8Array.from(trimmed);
  return Uint8Array.of(0x02, body.length, ...body);
}

export function rawSignatureToDer(raw: Uint8Array): Uint8Array {
  if (raw.length !== 64) throw new Error('raw signature must be 64 bytes');
  const body = [...derInteger(raw.subarray(0, 32)), ...derInteger(raw.subarray(32))];
  return Uint8Array.of(0x30, body.length, ...body);
}
