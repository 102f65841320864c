/**
 * Which structures a stacked chart names and which it groups as "Other" (no Preact here: the Node tests read it).
 * A chart whose "Other" is its largest segment hides the very structures that carry the plays (issue 25, item 4), so
 * structures are named, largest first, until the rest is no larger than the largest named one, or `most` are named;
 * the rest is one grey segment whose name says how many it holds.
 */
export interface NamedValues {
  name: string;
  values: readonly (number | null)[];
}

export interface GroupedSeries {
  name: string;
  values: number[];
  /** The grouped rest: drawn grey. */
  other?: true;
}

const total = (values: readonly (number | null)[]) => values.reduce<number>((n, v) => n + (v ?? 0), 0);

export function groupSeries(
  items: readonly NamedValues[],
  options: { length: number; least?: number; most?: number; other: (count: number) => string },
): GroupedSeries[] {
  const least = options.least ?? 7;
  const most = options.most ?? 12;
  const ranked = items
    .map((item) => ({ item, total: total(item.values) }))
    .filter((x) => x.total > 0)
    .sort((a, b) => b.total - a.total || a.item.name.localeCompare(b.item.name));
  let shown = Math.min(least, ranked.length);
  const restTotal = (from: number) => ranked.slice(from).reduce((n, x) => n + x.total, 0);
  while (shown < Math.min(most, ranked.length) && restTotal(shown) > (ranked[0]?.total ?? 0)) shown += 1;
  // A rest of one is named, not grouped.
  if (ranked.length === shown + 1) shown += 1;
  const series: GroupedSeries[] = ranked.slice(0, shown).map((x) => ({
    name: x.item.name,
    values: Array.from({ length: options.length }, (_, i) => x.item.values[i] ?? 0),
  }));
  const rest = ranked.slice(shown);
  if (rest.length > 0) {
    series.push({
      name: options.other(rest.length),
      values: Array.from({ length: options.length }, (_, i) =>
        rest.reduce((n, x) => n + (x.item.values[i] ?? 0), 0),
      ),
      other: true,
    });
  }
  return series;
}
