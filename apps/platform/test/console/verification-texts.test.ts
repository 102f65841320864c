import { readdirSync, readFileSync } from 'node:fs';
import {
  ANCHOR_REASONS,
  BATCH_CHECK_REASONS,
  BLOCK_CHECK_REASONS,
  LEDGER_PROOF_REASONS,
  SEAL_CHECK_REASONS,
  TIMESTAMP_REFUSALS,
  VERIFICATION_ERROR_CODES,
} from '@ooh/verify';
import { describe, expect, test } from 'vitest';
import { en } from '../../console/src/i18n/en.js';
import { kk } from '../../console/src/i18n/kk.js';
import { ru } from '../../console/src/i18n/ru.js';
import { en as publicEn } from '../../console/src/public/i18n/en.js';
import { kk as publicKk } from '../../console/src/public/i18n/kk.js';
import { ru as publicRu } from '../../console/src/public/i18n/ru.js';

/*
 * The transparency and report pages of the console and the public verify page show every check of @ooh/verify
 * translated: what a check established, why it failed (for a signature, the VerificationError code), in en, ru and
 * kk. A code or reason added to the package without a text here would show as a bare machine word.
 */

const CONSOLE = { en, ru, kk } as Record<string, Record<string, string>>;
const PUBLIC = { en: publicEn, ru: publicRu, kk: publicKk } as Record<string, Record<string, string>>;

/** The keys a surface must have: its prefix for each list of words. */
const CONSOLE_KEYS = [
  ...SEAL_CHECK_REASONS.map((r) => `seal.reason.${r}`),
  ...VERIFICATION_ERROR_CODES.map((c) => `verify.code.${c}`),
  ...ANCHOR_REASONS.map((r) => `transparency.witness.reason.${r}`),
  ...TIMESTAMP_REFUSALS.map((r) => `transparency.tsa.reason.${r}`),
];
const PUBLIC_KEYS = [
  ...SEAL_CHECK_REASONS.map((r) => `reason.${r}`),
  ...BLOCK_CHECK_REASONS.map((r) => `reason.${r}`),
  ...LEDGER_PROOF_REASONS.map((r) => `reason.${r}`),
  ...VERIFICATION_ERROR_CODES.map((c) => `code.${c}`),
];

describe.each([
  ['console', CONSOLE, CONSOLE_KEYS],
  ['public page', PUBLIC, PUBLIC_KEYS],
] as const)('the %s has a text for every word of @ooh/verify it shows', (_surface, dictionaries, keys) => {
  test.each(['en', 'ru', 'kk'])('%s', (language) => {
    const dictionary = dictionaries[language]!;
    const missing = keys.filter((key) => !dictionary[key]?.trim());
    expect(missing).toEqual([]);
    if (language === 'en') return;
    // Translated, not the English copied: Cyrillic, and not the English text.
    const untranslated = keys.filter(
      (key) => !/[\u0400-\u04ff]/.test(dictionary[key]!) || dictionary[key] === dictionaries['en']![key],
    );
    expect(untranslated).toEqual([]);
  });
});

describe('the lists of @ooh/verify are whole', () => {
  test('every VerificationError code of errors.ts is listed', () => {
    const source = readFileSync(
      new URL('../../../../packages/verify/src/errors.ts', import.meta.url),
      'utf8',
    );
    const union = source.slice(
      source.indexOf('export type VerificationErrorCode'),
      source.indexOf('export class'),
    );
    const codes = [...union.matchAll(/\| '(\w+)'/g)].map((m) => m[1]);
    expect(codes.length).toBeGreaterThan(20);
    expect([...VERIFICATION_ERROR_CODES].sort()).toEqual(codes.sort());
  });

  test('every reason a check of the package writes is in one of its lists', () => {
    const dir = new URL('../../../../packages/verify/src/', import.meta.url);
    const written = new Set<string>();
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const source = readFileSync(new URL(file, dir), 'utf8');
      // `reason: 'word'` in a check, `fail('word')` / `fail(subject, 'word')` where a check or a document fails.
      for (const m of source.matchAll(/reason: '(\w+)'|\bfail\((?:[^()']*, )?'(\w+)'/g))
        written.add(m[1] ?? m[2]!);
      if (file === 'block.ts') {
        const ledgerInfo = source.slice(source.indexOf('export async function verifyLedgerInfo'));
        for (const m of ledgerInfo.matchAll(/return '(\w+)'/g)) written.add(m[1]!);
      }
    }
    expect(written.size).toBeGreaterThan(40);
    const listed = new Set<string>([
      ...SEAL_CHECK_REASONS,
      ...BATCH_CHECK_REASONS,
      ...BLOCK_CHECK_REASONS,
      ...LEDGER_PROOF_REASONS,
      ...ANCHOR_REASONS,
      ...VERIFICATION_ERROR_CODES, // signed-document.ts fails with the codes themselves
    ]);
    expect([...written].filter((reason) => !listed.has(reason))).toEqual([]);
  });
});
