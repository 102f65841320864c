import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { checkFeatureSettings, featureSettingProblems } from '../../src/settings-check.js';

describe('platform configuration', () => {
  test('defaults, then the file, then the environment', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-config-'));
    const file = path.join(dir, 'platform.json');
    await writeFile(file, JSON.stringify({ api_port: 9000, verify_port: 9003, data_dir: dir }));
    const c = loadConfig({ file, env: { VERIFY_PORT: '9100', HOST: '0.0.0.0' } });
    expect(c).toMatchObject({
      apiPort: 9000,
      verifyPort: 9100,
      agentsPort: 8081,
      host: '0.0.0.0',
      dataDir: dir,
    });
    expect(c.publicUrls.api).toBe('http://127.0.0.1:9000');
    expect(c.publicUrls.devices).toBe('https://127.0.0.1:8443');
    expect(c.databaseUrl).toBeNull();
    expect(c.testClock).toBe(false);
  });

  test('every bad value is named in one message', () => {
    let error: unknown;
    try {
      loadConfig({
        env: {
          API_PORT: 'eighty',
          AGENTS_PORT: '70000',
          DATABASE_URL: 'mysql://x',
          PLATFORM_ENV: 'staging',
          VERIFY_PORT: '8081',
        },
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toMatch(/API_PORT: "eighty" is not a port/);
    expect(problems).toMatch(/AGENTS_PORT: "70000" is not a port/);
    expect(problems).toMatch(/DATABASE_URL/);
    expect(problems).toMatch(/PLATFORM_ENV/);
    expect(problems).toMatch(/VERIFY_PORT: port 8081 is already used by AGENTS_PORT/);
  });

  test('TRUST_PROXY names the proxies whose X-Forwarded-For is believed; anything else stops the start', () => {
    expect(loadConfig({ env: {} }).trustProxy).toEqual([]);
    expect(loadConfig({ env: { TRUST_PROXY: '10.0.0.0/8, 192.168.1.5,loopback,::1' } }).trustProxy).toEqual([
      '10.0.0.0/8',
      '192.168.1.5',
      'loopback',
      '::1',
    ]);
    expect(() => loadConfig({ env: { TRUST_PROXY: 'true' } })).toThrow(
      /TRUST_PROXY: "true" is not an IP address/,
    );
    expect(() => loadConfig({ env: { TRUST_PROXY: '10.0.0.0/33' } })).toThrow(/"10.0.0.0\/33"/);
  });

  test('PLATFORM_ENV and PLATFORM_WORKERS are keys of the file under their own names too, not feature settings', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-config-'));
    const file = path.join(dir, 'platform.json');
    await writeFile(file, JSON.stringify({ platform_env: 'test', platform_workers: 3 }));
    const c = loadConfig({ file, env: {} });
    expect(c).toMatchObject({ env: 'test', workers: 3 });
    expect(c.settings['PLATFORM_ENV']).toBeUndefined();
    await writeFile(file, JSON.stringify({ platform_env: 'staging' }));
    expect(() => loadConfig({ file, env: {} })).toThrow(
      /config file "platform_env"|PLATFORM_ENV: must be test or prod/,
    );
    await writeFile(file, JSON.stringify({ env: 'test', workers: 2 }));
    expect(loadConfig({ file, env: {} })).toMatchObject({ env: 'test', workers: 2 });
  });

  test('a config file that is not a JSON object is refused', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-config-'));
    const file = path.join(dir, 'bad.json');
    await writeFile(file, '[1,2]');
    expect(() => loadConfig({ file, env: {} })).toThrow(/must hold a JSON object/);
  });

  test("the features' settings come from the file (upper-cased keys) and the environment over it", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-config-'));
    const file = path.join(dir, 'platform.json');
    await writeFile(
      file,
      JSON.stringify({
        api_port: 9000,
        media_max_bytes: 1000,
        console_cookie_secure: 'always',
        device_ca_cert: 1,
      }),
    );
    const c = loadConfig({ file, env: { CONSOLE_COOKIE_SECURE: 'never' } });
    expect(c.settings['MEDIA_MAX_BYTES']).toBe('1000');
    expect(c.settings['CONSOLE_COOKIE_SECURE']).toBe('never');
    expect(c.settings['API_PORT']).toBeUndefined();
    await writeFile(file, JSON.stringify({ fast_track_review_hours: { hours: 4 } }));
    expect(() => loadConfig({ file, env: {} })).toThrow(
      /"fast_track_review_hours": must be a string, a number/,
    );
  });

  test("a bad core setting does not hide the features' bad ones, nor one of a feature its others", () => {
    let error: unknown;
    try {
      loadConfig({
        env: {
          API_PORT: 'abc',
          MEDIA_MAX_BYTES: '-5',
          FAST_TRACK_REVIEW_HOURS: 'x',
          ALERT_INTERVAL_SECONDS: 'x',
          CONSOLE_IDLE_TIMEOUT_MINUTES: '0',
          CONSOLE_COOKIE_SECURE: 'sometimes',
        },
        alsoCheck: featureSettingProblems,
      });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const named = (error as ConfigError).problems.map((line) => line.split(':')[0]);
    expect(named).toEqual(
      expect.arrayContaining([
        'API_PORT',
        'MEDIA_MAX_BYTES',
        'FAST_TRACK_REVIEW_HOURS',
        'ALERT_INTERVAL_SECONDS',
        'CONSOLE_IDLE_TIMEOUT_MINUTES',
        'CONSOLE_COOKIE_SECURE',
      ]),
    );
    // Good values pass the same way.
    expect(() => loadConfig({ env: {}, alsoCheck: featureSettingProblems })).not.toThrow();
  });

  test('every bad feature setting is named at start, all of them in one message', () => {
    const config = loadConfig({
      env: {
        MEDIA_MAX_BYTES: 'lots',
        CONSOLE_COOKIE_SECURE: 'sometimes',
        DEVICE_CA_CERT: '/only/the/cert.pem',
        AUTHORITY_ROOT_CERT: '/only/the/root.pem',
      },
    });
    let error: unknown;
    try {
      checkFeatureSettings(config);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as ConfigError).problems.join('\n');
    expect(message).toMatch(/MEDIA_MAX_BYTES: "lots"/);
    expect(message).toMatch(/CONSOLE_COOKIE_SECURE: "sometimes"/);
    expect(message).toMatch(/DEVICE_CA_/);
    expect(message).toMatch(/AUTHORITY_/);
    expect(() => checkFeatureSettings(loadConfig({ env: {} }))).not.toThrow();
  });
});
