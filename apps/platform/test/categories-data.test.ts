// The product categories behind category_id (spec: "IAB Ad Product Taxonomy 2.0, tiers 1 and 2", names
// "in the three console languages"): the checked-in categories.json must be exactly what the build script
// makes from the shared taxonomy and data/category-names.tsv, and the names must be real translations.

import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Category as CategorySchema } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type Category,
  CategoryDataError,
  buildCategories,
  categoryDataPaths,
  serializeCategories,
} from '../scripts/build-categories.js';

const paths = categoryDataPaths();
const taxonomyTsv = readFileSync(paths.taxonomy, 'utf8');
const namesTsv = readFileSync(paths.names, 'utf8');
const checkedInText = readFileSync(
  fileURLToPath(new URL('../data/categories.json', import.meta.url)),
  'utf8',
);
const checkedIn = JSON.parse(checkedInText) as Category[];

// ru/kk names that may equal the English one, with the reason. None is needed today: abbreviations such as
// CBD, DVD and NFT stand inside a translated name ("Невзаимозаменяемые токены (NFT)"). Add an entry here,
// with its reason, only for a name that is a proper name or an abbreviation on its own.
const allowedSameAsEnglish: ReadonlyMap<number, string> = new Map<number, string>([]);
// Latin-script tokens allowed inside a translated name: established abbreviations with no Cyrillic form.
const allowedLatinTokens = ['CBD', 'DVD', 'NFT'];
const kazakhLetters = /[әғқңөұүһіӘҒҚҢӨҰҮҺІ]/u;
const cyrillic = /\p{Script=Cyrillic}/u;

const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function namesWithout(id: number): string {
  return namesTsv
    .split('\n')
    .filter((line) => !line.startsWith(`${id}\t`))
    .join('\n');
}

function namesWithLine(id: number, replacement: string): string {
  return namesTsv
    .split('\n')
    .map((line) => (line.startsWith(`${id}\t`) ? replacement : line))
    .join('\n');
}

function thrownBy(run: () => unknown): CategoryDataError {
  try {
    run();
  } catch (error) {
    if (error instanceof CategoryDataError) return error;
    throw error;
  }
  throw new Error('expected a CategoryDataError');
}

describe('categories.json', () => {
  it('is exactly what the build script makes from the shared taxonomy and the names file', () => {
    const rebuilt = buildCategories(taxonomyTsv, namesTsv);
    expect(serializeCategories(rebuilt)).toBe(checkedInText);
    expect(checkedIn).toEqual(rebuilt);
  });

  it('holds the 378 tier-1 and tier-2 entries, sorted by unique id', () => {
    expect(checkedIn).toHaveLength(378);
    expect(checkedIn.filter((category) => category.tier === 1)).toHaveLength(45);
    expect(checkedIn.filter((category) => category.tier === 2)).toHaveLength(333);
    const ids = checkedIn.map((category) => category.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    for (const category of checkedIn) {
      expect(Number.isInteger(category.id)).toBe(true);
      expect(Object.keys(category)).toEqual(['id', 'parent_id', 'tier', 'name']);
      expect(Object.keys(category.name)).toEqual(['en', 'ru', 'kk']);
    }
  });

  it('matches the wire schema of a category in @ooh/protocol', () => {
    for (const category of checkedIn) {
      expect(Value.Check(CategorySchema, category), `${category.id}`).toBe(true);
    }
  });

  it('gives tier-1 entries no parent and every tier-2 entry an existing tier-1 parent', () => {
    const byId = new Map(checkedIn.map((category) => [category.id, category]));
    for (const category of checkedIn) {
      if (category.tier === 1) {
        expect(category.parent_id, `${category.id}`).toBeNull();
      } else {
        expect(category.parent_id, `${category.id}`).not.toBeNull();
        expect(byId.get(category.parent_id ?? -1)?.tier, `parent of ${category.id}`).toBe(1);
      }
    }
    // The source gives 1000 "Ad Safety Risk" its own id as parent; it is a tier-1 entry.
    expect(byId.get(1000)).toMatchObject({ parent_id: null, tier: 1, name: { en: 'Ad Safety Risk' } });
    expect(byId.get(1003)).toMatchObject({ parent_id: 1002, tier: 2, name: { en: 'Bars' } });
    // Tier-3 entries are not offered.
    expect(byId.has(1013)).toBe(false);
  });

  it('carries the English names of the taxonomy, trimmed', () => {
    const byId = new Map(checkedIn.map((category) => [category.id, category]));
    expect(byId.get(1120)?.name.en).toBe('Video Games'); // "Video Games " in the source
    for (const category of checkedIn) {
      expect(category.name.en).toBe(category.name.en.trim());
      expect(category.name.en).not.toBe('');
    }
  });

  it('has a Russian and a Kazakh name for every entry, translated, not copied from English', () => {
    for (const [id, reason] of allowedSameAsEnglish) {
      expect(reason.length, `reason for ${id}`).toBeGreaterThan(0);
    }
    for (const category of checkedIn) {
      const { en, ru, kk } = category.name;
      for (const [language, text] of [
        ['ru', ru],
        ['kk', kk],
      ] as const) {
        const label = `${category.id} ${language} "${text}"`;
        expect(text.trim(), label).toBe(text);
        expect(text, label).not.toBe('');
        expect(text, label).not.toMatch(/[\t\n\r]/);
        expect(text, label).toMatch(cyrillic);
        if (!allowedSameAsEnglish.has(category.id)) {
          expect(text.toLowerCase(), label).not.toBe(en.toLowerCase());
        }
        const latinLeft = allowedLatinTokens.reduce((rest, token) => rest.replaceAll(token, ''), text);
        expect(latinLeft, `${label}: untranslated Latin text`).not.toMatch(/[A-Za-z]/);
      }
      // Kazakh-only letters in a Russian name mean the columns were swapped or mixed.
      expect(ru, `${category.id} ru "${ru}"`).not.toMatch(kazakhLetters);
    }
  });

  it('writes Kazakh with Kazakh letters and not as a copy of the Russian', () => {
    const withKazakhLetters = checkedIn.filter((category) => kazakhLetters.test(category.name.kk));
    // Most Kazakh names need ә, ғ, қ, ң, ө, ұ, ү, һ or і; a low share would mean Russian pasted as Kazakh.
    expect(withKazakhLetters.length).toBeGreaterThan(checkedIn.length * 0.8);
    const sameAsRussian = checkedIn.filter((category) => category.name.kk === category.name.ru);
    // Loanwords identical in both languages (Алкоголь, Косметика, Медиа, ...) stay few.
    expect(sameAsRussian.length).toBeLessThan(checkedIn.length * 0.05);
  });

  it('keeps the reference translations', () => {
    const byId = new Map(checkedIn.map((category) => [category.id, category.name]));
    expect(byId.get(1002)).toEqual({ en: 'Alcohol', ru: 'Алкоголь', kk: 'Алкоголь' });
    expect(byId.get(1003)).toEqual({ en: 'Bars', ru: 'Бары', kk: 'Барлар' });
    expect(byId.get(1473)).toEqual({
      en: 'Pharmaceuticals',
      ru: 'Лекарственные препараты',
      kk: 'Дәрілік препараттар',
    });
  });
});

describe('buildCategories', () => {
  it('refuses a tier-1/2 entry without a translation, naming its id', () => {
    const error = thrownBy(() => buildCategories(taxonomyTsv, namesWithout(1003)));
    expect(error.code).toBe('names_mismatch');
    expect(error.missing).toEqual([1003]);
    expect(error.ids).toEqual([1003]);
    expect(error.message).toContain('1003');
  });

  it('refuses an empty Russian or Kazakh name', () => {
    const emptyKazakh = thrownBy(() => buildCategories(taxonomyTsv, namesWithLine(1004, '1004\tПиво\t ')));
    expect(emptyKazakh.code).toBe('names_mismatch');
    expect(emptyKazakh.empty).toEqual([1004]);
    const emptyRussian = thrownBy(() => buildCategories(taxonomyTsv, namesWithLine(1004, '1004\t\tСыра')));
    expect(emptyRussian.empty).toEqual([1004]);
  });

  it('refuses names for ids that are not tier-1/2 entries of the taxonomy', () => {
    const extra = `${namesTsv}9999\tЛишнее\tАртық\n1013\tКонсалтинг\tКонсалтинг\n`;
    const error = thrownBy(() => buildCategories(taxonomyTsv, extra));
    expect(error.code).toBe('names_mismatch');
    expect(error.unknown).toEqual([1013, 9999]); // 1013 is a tier-3 entry
    expect(error.message).toContain('9999');
  });

  it('reports every problem at once', () => {
    const broken = `${namesWithLine(1004, '1004\tПиво\t')
      .split('\n')
      .filter((line) => !line.startsWith('1582\t'))
      .join('\n')}9999\tа\tә\n`;
    const error = thrownBy(() => buildCategories(taxonomyTsv, broken));
    expect({ missing: error.missing, empty: error.empty, unknown: error.unknown }).toEqual({
      missing: [1582],
      empty: [1004],
      unknown: [9999],
    });
    expect(error.ids).toEqual([1004, 1582, 9999]);
  });

  it('refuses a repeated id or a malformed names file', () => {
    expect(thrownBy(() => buildCategories(taxonomyTsv, `${namesTsv}1003\tБары\tБарлар\n`)).code).toBe(
      'names_malformed',
    );
    expect(
      thrownBy(() => buildCategories(taxonomyTsv, namesTsv.replace('id\tru\tkk', 'id\tkk\tru'))).code,
    ).toBe('names_malformed');
    expect(thrownBy(() => buildCategories(taxonomyTsv, namesWithLine(1003, '1003\tБары'))).code).toBe(
      'names_malformed',
    );
  });

  it('reads a small taxonomy: self-parented tier 1 becomes null, tier 3 is dropped, CRLF accepted', () => {
    const taxonomy = [
      'Unique ID\tParent ID\tName\tTier 1\tTier 2\tTier 3',
      '1\t1\tTop\tTop\t\t',
      '2\t1\tChild \tTop\tChild \t',
      '3\t2\tGrandchild\tTop\tChild\tGrandchild',
      '',
    ].join('\r\n');
    const names = 'id\tru\tkk\r\n1\tВерх\tЖоғары\r\n2\tДочерний\tЕншілес\r\n';
    expect(buildCategories(taxonomy, names)).toEqual([
      { id: 1, parent_id: null, tier: 1, name: { en: 'Top', ru: 'Верх', kk: 'Жоғары' } },
      { id: 2, parent_id: 1, tier: 2, name: { en: 'Child', ru: 'Дочерний', kk: 'Еншілес' } },
    ]);
  });

  it('refuses a tier-2 entry whose parent is missing or not tier 1', () => {
    const header = 'Unique ID\tParent ID\tName\tTier 1\tTier 2\tTier 3';
    const orphan = `${header}\n1\t\tTop\tTop\t\t\n2\t7\tChild\tTop\tChild\t\n`;
    const error = thrownBy(() => buildCategories(orphan, 'id\tru\tkk\n1\tа\tә\n2\tб\tб\n'));
    expect(error.code).toBe('taxonomy_malformed');
    expect(error.ids).toEqual([2]);
    const underWrongTop = `${header}\n1\t\tTop\tTop\t\t\n2\t1\tChild\tOther\tChild\t\n`;
    expect(thrownBy(() => buildCategories(underWrongTop, 'id\tru\tkk\n1\tа\tә\n2\tб\tб\n')).code).toBe(
      'taxonomy_malformed',
    );
  });
});

describe('build-categories script', () => {
  const run = promisify(execFile);
  const script = fileURLToPath(new URL('../scripts/build-categories.ts', import.meta.url));
  const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

  it('writes the same categories.json when run from another directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'categories-'));
    tempDirs.push(dir);
    const output = join(dir, 'categories.json');
    await run(process.execPath, ['--import', tsxLoader, script], {
      cwd: dir,
      env: { ...process.env, CATEGORIES_OUT: output },
    });
    expect(readFileSync(output, 'utf8')).toBe(checkedInText);
  });

  it('exits non-zero and names the id when a taxonomy entry has no translation', async () => {
    const shared = mkdtempSync(join(tmpdir(), 'categories-shared-'));
    tempDirs.push(shared);
    const output = join(shared, 'categories.json');
    const dataDir = join(shared, 'data');
    mkdirSync(dataDir);
    const extraRow = '9001\t1002\tNew Alcohol Product\tAlcohol\tNew Alcohol Product\t\n';
    writeFileSync(
      join(dataDir, 'iab-ad-product-taxonomy-2.0.tsv'),
      `${taxonomyTsv.replace(/\n+$/, '')}\n${extraRow}`,
    );
    const failure = await run(process.execPath, ['--import', tsxLoader, script], {
      cwd: shared,
      env: { ...process.env, SHARED_DIR: shared, CATEGORIES_OUT: output },
    }).then(
      () => undefined,
      (error: unknown) => error as { code?: number; stderr?: string },
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toContain('9001');
    expect(() => readFileSync(output)).toThrow();
  });
});
