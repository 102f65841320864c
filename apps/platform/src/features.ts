import type { Feature } from './context.js';
import { adManagementFeature } from './ad-management/routes.js';
import { alertsFeature } from './alerts/routes.js';
import { approvalsFeature } from './approvals/routes.js';
import { authorityFeature } from './authority/routes.js';
import { categoriesFeature } from './categories/routes.js';
import { cityEventsFeature } from './city-events/routes.js';
import { clockFeature } from './clock/routes.js';
import { consoleWebFeature } from './console-web/routes.js';
import { cmsFeature } from './cms/routes.js';
import { devicesFeature } from './devices/routes.js';
import { identityFeature } from './identity/routes.js';
import { openDataFeature } from './open-data/routes.js';
import { ledgerFeature } from './ledger/routes.js';
import { ledgerTimestampFeature } from './ledger/timestamp-routes.js';
import { mediaFeature } from './media/feature.js';
import { popFeature } from './pop/routes.js';
import { publicPageFeature } from './public-page/routes.js';
import { reportsFeature } from './reports/routes.js';
import { sealsFeature } from './seals/routes.js';
import { sessionsFeature } from './sessions/routes.js';
import { structuresFeature } from './structures/routes.js';
import { submissionsFeature } from './submissions/routes.js';

export const FEATURES: Feature[] = [
  identityFeature,
  structuresFeature,
  cmsFeature,
  categoriesFeature,
  submissionsFeature,
  clockFeature,
  authorityFeature,
  approvalsFeature,
  mediaFeature,
  devicesFeature,
  popFeature,
  sealsFeature,
  ledgerFeature,
  ledgerTimestampFeature,
  openDataFeature,
  cityEventsFeature,
  alertsFeature,
  adManagementFeature,
  reportsFeature,
  sessionsFeature,
  consoleWebFeature,
  publicPageFeature,
];
