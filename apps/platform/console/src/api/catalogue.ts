import { ApiError, get } from './client.js';
import type { Category, Structure, StructureSet } from './types.js';

/**
 * Reference lists the pages share. Routes that have not landed on the platform yet answer `null` (the page then
 * says so) instead of failing.
 */
export async function optional<T>(load: Promise<T>): Promise<T | null> {
  try {
    return await load;
  } catch (error) {
    if (error instanceof ApiError && error.routeMissing) return null;
    throw error;
  }
}

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
 * (operators: their own; agencies and advertisers: every active one). null until that route exists.
 */
export function loadStructures(authority: boolean): Promise<Structure[] | null> {
  return optional(
    get<{ items: Structure[] }>(authority ? '/api/v1/console/structures' : '/api/v1/structures').then(
      (r) => r.items,
    ),
  );
}

/** The organisation's saved sets (GET /api/v1/structure-sets); null until that route exists. */
export function loadStructureSets(): Promise<StructureSet[] | null> {
  return optional(get<{ items: StructureSet[] }>('/api/v1/structure-sets').then((r) => r.items));
}

const RECENT_KEY = 'ooh-console-recent-submissions';

/** Submissions created in this browser: the list page's fallback while GET /api/v1/submissions is missing. */
export function rememberSubmission(id: string): void {
  const list = recentSubmissions().filter((x) => x !== id);
  window.localStorage.setItem(RECENT_KEY, JSON.stringify([id, ...list].slice(0, 50)));
}

export function recentSubmissions(): string[] {
  try {
    const parsed: unknown = JSON.parse(window.localStorage.getItem(RECENT_KEY) ?? '[]');
    return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}
