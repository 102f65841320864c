// Builds apps/platform/data/categories.json, the list behind GET /api/v1/categories.
// spec: category_id is a "Product category id from the categories list (IAB Ad Product Taxonomy 2.0,
// tiers 1 and 2)"; a category carries "names in the three console languages": name {en, ru, kk}.
//
// Sources: the IAB taxonomy TSV in the shared folder (read in place, never copied) for ids, parents and
// English names; data/category-names.tsv beside this script for the Russian and Kazakh names.
//
// Run: node --import tsx apps/platform/scripts/build-categories.ts
// Env: SHARED_DIR (default: the shared folder next to the checkout), CATEGORIES_OUT (default:
// apps/platform/data/categories.json).

import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

export type CategoryTier = 1 | 2;

export interface Category {
  id: number;
  /** null for a tier-1 entry. */
  parent_id: number | null;
  tier: CategoryTier;
  name: { en: string; ru: string; kk: string };
}

export type CategoryDataErrorCode = 'taxonomy_malformed' | 'names_malformed' | 'names_mismatch';

/** Thrown when the sources cannot give a complete, consistent list. `ids` names the entries at fault. */
export class CategoryDataError extends Error {
  override readonly name = 'CategoryDataError';
  readonly code: CategoryDataErrorCode;
  readonly ids: readonly number[];
  /** Only for names_mismatch: tier-1/2 ids with no row in the names file. */
  readonly missing: readonly number[];
  /** Only for names_mismatch: ids whose ru or kk name is empty. */
  readonly empty: readonly number[];
  /** Only for names_mismatch: ids in the names file that are not tier-1/2 entries of the taxonomy. */
  readonly unknown: readonly number[];

  constructor(
    code: CategoryDataErrorCode,
    message: string,
    details: { ids?: number[]; missing?: number[]; empty?: number[]; unknown?: number[] } = {},
  ) {
    super(message);
    this.code = code;
    this.missing = details.missing ?? [];
    this.empty = details.empty ?? [];
    this.unknown = details.unknown ?? [];
    this.ids = details.ids ?? [...new Set([...this.missing, ...this.empty, ...this.unknown])].sort(byNumber);
  }
}

const TAXONOMY_HEADER = ['Unique ID', 'Parent ID', 'Name', 'Tier 1', 'Tier 2', 'Tier 3'] as const;
const NAMES_HEADER = ['id', 'ru', 'kk'] as const;

interface TaxonomyRow {
  id: number;
  parentColumn: string;
  name: string;
  tierPath: string[];
  line: number;
}

/**
 * Joins the IAB Ad Product Taxonomy 2.0 (TSV text) with the Russian/Kazakh names (TSV text, header
 * `id\tru\tkk`) into the tier-1 and tier-2 categories, sorted by id. Throws CategoryDataError when a
 * tier-1/2 id lacks a name, a name is empty, the names file holds an id that is not a tier-1/2 entry,
 * or either file is malformed.
 */
export function buildCategories(taxonomyTsv: string, namesTsv: string): Category[] {
  const rows = parseTaxonomy(taxonomyTsv);
  const names = parseNames(namesTsv);

  const byId = new Map(rows.map((row) => [row.id, row]));
  const categories: Category[] = [];
  for (const row of rows) {
    // The tier of a row is its deepest non-empty tier column; tier 3 is not offered.
    const tier = row.tierPath.length;
    if (tier !== 1 && tier !== 2) continue;
    categories.push({
      id: row.id,
      parent_id: tier === 1 ? null : tier2Parent(row, byId),
      tier,
      name: { en: row.name, ru: '', kk: '' },
    });
  }

  const offered = new Set(categories.map((category) => category.id));
  const missing = categories.filter((category) => !names.has(category.id)).map((category) => category.id);
  const unknown = [...names.keys()].filter((id) => !offered.has(id));
  const empty = [...names].filter(([, name]) => name.ru === '' || name.kk === '').map(([id]) => id);
  if (missing.length > 0 || unknown.length > 0 || empty.length > 0) {
    const parts = [
      missing.length > 0 ? `no ru/kk name for ${missing.sort(byNumber).join(', ')}` : '',
      empty.length > 0 ? `empty ru/kk name for ${empty.sort(byNumber).join(', ')}` : '',
      unknown.length > 0 ? `not a tier-1/2 taxonomy id: ${unknown.sort(byNumber).join(', ')}` : '',
    ].filter((part) => part !== '');
    throw new CategoryDataError('names_mismatch', `category names: ${parts.join('; ')}`, {
      missing,
      empty,
      unknown,
    });
  }

  for (const category of categories) {
    const translated = names.get(category.id);
    if (translated === undefined) throw new Error(`unreachable: ${category.id} checked above`);
    category.name = { en: category.name.en, ru: translated.ru, kk: translated.kk };
  }
  return categories.sort((a, b) => a.id - b.id);
}

/** The exact text of categories.json: 2-space JSON with a trailing newline. */
export function serializeCategories(categories: readonly Category[]): string {
  return `${JSON.stringify(categories, null, 2)}\n`;
}

export interface CategoryDataPaths {
  taxonomy: string;
  names: string;
  output: string;
}

/** Where the sources and the output live; SHARED_DIR and CATEGORIES_OUT override the defaults. */
export function categoryDataPaths(env: NodeJS.ProcessEnv = process.env): CategoryDataPaths {
  const sharedDir =
    nonEmpty(env.SHARED_DIR) ?? fileURLToPath(new URL('../../../../shared/', import.meta.url));
  return {
    taxonomy: fileURLToPath(
      new URL('data/iab-ad-product-taxonomy-2.0.tsv', pathToFileURL(withSlash(sharedDir))),
    ),
    names: fileURLToPath(new URL('../data/category-names.tsv', import.meta.url)),
    output:
      nonEmpty(env.CATEGORIES_OUT) ?? fileURLToPath(new URL('../data/categories.json', import.meta.url)),
  };
}

function tier2Parent(row: TaxonomyRow, byId: ReadonlyMap<number, TaxonomyRow>): number {
  const parentId = parseId(row.parentColumn);
  const parent = parentId === undefined ? undefined : byId.get(parentId);
  if (parentId === undefined || parent === undefined || parent.tierPath.length !== 1) {
    throw new CategoryDataError(
      'taxonomy_malformed',
      `taxonomy line ${row.line}: tier-2 entry ${row.id} has parent "${row.parentColumn}", not a tier-1 entry`,
      { ids: [row.id] },
    );
  }
  if (parent.tierPath[0] !== row.tierPath[0]) {
    throw new CategoryDataError(
      'taxonomy_malformed',
      `taxonomy line ${row.line}: entry ${row.id} is filed under "${row.tierPath[0]}" but its parent ${parentId} is "${parent.tierPath[0]}"`,
      { ids: [row.id] },
    );
  }
  return parentId;
}

function parseTaxonomy(text: string): TaxonomyRow[] {
  const lines = splitLines(text, 'taxonomy_malformed');
  const header = lines[0]?.split('\t').map((cell) => cell.trim());
  if (header === undefined || header.join('\t') !== TAXONOMY_HEADER.join('\t')) {
    throw new CategoryDataError(
      'taxonomy_malformed',
      `taxonomy header must be "${TAXONOMY_HEADER.join(' | ')}", got "${header?.join(' | ') ?? ''}"`,
    );
  }
  const rows: TaxonomyRow[] = [];
  const seen = new Set<number>();
  lines.slice(1).forEach((lineText, index) => {
    const line = index + 2;
    const cells = lineText.split('\t');
    if (cells.length !== TAXONOMY_HEADER.length) {
      throw new CategoryDataError(
        'taxonomy_malformed',
        `taxonomy line ${line}: ${cells.length} columns, expected ${TAXONOMY_HEADER.length}`,
      );
    }
    const [idCell = '', parentCell = '', nameCell = '', ...tierCells] = cells.map((cell) => cell.trim());
    const id = parseId(idCell);
    if (id === undefined) {
      throw new CategoryDataError('taxonomy_malformed', `taxonomy line ${line}: bad id "${idCell}"`);
    }
    if (seen.has(id)) {
      throw new CategoryDataError('taxonomy_malformed', `taxonomy line ${line}: id ${id} repeated`, {
        ids: [id],
      });
    }
    seen.add(id);
    const depth = deepestNonEmpty(tierCells);
    const tierPath = tierCells.slice(0, depth);
    if (depth === 0 || tierPath.some((cell) => cell === '') || nameCell === '') {
      throw new CategoryDataError(
        'taxonomy_malformed',
        `taxonomy line ${line}: entry ${id} has no name or a gap in its tier columns`,
        { ids: [id] },
      );
    }
    // A tier-1 row has no parent; the source gives row 1000 ("Ad Safety Risk") its own id as parent,
    // which we read as none. Any other parent on a tier-1 row is an error in the source.
    if (depth === 1 && parentCell !== '' && parseId(parentCell) !== id) {
      throw new CategoryDataError(
        'taxonomy_malformed',
        `taxonomy line ${line}: tier-1 entry ${id} has parent "${parentCell}"`,
        { ids: [id] },
      );
    }
    rows.push({ id, parentColumn: parentCell, name: nameCell, tierPath, line });
  });
  return rows;
}

function parseNames(text: string): Map<number, { ru: string; kk: string }> {
  const lines = splitLines(text, 'names_malformed');
  const header = lines[0]?.split('\t');
  if (header === undefined || header.join('\t') !== NAMES_HEADER.join('\t')) {
    throw new CategoryDataError('names_malformed', `names header must be "id\\tru\\tkk"`);
  }
  const names = new Map<number, { ru: string; kk: string }>();
  lines.slice(1).forEach((lineText, index) => {
    const line = index + 2;
    const cells = lineText.split('\t');
    const id = parseId(cells[0]?.trim() ?? '');
    if (id === undefined || cells.length !== NAMES_HEADER.length) {
      throw new CategoryDataError(
        'names_malformed',
        `names line ${line}: expected "id<TAB>ru<TAB>kk" with an integer id, got "${lineText}"`,
        id === undefined ? {} : { ids: [id] },
      );
    }
    if (names.has(id)) {
      throw new CategoryDataError('names_malformed', `names line ${line}: id ${id} repeated`, { ids: [id] });
    }
    names.set(id, { ru: cells[1]?.trim() ?? '', kk: cells[2]?.trim() ?? '' });
  });
  return names;
}

function splitLines(text: string, code: CategoryDataErrorCode): string[] {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  while (lines.length > 0 && lines[lines.length - 1]?.trim() === '') lines.pop();
  const blank = lines.findIndex((line) => line.trim() === '');
  if (blank !== -1) throw new CategoryDataError(code, `blank line ${blank + 1} inside the data`);
  return lines;
}

function deepestNonEmpty(cells: readonly string[]): number {
  for (let index = cells.length; index > 0; index -= 1) {
    if (cells[index - 1] !== '') return index;
  }
  return 0;
}

function parseId(text: string): number | undefined {
  if (!/^[1-9][0-9]{0,8}$/.test(text)) return undefined;
  return Number(text);
}

function byNumber(a: number, b: number): number {
  return a - b;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

function withSlash(path: string): string {
  return path.endsWith('/') ? path : `${path}/`;
}

function main(): void {
  const paths = categoryDataPaths();
  const categories = buildCategories(readFileSync(paths.taxonomy, 'utf8'), readFileSync(paths.names, 'utf8'));
  writeFileSync(paths.output, serializeCategories(categories));
  const tier1 = categories.filter((category) => category.tier === 1).length;
  console.log(
    `wrote ${paths.output}: ${categories.length} categories (${tier1} tier 1, ${categories.length - tier1} tier 2)`,
  );
}

function isDirectRun(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
}

if (isDirectRun()) {
  try {
    main();
  } catch (error) {
    console.error(`build-categories: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  }
}
