import { execFile } from 'node:child_process';
import type { KeyObject } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  createCsr,
  es256Sign,
  exportPrivateKeyPem,
  exportPublicKeySpki,
  generateEs256KeyPair,
  importPrivateKey,
  splitPemChain,
} from '@ooh/crypto';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { expect } from 'vitest';
import { bootstrap } from '../../src/bootstrap.js';
import { TestClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { closePlatformCaches, platformContext } from '../../src/context.js';
import type { DeviceCa } from '../../src/devices/ca.js';
import { loadDeviceIdentitySettings } from '../../src/devices/settings.js';
import { devicesHttpsOptions } from '../../src/devices/tls.js';
import { FEATURES } from '../../src/features.js';
import { buildServers } from '../../src/platform.js';
import { createTestDatabase } from '../support/database.js';
import { apiCall, createOrganisation, createStructure, type TestPlatform } from '../support/platform.js';

export const execFileAsync = promisify(execFile);

export const MINUTE_MS = 60_000;
export const HOUR_MS = 60 * MINUTE_MS;
export const DAY_MS = 24 * HOUR_MS;

/**
 * Node's TLS checks certificate dates against the machine clock, so tests anchor the test clock to the real
 * time (to the minute): certificates issued at `realNow() - n days` are valid for TLS today.
 */
export function realNow(): Date {
  return new Date(Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS);
}

export interface DevicesTestPlatform extends TestPlatform {
  dataDir: string;
  /** https://127.0.0.1:<port> (or http:// behind a proxy). */
  devicesUrl: string;
  devicesPort: number;
  ca: DeviceCa;
  operator: { id: string; key: string };
  structure: { id: string; code: string };
  /** Errors of refused TLS handshakes on the devices listener, newest last (`code message`). */
  tlsClientErrors: string[];
}

/**
 * A platform on its own database and temp data directory, whose devices host listens for real on 127.0.0.1
 * with the TLS options startPlatform uses (HTTPS, client certificates required), unless `env` says proxy.
 */
export async function startDevicesPlatform(
  options: { now?: Date; env?: NodeJS.ProcessEnv } = {},
): Promise<DevicesTestPlatform> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-devices-'));
  const database = await createTestDatabase();
  const clock = new TestClock(options.now ?? realNow(), { frozen: true });
  const config = loadConfig({
    env: {},
    overrides: { env: 'test', testClock: true, logLevel: 'silent', databaseUrl: database.url, dataDir },
  });
  const log = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' });
  const ctx = platformContext({ config, db: database.db, clock, testClock: clock, log });
  ctx.caches.devices.useSettings(
    loadDeviceIdentitySettings({ dataDir, publicDevicesUrl: config.publicUrls.devices }, options.env ?? {}),
  );
  const devicesHttps = await devicesHttpsOptions(ctx);
  const servers = await buildServers(ctx, FEATURES, { devicesHttps });
  const { key } = await bootstrap(database.db, clock);
  await servers.devices.listen({ host: '127.0.0.1', port: 0 });
  const tlsClientErrors: string[] = [];
  servers.devices.server.on('tlsClientError', (error: NodeJS.ErrnoException) => {
    tlsClientErrors.push(`${error.code ?? ''} ${error.message}`);
  });
  const devicesPort = (servers.devices.server.address() as AddressInfo).port;
  const base: TestPlatform = {
    ctx,
    servers,
    clock,
    database,
    adminKey: key,
    close: async () => {
      await Promise.all(Object.values(servers).map((s: FastifyInstance) => s.close()));
      await closePlatformCaches(ctx.caches);
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  const operator = await createOrganisation(base, 'operator', ['console:fleet']);
  const structure = await createStructure(base, operator.id);
  return {
    ...base,
    dataDir,
    devicesUrl: `${devicesHttps ? 'https' : 'http'}://127.0.0.1:${devicesPort}`,
    devicesPort,
    ca: await ctx.caches.devices.ca(),
    operator,
    structure,
    tlsClientErrors,
  };
}

export interface KeyPair {
  publicKey: KeyObject;
  privateKey: KeyObject;
}

export interface TestDevice {
  id: string;
  structureCode: string;
  keyPair: KeyPair;
  keyPem: string;
  certPem: string;
  notAfter: string;
}

export async function csrFor(keyPair: KeyPair, subject = 'CN=player'): Promise<string> {
  return createCsr({ subject, keyPair });
}

/** Enrols a device with a CSR through the console (as the authority admin) at the platform clock's time. */
export async function enrolDevice(p: DevicesTestPlatform, structureId = p.structure.id): Promise<TestDevice> {
  const keyPair = generateEs256KeyPair();
  const res = await apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/devices', {
    structure_id: structureId,
    public_key: exportPublicKeySpki(keyPair.publicKey),
    csr: await csrFor(keyPair),
  });
  expect(res.statusCode, res.body).toBe(201);
  const body = res.json<{
    device_id: string;
    structure_code: string;
    certificate_pem: string;
    not_after: string;
  }>();
  return {
    id: body.device_id,
    structureCode: body.structure_code,
    keyPair,
    keyPem: exportPrivateKeyPem(keyPair.privateKey),
    certPem: body.certificate_pem,
    notAfter: body.not_after,
  };
}

export type DeviceResponse =
  | {
      status: number;
      headers: Record<string, unknown>;
      body: string;
      json: <T = Record<string, unknown>>() => T;
    }
  | { status: undefined; error: string };

/**
 * One request to the devices host over a fresh TLS connection (no agent: a connection, and so a client
 * certificate, is never reused between requests). Trusts only the device CA root for the server.
 */
export function deviceRequest(
  p: DevicesTestPlatform,
  args: {
    method?: 'GET' | 'POST';
    path: string;
    cert?: string;
    key?: string;
    body?: Buffer | string;
    headers?: Record<string, string>;
  },
): Promise<DeviceResponse> {
  return new Promise((resolve) => {
    const body = args.body === undefined ? undefined : Buffer.from(args.body);
    const request = https.request(
      {
        host: '127.0.0.1',
        port: p.devicesPort,
        method: args.method ?? (body ? 'POST' : 'GET'),
        path: args.path,
        agent: false,
        ca: p.ca.rootPem,
        ...(args.cert ? { cert: args.cert } : {}),
        ...(args.key ? { key: args.key } : {}),
        headers: {
          ...(body ? { 'content-type': 'application/json', 'content-length': String(body.length) } : {}),
          ...args.headers,
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (c: Buffer) => chunks.push(c));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: text,
            json: <T>() => JSON.parse(text) as T,
          });
        });
        response.on('error', (error) => resolve({ status: undefined, error: error.message }));
      },
    );
    request.on('error', (error: NodeJS.ErrnoException) =>
      resolve({ status: undefined, error: `${error.code ?? ''} ${error.message}` }),
    );
    request.end(body);
  });
}

/** POST /d/v1/renew with the client certificate, the body signed by `signWith` (default: the certificate key). */
export function renew(
  p: DevicesTestPlatform,
  args: {
    cert: string;
    key: string;
    csr: string;
    force?: boolean;
    signWith?: KeyObject | null;
    signature?: string;
  },
): Promise<DeviceResponse> {
  const body = Buffer.from(
    JSON.stringify({ csr: args.csr, ...(args.force === undefined ? {} : { force: args.force }) }),
  );
  // signWith null: no signature header; undefined: signed by the certificate's own key.
  const signature =
    args.signature ??
    (args.signWith === null
      ? undefined
      : es256Sign(args.signWith ?? importPrivateKey(args.key), new Uint8Array(body)));
  return deviceRequest(p, {
    path: '/d/v1/renew',
    cert: args.cert,
    key: args.key,
    body,
    headers: signature === undefined ? {} : { 'x-service-signature': signature },
  });
}

export function whoami(p: DevicesTestPlatform, cert: string, key: string): Promise<DeviceResponse> {
  return deviceRequest(p, { path: '/d/v1/whoami', cert, key });
}

/** Asserts an HTTP answer with this status (and problem code), returning it. */
export function expectStatus(
  res: DeviceResponse,
  status: number,
  code?: string,
): Extract<DeviceResponse, { status: number }> {
  if (res.status === undefined) throw new Error(`expected ${status}, the request failed: ${res.error}`);
  expect(res.status, res.body).toBe(status);
  if (code) expect(res.json<{ code: string }>().code).toBe(code);
  return res;
}

/** The renewed-certificate answer. */
export interface RenewBody {
  device_id: string;
  certificate_pem: string;
  chain_pem: string;
  not_after: string;
  old_valid_until: string;
}

/** Writes files into a fresh temp folder (for openssl and curl); returns their paths. */
export async function tempFiles(
  files: Record<string, string>,
): Promise<{ dir: string; paths: Record<string, string>; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-devices-files-'));
  const paths: Record<string, string> = {};
  for (const [name, content] of Object.entries(files)) {
    paths[name] = path.join(dir, name);
    await writeFile(paths[name]!, content, { mode: 0o600 });
  }
  return { dir, paths, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Splits chain_pem into the certificates above the leaf: the issuing CA(s) and the root (last). */
export function chainParts(chainPem: string): { intermediates: string[]; root: string } {
  const parts = splitPemChain(chainPem);
  return { intermediates: parts.slice(0, -1), root: parts[parts.length - 1]! };
}
