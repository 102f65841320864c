import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { promisify } from 'node:util';
import { afterAll, beforeAll } from 'vitest';
import { OpensslWorkspace } from './openssl.js';

const run = promisify(execFile);

export interface TsaOptions {
  name?: string;
  key?: 'ec' | 'rsa';
  intermediate?: boolean;
}

/**
 * TSAs a test file uses, by name: made before its tests (vitest's beforeAll) and removed after them. Read their
 * fields inside tests only.
 */
export function tsasForFile<K extends string>(options: Record<K, TsaOptions>): Record<K, OpensslTsa> {
  const tsas = {} as Record<K, OpensslTsa>;
  beforeAll(() => {
    for (const key of Object.keys(options) as K[]) tsas[key] = new OpensslTsa(options[key]);
  });
  afterAll(() => {
    for (const tsa of Object.values<OpensslTsa>(tsas)) tsa.dispose();
  });
  return tsas;
}

/**
 * A time-stamping authority made of `openssl ts -reply` (RFC 3161), in a temporary folder: its own root CA and a TSA
 * certificate below it with extendedKeyUsage critical timeStamping, and a tsa configuration section. Certificates
 * are dated from the machine's clock (openssl stamps with it).
 */
export class OpensslTsa {
  readonly ws = new OpensslWorkspace();
  /** The CA that issued the TSA certificate (PEM). */
  readonly caPem: string;
  /** The TSA's own certificate (PEM). */
  readonly tsaPem: string;
  /** With `intermediate`: the CA between the root and the TSA, carried in every token (PEM). */
  readonly intermediatePem: string | null = null;

  /** `intermediate`: the TSA certificate is issued by an intermediate CA below the root, which tokens carry. */
  constructor(options: TsaOptions = {}) {
    const name = options.name ?? 'Test TSA';
    const ws = this.ws;
    const keyArgs =
      options.key === 'rsa'
        ? ['-newkey', 'rsa:2048']
        : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'];
    ws.must([
      'req',
      '-x509',
      ...keyArgs,
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '30',
      '-subj',
      `/CN=${name} Root CA`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    ws.must([
      'req',
      '-new',
      ...keyArgs,
      '-nodes',
      '-keyout',
      'tsa.key',
      '-out',
      'tsa.csr',
      '-subj',
      `/CN=${name}`,
    ]);
    ws.write(
      'tsa-ext.cnf',
      [
        'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature,nonRepudiation',
        'extendedKeyUsage=critical,timeStamping',
        'subjectKeyIdentifier=hash',
        'authorityKeyIdentifier=keyid',
        '',
      ].join('\n'),
    );
    let issuer = 'ca';
    if (options.intermediate) {
      ws.must([
        'req',
        '-new',
        ...keyArgs,
        '-nodes',
        '-keyout',
        'int.key',
        '-out',
        'int.csr',
        '-subj',
        `/CN=${name} Intermediate CA`,
      ]);
      ws.write(
        'int-ext.cnf',
        [
          'basicConstraints=critical,CA:TRUE,pathlen:0',
          'keyUsage=critical,keyCertSign,cRLSign',
          'subjectKeyIdentifier=hash',
          'authorityKeyIdentifier=keyid',
          '',
        ].join('\n'),
      );
      ws.must([
        'x509',
        '-req',
        '-in',
        'int.csr',
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        'int.pem',
        '-days',
        '30',
        '-extfile',
        'int-ext.cnf',
      ]);
      issuer = 'int';
    }
    ws.must([
      'x509',
      '-req',
      '-in',
      'tsa.csr',
      '-CA',
      `${issuer}.pem`,
      '-CAkey',
      `${issuer}.key`,
      '-CAcreateserial',
      '-out',
      'tsa.pem',
      '-days',
      '30',
      '-extfile',
      'tsa-ext.cnf',
    ]);
    ws.write('tsaserial', '01\n');
    ws.write(
      'tsa.cnf',
      [
        '[ tsa ]',
        'default_tsa = tsa_config',
        '[ tsa_config ]',
        `serial = ${ws.path('tsaserial')}`,
        'crypto_device = builtin',
        `signer_cert = ${ws.path('tsa.pem')}`,
        `signer_key = ${ws.path('tsa.key')}`,
        'signer_digest = sha256',
        'default_policy = 1.2.3.4.1',
        'other_policies = 1.2.3.4.5',
        'digests = sha256, sha384, sha512',
        'accuracy = secs:1',
        'ordering = yes',
        'tsa_name = yes',
        'ess_cert_id_chain = no',
        'ess_cert_id_alg = sha256',
        ...(options.intermediate ? [`certs = ${ws.path('int.pem')}`] : []),
        '',
      ].join('\n'),
    );
    this.caPem = ws.read('ca.pem').toString('utf8');
    this.tsaPem = ws.read('tsa.pem').toString('utf8');
    if (options.intermediate) this.intermediatePem = ws.read('int.pem').toString('utf8');
  }

  /** `openssl ts -reply` to a DER TimeStampReq: the DER TimeStampResp. */
  async reply(query: Uint8Array): Promise<Buffer> {
    const id = randomBytes(6).toString('hex');
    const queryFile = this.ws.path(`q-${id}.tsq`);
    const replyFile = this.ws.path(`r-${id}.tsr`);
    await writeFile(queryFile, query);
    try {
      await run(
        'openssl',
        [
          'ts',
          '-reply',
          '-config',
          'tsa.cnf',
          '-section',
          'tsa_config',
          '-queryfile',
          queryFile,
          '-out',
          replyFile,
        ],
        { cwd: this.ws.dir },
      );
      return await readFile(replyFile);
    } finally {
      await rm(queryFile, { force: true });
      await rm(replyFile, { force: true });
    }
  }

  dispose(): void {
    this.ws.dispose();
  }
}

/**
 * The TSA over HTTP (RFC 3161 §3.4): POST application/timestamp-query, answered application/timestamp-reply.
 * `down` makes it answer 503 (a TSA that is down), `queries` counts the requests it got.
 */
export async function serveTsa(tsa: OpensslTsa): Promise<{
  url: string;
  queries: () => number;
  setDown: (down: boolean) => void;
  close: () => Promise<void>;
}> {
  let down = false;
  let count = 0;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      count += 1;
      if (
        down ||
        request.method !== 'POST' ||
        request.headers['content-type'] !== 'application/timestamp-query'
      ) {
        response.writeHead(down ? 503 : 400).end();
        return;
      }
      tsa.reply(Buffer.concat(chunks)).then(
        (body) => response.writeHead(200, { 'content-type': 'application/timestamp-reply' }).end(body),
        () => response.writeHead(500).end(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/tsa`,
    queries: () => count,
    setDown: (value) => {
      down = value;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
