import { execFileSync } from 'node:child_process';
import { mkdtempSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

// In a child process: the helper changes the working directory of the process it runs in.
const HELPER = fileURLToPath(new URL('../src/typed-in.ts', import.meta.url));
const REPO = fileURLToPath(new URL('../../..', import.meta.url));

function cwdAfter(env: Record<string, string>): string {
  return execFileSync(
    process.execPath,
    [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      `import { enterTypedInDirectory } from ${JSON.stringify(HELPER)}; enterTypedInDirectory('verify'); process.stdout.write(process.cwd());`,
    ],
    { cwd: REPO, env: { PATH: process.env['PATH'] ?? '', ...env }, encoding: 'utf8' },
  );
}

test('a tool run as its npm script moves to the folder the command was typed in; any other process stays', () => {
  const typedIn = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'ooh-typed-in-')));
  expect(cwdAfter({ INIT_CWD: typedIn, npm_lifecycle_event: 'verify' })).toBe(typedIn);
  // A child of `npm test` inherits INIT_CWD and npm_lifecycle_event=test: it stays where it was started.
  expect(path.resolve(cwdAfter({ INIT_CWD: typedIn, npm_lifecycle_event: 'test' }))).toBe(path.resolve(REPO));
  expect(path.resolve(cwdAfter({ npm_lifecycle_event: 'verify' }))).toBe(path.resolve(REPO));
});
