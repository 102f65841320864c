/**
 * @ooh/agent: the player agent core (DESIGN.md §9). Plain Node, driven by the Electron shell on a real
 * player and by `hardware-sim` in tests; every instance is independent, so many can run in one process.
 */
export {
  AgentCore,
  type AgentOptions,
  type AgentStatus,
  type CertificateStatus,
  createAgent,
  readStatus,
} from './agent.js';
export { type Clock, CorrectedClock, realSleep, type Sleep, systemClock } from './clock.js';
export { type AgentConfig, CONFIG_DEFAULTS, loadConfig, parseConfig } from './config/config.js';
export { AgentError, type AgentErrorCode } from './errors.js';
export { createBoardHardware, type Hardware, type TamperState } from './hardware/hardware.js';
export { type EnrolmentInfo, prepareEnrolment } from './identity/enrolment.js';
export { openAgentDatabase } from './log/database.js';
export type { ScreenPower, WirePlayRecord, WireRecord, WireStatusRecord } from './log/records.js';
export { jsonLogger, type Logger, silentLogger } from './logger.js';
export { EnvelopeVerifier } from './media/envelope.js';
export type { MediaItem, MediaKind } from './media/library.js';
export type { Display, PlayReport, PlayRequest } from './playback/display.js';
export type { DisplayMode } from './playback/mode.js';
export type { RenewalCheck } from './renewal/renewal.js';
export {
  type DiskReport,
  type DiskState,
  DiskWatch,
  type FreeSpace,
  systemFreeSpace,
  type VolumeSpace,
} from './storage/disk.js';
export type { LastPrune, StorageStatus } from './storage/maintenance.js';
export type {
  SendOutcome,
  SetAsideStatus,
  ShippingAlert,
  ShippingStatus,
  StuckBatch,
} from './shipping/shipper.js';
