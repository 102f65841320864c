/*
 * Who "one advertiser" is (spec, OpenDataDictionary: "min_advertisers advertisers; one operator or one advertiser
 * may hold at most max_party_share_pct percent of a cell's plays").
 *
 * A submission names the advertiser it is for: advertiser_name (required) and advertiser_bin (optional, 12 digits).
 * The organisation that submitted it may be that advertiser, an agency, or an operator submitting for its own
 * structures, so one advertiser can reach a cell through several submitters (audit I finding 1). Two submissions
 * name the same advertiser when they give the same BIN or the same name once normalised (advertiserNameKey), directly
 * or through other submissions of the month: the named advertisers are the connected groups of that relation. The BIN
 * is optional, so a name is compared across organisations too: one advertiser named by three agencies without a BIN
 * is still one. Joining two advertisers that are really different (the same name, different BINs) only withholds
 * more, never less.
 */

/**
 * Words that say a company's legal form, not who it is (English, Russian and Kazakh forms used in Kazakhstan):
 * "Coca-Cola LLP" and «ТОО Coca-Cola» are one advertiser.
 */
const LEGAL_FORMS = new Set([
  'llp',
  'llc',
  'ltd',
  'inc',
  'jsc',
  'plc',
  'тоо',
  'ао',
  'оао',
  'зао',
  'ооо',
  'ип',
  'жшс',
  'аақ',
  'ақ',
  'жк',
]);

/**
 * A name as compared: Unicode NFKC, lower case, letters and digits only, legal-form words dropped (unless nothing
 * else is left), the remaining words joined without spaces. "Coca-Cola Almaty LLP", "COCA COLA ALMATY" and
 * «ТОО "Coca-Cola Almaty"» are the same key.
 */
export function advertiserNameKey(name: string): string {
  const words =
    name
      .normalize('NFKC')
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? [];
  const meaningful = words.filter((word) => !LEGAL_FORMS.has(word));
  return (meaningful.length > 0 ? meaningful : words).join('');
}

/** A BIN as compared: its digits; null when it has none. */
export function advertiserBinKey(bin: string | null): string | null {
  const digits = bin?.replace(/\D/g, '') ?? '';
  return digits.length > 0 ? digits : null;
}

/** What a submission says of its advertiser. */
export interface NamedAdvertiser {
  advertiserName: string;
  advertiserBin: string | null;
}

/**
 * Groups the advertisers named by `submissions` (union-find over BINs and name keys) and answers, for each of them,
 * the key of its group. The key is the smallest member of the group, so it does not depend on the order of the input.
 */
export function namedAdvertiserGroups(
  submissions: Iterable<NamedAdvertiser>,
): (s: NamedAdvertiser) => string {
  const parent = new Map<string, string>();
  const find = (key: string): string => {
    let root = key;
    for (let next = parent.get(root); next !== undefined && next !== root; next = parent.get(root))
      root = next;
    // Path compression.
    for (let node = key; node !== root; ) {
      const next = parent.get(node)!;
      parent.set(node, root);
      node = next;
    }
    return root;
  };
  const add = (key: string) => {
    if (!parent.has(key)) parent.set(key, key);
  };
  const union = (a: string, b: string) => {
    const [ra, rb] = [find(a), find(b)];
    if (ra === rb) return;
    // The smaller key is the root, so the group's key is its smallest member whatever the order of the unions.
    if (ra < rb) parent.set(rb, ra);
    else parent.set(ra, rb);
  };
  const keysOf = (s: NamedAdvertiser) => {
    const bin = advertiserBinKey(s.advertiserBin);
    return { name: `name:${advertiserNameKey(s.advertiserName)}`, bin: bin === null ? null : `bin:${bin}` };
  };
  for (const submission of submissions) {
    const keys = keysOf(submission);
    add(keys.name);
    if (keys.bin !== null) {
      add(keys.bin);
      union(keys.name, keys.bin);
    }
  }
  return (s) => {
    const { name } = keysOf(s);
    if (!parent.has(name)) throw new Error('namedAdvertiserGroups: an advertiser not given to the grouping');
    return find(name);
  };
}
