import { fileURLToPath } from 'node:url';
import { build, defaultClientConditions, type Rolldown } from 'vite';
import { describe, expect, test } from 'vitest';

/*
 * The console and the public page import the Almaty calendar and the wire types from @ooh/protocol. Bundled for the
 * browser as the console bundles it (vite, the "source" condition), importing the calendar must bring neither TypeBox
 * and the schemas (about 100 kB: package.json says "sideEffects": false, so the bundler may drop the modules nothing
 * uses) nor any Node module.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ENTRY = '\0entry';

async function bundle(source: string): Promise<string> {
  const output = await build({
    configFile: false,
    root: ROOT,
    logLevel: 'silent',
    resolve: { conditions: ['source', ...defaultClientConditions] },
    plugins: [
      {
        name: 'entry',
        resolveId: (id) => (id === ENTRY ? ENTRY : null),
        load: (id) => (id === ENTRY ? source : null),
      },
    ],
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      rolldownOptions: { input: ENTRY, preserveEntrySignatures: 'strict' },
    },
  });
  const results = (Array.isArray(output) ? output : [output]) as Rolldown.RolldownOutput[];
  return results
    .flatMap((result) => result.output)
    .map((chunk) => (chunk.type === 'chunk' ? chunk.code : ''))
    .join('\n');
}

describe('@ooh/protocol in a browser bundle', () => {
  test('the calendar alone: no TypeBox, no schema, no Node module', async () => {
    const code = await bundle(
      "export { addDays, almatyDate, almatyWeekday, isCalendarDate } from '@ooh/protocol';",
    );
    expect(code).toContain('Asia/Almaty');
    expect(code).not.toMatch(/TypeBox\.Kind|FormatRegistry/);
    expect(code).not.toMatch(/from ['"]node:/);
    expect(code.length).toBeLessThan(20_000);
  }, 60_000);

  test('the schemas, when used, do bring TypeBox (the check above can fail)', async () => {
    const code = await bundle("export { CreativeLookupResponse } from '@ooh/protocol';");
    expect(code).toMatch(/TypeBox\.Kind/);
    expect(code).not.toMatch(/from ['"]node:/);
  }, 60_000);
});
