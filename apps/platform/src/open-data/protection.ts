/*
 * What a reader can work out about a withheld value (audit I finding 2). A daypart's table with its margins
 * publishes, besides its published values, the relations "a total is the sum of its row / column", and every value
 * is a play count, never negative. From those alone a withheld value lies in an interval; complementary suppression
 * must keep that interval wide, not only unknown (a rank condition lets 100 be read as 97..103).
 *
 * The interval is computed as a flow problem. Rows (districts, then the totals row) and columns (formats, then the
 * totals column) are nodes; every entry is an arc carrying its value: a cell or the daypart total from its row to its
 * column, a district or format total from its column to its row. "A total is the sum of its row / column" is then
 * exactly "what enters a node leaves it", and "never negative" is "a flow is at least 0". Published entries are
 * fixed flows; withheld entries are free arcs. A value t is possible for the withheld entry s exactly when the free
 * arcs can carry a flow that balances every node with s fixed at t: a feasibility question answered by one maximum
 * flow. The possible values form an interval (the set is convex), so checking its two ends checks all of it. The
 * arithmetic is integer throughout: no tolerance, the same answer on every machine.
 */

/**
 * The width a withheld value's interval must have on each side: at least `pct` percent of the value (rounded up) and
 * at least `minPlays` plays, down to 0 at most.
 */
export interface Protection {
  pct: number;
  minPlays: number;
}

/**
 * DESIGN.md section 7: "otherwise its status says why and the value is withheld". A value a reader can narrow to
 * 97..103 is not withheld in any useful sense, so every value the rules withhold must be able, as far as the published
 * values and totals and non-negativity tell, to be lower and higher than it is by max(10 % of it rounded up, 5 plays)
 * (lower: down to 0 at most). The 10 % is the p of the common p % rule of statistical disclosure control; the 5 plays
 * keep small values from a window of one or two plays. Stated with its numbers in the dictionary's disclosure text
 * (version 3); releases built before (version 2 and older) only kept withheld values from being worked out exactly,
 * and are not rebuilt.
 */
export const PROTECTION: Protection = { pct: 10, minPlays: 5 };

/** The entries of a table with margins, as disclosure.ts's MarginTable has them. */
export interface ProtectionTable {
  rows: number;
  cols: number;
  plays: number[][];
  status: string[][];
}

/** How far a withheld value must be able to move each way. */
export function requiredProtection(value: number, protection: Protection): { up: number; down: number } {
  const width = Math.max(Math.ceil((value * protection.pct) / 100), protection.minPlays);
  return { up: width, down: Math.min(width, value) };
}

/** +1 for an entry that is a cell or the daypart total (arc row → column), -1 for a district or format total. */
export function arcSign(table: ProtectionTable, r: number, c: number): 1 | -1 {
  return (r === table.rows) !== (c === table.cols) ? -1 : 1;
}

/**
 * True when the withheld entry (r, c) could, from the published values and totals and non-negativity, be `value`.
 * `withheld(r, c)` says which entries are withheld. A withheld entry whose value is 0 is taken as known: a reader
 * may know that a district has no screens of a format.
 */
export function couldBe(
  table: ProtectionTable,
  withheld: (r: number, c: number) => boolean,
  target: { r: number; c: number },
  value: number,
): boolean {
  const { rows, cols, plays } = table;
  const nodes = rows + 1 + cols + 1;
  const source = nodes;
  const sink = nodes + 1;
  // Excess of each node from the fixed flows: what enters minus what leaves.
  const excess = new Array<number>(nodes).fill(0);
  const free: [from: number, to: number][] = [];
  for (let r = 0; r <= rows; r += 1) {
    for (let c = 0; c <= cols; c += 1) {
      const rowNode = r;
      const colNode = rows + 1 + c;
      const [from, to] = arcSign(table, r, c) === 1 ? [rowNode, colNode] : [colNode, rowNode];
      const isTarget = r === target.r && c === target.c;
      const flow = isTarget ? value : plays[r]![c]!;
      if (isTarget || !withheld(r, c) || flow === 0) {
        excess[from]! -= flow;
        excess[to]! += flow;
      } else {
        free.push([from, to]);
      }
    }
  }
  if (value < 0) return false;
  let needed = 0;
  const graph = new FlowGraph(nodes + 2);
  for (let node = 0; node < nodes; node += 1) {
    const e = excess[node]!;
    if (e > 0) {
      graph.add(source, node, e);
      needed += e;
    } else if (e < 0) {
      graph.add(node, sink, -e);
    }
  }
  // A free arc can carry all there is to carry.
  for (const [from, to] of free) graph.add(from, to, needed);
  return graph.maxFlow(source, sink) === needed;
}

/** True when the withheld entry (r, c) can move at least `need` up and down. */
export function isProtected(
  table: ProtectionTable,
  withheld: (r: number, c: number) => boolean,
  target: { r: number; c: number },
  need: { up: number; down: number },
): boolean {
  const value = table.plays[target.r]![target.c]!;
  return (
    couldBe(table, withheld, target, value + need.up) && couldBe(table, withheld, target, value - need.down)
  );
}

/** A small maximum-flow graph (Edmonds–Karp: shortest augmenting paths), integer capacities. */
class FlowGraph {
  private readonly heads: number[];
  private readonly to: number[] = [];
  private readonly capacity: number[] = [];
  private readonly next: number[] = [];

  constructor(nodes: number) {
    this.heads = new Array<number>(nodes).fill(-1);
  }

  add(from: number, to: number, capacity: number): void {
    for (const [a, b, cap] of [
      [from, to, capacity],
      [to, from, 0],
    ] as const) {
      this.to.push(b);
      this.capacity.push(cap);
      this.next.push(this.heads[a]!);
      this.heads[a] = this.to.length - 1;
    }
  }

  maxFlow(source: number, sink: number): number {
    let total = 0;
    const via = new Array<number>(this.heads.length);
    for (;;) {
      via.fill(-1);
      const queue = [source];
      let reached = false;
      for (let i = 0; i < queue.length && !reached; i += 1) {
        const node = queue[i]!;
        for (let arc = this.heads[node]!; arc !== -1; arc = this.next[arc]!) {
          const to = this.to[arc]!;
          if (this.capacity[arc]! > 0 && via[to] === -1 && to !== source) {
            via[to] = arc;
            if (to === sink) {
              reached = true;
              break;
            }
            queue.push(to);
          }
        }
      }
      if (!reached) return total;
      let push = Number.POSITIVE_INFINITY;
      for (let node = sink; node !== source; node = this.to[via[node]! ^ 1]!) {
        push = Math.min(push, this.capacity[via[node]!]!);
      }
      for (let node = sink; node !== source; node = this.to[via[node]! ^ 1]!) {
        this.capacity[via[node]!]! -= push;
        this.capacity[via[node]! ^ 1]! += push;
      }
      total += push;
    }
  }
}
