export {
  bandVerdict,
  checkDeclaredVsActual,
  DECLARED_VS_ACTUAL,
  type DeclaredVsActualEvent,
} from './declared-vs-actual.js';
export { EVENT_TYPES, type EventType } from './repository.js';
export { cityEventsFeature, createCityEventsFeature, type CityEventsFeatureOptions } from './routes.js';
export { deliverDueWebhooks, retryDelayMs, signatureOf } from './webhooks.js';
