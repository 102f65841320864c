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
      },
      dataDir,
    ),
  ).toEqual([
    ['DEVICE_CA_CERT', path.join(keys, 'issuing.pem')],
    ['DEVICE_CA_KEY', path.join(keys, 'issuing.key')],
  ]);
});
