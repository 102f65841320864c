import { describe, expect, it } from 'vitest';
import { CONFIG_DEFAULTS, parseConfig } from '../src/config/config.js';
import { AgentError } from '../src/errors.js';
import { createBoardHardware } from '../src/hardware/hardware.js';

const minimal = {
  structure: 'ALM-0001',
  platform: {
    agents_url: 'https://agents.example/',
    devices_url: 'https://devices.example',
    verify_url: 'https://verify.example',
  },
  authority_root_file: 'root.pem',
};

describe('config', () => {
  it('fills defaults and resolves paths against the config folder', () => {
    const config = parseConfig(minimal, '/etc/ooh', '/etc/ooh/agent.json');
    expect(config).toMatchObject({
      deviceId: null,
      agentsUrl: 'https://agents.example',
      dataDir: '/etc/ooh/data',
      mediaDir: '/etc/ooh/media',
      authorityRootFile: '/etc/ooh/root.pem',
      keyFile: '/etc/ooh/data/device-key.pem',
      certificateFile: '/etc/ooh/data/device-cert.pem',
      serverCaFile: null,
      board: null,
      shipping: CONFIG_DEFAULTS.shipping,
      renewalCheckMs: 3_600_000,
      warnings: [],
    });
  });

  it('knows every key it reads: a config using all of them has no warnings', () => {
    const full = {
      ...minimal,
      device_id: '6f1c0c52-7a4e-4d8e-9a51-2b7f3c1d9e00',
      data_dir: 'd',
      media_dir: 'm',
      server_ca_file: 'ca.pem',
      key_file: 'k.pem',
      certificate_file: 'c.pem',
      ca_chain_file: 'chain.pem',
      board: 'none',
      image_duration_ms: 5000,
      shipping: { min_interval_ms: 1, idle_interval_ms: 2, backoff_base_ms: 3, backoff_cap_ms: 4 },
      revocation_refresh_ms: 60_000,
      renewal_check_ms: 60_000,
      media_recheck_ms: 1000,
      offline_after_ms: 1000,
      max_clock_correction_ms: 1000,
      media_stability_ms: 0,
      sidecar_grace_ms: 0,
    };
    expect(parseConfig(full, '/etc/ooh').warnings).toEqual([]);
  });

  it('reports unknown keys at every level with their full path, and still parses the rest', () => {
    const config = parseConfig(
      {
        ...minimal,
        platform: { ...minimal.platform, platfrom_url: 'https://x.example', agents_ur: 'x' },
        shiping: { interval: 5 },
        shipping: { min_interval_ms: 500, interval: 5 },
        deviceId: 'x',
        agents_url: 'https://agents.example',
        colour: 'blue',
      },
      '/etc/ooh',
    );
    // Known keys are still taken; the unknown ones change nothing.
    expect(config.shipping.minIntervalMs).toBe(500);
    expect(config.deviceId).toBeNull();
    expect(config.agentsUrl).toBe('https://agents.example');
    expect(config.warnings).toEqual([
      'unknown key "shiping" (ignored; did you mean "shipping"?)',
      'unknown key "deviceId" (ignored; did you mean "device_id"?)',
      'unknown key "agents_url" (ignored; did you mean "platform.agents_url"?)',
      'unknown key "colour" (ignored)',
      'unknown key "platform.platfrom_url" (ignored)',
      'unknown key "platform.agents_ur" (ignored; did you mean "platform.agents_url"?)',
      'unknown key "shipping.interval" (ignored)',
    ]);
  });

  it('names unknown keys in a config_invalid error too (a misspelt section explains what is missing)', () => {
    const { platform, ...rest } = minimal;
    expect(() => parseConfig({ ...rest, platfrom: platform }, '/etc/ooh')).toThrowError(
      /platform must be an object.*unknown key "platfrom" \(ignored; did you mean "platform"\?\)/,
    );
  });

  it('lists every problem in one config_invalid error', () => {
    try {
      parseConfig(
        {
          platform: { agents_url: 'ftp://x', devices_url: 'not a url' },
          device_id: 'nope',
          renewal_check_ms: 7_200_000,
        },
        '/tmp',
      );
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(AgentError);
      expect((error as AgentError).code).toBe('config_invalid');
      const message = (error as Error).message;
      for (const part of [
        'structure is required',
        'platform.agents_url must be http(s)',
        'platform.devices_url is not a URL',
        'platform.verify_url is required',
        'device_id must be a UUID',
        'renewal_check_ms must be at most one hour',
        'authority_root_file is required',
      ]) {
        expect(message).toContain(part);
      }
    }
  });
});

describe('board hardware', () => {
  it('reads nothing until a board is named', () => {
    const hardware = createBoardHardware();
    expect(hardware.screenPower()).toBe('unknown');
    expect(hardware.tamper()).toBe('unknown');
    expect(hardware.onTamperChange(() => {})).toBeTypeOf('function');
    expect(Math.abs(hardware.clock.now().getTime() - Date.now())).toBeLessThan(1000);
  });

  it('refuses a board it has no driver for', () => {
    expect(() => createBoardHardware('rpi-cm4')).toThrowError(
      expect.objectContaining({ code: 'unsupported_board' }),
    );
  });
});
