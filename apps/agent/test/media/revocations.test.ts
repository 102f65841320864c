import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { memoryLogger } from '../../src/logger.js';
import { RevocationStore, type RevocationStoreOptions } from '../../src/media/revocations.js';
import { createHttpClient, type HttpClient } from '../../src/net/http-client.js';
import { signedRevocations } from '../helpers/media.js';
import { type AgentTestPlatform, startAgentTestPlatform } from '../helpers/platform.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import { tempDir } from '../helpers/temp.js';

describe('revocation list', () => {
  let pki: TestPki;
  let otherPki: TestPki;
  let platform: AgentTestPlatform;
  let dir: ReturnType<typeof tempDir>;
  let http: HttpClient;

  beforeAll(async () => {
    pki = await createTestPki();
    otherPki = await createTestPki();
    platform = await startAgentTestPlatform();
  });
  afterAll(async () => platform.close());
  beforeEach(() => {
    dir = tempDir();
    http = createHttpClient();
  });
  afterEach(async () => {
    await http.close();
    dir.cleanup();
  });

  /** A store on the platform's verify host; `options` for another logger, clock or address. */
  function store(options: Partial<RevocationStoreOptions> = {}) {
    return new RevocationStore({
      cachePath: join(dir.path, 'revocations.json'),
      trustedRootsPem: [pki.authorityRootPem],
      clock: systemClock,
      logger: memoryLogger(),
      http,
      verifyUrl: platform.verifyUrl,
      ...options,
    });
  }

  it('fetches, verifies, caches on disk and answers isRevoked for every approval the list names', async () => {
    await platform.serveRevocationList(
      await signedRevocations(pki, 3, [{ approval_number: 'APP-1', revoked_at: '2026-11-20T10:00:00Z' }]),
    );
    const revocations = store();
    let changes = 0;
    revocations.onChange(() => changes++);
    expect(await revocations.refresh()).toBe('updated');
    expect(revocations.version).toBe(3);
    expect(changes).toBe(1);
    // Named on the list: revoked, whatever the player's clock says against revoked_at (DESIGN.md §9).
    expect(revocations.isRevoked('APP-1')).toBe(true);
    expect(revocations.isRevoked('APP-2')).toBe(false);
    expect(await revocations.refresh()).toBe('unchanged');
    expect(existsSync(join(dir.path, 'revocations.json'))).toBe(true);

    // A new process starts from the cache, verified again, with the network down.
    const offline = new RevocationStore({
      cachePath: join(dir.path, 'revocations.json'),
      trustedRootsPem: [pki.authorityRootPem],
      clock: systemClock,
      logger: memoryLogger(),
    });
    expect(await offline.loadCache()).toBe(true);
    expect(offline.version).toBe(3);
    expect(await offline.refresh()).toBe('unreachable');
  });

  it('refuses an older version, a list signed by another root and an altered list', async () => {
    const logger = memoryLogger();
    const revocations = store({ logger });
    await platform.serveRevocationList(await signedRevocations(pki, 5, []));
    expect(await revocations.refresh()).toBe('updated');
    await platform.serveRevocationList(
      await signedRevocations(pki, 4, [{ approval_number: 'X', revoked_at: '2026-01-01T00:00:00Z' }]),
    );
    expect(await revocations.refresh()).toBe('older_refused');
    await platform.serveRevocationList(await signedRevocations(otherPki, 9, []));
    expect(await revocations.refresh()).toBe('invalid');
    const genuine = await signedRevocations(pki, 6, []);
    await platform.serveRevocationList({ ...genuine, body: { ...(genuine.body as object), version: 60 } });
    expect(await revocations.refresh()).toBe('invalid');
    expect(revocations.version).toBe(5);
    // Refused as the list; what it names stays revoked all the same (a revocation is never undone).
    expect(revocations.isRevoked('X')).toBe(true);
    expect(logger.lines.filter((line) => line.level === 'warn').map((line) => line.fields)).toEqual([
      { offered: 4, held: 5, kept_revoked: ['X'] },
      { code: 'chain_no_issuer' },
      { code: 'document_content_differs' },
    ]);
  });

  it('refuses a list whose signing chain has expired at the clock now, and logs the code of @ooh/verify', async () => {
    await platform.serveRevocationList(await signedRevocations(pki, 7, []));
    const logger = memoryLogger();
    // The test PKI is valid for 20 years from today.
    const revocations = store({ logger, clock: { now: () => new Date(Date.now() + 25 * 365 * 86_400_000) } });
    expect(await revocations.refresh()).toBe('invalid');
    expect(revocations.version).toBeNull();
    expect(logger.lines).toEqual([
      {
        level: 'warn',
        message: 'revocation list refused: signature or shape invalid',
        fields: { code: 'chain_expired' },
      },
    ]);
    expect(existsSync(join(dir.path, 'revocations.json'))).toBe(false);
  });

  it('takes a 404 (a fresh platform: nothing revoked yet) as no list, said once at info, never a warning', async () => {
    await platform.serveRevocationList(null);
    const logger = memoryLogger();
    const revocations = store({ logger });
    for (let i = 0; i < 3; i++) expect(await revocations.refresh()).toBe('none_published');
    expect(logger.lines.map((line) => `${line.level} ${line.message}`)).toEqual([
      'info no revocation list published yet (nothing revoked); looking again every refresh',
    ]);
    expect(revocations.version).toBeNull();
  });

  it('reports an unreachable list as a warning without throwing', async () => {
    const logger = memoryLogger();
    const offline = store({ logger, verifyUrl: 'http://127.0.0.1:9' });
    expect(await offline.refresh()).toBe('unreachable');
    expect(logger.lines.map((line) => line.level)).toEqual(['warn']);
  });
});
