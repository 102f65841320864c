import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { settingsOutside } from '../../src/backup/take.js';

// `platform backup` holds DATA_DIR only: the settings that name a key or certificate mounted from elsewhere are
// named on stderr, for the operator to keep with the backup.

const root = mkdtempSync(path.join(os.tmpdir(), 'backup-settings-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

test('settings naming an existing file or folder outside DATA_DIR are named; inside it, missing, or not a path, not', () => {
  const dataDir = path.join(root, 'data');
  const keys = path.join(root, 'keys');
  mkdirSync(path.join(dataDir, 'authority'), { recursive: true });
  mkdirSync(keys);
  writeFileSync(path.join(keys, 'issuing.key'), 'x');
  writeFileSync(path.join(keys, 'issuing.pem'), 'x');
  expect(
    settingsOutside(
      {
        DEVICE_CA_KEY: path.join(keys, 'issuing.key'),
        DEVICE_CA_CERT: path.join(keys, 'issuing.pem'),
        AUTHORITY_DIR: path.join(dataDir, 'authority'),
        AUTHORITY_LEDGER_KEY: path.join(keys, 'missing.key'),
        WEBHOOK_ALLOWED_TARGETS: '10.0.0.0/8',
        PUBLIC_VERIFY_URL: 'https://verify.example.kz/',
        MEDIA_MAX_BYTES: '1000',
        // The environment's own paths are no part of the platform's state (the backup named 34 of them).
        HOME: root,
        SHELL: '/bin/sh',
        INIT_CWD: root,
        npm_execpath: path.join(keys, 'issuing.pem'),
        NODE: process.execPath,
      },
      dataDir,
    ),
  ).toEqual([
    ['DEVICE_CA_CERT', path.join(keys, 'issuing.pem')],
    ['DEVICE_CA_KEY', path.join(keys, 'issuing.key')],
  ]);
});

test('every key, certificate and settings file the platform reads is looked at', () => {
  const keys = path.join(root, 'other-keys');
  mkdirSync(keys, { recursive: true });
  const names = [
    'AUTHORITY_DIR',
    'AUTHORITY_ROOT_CERT',
    'AUTHORITY_CHAIN_CERTS',
    'AUTHORITY_ENVELOPE_CERT',
    'AUTHORITY_ENVELOPE_KEY',
    'AUTHORITY_SEAL_CERT',
    'AUTHORITY_SEAL_KEY',
    'AUTHORITY_LEDGER_KEY',
    'DEVICE_CA_CERT',
    'DEVICE_CA_CHAIN',
    'DEVICE_CA_KEY',
    'DEVICES_TLS_CERT',
    'DEVICES_TLS_KEY',
    'LEDGER_TSA_CERT',
    'CONFIG_FILE',
  ];
  const settings: Record<string, string> = {};
  for (const name of names) {
    settings[name] = path.join(keys, name.toLowerCase());
    writeFileSync(settings[name]!, 'x');
  }
  expect(settingsOutside(settings, path.join(root, 'data')).map(([name]) => name)).toEqual(
    [...names].sort((a, b) => a.localeCompare(b)),
  );
});
