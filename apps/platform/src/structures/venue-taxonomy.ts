import { readFileSync } from 'node:fs';

/**
 * The OpenOOH Venue Taxonomy 1.2 (version 1.2.1, Apache-2.0), shipped as data: data/openooh-venue-taxonomy-1.2.json,
 * extracted from the tables of github.com/openooh/venue-taxonomy specification-1.2.md (the file names the commit).
 * OpenOOH: "Each category, regardless of tier, has a unique identifier (ID) that is immutable" — structures store that
 * numeric id, never the deprecated string value.
 */
export const VENUE_TAXONOMY_FILE = new URL('../../data/openooh-venue-taxonomy-1.2.json', import.meta.url);

export interface Venue {
  id: number;
  parent_id: number | null;
  name: string;
  definition: string | null;
  string_value: string;
  deprecated: boolean;
}

interface VenueTaxonomyFile {
  taxonomy: string;
  version: string;
  source: string;
  venues: Venue[];
}

export class VenueTaxonomy {
  private readonly byId: Map<number, Venue>;

  constructor(
    readonly version: string,
    readonly source: string,
    readonly all: readonly Venue[],
  ) {
    this.byId = new Map(all.map((v) => [v.id, v]));
  }

  static load(file: URL = VENUE_TAXONOMY_FILE): VenueTaxonomy {
    const data = JSON.parse(readFileSync(file, 'utf8')) as VenueTaxonomyFile;
    return new VenueTaxonomy(data.version, data.source, data.venues);
  }

  get(id: number): Venue | undefined {
    return this.byId.get(id);
  }

  /** The venue and its ancestors, parent first: OpenOOH's `venuetypelist` for the id. */
  path(id: number): Venue[] {
    const out: Venue[] = [];
    for (let v = this.get(id); v; v = v.parent_id === null ? undefined : this.get(v.parent_id))
      out.unshift(v);
    return out;
  }
}

let shared: VenueTaxonomy | null = null;
export function venueTaxonomy(): VenueTaxonomy {
  shared ??= VenueTaxonomy.load();
  return shared;
}
