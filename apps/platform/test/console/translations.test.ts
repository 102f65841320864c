import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PROBLEM_CODES, type ProblemCode } from '@ooh/protocol';
import ts from 'typescript';
import { describe, expect, test } from 'vitest';
import { en } from '../../console/src/i18n/en.js';
import { kk } from '../../console/src/i18n/kk.js';
import { ru } from '../../console/src/i18n/ru.js';
import { en as publicEn } from '../../console/src/public/i18n/en.js';
import { kk as publicKk } from '../../console/src/public/i18n/kk.js';
import { ru as publicRu } from '../../console/src/public/i18n/ru.js';

/*
 * The dictionaries of the console and of the public verify page, read as data and as source: every key in all three
 * languages, written once, with the same {placeholders}; and a text for every problem code and field-error code the
 * console can meet (apps/platform/console/README.md: "Problem codes, field-error codes ... are translated by code"),
 * so that none reaches a reader as "The request failed (key_taken)".
 */

const LANGUAGES = ['en', 'ru', 'kk'] as const;
type Dictionary = Record<string, string>;

const SURFACES = {
  console: { dir: '../../console/src/i18n/', dictionaries: { en, ru, kk } as Record<string, Dictionary> },
  'public page': {
    dir: '../../console/src/public/i18n/',
    dictionaries: { en: publicEn, ru: publicRu, kk: publicKk } as Record<string, Dictionary>,
  },
};

/** Each key of the dictionary object literal in a source file, as often as it is written there. */
function keysAsWritten(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const keys: string[] = [];
  const visit = (node: ts.Node) => {
    let value = ts.isVariableDeclaration(node) ? node.initializer : undefined;
    // `{ ... } as const` and `{ ... } satisfies T` hold the literal one level down.
    while (
      value &&
      (ts.isAsExpression(value) || ts.isSatisfiesExpression(value) || ts.isParenthesizedExpression(value))
    )
      value = value.expression;
    if (value && ts.isObjectLiteralExpression(value)) {
      for (const property of value.properties) {
        if (property.name && (ts.isStringLiteral(property.name) || ts.isIdentifier(property.name)))
          keys.push(property.name.text);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return keys;
}

const placeholders = (text: string) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!).sort();

describe.each(Object.entries(SURFACES))('the %s dictionaries', (_surface, { dir, dictionaries }) => {
  const english = dictionaries['en']!;

  test.each(LANGUAGES)('%s.ts writes each key once', (language) => {
    const written = keysAsWritten(fileURLToPath(new URL(`${dir}${language}.ts`, import.meta.url)));
    expect(written.length).toBeGreaterThan(100);
    const twice = written.filter((key, i) => written.indexOf(key) !== i);
    expect(twice).toEqual([]);
  });

  test.each(['ru', 'kk'] as const)('%s has every English key and no other', (language) => {
    const dictionary = dictionaries[language]!;
    const missing = Object.keys(english).filter((key) => !(key in dictionary));
    const extra = Object.keys(dictionary).filter((key) => !(key in english));
    expect({ missing, extra }).toEqual({ missing: [], extra: [] });
  });

  test.each(LANGUAGES)('%s has no empty text and the same placeholders as English', (language) => {
    const dictionary = dictionaries[language]!;
    const empty = Object.keys(english).filter((key) => !dictionary[key]?.trim());
    expect(empty).toEqual([]);
    const differing = Object.keys(english)
      .filter((key) => key in dictionary)
      .filter((key) => placeholders(dictionary[key]!).join() !== placeholders(english[key]!).join())
      .map(
        (key) => `${key}: ${placeholders(dictionary[key]!).join()} ≠ ${placeholders(english[key]!).join()}`,
      );
    expect(differing).toEqual([]);
  });
});

/** Problem codes only the machine channels answer (agents, CMS installations): no console call meets them. */
const MACHINE_CHANNEL_ONLY: ProblemCode[] = [
  'schema_unknown',
  'bad_signature',
  'device_unauthorized',
  'stale_request',
  'source_unauthorized',
  'source_unknown',
  'batch_conflict',
  'legacy_after_pop',
  'renewal_refused',
  'batch_too_large',
];

/**
 * The field-error codes of the api host's answers to the console's calls: the schema keywords' codes
 * (src/http/server.ts KEYWORD_CODES) and those the routes write themselves (submissions, structures, devices,
 * media, keys).
 */
const FIELD_ERROR_CODES = [
  'required',
  'too_long',
  'too_short',
  'pattern',
  'format',
  'unknown_key',
  'too_many',
  'too_few',
  'type',
  'not_allowed',
  'out_of_range',
  'duplicate',
  'not_found',
  'retired',
  'media_mismatch',
  'invalid_key',
  // src/devices/enrol.ts: a key already held by another device; a CSR that is not for the key.
  'key_taken',
  'key_mismatch',
  // src/structures/identifiers.ts: a venue type a submission or an approval already relies on.
  'immutable',
];

describe('the console has a text for every code it can meet', () => {
  test.each(LANGUAGES)('%s: problem codes and field-error codes', (language) => {
    const dictionary = SURFACES.console.dictionaries[language]!;
    const problems = PROBLEM_CODES.filter((code) => !MACHINE_CHANNEL_ONLY.includes(code)).concat();
    const missing = [
      ...problems.map((code) => `problem.${code}`),
      // The console's own: fetch itself failed (no answer at all).
      'problem.network_error',
      ...FIELD_ERROR_CODES.map((code) => `fieldError.${code}`),
    ].filter((key) => !dictionary[key]?.trim());
    expect(missing).toEqual([]);
  });
});
