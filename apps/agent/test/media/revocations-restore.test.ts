import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAgent } from '../../src/agent.js';
import { main } from '../../src/cli/main.js';
import { systemClock } from '../../src/clock.js';
import { openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import { memoryLogger } from '../../src/logger.js';
import { RevocationStore } from '../../src/media/revocations.js';
import { createHttpClient, type HttpClient } from '../../src/net/http-client.js';
import { setUpAgent } from '../helpers/agent-setup.js';
import { ManualHardware } from '../helpers/hardware.js';
import { signedRevocations } from '../helpers/media.js';
import { createTestPki, type TestPki } from '../helpers/pki.js';
import { type AgentTestPlatform, startAgentTestPlatform } from '../helpers/platform.js';
import { tempDir } from '../helpers/temp.js';

/*
 * Audit I, finding 3: a platform restored from a backup published a list with a version players already held, with
 * other contents, and a player answered "unchanged" and never learnt the new revocation; a later, higher version
 * could also lack a revocation the lost interval had made. A revocation is never undone (nothing in the spec lifts
 * one), so the player keeps every approval any list it verified names. Real lists signed by a test authority,
 * served by the real platform's verify host, a real agent on its real SQLite play log, `agent status` as a technician
 * runs it.
 */

const entry = (approval_number: string) => ({ approval_number, revoked_at: '2026-11-20T10:00:00Z' });
const A1 = 'APR-2026-000001';
const A2 = 'APR-2026-000002';
const A3 = 'APR-2026-000003';

async function status(configPath: string, json = false) {
  let output = '';
  const code = await main(
    ['status', ...(json ? ['--json'] : []), '--config', configPath],
    (text) => {
      output += text;
    },
    () => {},
  );
  return { code, output };
}

describe('revocations the platform forgot (restored from a backup)', () => {
  let pki: TestPki;
  let platform: AgentTestPlatform;
  let dir: ReturnType<typeof tempDir>;
  let http: HttpClient;

  beforeAll(async () => {
    pki = await createTestPki();
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

  const store = (logger = memoryLogger()) =>
    new RevocationStore({
      cachePath: join(dir.path, 'revocations.json'),
      trustedRootsPem: [pki.authorityRootPem],
      clock: systemClock,
      logger,
      http,
      verifyUrl: platform.verifyUrl,
    });

  it('a newer list that lacks an approval an earlier list revoked does not un-revoke it, after a restart too', async () => {
    const logger = memoryLogger();
    const revocations = store(logger);
    await platform.serveRevocationList(await signedRevocations(pki, 2, [entry(A1), entry(A2)]));
    expect(await revocations.refresh()).toBe('updated');
    // The restored platform's next list: a higher version, without A2.
    await platform.serveRevocationList(await signedRevocations(pki, 3, [entry(A1), entry(A3)]));
    expect(await revocations.refresh()).toBe('updated');
    expect(revocations.version).toBe(3);
    expect([A1, A2, A3].map((n) => revocations.isRevoked(n))).toEqual([true, true, true]);
    expect(revocations.conflict).toBeNull();
    expect(logger.lines.filter((line) => line.level === 'warn')).toEqual([
      {
        level: 'warn',
        message:
          'newer revocation list lacks approvals an earlier list revoked (a platform restored from a backup?); they stay revoked',
        fields: { version: 3, held: 2, kept_revoked: [A2] },
      },
    ]);
    expect(await revocations.refresh()).toBe('unchanged');

    // A new process, from the disk only (each list verified again), the network down.
    const offline = new RevocationStore({
      cachePath: join(dir.path, 'revocations.json'),
      trustedRootsPem: [pki.authorityRootPem],
      clock: systemClock,
      logger: memoryLogger(),
    });
    expect(await offline.loadCache()).toBe(true);
    expect(offline.version).toBe(3);
    expect([A1, A2, A3].map((n) => offline.isRevoked(n))).toEqual([true, true, true]);

    // Once a list names A2 again (the operator re-did its revocation), the older list is no longer needed.
    await platform.serveRevocationList(await signedRevocations(pki, 2001, [entry(A1), entry(A2), entry(A3)]));
    expect(await revocations.refresh()).toBe('updated');
    const kept = new RevocationStore({
      cachePath: join(dir.path, 'revocations.json'),
      trustedRootsPem: [pki.authorityRootPem],
      clock: systemClock,
      logger: memoryLogger(),
    });
    expect(await kept.loadCache()).toBe(true);
    expect([A1, A2, A3].map((n) => kept.isRevoked(n))).toEqual([true, true, true]);
  });

  it('an older list naming an approval the held one does not is refused as the list, but that approval is revoked', async () => {
    const logger = memoryLogger();
    const revocations = store(logger);
    await platform.serveRevocationList(await signedRevocations(pki, 5, [entry(A1)]));
    expect(await revocations.refresh()).toBe('updated');
    await platform.serveRevocationList(await signedRevocations(pki, 4, [entry(A2)]));
    expect(await revocations.refresh()).toBe('older_refused');
    expect(revocations.version).toBe(5);
    expect(revocations.isRevoked(A2)).toBe(true);
    expect(logger.lines.at(-1)).toEqual({
      level: 'warn',
      message: 'older revocation list refused',
      fields: { offered: 4, held: 5, kept_revoked: [A2] },
    });
  });

  it('a list of the version held with other contents is an error in the log and in agent status (exit 1); both lists revoke, until a newer version', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    // The player has played: its real play log is there.
    const db = openAgentDatabase(join(setup.config.dataDir, 'agent.sqlite'));
    new PlayLog(db).appendStatus({ kind: 'tamper', at: new Date() });
    db.close();
    const logger = memoryLogger();
    const agent = await createAgent({
      config: setup.config,
      hardware: new ManualHardware({ now: () => new Date() }),
      logger,
    });
    const heldV2 = await signedRevocations(pki, 2, [entry(A1), entry(A2)]);
    const otherV2 = await signedRevocations(pki, 2, [entry(A1), entry(A3)]);
    try {
      await platform.serveRevocationList(heldV2);
      expect(await agent.revocations.refresh()).toBe('updated');
      expect((await status(setup.configPath)).code).toBe(0);

      await platform.serveRevocationList(otherV2);
      // Before: 'unchanged', and A3 was never revoked on this player.
      expect(await agent.revocations.refresh()).toBe('conflict');
      expect([A1, A2, A3].map((n) => agent.revocations.isRevoked(n))).toEqual([true, true, true]);
      expect(agent.revocations.version).toBe(2);
      const conflict = {
        level: 'error',
        message:
          'two different revocation lists are signed with the version held: every approval either names stays revoked',
        fields: { version: 2, differing: [A2, A3] },
      };
      expect(logger.lines.filter((line) => line.level === 'error')).toEqual([conflict]);
      // Seen again at the next refresh: still a conflict, not logged twice.
      expect(await agent.revocations.refresh()).toBe('conflict');
      expect(logger.lines.filter((line) => line.level === 'error')).toHaveLength(1);

      const shown = await status(setup.configPath);
      expect(shown.code).toBe(1);
      expect(shown.output).toContain('revocations:     version 2\n');
      expect(shown.output).toContain(
        `REVOCATION LIST CONFLICT: two different lists signed as version 2 (differing: ${A2}, ${A3}); every approval either names stays revoked.`,
      );
      expect(JSON.parse((await status(setup.configPath, true)).output).revocation_conflict).toEqual({
        version: 2,
        differing: [A2, A3],
      });
    } finally {
      await agent.close();
    }
    expect(existsSync(join(setup.config.dataDir, 'revocations.kept.json'))).toBe(true);

    // Started again: the conflict is read back from the disk, logged, and both lists still revoke.
    const restartLogger = memoryLogger();
    const restarted = await createAgent({
      config: setup.config,
      hardware: new ManualHardware({ now: () => new Date() }),
      logger: restartLogger,
    });
    try {
      await restarted.revocations.loadCache();
      expect([A1, A2, A3].map((n) => restarted.revocations.isRevoked(n))).toEqual([true, true, true]);
      expect(restartLogger.lines.filter((line) => line.level === 'error').map((line) => line.fields)).toEqual(
        [{ version: 2, differing: [A2, A3] }],
      );
      // A newer version ends the conflict; what either v2 revoked stays revoked.
      await platform.serveRevocationList(await signedRevocations(pki, 2001, [entry(A1)]));
      expect(await restarted.revocations.refresh()).toBe('updated');
      expect(restarted.revocations.conflict).toBeNull();
      expect([A1, A2, A3].map((n) => restarted.revocations.isRevoked(n))).toEqual([true, true, true]);
    } finally {
      await restarted.close();
    }
    const after = await status(setup.configPath);
    expect(after.code).toBe(0);
    expect(after.output).toContain('revocations:     version 2001\n');
    expect(after.output).not.toContain('CONFLICT');
  });
});
