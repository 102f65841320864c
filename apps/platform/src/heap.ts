/*
 * How much V8's old generation may grow between two full garbage collections in a platform process
 * (docs/decisions.md, "The platform's heap"; apps/platform/docs/pop-ingestion.md, "Full garbage collections").
 *
 * Left to itself, V8 sizes the old generation of a server that keeps about 40 MB alive at about 1.5 times that and
 * starts marking it again a few hundred milliseconds after a collection ends: under proof-of-play load a platform
 * process ran a full collection about once a second, each stopping it for 10 to 25 ms, and the batches that waited
 * behind those pauses made most of the open loop's p99. `--heap-growing-percent=200` lets the old generation grow to
 * three times what is alive before the next one (at most `--max-old-space-size`, as always): 5 to 10 times fewer.
 *
 * It is a V8 flag, so it must be on the process's command line: Node does not take it from NODE_OPTIONS, and V8
 * reads it as the heap is set up. The primary of PLATFORM_WORKERS > 1 starts its workers with it (cluster.ts);
 * `npm run platform` starts the single process with it (package.json); other command lines add it themselves
 * (README, "Running the platform").
 */

export const HEAP_GROWING_PERCENT = 200;

const FLAG = /^--heap[-_]growing[-_]percent(=|$)/;

/** Whether these Node arguments set the old generation's growth already (the operator's value wins). */
export function setsHeapGrowth(execArgv: readonly string[]): boolean {
  return execArgv.some((arg) => FLAG.test(arg));
}

/** The Node arguments a platform process is started with: `execArgv`, and the heap's growth unless it is set. */
export function platformExecArgv(execArgv: readonly string[]): string[] {
  return setsHeapGrowth(execArgv)
    ? [...execArgv]
    : [...execArgv, `--heap-growing-percent=${HEAP_GROWING_PERCENT}`];
}
