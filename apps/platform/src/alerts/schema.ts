// The alert kinds and the alert as the console reads it are @ooh/protocol's (schemas/console.ts): one statement for
// the platform, which serializes through it, and the console, which reads its Static type.
export {
  ALERT_KINDS,
  ALERT_RESOLUTIONS,
  type AlertKind,
  AlertList,
  type AlertResolution,
  AlertView,
} from '@ooh/protocol';
