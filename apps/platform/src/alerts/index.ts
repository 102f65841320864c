export { evaluateAlerts, type Evaluation, OUTAGE_GAP_MS } from './evaluate.js';
export { operatingWindowAt, type OperatingWindow } from './operating-hours.js';
export { openAlertsOf } from './fleet.js';
export { alertsFeature, createAlertsFeature, type AlertsFeatureOptions } from './routes.js';
export { ALERT_KINDS, type AlertKind, AlertList, AlertView } from './schema.js';
export {
  ALERT_SETTINGS_ENV,
  type AlertSettings,
  alertSettings,
  DEFAULT_ALERT_SETTINGS,
  parseOperatingHours,
} from './settings.js';
