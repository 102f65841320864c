import { readFileSync } from 'node:fs';
import type { Category } from '@ooh/protocol';

/**
 * The IAB Ad Product Taxonomy 2.0, tiers 1 and 2, with names in en, ru and kk.
 * Built from the shared TSV by scripts/build-categories.ts into data/categories.json.
 */
export const CATEGORIES_FILE = new URL('../../data/categories.json', import.meta.url);

export class CategoryCatalogue {
  private readonly byId: Map<number, Category>;

  constructor(readonly all: readonly Category[]) {
    this.byId = new Map(all.map((c) => [c.id, c]));
  }

  static load(file: URL = CATEGORIES_FILE): CategoryCatalogue {
    return new CategoryCatalogue(JSON.parse(readFileSync(file, 'utf8')) as Category[]);
  }

  get(id: number): Category | undefined {
    return this.byId.get(id);
  }
}

let shared: CategoryCatalogue | null = null;
export function categories(): CategoryCatalogue {
  shared ??= CategoryCatalogue.load();
  return shared;
}
