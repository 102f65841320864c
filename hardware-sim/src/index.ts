/**
 * @ooh/hardware-sim: simulated display hardware and whole fleets driving the real agent core against a real
 * platform (DESIGN.md §1), with faults, ground truth and reconciliation; also a CLI for field technicians.
 */
export { ChildHost } from './fleet/child-host.js';
export {
  Fleet,
  type FleetManifest,
  type FleetOptions,
  type FleetPlayer,
  type Placement,
  type ProvisionOptions,
  type VirtualTimeOptions,
} from './fleet/fleet.js';
export { LocalHost, type PlayerHost } from './fleet/host.js';
export {
  type AgentSettings,
  type CreativeSpec,
  DEFAULT_AGENT_SETTINGS,
  enrolPlayer,
  type IssuedCreative,
  type PlayerFiles,
  placeCreative,
} from './fleet/provision.js';
export {
  AGENT_LOOPS,
  type HardwareOp,
  type HardwareState,
  type PlayerSpec,
  SimPlayer,
} from './fleet/sim-player.js';
export { SimDisk, type SimDiskState } from './hardware/sim-disk.js';
export { type DisplayedPlay, SimDisplay } from './hardware/sim-display.js';
export { SimHardware, type SimHardwareOptions } from './hardware/sim-hardware.js';
export { type DropRule, type LinkName, NetworkSegment, type SegmentOptions } from './network/segment.js';
export { createProxyTls, type ProxyTls } from './network/tls-identity.js';
export {
  ConsoleClient,
  type DeviceEvent,
  type PlatformUrls,
  PlatformCallError,
  type PlayCountItem,
} from './platform/console-client.js';
export { pngCreative } from './platform/creatives.js';
export { type SpawnedPlatform, type SpawnOptions, spawnPlatform } from './platform/spawn.js';
export { loadScenario, parseDuration, parseScenario, ScenarioError, selectPlayers } from './scenario/load.js';
export { answeredPlaysSince, LogArchive } from './scenario/log-archive.js';
export {
  type DatabaseReport,
  type DatabaseSample,
  formatDatabaseReport,
  type PlatformAccess,
  type ScenarioProgress,
  type ScenarioResult,
  runScenario,
} from './scenario/run.js';
export { Scenario, ScenarioStep } from './scenario/schema.js';
export { type DomainIdle, type PlatformClock, type TimeDomain, TimeDriver } from './time/driver.js';
export { realTime, type TimeSource, VirtualClock } from './time/virtual-clock.js';
export { type AgentLogSummary, type LoggedPlay, readAgentLog } from './truth/agent-log.js';
export { GroundTruth } from './truth/ground-truth.js';
export { formatReconciliation, type Reconciliation, reconcile } from './truth/reconcile.js';
export { seededRandom, seedOf } from './util/random.js';
