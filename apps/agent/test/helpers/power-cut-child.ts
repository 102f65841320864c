/**
 * Child process for the power-cut test: runs the real agent core against the test platform with a display
 * that reports plays as fast as the log takes them. Prints "started" once running.
 *   node --conditions=source --import tsx test/helpers/power-cut-child.ts <config> [--drain]
 * With --drain there is no display: it ships until nothing is queued, prints "drained" and exits.
 */
import { createAgent, loadConfig } from '../../src/index.js';
import { silentLogger } from '../../src/logger.js';
import type { Display, PlayReport } from '../../src/playback/display.js';

const [configPath, mode] = process.argv.slice(2);
if (!configPath) throw new Error('config path required');
const config = loadConfig(configPath);

/** Reports each play as the second that just ended, so the times stay in the past however fast it goes. */
const fastDisplay: Display = {
  async play(): Promise<PlayReport> {
    await new Promise((resolve) => setImmediate(resolve));
    const end = new Date();
    return { outcome: 'played', start: new Date(end.getTime() - 1000), end, interrupted: false };
  },
};

const agent = await createAgent({
  config,
  logger: silentLogger,
  ...(mode === '--drain' ? {} : { display: fastDisplay }),
});
await agent.start();
process.stdout.write('started\n');

if (mode === '--drain') {
  while (agent.log.stats().queueDepth > 0) await new Promise((resolve) => setTimeout(resolve, 50));
  await agent.close();
  process.stdout.write('drained\n');
}
