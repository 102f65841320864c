import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { HEAP_GROWING_PERCENT, platformExecArgv, setsHeapGrowth } from '../../src/heap.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { spawnPlatform } from '../support/process.js';

const REPO = new URL('../../../../', import.meta.url);

test('the old generation’s growth is added to a platform’s Node arguments once, and an operator’s own wins', () => {
  const flag = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
  expect(platformExecArgv([])).toEqual([flag]);
  expect(platformExecArgv(['--conditions=source', '--import', 'tsx'])).toEqual([
    '--conditions=source',
    '--import',
    'tsx',
    flag,
  ]);
  expect(platformExecArgv(platformExecArgv([]))).toEqual([flag]);
  // V8 takes dashes or underscores; 0 is V8's own sizing.
  for (const own of ['--heap-growing-percent=0', '--heap_growing_percent=50', '--heap-growing-percent']) {
    expect(setsHeapGrowth([own])).toBe(true);
    expect(platformExecArgv(['--inspect', own])).toEqual(['--inspect', own]);
  }
  expect(setsHeapGrowth(['--heap-growing-percentage=5', '--max-old-space-size=512'])).toBe(false);
});

test('this Node’s V8 knows the flag: a Node without it would refuse to start the platform', () => {
  // Node refuses an option V8 does not know (exit 9): this would fail on a Node whose V8 dropped the flag.
  const run = (args: string[]) =>
    spawnSync(process.execPath, [...args, '-e', 'process.stdout.write("started")'], { encoding: 'utf8' });
  const known = run(platformExecArgv([]));
  expect(known.stderr).toBe('');
  expect([known.status, known.stdout]).toEqual([0, 'started']);
  expect(run(['--heap-growing-percent-of-nothing=1']).status).not.toBe(0);
});

test('npm run platform and npm start start Node with the flag', () => {
  const scripts = (
    JSON.parse(readFileSync(new URL('package.json', REPO), 'utf8')) as {
      scripts: Record<string, string>;
    }
  ).scripts;
  for (const name of ['platform', 'start']) {
    const args = scripts[name]!.split(' ');
    expect(args[0], name).toBe('node');
    expect(args, name).toContain(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  }
});

describe('a single platform process', () => {
  let database: TestDatabase | null = null;
  const dirs: string[] = [];
  afterAll(async () => {
    await database?.drop();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });
  const started = async (nodeArgs: string[]) => {
    database ??= await createTestDatabase();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-heap-'));
    dirs.push(dir);
    const p = await spawnPlatform(
      [],
      { DATABASE_URL: database.url, DATA_DIR: dir, LOG_LEVEL: 'info' },
      { nodeArgs },
    );
    await p.stop();
    return p.output();
  };

  test('started without the flag says so in its log, and not when started with it', async () => {
    const hint = 'started without --heap-growing-percent';
    expect(await started([])).toContain(`${hint}: full garbage collections about once a second under load`);
    expect(await started(platformExecArgv([]))).not.toContain(hint);
  }, 120_000);
});
