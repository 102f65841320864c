import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';

// Issue 18 ("while you are in there"): the platform's modules import each other without a circle, type imports
// included (a circle of type imports is still a circle a reader has to follow), and the folder pairs that used to
// import both ways go one way only.

const SRC = path.join(import.meta.dirname, '..', '..', 'src');
const IMPORT = /^(?:import|export)\s[^;]*?\sfrom\s+'(\.[^']+)'/gms;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources(SRC)) {
    const targets: string[] = [];
    for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const target = path.resolve(path.dirname(file), match[1]!).replace(/\.js$/, '.ts');
      if (existsSync(target)) targets.push(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Strongly connected components of more than one module, or of one that imports itself (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(path.relative(SRC, w));
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('the platform import graph', () => {
  const graph = importGraph();

  test('reads the imports it should (the check itself works)', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get(path.join(SRC, 'platform.ts'))).toContain(path.join(SRC, 'features.ts'));
    // A made-up circle is found.
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => path.join(SRC, `${name}.ts`)) as [
      string,
      string,
      string,
      string,
    ];
    const made = new Map([
      [a, [b]],
      [b, [c]],
      [c, [a]],
      [d, [a]],
    ]);
    expect(circles(made)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  test('has no circle, type imports included', () => {
    expect(circles(graph)).toEqual([]);
  });

  test.each([
    ['seals', 'ledger'],
    ['approvals', 'submissions'],
  ])('%s imports %s, never the other way', (from, to) => {
    const backwards = [...graph]
      .filter(([file]) => path.relative(SRC, file).startsWith(`${to}/`))
      .flatMap(([file, targets]) =>
        targets
          .filter((t) => path.relative(SRC, t).startsWith(`${from}/`))
          .map((t) => `${path.relative(SRC, file)} -> ${path.relative(SRC, t)}`),
      );
    expect(backwards).toEqual([]);
  });
});
