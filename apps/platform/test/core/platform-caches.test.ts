import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { generateEs256KeyPair, sha256Hex } from '@ooh/crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadAuthority } from '../../src/authority/load.js';
import { TestClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { issueDeviceCertificate } from '../../src/devices/ca.js';
import { type Platform, startPlatform } from '../../src/platform.js';
import { ensureRecordPartition } from '../../src/pop/store.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

// Issue 18 ("while you are in there"): the caches that were module-level maps keyed by context or configuration (the
// device settings and CA, the proxied chains and serials authenticate.ts remembers, the authority) live on the
// platform's context: two platforms in one process share none of them, and close() empties them.

/** A TLS-terminating proxy on loopback passes the client certificate (the devices listener is plain HTTP). */
const PROXY_ENV = {
  DEVICES_TLS_TERMINATION: 'proxy',
  DEVICES_CLIENT_CERT_HEADER: 'x-client-cert',
  DEVICES_TRUSTED_PROXIES: '127.0.0.1',
};

let database: TestDatabase;
let tmp: string;
const started: Platform[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ooh-platform-caches-'));
});
afterAll(async () => {
  for (const p of started) await p.close();
  await database?.drop();
  await rm(tmp, { recursive: true, force: true });
});

/** A platform listening on free ports of loopback, on the shared database and its own data folder. */
async function start(dataDir: string): Promise<Platform> {
  const config = loadConfig({
    env: { API_PORT: '0', AGENTS_PORT: '0', DEVICES_PORT: '0', VERIFY_PORT: '0', ...PROXY_ENV },
    overrides: { env: 'test', logLevel: 'silent', databaseUrl: database.url, dataDir },
  });
  const platform = await startPlatform({
    config,
    clock: new TestClock(new Date(), { frozen: true }),
    log: pino({ level: 'silent' }),
  });
  started.push(platform);
  return platform;
}

/** A client certificate issued by the platform's device CA to a device it has never enrolled. */
async function certificateOf(p: Platform): Promise<string> {
  const { pem } = await issueDeviceCertificate(await p.ctx.caches.devices.ca(), {
    deviceId: randomUUID(),
    publicKey: generateEs256KeyPair().publicKey,
    now: p.ctx.clock.now(),
  });
  return pem;
}

const whoami = (p: Platform, pem: string) =>
  p.servers.devices.inject({
    method: 'GET',
    url: '/d/v1/whoami',
    remoteAddress: '127.0.0.1',
    headers: { 'x-client-cert': encodeURIComponent(pem) },
  });

const derDigest = (pem: string) => sha256Hex(Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64'));

describe('the caches of a platform', () => {
  test('two platforms in one process keep their own device CA, authority and remembered certificates', async () => {
    const a = await start(path.join(tmp, 'a'));
    const b = await start(path.join(tmp, 'b'));
    expect(a.ctx.caches).not.toBe(b.ctx.caches);
    // Proof of play: each its own shared lookup, group committer (each on its own pool) and known partitions.
    expect(a.ctx.caches.pop.lookups).not.toBe(b.ctx.caches.pop.lookups);
    expect(a.ctx.caches.pop.committer).not.toBe(b.ctx.caches.pop.committer);
    await ensureRecordPartition(a.ctx.db, '2026-11-20', a.ctx.caches.pop.partitions);
    expect([...a.ctx.caches.pop.partitions]).toEqual(['2026-11']);
    expect(b.ctx.caches.pop.partitions.size).toBe(0);
    expect(a.ctx.caches.devices.settings().dir).toBe(path.join(tmp, 'a', 'device-ca'));
    expect(b.ctx.caches.devices.settings().dir).toBe(path.join(tmp, 'b', 'device-ca'));
    expect((await a.ctx.caches.devices.ca()).rootPem).not.toBe((await b.ctx.caches.devices.ca()).rootPem);
    expect((await loadAuthority(a.ctx)).rootPem).not.toBe((await loadAuthority(b.ctx)).rootPem);

    // A certificate of A's CA: A chains it (and remembers the chain and its serial), then finds no device for it.
    const pem = await certificateOf(a);
    const digest = derDigest(pem);
    const onA = await whoami(a, pem);
    expect(onA.statusCode).toBe(401);
    expect(onA.json<{ detail: string }>().detail).toMatch(/was not issued to any device/);
    expect(a.ctx.caches.devices.verifiedChains.has(digest)).toBe(true);
    expect(a.ctx.caches.devices.serials.has(digest)).toBe(true);
    // B never takes A's verification for its own: the certificate does not chain to B's CA, and B keeps nothing.
    const onB = await whoami(b, pem);
    expect(onB.statusCode).toBe(401);
    expect(onB.json<{ detail: string }>().detail).toMatch(/does not chain to the device CA/);
    expect(b.ctx.caches.devices.verifiedChains.has(digest)).toBe(false);
    expect(b.ctx.caches.devices.serials.has(digest)).toBe(false);
    // Asked again, A answers from what it remembered, B still refuses.
    expect((await whoami(a, pem)).json<{ detail: string }>().detail).toMatch(/was not issued to any device/);
    expect((await whoami(b, pem)).json<{ detail: string }>().detail).toMatch(
      /does not chain to the device CA/,
    );
  });

  test('close() leaves nothing behind', async () => {
    const p = await start(path.join(tmp, 'closing'));
    await whoami(p, await certificateOf(p));
    await loadAuthority(p.ctx);
    expect(p.ctx.caches.devices.empty).toBe(false);
    expect(p.ctx.caches.devices.verifiedChains.size).toBe(1);
    expect(p.ctx.caches.authority.empty).toBe(false);
    await ensureRecordPartition(p.ctx.db, '2026-11-20', p.ctx.caches.pop.partitions);
    expect(p.ctx.caches.pop.partitions.size).toBe(1);
    await p.close();
    expect(p.ctx.caches.pop.partitions.size).toBe(0);
    expect(p.ctx.caches.devices.empty).toBe(true);
    expect(p.ctx.caches.authority.empty).toBe(true);
  });

  test('a platform started again in the same process on the same folder reads the CA and authority there now', async () => {
    const dataDir = path.join(tmp, 'again');
    const first = await start(dataDir);
    const firstCa = (await first.ctx.caches.devices.ca()).rootPem;
    const firstAuthority = (await loadAuthority(first.ctx)).rootPem;
    await first.close();
    // Both replaced while it was down (a manual rotation): the next start makes new ones and uses them, where a
    // process-wide cache keyed by the folder kept handing out the first platform's authority.
    await rm(path.join(dataDir, 'device-ca'), { recursive: true });
    await rm(path.join(dataDir, 'authority'), { recursive: true });
    const second = await start(dataDir);
    expect((await second.ctx.caches.devices.ca()).rootPem).not.toBe(firstCa);
    expect((await loadAuthority(second.ctx)).rootPem).not.toBe(firstAuthority);
    const served = await second.servers.verify.inject({ method: 'GET', url: '/v1/authority-root.pem' });
    expect(served.body).toBe((await loadAuthority(second.ctx)).rootPem);
  });
});

const SRC = path.join(import.meta.dirname, '..', '..', 'src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** A declaration at the top of a module of a Map or WeakMap, with the type of its keys when written. */
const MODULE_MAP =
  /^(?:export\s+)?(?:const|let|var)\s+(\w+)\s*(?::\s*(?:Weak)?Map\s*<\s*([^,=]+?)\s*,[^=]*)?=\s*new\s+(?:Weak)?Map\s*(?:<\s*([^,>]+?)\s*,)?/gm;
/** What belongs to one platform: its context, its database pool or client, its configuration. */
const PLATFORM_KEY = /\b(?:PlatformContext|Db|DbClient|PlatformConfig)\b/;

/** The module-level maps of `text` keyed by something of one platform, as `name <key>`. */
function platformKeyedMaps(text: string): string[] {
  return [...text.matchAll(MODULE_MAP)]
    .map((m) => ({ name: m[1]!, key: m[2] ?? m[3] ?? '' }))
    .filter(({ key }) => PLATFORM_KEY.test(key))
    .map(({ name, key }) => `${name} <${key}>`);
}

describe('the platform source', () => {
  test('the check finds the maps it should', () => {
    // The maps this issue moved onto the context, as they were written.
    const before = [
      'const caByContext = new WeakMap<PlatformContext, Promise<DeviceCa>>();',
      'const verifiedChains = new WeakMap<PlatformContext, Map<string, VerifiedChain>>();',
      'const committers = new WeakMap<Db, GroupCommitter>();',
      'export const byConfig: WeakMap<PlatformConfig, string> = new WeakMap();',
      // Inside a function or a class, or keyed by anything else, a map is not the platform's.
      '  const codes = new WeakMap<FastifyRequest, string>();',
      'const ROUTE_LIST = new WeakMap<object, RegisteredRoute[]>();',
      'const dayByHour = new Map<number, string>();',
    ].join('\n');
    expect(platformKeyedMaps(before)).toEqual([
      'caByContext <PlatformContext>',
      'verifiedChains <PlatformContext>',
      'committers <Db>',
      'byConfig <PlatformConfig>',
    ]);
  });

  test('has no module-level map keyed by a platform: each platform keeps its own on ctx.caches', () => {
    const found = sources(SRC).flatMap((file) =>
      platformKeyedMaps(readFileSync(file, 'utf8')).map((m) => `${path.relative(SRC, file)}: ${m}`),
    );
    expect(found).toEqual([]);
  });
});
