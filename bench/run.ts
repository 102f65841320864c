/**
 * `npm run bench [-- name ...]`: runs every workspace benchmark (files exporting
 * `run(): Promise<Record<string, number>>`) one after another and prints their
 * figures. Benchmarks measure real work on real parts; they never run in `npm test`.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BENCHES: { name: string; file: string }[] = [
  { name: 'crypto', file: 'packages/crypto/bench/crypto.bench.ts' },
  { name: 'lookup', file: 'apps/platform/bench/lookup.bench.ts' },
  { name: 'pop', file: 'apps/platform/bench/pop.bench.ts' },
  { name: 'seal', file: 'apps/platform/bench/seal.bench.ts' },
  { name: 'fleet-page', file: 'apps/platform/bench/fleet-page.bench.ts' },
  { name: 'agent', file: 'apps/agent/bench/agent.bench.ts' },
  { name: 'fleet', file: 'hardware-sim/bench/fleet.bench.ts' },
  { name: 'years', file: 'hardware-sim/bench/years.bench.ts' },
];

const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const selected = BENCHES.filter((b) => wanted.length === 0 || wanted.includes(b.name));
if (selected.length === 0) {
  console.error(`no benchmark named ${wanted.join(', ')}; known: ${BENCHES.map((b) => b.name).join(', ')}`);
  process.exit(2);
}

let failed = false;
for (const bench of selected) {
  const path = `${ROOT}${bench.file}`;
  if (!existsSync(path)) {
    console.log(`\n## ${bench.name}: not present (${bench.file})`);
    continue;
  }
  console.log(`\n## ${bench.name} (${bench.file})`);
  const started = performance.now();
  try {
    const mod = (await import(pathToFileURL(path).href)) as { run: () => Promise<Record<string, number>> };
    const figures = await mod.run();
    const width = Math.max(...Object.keys(figures).map((k) => k.length));
    for (const [key, value] of Object.entries(figures)) {
      const shown = Number.isInteger(value) ? value.toLocaleString('en-US') : value.toFixed(3);
      console.log(`  ${key.padEnd(width)}  ${shown}`);
    }
    console.log(`  (${((performance.now() - started) / 1000).toFixed(1)} s)`);
  } catch (error) {
    failed = true;
    console.error(`  FAILED: ${(error as Error).stack ?? String(error)}`);
  }
}
process.exit(failed ? 1 : 0);
