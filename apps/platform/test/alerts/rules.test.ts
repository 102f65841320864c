import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { evaluateAlerts } from '../../src/alerts/evaluate.js';
import { operatingWindowAt } from '../../src/alerts/operating-hours.js';
import { alertSettings, DEFAULT_ALERT_SETTINGS, parseOperatingHours } from '../../src/alerts/settings.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { checkFeatureSettings } from '../../src/settings-check.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';
import { type Device, enrol, MINUTE, modeChange, play, sendBatch } from './helpers.js';

/*
 * The rules behind each alert: operating hours in Almaty time through the tz database, thresholds from the
 * configuration (checked at start), and silence and lag counted only while the platform was watching.
 */

const hours = (text: string) => {
  const parsed = parseOperatingHours(text);
  if (!parsed) throw new Error(`bad hours ${text}`);
  return parsed;
};

describe('settings', () => {
  test('defaults: silent after 30 minutes, a queue lag over an hour, screens 07:00-23:00, evaluated every 30 s', () => {
    expect(alertSettings({})).toEqual(DEFAULT_ALERT_SETTINGS);
    expect(DEFAULT_ALERT_SETTINGS).toMatchObject({
      silentAfterMs: 30 * MINUTE,
      queueLagMs: 60 * MINUTE,
      cmsQuietMs: 60 * MINUTE,
      intervalMs: 30_000,
      operatingHours: { text: '07:00-23:00', opensMinute: 420, closesMinute: 1380, always: false },
    });
    expect(
      alertSettings({
        ALERT_DEVICE_SILENT_MINUTES: '5',
        ALERT_QUEUE_LAG_MINUTES: ' 90 ',
        ALERT_CMS_PLAYER_QUIET_MINUTES: '15',
        ALERT_SCREEN_OPERATING_HOURS: '00:00-24:00',
        ALERT_INTERVAL_SECONDS: '10',
      }),
    ).toMatchObject({
      silentAfterMs: 5 * MINUTE,
      queueLagMs: 90 * MINUTE,
      cmsQuietMs: 15 * MINUTE,
      intervalMs: 10_000,
      operatingHours: { always: true },
    });
  });

  test('operating hours: HH:MM-HH:MM, possibly past midnight; no empty window', () => {
    expect(parseOperatingHours('18:00-02:30')).toEqual({
      text: '18:00-02:30',
      opensMinute: 1080,
      closesMinute: 150,
      always: false,
    });
    for (const bad of [
      '7:00-23:00',
      '07:00-25:00',
      '24:00-07:00',
      '07:00-07:00',
      '07:00',
      '07:60-23:00',
      'always',
    ]) {
      expect(parseOperatingHours(bad), bad).toBeNull();
    }
  });

  test('every bad value is named at start', () => {
    const config = loadConfig({
      env: {},
      overrides: {
        settings: {
          ALERT_DEVICE_SILENT_MINUTES: '0',
          ALERT_QUEUE_LAG_MINUTES: 'an hour',
          ALERT_SCREEN_OPERATING_HOURS: '7-23',
          ALERT_INTERVAL_SECONDS: '600',
        },
      },
    });
    let error: unknown = null;
    try {
      checkFeatureSettings(config);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'ALERT_SCREEN_OPERATING_HOURS: "7-23" is not HH:MM-HH:MM in Almaty time (for example 07:00-23:00, 18:00-02:00, or 00:00-24:00 for round the clock)',
      'ALERT_DEVICE_SILENT_MINUTES: "0" is not a whole number from 1 to 10080',
      'ALERT_QUEUE_LAG_MINUTES: "an hour" is not a whole number from 1 to 10080',
      'ALERT_INTERVAL_SECONDS: "600" is not a whole number from 1 to 300',
    ]);
    expect(() => alertSettings({ ALERT_CMS_PLAYER_QUIET_MINUTES: '1.5' })).toThrow(
      /ALERT_CMS_PLAYER_QUIET_MINUTES: "1.5" is not a whole number/,
    );
  });
});

describe('operating hours in Almaty time', () => {
  test('07:00-23:00: open from 07:00 to just before 23:00, local time', () => {
    const h = hours('07:00-23:00');
    expect(operatingWindowAt(new Date('2026-11-20T06:59:59+05:00'), h).open).toBe(false);
    expect(operatingWindowAt(new Date('2026-11-20T07:00:00+05:00'), h)).toEqual({
      open: true,
      opensAt: new Date('2026-11-20T07:00:00+05:00'),
      closesAt: new Date('2026-11-20T23:00:00+05:00'),
    });
    expect(operatingWindowAt(new Date('2026-11-20T22:59:59+05:00'), h).open).toBe(true);
    expect(operatingWindowAt(new Date('2026-11-20T23:00:00+05:00'), h).open).toBe(false);
  });

  test('a window past midnight belongs to the day it opened', () => {
    const h = hours('18:00-02:00');
    expect(operatingWindowAt(new Date('2026-11-21T01:30:00+05:00'), h)).toEqual({
      open: true,
      opensAt: new Date('2026-11-20T18:00:00+05:00'),
      closesAt: new Date('2026-11-21T02:00:00+05:00'),
    });
    expect(operatingWindowAt(new Date('2026-11-21T02:00:00+05:00'), h).open).toBe(false);
    expect(operatingWindowAt(new Date('2026-11-21T17:59:00+05:00'), h).open).toBe(false);
  });

  test('through the tz database: before 2024-03-01 Almaty was UTC+6', () => {
    const h = hours('07:00-23:00');
    expect(operatingWindowAt(new Date('2024-01-15T00:59:00Z'), h).open).toBe(false);
    expect(operatingWindowAt(new Date('2024-01-15T01:00:00Z'), h).opensAt).toEqual(
      new Date('2024-01-15T07:00:00+06:00'),
    );
  });

  test('round the clock never closes', () => {
    expect(operatingWindowAt(new Date('2026-11-20T03:00:00+05:00'), hours('00:00-24:00'))).toEqual({
      open: true,
      opensAt: null,
      closesAt: null,
    });
  });
});

describe('evaluation with configured thresholds', () => {
  // Friday 2026-11-20, 12:00 Almaty.
  const T0 = new Date('2026-11-20T07:00:00.000Z');
  let p: TestPlatform;
  let operator: { id: string; key: string };
  let n = 0;

  beforeAll(async () => {
    p = await startTestPlatform({
      now: T0,
      config: {
        settings: {
          ALERT_DEVICE_SILENT_MINUTES: '5',
          ALERT_QUEUE_LAG_MINUTES: '10',
          ALERT_SCREEN_OPERATING_HOURS: '18:00-02:00',
        },
      },
    });
    operator = await createOrganisation(p, 'operator', ['console:fleet', 'write:plays']);
  });
  afterAll(async () => {
    await p?.close();
  });

  const device = async (): Promise<Device> =>
    enrol(p, operator.key, await createStructure(p, operator.id, { code: `RUL-${++n}` }));
  const evaluateAt = async (instant: Date) => {
    p.clock.set(instant);
    const result = await evaluateAlerts(p.ctx);
    expect(result).not.toBeNull();
    return result!;
  };
  const openOf = async (d: Device, kind: string) => {
    const res = await apiCall(
      p.servers.api,
      operator.key,
      'GET',
      `/api/v1/console/alerts?device_id=${d.id}&kind=${kind}`,
    );
    return res.json<{ items: { since: string; opened_at: string }[] }>().items;
  };
  const minutes = (base: Date, m: number) => new Date(base.getTime() + m * MINUTE);

  test('silence is measured against the configured threshold, evaluated minute by minute', async () => {
    await evaluateAt(T0);
    const d = await device();
    await sendBatch(p, d, [play(d, minutes(T0, -1))]);
    for (let m = 1; m <= 4; m += 1) await evaluateAt(minutes(T0, m));
    expect(await openOf(d, 'device_silent')).toEqual([]);
    await evaluateAt(minutes(T0, 5));
    expect(await openOf(d, 'device_silent')).toMatchObject([
      { since: T0.toISOString(), opened_at: minutes(T0, 5).toISOString() },
    ]);
  });

  test('after the platform was down, silence and lag count from its return, not from before', async () => {
    const t = minutes(T0, 10);
    await evaluateAt(t);
    const quiet = await device();
    const lagging = await device();
    p.clock.set(t);
    await sendBatch(p, quiet, [play(quiet, minutes(t, -1))]);
    await sendBatch(p, lagging, [play(lagging, minutes(t, -1))]);
    // Nobody evaluated for 30 minutes: the platform was down. Back up, the lagging device ships what it kept.
    const back = minutes(t, 30);
    p.clock.set(back);
    await sendBatch(p, lagging, [play(lagging, minutes(t, 2))]);
    const first = await evaluateAt(back);
    expect(first.watchingSince).toEqual(back);
    expect(first.opened.filter((a) => a.device_id === quiet.id || a.device_id === lagging.id)).toEqual([]);
    // Five minutes of watching later, the quiet device is silent; its silence began with its last batch.
    await evaluateAt(minutes(back, 4));
    expect(await openOf(quiet, 'device_silent')).toEqual([]);
    await evaluateAt(minutes(back, 5));
    expect(await openOf(quiet, 'device_silent')).toMatchObject([{ since: t.toISOString() }]);
    // A lag of the platform's own watch opens: records of after its return, 12 minutes behind.
    p.clock.set(minutes(back, 14));
    await sendBatch(p, lagging, [play(lagging, minutes(back, 2))]);
    await evaluateAt(minutes(back, 14));
    expect(await openOf(lagging, 'queue_lag')).toMatchObject([
      { opened_at: minutes(back, 14).toISOString() },
    ]);
  });

  test('a screen off outside its operating hours waits for them, and resolves when they end', async () => {
    const d = await device();
    // 13:30 Almaty: reported off, outside 18:00-02:00.
    const noon = new Date('2026-11-20T13:30:00+05:00');
    p.clock.set(noon);
    await sendBatch(p, d, [modeChange(d, noon, 'normal', 'screen_off')]);
    await evaluateAt(noon);
    await evaluateAt(new Date('2026-11-20T17:59:00+05:00'));
    expect(await openOf(d, 'screen_off')).toEqual([]);
    await evaluateAt(new Date('2026-11-20T18:00:00+05:00'));
    expect(await openOf(d, 'screen_off')).toMatchObject([
      { since: new Date('2026-11-20T18:00:00+05:00').toISOString() },
    ]);
    await evaluateAt(new Date('2026-11-21T01:59:00+05:00'));
    expect((await openOf(d, 'screen_off')).length).toBe(1);
    const closing = await evaluateAt(new Date('2026-11-21T02:00:00+05:00'));
    expect(closing.resolved.filter((a) => a.device_id === d.id && a.kind === 'screen_off')).toMatchObject([
      { resolution: 'cleared' },
    ]);
    expect(await openOf(d, 'screen_off')).toEqual([]);
  });

  test('a revoked device and a device on a retired structure raise nothing', async () => {
    const t = new Date('2026-11-21T19:00:00+05:00');
    await evaluateAt(t);
    const revoked = await device();
    const retired = await device();
    p.clock.set(t);
    for (const d of [revoked, retired]) {
      await sendBatch(p, d, [play(d, minutes(t, -1)), modeChange(d, minutes(t, -1), 'normal', 'screen_off')]);
    }
    expect(
      (await apiCall(p.servers.api, operator.key, 'POST', `/api/v1/console/devices/${revoked.id}/revoke`))
        .statusCode,
    ).toBe(200);
    expect(
      (
        await apiCall(
          p.servers.api,
          p.adminKey,
          'POST',
          `/api/v1/console/structures/${retired.structure.id}/retire`,
        )
      ).statusCode,
    ).toBe(200);
    for (let m = 0; m <= 10; m += 5) await evaluateAt(minutes(t, m));
    for (const d of [revoked, retired]) {
      const res = await apiCall(
        p.servers.api,
        operator.key,
        'GET',
        `/api/v1/console/alerts?state=all&device_id=${d.id}`,
      );
      expect(res.json<{ items: unknown[] }>().items).toEqual([]);
    }
  });
});
