import { arcSign, isProtected, PROTECTION, type Protection, requiredProtection } from './protection.js';

/** Statuses a value can have; only `published` and `no_plays` carry a number. */
export const STATUSES = [
  'published',
  'no_plays',
  'withheld_operators',
  'withheld_advertisers',
  'withheld_share',
  'withheld_complementary',
] as const;
export type CellStatus = (typeof STATUSES)[number];

/**
 * spec: "Meaning of disclosure: a published cell needs at least min_operators operators and min_advertisers
 * advertisers; one operator or one advertiser may hold at most max_party_share_pct percent of a cell's plays; a
 * month is released lag_months full months after its end."
 */
export interface DisclosureRules {
  minOperators: number;
  minAdvertisers: number;
  maxPartySharePct: number;
  lagMonths: number;
}

/**
 * The advertiser parties of billable plays. The spec's "advertiser" is judged twice, and a value must pass both:
 *  - `named`: the advertiser the submission names (advertisers.ts: the same BIN or the same normalised name is one
 *    advertiser, whoever submitted), so one advertiser reaching a cell through three operators or agencies is one
 *    party (audit I finding 1);
 *  - `submitter`: the organisation that submitted (an advertiser, an agency, an operator), so an agency's share of a
 *    cell is protected as well, as it was before: an agency's clients count once here.
 */
export interface AdvertiserParties {
  named: string;
  submitter: string;
}

function addTo(parties: Map<string, number>, id: string, plays: number): void {
  parties.set(id, (parties.get(id) ?? 0) + plays);
}

/** Plays of one value (a cell or a total), by the parties that hold them. */
export class PartyPlays {
  total = 0;
  readonly byOperator = new Map<string, number>();
  /** By named advertiser; null for slot plays: they have no advertiser. */
  readonly byAdvertiser: Map<string, number> | null;
  /** By submitting organisation; null for slot plays. */
  readonly bySubmitter: Map<string, number> | null;

  constructor(withAdvertisers: boolean) {
    this.byAdvertiser = withAdvertisers ? new Map() : null;
    this.bySubmitter = withAdvertisers ? new Map() : null;
  }

  add(operatorId: string, advertiser: AdvertiserParties | null, plays: number): void {
    this.total += plays;
    addTo(this.byOperator, operatorId, plays);
    if (advertiser !== null) {
      if (this.byAdvertiser) addTo(this.byAdvertiser, advertiser.named, plays);
      if (this.bySubmitter) addTo(this.bySubmitter, advertiser.submitter, plays);
    }
  }

  addAll(other: PartyPlays): void {
    this.total += other.total;
    for (const [id, plays] of other.byOperator) addTo(this.byOperator, id, plays);
    for (const [mine, theirs] of [
      [this.byAdvertiser, other.byAdvertiser],
      [this.bySubmitter, other.bySubmitter],
    ] as const) {
      if (mine && theirs) for (const [id, plays] of theirs) addTo(mine, id, plays);
    }
  }
}

/** "at most max_party_share_pct percent": a party exactly at the limit passes; integers only, no rounding. */
function aboveShare(parties: ReadonlyMap<string, number>, total: number, maxPct: number): boolean {
  for (const plays of parties.values()) if (plays * 100 > maxPct * total) return true;
  return false;
}

/**
 * The status of a value by the disclosure rules alone (before complementary suppression). A value without plays is
 * published as 0: it discloses nothing about any party. When several rules fail, the first in this order names the
 * status: too few operators, too few advertisers, one party above the share limit. The advertiser rules hold for
 * the named advertisers and for the submitting organisations alike (AdvertiserParties).
 */
export function primaryStatus(plays: PartyPlays, rules: DisclosureRules): CellStatus {
  if (plays.total === 0) return 'no_plays';
  if (plays.byOperator.size < rules.minOperators) return 'withheld_operators';
  const advertiserSides = [plays.byAdvertiser, plays.bySubmitter].filter((side) => side !== null);
  if (advertiserSides.some((side) => side.size < rules.minAdvertisers)) return 'withheld_advertisers';
  for (const parties of [plays.byOperator, ...advertiserSides]) {
    if (aboveShare(parties, plays.total, rules.maxPartySharePct)) return 'withheld_share';
  }
  return 'published';
}

export const isWithheld = (status: CellStatus): boolean => status !== 'published' && status !== 'no_plays';

/**
 * One daypart's table with its margins, as published: entries[r][c] for r < rows and c < cols are the cells
 * (district r × format c); column `cols` holds the district totals, row `rows` the format totals, and
 * entries[rows][cols] the daypart total. The published relations are exactly: each district total is the sum of its
 * row, each format total the sum of its column, and the daypart total the sum of the district totals and of the
 * format totals.
 */
export interface MarginTable {
  rows: number;
  cols: number;
  /** (rows + 1) × (cols + 1) plays. */
  plays: number[][];
  /** (rows + 1) × (cols + 1) statuses; complementary suppression changes them in place. */
  status: CellStatus[][];
}

/*
 * Complementary suppression with protection intervals (protection.ts computes the interval a reader can work out).
 * Each value the rules withheld (a primary value), largest first, is checked; while its interval is too narrow a
 * rectangle of entries through it is withheld: its row and another row, its column and another column (totals
 * included), so that the four corners can move together, two up and two down, without changing any published
 * value or total. A rectangle protects on its own when the corners that go down while the primary value goes up,
 * and those that go down with it, hold at least the protection needed; such rectangles come first (a smaller
 * complement pins the value near itself: audit I finding 2), then the one that protects most, then the one hiding
 * the fewest plays, the fewest new entries, cells before totals, then position. Withholding more never narrows
 * another value's interval, so one pass suffices. Complements are never values of 0 (a reader may know a district
 * has no screens of a format). Every withheld value then lies on a cycle of withheld entries, so none can be worked
 * out exactly either: every row and column holds none or at least two withheld values.
 */

interface Choice {
  r: number;
  c: number;
}

/** Applies complementary suppression in place; returns how many entries it withheld. */
export function suppressComplementary(table: MarginTable, protection: Protection = PROTECTION): number {
  const { rows, cols, plays, status } = table;
  const withheld = (r: number, c: number) => isWithheld(status[r]![c]!);
  const primaries: Choice[] = [];
  for (let r = 0; r <= rows; r += 1)
    for (let c = 0; c <= cols; c += 1) if (withheld(r, c)) primaries.push({ r, c });
  primaries.sort((a, b) => plays[b.r]![b.c]! - plays[a.r]![a.c]! || a.r - b.r || a.c - b.c);
  let added = 0;
  for (const primary of primaries) {
    const need = requiredProtection(plays[primary.r]![primary.c]!, protection);
    while (!isProtected(table, withheld, primary, need)) {
      const rectangle = bestRectangle(table, withheld, primary, need);
      if (rectangle === null) break;
      for (const corner of rectangle) {
        status[corner.r]![corner.c] = 'withheld_complementary';
        added += 1;
      }
    }
  }
  return added;
}

/** The rectangle to withhold next for `primary` (its new corners), or null when every rectangle is withheld. */
function bestRectangle(
  table: MarginTable,
  withheld: (r: number, c: number) => boolean,
  primary: Choice,
  need: { up: number; down: number },
): Choice[] | null {
  const { rows, cols, plays } = table;
  const value = plays[primary.r]![primary.c]!;
  const primarySign = arcSign(table, primary.r, primary.c);
  let best: { corners: Choice[]; key: number[] } | null = null;
  for (let r = 0; r <= rows; r += 1) {
    if (r === primary.r) continue;
    for (let c = 0; c <= cols; c += 1) {
      if (c === primary.c) continue;
      const corners = [
        { r: primary.r, c, opposite: false },
        { r, c: primary.c, opposite: false },
        { r, c, opposite: true },
      ];
      if (corners.some((corner) => plays[corner.r]![corner.c] === 0)) continue;
      const fresh = corners.filter((corner) => !withheld(corner.r, corner.c));
      if (fresh.length === 0) continue;
      // When the primary value goes up by t, a corner moves by sign * t.
      let up = Number.POSITIVE_INFINITY;
      let down = value;
      for (const corner of corners) {
        const sign = arcSign(table, corner.r, corner.c) * primarySign * (corner.opposite ? 1 : -1);
        const cornerValue = plays[corner.r]![corner.c]!;
        if (sign < 0) up = Math.min(up, cornerValue);
        else down = Math.min(down, cornerValue);
      }
      const alone = up >= need.up && down >= need.down;
      const reach = Math.min(up / need.up, need.down === 0 ? 1 : down / need.down);
      const key = [
        alone ? 0 : 1,
        alone ? 0 : -reach,
        fresh.reduce((sum, corner) => sum + plays[corner.r]![corner.c]!, 0),
        fresh.length,
        fresh.filter((corner) => corner.r === rows || corner.c === cols).length,
        r,
        c,
      ];
      if (best === null || compareKeys(key, best.key) < 0) {
        best = { corners: fresh.map(({ r: cr, c: cc }) => ({ r: cr, c: cc })), key };
      }
    }
  }
  return best?.corners ?? null;
}

function compareKeys(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i += 1) {
    const d = a[i]! - b[i]!;
    if (d !== 0) return d;
  }
  return 0;
}
