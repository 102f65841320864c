/**
 * Proof of play (DESIGN.md section 5): the agent channel (POST /s/v1/telemetry), the certificate channel
 * (POST /d/v1/telemetry) and the CMS channel (POST /api/v1/pop/batches), and what other features read.
 */
export { popFeature } from './routes.js';
export { cmsPlayerKey, devicePlayerKey } from './batch-context.js';
export { type PlayCountFilter, type PlayCountRow, type PopEvent, playCounts, popEvents } from './queries.js';
