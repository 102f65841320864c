/**
 * Reports (issue 17 item 4): plays per day against the declared plays, a campaign's proof-of-play report (JSON and
 * CSV), fleet health over time. See README.md in this folder.
 */
export { reportsFeature } from './routes.js';
