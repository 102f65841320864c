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
 * Complementary suppression. Read the table as a bipartite graph: one node per row (districts and the total row)
 * and per column (formats and the total column); every entry is the edge between its row and its column. Every
 * published relation is "the entries at one node sum to zero" once the totals are taken with a minus sign, so the
 * withheld values are fixed by the published ones exactly when a withheld edge is a bridge of the graph of withheld
 * edges: no cycle of withheld edges passes through it. Two steps, repeated until nothing changes:
 *  1. the rule of the issue: a row or column (a node) with exactly one withheld entry gets a second one;
 *  2. a withheld edge that is still a bridge (withheld entries in two groups joined by it alone) gets a cycle: an
 *     entry joining the two groups is withheld too.
 * After step 1 every node has zero or at least two withheld entries; after step 2 no withheld value can be
 * recovered by any sum or difference of published values.
 */

interface Choice {
  r: number;
  c: number;
}

/** Applies complementary suppression in place; returns how many entries it withheld. */
export function suppressComplementary(table: MarginTable): number {
  const { rows, cols, plays, status } = table;
  const withheld = (r: number, c: number) => isWithheld(status[r]![c]!);
  let added = 0;
  const withhold = (choice: Choice) => {
    status[choice.r]![choice.c] = 'withheld_complementary';
    added += 1;
  };
  const withheldInRow = (r: number) => {
    let n = 0;
    for (let c = 0; c <= cols; c += 1) if (withheld(r, c)) n += 1;
    return n;
  };
  const withheldInCol = (c: number) => {
    let n = 0;
    for (let r = 0; r <= rows; r += 1) if (withheld(r, c)) n += 1;
    return n;
  };
  // Smaller is better: an entry with plays before a zero (withholding a known zero hides nothing), then an entry
  // whose other line already has exactly one withheld value (one step mends two lines), then one whose other line
  // has two or more (mends one, harms none), then the smallest value, then a cell before a total, then position.
  const rank = (choice: Choice, crossWithheld: number): number[] => {
    const value = plays[choice.r]![choice.c]!;
    const isTotal = choice.r === rows || choice.c === cols ? 1 : 0;
    const cross = crossWithheld === 1 ? 0 : crossWithheld >= 2 ? 1 : 2;
    return [value > 0 ? 0 : 1, cross, value, isTotal, choice.r, choice.c];
  };
  const best = (candidates: { choice: Choice; cross: number }[]): Choice | null => {
    let chosen: { choice: Choice; key: number[] } | null = null;
    for (const candidate of candidates) {
      const key = rank(candidate.choice, candidate.cross);
      if (chosen === null || compareKeys(key, chosen.key) < 0) chosen = { choice: candidate.choice, key };
    }
    return chosen?.choice ?? null;
  };

  for (;;) {
    let changed = false;
    // Step 1: lines with a single withheld entry.
    for (let r = 0; r <= rows; r += 1) {
      if (withheldInRow(r) !== 1) continue;
      const candidates = [];
      for (let c = 0; c <= cols; c += 1)
        if (!withheld(r, c)) candidates.push({ choice: { r, c }, cross: withheldInCol(c) });
      const choice = best(candidates);
      if (choice) {
        withhold(choice);
        changed = true;
      }
    }
    for (let c = 0; c <= cols; c += 1) {
      if (withheldInCol(c) !== 1) continue;
      const candidates = [];
      for (let r = 0; r <= rows; r += 1)
        if (!withheld(r, c)) candidates.push({ choice: { r, c }, cross: withheldInRow(r) });
      const choice = best(candidates);
      if (choice) {
        withhold(choice);
        changed = true;
      }
    }
    if (changed) continue;
    // Step 2: withheld entries that are still bridges.
    const bridge = firstBridge(table);
    if (bridge === null) break;
    const [sideOfRow, sideOfCol] = sidesOfBridge(table, bridge);
    const candidates = [];
    for (let r = 0; r <= rows; r += 1) {
      for (let c = 0; c <= cols; c += 1) {
        if (withheld(r, c)) continue;
        const rowNode = r;
        const colNode = rows + 1 + c;
        const joins =
          (sideOfRow.has(rowNode) && sideOfCol.has(colNode)) ||
          (sideOfCol.has(rowNode) && sideOfRow.has(colNode));
        if (joins) candidates.push({ choice: { r, c }, cross: 2 });
      }
    }
    const choice = best(candidates);
    // A grid always has an entry joining the two sides (each side holds a row and a column node); none left means
    // every entry is withheld already.
    if (!choice) break;
    withhold(choice);
  }
  return added;
}

function compareKeys(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i += 1) {
    const d = a[i]! - b[i]!;
    if (d !== 0) return d;
  }
  return 0;
}

/** Adjacency of the graph of withheld entries: nodes 0..rows are rows, rows+1..rows+1+cols columns. */
function withheldGraph(table: MarginTable): { adjacency: Choice[][]; nodes: number } {
  const { rows, cols, status } = table;
  const nodes = rows + 1 + cols + 1;
  const adjacency: Choice[][] = Array.from({ length: nodes }, () => []);
  for (let r = 0; r <= rows; r += 1) {
    for (let c = 0; c <= cols; c += 1) {
      if (!isWithheld(status[r]![c]!)) continue;
      adjacency[r]!.push({ r, c });
      adjacency[rows + 1 + c]!.push({ r, c });
    }
  }
  return { adjacency, nodes };
}

/** The first withheld entry (in row-major order of discovery) that is a bridge, or null (Tarjan, iterative). */
function firstBridge(table: MarginTable): Choice | null {
  const { rows } = table;
  const { adjacency, nodes } = withheldGraph(table);
  const order = new Array<number>(nodes).fill(-1);
  const low = new Array<number>(nodes).fill(0);
  let counter = 0;
  const bridges: Choice[] = [];
  const other = (node: number, edge: Choice) => (node === edge.r ? rows + 1 + edge.c : edge.r);
  for (let root = 0; root < nodes; root += 1) {
    if (order[root] !== -1) continue;
    // Stack frames: node, the edge it was entered by, the next neighbour index.
    const stack: { node: number; via: Choice | null; next: number }[] = [{ node: root, via: null, next: 0 }];
    order[root] = low[root] = counter++;
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      const edges = adjacency[frame.node]!;
      if (frame.next < edges.length) {
        const edge = edges[frame.next++]!;
        if (frame.via && edge.r === frame.via.r && edge.c === frame.via.c) continue;
        const to = other(frame.node, edge);
        if (order[to] === -1) {
          order[to] = low[to] = counter++;
          stack.push({ node: to, via: edge, next: 0 });
        } else {
          low[frame.node] = Math.min(low[frame.node]!, order[to]!);
        }
      } else {
        stack.pop();
        const parent = stack[stack.length - 1];
        if (parent) {
          low[parent.node] = Math.min(low[parent.node]!, low[frame.node]!);
          if (low[frame.node]! > order[parent.node]!) bridges.push(frame.via!);
        }
      }
    }
  }
  if (bridges.length === 0) return null;
  bridges.sort((a, b) => a.r - b.r || a.c - b.c);
  return bridges[0]!;
}

/** The node sets on either side of a bridge: [the side of its row node, the side of its column node]. */
function sidesOfBridge(table: MarginTable, bridge: Choice): [Set<number>, Set<number>] {
  const { rows } = table;
  const { adjacency } = withheldGraph(table);
  const reach = (start: number): Set<number> => {
    const seen = new Set<number>([start]);
    const queue = [start];
    while (queue.length > 0) {
      const node = queue.pop()!;
      for (const edge of adjacency[node]!) {
        if (edge.r === bridge.r && edge.c === bridge.c) continue;
        const to = node === edge.r ? rows + 1 + edge.c : edge.r;
        if (!seen.has(to)) {
          seen.add(to);
          queue.push(to);
        }
      }
    }
    return seen;
  };
  return [reach(bridge.r), reach(rows + 1 + bridge.c)];
}
