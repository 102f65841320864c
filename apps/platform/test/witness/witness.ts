#!/usr/bin/env node
import { createHash, generateKeyPairSync, type KeyObject, createPrivateKey } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import { canonicalize } from '@ooh/crypto';
import { checkSignature, parseCheckpoint, parseNote, parseVkey, type Vkey } from '@ooh/verify';
import { cosign, formatVkey, rawEd25519PublicKey, SIG_COSIGNATURE_V1 } from '../../src/ledger/note.js';

/*
 * A witness for tests, at the edge of what we own, run as its own process over HTTP. Written from
 * c2sp.org/tlog-witness ("add-checkpoint", the monitoring GET) and c2sp.org/tlog-cosignature (Ed25519 cosignature/v1),
 * with one departure, the one our ledger asks every witness to make (docs/ledger-witnesses.md): the "consistency
 * proof" lines are the digest preimages of the blocks between the old size and the new one (base64 of their
 * canonical JSON), each chaining to the one before by prev_digest, instead of RFC 6962 subtree hashes.
 *
 *   node --conditions=source --import tsx test/witness/witness.ts --name witness.test/w1 --key key.pem \
 *     --state state.json --log '<log vkey>' [--port 0] [--clock-offset <ms>]
 *
 * Prints one JSON line {"url", "vkey"} once it listens. The key file is made on first start (PKCS#8 PEM), so a
 * restarted witness keeps its key; the state file holds, per origin, the latest checkpoint it cosigned and is
 * rewritten whole (temp file and rename) before any answer, in the same turn of the event loop as the check
 * (tlog-witness: "checking the old size against the latest checkpoint and persisting the new checkpoint must be
 * performed atomically"). The checkpoint and the log's signature are checked by @ooh/verify, as every note is, before
 * that turn: they depend on the request and the log keys only, never on the state.
 */

const { values } = parseArgs({
  options: {
    name: { type: 'string' },
    key: { type: 'string' },
    state: { type: 'string' },
    log: { type: 'string', multiple: true },
    port: { type: 'string', default: '0' },
    'clock-offset': { type: 'string', default: '0' },
  },
});
if (!values.name || !values.key || !values.state || !values.log?.length) {
  console.error(
    'usage: witness --name <name> --key <key.pem> --state <state.json> --log <log vkey> [--port n]',
  );
  process.exit(2);
}
const name = values.name;
/** Milliseconds added to this computer's clock when dating a cosignature: the tests' platform runs on a moved clock,
 * and the platform refuses a cosignature dated after its own clock (as every verifier does after theirs). */
const clockOffsetMs = Number(values['clock-offset']);
const stateFile = values.state;

function loadKey(file: string): KeyObject {
  if (!existsSync(file)) {
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(file, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
  }
  return createPrivateKey(readFileSync(file, 'utf8'));
}
const key = loadKey(values.key);
const vkey = formatVkey(name, SIG_COSIGNATURE_V1, rawEd25519PublicKey(key));
/** Log keys by origin (the key name of a log's checkpoint signature is its origin). */
const logs = new Map<string, Vkey[]>();
for (const text of values.log) {
  const log = await parseVkey(text);
  if (!log) {
    console.error(`witness: --log ${text} is not a vkey`);
    process.exit(2);
  }
  logs.set(log.name, [...(logs.get(log.name) ?? []), log]);
}

interface Latest {
  size: number;
  /** base64 */
  root: string;
  /** The checkpoint as submitted plus our cosignature: what the monitoring GET serves. */
  note: string;
}
type State = Record<string, Latest>;
const state: State = existsSync(stateFile) ? (JSON.parse(readFileSync(stateFile, 'utf8')) as State) : {};

function persist(): void {
  const temp = `${stateFile}.tmp`;
  writeFileSync(temp, JSON.stringify(state));
  renameSync(temp, stateFile);
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly contentType = 'text/plain; charset=utf-8',
  ) {
    super(message);
  }
}

const EMPTY_ROOT = createHash('sha256').update('').digest('base64');
const SHA256_HEX = /^[0-9a-f]{64}$/;
const DAY = /^\d{4}-\d\d-\d\d$/;

function nextDay(day: string): string {
  const t = Date.parse(`${day}T00:00:00Z`) + 86_400_000;
  return new Date(t).toISOString().slice(0, 10);
}

/**
 * Our chain's consistency check: from the root we hold (size `old`), each line is a block header whose prev_digest is
 * the hash before it and whose SHA-256 is the next; the last one must be the checkpoint's root.
 */
function verifyChainProof(
  oldRoot: Buffer,
  old: number,
  size: number,
  proof: string[],
  root: Buffer,
): string | null {
  if (proof.length !== size - old) return `the proof has ${proof.length} lines for ${size - old} blocks`;
  let previous = oldRoot;
  let previousDay: string | null = null;
  for (const [i, line] of proof.entries()) {
    const bytes = Buffer.from(line, 'base64');
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
    } catch {
      return `proof line ${i + 1} is not a block header`;
    }
    if (
      typeof header !== 'object' ||
      header === null ||
      Object.keys(header).sort().join() !== 'block_height,day,leaf_count,merkle_root,prev_digest,v' ||
      canonicalize(header) !== bytes.toString('utf8')
    ) {
      return `proof line ${i + 1} is not the canonical JSON of a block header`;
    }
    const { v, day, block_height, leaf_count, merkle_root, prev_digest } = header;
    if (
      v !== 1 ||
      block_height !== old + i + 1 ||
      !Number.isSafeInteger(leaf_count) ||
      (leaf_count as number) < 0
    )
      return `proof line ${i + 1}: not block ${old + i + 1}`;
    if (typeof day !== 'string' || !DAY.test(day) || (previousDay !== null && day !== nextDay(previousDay)))
      return `proof line ${i + 1}: its day does not follow the one before`;
    if (typeof merkle_root !== 'string' || !SHA256_HEX.test(merkle_root))
      return `proof line ${i + 1}: merkle_root`;
    if (prev_digest !== previous.toString('hex'))
      return `block ${old + i + 1} does not extend the checkpoint of size ${old + i} this witness holds`;
    previous = createHash('sha256').update(bytes).digest();
    previousDay = day;
  }
  return previous.equals(root) ? null : 'the last block is not the checkpoint root';
}

/**
 * tlog-witness add-checkpoint, its checks in the order the text gives them. Every await comes before the state is
 * read: from there to persist() is one turn of the event loop.
 */
async function addCheckpoint(body: string): Promise<string> {
  const blank = body.indexOf('\n\n');
  if (blank < 0) throw new Refusal(400, 'no empty line before the checkpoint');
  const head = body.slice(0, blank).split('\n');
  const oldMatch = /^old (0|[1-9][0-9]*)$/.exec(head[0] ?? '');
  if (!oldMatch) throw new Refusal(400, 'the first line is not "old <size>"');
  const old = Number(oldMatch[1]);
  const proof = head.slice(1);
  if (proof.length > 4096) throw new Refusal(400, 'too many proof lines');
  if (proof.some((l) => !/^[A-Za-z0-9+/]+={0,2}$/.test(l)))
    throw new Refusal(400, 'a proof line is not base64');
  const note = parseNote(body.slice(blank + 2));
  if (!note) throw new Refusal(400, 'not a signed note');
  const checkpoint = parseCheckpoint(note.text);
  if (!checkpoint) throw new Refusal(400, 'not a checkpoint');
  const keys = logs.get(checkpoint.origin);
  // "If the checkpoint origin is unknown, the witness MUST respond with a 404 Not Found".
  if (!keys) throw new Refusal(404, `unknown origin ${checkpoint.origin}`);
  // "403 Forbidden if either no signature from a trusted key for the origin is present, or a signature line's key
  // name and ID match a trusted key but the signature itself fails to verify".
  const checks = await Promise.all(note.signatures.map((s) => checkSignature(note.text, s, keys)));
  if (checks.some((c) => c.state === 'invalid') || !checks.some((c) => c.state === 'valid'))
    throw new Refusal(403, 'no valid signature of the log');
  // "The old size MUST be equal to or lower than the checkpoint size. Otherwise ... 400 Bad Request".
  if (old > checkpoint.size) throw new Refusal(400, 'old size beyond the checkpoint size');
  const latest = state[checkpoint.origin];
  const held = latest?.size ?? 0;
  // "If it doesn't match, the witness MUST respond with a 409 Conflict ... the tree size of the latest cosigned
  // checkpoint in decimal, followed by a newline ... Content-Type of text/x.tlog.size."
  if (old !== held) throw new Refusal(409, `${held}\n`, 'text/x.tlog.size');
  const rootHash = Buffer.from(checkpoint.root, 'hex');
  const root = rootHash.toString('base64');
  // "A checkpoint of size zero MUST have the root hash of the empty tree ... Otherwise ... 422".
  if (checkpoint.size === 0 && root !== EMPTY_ROOT) throw new Refusal(422, 'size 0 with a non-empty root');
  if (old === 0) {
    if (proof.length > 0) throw new Refusal(422, 'a proof from size 0');
  } else if (old === checkpoint.size) {
    // "If the old size matches the checkpoint size, the witness MUST check that the root hashes are also identical."
    if (root !== latest?.root) throw new Refusal(422, 'same size, another root: a split view');
  } else {
    const wrong = verifyChainProof(
      Buffer.from(latest!.root, 'base64'),
      old,
      checkpoint.size,
      proof,
      rootHash,
    );
    if (wrong) throw new Refusal(422, wrong);
  }
  const timestamp = BigInt(Math.floor((Date.now() + clockOffsetMs) / 1000));
  const line = cosign(note.text, name, key, timestamp).line;
  const own = note.signatures.filter((_, i) => checks[i]!.state === 'valid').map((s) => s.line);
  // "The witness MUST persist the new checkpoint before responding."
  state[checkpoint.origin] = { size: checkpoint.size, root, note: `${note.text}\n${own.join('')}${line}` };
  persist();
  return line;
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 1024 * 1024) throw new Refusal(413, 'too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

const server = createServer((req, res) => {
  void (async () => {
    try {
      if (req.method === 'POST' && req.url === '/add-checkpoint') {
        const body = await readBody(req);
        send(res, 200, 'text/plain; charset=utf-8', await addCheckpoint(body));
        return;
      }
      // "GET <monitoring prefix>/<origin hash>/checkpoint" (hex SHA-256 of the origin).
      const monitor = /^\/([0-9a-f]{64})\/checkpoint$/.exec(req.url ?? '');
      if (req.method === 'GET' && monitor) {
        const origin = [...logs.keys()].find(
          (o) => createHash('sha256').update(o).digest('hex') === monitor[1],
        );
        const latest = origin === undefined ? undefined : state[origin];
        if (!latest) throw new Refusal(404, 'never cosigned that log');
        send(res, 200, 'text/plain; charset=utf-8', latest.note);
        return;
      }
      throw new Refusal(404, 'not found');
    } catch (error) {
      if (error instanceof Refusal)
        send(
          res,
          error.status,
          error.contentType,
          error.message.endsWith('\n') ? error.message : `${error.message}\n`,
        );
      else send(res, 500, 'text/plain; charset=utf-8', 'internal error\n');
    }
  })();
});

server.listen(Number(values.port), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}`, vkey })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
