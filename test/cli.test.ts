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

test(
  'hardware-sim run <scenario>: starts its own platform, runs the fleet, prints the reconciliation; check reads a player',
  { timeout: 240_000 },
  async () => {
    const dir = testDir('cli-run');
    const database = await createTestDatabase({ migrate: false });
    const previous = process.env['DATABASE_URL'];
    process.env['DATABASE_URL'] = database.url;
    try {
      const io = captureIo();
      const code = await main(
        ['run', path.join(REPO_ROOT, 'hardware-sim/scenarios/smoke.json'), '--dir', dir],
        io,
      );
      console.log(io.text());
      expect(code).toBe(0);
      expect(io.text()).toContain('RECONCILED: no play lost, none counted twice');
      expect(io.text()).toMatch(/plays counted\s+\d+/);

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
