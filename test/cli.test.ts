import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { createTestDatabase } from '../apps/platform/test/support/database.js';
import { type CliIo, main } from '../hardware-sim/src/cli/main.js';
import { ConsoleClient } from '../hardware-sim/src/index.js';
import { startE2ePlatform, testDir } from './support/e2e-platform.js';
import { REPO_ROOT } from './support/tools.js';

function captureIo(): CliIo & { text: () => string } {
  let text = '';
  return {
    out: (chunk) => {
      text += chunk;
    },
    err: (chunk) => {
      text += chunk;
    },
    isTty: false,
    text: () => text,
  };
}

/** stderr a terminal (outside CI, no colour): the progress line is drawn there; stdout kept apart. */
function terminalIo(): CliIo & { stdout: () => string; stderr: () => string } {
  let stdout = '';
  let stderr = '';
  return {
    out: (chunk) => {
      stdout += chunk;
    },
    err: (chunk) => {
      stderr += chunk;
    },
    isTty: true,
    columns: 120,
    env: { NO_COLOR: '1' },
    stdout: () => stdout,
    stderr: () => stderr,
  };
}

test(
  'hardware-sim run <scenario>: starts its own platform, runs the fleet, prints the reconciliation; check reads a player',
  { timeout: 240_000 },
  async () => {
    const dir = testDir('cli-run');
    const database = await createTestDatabase({ migrate: false });
    const previous = process.env['DATABASE_URL'];
    process.env['DATABASE_URL'] = database.url;
    try {
      const io = terminalIo();
      const code = await main(
        ['run', path.join(REPO_ROOT, 'hardware-sim/scenarios/smoke.json'), '--dir', dir],
        io,
      );
      console.log(io.stdout());
      expect(code).toBe(0);
      expect(io.stdout()).toContain('RECONCILED: no play lost, none counted twice');
      expect(io.stdout()).toMatch(/plays counted\s+\d+/);
      // Progress on stderr only, each line drawn as "\r<line>\x1b[K" and taken off (last) as "\r\x1b[K".
      expect(io.stdout()).not.toMatch(/[\r\x1b]/);
      const frames = io.stderr().match(/\r[^\r\n]*?\x1b\[K/g) ?? [];
      expect(frames.join('')).toBe(io.stderr());
      expect(frames.at(-1)).toBe('\r\x1b[K');
      expect(frames.some((f) => f.startsWith('\r- starting a platform'))).toBe(true);
      expect(frames.some((f) => /^\rrunning smoke [#-]{20} {2}\d+% {2}\d+:\d\d .*shown/.test(f))).toBe(true);
      for (const frame of frames) expect(frame.length - 4).toBeLessThanOrEqual(119);

      const players = path.join(dir, 'fleet', 'players');
      const { readdirSync } = await import('node:fs');
      const first = readdirSync(players)[0]!;
      const check = captureIo();
      expect(await main(['check', path.join(players, first)], check)).toBe(0);
      expect(check.text()).toMatch(/queue\s+0 record\(s\) not acknowledged/);
      expect(check.text()).toMatch(/certificate\s+valid until/);
    } finally {
      if (previous === undefined) delete process.env['DATABASE_URL'];
      else process.env['DATABASE_URL'] = previous;
      await database.drop();
    }
  },
);

test(
  'hardware-sim player: commissioning one player at a real site against a platform in real time',
  { timeout: 180_000 },
  async () => {
    const dir = testDir('cli-player');
    const platform = await startE2ePlatform({ dir, now: new Date(), running: true });
    try {
      const admin = new ConsoleClient(platform.urls.api, platform.adminKey);
      const operator = await admin.createOrganisation('Site operator', 'operator');
      await admin.createStructure({
        organisation_id: operator.id,
        code: 'ALM-SITE-1',
        district: 'almaly',
        format: 'billboard',
      });
      const io = captureIo();
      const urls = Object.entries(platform.urls)
        .map(([name, url]) => `${name}=${url}`)
        .join(',');
      const playerDir = path.join(dir, 'site');
      mkdirSync(playerDir, { recursive: true });
      const code = await main(
        [
          'player',
          '--platform',
          urls,
          '--admin-key',
          platform.adminKey,
          '--structure',
          'ALM-SITE-1',
          '--dir',
          playerDir,
        ],
        io,
      );
      console.log(io.text());
      expect(io.text()).toContain('COMMISSIONED');
      expect(code).toBe(0);
      expect(io.text()).toMatch(/the platform counts [1-9]\d* play/);
    } finally {
      await platform.close();
    }
  },
);
