/**
 * Child of the agent benchmark: runs the agent core alone in its process and reports its own memory as one
 * JSON line on stdout. Modes:
 *   idle <config>  — start, settle, sample RSS for two seconds;
 *   ship <config>  — start with a backlog already on disk, sample until the queue is empty.
 */
import { createAgent, loadConfig, silentLogger } from '../src/index.js';

const [mode, configPath] = process.argv.slice(2);
if (!mode || !configPath) throw new Error('usage: agent-bench-child <idle|ship> <config>');

const MB = 1024 * 1024;
let peak = { rss_mb: 0, heap_total_mb: 0, external_mb: 0 };
function sample(): void {
  const memory = process.memoryUsage();
  if (memory.rss / MB > peak.rss_mb) {
    peak = {
      rss_mb: memory.rss / MB,
      heap_total_mb: memory.heapTotal / MB,
      external_mb: memory.external / MB,
    };
  }
}
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const agent = await createAgent({ config: loadConfig(configPath), logger: silentLogger });
const startedAt = performance.now();
await agent.start();

if (mode === 'idle') {
  await pause(2000);
  for (let i = 0; i < 20; i++) {
    sample();
    await pause(100);
  }
  process.stdout.write(`${JSON.stringify(peak)}\n`);
} else {
  while (agent.log.stats().queueDepth > 0) {
    sample();
    await pause(100);
  }
  sample();
  const seconds = (performance.now() - startedAt) / 1000;
  const lastBatch = agent.shipper.status().lastSend?.batch_seq ?? 0;
  process.stdout.write(`${JSON.stringify({ ...peak, seconds, last_batch: lastBatch })}\n`);
}
await agent.close();
