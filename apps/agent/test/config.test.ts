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
    });
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
