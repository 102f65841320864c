/**
 * `npm start`: the platform on an embedded PostgreSQL in ./.data, bootstrapped,
 * with its four host URLs and an admin key printed. Ctrl-C stops everything.
 * (The simulated demo fleet joins here once the hardware simulator lands.)
 */
import { bootstrap } from '../apps/platform/src/bootstrap.js';
import { loadConfig } from '../apps/platform/src/config.js';
import { startPlatform } from '../apps/platform/src/platform.js';

const config = loadConfig({
  env: { DATA_DIR: '.data', LOG_LEVEL: 'warn', ...process.env },
});
const platform = await startPlatform({ config });
const { key } = await bootstrap(platform.ctx.db, platform.ctx.clock, { keyName: 'npm start demo admin' });

console.log(`
Outdoor advertising approval and proof-of-play platform is running (data in ${config.dataDir}).

  api      ${platform.urls.api}/api/v1      (console and submissions; Authorization: Bearer <key>)
  agents   ${platform.urls.agents}/s/v1     (signed agent telemetry)
  devices  ${platform.urls.devices}/d/v1    (mutual TLS: telemetry, certificate renewal)
  verify   ${platform.urls.verify}/v1      (public: seals, ledger, open data)

  admin API key (console:admin): ${key}

Try:  curl -s -H "Authorization: Bearer ${key}" ${platform.urls.api}/api/v1/console/organisations
Ctrl-C stops the platform and its database.
`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await platform.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
