import { almatyDate } from '@ooh/protocol';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { parseScenario, ScenarioError } from '../../../../hardware-sim/src/scenario/load.js';
import { scenarioStartMs } from '../../../../hardware-sim/src/scenario/run.js';
import { verifyEnvelope } from '../../src/media/envelope.js';
import { manifestFor, sha256Of } from '../helpers/media.js';
import { createTestPki, signEnvelope, type TestPki } from '../helpers/pki.js';

/*
 * DESIGN.md section 8 on the player and in the simulator: an approval's dates are Almaty days (section 4), whatever
 * zone the player's or the simulator's machine is set to, across the change of 2024-03-01 and at Almaty midnight
 * (19:00:00.000Z since then). Node applies a TZ set at run time to Date and Intl at once, so each zone is tried in
 * this process and the zone it ran in is put back after each test.
 */

const ZONES = ['America/New_York', 'UTC', 'Asia/Almaty', 'Pacific/Kiritimati', 'Etc/GMT+12'];
const savedTz = process.env['TZ'];
afterEach(() => {
  if (savedTz === undefined) delete process.env['TZ'];
  else process.env['TZ'] = savedTz;
});

describe("the agent judges an approval's dates in Almaty days, whatever the machine's zone", () => {
  let pki: TestPki;
  const media = 'media bytes';
  const sha = sha256Of(media);

  beforeAll(async () => {
    pki = await createTestPki(new Date('2024-01-01T00:00:00Z'));
  });

  async function statusAt(now: string, dates: { valid_from?: string; valid_until?: string }) {
    const envelope = await signEnvelope(pki, manifestFor(sha, dates), new Date('2024-02-01T00:00:00Z'));
    return verifyEnvelope({
      envelopeText: JSON.stringify(envelope),
      mediaSha256: sha,
      trustedRootsPem: [pki.authorityRootPem],
      now: new Date(now),
      structure: 'ALM-0001',
      revocations: { isRevoked: () => false },
    });
  }

  test.each(ZONES)('TZ=%s', async (zone) => {
    process.env['TZ'] = zone;
    const lastDay = { valid_from: '2024-02-01', valid_until: '2024-02-29' };
    const firstDay = { valid_from: '2024-03-01', valid_until: '2024-03-31' };
    // 23:59:59.999 of 29 February at +06, then at +05 (23:00-24:00 came twice), then midnight of 1 March.
    for (const now of ['2024-02-29T17:59:59.999Z', '2024-02-29T18:59:59.999Z']) {
      expect(await statusAt(now, lastDay), now).toMatchObject({ status: 'playable' });
      expect(await statusAt(now, firstDay), now).toMatchObject({ status: 'not_yet_valid' });
    }
    expect(await statusAt('2024-02-29T19:00:00.000Z', lastDay)).toMatchObject({
      status: 'refused',
      code: 'EXPIRED_APPROVAL',
      reason: 'valid_until_passed',
    });
    expect(await statusAt('2024-02-29T19:00:00.000Z', firstDay)).toMatchObject({ status: 'playable' });
    // Since the change, every Almaty day ends at 19:00:00.000Z.
    const november = { valid_from: '2026-11-01', valid_until: '2026-11-20' };
    expect(await statusAt('2026-11-20T18:59:59.999Z', november)).toMatchObject({ status: 'playable' });
    expect(await statusAt('2026-11-20T19:00:00.000Z', november)).toMatchObject({ code: 'EXPIRED_APPROVAL' });
  });
});

describe("the simulator's scenario start is an instant, never a wall time of the machine's zone", () => {
  const scenario = (start: string) => ({
    name: 'x',
    time: { duration: '2h', start },
    fleet: { players: 1 },
    creatives: [{ name: 'a' }],
  });

  test('a start without an offset is refused by the loader; "now" and RFC 3339 with Z or an offset are taken', () => {
    for (const start of ['2024-02-29T23:30:00', '2024-02-29 23:30:00', '2024-02-29', 'Feb 29 2024 23:30']) {
      expect(() => parseScenario(scenario(start)), start).toThrow(ScenarioError);
      expect(() => parseScenario(scenario(start)), start).toThrow(/\/time\/start/);
    }
    for (const start of ['now', '2024-02-29T23:30:00+05:00', '2024-02-29T18:30:00Z']) {
      expect(parseScenario(scenario(start)).time.start, start).toBe(start);
    }
  });

  test.each(ZONES)('TZ=%s: the same first instant and the same Almaty first day', (zone) => {
    process.env['TZ'] = zone;
    const start = scenarioStartMs('2024-02-29T23:59:59.999+05:00', 0);
    expect(start).toBe(Date.parse('2024-02-29T18:59:59.999Z'));
    // The runner provisions the approvals from the Almaty day of the start.
    expect(almatyDate(new Date(start))).toBe('2024-02-29');
    expect(almatyDate(new Date(scenarioStartMs('2024-03-01T00:00:00+05:00', 0)))).toBe('2024-03-01');
    // "now" (the default) is the current minute.
    expect(scenarioStartMs('now', Date.parse('2024-02-29T19:00:59.999Z'))).toBe(
      Date.parse('2024-02-29T19:00:00Z'),
    );
    expect(scenarioStartMs(undefined, Date.parse('2024-02-29T19:00:59.999Z'))).toBe(
      Date.parse('2024-02-29T19:00:00Z'),
    );
    // A wall time would have been read in this zone (19:00Z in one machine, 00:00Z or 07:00Z in another).
    expect(() => scenarioStartMs('2024-03-01T00:00:00', 0)).toThrow(/time\.start/);
  });
});
