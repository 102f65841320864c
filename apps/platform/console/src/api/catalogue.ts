import type { Category } from '@ooh/protocol';
import { get } from './client.js';
import type { Structure, StructureSet } from './types.js';

/** Reference lists the pages share. */

let categories: Promise<Category[]> | null = null;
export function loadCategories(): Promise<Category[]> {
  categories ??= get<{ items: Category[] }>('/api/v1/categories').then((r) => r.items);
  categories.catch(() => {
    categories = null;
  });
  return categories;
}

/**
 * Structures the caller may choose: the authority reads the console list; submitters read GET /api/v1/structures
 * (operators: their own; agencies and advertisers: every active one).
 */
export function loadStructures(authority: boolean): Promise<Structure[]> {
  return get<{ items: Structure[] }>(authority ? '/api/v1/console/structures' : '/api/v1/structures').then(
    (r) => r.items,
  );
}

/** The organisation's saved sets (GET /api/v1/structure-sets). */
export function loadStructureSets(): Promise<StructureSet[]> {
  return get<{ items: StructureSet[] }>('/api/v1/structure-sets').then((r) => r.items);
}
