import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { canonicalize } from '@ooh/crypto';
import { addDays, almatyDate, almatyDayStart } from '@ooh/protocol';
import { expect, test } from 'vitest';
import { Fleet, formatReconciliation } from '../hardware-sim/src/index.js';
import { startE2ePlatform, testDir } from './support/e2e-platform.js';
import { opensslCmsVerify, verifierCli } from './support/tools.js';

const HOUR = 3_600_000;
const PLAYERS = 50;

interface StatsSeal {
  day: string;
  signed_at: string;
  body: { v: number; env: string; day: string; batch_count: number; record_count: number; root: string };
  ledger: unknown;
}

test(
  `(1) a day of normal play for ${PLAYERS} players, sealed, the seal verified by the CLI and openssl`,
  { timeout: 360_000 },
  async () => {
    const dir = testDir('normal-day');
    // A past day: openssl checks certificates against the machine's clock, so virtual time stays behind it.
    const day = almatyDate(new Date(Date.now() - 4 * 24 * HOUR));
    const start = almatyDayStart(day).getTime();
    const platform = await startE2ePlatform({ dir, now: new Date(start) });
    const fleet = await Fleet.create({
      dir,
      platform: { urls: platform.urls, adminKey: platform.adminKey },
      time: { startMs: start, platformClock: platform.platformClock, minStepMs: 60_000 },
      placement: { mode: 'children', count: 2 },
      settings: {
        image_duration_ms: 5 * 60_000,
        media_recheck_ms: 12 * HOUR,
        shipping: { idle_interval_ms: 15 * 60_000 },
      },
    });
    const phase = timer();
    try {
      await fleet.provision({
        players: PLAYERS,
        creatives: [{ name: 'steppe-motors' }, { name: 'alatau-dairy' }, { name: 'city-bank' }],
        validFrom: addDays(day, -1),
        validUntil: addDays(day, 7),
      });
      phase('provisioned');
      await fleet.startAll();
      phase('started');
      const begun = performance.now();
      await fleet.runUntil(almatyDayStart(addDays(day, 1)).getTime());
      const dayMs = performance.now() - begun;
      expect(await fleet.drain()).toBe(true);
      phase('day played and drained');

      // Zero loss, zero double count.
      const result = await fleet.reconcile();
      console.log(
        `${PLAYERS} players, one virtual day in ${(dayMs / 1000).toFixed(1)} s real, ${fleet.driver!.stats.steps} steps`,
      );
      console.log(formatReconciliation(result));
      expect(result.problems).toEqual([]);
      expect(result.totals.missing).toBe(0);
      expect(result.totals.double).toBe(0);
      // Every player showed (nearly) a play every five minutes all day, and every one of them counts.
      expect(result.totals.played).toBeGreaterThanOrEqual(PLAYERS * 285);
      expect(result.totals.counted).toBe(result.totals.played);

      // The day is sealed once it is over; one more day gets the seal's ledger block digested.
      await fleet.advance(24 * HOUR + 10 * 60_000);
      phase('one more day');
      const admin = fleet.admin;
      const seal = (await admin.seal(day)) as unknown as StatsSeal;
      expect(seal.body).toMatchObject({ v: 1, env: 'test', day });
      expect(seal.body.batch_count).toBeGreaterThan(PLAYERS);
      expect(seal.body.record_count).toBeGreaterThan(PLAYERS * 250);
      // The seal's ledger leaf belongs to the day it was signed (the scheduler may sign it on a later virtual day
      // than the day after the sealed one); that day's block is digested once it is over: run time past it.
      const signedDay = seal.signed_at.slice(0, 10);
      await fleet.runUntil(Math.max(fleet.now(), almatyDayStart(addDays(signedDay, 1)).getTime() + 60_000));
      await waitFor(async () => {
        const response = await fetch(`${platform.urls.verify}/v1/ledger/head`);
        return response.ok && ((await response.json()) as { day: string }).day >= signedDay;
      });

      phase('sealed and digested');
      // The verifier CLI, from public data and the exported batches, with the pinned root.
      const rootFile = path.join(dir, 'authority-root.pem');
      writeFileSync(rootFile, await (await fetch(`${platform.urls.verify}/v1/authority-root.pem`)).text());
      const batchesFile = path.join(dir, `batches-${day}.ndjson`);
      writeFileSync(batchesFile, await admin.sealBatches(day));
      const verified = await verifierCli([
        'seal',
        day,
        '--from',
        platform.urls.verify,
        '--root',
        rootFile,
        '--batches',
        batchesFile,
        '--require-ledger',
      ]);
      expect(verified.stdout + verified.stderr).toContain(`seal ${day}: every check passed`);
      expect(verified.code).toBe(0);

      // openssl: the PKCS#7 seal verifies against the authority root; its content is the canonical body.
      const p7sFile = path.join(dir, `seal-${day}.p7s`);
      const p7s = await fetch(`${platform.urls.verify}/v1/stats-seals/${day}?format=p7s`);
      expect(p7s.headers.get('content-type')).toContain('application/pkcs7-signature');
      writeFileSync(p7sFile, Buffer.from(await p7s.arrayBuffer()));
      const contentFile = path.join(dir, `seal-${day}.json`);
      const openssl = await opensslCmsVerify(p7sFile, rootFile, contentFile);
      expect(openssl.stderr).toContain('Verification successful');
      expect(openssl.code).toBe(0);
      expect(readFileSync(contentFile, 'utf8')).toBe(canonicalize(seal.body));
      phase('verified');
    } finally {
      await fleet.close();
      await platform.close();
    }
  },
);

function timer(): (label: string) => void {
  let last = performance.now();
  return (label) => {
    const now = performance.now();
    console.log(`${label}: ${((now - last) / 1000).toFixed(1)} s`);
    last = now;
  };
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
